"""Bounding boxes from heatmaps, the paper's way (Wang et al. 2017, section 4.2):
normalise each heatmap to [0, 255], threshold it at heatmap levels (60 and 180), and box
each connected component (OpenCV). `suppress_overlapping` then keeps one box per nested or
overlapping group (non-maximum suppression by IoBB), so a reader sees each region once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_BOX_THRESHOLDS",
    "NMS_IOBB",
    "Box",
    "boxes_from_heatmap",
    "overlap_of_smaller",
    "scored_boxes",
    "suppress_overlapping",
    "to_uint8",
]

DEFAULT_BOX_THRESHOLDS: tuple[int, ...] = (60, 180)
# Two boxes of one label overlap when their intersection covers at least this fraction of
# the smaller one (IoBB taken the way that flags nesting): the paper's IoBB-0.5 bar.
NMS_IOBB = 0.5


@dataclass(frozen=True)
class Box:
    """An axis-aligned box in ORIGINAL image pixel coordinates (x right, y down).

    `score` is in [0, 1]: the component's peak heat, times the label probability when
    produced by `Predictor`. `heatmap_level` is the [0, 255] level of the min/max
    normalised heatmap whose connected component it boxes (not a probability threshold).
    """

    label: str
    x: float
    y: float
    width: float
    height: float
    score: float
    heatmap_level: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: label, x, y, width, height, score, heatmap_level."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Box:
        """Rebuild a box from `to_dict` output, also as written before the heatmap level
        was named (key "threshold")."""
        level = data.get("heatmap_level", data.get("threshold"))
        return cls(
            label=str(data["label"]),
            x=float(data["x"]),
            y=float(data["y"]),
            width=float(data["width"]),
            height=float(data["height"]),
            score=float(data["score"]),
            heatmap_level=None if level is None else int(level),
        )


def cv2_min_max(image: np.ndarray) -> tuple[float, float]:
    """Smallest and largest value of a 2-D array (OpenCV: one pass, no temporaries)."""
    import cv2

    low, high = cv2.minMaxLoc(image)[:2]
    return float(low), float(high)


def to_uint8(heatmap: np.ndarray) -> np.ndarray:
    """Min/max normalise a heatmap to uint8 [0, 255] (a flat map becomes all zeros)."""
    if heatmap.dtype == np.uint8:
        low, high = cv2_min_max(heatmap)
        if low == 0 and high == 255:  # already normalised (`models.predict` does it on the device)
            return heatmap
    h = np.asarray(heatmap, dtype=np.float32)
    lo, hi = float(h.min()), float(h.max())
    if not hi > lo:
        return np.zeros(h.shape, dtype=np.uint8)
    out: np.ndarray = np.clip((h - lo) * (255.0 / (hi - lo)) + 0.5, 0, 255).astype(np.uint8)
    return out


def boxes_from_heatmap(
    heatmap: np.ndarray,
    *,
    label: str,
    thresholds: Sequence[int] = DEFAULT_BOX_THRESHOLDS,
    scale: tuple[float, float] = (1.0, 1.0),
    min_area: int = 1,
    min_extent: float = 0.0,
    max_boxes: int | None = None,
) -> list[Box]:
    """Box the connected components of a thresholded heatmap.

    Args:
        heatmap: (H, W) array, any range (min/max normalised to [0, 255] here).
        label: label name put on each box.
        thresholds: [0, 255] levels; a component is pixels >= level (8-connected).
        scale: (sx, sy) factors from heatmap pixels to original pixels, e.g.
            (columns / W, rows / H).
        min_area: components smaller than this many heatmap pixels are dropped.
        min_extent: boxes whose extent, width times height in heatmap pixels as the box
            gives them (after rounding), is below this are dropped (before their peak is
            looked up: a noisy map has thousands of specks).
        max_boxes: keep at most this many, highest score first (None: all).

    Returns:
        Boxes in original pixel coordinates, highest score first.
    """
    import cv2

    h8 = to_uint8(heatmap)
    sx, sy = scale
    out: list[Box] = []
    for t in thresholds:
        if not 0 <= t <= 255:
            raise ValueError(f"box threshold must be in [0, 255], got {t}")
        if t == 0:
            continue
        # h8 >= t as 0/1 in one vectorised pass (NumPy's compare and cast took two).
        mask = cv2.threshold(h8, t - 1, 1, cv2.THRESH_BINARY)[1]
        # Components only where the mask has pixels: the labelling is the costly step
        # (a 1024 px map: 5.7 ms over the whole grid), and a high level's mask is small.
        x0, y0, cw, ch = cv2.boundingRect(mask)
        if cw == 0 or ch == 0:
            continue
        region = mask[y0 : y0 + ch, x0 : x0 + cw]
        # 16-bit labels write half the bytes (2.7x faster); a w x h mask has at most
        # ceil(w/2) * ceil(h/2) 8-connected components (one per 2x2 block).
        small = ((cw + 1) // 2) * ((ch + 1) // 2) < 65535
        ltype = cv2.CV_16U if small else cv2.CV_32S
        n, labels, stats, _ = cv2.connectedComponentsWithStats(region, connectivity=8, ltype=ltype)
        for i in range(1, n):
            x, y, w, hh, area = (int(v) for v in stats[i])
            if area < min_area:
                continue
            width, height = round(w * sx, 1), round(hh * sy, 1)
            if min_extent > 0 and (width / sx) * (height / sy) < min_extent:
                continue
            # The peak within the component's own box: one pass over that box, not over
            # the whole map per component (a noisy map has hundreds of them).
            inside = labels[y : y + hh, x : x + w] == i
            peak = float(h8[y0 + y : y0 + y + hh, x0 + x : x0 + x + w][inside].max()) / 255.0
            x, y = x + x0, y + y0
            out.append(
                Box(
                    label=label,
                    x=round(x * sx, 1),
                    y=round(y * sy, 1),
                    width=width,
                    height=height,
                    score=round(peak, 4),
                    heatmap_level=int(t),
                )
            )
    # Ties broken by place, not by the labelling's numbering (which the crop changes).
    out.sort(key=lambda b: (-b.score, -(b.width * b.height), b.y, b.x, b.heatmap_level or 0))
    return out[:max_boxes] if max_boxes is not None else out


def overlap_of_smaller(a: Box, b: Box) -> float:
    """Intersection over the smaller box's area: 1 when one box lies inside the other."""
    w = min(a.x + a.width, b.x + b.width) - max(a.x, b.x)
    h = min(a.y + a.height, b.y + b.height) - max(a.y, b.y)
    smaller = min(a.width * a.height, b.width * b.height)
    return max(w, 0.0) * max(h, 0.0) / smaller if smaller > 0 else 0.0


def suppress_overlapping(boxes: Sequence[Box], *, iobb: float = NMS_IOBB) -> list[Box]:
    """Non-maximum suppression by IoBB, per label: of boxes of one label that nest or
    overlap (`overlap_of_smaller` >= `iobb`), keep the best.

    Best is the highest score, then the highest heatmap level (the tighter box around the
    same peak: the paper's two levels box one component twice), then the smaller area.

    Args:
        boxes: any boxes, any labels.
        iobb: overlap in [0, 1] at which the weaker box is dropped.

    Returns:
        The kept boxes, highest score first.
    """
    ranked = sorted(boxes, key=lambda b: (-b.score, -(b.heatmap_level or 0), b.width * b.height))
    if len(ranked) < 2:
        return ranked
    # Each kept box strikes out the later boxes of its label that it overlaps, in one
    # vectorised pass: a noisy map gives hundreds of components, and comparing each with
    # every kept box in Python took 30 ms a map. Same float64 arithmetic as
    # `overlap_of_smaller` (symmetric), so the same boxes are kept.
    x0 = np.array([b.x for b in ranked])
    y0 = np.array([b.y for b in ranked])
    x1 = x0 + np.array([b.width for b in ranked])
    y1 = y0 + np.array([b.height for b in ranked])
    area = np.array([b.width * b.height for b in ranked])
    names = {name: k for k, name in enumerate(dict.fromkeys(b.label for b in ranked))}
    label = np.array([names[b.label] for b in ranked])
    struck = np.zeros(len(ranked), dtype=bool)
    kept: list[Box] = []
    for i, box in enumerate(ranked):
        if struck[i]:
            continue
        kept.append(box)
        w = np.minimum(x1[i], x1) - np.maximum(x0[i], x0)
        h = np.minimum(y1[i], y1) - np.maximum(y0[i], y0)
        smaller = np.minimum(area[i], area)
        inter = np.maximum(w, 0.0) * np.maximum(h, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            overlap = np.where(smaller > 0, inter / np.where(smaller > 0, smaller, 1.0), 0.0)
        struck |= (label == label[i]) & (overlap >= iobb)
    return kept


def scored_boxes(boxes: Sequence[Box], *, probability: float, threshold: float) -> list[Box]:
    """A positive label's boxes as shown by default: each box's score becomes its peak
    heat times the label probability, and boxes scoring below the label's operating
    threshold are dropped (weak side peaks of the heatmap: the component holding the
    map's maximum, score = probability >= threshold, always stays).

    Args:
        boxes: one label's boxes from `boxes_from_heatmap` (score = peak heat in [0, 1]).
        probability: the label's probability.
        threshold: the label's operating threshold.

    Returns:
        The kept boxes, scores rounded to 4 decimals, in the input order.
    """
    return [
        replace(b, score=round(b.score * probability, 4))
        for b in boxes
        if b.score * probability >= threshold
    ]
