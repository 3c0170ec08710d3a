"""Shared test fixtures (kept small: area fixtures live in tests/<area>/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data folder beside the clone (or CXR_SHARED_DATA); skips when absent."""
    default = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    path = Path(os.environ.get("CXR_SHARED_DATA", default)).resolve()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (set CXR_SHARED_DATA)")
    return path
