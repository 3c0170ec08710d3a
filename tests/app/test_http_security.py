"""Hostile HTTP input, round two (issue 18): body limits by content type, no input echoed
in validation errors, the key checked before the body is read, Host allowlist and
cross-site refusal, bounded metric labels, security headers, a resolvable OpenAPI,
OPTIONS and `Allow`, the demo phantom rendered once per seed.

Through the ASGI app (TestClient), and through a real uvicorn server on a free loopback
port where the server matters (bodies left unread, the Host header)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import re
import socket
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_fixtures import LiveServer, dx_bytes

from app.main import create_app
from app.route_table import METHODS
from app.settings import Settings

pytestmark = pytest.mark.issue(18)

KEY = "hostile-http-test-key-0123"
MARK = "ZQXSECRETZQX"  # stands for patient data a client sent; must never come back
REPORT = {"text": "No acute disease."}


def _zip_bytes(size: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("IM0001", b"\0" * size)
    return buffer.getvalue()


# --- item 6: JSON bodies have their own small limit ---------------------------------------


def test_body_limit_json_is_small_and_files_keep_theirs(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(max_json_mb=0.005, batch_roots=[])  # 5 KiB of JSON
    big_path = {"path": "a" * 20_000}
    for path, body in (("/v1/batches", big_path), ("/v1/reports/label", {"text": "a" * 20_000})):
        response = client.post(path, json=body)
        assert response.status_code == 413, path
        assert response.json()["error"] == "PayloadTooLarge"
        assert "CXR_MAX_JSON_MB" in response.json()["detail"]
        assert "aaaa" not in response.text

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while reading
        data = json.dumps(big_path).encode()
        for i in range(0, len(data), 1024):
            yield data[i : i + 1024]

    chunked = client.post(
        "/v1/batches", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert chunked.status_code == 413 and "CXR_MAX_JSON_MB" in chunked.json()["detail"]
    # Other content types to a JSON-only operation have the JSON limit too.
    text = client.post("/v1/batches", content=b"x" * 20_000, headers={"Content-Type": "text/csv"})
    assert text.status_code == 413
    # A zip upload is not JSON: past 5 KiB, it is read and checked.
    zipped = client.post("/v1/batches", files={"file": ("x.zip", _zip_bytes(30_000))})
    assert zipped.status_code == 202, zipped.text
    # So is an image (CXR_MAX_UPLOAD_MB).
    image = dx_bytes()
    assert len(image) > 5 * 1024
    predicted = client.post(
        "/v1/images/predict", content=image, headers={"Content-Type": "application/dicom"}
    )
    assert predicted.status_code == 200


# --- item 6: validation errors never echo input ------------------------------------------


BATCH_BODIES = {
    "extra key in dicomweb": {"dicomweb": {MARK * 50: 1}},
    "literal push": {"dicomweb": {"push": [MARK]}},
    "pattern modality": {"dicomweb": {"modality": [MARK]}},
    "pattern study": {"dicomweb": {"study": [MARK]}},
    "date since": {"dicomweb": {"since": MARK}},
    "path too long": {"path": MARK * 400},
    "control character in path": {"path": MARK + "\x01"},
    "path of the wrong type": {"path": [MARK]},
    "both sources": {"path": MARK, "dicomweb": {}},
}
REPORT_BODIES = {
    "extra key": {"text": "No effusion.", MARK: 1},
    "long extra key": {"text": "No effusion.", MARK * 100: 1},
    "id pattern": {"text": "No effusion.", "id": MARK + "\x00"},
    "id too long": {"text": "No effusion.", "id": MARK * 20},
    "uid pattern": {"text": "No effusion.", "study_instance_uid": MARK},
    "explain type": {"text": "No effusion.", "explain": MARK},
    "batch item": {"reports": [{"text": "x", MARK: MARK}]},
}


@pytest.mark.parametrize("name", sorted(BATCH_BODIES) + sorted(REPORT_BODIES))
def test_validation_errors_never_echo_input(
    make_client: Callable[..., TestClient], tmp_path: Path, name: str
) -> None:
    (tmp_path / "roots").mkdir()
    client = make_client(model=False, batch_roots=[tmp_path / "roots"])
    path = "/v1/batches" if name in BATCH_BODIES else "/v1/reports/label"
    body = BATCH_BODIES.get(name) or REPORT_BODIES[name]
    response = client.post(path, json=body)
    assert response.status_code == 422, response.text
    assert MARK not in response.text
    assert '"input"' not in response.text and '"ctx"' not in response.text


def test_validation_errors_in_query_parameters_never_echo_input(client: TestClient) -> None:
    response = client.get("/v1/batches/x/results", params={"format": MARK})
    assert response.status_code == 422 and MARK not in response.text
    response = client.get("/v1/batches", params={"limit": MARK})
    assert response.status_code == 422 and MARK not in response.text


# --- item 7: the key is checked before any body byte is read -----------------------------


def test_api_key_checked_before_the_body_is_read(make_settings: Callable[..., Settings]) -> None:
    app = create_app(make_settings(api_keys=[KEY]))
    reads: list[int] = []

    async def receive() -> dict[str, Any]:
        reads.append(1)
        return {"type": "http.request", "body": b'{"text": "x"}', "more_body": False}

    def call(headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/v1/reports/label",
            "raw_path": b"/v1/reports/label",
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"127.0.0.1:8000"), *headers],
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8000),
        }
        asyncio.run(app(scope, receive, send))  # no lifespan: the middleware answers alone
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return sent[0]["status"], body

    json_type = (b"content-type", b"application/json")
    length = (b"content-length", str(2**30).encode())  # announces 1 GiB
    status, body = call([json_type, length])
    assert status == 401 and json.loads(body)["error"] == "Unauthorized"
    status, body = call([json_type, length, (b"x-api-key", b"wrong-key-wrong-key")])
    assert status == 403 and json.loads(body)["error"] == "Forbidden"
    assert reads == []


# --- items 7 and 9 on a real server --------------------------------------------------------


def _settings(root: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "storage_dir": root / "storage",
        "database_url": f"sqlite:///{root / 'live.db'}",
        "run_batch_jobs": False,
        "allowed_hosts": [],
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with LiveServer(_settings(tmp_path_factory.mktemp("keyed"), api_keys=[KEY])) as live:
        yield live


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("open")
    with LiveServer(_settings(root, allowed_hosts=["cxr.example.org"])) as live:
        yield live


def _answer_to_a_partial_body(port: int, headers: str, announced: int) -> int:
    """Announce `announced` bytes of JSON, send 64 KiB of them and wait: the status code.

    A server that waits for the whole body before answering times out here.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        head = (
            f"POST /v1/reports/label HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {announced}\r\n{headers}\r\n"
        )
        sock.sendall(head.encode() + b'{"text": "' + b"a" * 65536)
        status_line = sock.recv(64)  # socket.timeout: the server waited for the body
    return int(status_line.split()[1])


@pytest.mark.slow
def test_real_server_answers_before_reading_unauthenticated_or_oversized_bodies(
    keyed_server: LiveServer,
) -> None:
    # 99 MiB announced: before, read and parsed (6.5 s, +1.7 GB) before the 401.
    assert _answer_to_a_partial_body(keyed_server.port, "", 99 * 2**20) == 401
    key = f"X-API-Key: {KEY}\r\n"
    assert _answer_to_a_partial_body(keyed_server.port, key, 200 * 2**20) == 413
    status, _, _ = keyed_server.request("GET", "/healthz", {})
    assert status == 200


@pytest.mark.slow
@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:{port}", 200),
        ("localhost:{port}", 200),
        ("LOCALHOST.", 200),
        ("[::1]:{port}", 200),
        ("cxr.example.org", 200),  # CXR_ALLOWED_HOSTS
        ("attacker.example:{port}", 400),  # DNS rebinding: the attacker's name, our address
        ("127.0.0.1.attacker.example", 400),
        ("cxr.example.org.evil", 400),
    ],
)
def test_real_server_without_keys_serves_only_allowed_hosts(
    open_server: LiveServer, host: str, status: int
) -> None:
    got, headers, body = open_server.request(
        "GET", "/v1/batches", {"Host": host.format(port=open_server.port)}
    )
    assert got == status, body
    if status == 400:
        assert json.loads(body)["error"] == "InvalidHost"
        assert "attacker" not in body.decode()
    assert headers["x-content-type-options"] == "nosniff"


def test_host_allowlist_rules(make_client: Callable[..., TestClient]) -> None:
    keyed = make_client(model=False, api_keys=[KEY], allowed_hosts=[])
    # With keys and no CXR_ALLOWED_HOSTS, any Host: the key is what protects the API.
    assert keyed.get("/healthz", headers={"Host": "cxr.hospital.example"}).status_code == 200
    listed = make_client(model=False, api_keys=[KEY], allowed_hosts=["cxr.hospital.example"])
    assert listed.get("/healthz", headers={"Host": "cxr.hospital.example"}).status_code == 200
    assert listed.get("/healthz", headers={"Host": "other.example"}).status_code == 400
    anything = make_client(model=False, allowed_hosts=["*"])
    assert anything.get("/healthz", headers={"Host": "other.example"}).status_code == 200
    bound = make_client(model=False, allowed_hosts=[], host="192.0.2.7")
    assert bound.get("/healthz", headers={"Host": "192.0.2.7:8000"}).status_code == 200
    assert bound.get("/healthz", headers={"Host": "testserver"}).status_code == 400


@pytest.mark.slow
def test_real_server_refuses_a_cross_site_form_post(open_server: LiveServer) -> None:
    # What a page elsewhere sends with fetch(..., {mode: "no-cors", body: FormData}).
    boundary = "----cxrboundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.zip"\r\n'
            f"Content-Type: application/zip\r\n\r\n"
        ).encode()
        + _zip_bytes(10)
        + f"\r\n--{boundary}--\r\n".encode()
    )
    headers = {
        "Host": f"127.0.0.1:{open_server.port}",
        "Content-Type": f"multipart/form-data; boundary={boundary}",
        "Origin": "https://attacker.example",
        "Sec-Fetch-Site": "cross-site",
    }
    status, _, answer = open_server.request("POST", "/v1/batches", headers, body)
    assert status == 403 and json.loads(answer)["error"] == "CrossSiteRequest"
    status, _, listed = open_server.request("GET", "/v1/batches", {})
    assert status == 200 and json.loads(listed) == []  # nothing was queued


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 200),  # curl, scripts
        ({"Origin": "http://testserver"}, 200),  # the page itself
        ({"Origin": "http://testserver:80", "Sec-Fetch-Site": "same-origin"}, 200),
        ({"Origin": "https://attacker.example"}, 403),
        ({"Origin": "http://testserver.attacker.example"}, 403),
        ({"Origin": "http://testserver:8001"}, 403),  # another service on the machine
        ({"Origin": "null"}, 403),  # a sandboxed frame or a local file
        ({"Origin": "file://"}, 403),
        ({"Origin": "http://[::1"}, 403),
        ({"Sec-Fetch-Site": "cross-site"}, 403),
        ({"Sec-Fetch-Site": "same-origin"}, 200),
    ],
)
def test_state_changing_requests_refuse_other_origins(
    make_client: Callable[..., TestClient], headers: dict[str, str], status: int
) -> None:
    client = make_client(model=False)
    response = client.post("/v1/reports/label", json=REPORT, headers=headers)
    assert response.status_code == status, response.text
    # Reads stay allowed (a browser shows another site nothing without CORS).
    assert client.get("/v1/batches", headers=headers).status_code == 200


# --- item 10: bounded metric labels ---------------------------------------------------


def test_metrics_labels_are_bounded(client: TestClient) -> None:
    for i in range(300):
        client.request(f"M{i:05d}", "/healthz")
        client.get(f"/nope/{i}/x")
        client.get(f"/docs/assets/{i}/missing.js")
    client.delete("/v1/batches/unknown-id")
    text = client.get("/metrics").text
    labels = re.findall(r'cxr_http_requests_total\{method="([^"]*)",route="([^"]*)"', text)
    methods = {m for m, _ in labels}
    routes = {r for _, r in labels}
    assert methods <= {*METHODS, "OTHER"} and "OTHER" in methods
    assert routes <= {
        "/healthz",
        "/metrics",
        "unmatched",
        "/docs/assets/{path}",
        "/v1/batches/{job_id}",
    }, routes
    assert len(text) < 60_000
    assert "/nope/" not in text and "M00001" not in text


# --- item 17: headers, schema, OPTIONS, phantom ----------------------------------------


def test_security_headers_on_api_answers(make_client: Callable[..., TestClient]) -> None:
    client = make_client()
    prediction = client.post(
        "/v1/images/predict", content=dx_bytes(), headers={"Content-Type": "application/dicom"}
    ).json()
    for path in (
        "/v1/batches",
        "/v1/batches/unknown",
        f"/v1/predictions/{prediction['id']}",
        next(iter(prediction["heatmaps"].values())),
    ):
        response = client.get(path)
        assert response.headers["Cache-Control"] == "no-store", path
        assert response.headers["X-Content-Type-Options"] == "nosniff", path
        assert response.headers["Referrer-Policy"] == "no-referrer", path
    refused = make_client(model=False, api_keys=[KEY]).get("/v1/batches")
    assert refused.status_code == 401
    assert refused.headers["Cache-Control"] == "no-store"
    assert refused.headers["X-Content-Type-Options"] == "nosniff"
    assert "no-store" not in client.get("/healthz").headers.get("Cache-Control", "")


def _inline_script_hashes(html: str) -> set[str]:
    return {
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'"
        for s in re.findall(r"<script>(.*?)</script>", html, re.DOTALL)
    }


@pytest.mark.parametrize("page", ["/docs", "/redoc", "/docs/oauth2-redirect", "/"])
def test_html_pages_cannot_be_framed_and_run_only_their_own_scripts(
    client: TestClient, page: str
) -> None:
    response = client.get(page)
    assert response.status_code == 200
    assert response.headers["X-Frame-Options"] == "DENY"
    csp = response.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp
    script_src = re.search(r"script-src ([^;]*)", csp)
    assert script_src is not None
    assert "'unsafe-inline'" not in script_src.group(1)
    assert "'unsafe-eval'" not in script_src.group(1)
    for digest in _inline_script_hashes(response.text):
        assert digest in script_src.group(1), page


def _walk_refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _walk_refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _walk_refs(item)


def test_openapi_every_ref_resolves(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    refs = set(_walk_refs(schema))
    assert "#/components/schemas/DicomwebBatchSource" in refs
    for ref in refs:
        assert ref.startswith("#/"), ref
        node: Any = schema
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            assert isinstance(node, dict) and part in node, f"unresolvable {ref}"
            node = node[part]
    assert "$defs" not in json.dumps(schema)


def test_options_and_405_list_every_method_of_the_path(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for template, operations in paths.items():
        path = re.sub(r"\{[^}]+\}", "x", template)
        documented = {m.upper() for m in operations}
        response = client.options(path)
        assert response.status_code == 204, path
        allowed = {m.strip() for m in response.headers["Allow"].split(",")}
        assert allowed == documented | {"OPTIONS"}, path
        refused = client.request("PUT" if "PUT" not in documented else "PATCH", path)
        assert refused.status_code == 405, path
        assert {m.strip() for m in refused.headers["Allow"].split(",")} == allowed, path
    assert client.options("/v1/batches").headers["Allow"] == "GET, POST, OPTIONS"
    assert client.options("/no/such/path").status_code == 404


def test_an_unknown_id_comes_back_cut_in_the_404(make_client: Callable[..., TestClient]) -> None:
    client = make_client(model=False)
    for path in ("/v1/predictions/", "/v1/batches/"):
        response = client.get(path + "x" * 20_000)
        assert response.status_code == 404, path
        assert len(response.content) < 1_000 and "xxx..." in response.json()["detail"]


def test_head_answers_as_get_without_the_body(make_client: Callable[..., TestClient]) -> None:
    client = make_client(model=False, api_keys=[KEY])
    for path in ("/healthz", "/", "/openapi.json"):
        get, head = client.get(path), client.head(path)
        assert head.status_code == get.status_code == 200, path
        assert head.content == b"", path
        assert head.headers["content-length"] == str(len(get.content)), path
        assert head.headers["content-type"] == get.headers["content-type"], path
    assert client.head("/v1/batches").status_code == 401  # the key, as for GET
    assert client.head("/v1/batches", headers={"X-API-Key": KEY}).status_code == 200
    assert client.head("/v1/reports/label").status_code == 401
    refused = client.head("/v1/reports/label", headers={"X-API-Key": KEY})
    assert refused.status_code == 405 and "HEAD" not in refused.headers["Allow"]


def test_options_needs_the_key_on_the_api(make_client: Callable[..., TestClient]) -> None:
    client = make_client(model=False, api_keys=[KEY])
    assert client.options("/v1/batches").status_code == 401
    answer = client.options("/v1/batches", headers={"X-API-Key": KEY})
    assert answer.status_code == 204 and answer.headers["Allow"] == "GET, POST, OPTIONS"


def test_demo_phantom_is_rendered_once_per_seed(client: TestClient) -> None:
    from app.routes.web import PHANTOM_SEEDS, _phantom_png

    _phantom_png.cache_clear()
    first = client.get("/demo/phantom.png", params={"seed": 3})
    assert first.status_code == 200
    for seed in range(3 * PHANTOM_SEEDS):
        assert client.get("/demo/phantom.png", params={"seed": seed}).status_code == 200
    assert _phantom_png.cache_info().misses == PHANTOM_SEEDS  # not one per request
    again = client.get("/demo/phantom.png", params={"seed": 3 + PHANTOM_SEEDS})
    assert again.content == first.content
    assert client.get("/demo/phantom.png", params={"seed": -1}).status_code == 200


def test_settings_read_json_limit_and_hosts_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CXR_MAX_JSON_MB", "0.5")
    monkeypatch.setenv("CXR_ALLOWED_HOSTS", " cxr.example.org , [::1],")
    settings = Settings()
    assert settings.max_json_mb == 0.5
    assert settings.allowed_hosts == ["cxr.example.org", "[::1]"]
    monkeypatch.delenv("CXR_MAX_JSON_MB")
    monkeypatch.delenv("CXR_ALLOWED_HOSTS")
    assert Settings().max_json_mb == 2.0 and Settings().allowed_hosts == []
