"""Fixtures for service tests: settings on a temp folder, the database (SQLite, and
PostgreSQL when CXR_TEST_POSTGRES_URL is set), and TestClients running the real app
(lifespan included) with the demo model of tests/conftest.py. Builders live in
service_fixtures.py."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from app.main import create_app
from app.settings import Settings

POSTGRES_URL = os.environ.get("CXR_TEST_POSTGRES_URL")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The developer's own CXR_* settings must not leak into tests.
    for name in list(os.environ):
        if name.startswith("CXR_") and name not in ("CXR_TEST_POSTGRES_URL", "CXR_SHARED_DATA"):
            monkeypatch.delenv(name)
    # TestClient sends `Host: testserver`, which the service refuses by default (issue 18).
    monkeypatch.setenv("CXR_ALLOWED_HOSTS", "testserver")


def _reset_postgres(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param(
            "postgres",
            marks=[
                pytest.mark.postgres,
                pytest.mark.skipif(not POSTGRES_URL, reason="CXR_TEST_POSTGRES_URL not set"),
            ],
        ),
    ]
)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database: SQLite in tmp_path, or the CI PostgreSQL server wiped clean."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'cxr-test.db'}"
    assert POSTGRES_URL is not None
    _reset_postgres(POSTGRES_URL)
    return POSTGRES_URL


@pytest.fixture
def make_settings(tmp_path: Path, database_url: str) -> Callable[..., Settings]:
    """Factory: settings on this test's storage folder and database, with overrides."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "storage_dir": tmp_path / "storage",
            "database_url": database_url,
            "inference_max_wait_ms": 1.0,
        }
        values.update(overrides)
        return Settings(**values)

    return make


@pytest.fixture
def make_client(
    make_settings: Callable[..., Settings], demo_predictor: Any
) -> Iterator[Callable[..., TestClient]]:
    """Factory: a started TestClient on the real app; `model=False` for no model."""
    clients: list[TestClient] = []

    def make(*, model: bool = True, raise_errors: bool = True, **overrides: Any) -> TestClient:
        app = create_app(make_settings(**overrides), predictor=demo_predictor if model else None)
        client = TestClient(app, raise_server_exceptions=raise_errors)
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in reversed(clients):
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client: Callable[..., TestClient]) -> TestClient:
    """The app with the demo model and no API keys."""
    return make_client()
