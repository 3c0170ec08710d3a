"""A real `cxr serve` killed with SIGKILL mid-job, twice, then restarted: every file
of the export is counted exactly once (what held in issue 7; kept with the in-flight
attempt counting added for files that kill the process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from service_fixtures import chest_pixels, dx_bytes, free_port

pytestmark = [pytest.mark.slow, pytest.mark.issue(7)]


def _get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        body = response.read().decode()
    return json.loads(body) if not path.endswith("/results") else body


def _start(port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            _get(port, "/healthz")
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("cxr serve did not start")


def test_batch_job_counts_every_file_once_after_sigkills_mid_job(tmp_path: Path) -> None:
    export = tmp_path / "roots" / "export"
    export.mkdir(parents=True)
    # Without a model a file takes ~30 ms: 120 files could be through before the first
    # poll after a restart, leaving nothing to kill. 360 keep the job running past both kills.
    n_files = 360
    for i in range(n_files):
        (export / f"IM{i:04d}.dcm").write_bytes(dx_bytes(pixels=chest_pixels(seed=i % 4)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CXR_")}
    env.update(
        PYTHONPATH=str(Path.cwd()),
        CXR_STORAGE_DIR=str(tmp_path / "storage"),
        CXR_BATCH_ROOTS=str(tmp_path / "roots"),
        CXR_BATCH_CHUNK_SIZE="4",
    )
    port = free_port()
    proc = _start(port, env)
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/batches",
        data=json.dumps({"path": "export"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        job_id = json.loads(response.read())["id"]
    for _ in range(2):  # the issue killed three times; two keep the test near 35 s
        # Kill once 20 more files are through since this start: past the files retried
        # alone after the last kill (a file in flight at two kills in a row is given up).
        first = _get(port, f"/v1/batches/{job_id}")
        target = first["done"] + first["failed"] + 20
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = _get(port, f"/v1/batches/{job_id}")
            if status["done"] + status["failed"] >= target or status["state"] in ("done", "failed"):
                break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # mid-job, mid-chunk most likely
        proc.wait(10)
        assert status["pending"] > 0, f"the job ended before the kill: nothing tested ({status})"
        proc = _start(port, env)
    try:
        deadline = time.monotonic() + 120
        while (status := _get(port, f"/v1/batches/{job_id}"))["state"] == "running":
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
        assert status["state"] == "done" and status["pending"] == 0
        assert status["total"] == n_files and status["done"] + status["failed"] == n_files
        lines = [json.loads(x) for x in _get(port, f"/v1/batches/{job_id}/results").splitlines()]
        assert sorted(line["path"] for line in lines) == sorted(
            f"IM{i:04d}.dcm" for i in range(n_files)
        )
        assert all(line["state"] == "done" for line in lines), [
            line for line in lines if line["state"] != "done"
        ]
    finally:
        proc.terminate()
        proc.wait(20)
