"""The README's Orthanc set-up, for real: Debian's Orthanc with the shipped Lua hook
(batch/listen/orthanc/cxr-forward.lua) forwards new chest CR/DX, and nothing else, to a
listener. Skipped when /usr/sbin/Orthanc is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_fixtures import CT_STORAGE, build_dataset, chest_pixels, free_port, to_bytes

from batch.listen.listener import StoreListener

ORTHANC = shutil.which("Orthanc") or "/usr/sbin/Orthanc"
LUA = Path(__file__).resolve().parents[3] / "batch" / "listen" / "orthanc" / "cxr-forward.lua"

pytestmark = [
    pytest.mark.issue(10),
    pytest.mark.orthanc,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(ORTHANC).exists(), reason="Debian's orthanc not installed"),
]


@pytest.fixture
def listener(tmp_path: Path, demo_predictor: Any) -> Iterator[StoreListener]:
    from batch.labeling import PipelineLabeler

    running = StoreListener(
        demo_predictor,
        out=tmp_path / "listen.jsonl",
        ae_title="CXR",
        allow_ae=["ORTHANC"],
        labeler=PipelineLabeler(),
    )
    running.start("127.0.0.1", 0)
    yield running
    running.stop()


@pytest.fixture
def orthanc(tmp_path: Path, listener: StoreListener) -> Iterator[httpx.Client]:
    http_port = free_port()
    config = {  # the README's snippet, on loopback and free ports
        "Name": "cxr-lua-test",
        "StorageDirectory": str(tmp_path / "db"),
        "IndexDirectory": str(tmp_path / "db"),
        "HttpPort": http_port,
        "DicomPort": free_port(),
        "DicomAet": "ORTHANC",
        "RemoteAccessAllowed": False,
        "AuthenticationEnabled": False,
        "DicomModalities": {
            "cxr-listen": {"AET": "CXR", "Host": "127.0.0.1", "Port": listener.port}
        },
        "LuaScripts": [str(LUA)],
    }
    (tmp_path / "orthanc.json").write_text(json.dumps(config))
    log = (tmp_path / "orthanc.log").open("w")
    process = subprocess.Popen([ORTHANC, str(tmp_path / "orthanc.json")], stdout=log, stderr=log)
    client = httpx.Client(base_url=f"http://127.0.0.1:{http_port}", timeout=30)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                client.get("/system").raise_for_status()
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail((tmp_path / "orthanc.log").read_text()[-2000:])
                time.sleep(0.3)
        yield client
    finally:
        client.close()
        process.terminate()
        process.wait(30)
        log.close()


def test_orthanc_lua_hook_forwards_new_chest_radiographs_only(
    orthanc: httpx.Client, listener: StoreListener, tmp_path: Path
) -> None:
    chest = build_dataset(
        pixels=chest_pixels(64, 64), modality="CR", sop_class="1.2.840.10008.5.1.4.1.1.1",
        BodyPartExamined="CHEST",
    )  # fmt: skip
    dx = build_dataset(pixels=chest_pixels(64, 64, seed=2))  # DX, body part not given
    hand = build_dataset(pixels=chest_pixels(64, 64), BodyPartExamined="HAND")
    ct = build_dataset(pixels=chest_pixels(64, 64), modality="CT", sop_class=CT_STORAGE)
    for ds in (chest, dx, hand, ct):
        orthanc.post("/instances", content=to_bytes(ds)).raise_for_status()
    out = tmp_path / "listen.jsonl"
    deadline = time.monotonic() + 60
    lines: list[dict[str, Any]] = []
    while time.monotonic() < deadline and len(lines) < 2:
        time.sleep(0.3)
        if out.exists():
            lines = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    time.sleep(1.0)  # would a third (wrong) instance follow?
    assert listener.wait_idle(30)
    lines = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    assert sorted(line["path"] for line in lines) == sorted(
        [chest.SOPInstanceUID, dx.SOPInstanceUID]
    )
    assert all(line["calling_ae"] == "ORTHANC" and line["state"] == "done" for line in lines)
