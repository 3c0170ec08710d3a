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
import sys
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch

from models.boxes import Box, scored_boxes
from models.calibration import apply_temperatures, temperature_vector
from models.cam import positive_evidence
from models.checkpoint import ModelCard, load_checkpoint
from models.device_fit import codes_on_device, fitted_codes, side_stream
from models.dicom import ImageMeta
from models.errors import ImageError, ModelsError
from models.folding import fold_batchnorm
from models.heatmaps import Heatmap, axis_weights, boxes_from_levels
from models.image_pipeline import (
    DecodeTask,
    InputSpec,
    LoadedImage,
    PreparedImage,
    ReadImage,
    load_task,
    prepare_pixels,
    read_task,
)
from models.layercam import (
    check_heatmap_settings,
    forward_with_layercam,
    layercam_chunk,
    maps_to_host,
)
from models.network import ChestNet
from models.precision import (
    Precision,
    inference_autocast,
    inference_record,
    resolve_precision,
)
from models.stored_pixels import UNIT_CODES, StoredPixels
from models.transforms import Geometry, ResizeMode, resize_mode_of

if TYPE_CHECKING:
    from models.cuda_graphs import LayerCamGraphs
    from models.decode_pool import DecodePool

__all__ = [
    "Box",
    "FileResult",
    "Heatmap",
    "Prediction",
    "Predictor",
    "PreparedImage",
    "StagedBatch",
    "load_predictor",
    "FitPlace",
    "PREDICT_SWITCH_INTERVAL_S",
    "predict_files",
    "resolve_device",
]

HeatmapPolicy = Literal["positive", "all", "none"]

# Pixels per forward pass without gradients: a 1024 px ResNet-50's early stages hold about
# 0.2 GB per image, so a batch of 16 at 1024 goes four images at a time.
_FORWARD_PIXELS = 16 * 512 * 512
_FORWARD_PIXELS_CUDA = 64 * 512 * 512  # a GPU's memory: sixteen at a time


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


_BoxJob = tuple[int, str, np.ndarray, Geometry]  # (image in batch, label, map, geometry)


@dataclass
class ModelPass:
    """One batch after `Predictor.model_pass`: all that `Predictor.finish` needs, on the host.

    Attributes:
        geometries: each image's fit into the input.
        probabilities: (N, C) calibrated probabilities.
        positives: each image's positive labels.
        maps: each image's label index -> map (the labels that need one).
        heatmaps: which labels get a `Heatmap`.
        box_jobs: (image, label, map, geometry) for each box search.
        box_levels: each job's map projected onto its image, uint8.
        every_box: an evaluation's boxes (every one the map gives, unscored).
        timings: seconds per stage for the whole batch.
    """

    geometries: list[Geometry]
    probabilities: np.ndarray
    positives: list[list[str]]
    maps: list[dict[int, np.ndarray]]
    heatmaps: HeatmapPolicy
    box_jobs: list[_BoxJob]
    box_levels: list[np.ndarray]
    every_box: bool
    timings: dict[str, float]


@dataclass
class _Forward:
    """A batch's forward pass in `Predictor.model_pass`, before the boxes."""

    probabilities: np.ndarray  # (N, C) calibrated
    selections: list[tuple[list[str], list[int]]]  # per image: positive labels, labels mapped
    maps: list[dict[int, np.ndarray]]  # per image: label index -> map, on the host
    # The same maps on the model's device, for the boxes' projection there.
    device_maps: list[dict[int, torch.Tensor]]
    forward_end: float  # perf_counter() when the logits were out
    maps_end: float  # ... and the maps


@dataclass
class StagedBatch:
    """A batch's model input (`Predictor.stage`): on the host ready for the device, or
    already on the device.

    Attributes:
        geometries: each image's fit into the input (its pixels fill the top-left
            (height, width) of its slot in `host`).
        host: CUDA: pinned int16 (N, S, S), the fitted images' uint16 bits; CPU: the float
            (N, 1, S, S) input itself; None when `floats` or `on_device` holds the images.
        floats: float images in [0, 1] (from `Predictor.prepare`), copied one by one.
        on_device: the (N, 1, S, S) input itself, fitted on the model's device.
        ready: CUDA: recorded on the stream that made `on_device`, once it is made.
        seconds: the host's time making it (on CUDA, the device's work is queued).
    """

    geometries: list[Geometry]
    host: torch.Tensor | None
    floats: list[np.ndarray] = field(default_factory=list)
    on_device: torch.Tensor | None = None
    ready: torch.cuda.Event | None = None
    seconds: float = 0.0


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
        device: where to run (channels_last there).
        batch_size: images per forward pass.
        resize: "letterbox" or "stretch"; default what the card records (cards without
            the record, from before letterboxing, stretch).
        cuda_graphs: on CUDA, let `capture_graphs` record the LayerCAM pass's body stages
            as CUDA graphs (`models.cuda_graphs`; same numbers, a fraction of the host's
            time).
        precision: "float32", "bfloat16" (autocast), or "auto": bfloat16 on a GPU that
            computes it natively, float32 elsewhere (`models.precision`).

    Raises:
        ModelsError: an unknown precision, or a model card whose heatmap settings cannot work.
    """

    def __init__(
        self,
        model: ChestNet,
        card: ModelCard,
        *,
        device: torch.device,
        batch_size: int = 16,
        resize: ResizeMode | None = None,
        cuda_graphs: bool = True,
        precision: Precision = "auto",
    ) -> None:
        self.device = device
        self.precision = resolve_precision(precision, device)
        if device.type == "cuda":
            # As training does (process-wide): cuDNN picks its fastest kernels for the
            # batch's shape once, and float32 products (the LayerCAM maps' input gradient
            # of the transition layer) use TF32, finer than the bf16 forward before them.
            torch.backends.cudnn.benchmark = True
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        # The predictor owns the model from here: batch norm is folded into the convolutions
        # (models.folding), and it runs channels_last, on CPU too: oneDNN convolutions run
        # ~25% faster in it (ResNet-50 at 224, 2 cores), and bf16 tensor cores want it.
        model = model.to(device).eval()
        fold_batchnorm(model)
        # Maps need gradients of activations only; none of the weights (a graphed backward
        # would otherwise compute them too).
        model.requires_grad_(False)
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
        # On CUDA the LayerCAM pass's body stages can replay as CUDA graphs, for the batch
        # sizes `capture_graphs` was given: one launch, not hundreds.
        self._graphs: LayerCamGraphs | None = None
        if (
            cuda_graphs
            and device.type == "cuda"
            and card.heatmap_method == "layercam"
            and self.precision == "bfloat16"  # what the graphs are captured in
        ):
            from models.cuda_graphs import LayerCamGraphs

            self._graphs = LayerCamGraphs(model, card.heatmap_stage)
        self._box_pool: ThreadPoolExecutor | None = None
        # Per-label temperature scaling from the card (models.calibration); T = 1 if absent.
        # Kept on the model's device: a host copy per call would wait for the pass first.
        self._temperatures = torch.from_numpy(
            temperature_vector(card.temperatures, self.labels)
        ).to(device)

    def capture_graphs(self, batch_sizes: Iterable[int]) -> list[int]:
        """Capture CUDA graphs of the LayerCAM pass for these batch sizes (the ones that
        fit in one chunk of the pass); returns those captured, [] off CUDA or with graphs
        off. Call it while no other thread uses the device: before `predict_files`
        starts its threads (it does so itself), at a service's start-up.
        """
        if self._graphs is None:
            return []
        s = self.image_size
        done = []
        for n in sorted(set(batch_sizes)):
            x = torch.zeros((n, 1, s, s), device=self.device)
            if n <= layercam_chunk(x) and self._graphs.capture(
                x.contiguous(memory_format=torch.channels_last)
            ):
                done.append(n)
        return done

    @property
    def card(self) -> dict[str, Any]:
        """The model card as a JSON-able dict; its warnings include thresholds at 0 or 1."""
        card = self._card.to_dict()
        edge = [w for w in self._card.threshold_warnings() if w not in card["warnings"]]
        card["warnings"] = list(card["warnings"]) + edge
        return card

    @property
    def inference(self) -> dict[str, str]:
        """Where and in what arithmetic this predictor computes: recorded with results, since
        bfloat16 moves probabilities by about 0.01."""
        return inference_record(self.device, self.precision)

    @property
    def run_card(self) -> dict[str, Any]:
        """The model card with `inference` added: what a result records of its model."""
        return {**self.card, "inference": self.inference}

    @property
    def image_size(self) -> int:
        return int(self._card.image_size)

    def prepare(self, pixels: np.ndarray) -> PreparedImage:
        """Fit a grey (rows, columns) image in [0, 1] into the model input (letterbox or
        stretch, as the card says). The result is small: drop `pixels` after this.

        Raises:
            ValueError: `pixels` is not a 2-D array.
        """
        return prepare_pixels(pixels, self.image_size, self.resize)

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
        return inference_autocast(self.device, self.precision)

    @torch.no_grad()  # not inference_mode: LayerCAM needs a gradient graph of the later stages
    def predict(
        self,
        images: Sequence[np.ndarray | PreparedImage],
        *,
        heatmaps: HeatmapPolicy = "positive",
        boxes: bool = True,
        box_labels: Sequence[Collection[str]] | None = None,
    ) -> list[Prediction]:
        """Classify and localize a batch of images.

        Args:
            images: grey float arrays (rows, columns) in [0, 1], any sizes
                (`DicomImage.pixels`), or `PreparedImage`s from `prepare`.
            heatmaps: which labels get a `Heatmap`: "positive" (default), "all" or "none".
            boxes: compute boxes for the positive labels.
            box_labels: per image, the labels to box instead of the positive ones (an
                evaluation against ground truth boxes every true label).

        Returns:
            One `Prediction` per image, in order.

        Raises:
            ValueError: an image is not a 2-D array, or an unknown heatmap policy.
        """
        if heatmaps not in ("positive", "all", "none"):
            raise ValueError(f"heatmaps must be positive, all or none, got {heatmaps!r}")
        if box_labels is not None and len(box_labels) != len(images):
            raise ValueError(f"box_labels has {len(box_labels)} entries for {len(images)} images")
        out: list[Prediction] = []
        for start in range(0, len(images), self.batch_size):
            stop = start + self.batch_size
            chosen = None if box_labels is None else box_labels[start:stop]
            out.extend(self.finish(self.model_pass(images[start:stop], heatmaps, boxes, chosen)))
        return out

    @torch.no_grad()
    def model_pass(
        self,
        images: Sequence[np.ndarray | PreparedImage] | StagedBatch,
        heatmaps: HeatmapPolicy = "positive",
        want_boxes: bool = True,
        box_labels: Sequence[Collection[str]] | None = None,
    ) -> ModelPass:
        """The device's part of `predict` for one batch (images, or a `stage`d batch): input,
        forward, maps, and the maps projected onto each image for its boxes. `finish` does
        the rest on the CPU; the two may overlap (`predict_files` runs the next batch's pass
        during this one's finish).

        Raises:
            ValueError: an image is not a 2-D array, or an unknown heatmap policy.
        """
        if heatmaps not in ("positive", "all", "none"):
            raise ValueError(f"heatmaps must be positive, all or none, got {heatmaps!r}")
        t0 = time.perf_counter()
        ahead = 0.0  # staged before this call (on another thread): its time counts too
        if isinstance(images, StagedBatch):
            staged = images
            ahead = staged.seconds
        else:
            staged = self.stage(self._prepared(images))
        geometries = staged.geometries
        x = self._input_batch(staged)
        del staged  # its pinned buffer goes back to the cache once the copy has run
        t1 = time.perf_counter()
        if self.heatmap_method == "layercam" and (heatmaps != "none" or want_boxes):
            forward = self._forward_layercam(x, heatmaps, want_boxes, box_labels)
        else:
            forward = self._forward_cam(x, heatmaps, want_boxes, box_labels)
        del x
        positives = [positive for positive, _ in forward.selections]
        jobs: list[_BoxJob] = []
        if want_boxes:
            jobs = [
                (i, name, forward.maps[i][self.labels.index(name)], geo)
                for i, geo in enumerate(geometries)
                for name in (positives[i] if box_labels is None else list(box_labels[i]))
            ]
        on_device = forward.device_maps
        levels = self._box_levels(
            jobs, [on_device[i][self.labels.index(name)] for i, name, _, _ in jobs]
        )
        return ModelPass(
            geometries=geometries,
            probabilities=forward.probabilities,
            positives=positives,
            maps=forward.maps,
            heatmaps=heatmaps,
            box_jobs=jobs,
            box_levels=levels,
            every_box=box_labels is not None,
            timings={
                "preprocess": t1 - t0 + ahead,
                "forward": forward.forward_end - t1,
                "cam": forward.maps_end - forward.forward_end,
                "boxes": time.perf_counter() - forward.maps_end,
            },
        )

    def _prepared(self, images: Sequence[np.ndarray | PreparedImage]) -> list[PreparedImage]:
        """Each image fitted into the input (`prepare`), unless it already is."""
        prepared: list[PreparedImage] = []
        for i, im in enumerate(images):
            if isinstance(im, PreparedImage):
                prepared.append(im)
            elif np.ndim(im) != 2:
                raise ValueError(f"image {i}: expected a (rows, columns) array, got {np.shape(im)}")
            else:
                prepared.append(self.prepare(im))
        return prepared

    def _forward_layercam(
        self,
        x: torch.Tensor,
        heatmaps: HeatmapPolicy,
        want_boxes: bool,
        box_labels: Sequence[Collection[str]] | None,
    ) -> _Forward:
        """The forward pass with LayerCAM's maps of the labels chosen on its logits."""
        selections: list[tuple[list[str], list[int]]] = []

        def choose(start: int, logits: torch.Tensor) -> list[list[int]]:
            rows = self.probabilities(logits)
            chunk = [self._select(row, heatmaps, want_boxes, _boxed(box_labels, start + k))
                     for k, row in enumerate(rows)]  # fmt: skip
            selections.extend(chunk)
            return [wanted for _, wanted in chunk]

        card = self._card
        logits, device_maps = forward_with_layercam(
            self.model, x, choose, stage=card.heatmap_stage, sigma=card.heatmap_sigma,
            autocast=self._autocast, graphs=self._graphs,
        )  # fmt: skip
        probs = self.probabilities(logits)
        maps_by_image = maps_to_host(device_maps)
        end = time.perf_counter()  # the maps come out of the forward pass
        return _Forward(probs, selections, maps_by_image, device_maps, end, end)

    def _forward_cam(
        self,
        x: torch.Tensor,
        heatmaps: HeatmapPolicy,
        want_boxes: bool,
        box_labels: Sequence[Collection[str]] | None,
    ) -> _Forward:
        """The forward pass in chunks, then the class activation maps of the chosen labels."""
        budget = _FORWARD_PIXELS_CUDA if x.is_cuda else _FORWARD_PIXELS
        step = max(1, budget // (x.shape[-2] * x.shape[-1]))
        with self._autocast():
            parts = [x[s : s + step] for s in range(0, x.shape[0], step)]
            features = torch.cat([self.model.forward_features(p) for p in parts])
            logits = self.model.forward_head(features)
        probs = self.probabilities(logits)
        forward_end = time.perf_counter()
        selections = [self._select(row, heatmaps, want_boxes, _boxed(box_labels, i))
                      for i, row in enumerate(probs)]  # fmt: skip
        # (N, C, S, S) float32, positive evidence only (see models.cam).
        cams = positive_evidence(self.model.class_activation_maps(features))
        cams_np = cams.float().cpu().numpy()
        maps_by_image = [{c: cams_np[i, c] for c in wanted}
                         for i, (_, wanted) in enumerate(selections)]  # fmt: skip
        device_maps = [{c: cams[i, c] for c in wanted}
                       for i, (_, wanted) in enumerate(selections)]  # fmt: skip
        del features
        return _Forward(
            probs, selections, maps_by_image, device_maps, forward_end, time.perf_counter()
        )

    def finish(self, done: ModelPass) -> list[Prediction]:
        """The CPU's part of `predict` for one batch: boxes from the projected maps,
        heatmaps and `Prediction`s. Touches no device; one `finish` at a time."""
        ta = time.perf_counter()
        probs = done.probabilities
        boxes_by_image: list[list[Box]] = [[] for _ in done.geometries]
        found_all = self._boxes(done.box_jobs, done.box_levels)
        for (i, name, _, _), found in zip(done.box_jobs, found_all, strict=True):
            if done.every_box:  # an evaluation: every box, as the map gives it
                boxes_by_image[i].extend(found)
                continue
            p_name = round(float(probs[i, self.labels.index(name)]), 6)
            boxes_by_image[i].extend(
                scored_boxes(found, probability=p_name, threshold=self.thresholds[name])
            )
        for found in boxes_by_image:
            found.sort(key=lambda b: -b.score)
        box_s = time.perf_counter() - ta
        results: list[Prediction] = []
        for i, geo in enumerate(done.geometries):
            p = {name: round(float(probs[i, c]), 6) for c, name in enumerate(self.labels)}
            positive = done.positives[i]
            label_maps = done.maps[i]
            names = {"positive": positive, "all": self.labels, "none": []}[done.heatmaps]
            maps = {name: Heatmap.from_cam(label_maps[self.labels.index(name)], geo)
                    for name in names}  # fmt: skip
            results.append(
                Prediction(
                    probabilities=p,
                    positive=positive,
                    boxes=boxes_by_image[i],
                    heatmaps=maps,
                    geometry=geo,
                )
            )
        n = max(1, len(results))
        shared = {**done.timings}
        shared["boxes"] += box_s
        for r in results:
            r.timings = {k: round(v / n, 6) for k, v in shared.items()}
        return results

    def _box_levels(
        self, jobs: Sequence[_BoxJob], on_device: Sequence[torch.Tensor]
    ) -> list[np.ndarray]:
        """Each (image, label, map, geometry) job's map projected onto the image's part of
        the input and scaled to [0, 255], batched on the model's device (one matrix product
        per image size) from the maps still there (`on_device`, in job order); the uint8
        grids come back to the host."""
        levels: list[np.ndarray | None] = [None] * len(jobs)
        by_geometry: dict[Geometry, list[int]] = {}
        for k, (_, _, _, geo) in enumerate(jobs):
            by_geometry.setdefault(geo, []).append(k)
        for geo, ks in by_geometry.items():
            for start in range(0, len(ks), 16):  # bounds the float grids' memory
                part = ks[start : start + 16]
                cams = torch.stack([on_device[k].float() for k in part])
                for k, grid in zip(part, _levels(cams, geo), strict=True):
                    levels[k] = grid
        return [grid for grid in levels if grid is not None]

    def _boxes(self, jobs: Sequence[_BoxJob], levels: Sequence[np.ndarray]) -> list[list[Box]]:
        """The paper's boxes (`models.heatmaps.boxes_from_cam`) from the projected maps, in
        job order: thresholds and connected components on CPU threads (OpenCV releases
        the GIL)."""
        if self._box_pool is None:
            from models.decode_pool import default_workers

            threads = max(1, min(8, default_workers() // 2))
            self._box_pool = ThreadPoolExecutor(threads, thread_name_prefix="cxr-boxes")

        def box(k: int) -> list[Box]:
            _, name, cam, geo = jobs[k]
            return boxes_from_levels(
                levels[k], geo, cells=cam.shape[-2:], label=name, thresholds=self.box_thresholds
            )

        if len(jobs) <= 1:
            return [box(k) for k in range(len(jobs))]
        return list(self._box_pool.map(box, range(len(jobs))))

    def stage(
        self, images: Sequence[PreparedImage | StoredPixels], *, on_device: bool | None = None
    ) -> StagedBatch:
        """Assemble a batch's model input, ready for one copy to the device or already on it.

        `model_pass` does this itself when given images; `predict_files` calls it on the
        thread that collects decoded files, so the batch's input is made while the model
        runs the batch before. Thread-safe.

        Fitted images (`PreparedImage`): on CUDA they go as 16-bit grey (half the bytes of
        float32) into pinned memory from torch's caching host allocator, which reuses a
        buffer only once the copy that read it has finished; on CPU they are scaled into
        the float batch directly (NumPy: one pass).

        Stored images (`StoredPixels`, not yet fitted): on CUDA each one's codes cross to
        the device, are fitted there (`models.device_fit`: the same codes as the host fit,
        up to float rounding) and are written into the input there, on this thread's side
        stream; `model_pass` waits for that stream. Elsewhere they are fitted on the host.

        Args:
            on_device: assemble the input on the model's device (default: on CUDA, when
                an image is stored); True on the CPU runs the device's code there (tests).

        Raises:
            ValueError: an image was prepared for another input size.
        """
        t0 = time.perf_counter()
        staged = self._stage(images, on_device)
        staged.seconds = time.perf_counter() - t0
        return staged

    def _stage(
        self, images: Sequence[PreparedImage | StoredPixels], on_device: bool | None
    ) -> StagedBatch:
        s = self.image_size
        for i, p in enumerate(images):
            if isinstance(p, PreparedImage) and p.geometry.size != s:
                raise ValueError(
                    f"image {i} was prepared for {p.geometry.size} px, the model takes {s}"
                )
        if on_device is None:
            on_device = self.device.type == "cuda" and any(
                isinstance(p, StoredPixels) for p in images
            )
        if on_device:
            return self._stage_on_device(images)
        prepared = [
            p if isinstance(p, PreparedImage) else PreparedImage(*p.fit(s, self.resize))
            for p in images
        ]
        geometries = [p.geometry for p in prepared]
        if self.device.type != "cuda":
            batch = np.zeros((len(prepared), 1, s, s), np.float32)
            for i, p in enumerate(prepared):
                g = p.geometry
                window = batch[i, 0, g.top : g.top + g.height, g.left : g.left + g.width]
                if p.pixels.dtype == np.uint16:
                    np.multiply(p.pixels, np.float32(1.0 / UNIT_CODES), out=window)
                else:
                    window[...] = p.pixels
            host = torch.from_numpy(batch).contiguous(memory_format=torch.channels_last)
            return StagedBatch(geometries, host)
        if not all(p.pixels.dtype == np.uint16 for p in prepared):
            # Float images (`prepare`): no staging, they are few and small.
            floats = [np.asarray(p.pixels, np.float32) for p in prepared]
            return StagedBatch(geometries, None, floats)
        # int16: every torch build copies and widens it; the bits are the uint16's.
        pinned = torch.empty((len(prepared), s, s), dtype=torch.int16, pin_memory=True)
        view = pinned.numpy()
        for i, p in enumerate(prepared):
            h, w = p.pixels.shape
            view[i, :h, :w] = p.pixels.view(np.int16)
        return StagedBatch(geometries, pinned)

    @torch.no_grad()
    def _stage_on_device(self, images: Sequence[PreparedImage | StoredPixels]) -> StagedBatch:
        """`stage` on the model's device: each image fitted (or copied, fitted already)
        into its slot of the input there. On CUDA on this thread's side stream, with an
        event `_input_batch` waits for."""
        s, device = self.image_size, self.device
        cuda = device.type == "cuda"
        side = torch.cuda.stream(side_stream(device)) if cuda else contextlib.nullcontext()
        geometries: list[Geometry] = []
        with side:
            x = torch.zeros((len(images), 1, s, s), dtype=torch.float32, device=device)
            for i, image in enumerate(images):
                part: torch.Tensor
                if isinstance(image, StoredPixels):
                    geo = Geometry.fit(*image.shape, s, self.resize)
                    fitted_there = None
                    # A device error (its memory full, say) leaves the image to the host.
                    with contextlib.suppress(RuntimeError):
                        if geo.shrinks_both:
                            fitted_there = fitted_codes(image, image.fit_plan(), geo, device)
                    if fitted_there is not None:
                        part = fitted_there
                    else:  # an enlargement (OpenCV's bilinear fit), or a failed device fit
                        fitted, geo = image.fit(s, self.resize)
                        part = codes_on_device(fitted, device)
                else:
                    geo = image.geometry
                    if image.pixels.dtype == np.uint16:
                        part = codes_on_device(image.pixels, device)
                    else:
                        part = torch.from_numpy(np.asarray(image.pixels, np.float32)).to(device)
                geometries.append(geo)
                window = x[i, 0, geo.top : geo.top + geo.height, geo.left : geo.left + geo.width]
                window.copy_(part)
                if part.dtype != torch.float32:  # codes: scaled as `_input_batch` scales them
                    window.mul_(1.0 / UNIT_CODES)
            x = x.contiguous(memory_format=torch.channels_last)
            ready = None
            if cuda:
                ready = torch.cuda.Event()  # type: ignore[no-untyped-call]
                ready.record()
        return StagedBatch(geometries, None, on_device=x, ready=ready)

    def _input_batch(self, staged: StagedBatch) -> torch.Tensor:
        """(N, 1, S, S) float input on the device, scaled to [0, 1] and padded: on CUDA
        one copy of the staged 16-bit batch, widened, scaled and padded there."""
        if staged.on_device is not None:
            if staged.ready is not None:  # made on another stream: wait for it, and keep
                stream = torch.cuda.current_stream(self.device)  # its memory until used
                stream.wait_event(staged.ready)
                staged.on_device.record_stream(stream)
            return staged.on_device
        if self.device.type != "cuda":
            assert staged.host is not None  # `stage` always builds the CPU batch
            return staged.host
        s = self.image_size
        geometries = staged.geometries
        if staged.host is None:
            parts = [torch.from_numpy(f).to(self.device) for f in staged.floats]
        else:
            on_device = staged.host.to(self.device, non_blocking=True)
            scaled = (on_device.to(torch.int32) & 0xFFFF).float() * (1.0 / UNIT_CODES)
            parts = [scaled[i, : g.height, : g.width] for i, g in enumerate(geometries)]
        x = torch.zeros((len(geometries), 1, s, s), dtype=torch.float32, device=self.device)
        for i, (g, part) in enumerate(zip(geometries, parts, strict=True)):
            x[i, 0, g.top : g.top + g.height, g.left : g.left + g.width] = part
        return x.contiguous(memory_format=torch.channels_last)

    def _select(
        self,
        probs: np.ndarray,
        heatmaps: HeatmapPolicy,
        want_boxes: bool,
        box_labels: Collection[str] | None = None,
    ) -> tuple[list[str], list[int]]:
        """One image's (positive labels, indices of the labels that need a map)."""
        positive = [name for c, name in enumerate(self.labels)
                    if round(float(probs[c]), 6) >= self.thresholds[name]]  # fmt: skip
        shown = {"positive": positive, "all": self.labels, "none": []}[heatmaps]
        to_box = set(positive if box_labels is None else box_labels) if want_boxes else set()
        mapped = set(shown) | to_box
        return positive, [c for c, name in enumerate(self.labels) if name in mapped]


def _boxed(box_labels: Sequence[Collection[str]] | None, i: int) -> Collection[str] | None:
    """The labels image `i` is boxed for in an evaluation (None: its positive ones)."""
    return None if box_labels is None else box_labels[i]


def _levels(cams: torch.Tensor, geo: Geometry) -> list[np.ndarray]:
    """(k, S_r, S_c) maps -> k uint8 (height, width) grids over the image's part of the
    input, each min/max scaled to [0, 255] (`project_cam` then `to_uint8`, on the maps'
    device)."""
    rows, cols = cams.shape[-2:]
    wy = torch.from_numpy(axis_weights(geo.height, rows, geo.size, geo.top, geo.height))
    wx = torch.from_numpy(axis_weights(geo.width, cols, geo.size, geo.left, geo.width))
    device = cams.device
    grid = (wy.to(device) @ cams) @ wx.to(device).T
    lo = grid.amin(dim=(1, 2), keepdim=True)
    hi = grid.amax(dim=(1, 2), keepdim=True)
    span = hi - lo
    scale = torch.where(span > 0, 255.0 / torch.where(span > 0, span, 1.0), 0.0)
    out = ((grid - lo) * scale + 0.5).clamp_(0, 255).to(torch.uint8)
    return list(out.cpu().numpy())


def load_predictor(
    checkpoint: str | os.PathLike[str] | Path,
    *,
    device: str = "auto",
    batch_size: int = 16,
    resize: ResizeMode | None = None,
    heatmap_method: str | None = None,
    cuda_graphs: bool = True,
    precision: Precision = "auto",
) -> Predictor:
    """Load a checkpoint for inference.

    Args:
        checkpoint: a file written by `models.checkpoint.save_checkpoint`.
        device: "auto" (CUDA if available), "cpu", "cuda", "cuda:1", ...
        batch_size: images per forward pass.
        resize: override the card's resize mode (None: the card's).
        heatmap_method: override the card's heatmap method, "cam" (faster) or "layercam".
        cuda_graphs: on CUDA, replay the LayerCAM pass as CUDA graphs (`Predictor`).
        precision: "auto", "float32" or "bfloat16" (`Predictor`).

    Returns:
        A `Predictor`.

    Raises:
        CheckpointError: the checkpoint cannot be loaded.
        ModelsError: the device is unavailable, or an unknown precision.
    """
    dev = resolve_device(device)
    ckpt = load_checkpoint(checkpoint, map_location="cpu")
    if heatmap_method is not None:
        ckpt.card.heatmap_method = heatmap_method
    return Predictor(
        ckpt.model, ckpt.card, device=dev, batch_size=batch_size, resize=resize,
        cuda_graphs=cuda_graphs, precision=precision,
    )  # fmt: skip


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
    """

    path: Path
    meta: ImageMeta | None = None
    display: np.ndarray | None = None
    prediction: Prediction | None = None
    error: ImageError | None = None
    timings: dict[str, float] = field(default_factory=dict)


# (the batch's results in input order, those with an image, their `finish` when running)
_Batch = tuple[list[FileResult], list[FileResult], Future[list[Prediction]] | None]

FitPlace = Literal["auto", "host", "device"]

PREDICT_SWITCH_INTERVAL_S = 0.0005
"""The interpreter's thread switch interval while `predict_files` runs (its default is
5 ms). Its threads hand the interpreter lock to each other many times a batch (the model
pass, the staging thread taking results from the workers, the finishing and box
threads); a thread that released it for a C call waits up to the interval to get it
back whenever another one is running Python. With a busy Python thread beside it, the
staging thread took 69-72 results/s at 5 ms and 444-510 at 0.5 ms (fitted 1024 px images,
one worker, the 2-core VM: `python benchmarks/predict.py --mode transport`)."""


@contextlib.contextmanager
def _switch_interval(seconds: float) -> Iterator[None]:
    """The interpreter's switch interval at most `seconds` inside; the old one restored
    after, unless someone else has changed it meanwhile."""
    old = sys.getswitchinterval()
    new = min(old, seconds)
    sys.setswitchinterval(new)
    try:
        yield
    finally:
        if sys.getswitchinterval() == new:
            sys.setswitchinterval(old)


def predict_files(
    predictor: Predictor,
    paths: Sequence[str | os.PathLike[str]],
    *,
    heatmaps: HeatmapPolicy = "positive",
    display_size: int | None = None,
    workers: int | None = None,
    file_timeout_s: float | None = 300.0,
    fit: FitPlace = "auto",
) -> Iterator[FileResult]:
    """Run files through decode -> fit -> batched forward -> boxes, in input order.

    Decoding runs in `workers` processes (`models.decode_pool`), a few batches ahead of
    the forward pass. Where the images are fitted into the model input (`fit`):

    - "host": in the workers (`models.image_pipeline.load_for_model`); only the fitted
      16-bit image and the optional display copy come back;
    - "device": on the model's device (`Predictor.stage`); the workers only read, and the
      stored codes come back (10 MB for a 2500 x 2048 image, through shared memory);
    - "auto": "device" on CUDA without display copies (OpenCV's area resize was 32 of a
      worker's 41 ms a file on a 16-core GPU host; the GPU does it as a few float64
      gathers per axis, `models.device_fit`), "host" otherwise.

    A file that fails to decode, crashes its worker or runs past `file_timeout_s` is that
    file's error, nothing else's.

    Args:
        predictor: a loaded `Predictor` (its `batch_size` sets the batch).
        paths: DICOM/PNG/JPEG/TIFF files.
        heatmaps: which labels get a `Heatmap` ("positive", "all", "none").
        display_size: longer side of the `display` copy kept for overlays (None: none).
        workers: decoding processes (default: the cores available; 0: a thread of this
            process, without crash isolation).
        file_timeout_s: per-file decoding limit (None: none; needs workers).
        fit: where images are fitted, as above.

    Yields:
        One `FileResult` per path, in order; unreadable files carry `error`.

    Raises:
        ValueError: `fit` is not one of the three.
    """
    from models.decode_pool import DecodePool, Prefetch, default_workers

    if fit not in ("auto", "host", "device"):
        raise ValueError(f"fit must be auto, host or device, got {fit!r}")
    on_device = fit == "device" or (
        fit == "auto" and predictor.device.type == "cuda" and display_size is None
    )
    batch = max(1, predictor.batch_size)
    n_workers = default_workers() if workers is None else workers
    spec = InputSpec.of(predictor, display_size=display_size)
    if len(paths) >= batch:  # before any thread of ours touches the device
        predictor.capture_graphs([batch])
    pool: DecodePool[DecodeTask, LoadedImage | ReadImage | ImageError] = DecodePool(
        read_task if on_device else load_task,
        workers=n_workers,
        on_error=_decode_failure,
        timeout_s=file_timeout_s if n_workers else None,
        # Stored codes are five times the fitted image's bytes: fewer of them wait.
        max_ahead=max(2 * batch, (2 if on_device else 4) * n_workers),
    )
    tasks: list[DecodeTask] = [(os.fspath(p), spec, "auto") for p in paths]
    # A thread drives the pool (hands out files, takes results off the workers' pipes) and
    # makes each batch's input (a staging buffer, or the fit on the device) while this one
    # runs the model: a worker never waits with a decoded image in its pipe, and the device
    # never waits for a copy on the host (on one H200 it was a seventh of this thread's
    # time).
    # Staged batches waiting: two on a GPU (16-bit, 32 MB at 1024 px; fitted there, the
    # 64 MB float input), one on the CPU, whose staged batch is the float input itself
    # (64 MB) and whose model is slower anyway.
    loaded = Prefetch(
        _staged_batches(predictor, paths, pool, tasks, batch=batch, on_device=on_device),
        depth=2 if predictor.device.type == "cuda" else 1,
        name="cxr-predict-prefetch",
    )
    finishing = _Finishing(predictor, heatmaps)
    try:
        with _switch_interval(PREDICT_SWITCH_INTERVAL_S):
            for entries, staged in loaded:
                yield from finishing.launch(entries, staged)
                del staged
            yield from finishing.drain()
    finally:
        finishing.close()
        loaded.close()  # the driving thread stops before its workers do
        pool.close()


def _decode_failure(task: DecodeTask, exc: Exception) -> ImageError:
    """The decode pool's `on_error`: a file's failure as its `ImageError`, the file named."""
    if isinstance(exc, ImageError):
        return exc
    return ImageError(f"{task[0]}: {exc or type(exc).__name__}")  # some say nothing


def _staged_batches(
    predictor: Predictor,
    paths: Sequence[str | os.PathLike[str]],
    pool: DecodePool[DecodeTask, LoadedImage | ReadImage | ImageError],
    tasks: list[DecodeTask],
    *,
    batch: int,
    on_device: bool,
) -> Iterator[tuple[list[FileResult], StagedBatch | None]]:
    """The files in batches of `batch` decoded images, each batch's input staged."""
    entries: list[FileResult] = []
    inputs: list[PreparedImage | StoredPixels] = []
    for path, item in zip(paths, pool.map(tasks), strict=True):
        if isinstance(item, ImageError):
            entries.append(FileResult(path=Path(path), error=item))
            continue
        entries.append(FileResult(path=Path(path), meta=item.meta,
                                  display=item.display, timings=item.timings))  # fmt: skip
        inputs.append(item.stored if isinstance(item, ReadImage) else item.prepared)
        if len(inputs) >= batch:
            yield entries, predictor.stage(inputs, on_device=on_device)
            entries, inputs = [], []
    if entries:
        yield entries, predictor.stage(inputs, on_device=on_device) if inputs else None


class _Finishing:
    """Batches past their model pass, each one's `finish` on a thread of its own.

    A batch's `finish` (boxes on CPU threads, results) runs there while the next batch's
    `model_pass` keeps the device busy: on one H200 the two took 3.0 and 5.8 ms per file
    one after the other.
    """

    def __init__(self, predictor: Predictor, heatmaps: HeatmapPolicy) -> None:
        self._predictor = predictor
        self._heatmaps = heatmaps
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="cxr-predict-finish")
        self._in_flight: list[_Batch] = []

    def launch(self, entries: list[FileResult], staged: StagedBatch | None) -> Iterator[FileResult]:
        """Run a batch's model pass, start its finish, then hand out the batch before it
        (whose finish ran meanwhile)."""
        good = [r for r in entries if r.error is None]
        finishing = None
        if staged is not None:
            predictor = self._predictor
            finishing = self._pool.submit(
                predictor.finish, predictor.model_pass(staged, self._heatmaps)
            )
        self._in_flight.append((entries, good, finishing))
        if len(self._in_flight) > 1:
            yield from self._complete(self._in_flight.pop(0))

    def drain(self) -> Iterator[FileResult]:
        """Hand out the batches still finishing, in order."""
        while self._in_flight:
            yield from self._complete(self._in_flight.pop(0))

    def close(self) -> None:
        """Wait for the finish running, cancel those not started."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _complete(self, batch: _Batch) -> Iterator[FileResult]:
        entries, good, finishing = batch
        if finishing is not None:
            for r, pred in zip(good, finishing.result(), strict=True):
                r.prediction = pred
        yield from entries
