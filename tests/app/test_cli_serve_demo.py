"""`cxr serve --demo`: the service runs the phantom demo model (models/demo.py), never
builds one without --demo, and its screenshots show the current recipe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import models.demo as demo
from app.cli import main

pytestmark = pytest.mark.issue(11)


def test_cli_serve_demo_serves_the_demo_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, demo_checkpoint: Path
) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(demo, "ensure_demo_model", lambda storage: demo_checkpoint)

    def fake_run(app: Any, **kwargs: Any) -> None:
        seen["app"] = app

    import uvicorn

    monkeypatch.setattr(uvicorn, "run", fake_run)
    import app.main

    real_create = app.main.create_app

    def create(settings: Any, **kwargs: Any) -> Any:
        seen["settings"], seen["predictor"] = settings, kwargs.get("predictor")
        return real_create(settings, **kwargs)

    monkeypatch.setattr(app.main, "create_app", create)
    assert main(["serve", "--demo", "--storage-dir", str(tmp_path / "st")]) == 0
    assert seen["settings"].model == demo_checkpoint
    assert seen["predictor"].card["demo"] is True


def test_cli_serve_demo_with_model_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], demo_checkpoint: Path
) -> None:
    assert main(["serve", "--demo", "--model", str(demo_checkpoint)]) == 2
    err = capsys.readouterr().err
    assert "--demo" in err and err.count("\n") == 1


def test_cli_serve_without_demo_never_builds_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("demo model built without --demo")

    seen: dict[str, Any] = {}
    monkeypatch.setattr(demo, "ensure_demo_model", fail)
    import uvicorn

    import app.main

    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: None)
    real_create = app.main.create_app

    def create(settings: Any, **kwargs: Any) -> Any:
        seen["settings"], seen["predictor"] = settings, kwargs.get("predictor")
        return real_create(settings, **kwargs)

    monkeypatch.setattr(app.main, "create_app", create)
    assert main(["serve", "--storage-dir", str(tmp_path / "st")]) == 0
    assert seen["settings"].model is None and seen["predictor"] is None
    assert not demo.demo_model_path(tmp_path / "st").exists()


@pytest.mark.slow
def test_cli_serve_demo_end_to_end(tmp_path: Path) -> None:
    """The README's first command, in a real process: the page and an image prediction
    work and are flagged as a demo (the shipped model: nothing is trained first)."""
    import os
    import socket
    import subprocess
    import sys
    import time

    import httpx
    from service_fixtures import dx_bytes

    storage = tmp_path / "storage"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CXR_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    cmd = [sys.executable, "-m", "app.cli", "serve", "--demo", "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "--storage-dir", str(storage), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "cxr serve --demo did not become ready"
            time.sleep(0.25)
        page = httpx.get(url + "/")
        assert page.status_code == 200 and "DEMO MODEL" in page.text
        answer = httpx.post(url + "/v1/images/predict", files={"file": ("a.dcm", dx_bytes())})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["demo"] is True and body["notice"]
        assert body["model"]["name"] == demo.DEMO_MODEL_NAME
        assert answer.headers["x-cxr-demo-model"] == "true"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.issue(22)
def test_screenshots_show_the_current_demo_recipe() -> None:
    import json

    shots = Path(__file__).resolve().parents[2] / "app" / "web" / "screenshots"
    sidecar = json.loads((shots / "model.json").read_text())
    assert sidecar["recipe"] == demo.DEMO_RECIPE, "rerun benchmarks/web_screenshots.py"
    assert sidecar["recipe_sha256"] == demo.recipe_digest(), "rerun benchmarks/web_screenshots.py"
    assert {p.name for p in shots.glob("*.png")} >= {"predict.png", "batches.png"}
