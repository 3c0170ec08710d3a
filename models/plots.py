"""Evaluation plots as PNG bytes, drawn with Pillow (a dependency; matplotlib is not):
ROC curves per label and reliability diagrams before/after calibration."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

import numpy as np
from PIL import Image, ImageDraw

__all__ = ["reliability_png", "roc_png"]

_SIZE = 520
_MARGIN = 56
_PALETTE = (
    (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
    (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207),
    (0, 0, 128), (128, 128, 0), (0, 128, 128), (128, 0, 0),
)  # fmt: skip


def _canvas(title: str, xlabel: str, ylabel: str) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    im = Image.new("RGB", (_SIZE, _SIZE), "white")
    draw = ImageDraw.Draw(im)
    lo, hi = _MARGIN, _SIZE - _MARGIN
    for k in range(11):
        v = lo + (hi - lo) * k / 10
        draw.line([(v, lo), (v, hi)], fill=(235, 235, 235))
        draw.line([(lo, v), (hi, v)], fill=(235, 235, 235))
        if k % 2 == 0:
            draw.text((v - 8, hi + 6), f"{k / 10:.1f}", fill="black")
            draw.text((lo - 30, _SIZE - v - 6), f"{k / 10:.1f}", fill="black")
    draw.rectangle([lo, lo, hi, hi], outline="black")
    draw.line([(lo, hi), (hi, lo)], fill=(160, 160, 160))  # the diagonal: chance / perfect
    draw.text((lo, 18), title, fill="black")
    draw.text((_SIZE // 2 - 40, _SIZE - 24), xlabel, fill="black")
    draw.text((6, lo - 16), ylabel, fill="black")
    return im, draw


def _xy(x: float, y: float) -> tuple[float, float]:
    span = _SIZE - 2 * _MARGIN
    return _MARGIN + x * span, _SIZE - _MARGIN - y * span


def _png(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG")
    return buf.getvalue()


def roc_png(curves: Mapping[str, tuple[np.ndarray, np.ndarray, float]], *, title: str) -> bytes:
    """ROC curves, one colour per label, AUC in the legend.

    Args:
        curves: label -> (false positive rates, true positive rates, AUC); labels with
            empty curves (one class only) are left out.
        title: drawn at the top.

    Returns:
        PNG bytes.
    """
    im, draw = _canvas(title, "false positive rate", "true positive rate")
    row = 0
    for k, (name, (fpr, tpr, auc)) in enumerate(curves.items()):
        if len(fpr) == 0:
            continue
        colour = _PALETTE[k % len(_PALETTE)]
        draw.line([_xy(float(a), float(b)) for a, b in zip(fpr, tpr, strict=True)], fill=colour,
                  width=2)  # fmt: skip
        lx, ly = _xy(0.45, 0.05 + 0.045 * row)
        draw.line([(lx, ly + 6), (lx + 18, ly + 6)], fill=colour, width=3)
        draw.text((lx + 24, ly), f"{name[:18]} AUC {auc:.3f}", fill="black")
        row += 1
    return _png(im)


def reliability_png(
    series: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray, float]], *, title: str
) -> bytes:
    """Reliability diagram: observed positive rate against mean predicted probability per
    confidence bin, one line per series (e.g. "before" and "after" calibration).

    Args:
        series: name -> (mean probability per bin, observed rate per bin, count per bin,
            ECE); empty bins (count 0) are skipped.
        title: drawn at the top.

    Returns:
        PNG bytes.
    """
    im, draw = _canvas(title, "mean predicted probability", "observed frequency")
    for k, (name, (conf, freq, count, ece)) in enumerate(series.items()):
        colour = _PALETTE[k % len(_PALETTE)]
        points: Sequence[tuple[float, float]] = [
            _xy(float(c), float(f)) for c, f, n in zip(conf, freq, count, strict=True) if n > 0
        ]
        if len(points) > 1:
            draw.line(list(points), fill=colour, width=2)
        for px, py in points:
            draw.ellipse([px - 3, py - 3, px + 3, py + 3], fill=colour)
        lx, ly = _xy(0.05, 0.95 - 0.05 * k)
        draw.line([(lx, ly + 6), (lx + 18, ly + 6)], fill=colour, width=3)
        draw.text((lx + 24, ly), f"{name}: ECE {ece:.3f}", fill="black")
    return _png(im)
