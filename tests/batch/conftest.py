"""Fixtures for the batch library's tests: a clean environment for the tests that run
`cxr batch` and `cxr listen`, and the DICOM builders of tests/app/service_fixtures.py (the
same synthetic exports the service's tests use). The demo model is tests/conftest.py's."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from batch.labeling import PipelineLabeler

# service_fixtures.py builds the synthetic exports, DICOMs and reports CSVs shared with
# the service's tests; it is a plain module beside tests/app/conftest.py.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The developer's own CXR_* settings must not leak into `cxr batch` runs.
    for name in list(os.environ):
        if name.startswith("CXR_") and name not in ("CXR_TEST_POSTGRES_URL", "CXR_SHARED_DATA"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def labeler() -> PipelineLabeler:
    """The library's labeler with the default configuration (its pipeline built at first use)."""
    return PipelineLabeler()
