"""The service's DICOMweb jobs against a hostile DICOMweb server (issue 18, items 2, 3
and 14), over real loopback HTTP: a failed search fails the job, one bad series or
instance fails alone, and DELETE, shutdown and SIGTERM cut a fetch that is stuck. The
client and `cxr batch --dicomweb` against the same server: tests/batch/pacs/."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from hostile_pacs import HostileDicomweb, chest_instances, with_bad_series
from service_fixtures import free_port, wait_for_job

from app.main import create_app
from app.settings import Settings

pytestmark = pytest.mark.issue(18)

WADO = r"/instances/[^/]+$"
MiB = 2**20


# --- the service: failed jobs, DELETE and stop with a fetch stuck --------------------------


MakeSettings = Callable[..., Settings]  # the conftest's make_settings (SQLite, or PostgreSQL)


def test_service_dicomweb_search_redirect_fails_the_job(make_settings: MakeSettings) -> None:
    with HostileDicomweb(chest_instances(1)) as pacs:
        pacs.on(r"/studies$", pacs.redirect("http://evil.example/dicom-web/studies"))
        with TestClient(create_app(make_settings(dicomweb_url=pacs.url))) as client:
            response = client.post("/v1/batches", json={"dicomweb": {}})
            job = wait_for_job(client, response.json()["id"], timeout=20)
    assert job["state"] == "failed" and job["total"] == 0
    assert "HTTP 302" in job["error"] and "redirects are not followed" in job["error"]


def test_service_dicomweb_bad_series_and_big_instance_fail_alone(
    make_settings: MakeSettings,
) -> None:
    good = chest_instances(2)
    with with_bad_series(good) as pacs:
        big = pacs.datasets[0].SOPInstanceUID
        pacs.on(rf"/instances/{big}$", pacs.huge(8 * MiB, declare_length=False))
        settings = make_settings(dicomweb_url=pacs.url, dicomweb_max_instance_mb=1.0)
        with TestClient(create_app(settings)) as client:
            response = client.post("/v1/batches", json={"dicomweb": {}})
            job = wait_for_job(client, response.json()["id"], timeout=20)
    assert job["state"] == "done"
    assert (job["total"], job["done"], job["failed"]) == (4, 1, 3)


def _job_stuck_on_a_fetch(client: TestClient, pacs: HostileDicomweb) -> str:
    job_id: str = client.post("/v1/batches", json={"dicomweb": {}}).json()["id"]
    deadline = time.monotonic() + 20
    while not any("/instances/" in r for r in pacs.requests):  # the WADO fetch began
        assert time.monotonic() < deadline, pacs.requests
        time.sleep(0.05)
    time.sleep(0.3)
    return job_id


def test_service_delete_of_a_stuck_job_frees_the_worker(make_settings: MakeSettings) -> None:
    with HostileDicomweb(chest_instances(1)) as pacs:
        pacs.on(WADO, pacs.slow(0.5, body=b"x" * 10**6))  # would take 6 days
        settings = make_settings(dicomweb_url=pacs.url, dicomweb_timeout_s=600.0)
        with TestClient(create_app(settings)) as client:
            stuck = _job_stuck_on_a_fetch(client, pacs)
            later = client.post("/v1/batches", json={"dicomweb": {"modality": ["CT"]}}).json()
            assert client.get(f"/v1/batches/{later['id']}").json()["state"] == "queued"
            began = time.monotonic()
            assert client.delete(f"/v1/batches/{stuck}").status_code == 204
            job = wait_for_job(client, later["id"], timeout=10)
            assert job["state"] == "done" and time.monotonic() - began < 3.0
            assert client.get(f"/v1/batches/{stuck}").status_code == 404


def test_service_stop_cuts_a_stuck_fetch_and_the_job_resumes(
    make_settings: MakeSettings,
) -> None:
    data = chest_instances(1)
    with HostileDicomweb(data) as pacs:
        pacs.on(WADO, pacs.slow(0.5, body=b"x" * 10**6))
        settings = make_settings(dicomweb_url=pacs.url, dicomweb_timeout_s=600.0)
        client = TestClient(create_app(settings))
        client.__enter__()
        job_id = _job_stuck_on_a_fetch(client, pacs)
        began = time.monotonic()
        client.__exit__(None, None, None)  # the lifespan's shutdown: runner.stop()
        assert time.monotonic() - began < 3.0

        pacs.rules.clear()  # the PACS is well again: the file was left pending, not failed
        with TestClient(create_app(settings)) as client:
            job = wait_for_job(client, job_id, timeout=20)
    assert job["state"] == "done" and (job["done"], job["failed"]) == (1, 0)


@pytest.mark.slow
def test_cxr_serve_exits_on_sigterm_with_a_fetch_stuck(tmp_path: Path) -> None:
    with HostileDicomweb(chest_instances(1)) as pacs:
        pacs.on(WADO, pacs.slow(0.5, body=b"x" * 10**6))
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CXR_")}
        env |= {
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            "CXR_STORAGE_DIR": str(tmp_path / "storage"),
            "CXR_DICOMWEB_URL": pacs.url,
            "CXR_DICOMWEB_TIMEOUT_S": "600",
        }
        server = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port),
             "--log-level", "warning"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                    break
                except httpx.HTTPError:
                    assert time.monotonic() < deadline, "cxr serve did not start"
                    time.sleep(0.2)
            httpx.post(f"http://127.0.0.1:{port}/v1/batches", json={"dicomweb": {}})
            deadline = time.monotonic() + 20
            while not any("/instances/" in r for r in pacs.requests):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            began = time.monotonic()
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=15)
            assert time.monotonic() - began < 5.0
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
