"""Heatmap overlays for people: the grey radiograph with a colour heatmap and boxes.

Rendered on demand at display size from a small grey copy of the image and a
map-resolution `Heatmap`, so no full-resolution colour or float array is ever made.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from models.boxes import Box
from models.heatmaps import Heatmap
from models.transforms import fit_long_side

__all__ = ["DEFAULT_OVERLAY_SIZE", "render_overlay"]

DEFAULT_OVERLAY_SIZE = 1024


def render_overlay(
    image: np.ndarray,
    heatmap: Heatmap | np.ndarray,
    *,
    boxes: Iterable[Box] = (),
    original_size: tuple[int, int] | None = None,
    alpha: float = 0.4,
    max_side: int | None = DEFAULT_OVERLAY_SIZE,
) -> bytes:
    """Blend a heatmap (jet colours) over a grey image, draw boxes, encode as PNG.

    Args:
        image: (rows, columns) grey image, float in [0, 1] or uint8: the original or any
            smaller copy with the same aspect ratio (a display copy).
        heatmap: a `Heatmap` (projected straight to the output size), or a (h, w) array in
            [0, 1] covering the image (resized to fit).
        boxes: boxes in ORIGINAL image pixels, drawn with their label and score.
        original_size: (rows, columns) of the original image; default the heatmap's
            geometry, else `image.shape`.
        alpha: heatmap weight in the blend.
        max_side: longer side of the output at most this (None: the image's size).

    Returns:
        PNG file bytes (RGB).

    Raises:
        ValueError: `image` is not 2-D.
    """
    import cv2

    if np.ndim(image) != 2:
        raise ValueError(f"render_overlay: image must be (rows, columns), got {np.shape(image)}")
    if image.dtype == np.uint8:
        grey = image
        if max_side is not None and max(grey.shape) > max_side:
            grey = (fit_long_side(grey.astype(np.float32) / 255.0, max_side) * 255 + 0.5).astype(
                np.uint8
            )
    else:
        small = fit_long_side(image, max_side) if max_side is not None else image
        grey = (np.clip(small, 0, 1) * 255 + 0.5).astype(np.uint8)
    rows, columns = grey.shape
    if isinstance(heatmap, Heatmap):
        heat = heatmap.render(rows, columns)
        original = original_size or (heatmap.geometry.rows, heatmap.geometry.columns)
    else:
        heat = np.asarray(heatmap, np.float32)
        if heat.shape != (rows, columns):
            heat = np.asarray(cv2.resize(heat, (columns, rows), interpolation=cv2.INTER_LINEAR))
        original = original_size or (int(image.shape[0]), int(image.shape[1]))
    heat8 = (np.clip(heat, 0, 1) * 255 + 0.5).astype(np.uint8)
    colour = cv2.applyColorMap(heat8, cv2.COLORMAP_JET)
    img = cv2.addWeighted(cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR), 1 - alpha, colour, alpha, 0)
    sx, sy = columns / original[1], rows / original[0]
    thick = max(1, round(max(rows, columns) / 400))
    for b in boxes:
        p0 = (round(b.x * sx), round(b.y * sy))
        p1 = (round((b.x + b.width) * sx), round((b.y + b.height) * sy))
        cv2.rectangle(img, p0, p1, (255, 255, 255), thick)
        cv2.putText(
            img,
            f"{b.label} {b.score:.2f}",
            (p0[0] + 2, max(p0[1] - 4, 12)),
            cv2.FONT_HERSHEY_SIMPLEX,
            0.4 * thick,
            (255, 255, 255),
            thick,
            cv2.LINE_AA,
        )
    ok, buf = cv2.imencode(".png", img)
    if not ok:  # pragma: no cover - OpenCV PNG encoding does not fail on uint8 BGR
        raise ValueError("render_overlay: PNG encoding failed")
    return bytes(buf.tobytes())
