"""Shared test fixtures (kept small: area fixtures live in tests/<area>/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests run the same examples on every run, so CI is reproducible; set
# HYPOTHESIS_PROFILE=explore to search with fresh random examples.
settings.register_profile("repeatable", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data folder beside the clone (or CXR_SHARED_DATA); skips when absent."""
    default = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    path = Path(os.environ.get("CXR_SHARED_DATA", default)).resolve()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (set CXR_SHARED_DATA)")
    return path
