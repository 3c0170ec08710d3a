"""Shared test fixtures (kept small: area fixtures live in tests/<area>/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

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


# The service's and the batch engine's tests share one demo model per session (the
# checkpoint takes seconds to build); tests/models/conftest.py overrides demo_checkpoint
# with a three-label one for the library's own tests.
@pytest.fixture(scope="session")
def demo_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random resnet18 demo checkpoint at 64 px with the 14 labels (fast, offline)."""
    from models.checkpoint import build_demo_checkpoint

    return build_demo_checkpoint(tmp_path_factory.mktemp("ckpt") / "demo.pt", image_size=64)


@pytest.fixture(scope="session")
def demo_predictor(demo_checkpoint: Path) -> Any:
    """The demo model with every threshold at 0, so every label is positive (and gets a
    heatmap and boxes): deterministic outputs to test against."""
    from models.predict import load_predictor

    predictor = load_predictor(demo_checkpoint, device="cpu")
    predictor.thresholds = dict.fromkeys(predictor.labels, 0.0)
    return predictor
