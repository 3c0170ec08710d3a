"""Fixtures for the batch library's tests: the labeler, a tiny demo model, a clean
environment for the tests that run `cxr batch`, and the DICOM builders of
tests/app/service_fixtures.py (the same synthetic exports the service's tests use)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="session")
def demo_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random resnet18 demo checkpoint at 64 px with the 14 labels (fast, offline)."""
    from models.checkpoint import build_demo_checkpoint

    return build_demo_checkpoint(tmp_path_factory.mktemp("ckpt") / "demo.pt", image_size=64)


@pytest.fixture(scope="session")
def demo_predictor(demo_checkpoint: Path) -> Any:
    """The demo model with every threshold at 0, so every label is positive."""
    from models.predict import load_predictor

    predictor = load_predictor(demo_checkpoint, device="cpu")
    predictor.thresholds = dict.fromkeys(predictor.labels, 0.0)
    return predictor
