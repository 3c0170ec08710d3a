"""`predict_files`: files through decode -> fit -> batched forward, in order, errors kept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from models.predict import _prefetch, load_predictor, predict_files


def test_predict_files_keeps_order_and_reports_unreadable_files(
    demo_checkpoint: Path, make_dicom: Callable[..., Path], tmp_path: Path
) -> None:
    predictor = load_predictor(demo_checkpoint, device="cpu", batch_size=2)
    predictor.thresholds = dict.fromkeys(predictor.labels, 0.0)
    rng = np.random.default_rng(0)
    good = [make_dicom(rng.integers(0, 4000, (90 + 10 * i, 60)), name=f"{i}.dcm") for i in range(3)]
    bad = tmp_path / "bad.dcm"
    bad.write_bytes(b"junk" * 100)
    paths = [good[0], bad, good[1], good[2]]
    results = list(predict_files(predictor, paths, display_size=40))
    assert [r.path for r in results] == paths
    assert results[1].error is not None and results[1].prediction is None
    for r, rows in zip([results[0], results[2], results[3]], [90, 100, 110], strict=True):
        assert r.error is None and r.prediction is not None and r.meta is not None
        assert r.prepared is None  # the model input is dropped once predicted
        assert r.meta.rows == rows
        assert r.display is not None and r.display.dtype == np.uint8
        assert max(r.display.shape) == 40
        assert set(r.prediction.heatmaps) == set(predictor.labels)
        assert {"decode", "preprocess"} <= set(r.timings)


def test_prefetch_keeps_order_and_reraises_producer_errors() -> None:
    assert list(_prefetch(iter(range(20)), depth=3)) == list(range(20))

    def failing() -> object:
        yield 1
        raise RuntimeError("producer broke")

    with pytest.raises(RuntimeError, match="producer broke"):
        list(_prefetch(failing(), depth=2))  # type: ignore[arg-type]
