"""The overlay renderer (models/overlay.py), checked on the pixels it writes: the heatmap's
low end leaves the radiograph unchanged, captions never overlap, scale with the image and
take their box's colour from the one palette."""

from __future__ import annotations

import numpy as np
import pytest

from models.boxes import Box
from models.overlay import (
    HEAT_FLOOR,
    PALETTE,
    caption_height,
    colour_of,
    layout_captions,
    render_overlay,
)

pytestmark = pytest.mark.issue(44)

LABELS = ["Effusion", "Mass", "Nodule"]


def _decode(png: bytes) -> np.ndarray:
    import cv2

    img = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
    assert img is not None
    return np.asarray(img)


def _film(rows: int, columns: int) -> np.ndarray:
    y, x = np.mgrid[0:rows, 0:columns]
    return ((x * 7 + y * 3) % 200 + 30).astype(np.uint8)


def test_overlay_low_heat_leaves_the_pixels_unchanged() -> None:
    grey = _film(120, 160)
    heat = np.zeros((120, 160), np.float32)
    heat[:, :60] = HEAT_FLOOR  # at the floor: transparent
    heat[:, 60:80] = 0.05
    heat[:, 100:] = 0.9
    img = _decode(render_overlay(grey, heat, max_side=None))
    assert img.shape == (120, 160, 3)
    # up to the floor: every channel is the grey pixel itself (no lavender film)
    for channel in range(3):
        assert np.array_equal(img[:, :80, channel], grey[:, :80])
    # a strong map is coloured
    hot = img[:, 100:].astype(int)
    assert np.abs(hot[..., 0] - hot[..., 2]).mean() > 20


def test_overlay_captions_never_overlap_and_stay_inside() -> None:
    # Five boxes on nearly the same spot, as a CAM's neighbouring peaks give them.
    boxes = [(f"Effusion 0.9{i}", 40 + i, 50 + i, 60, 40) for i in range(5)]
    boxes += [("Mass 0.80", 300, 0, 20, 20), ("Nodule 0.70", 310, 5, 10, 10)]
    placed = layout_captions(boxes, 240, 320)
    assert len(placed) == len(boxes)
    for i, a in enumerate(placed):
        assert a.x >= 0 and a.x + a.width <= 320 and a.y >= 0 and a.y + a.height <= 240
        for b in placed[i + 1 :]:
            assert not a.intersects(b), (a, b)


def test_overlay_caption_size_scales_with_the_image() -> None:
    small, large = caption_height(256, 256), caption_height(2048, 2048)
    assert small >= 11 and large >= 4 * small
    boxes = [("Effusion 0.97", 10, 30, 50, 50)]
    (a,) = layout_captions(boxes, 256, 256)
    (b,) = layout_captions([("Effusion 0.97", 80, 240, 400, 400)], 2048, 2048)
    assert b.height > 3.5 * a.height and b.width > 3.5 * a.width


def test_overlay_draws_boxes_and_captions_in_their_labels_colour() -> None:
    grey = np.full((200, 300), 128, np.uint8)
    heat = np.zeros((200, 300), np.float32)
    boxes = [Box("Mass", 100, 80, 60, 50, 0.9), Box("Effusion", 104, 84, 60, 50, 0.8)]
    img = _decode(render_overlay(grey, heat, boxes=boxes, labels=LABELS, max_side=None))
    for box in boxes:
        r, g, b = (int(colour_of(box.label, LABELS)[k : k + 2], 16) for k in (1, 3, 5))
        edge = img[int(box.y) + int(box.height) // 2, int(box.x)]  # middle of the left side
        assert tuple(int(c) for c in edge) == (b, g, r)
    # both captions are written (two plates darker than the film), none on the other
    dark = (img.max(axis=2) < 60).sum()
    assert dark > 0
    assert colour_of("Mass", LABELS) == PALETTE[1] and colour_of("Unknown", LABELS) == PALETTE[0]
