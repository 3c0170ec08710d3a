"""Heatmap overlays for people: the grey radiograph with a colour heatmap and boxes."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from models.boxes import Box

__all__ = ["render_overlay"]


def render_overlay(
    pixels: np.ndarray,
    heatmap: np.ndarray,
    *,
    boxes: Iterable[Box] = (),
    alpha: float = 0.4,
    max_side: int | None = 1024,
) -> bytes:
    """Blend a heatmap (jet colours) over a grey image, draw boxes, encode as PNG.

    Args:
        pixels: (rows, columns) grey image in [0, 1].
        heatmap: (rows, columns) heatmap in [0, 1] (other shapes are resized to fit).
        boxes: boxes in `pixels` coordinates, drawn with their label and score.
        alpha: heatmap weight in the blend.
        max_side: downscale the output so its longer side is at most this (None: keep).

    Returns:
        PNG file bytes (RGB).

    Raises:
        ValueError: `pixels` is not 2-D.
    """
    import cv2

    if pixels.ndim != 2:
        raise ValueError(f"render_overlay: pixels must be (rows, columns), got {pixels.shape}")
    rows, columns = pixels.shape
    grey = (np.clip(pixels, 0, 1) * 255 + 0.5).astype(np.uint8)
    heat = np.asarray(heatmap, np.float32)
    if heat.shape != pixels.shape:
        heat = np.asarray(cv2.resize(heat, (columns, rows), interpolation=cv2.INTER_LINEAR))
    heat8 = (np.clip(heat, 0, 1) * 255 + 0.5).astype(np.uint8)
    colour = cv2.applyColorMap(heat8, cv2.COLORMAP_JET)
    img = cv2.addWeighted(cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR), 1 - alpha, colour, alpha, 0)
    scale = 1.0
    if max_side is not None and max(rows, columns) > max_side:
        scale = max_side / max(rows, columns)
        size = (round(columns * scale), round(rows * scale))
        img = np.asarray(cv2.resize(img, size, interpolation=cv2.INTER_AREA))
    thick = max(1, round(max(img.shape[:2]) / 400))
    for b in boxes:
        p0 = (round(b.x * scale), round(b.y * scale))
        p1 = (round((b.x + b.width) * scale), round((b.y + b.height) * scale))
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
