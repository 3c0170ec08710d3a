"""Evaluation: per-label ROC AUC, operating thresholds, and the paper's localization
metrics (Wang et al. 2017, section 5.3, Table 3).

Localization: for every ground-truth box, boxes are generated from the heatmap of
its label (thresholds 60 and 180, whatever the predicted probability, as in the
paper). A ground-truth box is found when some generated box overlaps it by at least
T, measured as IoBB (intersection over the *generated* box's area) or IoU.
Accuracy = found / ground-truth boxes; AFP (average false positives) = generated
boxes that overlap no ground-truth box of their label / images with that label.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from models.boxes import Box

__all__ = [
    "IOBB_THRESHOLDS",
    "IOU_THRESHOLDS",
    "GroundTruthBox",
    "choose_thresholds",
    "classification_metrics",
    "format_report",
    "iobb",
    "iou",
    "load_bbox_csv",
    "localization_metrics",
    "roc_auc",
]

IOBB_THRESHOLDS: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 0.9)
IOU_THRESHOLDS: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
_ALIASES = {"Infiltrate": "Infiltration", "Pleural Thickening": "Pleural_Thickening"}

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


def load_bbox_csv(path: str | os.PathLike[str]) -> list[GroundTruthBox]:
    """Read a `BBox_List_2017.csv`-format file (optionally .gz).

    Columns by position: Image Index, Finding Label, x, y, w, h; the header's empty
    trailing columns are ignored, and `Infiltrate` is read as `Infiltration`.

    Raises:
        ValueError: a row with non-numeric coordinates.
    """
    path = Path(path)
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    reader = csv.reader(io.StringIO(raw.decode("utf-8-sig")))
    next(reader, None)
    out = []
    for lineno, row in enumerate(reader, start=2):
        if len(row) < 6 or not row[0].strip():
            continue
        try:
            x, y, w, h = (float(v) for v in row[2:6])
        except ValueError:
            raise ValueError(f"{path}:{lineno}: bad box coordinates {row[2:6]}") from None
        label = _ALIASES.get(row[1].strip(), row[1].strip())
        out.append(GroundTruthBox(row[0].strip(), label, x, y, w, h))
    return out


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


def format_report(report: Mapping[str, Any]) -> str:
    """A plain-text table of a `cxr evaluate` report (classification, then localization)."""
    lines = []
    cls = report.get("classification")
    if cls:
        lines.append(f"{'label':<20} {'AUC':>6} {'pos':>6} {'thr':>7} {'sens':>6} {'spec':>6}")
        for name, e in cls["per_label"].items():
            auc = "-" if e["auc"] is None else f"{e['auc']:.3f}"
            thr = e.get("threshold")
            sens, spec = e.get("sensitivity"), e.get("specificity")
            lines.append(
                f"{name:<20} {auc:>6} {e['positives']:>6} "
                f"{'-' if thr is None else f'{thr:.3f}':>7} "
                f"{'-' if sens is None else f'{sens:.3f}':>6} "
                f"{'-' if spec is None else f'{spec:.3f}':>6}"
            )
        mean = cls["mean_auc"]
        images = cls["n_images"]
        lines.append(
            f"{'mean AUC':<20} {'-' if mean is None else f'{mean:.3f}':>6}  ({images} images)"
        )
    loc = report.get("localization")
    if loc:
        for kind in ("iobb", "iou"):
            table = loc[kind]
            labels = sorted({lb for row in table.values() for lb in row["per_label"]})
            lines.append("")
            lines.append(
                f"T({kind.upper()})  " + "  ".join(f"{lb[:12]:>12}" for lb in labels) + "   all"
            )
            for t, row in table.items():
                cells = []
                for lb in labels:
                    e = row["per_label"].get(lb)
                    cells.append(f"{e['acc']:.2f}/{e['afp']:.2f}".rjust(12) if e else " " * 12)
                acc = "-" if row["acc"] is None else f"{row['acc']:.2f}"
                lines.append(f"{t:<8} " + "  ".join(cells) + f"   {acc}/{row['afp']:.2f}")
        lines.append("(cells: accuracy/average false positives)")
    return "\n".join(lines)


def predict_dataset(
    model: Any,
    dataset: Any,
    *,
    device: Any = "cpu",
    batch_size: int = 32,
    workers: int = 0,
    progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Run a `ChestNet` over a `ChestXrayDataset`.

    Returns:
        probabilities (N, C) and targets (N, C), float32, in dataset order.
    """
    import torch
    from torch.utils.data import DataLoader

    dev = torch.device(device)
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=workers)
    probs, targets = [], []
    was_training = model.training
    model.eval()
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=dev.type == "cuda")
    with torch.inference_mode(), autocast:
        for x, y, _ in _maybe_tqdm(loader, progress, "evaluate"):
            x = x.to(dev, non_blocking=True)
            probs.append(torch.sigmoid(model(x).float()).cpu().numpy())
            targets.append(y.numpy())
    model.train(was_training)
    n_labels = len(dataset.labels)
    if not probs:
        return np.zeros((0, n_labels), np.float32), np.zeros((0, n_labels), np.float32)
    return np.concatenate(probs), np.concatenate(targets)


def _maybe_tqdm(it: Any, enabled: bool, desc: str) -> Any:
    if not enabled:
        return it
    from tqdm import tqdm

    return tqdm(it, desc=desc, leave=False, dynamic_ncols=True)


def localize_dataset(
    model: Any,
    dataset: Any,
    truth: Sequence[GroundTruthBox],
    *,
    device: Any = "cpu",
    box_thresholds: Sequence[int] = (60, 180),
    image_size: int,
    resize: str = "letterbox",
) -> dict[tuple[str, str], list[Box]]:
    """Generate heatmap boxes for each (image, label) pair that has ground truth.

    Images are matched by `Record.image_index`; labels not in the model are skipped.
    Box coordinates are in the image's ORIGINAL pixels, like the ground truth.

    Returns:
        (image_index, label) -> boxes, the input of `localization_metrics`.
    """
    import torch

    from models.cam import positive_evidence
    from models.heatmaps import boxes_from_cam
    from models.transforms import Geometry

    dev = torch.device(device)
    col = {name: i for i, name in enumerate(dataset.labels)}
    wanted: dict[str, set[str]] = defaultdict(set)
    for g in truth:
        if g.label in col:
            wanted[g.image_index].add(g.label)
    out: dict[tuple[str, str], list[Box]] = {}
    model.eval()
    with torch.inference_mode():
        for i, record in enumerate(dataset.records):
            labels = wanted.get(record.image_index)
            if not labels:
                continue
            pixels, (rows, columns) = dataset.pixels(i)
            x = dataset.transform(pixels)[None].to(dev)
            cams = positive_evidence(model.class_activation_maps(model.forward_features(x)))
            cams_np = cams[0].float().cpu().numpy()
            # The same geometry (letterbox or stretch) and box path as `models.predict`.
            geometry = Geometry.fit(rows, columns, image_size, resize)
            for label in labels:
                out[(record.image_index, label)] = boxes_from_cam(
                    cams_np[col[label]], geometry, label=label, thresholds=box_thresholds
                )
    return out


def evaluate_checkpoint(
    checkpoint: str | os.PathLike[str],
    data: str | os.PathLike[str],
    *,
    split: Literal["train", "val", "test", "all"] = "test",
    boxes: str | os.PathLike[str] | None = None,
    device: str = "auto",
    batch_size: int = 32,
    workers: int = 0,
    seed: int = 0,
    progress: bool = False,
) -> dict[str, Any]:
    """Evaluate a checkpoint on a dataset split: `cxr evaluate` and the benchmarks use this.

    Args:
        checkpoint: model file.
        data: NIH-layout folder or labels CSV.
        split: which patient-wise split (the same seeded split as training).
        boxes: optional BBox_List_2017-format CSV; localization is scored on the split's
            images that have boxes (on all dataset images with boxes if none are in it).
        device: "auto", "cpu", "cuda", ...
        seed: split seed (must match the training seed).

    Returns:
        {"model", "data", "split", "classification", "localization"?}

    Raises:
        CheckpointError, DatasetError: unusable inputs.
    """
    from models.checkpoint import load_checkpoint
    from models.data import ChestXrayDataset, load_records, split_records
    from models.predict import resolve_device
    from models.transforms import EvalTransform, resize_mode_of

    dev = resolve_device(device)
    ckpt = load_checkpoint(checkpoint, map_location=dev)
    card = ckpt.card
    records = load_records(data)
    root = Path(data) if Path(data).is_dir() else None
    chosen = split_records(records, split, root=root, seed=seed)
    resize = resize_mode_of(card.preprocessing)
    transform = EvalTransform(card.image_size, resize)
    dataset = ChestXrayDataset(chosen, card.labels, transform)
    probs, targets = predict_dataset(
        ckpt.model, dataset, device=dev, batch_size=batch_size, workers=workers, progress=progress
    )
    report: dict[str, Any] = {
        "model": {k: card.to_dict()[k] for k in ("name", "version", "arch", "image_size", "demo")},
        "data": str(data),
        "split": split,
        "classification": classification_metrics(probs, targets, card.labels, card.thresholds),
    }
    if boxes is not None:
        truth = load_bbox_csv(boxes)
        in_split = {r.image_index for r in chosen}
        scored = [g for g in truth if g.image_index in in_split]
        box_set = dataset
        if not scored:
            in_data = {r.image_index for r in records}
            scored = [g for g in truth if g.image_index in in_data]
            box_set = ChestXrayDataset(
                [r for r in records if r.image_index in {g.image_index for g in scored}],
                card.labels,
                transform,
            )
            report["localization_note"] = "no boxed image in the split; scored all boxed images"
        scored = [g for g in scored if g.label in card.labels]
        predicted = localize_dataset(
            ckpt.model,
            box_set,
            scored,
            device=dev,
            box_thresholds=card.box_thresholds,
            image_size=card.image_size,
            resize=resize,
        )
        report["localization"] = localization_metrics(predicted, scored)
        report["localization"]["n_boxes"] = len(scored)
        report["localization"]["n_images"] = len({g.image_index for g in scored})
    return report
