"""The app factory's cross-cutting behaviour, through HTTP: local API docs, documented
error responses, specific body-decoding errors, UTC timestamps, no server paths in
error messages (issue 7 item 9)."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_fixtures import build_export, dx_bytes, wait_for_job

from app.errors import scrub_paths

# RFC 3339 date-time, as OpenAPI's `format: date-time` requires: an offset is mandatory.
RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]


@pytest.mark.issue(7)
@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_load_assets_from_the_service_not_a_cdn(client: TestClient, page: str) -> None:
    response = client.get(page)
    assert response.status_code == 200
    html = response.text
    assert "http://" not in html and "https://" not in html and "//cdn" not in html
    parser = _Links()
    parser.feed(html)
    assert parser.urls, "the page loads its scripts and styles"
    for url in parser.urls:
        assert url.startswith("/") and not url.startswith("//"), url
        asset = client.get(url)
        assert asset.status_code == 200 and len(asset.content) > 1000, url
    script = re.findall(r"""(?:url|spec-url)\s*[:=]\s*['"]([^'"]+)""", html)
    assert "/openapi.json" in script


@pytest.mark.issue(7)
def test_openapi_documents_the_errors_each_route_returns(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path, method in (
        ("/v1/reports/label", "post"),
        ("/v1/images/predict", "post"),
        ("/v1/batches", "post"),
    ):
        responses = paths[path][method]["responses"]
        for code in ("400", "401", "403", "413", "415", "422"):
            assert code in responses, (path, code)
            schema = responses[code]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorRead"}, (path, code)
    assert "404" in paths["/v1/batches"]["post"]["responses"]
    get_batch = paths["/v1/batches/{job_id}"]["get"]["responses"]
    assert "401" in get_batch and "415" not in get_batch  # no body, no 415
    assert "401" not in paths["/healthz"]["get"]["responses"]  # probes need no key


@pytest.mark.issue(7)
@pytest.mark.parametrize(
    ("path", "body", "offset"),
    [
        ("/v1/reports/label", b'{"text": "Small \xff effusion."}', 16),
        ("/v1/reports/label", b'{"text": "caf\xc3"}', 13),  # truncated 2-byte sequence
        ("/v1/batches", b'{"path": "ward\xe93"}', 14),
    ],
)
def test_invalid_utf8_body_names_the_byte_offset(
    client: TestClient, path: str, body: bytes, offset: int
) -> None:
    response = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    error = response.json()
    assert error["error"] == "InvalidBodyEncoding"
    assert f"byte offset {offset}" in error["detail"] and "UTF-8" in error["detail"]


@pytest.mark.issue(7)
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_report_not_sent_as_json_is_415(client: TestClient, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    response = client.post("/v1/reports/label", content=b'{"text": "x"}', headers=headers)
    assert response.status_code == 415
    assert response.json()["error"] == "UnsupportedMediaType"
    assert "application/json" in response.json()["detail"]


def _assert_utc(value: Any) -> None:
    from datetime import datetime

    assert isinstance(value, str) and RFC3339.match(value), value
    assert datetime.fromisoformat(value).utcoffset() == timedelta(0)


@pytest.mark.issue(7)
def test_timestamps_read_back_keep_their_time_zone(
    make_client: Callable[..., TestClient], tmp_path: Path
) -> None:
    build_export(tmp_path / "roots" / "ward")
    client = make_client(batch_roots=[tmp_path / "roots"])
    predicted = client.post(
        "/v1/images/predict", content=dx_bytes(), headers={"Content-Type": "application/dicom"}
    )
    assert predicted.status_code == 200, predicted.text
    # Read back from the database (SQLite stores no offset), not the object just made.
    again = client.get(f"/v1/predictions/{predicted.json()['id']}").json()
    _assert_utc(again["created_at"])
    job_id = client.post("/v1/batches", json={"path": "ward"}).json()["id"]
    job = wait_for_job(client, job_id)
    for field in ("created_at", "started_at", "finished_at"):
        _assert_utc(job[field])
    for listed in client.get("/v1/batches").json():
        _assert_utc(listed["created_at"])


def test_scrub_paths_replaces_server_folders() -> None:
    folders = {Path("/srv/cxr/storage"): "<storage>", Path("/exports"): "<batch root>"}
    detail = [
        "/srv/cxr/storage/objects/ab/x.csv: not UTF-8",
        {"msg": "'/exports/ward3/a.dcm' is bad"},
        3,
    ]
    assert scrub_paths(detail, folders) == [
        "<storage>/objects/ab/x.csv: not UTF-8",
        {"msg": "'<batch root>/ward3/a.dcm' is bad"},
        3,
    ]


@pytest.mark.issue(7)
def test_error_messages_never_show_server_storage_paths(
    make_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    import batch.job as runner  # builds the job: reads the stored reports CSV

    def unreadable(path: Path, **_: Any) -> Any:
        # the stored copy of the reports CSV vanished or went bad after submission
        raise OSError(f"cannot read {path}: Input/output error")

    monkeypatch.setattr(runner, "load_reports_csv", unreadable)
    client = make_client(model=False)
    storage = str(client.app.state.cxr.storage.root)  # type: ignore[attr-defined]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("a/IM1.dcm", dx_bytes())
    response = client.post(
        "/v1/batches",
        files={
            "file": ("export.zip", buffer.getvalue(), "application/zip"),
            "reports": ("reports.csv", b"AccessionNumber,Report\nA1,cafe\n", "text/csv"),
        },
    )
    assert response.status_code == 202, response.text
    job = wait_for_job(client, response.json()["id"])
    assert job["state"] == "failed" and job["error"]
    assert storage not in job["error"] and "<storage>" in job["error"], job["error"]
    results = client.get(f"/v1/batches/{job['id']}/results").text
    assert storage not in results
