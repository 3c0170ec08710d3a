"""Class activation maps and heatmap boxes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from models.boxes import Box, boxes_from_heatmap, to_uint8
from models.cam import cam_to_image, compute_cams, interpolation_matrix
from models.network import build_model


def test_cam_shapes_follow_input() -> None:
    model = build_model(arch="resnet18", num_labels=4, weights=None, pooling="avg").eval()
    x = torch.rand(2, 1, 96, 64)
    with torch.no_grad():
        logits, cams = compute_cams(model, x)
    assert logits.shape == (2, 4)
    assert cams.shape == (2, 4, 6, 4)  # S = input / 16 (the default output stride)


def test_cam_mean_equals_logit_with_average_pooling() -> None:
    model = build_model(arch="resnet18", num_labels=3, weights=None, pooling="avg").eval()
    with torch.no_grad():
        logits, cams = compute_cams(model, torch.rand(1, 1, 64, 64))
    # CAM is linear in the maps: averaging it over positions gives the logit back.
    assert torch.allclose(cams.mean(dim=(2, 3)), logits, atol=1e-4)


def test_cam_to_image_maps_hot_cell_to_original_pixels() -> None:
    cam = np.zeros((4, 4), np.float32)
    cam[0, 3] = 1.0  # top-right cell, centred on input pixel (0, 96) of a 128 input
    heat = cam_to_image(cam, rows=200, columns=100, input_size=128)
    assert heat.shape == (200, 100) and heat.dtype == np.float32
    assert heat.min() == 0.0 and heat.max() == pytest.approx(1.0)
    y, x = np.unravel_index(np.argmax(heat), heat.shape)
    # input x 96 -> original (96 + 0.5) * 100 / 128 - 0.5 = 74.9; input y 0 -> row 0.
    assert y == 0 and x == 75
    torch_heat = cam_to_image(torch.from_numpy(cam), rows=200, columns=100, input_size=128)
    assert np.allclose(torch_heat, heat)


def test_interpolation_matrix_puts_cell_i_on_pixel_stride_times_i() -> None:
    # ResNet cells are centred on input pixel stride * i ("same" padding everywhere).
    w = interpolation_matrix(64, 4, 64)
    assert np.allclose(w.sum(axis=1), 1.0)
    for i in range(4):
        assert w[16 * i, i] == pytest.approx(1.0)
    assert w[8, 0] == pytest.approx(0.5) and w[8, 1] == pytest.approx(0.5)


@pytest.mark.parametrize("stages", [3, 4])
def test_receptive_field_centre_matches_geometry(stages: int) -> None:
    # With every conv weight positive the receptive field is symmetric around its
    # centre: the input gradient of one cell peaks where `interpolation_matrix` says.
    # stages=4 is the dilated last stage: the cell centres must not move.
    model = build_model(arch="resnet18", num_labels=1, weights=None, output_stride=16,
                        body_stages=stages).eval()  # fmt: skip
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.Conv2d):
                m.weight.fill_(0.01)
    model.body[3] = torch.nn.AvgPool2d(3, 2, 1)  # max-pool ties on a flat input favour top-left
    # The dilated stage sees much further: a larger input keeps the image border (which
    # would make the field lopsided) out of the half-maximum region.
    side, cell = (160, 5) if stages == 3 else (448, 14)
    x = torch.full((1, 1, side, side), 0.5, requires_grad=True)
    features = model.forward_features(x)
    features[0, :, cell, cell].sum().backward()  # centred on pixel 16 * cell
    g = x.grad[0, 0].abs().numpy()  # type: ignore[union-attr]
    ys, xs = np.nonzero(g > 0.5 * g.max())
    assert (ys.min() + ys.max()) / 2 == pytest.approx(16 * cell, abs=0.5)
    assert (xs.min() + xs.max()) / 2 == pytest.approx(16 * cell, abs=0.5)


def _blob(h: int, w: int, cy: float, cx: float, sigma: float) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    return np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * sigma**2)).astype(np.float32)


def test_boxes_from_heatmap_finds_blob_at_known_place() -> None:
    heat = _blob(64, 64, cy=20, cx=40, sigma=4)
    boxes = boxes_from_heatmap(heat, label="Nodule")
    assert {b.heatmap_level for b in boxes} == {60, 180}
    for b in boxes:
        assert b.label == "Nodule"
        assert b.x <= 40 <= b.x + b.width and b.y <= 20 <= b.y + b.height
    small = next(b for b in boxes if b.heatmap_level == 180)
    large = next(b for b in boxes if b.heatmap_level == 60)
    assert small.width * small.height < large.width * large.height


def test_boxes_from_heatmap_scales_to_original_and_splits_components() -> None:
    heat = _blob(32, 32, 8, 8, 2) + _blob(32, 32, 24, 24, 2)
    boxes = boxes_from_heatmap(heat, label="Mass", thresholds=(128,), scale=(10.0, 20.0))
    assert len(boxes) == 2
    centres = sorted((b.x + b.width / 2, b.y + b.height / 2) for b in boxes)
    assert centres[0] == pytest.approx((85, 170), abs=15)
    assert centres[1] == pytest.approx((245, 490), abs=15)


def test_boxes_from_flat_heatmap_is_empty_and_threshold_checked() -> None:
    assert boxes_from_heatmap(np.ones((8, 8)), label="X") == []
    assert to_uint8(np.ones((2, 2))).max() == 0
    with pytest.raises(ValueError, match=r"\[0, 255\]"):
        boxes_from_heatmap(_blob(8, 8, 4, 4, 1), label="X", thresholds=(300,))


@pytest.mark.issue(22)
def _boxes_over_whole_grid(heatmap: np.ndarray, thresholds: tuple[int, ...]) -> list[tuple]:
    """Reference: 32-bit labelling of the whole grid, what `boxes_from_heatmap` does in a
    crop with 16-bit labels where they provably suffice."""
    import cv2

    h8 = to_uint8(heatmap)
    found = []
    for t in thresholds:
        mask = (h8 >= t).astype(np.uint8)
        n, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
        peaks = np.zeros(n, np.int64)
        np.maximum.at(peaks, labels.ravel(), h8.ravel())
        for i in range(1, n):
            x, y, w, h, _ = (int(v) for v in stats[i])
            peak = round(float(peaks[i]) / 255.0, 4)
            found.append((float(x), float(y), float(w), float(h), peak, t))
    return sorted(found)


@pytest.mark.parametrize("kind", ["noise", "blobs", "checkerboard", "one_peak", "edges"])
def test_boxes_from_heatmap_match_labelling_the_whole_grid(kind: str) -> None:
    rng = np.random.default_rng(len(kind))
    for _ in range(6):
        side = 100 if kind == "checkerboard" else 260  # (box per component: keep it quick)
        h, w = (int(v) for v in rng.integers(2, side, 2))
        m = np.zeros((h, w), np.float32)
        if kind == "noise":
            m = rng.random((h, w)).astype(np.float32)
        elif kind == "blobs":
            for _ in range(4):
                y, x = rng.integers(0, h), rng.integers(0, w)
                m[max(0, y - 5) : y + 5, max(0, x - 7) : x + 7] += rng.random()
        elif kind == "checkerboard":  # the most components a grid can hold
            m[::2, ::2] = 1.0
        elif kind == "one_peak":
            m[rng.integers(0, h), rng.integers(0, w)] = 1.0
        else:  # components touching every border
            m[0, :] = m[-1, :] = m[:, 0] = m[:, -1] = 1.0
        thresholds = (1, 60, 180, 255)
        got = boxes_from_heatmap(m, label="x", thresholds=thresholds)
        assert sorted(
            (b.x, b.y, b.width, b.height, b.score, b.heatmap_level) for b in got
        ) == _boxes_over_whole_grid(m, thresholds)
        keys = [(-b.score, -b.width * b.height, b.y, b.x) for b in got]
        assert keys == sorted(keys)  # ties broken by place: the same order every time


def test_boxes_from_heatmap_labels_a_grid_beyond_16_bits() -> None:
    m = np.zeros((520, 520), np.float32)
    m[::2, ::2] = 1.0  # 67,600 components: more than 16-bit labels hold
    got = boxes_from_heatmap(m, label="x", thresholds=(128,))
    assert len(got) == 260 * 260


def test_suppress_overlapping_merges_nested_boxes_of_one_label_only() -> None:
    from models.boxes import Box, suppress_overlapping

    outer = Box("Mass", 10, 10, 40, 40, 0.8, heatmap_level=60)
    inner = Box("Mass", 20, 20, 10, 10, 0.8, heatmap_level=180)  # same peak, nested
    apart = Box("Mass", 100, 100, 10, 10, 0.3, heatmap_level=60)
    other = Box("Nodule", 20, 20, 10, 10, 0.5, heatmap_level=180)  # another label stays
    kept = suppress_overlapping([outer, apart, inner, other])
    assert kept == [inner, other, apart]  # the tighter box of the shared peak wins


@pytest.mark.issue(22)
def test_scored_boxes_keep_only_boxes_at_the_label_threshold() -> None:
    from models.boxes import Box, scored_boxes

    peak = Box("Mass", 0, 0, 10, 10, 1.0, heatmap_level=60)
    side = Box("Mass", 50, 50, 10, 10, 0.5, heatmap_level=60)
    kept = scored_boxes([peak, side], probability=0.8, threshold=0.6)
    assert [(b.x, b.score) for b in kept] == [(0, 0.8)]  # 0.5 * 0.8 = 0.4 < 0.6
    assert len(scored_boxes([peak, side], probability=0.8, threshold=0.0)) == 2


@pytest.mark.issue(22)
def test_boxes_from_cam_drop_specks_finer_than_one_map_cell() -> None:
    from models.heatmaps import boxes_from_cam
    from models.transforms import Geometry

    cam = np.zeros((8, 8), np.float32)
    cam[2:5, 2:5] = 1.0  # a blob of a few cells
    cam[6, 1] = 0.24  # a speck: its 60-level component is a few pixels, under one cell
    geo = Geometry.fit(512, 512, 128, "letterbox")  # 16 input px per cell, 64 original px
    boxes = boxes_from_cam(cam, geo, label="Mass")
    assert boxes and all(b.width * b.height >= 64 * 64 for b in boxes)
    # The blob is boxed once (its 60 and 180 boxes nest), and the speck is gone.
    assert len(boxes) == 1 and boxes[0].x < 5 * 64


@pytest.mark.issue(22)
def test_box_from_dict_reads_the_old_threshold_key() -> None:
    from models.boxes import Box

    old = {"label": "Mass", "x": 1, "y": 2, "width": 3, "height": 4, "score": 0.5, "threshold": 60}
    assert Box.from_dict(old).heatmap_level == 60
    box = Box("Mass", 1, 2, 3, 4, 0.5, heatmap_level=180)
    assert Box.from_dict(box.to_dict()) == box and "threshold" not in box.to_dict()


def _suppress_one_by_one(boxes: list[Box], iobb: float) -> list[Box]:
    """The plain greedy loop `suppress_overlapping` vectorises: the reference."""
    from models.boxes import overlap_of_smaller

    ranked = sorted(boxes, key=lambda b: (-b.score, -(b.heatmap_level or 0), b.width * b.height))
    kept: list[Box] = []
    for box in ranked:
        if all(k.label != box.label or overlap_of_smaller(k, box) < iobb for k in kept):
            kept.append(box)
    return kept


@pytest.mark.parametrize("seed", range(40))
def test_suppress_overlapping_keeps_what_the_greedy_loop_keeps(seed: int) -> None:
    from models.boxes import suppress_overlapping

    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    # Grid-aligned coordinates make exact ties, shared edges and nesting common; empty
    # boxes (width or height 0) overlap nothing.
    boxes = [
        Box(
            str(rng.choice(["Mass", "Nodule"])),
            float(rng.integers(0, 8) * 8),
            float(rng.integers(0, 8) * 8),
            float(rng.integers(0, 5) * 8),
            float(rng.integers(0, 5) * 8),
            float(rng.choice([0.5, 0.25, round(float(rng.random()), 4)])),
            int(rng.choice([60, 180])),
        )
        for _ in range(n)
    ]
    for iobb in (0.0, 0.3, 0.5, 1.0):
        assert suppress_overlapping(boxes, iobb=iobb) == _suppress_one_by_one(boxes, iobb)


def test_boxes_from_cam_skip_specks_before_their_peak_exactly_as_after() -> None:
    from models.heatmaps import boxes_from_cam, project_cam
    from models.transforms import Geometry

    # A noisy map: a blob and hundreds of specks at the lower level.
    rng = np.random.default_rng(3)
    cam = (rng.random((32, 32)) * 0.5).astype(np.float32)
    cam[10:16, 12:20] += 1.0
    geo = Geometry.fit(700, 500, 256, "letterbox")
    got = boxes_from_cam(cam, geo, label="Mass")
    grid = project_cam(cam, geo, geo.height, geo.width)
    every = boxes_from_heatmap(grid, label="Mass", scale=geo.scale)
    cell = (256 / 32) ** 2
    sx, sy = geo.scale
    large = [b for b in every if (b.width / sx) * (b.height / sy) >= cell - 1e-6]
    assert len(every) > len(large) > 0  # specks there, and dropped
    assert got == _suppress_one_by_one(large, 0.5)
