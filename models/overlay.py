"""Heatmap overlays for people: the grey radiograph with a colour heatmap and boxes.

The one renderer of the service's overlay PNGs and of `cxr predict --overlays`; the web
page draws its boxes itself but takes their colours from `PALETTE` (served in its config).
Rendered on demand at display size from a small grey copy of the image and a
map-resolution `Heatmap`, so no full-resolution colour or float array is ever made.

Two rules make the overlay readable:
- The heatmap's low end is transparent: where the map is at most `HEAT_FLOOR` the
  radiograph's pixels are unchanged, and the colour fades in above it, so a weak map does
  not tint the whole film.
- Box captions never overlap: each is placed, best box first, at the first free spot near
  its box (`layout_captions`), on a dark plate, in a font that scales with the image.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from models.boxes import Box
from models.heatmaps import Heatmap
from models.transforms import fit_long_side

__all__ = [
    "DEFAULT_OVERLAY_SIZE",
    "HEAT_FLOOR",
    "PALETTE",
    "Caption",
    "caption_height",
    "colour_of",
    "layout_captions",
    "render_overlay",
]

DEFAULT_OVERLAY_SIZE = 1024
# Heat at or below this leaves the pixel as it is; the colour reaches `alpha` at HEAT_FULL.
HEAT_FLOOR = 0.2
HEAT_FULL = 0.6
# One colour per label, by the label's position in the model's list (the page uses these).
PALETTE = (
    "#ff6b5e",
    "#4fc3f7",
    "#ffd54f",
    "#81c784",
    "#ba68c8",
    "#ff8a65",
    "#4db6ac",
    "#f06292",
    "#aed581",
    "#7986cb",
    "#e57373",
    "#4dd0e1",
    "#fff176",
    "#a1887f",
)
_FONT_HEIGHT_AT_SCALE_1 = 22  # cv2.FONT_HERSHEY_SIMPLEX cap-to-descender, thickness 1


def colour_of(label: str, labels: Sequence[str]) -> str:
    """The label's colour (`#rrggbb`): PALETTE by its index in `labels` (first if absent)."""
    index = list(labels).index(label) if label in labels else 0
    return PALETTE[index % len(PALETTE)]


def _bgr(colour: str) -> tuple[int, int, int]:
    value = int(colour.lstrip("#"), 16)
    return value & 0xFF, (value >> 8) & 0xFF, value >> 16


def caption_height(rows: int, columns: int) -> int:
    """Caption text height in output pixels: about 1/45 of the longer side, at least 11."""
    return max(11, round(max(rows, columns) / 45))


def _font(rows: int, columns: int) -> tuple[float, int, int]:
    """(OpenCV font scale, stroke thickness, plate padding) for an output image."""
    height = caption_height(rows, columns)
    return height / _FONT_HEIGHT_AT_SCALE_1, max(1, round(height / 12)), max(1, height // 5)


@dataclass(frozen=True)
class Caption:
    """A placed caption: its text and its plate (x, y, width, height) in output pixels."""

    text: str
    box_index: int
    x: int
    y: int
    width: int
    height: int

    def intersects(self, other: Caption) -> bool:
        """Whether the two plates share any pixel."""
        return (
            self.x < other.x + other.width
            and other.x < self.x + self.width
            and self.y < other.y + other.height
            and other.y < self.y + self.height
        )


def layout_captions(
    boxes: Sequence[tuple[str, int, int, int, int]], rows: int, columns: int
) -> list[Caption]:
    """Place one caption per box, best box first, so that no two plates overlap.

    Args:
        boxes: (text, x, y, width, height) per box in output pixels, best first.
        rows, columns: the output image's size (plates stay inside it).

    Returns:
        The captions placed, in box order; a box whose caption finds no free spot among
        the candidates (above, inside the top, below, then further down) gets none.
    """
    import cv2

    scale, thick, pad = _font(rows, columns)
    placed: list[Caption] = []
    for index, (text, x, y, _w, h) in enumerate(boxes):
        (tw, th), base = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, thick)
        pw, ph = tw + 2 * pad, th + base + 2 * pad
        left = min(max(0, x), max(0, columns - pw))
        tops = [y - ph, y, y + h] + [y + h + k * ph for k in range(1, 17)]
        for top in tops:
            top = min(max(0, top), max(0, rows - ph))
            candidate = Caption(text, index, left, top, pw, ph)
            if not any(candidate.intersects(c) for c in placed):
                placed.append(candidate)
                break
    return placed


def render_overlay(
    image: np.ndarray,
    heatmap: Heatmap | np.ndarray,
    *,
    boxes: Iterable[Box] = (),
    labels: Sequence[str] = (),
    original_size: tuple[int, int] | None = None,
    alpha: float = 0.5,
    max_side: int | None = DEFAULT_OVERLAY_SIZE,
) -> bytes:
    """Blend a heatmap over a grey image (low end transparent), draw boxes, encode as PNG.

    Args:
        image: (rows, columns) grey image, float in [0, 1] or uint8: the original or any
            smaller copy with the same aspect ratio (a display copy).
        heatmap: a `Heatmap` (projected straight to the output size), or a (h, w) array in
            [0, 1] covering the image (resized to fit).
        boxes: boxes in ORIGINAL image pixels, drawn with their label and score, best first.
        labels: the model's labels, which give each box its colour (`colour_of`).
        original_size: (rows, columns) of the original image; default the heatmap's
            geometry, else `image.shape`.
        alpha: the heatmap's weight where it is strongest; where it is at most
            `HEAT_FLOOR` the image is unchanged.
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
    heat = np.clip(np.asarray(heat, np.float32), 0, 1)
    colour = cv2.applyColorMap((heat * 255 + 0.5).astype(np.uint8), cv2.COLORMAP_JET)
    base = cv2.cvtColor(grey, cv2.COLOR_GRAY2BGR)
    weight = alpha * np.clip((heat - HEAT_FLOOR) / (HEAT_FULL - HEAT_FLOOR), 0, 1)[..., None]
    img = base.copy()
    shown = weight[..., 0] > 0  # below the floor the pixels stay exactly as they were
    img[shown] = (base[shown] * (1 - weight[shown]) + colour[shown] * weight[shown] + 0.5).astype(
        np.uint8
    )
    sx, sy = columns / original[1], rows / original[0]
    thick = max(1, round(max(rows, columns) / 400))
    drawn = sorted(boxes, key=lambda b: -b.score)  # the best box captioned first
    placed_boxes = []
    for b in drawn:
        x0, y0 = round(b.x * sx), round(b.y * sy)
        x1, y1 = round((b.x + b.width) * sx), round((b.y + b.height) * sy)
        cv2.rectangle(img, (x0, y0), (x1, y1), _bgr(colour_of(b.label, labels)), thick)
        placed_boxes.append((f"{b.label} {b.score:.2f}", x0, y0, x1 - x0, y1 - y0))
    scale, text_thick, pad = _font(rows, columns)
    for caption in layout_captions(placed_boxes, rows, columns):
        b = drawn[caption.box_index]
        x, y, w, h = caption.x, caption.y, caption.width, caption.height
        plate = img[y : y + h, x : x + w]
        plate[:] = (plate * 0.25).astype(np.uint8)  # a dark plate: legible on any film
        (_, th), _ = cv2.getTextSize(caption.text, cv2.FONT_HERSHEY_SIMPLEX, scale, text_thick)
        cv2.putText(
            img,
            caption.text,
            (x + pad, y + pad + th),
            cv2.FONT_HERSHEY_SIMPLEX,
            scale,
            _bgr(colour_of(b.label, labels)),
            text_thick,
            cv2.LINE_AA,
        )
    ok, buf = cv2.imencode(".png", img)
    if not ok:  # pragma: no cover - OpenCV PNG encoding does not fail on uint8 BGR
        raise ValueError("render_overlay: PNG encoding failed")
    return bytes(buf.tobytes())
