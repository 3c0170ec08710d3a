"""Fixtures for `models` tests: pydicom-built DICOMs, a tiny random checkpoint, phantoms."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dicom_factory import build_dataset, write


@pytest.fixture
def make_dicom(tmp_path: Path) -> Callable[..., Path]:
    """Factory: make_dicom(pixels, name="x.dcm", **build_dataset kwargs) -> path."""

    def make(pixels: np.ndarray | None = None, name: str = "image.dcm", **kwargs: Any) -> Path:
        return write(build_dataset(pixels, **kwargs), tmp_path / name)

    return make


# Overrides tests/conftest.py's 14-label demo model: the library's tests need only a few.
@pytest.fixture(scope="session")
def demo_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random resnet18 checkpoint at 64 px with three labels (fast to build and run)."""
    from models.checkpoint import build_demo_checkpoint

    path = tmp_path_factory.mktemp("ckpt") / "demo.pt"
    return build_demo_checkpoint(path, labels=["Cardiomegaly", "Effusion", "Nodule"], image_size=64)


@pytest.fixture(scope="session")
def phantom_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 phantoms at 64 px in the NIH layout."""
    from models.phantoms import write_phantom_dataset

    return write_phantom_dataset(tmp_path_factory.mktemp("phantoms"), n=40, seed=1, size=64)
