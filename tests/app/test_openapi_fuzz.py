"""Schemathesis against the app's own OpenAPI schema (issue 7: must run in CI).

A bounded run: every operation gets a few generated requests (valid and invalid),
and every response must be no 5xx, a documented status code, a documented content
type and a body that matches the documented schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings

schemathesis = pytest.importorskip("schemathesis")
from schemathesis import checks  # noqa: E402

from app.main import create_app  # noqa: E402
from app.settings import Settings  # noqa: E402

MAX_EXAMPLES = 25
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
    checks.response_headers_conformance,
    checks.unsupported_method,  # 405 with Allow (issue 18 item 17)
    checks.allow_header_conformance,  # OPTIONS' Allow lists the documented methods
]


@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory: pytest.TempPathFactory, demo_predictor: Any) -> Iterator[FastAPI]:
    storage = tmp_path_factory.mktemp("fuzz")
    (storage / "roots" / "export").mkdir(parents=True)
    app = create_app(
        Settings(
            storage_dir=storage / "storage",
            batch_roots=[storage / "roots"],
            run_batch_jobs=False,  # jobs are queued; nothing runs in the background
            inference_max_wait_ms=1.0,
            allowed_hosts=["testserver", "localhost"],  # the Host names the clients send
            # The schema's `dicomweb` example now resolves (issue 18): a PACS is configured
            # so such jobs are queued (202), not refused (503); none runs, nothing connects.
            dicomweb_url="http://127.0.0.1:9/dicom-web",
        ),
        predictor=demo_predictor,
    )
    with TestClient(app):  # runs the lifespan: database, labeler, model
        yield app


@pytest.fixture(scope="module")
def api_schema(fuzz_app: FastAPI) -> Any:
    return schemathesis.openapi.from_asgi("/openapi.json", fuzz_app)


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.slow
@pytest.mark.issue(7)
@schema.parametrize()  # type: ignore[untyped-decorator]
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_openapi_fuzz_conforms(case: Any) -> None:
    case.call_and_validate(checks=CHECKS)
