"""Evaluation of a checkpoint on a dataset split: the torch loops (probabilities over a
dataset, heatmap boxes for the ground-truth pairs) and the `cxr evaluate` report. The
metrics themselves are plain NumPy in `models.metrics`.

Localization follows the paper (Wang et al. 2017, section 5.3): for every ground-truth
box, boxes are generated from the heatmap of its label whatever the predicted
probability, and scored at T(IoBB) and T(IoU).
"""

from __future__ import annotations

import csv
import gzip
import io
import math
import os
import zlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from models.boxes import Box
from models.calibration import temperature_vector
from models.data import canonical_label
from models.errors import ModelsError
from models.layercam import check_heatmap_settings
from models.precision import (
    Precision,
    inference_autocast,
    inference_record,
    resolve_precision,
)

if TYPE_CHECKING:
    from models.checkpoint import ModelCard
    from models.data import Record
    from models.predict import Predictor

from models.metrics import (
    GroundTruthBox,
    classification_metrics,
    expected_calibration_error,
    localization_metrics,
    reliability_bins,
    roc_curve,
)

__all__ = [
    "evaluate_checkpoint",
    "format_report",
    "load_bbox_csv",
    "localization_by_side",
    "localize_dataset",
    "predict_dataset",
    "write_plots",
]


def load_bbox_csv(path: str | os.PathLike[str]) -> list[GroundTruthBox]:
    """Read a `BBox_List_2017.csv`-format file (optionally .gz).

    Columns by position: Image Index, Finding Label, x, y, w, h; the header's empty
    trailing columns are ignored, and `Infiltrate` is read as `Infiltration`.

    Raises:
        ValueError: an unreadable file, or a row without six columns, with coordinates that
            are not numbers or a box that is not a box (negative corner, empty or negative
            size), named by its line; or no box at all.
    """
    path = Path(path)
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        text = raw.decode("utf-8-sig")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the box list ({exc})") from None
    reader = csv.reader(io.StringIO(text))
    next(reader, None)
    out = []
    for lineno, row in enumerate(reader, start=2):
        if not any(v.strip() for v in row):
            continue
        if len(row) < 6 or not row[0].strip():
            raise ValueError(
                f"{path}:{lineno}: expected Image Index, Finding Label, x, y, w, h; got {row[:6]}"
            )
        try:
            x, y, w, h = (float(v) for v in row[2:6])
        except ValueError:
            raise ValueError(f"{path}:{lineno}: bad box coordinates {row[2:6]}") from None
        if not all(math.isfinite(v) for v in (x, y, w, h)) or min(x, y) < 0 or min(w, h) <= 0:
            raise ValueError(f"{path}:{lineno}: not a box: x {x}, y {y}, w {w}, h {h}")
        label = canonical_label(row[1].strip())
        out.append(GroundTruthBox(row[0].strip(), label, x, y, w, h))
    if not out:
        raise ValueError(
            f"{path}: no boxes (expected rows of Image Index, Finding Label, x, y, w, h)"
        )
    return out


def localization_by_side(
    predicted: Mapping[tuple[str, str], Sequence[Box]],
    truth: Sequence[GroundTruthBox],
    sizes: Mapping[str, tuple[int, int]],
) -> dict[str, dict[str, dict[str, Any]]]:
    """IoBB-0.5 accuracy per label for the true boxes in each half of the image.

    A model can learn a finding on one side only while its AUC stays perfect: on the phantom
    benchmark one boxed 30/30 pneumothoraces in the image's left lung and 0/30 in its right.

    Returns:
        {"left" | "right": {label: {"acc": float | None, "n": int}}}, a box belonging to the
        half that holds its centre.
    """
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for side in ("left", "right"):
        subset = [
            g for g in truth
            if g.image_index in sizes
            and (g.xywh[0] + g.xywh[2] / 2 < sizes[g.image_index][1] / 2) == (side == "left")
        ]  # fmt: skip
        table = localization_metrics(predicted, subset, iobb_thresholds=(0.5,), iou_thresholds=())
        row = next(iter(table["iobb"].values()))["per_label"]
        out[side] = {label: {"acc": e["acc"], "n": e["n"]} for label, e in row.items()}
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
        cal = cls.get("calibration")
        if cal:
            lines.append(f"ECE before calibration {cal['ece_before']}, after {cal['ece_after']}")
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
        sides = loc.get("iobb_0.5_by_side")
        if sides:
            halves = []
            for lb in sorted(set(sides["left"]) | set(sides["right"])):
                accs = [sides[h].get(lb, {}).get("acc") for h in ("left", "right")]
                n = [sides[h].get(lb, {}).get("n", 0) for h in ("left", "right")]
                shown = "/".join("-" if a is None else f"{a:.2f}" for a in accs)
                halves.append(f"{lb} {shown} ({n[0]}/{n[1]})")
            lines.append("IoBB-0.5 by image half, left/right (boxes): " + ", ".join(halves))
    return "\n".join(lines)


def predict_dataset(
    model: Any,
    dataset: Any,
    *,
    device: Any = "cpu",
    batch_size: int = 32,
    workers: int = 0,
    progress: bool = False,
    precision: Precision = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """Run a `ChestNet` over a `ChestXrayDataset` (or any dataset of the same items, with
    integer images as `models.data.FittedDataset` serves them), in `precision`
    (`models.precision`).

    Returns:
        raw logits (N, C) and targets (N, C), float32, in dataset order. Probabilities are
        `models.calibration.apply_temperatures` of the logits (sigmoid when T = 1).
    """
    import torch
    from torch.utils.data import DataLoader

    from models.augment import to_unit_float

    dev = torch.device(device)
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=False,
        num_workers=workers,
        pin_memory=dev.type == "cuda",  # the copies below are then asynchronous
    )
    logits, targets = [], []
    was_training = model.training
    model.eval()
    with torch.inference_mode(), inference_autocast(dev, resolve_precision(precision, dev)):
        for x, y, _ in _maybe_tqdm(loader, progress, "evaluate"):
            x = to_unit_float(x.to(dev, non_blocking=True))  # integer items: training's loader
            logits.append(model(x).float().cpu().numpy())
            targets.append(y.numpy())
    model.train(was_training)
    n_labels = len(dataset.labels)
    if not logits:
        return np.zeros((0, n_labels), np.float32), np.zeros((0, n_labels), np.float32)
    return np.concatenate(logits), np.concatenate(targets)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    out: np.ndarray = 0.5 * (1.0 + np.tanh(0.5 * z))  # overflow-free logistic
    return out


def _maybe_tqdm(it: Any, enabled: bool, desc: str) -> Any:
    if not enabled:
        return it
    from tqdm import tqdm

    return tqdm(it, desc=desc, leave=False, dynamic_ncols=True)


def localize_dataset(
    predictor: Predictor,
    records: Sequence[Record],
    truth: Sequence[GroundTruthBox],
    *,
    sizes: dict[str, tuple[int, int]] | None = None,
) -> dict[tuple[str, str], list[Box]]:
    """Boxes for each (image, label) pair that has ground truth, through the prediction path.

    Each image goes through `models.image_pipeline.load_for_model` and `Predictor.predict`, as in
    `cxr predict`, the service and batch jobs; the boxes asked for are the ground truth's
    labels, whatever their probability. Images are matched by `Record.image_index`; labels
    not in the model are skipped. `sizes`, if given, receives each scored image's
    (rows, columns).

    Returns:
        (image_index, label) -> boxes in ORIGINAL pixels, the input of `localization_metrics`.

    Raises:
        ImageError: an image with ground truth cannot be read.
    """
    from models.image_pipeline import InputSpec, load_for_model

    known = set(predictor.labels)
    wanted: dict[str, set[str]] = defaultdict(set)
    for g in truth:
        if g.label in known:
            wanted[g.image_index].add(g.label)
    spec = InputSpec.of(predictor)
    out: dict[tuple[str, str], list[Box]] = {}
    chosen = [r for r in records if wanted.get(r.image_index)]
    for start in range(0, len(chosen), max(1, predictor.batch_size)):
        part = chosen[start : start + max(1, predictor.batch_size)]
        loaded = [load_for_model(r.path, spec) for r in part]
        labels = [sorted(wanted[r.image_index]) for r in part]
        predictions = predictor.predict(
            [x.prepared for x in loaded], heatmaps="none", box_labels=labels
        )
        for record, image, names, prediction in zip(part, loaded, labels, predictions, strict=True):
            if sizes is not None:
                sizes[record.image_index] = (image.meta.rows, image.meta.columns)
            for name in names:
                out[(record.image_index, name)] = [b for b in prediction.boxes if b.label == name]
    return out


def evaluate_checkpoint(
    checkpoint: str | os.PathLike[str],
    data: str | os.PathLike[str],
    *,
    split: Literal["train", "val", "test", "all"] = "test",
    boxes: str | os.PathLike[str] | None = None,
    device: str = "auto",
    batch_size: int = 32,
    workers: int | None = None,
    seed: int = 0,
    progress: bool = False,
    plots: str | os.PathLike[str] | None = None,
    heatmap_method: str | None = None,
    precision: Precision = "auto",
) -> dict[str, Any]:
    """Evaluate a checkpoint on a dataset split: `cxr evaluate` and the benchmarks use this.

    Args:
        checkpoint: model file.
        data: NIH-layout folder or labels CSV.
        split: which patient-wise split (the same seeded split as training).
        boxes: optional BBox_List_2017-format CSV; localization is scored on the split's
            images that have boxes (on all dataset images with boxes if none are in it).
        device: "auto", "cpu", "cuda", ...
        workers: DataLoader processes decoding the images (default as `cxr train`'s:
            `models.data.loader_workers`).
        seed: split seed (must match the training seed).
        plots: if given, a path prefix: writes `<prefix>.roc.png` (ROC curve per label) and
            `<prefix>.reliability.png` (reliability diagram before/after calibration).
        heatmap_method: "cam" or "layercam" for the boxes (default: what the card says).
        precision: "auto", "float32" or "bfloat16" (`models.precision`).

    Returns:
        {"model", "data", "split", "classification" (with "calibration": ECE before and
        after the card's temperatures), "localization"?, "plots"?}

    Raises:
        CheckpointError, DatasetError: unusable inputs.
    """
    from models.checkpoint import load_checkpoint
    from models.data import ChestXrayDataset, load_records, loader_workers, split_records
    from models.predict import Predictor, resolve_device
    from models.transforms import EvalTransform, resize_mode_of

    # A bad box file fails here, not after the whole classification pass.
    truth = load_bbox_csv(boxes) if boxes is not None else None
    dev = resolve_device(device)
    resolved = resolve_precision(precision, dev)
    ckpt = load_checkpoint(checkpoint, map_location=dev)
    card = ckpt.card
    if heatmap_method is not None:
        card.heatmap_method = heatmap_method
    try:  # before any image is read: a bad setting would fail on the first box
        check_heatmap_settings(
            ckpt.model, card.heatmap_method, card.heatmap_stage, card.heatmap_sigma
        )
    except ValueError as exc:
        raise ModelsError(f"{checkpoint}: model card {exc}") from None
    records = load_records(data)
    root = Path(data) if Path(data).is_dir() else None
    chosen = split_records(records, split, root=root, seed=seed)
    resize = resize_mode_of(card.preprocessing)
    transform = EvalTransform(card.image_size, resize)
    dataset = ChestXrayDataset(chosen, card.labels, transform)
    logits, targets = predict_dataset(
        ckpt.model,
        dataset,
        device=dev,
        batch_size=batch_size,
        workers=loader_workers(workers, dev),
        progress=progress,
        precision=resolved,
    )
    raw = _sigmoid(logits)
    probs = _sigmoid(logits / temperature_vector(card.temperatures, card.labels))
    report: dict[str, Any] = {
        "model": {
            **{
                k: card.to_dict()[k]
                for k in ("name", "version", "arch", "image_size", "demo", "heatmap_method")
            },
            "inference": inference_record(dev, resolved),
        },
        "data": str(data),
        "split": split,
        "classification": _classification_report(raw, probs, targets, card),
    }
    if plots is not None:
        report["plots"] = write_plots(plots, raw=raw, probs=probs, targets=targets,
                                      labels=card.labels)  # fmt: skip
    if truth is not None:
        predictor = Predictor(
            ckpt.model, card, device=dev, batch_size=batch_size, precision=resolved
        )
        report.update(_localization_report(predictor, truth, chosen, records))
    return report


def _classification_report(
    raw: np.ndarray, probs: np.ndarray, targets: np.ndarray, card: ModelCard
) -> dict[str, Any]:
    """Per-label metrics at the card's thresholds, and the calibration's ECE before and
    after its temperatures."""
    classification = classification_metrics(probs, targets, card.labels, card.thresholds)
    classification["calibration"] = {
        "ece_before": _round(expected_calibration_error(raw, targets)),
        "ece_after": _round(expected_calibration_error(probs, targets)),
        "temperatures": dict(card.temperatures),
        "bins": 10,
    }
    return classification


def _localization_report(
    predictor: Predictor,
    truth: Sequence[GroundTruthBox],
    chosen: Sequence[Record],
    records: Sequence[Record],
) -> dict[str, Any]:
    """{"localization_note"?, "localization"}: the boxes found on the split's boxed images
    (on every boxed image of the dataset when the split has none) against the truth."""
    report: dict[str, Any] = {}
    in_split = {r.image_index for r in chosen}
    scored = [g for g in truth if g.image_index in in_split]
    box_records: Sequence[Record] = chosen
    if not scored:
        in_data = {r.image_index for r in records}
        scored = [g for g in truth if g.image_index in in_data]
        boxed = {g.image_index for g in scored}
        box_records = [r for r in records if r.image_index in boxed]
        report["localization_note"] = "no boxed image in the split; scored all boxed images"
    scored = [g for g in scored if g.label in predictor.labels]
    sizes: dict[str, tuple[int, int]] = {}
    predicted = localize_dataset(predictor, box_records, scored, sizes=sizes)
    report["localization"] = localization_metrics(predicted, scored)
    report["localization"]["iobb_0.5_by_side"] = localization_by_side(predicted, scored, sizes)
    report["localization"]["n_boxes"] = len(scored)
    report["localization"]["n_images"] = len({g.image_index for g in scored})
    return report


def _round(value: float) -> float | None:
    return None if np.isnan(value) else round(float(value), 4)


def write_plots(
    prefix: str | os.PathLike[str],
    *,
    raw: np.ndarray,
    probs: np.ndarray,
    targets: np.ndarray,
    labels: Sequence[str],
) -> dict[str, str]:
    """Write the ROC curves and the reliability diagram of one evaluation as PNG files.

    Args:
        prefix: path prefix, e.g. `report` for `report.roc.png` and `report.reliability.png`.
        raw: (N, C) uncalibrated probabilities.
        probs: (N, C) calibrated probabilities (the ones the ROC curves use; same order).
        targets: (N, C) 0/1.
        labels: C names.

    Returns:
        {"roc": path, "reliability": path}.
    """
    from models.metrics import roc_auc
    from models.plots import reliability_png, roc_png

    base = Path(prefix)
    base.parent.mkdir(parents=True, exist_ok=True)
    curves = {}
    for c, name in enumerate(labels):
        fpr, tpr = roc_curve(targets[:, c], probs[:, c])
        curves[name] = (fpr, tpr, roc_auc(targets[:, c], probs[:, c]))
    series = {
        name: (*reliability_bins(p, targets), expected_calibration_error(p, targets))
        for name, p in (("before calibration", raw), ("after calibration", probs))
    }
    paths = {
        "roc": base.with_name(base.name + ".roc.png"),
        "reliability": base.with_name(base.name + ".reliability.png"),
    }
    paths["roc"].write_bytes(roc_png(curves, title=f"ROC, {len(targets)} images"))
    paths["reliability"].write_bytes(
        reliability_png(series, title=f"Reliability, {len(targets)} images x {len(labels)} labels")
    )
    return {k: str(v) for k, v in paths.items()}
