"""Predictor outputs in original coordinates; bitmap loading; overlays."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from dicom_factory import build_dataset, gradient, write
from PIL import Image

from models.errors import ImageTooLargeError, UnsupportedImageError
from models.images import load_image
from models.overlay import render_overlay
from models.predict import load_predictor


def test_predictor_returns_maps_and_boxes_in_original_pixels(demo_checkpoint: Path) -> None:
    predictor = load_predictor(demo_checkpoint, device="cpu")
    assert predictor.labels == ["Cardiomegaly", "Effusion", "Nodule"]
    assert predictor.card["demo"] is True
    predictor.thresholds = dict.fromkeys(predictor.labels, 0.0)  # everything positive
    images = [np.random.default_rng(0).random((90, 130), dtype=np.float32), np.zeros((64, 64))]
    results = predictor.predict(images, heatmaps="all")
    assert len(results) == 2
    first = results[0]
    assert set(first.probabilities) == set(predictor.labels)
    assert first.positive == predictor.labels
    nodule = first.heatmaps["Nodule"].render()
    assert nodule.shape == (90, 130) and nodule.dtype == np.float32
    assert nodule.min() >= 0.0 and nodule.max() <= 1.0
    assert first.heatmaps["Nodule"].render(9, 13).shape == (9, 13)
    assert first.boxes
    for b in first.boxes:
        assert b.x >= 0 and b.x + b.width <= 130 + 1e-6 and b.y + b.height <= 90 + 1e-6
        assert set(b.to_dict()) >= {"label", "x", "y", "width", "height", "score"}
    assert set(first.timings) == {"preprocess", "forward", "cam", "boxes"}
    none = predictor.predict(images[:1], heatmaps="none", boxes=False)[0]
    assert none.heatmaps == {} and none.boxes == []


def test_predictor_rejects_colour_arrays(demo_checkpoint: Path) -> None:
    predictor = load_predictor(demo_checkpoint, device="cpu")
    with pytest.raises(ValueError, match="rows, columns"):
        predictor.predict([np.zeros((64, 64, 3))])


def _png(arr: np.ndarray, mode: str | None = None) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr, mode=mode).save(buf, format="PNG")
    return buf.getvalue()


def test_load_image_reads_rgba_grey_and_16_bit_png(tmp_path: Path) -> None:
    grey = gradient(40, 60, top=255).astype(np.uint8)
    rgba = np.dstack([grey, grey, grey, np.full_like(grey, 255)])
    image = load_image(_png(rgba), filename="rgba.png")
    assert image.pixels.shape == (40, 60) and image.pixels[0, -1] == pytest.approx(1.0)
    deep = gradient(40, 60, top=60000).astype(np.uint16)
    path = tmp_path / "deep.png"
    path.write_bytes(_png(deep))
    image16 = load_image(path)
    assert image16.meta.bits_stored == 16 and image16.pixels[0, 30] == pytest.approx(0.5, abs=0.01)


def test_load_image_routes_dicom_and_rejects_junk(tmp_path: Path) -> None:
    dcm = write(build_dataset(gradient()), tmp_path / "noext")
    assert load_image(dcm).meta.modality == "DX"
    with pytest.raises(UnsupportedImageError, match="not a DICOM, PNG, JPEG"):
        load_image(b"\x00" * 400, filename="junk.bin")
    with pytest.raises(ImageTooLargeError):
        load_image(_png(np.zeros((10, 10_001), np.uint8)))


def test_render_overlay_is_png_of_image_size() -> None:
    from models.boxes import Box

    pixels = gradient(50, 80, top=1).astype(np.float32)
    heat = np.zeros((50, 80), np.float32)
    heat[10:20, 10:20] = 1
    png = render_overlay(pixels, heat, boxes=[Box("Mass", 10, 10, 10, 10, 0.9)])
    with Image.open(io.BytesIO(png)) as im:
        assert im.format == "PNG" and im.size == (80, 50)


def test_resolve_device_refuses_missing_cuda() -> None:
    import torch

    from models.errors import ModelsError
    from models.predict import resolve_device

    assert resolve_device("cpu").type == "cpu"
    with pytest.raises(ModelsError, match="unknown device"):
        resolve_device("tpu9")
    if not torch.cuda.is_available():
        with pytest.raises(ModelsError, match="CUDA is not available"):
            resolve_device("cuda")


@pytest.mark.issue(7)
def test_load_image_max_pixels_refuses_before_decoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pydicom.dataset

    dicom = write(build_dataset(gradient(64, 80)), tmp_path / "big.dcm")
    buf = io.BytesIO()
    Image.fromarray(gradient(64, 80, top=255).astype(np.uint8)).save(buf, format="PNG")
    # Within the limit both read; over it, refused from the header alone.
    assert load_image(dicom, max_pixels=64 * 80).pixels.shape == (64, 80)
    assert load_image(buf.getvalue(), max_pixels=64 * 80).pixels.shape == (64, 80)

    def no_decoding(*_: object) -> None:
        raise AssertionError("pixels decoded despite the limit")

    monkeypatch.setattr(pydicom.dataset.Dataset, "pixel_array", property(no_decoding))
    monkeypatch.setattr(Image.Image, "load", no_decoding)
    with pytest.raises(ImageTooLargeError, match="64x80 = 5,120 pixels; the limit is 5,119 pixels"):
        load_image(dicom, max_pixels=64 * 80 - 1)
    with pytest.raises(ImageTooLargeError, match="big.png: image is 64x80"):
        load_image(buf.getvalue(), filename="big.png", max_pixels=1000)


@pytest.mark.issue(7)
def test_load_image_pillow_decompression_bomb_is_too_large(monkeypatch: pytest.MonkeyPatch) -> None:
    buf = io.BytesIO()
    Image.fromarray(gradient(64, 80, top=255).astype(np.uint8)).save(buf, format="PNG")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 5120 pixels is over twice that
    with pytest.raises(ImageTooLargeError, match="decompression bomb"):
        load_image(buf.getvalue(), filename="bomb.png")


@pytest.mark.parametrize("method", ["cam", "layercam"])
def test_a_batch_over_the_memory_budget_goes_in_parts_with_the_same_results(
    demo_checkpoint: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    import models.layercam
    import models.predict

    rng = np.random.default_rng(3)
    images = [rng.random((70 + 9 * i, 90), dtype=np.float32) for i in range(5)]

    def run() -> list[tuple[dict[str, float], dict[str, np.ndarray], int]]:
        predictor = load_predictor(demo_checkpoint, device="cpu", heatmap_method=method)
        predictor.thresholds = dict.fromkeys(predictor.labels, 0.0)  # every map is drawn
        return [
            (r.probabilities, {k: h.render() for k, h in r.heatmaps.items()}, len(r.boxes))
            for r in predictor.predict(images, heatmaps="all")
        ]

    whole = run()
    # Two 64 px images per pass instead of all five at once.
    monkeypatch.setattr(models.predict, "_FORWARD_PIXELS", 2 * 64 * 64)
    monkeypatch.setattr(models.layercam, "_GRAPH_PIXELS", 2 * 64 * 64)
    parts = run()
    for (p_whole, maps_whole, n_whole), (p_parts, maps_parts, n_parts) in zip(
        whole, parts, strict=True
    ):
        assert p_parts == pytest.approx(p_whole, abs=1e-5)
        assert maps_parts.keys() == maps_whole.keys() and len(maps_whole) == 3
        for label, heat in maps_whole.items():
            np.testing.assert_allclose(maps_parts[label], heat, atol=1e-4)
        assert n_parts == n_whole
