"""`.ci/run`'s services (.ci/services.sh): what a run starts it stops when it ends, also
when its tests fail; PostgreSQL listens on 127.0.0.1 only, Orthanc (which cannot choose its
address) stores nothing from an unknown modality; ports come from the environment; the run's
private network namespace has loopback as its only interface.

Run by `.ci/run` (which sets CXR_TEST_CI_SERVICES): it starts a PostgreSQL and an Orthanc of
its own, on free ports, through the same functions and trap as `.ci/run`, inside a bash that
then fails, and checks that both are gone afterwards.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.issue(44),
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("CXR_TEST_CI_SERVICES"), reason="run by .ci/run (CXR_TEST_CI_SERVICES)"
    ),
]

SCRIPT = """
source .ci/services.sh
trap stop_services EXIT
start_services
echo "PG_DATA=${CXR_CI_PG_DATA:-}"
echo "ORTHANC_PID=${CXR_CI_ORTHANC_PID:-}"
echo "ORTHANC_ROOT=${CXR_CI_ORTHANC_ROOT:-}"
echo "URL=${CXR_TEST_POSTGRES_URL:-}"
ss -ltnH "sport = :$CXR_PG_PORT" | awk '{print "PG_LISTEN=" $4}'
if [[ -n "${CXR_CI_ORTHANC_PID:-}" ]]; then python - "$CXR_ORTHANC_DICOM_PORT" <<'PY'
import sys
sys.path.insert(0, "tests")
from dicom_factory import build_dataset
from pynetdicom import AE
ds = build_dataset()
ae = AE(ae_title="INTRUDER")  # a modality Orthanc does not know
ae.add_requested_context(ds.SOPClassUID, ds.file_meta.TransferSyntaxUID)
assoc = ae.associate("127.0.0.1", int(sys.argv[1]), ae_title="ORTHANC")
status = assoc.send_c_store(ds) if assoc.is_established else None
print("STORE=" + (f"{status.Status:#06x}" if status and "Status" in status else "refused"))
if assoc.is_established:
    assoc.release()
PY
fi
exit 3  # the tests failed
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_ci_services_stopped_after_a_failing_run_and_on_loopback() -> None:
    if shutil.which("ss") is None:
        pytest.skip("no ss (iproute2) to see the listening addresses")
    ports = {
        "CXR_PG_PORT": _free_port(),
        "CXR_ORTHANC_HTTP_PORT": _free_port(),
        "CXR_ORTHANC_DICOM_PORT": _free_port(),
        "CXR_LISTEN_PORT": _free_port(),
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("CXR_CI_")}
    env |= {k: str(v) for k, v in ports.items()}
    run = subprocess.run(
        ["bash", "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 3, run.stderr  # the run's own status, kept by the trap
    seen = dict(line.split("=", 1) for line in run.stdout.splitlines() if "=" in line)
    assert seen["PG_DATA"], f"PostgreSQL did not start:\n{run.stderr}"
    assert f"127.0.0.1:{ports['CXR_PG_PORT']}/" in seen["URL"]  # the port asked for
    assert {v for k, v in seen.items() if k == "PG_LISTEN"} <= {f"127.0.0.1:{ports['CXR_PG_PORT']}"}
    assert "ci: stopped PostgreSQL" in run.stderr
    assert not Path(seen["PG_DATA"]).exists()
    if seen["ORTHANC_PID"]:
        assert seen["STORE"] != "0x0000", "Orthanc stored an unknown modality's image"
        assert "ci: stopped Orthanc" in run.stderr
        assert not Path(f"/proc/{seen['ORTHANC_PID']}").exists()
        assert not Path(seen["ORTHANC_ROOT"]).exists()
    for port in ports.values():
        assert not _answers(port), f"something still listens on 127.0.0.1:{port}"


def test_ci_services_private_namespace_has_only_loopback() -> None:
    if not os.environ.get("CXR_CI_IN_NETNS"):
        pytest.skip("this .ci/run had no private network namespace (CXR_CI_NETNS=0, or refused)")
    lines = Path("/proc/net/dev").read_text().splitlines()[2:]  # two header lines
    interfaces = {line.split(":", 1)[0].strip() for line in lines}
    assert interfaces == {"lo"}, interfaces


def test_ci_services_namespace_prefix_brings_up_a_loopback_only_namespace() -> None:
    probe = subprocess.run(
        ["bash", "-c", "source .ci/services.sh && private_netns"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if probe.returncode != 0:
        pytest.skip("this machine refuses a private network namespace (.ci/run says so too)")
    prefix = probe.stdout.split()
    assert prefix[0] == "unshare" and "--net" in prefix
    inside = subprocess.run(
        [*prefix, "bash", "-c", "ip link set lo up && cat /proc/net/dev"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert inside.returncode == 0, inside.stderr
    interfaces = {line.split(":", 1)[0].strip() for line in inside.stdout.splitlines()[2:]}
    assert interfaces == {"lo"}
