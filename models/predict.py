"""Inference: grey images of any size in, probabilities, heatmaps and boxes out.

    predictor = load_predictor("model.pt")
    image = load_image("study.dcm")
    [result] = predictor.predict([image.pixels])
    result.probabilities["Effusion"], result.boxes, result.heatmaps["Effusion"].render(512, 512)

Boxes are in the ORIGINAL image's pixel coordinates. Heatmaps stay at the network's map
resolution (`models.heatmaps.Heatmap`) and are projected onto any display size on demand.
To bound memory, callers with large images fit them first (`Predictor.prepare`) and drop
the full-resolution array; `predict` accepts prepared images. `predict_files` runs files
through the whole path with decoding overlapped with compute.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from models.boxes import Box, scored_boxes
from models.calibration import apply_temperatures, temperature_vector
from models.cam import positive_evidence
from models.checkpoint import ModelCard, load_checkpoint
from models.dicom import ImageMeta
from models.errors import ImageError, ModelsError
from models.folding import fold_batchnorm
from models.heatmaps import Heatmap, boxes_from_cam
from models.layercam import check_heatmap_settings, forward_with_layercam
from models.network import ChestNet
from models.transforms import Geometry, ResizeMode, fit_long_side, fit_square, resize_mode_of

__all__ = [
    "Box",
    "FileResult",
    "Heatmap",
    "Prediction",
    "Predictor",
    "PreparedImage",
    "load_predictor",
    "predict_files",
    "resolve_device",
]

HeatmapPolicy = Literal["positive", "all", "none"]

# Pixels per forward pass without gradients: a 1024 px ResNet-50's early stages hold about
# 0.2 GB per image, so a batch of 16 at 1024 goes four images at a time.
_FORWARD_PIXELS = 16 * 512 * 512


@dataclass(frozen=True)
class PreparedImage:
    """An image fitted to the model input, and the geometry that maps it back.

    Attributes:
        input: float32 (S, S) in [0, 1].
        geometry: original size and placement (`models.transforms.Geometry`).
    """

    input: np.ndarray
    geometry: Geometry


@dataclass
class Prediction:
    """One image's result.

    Attributes:
        probabilities: label -> probability.
        positive: labels whose probability reaches their operating threshold.
        boxes: boxes (original pixels) for the positive labels, best first.
        heatmaps: label -> `Heatmap` (map resolution) for the labels asked for.
        geometry: how the original was fitted into the model input.
        timings: seconds per stage for this image (its share of the batch).
    """

    probabilities: dict[str, float]
    positive: list[str]
    boxes: list[Box] = field(default_factory=list)
    heatmaps: dict[str, Heatmap] = field(default_factory=dict)
    geometry: Geometry | None = None
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
        resize: "letterbox" or "stretch"; default what the card records (cards without
            the record, from before letterboxing, stretch).
    """

    def __init__(
        self,
        model: ChestNet,
        card: ModelCard,
        *,
        device: torch.device,
        batch_size: int = 16,
        resize: ResizeMode | None = None,
    ) -> None:
        self.device = device
        # The predictor owns the model from here: batch norm is folded into the convolutions
        # (models.folding), and it runs channels_last, on CPU too: oneDNN convolutions run
        # ~25% faster in it (ResNet-50 at 224, 2 cores), and bf16 tensor cores want it.
        model = model.to(device).eval()
        fold_batchnorm(model)
        self.model = model.to(memory_format=torch.channels_last)
        self._card = card
        self.batch_size = batch_size
        self.resize: ResizeMode = resize or resize_mode_of(card.preprocessing)
        self.labels: list[str] = list(card.labels)
        self.thresholds: dict[str, float] = {
            name: float(card.thresholds.get(name, 0.5)) for name in self.labels
        }
        self.box_thresholds: tuple[int, ...] = tuple(card.box_thresholds)
        self.heatmap_method = card.heatmap_method
        try:  # a bad card fails here, once, not on every image
            check_heatmap_settings(
                model, card.heatmap_method, card.heatmap_stage, card.heatmap_sigma
            )
        except ValueError as exc:
            raise ModelsError(f"model card {exc}") from None
        # Per-label temperature scaling from the card (models.calibration); T = 1 if absent.
        self._temperatures = torch.from_numpy(temperature_vector(card.temperatures, self.labels))

    @property
    def card(self) -> dict[str, Any]:
        """The model card as a JSON-able dict."""
        return self._card.to_dict()

    @property
    def image_size(self) -> int:
        return int(self._card.image_size)

    def prepare(self, pixels: np.ndarray) -> PreparedImage:
        """Fit a grey (rows, columns) image in [0, 1] into the model input (letterbox or
        stretch, as the card says). The result is small: drop `pixels` after this.

        Raises:
            ValueError: `pixels` is not a 2-D array.
        """
        fitted, geometry = fit_square(pixels, self.image_size, self.resize)
        return PreparedImage(input=fitted, geometry=geometry)

    def probabilities(self, logits: torch.Tensor) -> np.ndarray:
        """THE one place logits become probabilities: (N, C) logits -> (N, C) float64.

        `sigmoid(logit / T)` per label, T from the model card's temperature scaling
        (issue 9 item 5; `models.calibration`); applied here and nowhere else.
        """
        return (
            apply_temperatures(logits, self._temperatures.to(logits.device))
            .cpu()
            .numpy()
            .astype(np.float64)
        )

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @torch.no_grad()  # not inference_mode: LayerCAM needs a gradient graph of the later stages
    def predict(
        self,
        images: Sequence[np.ndarray | PreparedImage],
        *,
        heatmaps: HeatmapPolicy = "positive",
        boxes: bool = True,
    ) -> list[Prediction]:
        """Classify and localize a batch of images.

        Args:
            images: grey float arrays (rows, columns) in [0, 1], any sizes
                (`DicomImage.pixels`), or `PreparedImage`s from `prepare`.
            heatmaps: which labels get a `Heatmap`: "positive" (default), "all" or "none".
            boxes: compute boxes for the positive labels.

        Returns:
            One `Prediction` per image, in order.

        Raises:
            ValueError: an image is not a 2-D array, or an unknown heatmap policy.
        """
        if heatmaps not in ("positive", "all", "none"):
            raise ValueError(f"heatmaps must be positive, all or none, got {heatmaps!r}")
        out: list[Prediction] = []
        for start in range(0, len(images), self.batch_size):
            out.extend(
                self._predict_batch(images[start : start + self.batch_size], heatmaps, boxes)
            )
        return out

    def _predict_batch(
        self,
        images: Sequence[np.ndarray | PreparedImage],
        heatmaps: HeatmapPolicy,
        want_boxes: bool,
    ) -> list[Prediction]:
        n = len(images)
        t0 = time.perf_counter()
        prepared: list[PreparedImage] = []
        for i, im in enumerate(images):
            if isinstance(im, PreparedImage):
                prepared.append(im)
            elif np.ndim(im) != 2:
                raise ValueError(f"image {i}: expected a (rows, columns) array, got {np.shape(im)}")
            else:
                prepared.append(self.prepare(im))
        x = torch.from_numpy(np.stack([p.input for p in prepared]))[:, None]
        x = x.to(self.device, non_blocking=True).contiguous(memory_format=torch.channels_last)
        t1 = time.perf_counter()
        maps_by_image: list[dict[int, np.ndarray]]
        # Per image: (positive labels, indices of the labels that need a map).
        selections: list[tuple[list[str], list[int]]] = []
        if self.heatmap_method == "layercam" and (heatmaps != "none" or want_boxes):

            def choose(_: int, logits: torch.Tensor) -> list[list[int]]:
                chunk = [self._select(row, heatmaps, want_boxes)
                         for row in self.probabilities(logits)]  # fmt: skip
                selections.extend(chunk)
                return [wanted for _, wanted in chunk]

            card = self._card
            logits, maps_by_image = forward_with_layercam(
                self.model, x, choose, stage=card.heatmap_stage, sigma=card.heatmap_sigma,
                autocast=self._autocast,
            )  # fmt: skip
            probs = self.probabilities(logits)
            t2 = t3 = time.perf_counter()  # the maps come out of the forward pass
        else:
            step = max(1, _FORWARD_PIXELS // (x.shape[-2] * x.shape[-1]))
            with self._autocast():
                parts = [x[s : s + step] for s in range(0, x.shape[0], step)]
                features = torch.cat([self.model.forward_features(p) for p in parts])
                logits = self.model.forward_head(features)
            probs = self.probabilities(logits)
            t2 = time.perf_counter()
            selections = [self._select(row, heatmaps, want_boxes) for row in probs]
            # (N, C, S, S) float32, positive evidence only (see models.cam).
            cams = positive_evidence(self.model.class_activation_maps(features))
            cams_np = cams.float().cpu().numpy()
            maps_by_image = [{c: cams_np[i, c] for c in wanted}
                             for i, (_, wanted) in enumerate(selections)]  # fmt: skip
            del features, cams
            t3 = time.perf_counter()
        del x
        positives = [positive for positive, _ in selections]
        results: list[Prediction] = []
        box_s = 0.0
        for i, prep in enumerate(prepared):
            geo = prep.geometry
            p = {name: round(float(probs[i, c]), 6) for c, name in enumerate(self.labels)}
            positive = positives[i]
            label_maps = maps_by_image[i]
            ta = time.perf_counter()
            found: list[Box] = []
            if want_boxes:
                for name in positive:
                    c = self.labels.index(name)
                    found.extend(
                        scored_boxes(
                            boxes_from_cam(
                                label_maps[c], geo, label=name, thresholds=self.box_thresholds
                            ),
                            probability=p[name],
                            threshold=self.thresholds[name],
                        )
                    )
                found.sort(key=lambda b: -b.score)
            tb = time.perf_counter()
            names = {"positive": positive, "all": self.labels, "none": []}[heatmaps]
            maps = {name: Heatmap.from_cam(label_maps[self.labels.index(name)], geo)
                    for name in names}  # fmt: skip
            box_s += tb - ta
            results.append(
                Prediction(
                    probabilities=p, positive=positive, boxes=found, heatmaps=maps, geometry=geo
                )
            )
        shared = {
            "preprocess": (t1 - t0) / n,
            "forward": (t2 - t1) / n,
            "cam": (t3 - t2) / n,
            "boxes": box_s / n,
        }
        for r in results:
            r.timings = {k: round(v, 6) for k, v in shared.items()}
        return results

    def _select(
        self, probs: np.ndarray, heatmaps: HeatmapPolicy, want_boxes: bool
    ) -> tuple[list[str], list[int]]:
        """One image's (positive labels, indices of the labels that need a map)."""
        positive = [name for c, name in enumerate(self.labels)
                    if round(float(probs[c]), 6) >= self.thresholds[name]]  # fmt: skip
        shown = {"positive": positive, "all": self.labels, "none": []}[heatmaps]
        mapped = set(shown) | (set(positive) if want_boxes else set())
        return positive, [c for c, name in enumerate(self.labels) if name in mapped]


def load_predictor(
    checkpoint: str | os.PathLike[str] | Path,
    *,
    device: str = "auto",
    batch_size: int = 16,
    resize: ResizeMode | None = None,
    heatmap_method: str | None = None,
) -> Predictor:
    """Load a checkpoint for inference.

    Args:
        checkpoint: a file written by `models.checkpoint.save_checkpoint`.
        device: "auto" (CUDA if available), "cpu", "cuda", "cuda:1", ...
        batch_size: images per forward pass.
        resize: override the card's resize mode (None: the card's).
        heatmap_method: override the card's heatmap method, "cam" (faster) or "layercam".

    Returns:
        A `Predictor`.

    Raises:
        CheckpointError: the checkpoint cannot be loaded.
        ModelsError: the device is unavailable.
    """
    dev = resolve_device(device)
    ckpt = load_checkpoint(checkpoint, map_location="cpu")
    if heatmap_method is not None:
        ckpt.card.heatmap_method = heatmap_method
    return Predictor(ckpt.model, ckpt.card, device=dev, batch_size=batch_size, resize=resize)


# --- files through the whole path ---------------------------------------------------------


@dataclass
class FileResult:
    """One input file's outcome from `predict_files`.

    Attributes:
        path: the input.
        meta: image facts (None when unreadable).
        display: uint8 grey copy, longer side at most `display_size` (None when unreadable
            or not asked for), for overlays.
        prediction: the result (None when unreadable).
        error: why the file could not be read (None when it was).
        timings: decode and preprocess seconds for this file.
        prepared: the model input while it waits for its batch (None afterwards).
    """

    path: Path
    meta: ImageMeta | None = None
    display: np.ndarray | None = None
    prediction: Prediction | None = None
    error: ImageError | None = None
    timings: dict[str, float] = field(default_factory=dict)
    prepared: PreparedImage | None = field(default=None, repr=False)


def _load_one(predictor: Predictor, path: Path, display_size: int | None) -> FileResult:
    from models.images import load_image

    t0 = time.perf_counter()
    try:
        image = load_image(path)
    except ImageError as exc:
        return FileResult(path=path, error=exc)
    t1 = time.perf_counter()
    prepared = predictor.prepare(image.pixels)
    display = None
    if display_size is not None:
        display = (fit_long_side(image.pixels, display_size) * 255.0 + 0.5).astype(np.uint8)
    # Only the small copies travel on: the full-resolution array dies here.
    return FileResult(
        path=path,
        meta=image.meta,
        display=display,
        timings={"decode": t1 - t0, "preprocess": time.perf_counter() - t1},
        prepared=prepared,
    )


_DONE = object()


def _prefetch(items: Iterable[Any], depth: int) -> Iterator[Any]:
    """Yield `items` produced by a background thread at most `depth` ahead (order kept)."""
    q: queue.Queue[Any] = queue.Queue(maxsize=max(1, depth))
    failure: list[BaseException] = []
    stop = threading.Event()

    def work() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                q.put(item)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            failure.append(exc)
        finally:
            q.put(_DONE)

    thread = threading.Thread(target=work, name="cxr-predict-prefetch", daemon=True)
    thread.start()
    try:
        while (item := q.get()) is not _DONE:
            yield item
    finally:
        stop.set()
        with contextlib.suppress(queue.Empty):
            while True:
                q.get_nowait()
        thread.join(timeout=5)
    if failure:
        raise failure[0]


def predict_files(
    predictor: Predictor,
    paths: Sequence[str | os.PathLike[str]],
    *,
    heatmaps: HeatmapPolicy = "positive",
    display_size: int | None = 1024,
) -> Iterator[FileResult]:
    """Run files through decode -> fit -> batched forward -> boxes, in input order.

    Decoding and fitting run in a background thread, up to two batches ahead of the
    forward pass, so I/O and decoding overlap with compute; each decoded full-resolution
    array is dropped as soon as its model input and display copy exist.

    Args:
        predictor: a loaded `Predictor` (its `batch_size` sets the batch).
        paths: DICOM/PNG/JPEG/TIFF files.
        heatmaps: which labels get a `Heatmap` ("positive", "all", "none").
        display_size: longer side of the `display` copy kept for overlays (None: none).

    Yields:
        One `FileResult` per path, in order; unreadable files carry `error`.
    """
    batch = max(1, predictor.batch_size)
    loaded = _prefetch(
        (_load_one(predictor, Path(p), display_size) for p in paths), depth=2 * batch
    )
    pending: list[FileResult] = []

    def flush() -> Iterator[FileResult]:
        good = [r for r in pending if r.prepared is not None]
        if good:
            preds = predictor.predict(
                [r.prepared for r in good if r.prepared is not None], heatmaps=heatmaps
            )
            for r, pred in zip(good, preds, strict=True):
                r.prediction, r.prepared = pred, None
        yield from pending
        pending.clear()

    for result in loaded:
        pending.append(result)
        if sum(r.prepared is not None for r in pending) >= batch:
            yield from flush()
    yield from flush()
