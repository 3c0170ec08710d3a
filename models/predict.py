"""Inference: grey images of any size in, probabilities, heatmaps and boxes out.

    predictor = load_predictor("model.pt")
    image = load_image("study.dcm")
    [result] = predictor.predict([image.pixels])
    result.probabilities["Effusion"], result.boxes, result.heatmaps["Effusion"]

Heatmaps and boxes are in the ORIGINAL image's pixel coordinates.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from models.boxes import Box, boxes_from_heatmap
from models.calibration import apply_temperatures, temperature_vector
from models.cam import cam_to_image, positive_evidence, upsample_cams
from models.checkpoint import ModelCard, load_checkpoint
from models.errors import ModelsError
from models.network import ChestNet
from models.transforms import resize_square

__all__ = ["Box", "Prediction", "Predictor", "load_predictor", "resolve_device"]

HeatmapPolicy = Literal["positive", "all", "none"]


@dataclass
class Prediction:
    """One image's result.

    Attributes:
        probabilities: label -> sigmoid probability.
        positive: labels whose probability reaches their operating threshold.
        boxes: boxes (original pixels) for the positive labels, best first.
        heatmaps: label -> float32 (rows, columns) in [0, 1], for the labels asked for.
        timings: seconds per stage for this image (its share of the batch).
    """

    probabilities: dict[str, float]
    positive: list[str]
    boxes: list[Box] = field(default_factory=list)
    heatmaps: dict[str, np.ndarray] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (heatmap arrays left out)."""
        return {
            "probabilities": self.probabilities,
            "positive": self.positive,
            "boxes": [b.to_dict() for b in self.boxes],
            "timings": self.timings,
        }


def resolve_device(device: str = "auto") -> torch.device:
    """Map "auto" to cuda when available, else cpu; pass anything else to torch.device.

    Raises:
        ModelsError: a CUDA device was asked for but none is available, or a bad name.
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise ModelsError(f"unknown device {device!r}; expected auto, cpu, cuda or cuda:N") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelsError(f"device {device!r} requested but CUDA is not available; use cpu")
    return dev


class Predictor:
    """A loaded model ready for batched inference.

    Args:
        model: a `ChestNet`.
        card: its model card.
        device: where to run; on CUDA inference uses bf16 autocast and channels_last.
        batch_size: images per forward pass.
    """

    def __init__(
        self, model: ChestNet, card: ModelCard, *, device: torch.device, batch_size: int = 16
    ) -> None:
        self.device = device
        self.model = model.to(device).eval()
        if device.type == "cuda":
            self.model = self.model.to(memory_format=torch.channels_last)
        self._card = card
        self.batch_size = batch_size
        self.labels: list[str] = list(card.labels)
        self.thresholds: dict[str, float] = {
            name: float(card.thresholds.get(name, 0.5)) for name in self.labels
        }
        self.box_thresholds: tuple[int, ...] = tuple(card.box_thresholds)
        # Per-label temperature scaling from the card (models.calibration); T = 1 if absent.
        self._temperatures = torch.from_numpy(
            temperature_vector(card.temperatures, self.labels)
        ).to(device)

    @property
    def card(self) -> dict[str, Any]:
        """The model card as a JSON-able dict."""
        return self._card.to_dict()

    @property
    def image_size(self) -> int:
        return int(self._card.image_size)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @torch.inference_mode()
    def predict(
        self,
        images: Sequence[np.ndarray],
        *,
        heatmaps: HeatmapPolicy = "positive",
        boxes: bool = True,
    ) -> list[Prediction]:
        """Classify and localize a batch of images.

        Args:
            images: grey float arrays (rows, columns) in [0, 1], any sizes
                (`DicomImage.pixels`).
            heatmaps: which labels get an original-size heatmap: "positive" (default),
                "all" or "none".
            boxes: compute boxes for the positive labels.

        Returns:
            One `Prediction` per image, in order.

        Raises:
            ValueError: an image is not a 2-D array.
        """
        out: list[Prediction] = []
        for start in range(0, len(images), self.batch_size):
            out.extend(
                self._predict_batch(images[start : start + self.batch_size], heatmaps, boxes)
            )
        return out

    def _predict_batch(
        self, images: Sequence[np.ndarray], heatmaps: HeatmapPolicy, want_boxes: bool
    ) -> Iterator[Prediction]:
        n = len(images)
        size = self.image_size
        t0 = time.perf_counter()
        for i, im in enumerate(images):
            if np.ndim(im) != 2:
                raise ValueError(f"image {i}: expected a (rows, columns) array, got {np.shape(im)}")
        x = torch.from_numpy(np.stack([resize_square(im, size) for im in images]))[:, None]
        x = x.to(self.device, non_blocking=True)
        if self.device.type == "cuda":
            x = x.contiguous(memory_format=torch.channels_last)
        t1 = time.perf_counter()
        with self._autocast():
            features = self.model.forward_features(x)
            logits = self.model.forward_head(features).float()
        # (N, C, S, S) float32, positive evidence only (see models.cam).
        cams = positive_evidence(self.model.class_activation_maps(features))
        probs = apply_temperatures(logits, self._temperatures).cpu().numpy()
        _sync(self.device)
        t2 = time.perf_counter()
        # Box extraction works on maps at the model's input resolution; coordinates are
        # then scaled to the original image (same geometry as the stretch resize).
        up = upsample_cams(cams, size, size, size).cpu()
        cams_cpu = cams.cpu().numpy()
        t3 = time.perf_counter()
        results: list[Prediction] = []
        cam_s = box_s = 0.0
        for i, im in enumerate(images):
            rows, columns = im.shape
            p = {name: round(float(probs[i, c]), 6) for c, name in enumerate(self.labels)}
            positive = [name for name in self.labels if p[name] >= self.thresholds[name]]
            ta = time.perf_counter()
            boxes: list[Box] = []
            if want_boxes:
                for name in positive:
                    c = self.labels.index(name)
                    for b in boxes_from_heatmap(
                        up[i, c].numpy(),
                        label=name,
                        thresholds=self.box_thresholds,
                        scale=(columns / size, rows / size),
                    ):
                        boxes.append(
                            Box(
                                label=b.label,
                                x=b.x,
                                y=b.y,
                                width=b.width,
                                height=b.height,
                                score=round(b.score * p[name], 4),
                                threshold=b.threshold,
                            )
                        )
                boxes.sort(key=lambda b: -b.score)
            tb = time.perf_counter()
            names = {"positive": positive, "all": self.labels, "none": []}[heatmaps]
            maps = {
                name: cam_to_image(
                    cams_cpu[i, self.labels.index(name)], rows, columns, input_size=size
                )
                for name in names
            }
            tc = time.perf_counter()
            box_s += tb - ta
            cam_s += tc - tb
            results.append(
                Prediction(probabilities=p, positive=positive, boxes=boxes, heatmaps=maps)
            )
        shared = {
            "preprocess": (t1 - t0) / n,
            "forward": (t2 - t1) / n,
            "cam": (t3 - t2 + cam_s) / n,
            "boxes": box_s / n,
        }
        for r in results:
            r.timings = {k: round(v, 6) for k, v in shared.items()}
        yield from results


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def load_predictor(
    checkpoint: str | os.PathLike[str] | Path, *, device: str = "auto", batch_size: int = 16
) -> Predictor:
    """Load a checkpoint for inference.

    Args:
        checkpoint: a file written by `models.checkpoint.save_checkpoint`.
        device: "auto" (CUDA if available), "cpu", "cuda", "cuda:1", ...
        batch_size: images per forward pass.

    Returns:
        A `Predictor`.

    Raises:
        CheckpointError: the checkpoint cannot be loaded.
    """
    dev = resolve_device(device)
    ckpt = load_checkpoint(checkpoint, map_location="cpu")
    return Predictor(ckpt.model, ckpt.card, device=dev, batch_size=batch_size)
