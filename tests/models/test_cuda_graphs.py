"""CUDA graphs of the LayerCAM pass (`models.cuda_graphs`): the same results as eager."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from models.cuda_graphs import LayerCamGraphs
from models.image_pipeline import PreparedImage
from models.predict import Prediction, Predictor, load_predictor


def _images(predictor: Predictor, n: int, seed: int) -> list[PreparedImage]:
    rng = np.random.default_rng(seed)
    shapes = [(300, 240), (256, 256), (200, 320), (280, 200)]
    return [predictor.prepare(rng.random(shapes[i % len(shapes)])) for i in range(n)]


def _layercam(checkpoint: Path, *, batch_size: int, cuda_graphs: bool = True) -> Predictor:
    # The demo card draws the paper's CAM; only LayerCAM's pass is graphed.
    return load_predictor(
        checkpoint, device="cuda", batch_size=batch_size, heatmap_method="layercam",
        cuda_graphs=cuda_graphs,
    )  # fmt: skip


def _same(got: list[Prediction], want: list[Prediction]) -> None:
    for a, b in zip(got, want, strict=True):
        assert a.probabilities == pytest.approx(b.probabilities, abs=1e-5)
        assert a.positive == b.positive
        assert set(a.heatmaps) == set(b.heatmaps)
        for name in a.heatmaps:
            np.testing.assert_allclose(
                a.heatmaps[name].cam.astype(np.float32),
                b.heatmaps[name].cam.astype(np.float32),
                atol=2e-3,
            )
        assert [(x.label, x.heatmap_level) for x in a.boxes] == [
            (x.label, x.heatmap_level) for x in b.boxes
        ]


def test_predictor_weights_need_no_gradient_and_cpu_has_no_graphs(demo_checkpoint: Path) -> None:
    predictor = load_predictor(demo_checkpoint, device="cpu", heatmap_method="layercam")
    assert not any(p.requires_grad for p in predictor.model.parameters())
    assert predictor._graphs is None and predictor.capture_graphs([1, 16]) == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_graphed_passes_give_the_eager_results(demo_checkpoint: Path) -> None:
    graphed = _layercam(demo_checkpoint, batch_size=4)
    eager = _layercam(demo_checkpoint, batch_size=4, cuda_graphs=False)
    assert graphed._graphs is not None and eager._graphs is None
    assert graphed.capture_graphs([1, 4]) == [1, 4] and eager.capture_graphs([1]) == []
    for p in (graphed, eager):
        p.thresholds = dict.fromkeys(p.labels, 0.0)  # every label mapped and boxed
    # Batches of one and of four replay their graphs, with other images each time; a batch
    # of three runs eagerly.
    for seed, n in [(0, 1), (1, 1), (2, 4), (3, 4), (4, 3)]:
        images = _images(eager, n, seed)
        _same(graphed.predict(images, heatmaps="all"), eager.predict(images, heatmaps="all"))
    shapes = {shape[0] for shape, stages in graphed._graphs._by_shape.items() if stages}
    assert shapes == {1, 4}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_failed_capture_runs_eagerly_and_says_so(
    demo_checkpoint: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def fail(self: LayerCamGraphs, x: torch.Tensor) -> None:
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(LayerCamGraphs, "_capture", fail)
    graphed = _layercam(demo_checkpoint, batch_size=2)
    eager = _layercam(demo_checkpoint, batch_size=2, cuda_graphs=False)
    images = _images(eager, 2, 5)
    with caplog.at_level(logging.WARNING, logger="models.cuda_graphs"):
        assert graphed.capture_graphs([2]) == []
        assert graphed.capture_graphs([2]) == []  # the failed shape is not tried again
        _same(graphed.predict(images, heatmaps="all"), eager.predict(images, heatmaps="all"))
    assert sum("capture" in r.getMessage() for r in caplog.records) == 1
