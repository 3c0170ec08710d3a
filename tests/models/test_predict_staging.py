"""`Predictor.stage`: a batch's input assembled on the host (on any thread), then
`model_pass` on the staged batch gives what `predict` gives."""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from models.image_pipeline import InputSpec, PreparedImage, load_for_model, prepare_pixels
from models.predict import Prediction, Predictor, StagedBatch, load_predictor
from models.stored_pixels import UNIT_CODES, StoredPixels

# Different sizes and aspect ratios: tall, wide, square, tiny and larger than the input.
SHAPES = [(90, 130), (200, 50), (64, 64), (33, 97), (150, 151)]


def _predictor(checkpoint: Path, method: str = "cam", batch_size: int = 16) -> Predictor:
    predictor = load_predictor(
        checkpoint, device="cpu", batch_size=batch_size, heatmap_method=method
    )
    predictor.thresholds = dict.fromkeys(predictor.labels, 0.0)  # every label mapped and boxed
    return predictor


def _png(codes: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(codes).save(buf, format="PNG")
    return buf.getvalue()


def _uint16_images(predictor: Predictor, seed: int = 0) -> list[PreparedImage]:
    """Fitted 16-bit images, as `predict_files` gets them: 16- and 8-bit PNGs through
    `load_for_model`, and 12-bit codes through `StoredPixels.fit`. No pixel is 0."""
    rng = np.random.default_rng(seed)
    spec = InputSpec.of(predictor)
    out = []
    for k, (rows, cols) in enumerate(SHAPES):
        if k % 3 == 0:
            codes = rng.integers(2000, 60000, (rows, cols)).astype(np.uint16)
            out.append(load_for_model(_png(codes), spec, filename=f"{k}.png").prepared)
        elif k % 3 == 1:
            codes8 = rng.integers(20, 250, (rows, cols)).astype(np.uint8)
            out.append(load_for_model(_png(codes8), spec, filename=f"{k}.png").prepared)
        else:
            codes = rng.integers(500, 4000, (rows, cols)).astype(np.uint16)
            fitted, geo = StoredPixels.linear(codes, 0.0, 4095.0).fit(
                predictor.image_size, predictor.resize
            )
            out.append(PreparedImage(fitted, geo))
    for p in out:
        assert p.pixels.dtype == np.uint16 and p.pixels.min() > 0
    return out


def _float_images(predictor: Predictor, seed: int = 1) -> list[PreparedImage]:
    rng = np.random.default_rng(seed)
    return [
        predictor.prepare(0.1 + 0.8 * rng.random(shape, dtype=np.float32)) for shape in SHAPES[:3]
    ]


def _staged_predictions(
    predictor: Predictor, prepared: Sequence[PreparedImage]
) -> list[Prediction]:
    return predictor.finish(predictor.model_pass(predictor.stage(prepared), "all"))


def _assert_same(got: Sequence[Prediction], want: Sequence[Prediction]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.probabilities == b.probabilities
        assert a.positive == b.positive
        assert a.boxes == b.boxes
        assert a.geometry == b.geometry
        assert a.heatmaps.keys() == b.heatmaps.keys()
        for label, heat in a.heatmaps.items():
            np.testing.assert_array_equal(heat.cam, b.heatmaps[label].cam)


@pytest.mark.parametrize("method", ["cam", "layercam"])
@pytest.mark.parametrize("kind", ["uint16", "float", "mixed"])
def test_a_staged_batch_gives_exactly_what_predict_gives(
    demo_checkpoint: Path, method: str, kind: str
) -> None:
    predictor = _predictor(demo_checkpoint, method)
    uint16, floats = _uint16_images(predictor), _float_images(predictor)
    prepared = {
        "uint16": uint16,
        "float": floats,
        "mixed": [uint16[0], floats[0], uint16[1], floats[1]],
    }[kind]
    want = predictor.predict(prepared, heatmaps="all")
    got = _staged_predictions(predictor, prepared)
    _assert_same(got, want)
    assert len(got) == len(prepared)
    assert all(r.boxes and len(r.heatmaps) == len(predictor.labels) for r in got)
    assert [r.geometry for r in got] == [p.geometry for p in prepared]
    if kind == "uint16":
        # The 16-bit images scaled by hand and staged as float images: the same input, up
        # to float rounding, so the same probabilities.
        by_hand = [
            PreparedImage((p.pixels / UNIT_CODES).astype(np.float32), p.geometry) for p in prepared
        ]
        for a, b in zip(_staged_predictions(predictor, by_hand), got, strict=True):
            assert a.probabilities == pytest.approx(b.probabilities, abs=1e-5)


def test_staging_on_another_thread_during_a_model_pass_changes_nothing(
    demo_checkpoint: Path,
) -> None:
    # As `predict_files` does: batch k + 1 is staged on a thread while batch k's model
    # pass runs on this one.
    predictor = _predictor(demo_checkpoint, "layercam", batch_size=2)
    images = _uint16_images(predictor, seed=3) + _float_images(predictor, seed=4)
    batches = [images[k : k + 2] for k in range(0, len(images), 2)]
    sequential = [_staged_predictions(predictor, batch) for batch in batches]
    alone = [predictor.stage(batch).host for batch in batches]  # staged on this thread

    start = threading.Barrier(2, timeout=30)

    def stage_when_started(batch: Sequence[PreparedImage]) -> StagedBatch:
        start.wait()  # begins with the other thread's model pass
        return predictor.stage(batch)

    with ThreadPoolExecutor(1) as pool:
        staged = predictor.stage(batches[0])
        for k in range(len(batches)):
            upcoming = None
            if k + 1 < len(batches):
                upcoming = pool.submit(stage_when_started, batches[k + 1])
                start.wait()
            done = predictor.model_pass(staged, "all")
            _assert_same(predictor.finish(done), sequential[k])
            if upcoming is None:
                break
            staged = upcoming.result()
            host = staged.host
            expected = alone[k + 1]
            assert host is not None and expected is not None
            assert torch.equal(host, expected)
            assert [p.geometry for p in batches[k + 1]] == staged.geometries


def test_stage_refuses_an_image_prepared_for_another_input_size(demo_checkpoint: Path) -> None:
    predictor = _predictor(demo_checkpoint)
    good = _uint16_images(predictor)[0]
    codes = np.random.default_rng(5).integers(0, 4000, (80, 60)).astype(np.uint16)
    fitted, geo = StoredPixels.linear(codes, 0.0, 4095.0).fit(32, predictor.resize)
    small = PreparedImage(fitted, geo)
    large = prepare_pixels(np.full((80, 60), 0.5, np.float32), 96, predictor.resize)
    with pytest.raises(ValueError, match="image 1 was prepared for 32 px, the model takes 64"):
        predictor.stage([good, small])
    with pytest.raises(ValueError, match="image 0 was prepared for 96 px, the model takes 64"):
        predictor.stage([large])
    # The paths that stage for themselves refuse it too.
    with pytest.raises(ValueError, match="prepared for 32 px"):
        predictor.model_pass([small])
    with pytest.raises(ValueError, match="prepared for 96 px"):
        predictor.predict([good, large])


def test_the_staged_cpu_input_is_each_image_in_its_window_and_zero_around_it(
    demo_checkpoint: Path,
) -> None:
    predictor = _predictor(demo_checkpoint)
    prepared = _uint16_images(predictor) + _float_images(predictor)
    staged = predictor.stage(prepared)
    s = predictor.image_size
    host = staged.host
    assert host is not None and staged.floats == []
    assert host.shape == (len(prepared), 1, s, s) and host.dtype == torch.float32
    assert host.is_contiguous(memory_format=torch.channels_last)
    assert staged.geometries == [p.geometry for p in prepared]
    batch = host.numpy()
    padded = 0
    for p, x in zip(prepared, batch[:, 0], strict=True):
        g = p.geometry
        window = x[g.top : g.top + g.height, g.left : g.left + g.width]
        if p.pixels.dtype == np.uint16:
            want = p.pixels.astype(np.float64) / UNIT_CODES
            np.testing.assert_allclose(window, want, rtol=1e-6, atol=0)
        else:
            np.testing.assert_array_equal(window, p.pixels)
        assert window.min() > 0  # so the zeros outside are padding, not image
        outside = np.ones((s, s), bool)
        outside[g.top : g.top + g.height, g.left : g.left + g.width] = False
        assert not x[outside].any()
        padded += int(outside.sum())
    assert padded > 0  # the letterboxed shapes do leave padding
    assert predictor.stage([]).geometries == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_staging_is_pinned_16_bit_and_widens_to_the_cpu_input(demo_checkpoint: Path) -> None:
    cpu = _predictor(demo_checkpoint)
    cuda = load_predictor(demo_checkpoint, device="cuda")
    cuda.thresholds = dict(cpu.thresholds)
    prepared = _uint16_images(cpu)
    staged = cuda.stage(prepared)
    s = cuda.image_size
    host = staged.host
    assert host is not None and host.dtype == torch.int16 and host.is_pinned()
    assert host.shape == (len(prepared), s, s)
    for p, codes in zip(prepared, host.numpy(), strict=True):
        h, w = p.pixels.shape
        np.testing.assert_array_equal(codes[:h, :w].view(np.uint16), p.pixels)
    x = cuda._input_batch(staged)
    cpu_host = cpu.stage(prepared).host
    assert cpu_host is not None
    torch.testing.assert_close(x.cpu(), cpu_host, rtol=1e-6, atol=0)
    # Float images are copied one by one, not staged.
    floats = _float_images(cpu)
    by_one = cuda.stage(floats)
    assert by_one.host is None and len(by_one.floats) == len(floats)
    torch.testing.assert_close(cuda._input_batch(by_one).cpu(), cpu.stage(floats).host)
    got = cuda.finish(cuda.model_pass(cuda.stage(prepared), "all"))
    want = cuda.predict(prepared, heatmaps="all")
    for a, b in zip(got, want, strict=True):
        assert a.probabilities == pytest.approx(b.probabilities, abs=1e-5)
        assert a.positive == b.positive and a.geometry == b.geometry


# --- stored images fitted on the model's device (`predict_files` on CUDA) ------------------


def _stored_images(seed: int = 6) -> list[StoredPixels]:
    """Unfitted images as `read_task` gives them: a 12-bit linear one, MONOCHROME1, a
    sigmoid VOI LUT (a per-code table), signed 16-bit, 8-bit, and a small one that the
    fit enlarges. Every pixel is well above 0."""
    rng = np.random.default_rng(seed)
    c12 = rng.integers(500, 4000, (210, 170)).astype(np.uint16)
    signed = rng.integers(-800, 3000, (120, 300)).astype(np.int16)
    return [
        StoredPixels.linear(c12, 0.0, 4095.0),
        StoredPixels.from_codes(
            rng.integers(0, 3000, (160, 90)).astype(np.uint16),
            lambda c: c.astype(np.float64),
            invert=True,
        ).with_window(-200.0, 3200.0),
        StoredPixels.from_codes(
            c12, lambda c: 1 / (1 + np.exp(-(c.astype(np.float64) - 2000) / 700))
        ).with_window(0.0, 1.0),
        StoredPixels.from_codes(signed, lambda c: c.astype(np.float64)).with_window(-1000, 3100),
        StoredPixels.linear(rng.integers(20, 250, (99, 140)).astype(np.uint8), 0.0, 255.0),
        StoredPixels.linear(rng.integers(500, 4000, (20, 30)).astype(np.uint16), 0.0, 4095.0),
    ]


def _host_fitted(predictor: Predictor, stored: Sequence[StoredPixels]) -> list[PreparedImage]:
    return [PreparedImage(*s.fit(predictor.image_size, predictor.resize)) for s in stored]


@pytest.mark.parametrize("resize", ["letterbox", "stretch"])
def test_stored_images_fitted_on_the_device_give_the_host_fits_input(
    demo_checkpoint: Path, resize: str
) -> None:
    # The device's code, run on the CPU: each stored image fitted into its window of the
    # input there, the same input as the host fit's to within one 16-bit code.
    predictor = _predictor(demo_checkpoint)
    predictor.resize = resize  # type: ignore[assignment]
    stored = _stored_images()
    staged = predictor.stage(stored, on_device=True)
    host = predictor.stage(_host_fitted(predictor, stored)).host
    assert staged.host is None and staged.ready is None and staged.on_device is not None
    assert host is not None
    x = predictor._input_batch(staged)
    assert x is staged.on_device
    assert x.shape == host.shape and x.is_contiguous(memory_format=torch.channels_last)
    assert staged.geometries == [p.geometry for p in _host_fitted(predictor, stored)]
    diff = (x - host).abs()
    assert float(diff.max()) <= 1.01 / UNIT_CODES
    assert float((diff > 0).float().mean()) < 0.01
    for g, window in zip(staged.geometries, x[:, 0], strict=True):  # zero outside
        outside = torch.ones_like(window, dtype=torch.bool)
        outside[g.top : g.top + g.height, g.left : g.left + g.width] = False
        assert not window[outside].any()
        assert float(window[~outside].min()) > 0


@pytest.mark.parametrize("method", ["cam", "layercam"])
def test_a_batch_fitted_on_the_device_predicts_what_the_host_fit_predicts(
    demo_checkpoint: Path, method: str
) -> None:
    predictor = _predictor(demo_checkpoint, method)
    stored = _stored_images(seed=8)
    # Fitted images (16-bit and float) ride along in the same batch, copied as they are.
    fitted, floats = _uint16_images(predictor)[:2], _float_images(predictor)[:1]
    batch: list[PreparedImage | StoredPixels] = [*stored, *fitted, *floats]
    got = predictor.finish(predictor.model_pass(predictor.stage(batch, on_device=True), "all"))
    want = predictor.predict([*_host_fitted(predictor, stored), *fitted, *floats], heatmaps="all")
    assert len(got) == len(want) == len(batch)
    for a, b in zip(got, want, strict=True):
        assert a.probabilities == pytest.approx(b.probabilities, abs=1e-4)
        assert a.positive == b.positive and a.geometry == b.geometry
    # The already fitted images' windows are copied exactly.
    on_device = predictor.stage(batch, on_device=True).on_device
    hosted = predictor.stage([*fitted, *floats]).host
    assert on_device is not None and hosted is not None
    assert torch.equal(on_device[len(stored) :], hosted)


def test_a_failing_device_fit_leaves_that_image_to_the_host(
    demo_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import models.predict

    predictor = _predictor(demo_checkpoint)
    stored = _stored_images()
    calls: list[int] = []

    def out_of_memory(*args: object) -> torch.Tensor:
        calls.append(1)
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(models.predict, "fitted_codes", out_of_memory)
    staged = predictor.stage(stored, on_device=True)
    want = predictor.stage(_host_fitted(predictor, stored)).host
    assert calls and staged.on_device is not None and want is not None
    assert torch.equal(staged.on_device, want)  # the host's fits, exactly


def test_stored_images_off_the_device_are_fitted_on_the_host(demo_checkpoint: Path) -> None:
    predictor = _predictor(demo_checkpoint)
    stored = _stored_images()
    staged = predictor.stage(stored)  # CPU: on_device defaults to off
    assert staged.on_device is None and staged.host is not None
    want = predictor.stage(_host_fitted(predictor, stored)).host
    assert want is not None and torch.equal(staged.host, want)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_fits_stored_images_on_a_side_stream_into_the_input(demo_checkpoint: Path) -> None:
    cpu = _predictor(demo_checkpoint, "layercam")
    cuda = load_predictor(demo_checkpoint, device="cuda", heatmap_method="layercam")
    cuda.thresholds = dict(cpu.thresholds)
    stored = _stored_images()
    staged = cuda.stage(stored)  # stored images on CUDA: fitted there by default
    assert staged.on_device is not None and staged.ready is not None and staged.host is None
    x = cuda._input_batch(staged)
    want = cpu.stage(_host_fitted(cpu, stored)).host
    assert want is not None
    assert float((x.cpu() - want).abs().max()) <= 1.01 / UNIT_CODES
    got = cuda.finish(cuda.model_pass(cuda.stage(stored), "all"))
    host_fit = cuda.predict(_host_fitted(cuda, stored), heatmaps="all")
    for a, b in zip(got, host_fit, strict=True):
        assert a.probabilities == pytest.approx(b.probabilities, abs=1e-3)  # bf16 pass
        assert a.geometry == b.geometry
