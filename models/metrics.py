"""Metrics in plain NumPy: per-label ROC AUC and ROC curves, operating thresholds,
calibration error, and the paper's localization metrics (Wang et al. 2017, section 5.3,
Table 3).

Localization: for every ground-truth box, boxes are generated from the heatmap of its
label. A ground-truth box is found when some generated box overlaps it by at least T,
measured as IoBB (intersection over the *generated* box's area) or IoU.
Accuracy = found / ground-truth boxes; AFP (average false positives) = generated boxes
that overlap no ground-truth box of their label / images with that label.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from models.boxes import Box

__all__ = [
    "IOBB_THRESHOLDS",
    "IOU_THRESHOLDS",
    "GroundTruthBox",
    "choose_thresholds",
    "classification_metrics",
    "expected_calibration_error",
    "iobb",
    "iou",
    "localization_metrics",
    "reliability_bins",
    "roc_auc",
    "roc_curve",
]

IOBB_THRESHOLDS: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 0.9)
IOU_THRESHOLDS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)

XYWH = tuple[float, float, float, float]


@dataclass(frozen=True)
class GroundTruthBox:
    """A hand-drawn box: image, label, x, y, width, height (original pixels)."""

    image_index: str
    label: str
    x: float
    y: float
    width: float
    height: float

    @property
    def xywh(self) -> XYWH:
        return (self.x, self.y, self.width, self.height)


def _average_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    sorted_vals = values[order]
    # Ties share the mean of their ranks (Mann-Whitney U).
    boundaries = np.flatnonzero(np.diff(sorted_vals)) + 1
    starts = np.concatenate(([0], boundaries))
    ends = np.concatenate((boundaries, [len(values)]))
    for s, e in zip(starts, ends, strict=True):
        ranks[order[s:e]] = (s + e + 1) / 2.0
    return ranks


def roc_auc(y_true: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney form, ties counted half).

    Args:
        y_true: (N,) 0/1.
        scores: (N,) higher = more likely positive.

    Returns:
        AUC in [0, 1], or NaN when only one class is present.
    """
    y = np.asarray(y_true).astype(bool)
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = _average_ranks(np.asarray(scores, dtype=np.float64))
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def roc_curve(y_true: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ROC curve points, cutting only where the score changes.

    Args:
        y_true: (N,) 0/1.
        scores: (N,) higher = more likely positive.

    Returns:
        (false positive rates, true positive rates), each starting at 0 and ending at 1;
        empty arrays when only one class is present.
    """
    y = np.asarray(y_true).astype(bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return np.zeros(0), np.zeros(0)
    s = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-s, kind="mergesort")
    ys, ss = y[order], s[order]
    last = np.r_[np.flatnonzero(np.diff(ss)), len(ss) - 1]
    tpr = np.r_[0.0, np.cumsum(ys)[last] / n_pos]
    fpr = np.r_[0.0, np.cumsum(~ys)[last] / n_neg]
    return fpr, tpr


def reliability_bins(
    probs: np.ndarray, targets: np.ndarray, *, bins: int = 10
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Equal-width confidence bins over [0, 1] (Guo et al. 2017, section 2).

    Args:
        probs: (N,) or (N, C) predicted probabilities (all entries pooled).
        targets: same shape, 0/1.
        bins: number of bins.

    Returns:
        (mean predicted probability, observed positive rate, count) per bin; empty bins
        have NaN means and count 0.
    """
    p = np.asarray(probs, dtype=np.float64).ravel()
    y = np.asarray(targets, dtype=np.float64).ravel()
    which = np.minimum((p * bins).astype(np.int64), bins - 1)
    count = np.bincount(which, minlength=bins).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        conf = np.bincount(which, weights=p, minlength=bins) / count
        freq = np.bincount(which, weights=y, minlength=bins) / count
    return conf, freq, count.astype(np.int64)


def expected_calibration_error(probs: np.ndarray, targets: np.ndarray, *, bins: int = 10) -> float:
    """ECE: count-weighted mean |observed rate - mean probability| over confidence bins.

    Each (image, label) probability is one prediction of a binary event, so multi-label
    outputs are pooled. Returns NaN for no predictions.
    """
    conf, freq, count = reliability_bins(probs, targets, bins=bins)
    total = int(count.sum())
    if total == 0:
        return math.nan
    used = count > 0
    return float(np.sum(count[used] * np.abs(freq[used] - conf[used])) / total)


def choose_thresholds(
    probs: np.ndarray,
    targets: np.ndarray,
    labels: Sequence[str],
    *,
    method: Literal["youden", "f1"] = "youden",
    default: float = 0.5,
) -> dict[str, float]:
    """Per-label operating thresholds chosen on validation data.

    Args:
        probs: (N, C) probabilities.
        targets: (N, C) 0/1.
        labels: C names.
        method: "youden" (max sensitivity + specificity - 1) or "f1".
        default: used for a label with no positive or no negative example.

    Returns:
        label -> threshold (a probability; "positive" means prob >= threshold).
    """
    out: dict[str, float] = {}
    for c, name in enumerate(labels):
        y = targets[:, c].astype(bool)
        p = probs[:, c].astype(np.float64)
        n_pos, n_neg = int(y.sum()), int((~y).sum())
        if n_pos == 0 or n_neg == 0:
            out[name] = default
            continue
        order = np.argsort(-p, kind="mergesort")
        ps, ys = p[order], y[order]
        tp = np.cumsum(ys)
        fp = np.cumsum(~ys)
        # Only cut where the score changes (ties stay on the same side).
        last = np.r_[np.flatnonzero(np.diff(ps)), len(ps) - 1]
        tp, fp, cut = tp[last], fp[last], ps[last]
        if method == "youden":
            score = tp / n_pos - fp / n_neg
        else:
            score = 2 * tp / np.maximum(2 * tp + fp + (n_pos - tp), 1)
        out[name] = round(float(cut[int(np.argmax(score))]), 6)
    return out


def classification_metrics(
    probs: np.ndarray,
    targets: np.ndarray,
    labels: Sequence[str],
    thresholds: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Per-label AUC (and mean over labels where defined), plus sensitivity, specificity,
    PPV and F1 at the given thresholds.

    Returns:
        {"mean_auc", "n_images", "per_label": {label: {auc, prevalence, positives, ...}}}
    """
    per: dict[str, dict[str, Any]] = {}
    aucs = []
    for c, name in enumerate(labels):
        y = targets[:, c].astype(bool)
        auc = roc_auc(y, probs[:, c])
        entry: dict[str, Any] = {
            "auc": None if math.isnan(auc) else round(auc, 4),
            "positives": int(y.sum()),
            "prevalence": round(float(y.mean()), 4) if len(y) else None,
        }
        if not math.isnan(auc):
            aucs.append(auc)
        if thresholds is not None and name in thresholds:
            pred = probs[:, c] >= thresholds[name]
            tp = int((pred & y).sum())
            fp = int((pred & ~y).sum())
            fn = int((~pred & y).sum())
            tn = int((~pred & ~y).sum())
            entry.update(
                threshold=thresholds[name],
                sensitivity=round(tp / (tp + fn), 4) if tp + fn else None,
                specificity=round(tn / (tn + fp), 4) if tn + fp else None,
                ppv=round(tp / (tp + fp), 4) if tp + fp else None,
                f1=round(2 * tp / (2 * tp + fp + fn), 4) if tp + fp + fn else None,
            )
        per[name] = entry
    return {
        "mean_auc": round(float(np.mean(aucs)), 4) if aucs else None,
        "n_images": int(len(targets)),
        "per_label": per,
    }


def _intersection(a: XYWH, b: XYWH) -> float:
    w = min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0])
    h = min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1])
    return max(w, 0.0) * max(h, 0.0)


def iobb(pred: XYWH, gt: XYWH) -> float:
    """The paper's IoBB: intersection over the detected (predicted) box area. Boxes: x, y, w, h."""
    area = pred[2] * pred[3]
    return _intersection(pred, gt) / area if area > 0 else 0.0


def iou(pred: XYWH, gt: XYWH) -> float:
    """Intersection over union. Boxes: x, y, w, h."""
    inter = _intersection(pred, gt)
    union = pred[2] * pred[3] + gt[2] * gt[3] - inter
    return inter / union if union > 0 else 0.0


def localization_metrics(
    predicted: Mapping[tuple[str, str], Sequence[Box]],
    truth: Sequence[GroundTruthBox],
    *,
    iobb_thresholds: Sequence[float] = IOBB_THRESHOLDS,
    iou_thresholds: Sequence[float] = IOU_THRESHOLDS,
) -> dict[str, Any]:
    """Accuracy and average false positives per label at each overlap threshold.

    Args:
        predicted: (image_index, label) -> boxes generated for that label's heatmap on that
            image; every (image, label) pair present in `truth` should have an entry.
        truth: ground-truth boxes.

    Returns:
        {"iobb": {T: {"per_label": {label: {"acc", "afp", "n"}}, "acc", "afp"}}, "iou": {...}}
        where the overall "acc" pools all ground-truth boxes and "afp" all images.
    """
    by_pair: dict[tuple[str, str], list[GroundTruthBox]] = defaultdict(list)
    for g in truth:
        by_pair[(g.image_index, g.label)].append(g)
    out: dict[str, Any] = {}
    for kind, fn, thresholds in (("iobb", iobb, iobb_thresholds), ("iou", iou, iou_thresholds)):
        table: dict[str, Any] = {}
        for t in thresholds:
            found: dict[str, int] = defaultdict(int)
            n_gt: dict[str, int] = defaultdict(int)
            false_pos: dict[str, int] = defaultdict(int)
            n_img: dict[str, int] = defaultdict(int)
            for (image, label), gts in by_pair.items():
                boxes = list(predicted.get((image, label), ()))
                bxs = [(b.x, b.y, b.width, b.height) for b in boxes]
                n_img[label] += 1
                n_gt[label] += len(gts)
                found[label] += sum(any(fn(b, g.xywh) >= t for b in bxs) for g in gts)
                false_pos[label] += sum(not any(fn(b, g.xywh) >= t for g in gts) for b in bxs)
            per = {
                label: {
                    "acc": round(found[label] / n_gt[label], 4),
                    "afp": round(false_pos[label] / n_img[label], 4),
                    "n": n_gt[label],
                }
                for label in sorted(n_gt)
            }
            total_gt = sum(n_gt.values())
            table[f"{t:g}"] = {
                "acc": round(sum(found.values()) / total_gt, 4) if total_gt else None,
                "afp": round(sum(false_pos.values()) / max(sum(n_img.values()), 1), 4),
                "per_label": per,
            }
        out[kind] = table
    return out
