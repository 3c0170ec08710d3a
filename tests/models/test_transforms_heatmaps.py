"""Letterboxing, its exact mapping back, and map-resolution heatmaps (issue 9 item 3, issue 7
item 5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from models.checkpoint import ModelCard, load_checkpoint, model_from_card, save_checkpoint
from models.heatmaps import Heatmap, boxes_from_cam, project_cam
from models.predict import Predictor, load_predictor
from models.transforms import (
    EvalTransform,
    Geometry,
    TrainTransform,
    fit_square,
    preprocessing_record,
    resize_mode_of,
)


class BrightnessNet(torch.nn.Module):
    """A stand-in network whose class map is the local mean brightness.

    Cell i is centred on input pixel stride * i, as in a same-padded ResNet (`models.cam`),
    so a correct geometry puts boxes on the bright rectangle's edges.
    """

    def __init__(self, stride: int, labels: int = 1) -> None:
        super().__init__()
        self.stride = stride
        self.labels = labels

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        s = self.stride
        if s == 1:
            return x
        return F.avg_pool2d(x, s + 1, stride=s, padding=s // 2, count_include_pad=False)

    def class_activation_maps(self, features: torch.Tensor) -> torch.Tensor:
        return features.expand(-1, self.labels, -1, -1)

    def forward_head(self, features: torch.Tensor) -> torch.Tensor:
        return self.class_activation_maps(features).amax(dim=(2, 3)) * 10


def _predictor(stride: int, size: int, mode: str = "letterbox") -> Predictor:
    card = ModelCard(
        labels=["Mass"],
        arch="resnet18",
        image_size=size,
        thresholds={"Mass": 0.0},
        box_thresholds=[128],
        preprocessing=preprocessing_record(mode),
    )
    return Predictor(BrightnessNet(stride), card, device=torch.device("cpu"))  # type: ignore[arg-type]


def _rectangle(rows: int, columns: int, top: int, left: int, height: int, width: int) -> np.ndarray:
    img = np.zeros((rows, columns), np.float32)
    img[top : top + height, left : left + width] = 1.0
    return img


@pytest.mark.issue(9)
@pytest.mark.parametrize("stride", [1, 8, 16])
@pytest.mark.parametrize(
    ("rows", "columns", "rect"),
    [(200, 250, (50, 120, 60, 100)), (250, 200, (140, 30, 80, 60)), (300, 120, (20, 10, 90, 40))],
)
def test_letterbox_box_lands_on_bright_rectangle_in_original_pixels(
    stride: int, rows: int, columns: int, rect: tuple[int, int, int, int]
) -> None:
    top, left, height, width = rect
    predictor = _predictor(stride, size=256)
    [result] = predictor.predict([_rectangle(rows, columns, *rect)], heatmaps="all")
    geo = result.geometry
    assert geo is not None and geo.rows == rows and geo.columns == columns
    assert (geo.height == 256) == (rows >= columns) and (geo.width == 256) == (columns >= rows)
    [box] = result.boxes
    input_px = max(rows, columns) / 256  # one model-input pixel, in original pixels
    tol = 1.5 * input_px
    assert abs(box.x - left) <= tol and abs(box.y - top) <= tol
    assert abs(box.x + box.width - (left + width)) <= tol
    assert abs(box.y + box.height - (top + height)) <= tol
    # The heatmap, rendered at the original size, is hot on the rectangle and cold far from it.
    heat = result.heatmaps["Mass"].render()
    assert heat.shape == (rows, columns)
    assert heat[top + height // 2, left + width // 2] > 0.9
    far_y, far_x = (0 if top > rows // 2 else rows - 1), (0 if left > columns // 2 else columns - 1)
    assert heat[far_y, far_x] < 0.1


def test_stretch_mode_for_old_checkpoints_still_maps_back() -> None:
    predictor = _predictor(8, size=128, mode="stretch")
    [result] = predictor.predict([_rectangle(200, 250, 50, 120, 60, 100)])
    assert result.geometry == Geometry(200, 250, 128, 0, 0, 128, 128)
    [box] = result.boxes
    assert abs(box.x - 120) <= 3 and abs(box.y - 50) <= 3 and abs(box.width - 100) <= 4


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 12_000),
    columns=st.integers(1, 12_000),
    size=st.sampled_from([32, 64, 224, 512, 1024]),
    mode=st.sampled_from(["letterbox", "stretch"]),
    fx=st.floats(0, 1),
    fy=st.floats(0, 1),
)
def test_geometry_round_trips_coordinates(
    rows: int, columns: int, size: int, mode: str, fx: float, fy: float
) -> None:
    geo = Geometry.fit(rows, columns, size, mode)
    assert geo.top >= 0 and geo.top + geo.height <= size
    assert geo.left >= 0 and geo.left + geo.width <= size
    if mode == "letterbox":
        assert max(geo.height, geo.width) == size  # the longer side fills the input
        # each side is the scaled side rounded to a whole pixel (at least one)
        scale = size / max(rows, columns)
        assert abs(geo.height - max(1.0, rows * scale)) <= 1
        assert abs(geo.width - max(1.0, columns * scale)) <= 1
    x, y = fx * columns, fy * rows
    back = geo.to_original(*geo.to_input(x, y))
    assert back == pytest.approx((x, y), abs=1e-6 * max(rows, columns))
    assert geo.to_input(0, 0) == (geo.left, geo.top)
    assert geo.to_input(columns, rows) == pytest.approx(
        (geo.left + geo.width, geo.top + geo.height)
    )


def test_fit_square_letterbox_pads_and_keeps_aspect() -> None:
    img = np.ones((100, 50), np.float32)
    out, geo = fit_square(img, 64, "letterbox")
    assert out.shape == (64, 64) and geo == Geometry(100, 50, 64, 0, 16, 64, 32)
    assert out[:, 16:48].min() > 0.999 and out[:, :16].max() == 0.0 and out[:, 48:].max() == 0.0
    stretched, _ = fit_square(img, 64, "stretch")
    assert stretched.min() > 0.999
    with pytest.raises(ValueError, match="resize mode"):
        fit_square(img, 64, "crop")
    with pytest.raises(ValueError, match="rows, columns"):
        fit_square(np.ones((4, 4, 3)), 64)


def test_train_and_eval_transforms_letterbox_alike() -> None:
    img = np.ones((120, 60), np.float32)
    ev = EvalTransform(32)(img)
    assert ev.shape == (1, 32, 32) and float(ev[0, :, :4].max()) == 0.0
    tr = TrainTransform(32, rotate_deg=0, scale=(1, 1), shift=0, contrast=0, gamma=0)
    out = tr(img, np.random.default_rng(0))
    # Only the brightness jitter remains: the padding columns stay darker than the image.
    assert float(out[0, :, :4].mean()) < float(out[0, :, 12:20].mean())


def test_project_cam_equals_old_stretch_geometry() -> None:
    from models.cam import upsample_cams

    cam = np.random.default_rng(1).random((8, 8)).astype(np.float32)
    geo = Geometry.fit(300, 200, 256, "stretch")
    old = upsample_cams(torch.from_numpy(cam), 300, 200, 256).numpy()
    assert np.allclose(project_cam(cam, geo, 300, 200), old, atol=1e-5)


@pytest.mark.issue(7)
def test_heatmap_is_map_sized_for_a_huge_image() -> None:
    geo = Geometry.fit(10_000, 10_000, 1024, "letterbox")
    heat = Heatmap.from_cam(np.random.default_rng(0).random((32, 32)), geo)
    assert heat.cam.nbytes == 32 * 32 * 2
    assert heat.render(512, 512).shape == (512, 512)
    boxes = boxes_from_cam(np.asarray(heat.cam, np.float32), geo, label="Mass")
    assert all(b.x >= 0 and b.x + b.width <= 10_000 + 1e-6 for b in boxes)


@pytest.mark.issue(9)
def test_model_card_records_letterbox_and_old_cards_stretch(tmp_path: Path) -> None:
    card = ModelCard(labels=["Mass"], arch="resnet18", image_size=64)
    assert card.preprocessing["resize_mode"] == "letterbox"
    torch.manual_seed(0)
    model = model_from_card(card)
    path = save_checkpoint(tmp_path / "new.pt", model=model, card=card)
    assert load_checkpoint(path).card.preprocessing["resize_mode"] == "letterbox"
    assert load_predictor(path, device="cpu").resize == "letterbox"
    # A card written before letterboxing existed: no resize_mode, so it keeps stretching.
    old = card.to_dict()
    old["preprocessing"] = {"resize": "whole image stretched to image_size x image_size"}
    old_card = ModelCard.from_dict(old)
    old_path = save_checkpoint(tmp_path / "old.pt", model=model, card=old_card)
    predictor = load_predictor(old_path, device="cpu")
    assert predictor.resize == "stretch"
    [result] = predictor.predict([np.random.default_rng(0).random((80, 40), dtype=np.float32)])
    assert result.geometry == Geometry(80, 40, 64, 0, 0, 64, 64)
    assert Predictor(model, old_card, device=torch.device("cpu"), resize="letterbox").resize == (
        "letterbox"
    )
    assert resize_mode_of(None) == "stretch"
    with pytest.raises(ValueError, match="resize_mode"):
        resize_mode_of({"resize_mode": "crop"})


def test_real_network_boxes_stay_inside_non_square_image(demo_checkpoint: Path) -> None:
    predictor = load_predictor(demo_checkpoint, device="cpu")
    predictor.thresholds = dict.fromkeys(predictor.labels, 0.0)
    image = np.random.default_rng(2).random((150, 90), dtype=np.float32)
    [result] = predictor.predict([image], heatmaps="all")
    assert result.geometry == Geometry.fit(150, 90, 64, "letterbox")
    for b in result.boxes:
        assert b.x >= 0 and b.x + b.width <= 90 + 1e-6
        assert b.y >= 0 and b.y + b.height <= 150 + 1e-6
    assert all(h.cam.shape == (2, 2) for h in result.heatmaps.values())  # 64 px at stride 32
