"""The arithmetic inference runs in (`models.precision`) and the predictor's use of it."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from models import precision as precision_module
from models.errors import ModelsError
from models.evaluate import predict_dataset
from models.precision import inference_autocast, resolve_precision
from models.predict import load_predictor

CPU = torch.device("cpu")
CUDA = torch.device("cuda", 0)


@pytest.mark.parametrize(
    ("capability", "expected"), [((9, 0), "bfloat16"), ((8, 0), "bfloat16"), ((7, 5), "float32")]
)
def test_auto_is_bfloat16_only_on_gpus_that_compute_it(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], expected: str
) -> None:
    # An H100 or A100 runs bfloat16 natively; a T4 (7.5) would only emulate it.
    monkeypatch.setattr(precision_module, "_cuda_capability", lambda device: capability)
    assert resolve_precision("auto", CUDA) == expected
    assert resolve_precision("float32", CUDA) == "float32"


def test_auto_on_the_cpu_is_float32_whatever_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    for native in (True, False):
        monkeypatch.setattr(precision_module, "_cpu_bfloat16", lambda native=native: native)
        assert resolve_precision("auto", CPU) == "float32"


def test_bfloat16_where_it_is_emulated_is_honoured_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(precision_module, "_cpu_bfloat16", lambda: False)
    precision_module._warn_emulated.cache_clear()
    with caplog.at_level(logging.WARNING, logger="models.precision"):
        assert resolve_precision("bfloat16", CPU) == "bfloat16"
        assert resolve_precision("bfloat16", CPU) == "bfloat16"  # said once, not per load
    assert caplog.text.count("no native bfloat16") == 1 and "AMX" in caplog.text
    caplog.clear()
    monkeypatch.setattr(precision_module, "_cpu_bfloat16", lambda: True)
    with caplog.at_level(logging.WARNING, logger="models.precision"):
        assert resolve_precision("bfloat16", CPU) == "bfloat16"
    assert caplog.text == ""


@pytest.mark.parametrize("name", ["fp16", "half", "", "BFLOAT16"])
def test_an_unknown_precision_is_refused_with_the_choices(name: str) -> None:
    with pytest.raises(ModelsError, match="auto, float32, bfloat16"):
        resolve_precision(name, CPU)


def test_the_autocast_of_each_precision() -> None:
    with inference_autocast(CPU, "float32"):
        assert not torch.is_autocast_enabled("cpu")
    with inference_autocast(CPU, "bfloat16"):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
        y = torch.nn.functional.linear(torch.ones(2, 3), torch.ones(4, 3))
    assert y.dtype == torch.bfloat16


def test_the_predictor_in_bfloat16_is_close_to_float32(demo_checkpoint: Path) -> None:
    exact = load_predictor(demo_checkpoint, device="cpu")
    assert exact.precision == "float32"  # the CPU's default: the numbers as before
    fast = load_predictor(demo_checkpoint, device="cpu", precision="bfloat16")
    assert fast.precision == "bfloat16"
    rng = np.random.default_rng(3)
    images = [rng.random((90, 130), dtype=np.float32) for _ in range(3)]
    for predictor in (exact, fast):
        predictor.thresholds = dict.fromkeys(predictor.labels, 0.0)  # every label boxed
    a = exact.predict(images, heatmaps="all")
    b = fast.predict(images, heatmaps="all")
    for x, y in zip(a, b, strict=True):
        assert x.positive == y.positive
        for label, p in x.probabilities.items():
            assert y.probabilities[label] == pytest.approx(p, abs=0.05)
            assert 0.0 <= y.probabilities[label] <= 1.0
        for label, heat in x.heatmaps.items():
            other = y.heatmaps[label].render()
            assert other.dtype == np.float32 and np.isfinite(other).all()
            # The same map (scaled to [0, 1]) up to bfloat16's rounding.
            assert np.abs(heat.render() - other).max() < 0.05
        assert y.boxes and all(np.isfinite([b.x, b.y, b.width, b.height]).all() for b in y.boxes)


def test_the_predictors_paper_cam_path_runs_in_bfloat16(demo_checkpoint: Path) -> None:
    exact = load_predictor(demo_checkpoint, device="cpu", heatmap_method="cam")
    fast = load_predictor(demo_checkpoint, device="cpu", heatmap_method="cam", precision="bfloat16")
    image = [np.random.default_rng(4).random((64, 80), dtype=np.float32)]
    [x], [y] = exact.predict(image, heatmaps="all"), fast.predict(image, heatmaps="all")
    assert set(y.heatmaps) == set(x.heatmaps)
    for label, p in x.probabilities.items():
        assert y.probabilities[label] == pytest.approx(p, abs=0.05)


def test_an_unknown_precision_fails_at_load(demo_checkpoint: Path) -> None:
    with pytest.raises(ModelsError, match="unknown precision 'fp8'"):
        load_predictor(demo_checkpoint, device="cpu", precision="fp8")  # type: ignore[arg-type]


def test_evaluation_logits_follow_the_precision(demo_checkpoint: Path) -> None:
    from models.checkpoint import load_checkpoint

    model = load_checkpoint(demo_checkpoint, map_location="cpu").model
    x = torch.rand(3, 1, 64, 64)
    dataset = [(x[i], torch.zeros(3), i) for i in range(3)]

    class Items(list):  # type: ignore[type-arg]
        labels = ["Cardiomegaly", "Effusion", "Nodule"]

    exact, _ = predict_dataset(model, Items(dataset), device="cpu", precision="float32")
    fast, _ = predict_dataset(model, Items(dataset), device="cpu", precision="bfloat16")
    assert exact.dtype == fast.dtype == np.float32
    assert not np.array_equal(exact, fast)  # bfloat16 did run
    np.testing.assert_allclose(fast, exact, atol=0.25)


@pytest.mark.gpu
def test_on_a_real_gpu_auto_and_float32_and_the_graphs(demo_checkpoint: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    device = torch.device("cuda")
    native = torch.cuda.get_device_capability(device) >= (8, 0)
    auto = load_predictor(demo_checkpoint, device="cuda", heatmap_method="layercam")
    assert auto.precision == ("bfloat16" if native else "float32")
    exact = load_predictor(
        demo_checkpoint, device="cuda", heatmap_method="layercam", precision="float32"
    )
    assert exact.capture_graphs([1]) == []  # graphs are captured in bfloat16 only
    on_cpu = load_predictor(demo_checkpoint, device="cpu", heatmap_method="layercam")
    image = [np.random.default_rng(5).random((90, 130), dtype=np.float32)]
    [a], [b], [c] = on_cpu.predict(image), exact.predict(image), auto.predict(image)
    for label, p in a.probabilities.items():
        assert b.probabilities[label] == pytest.approx(p, abs=1e-3)  # TF32 at most
        assert c.probabilities[label] == pytest.approx(p, abs=0.05)
