"""The actors of a batch job on Ray: file workers (read, label, and on CPU clusters predict
and push) and, on GPU clusters, predict workers (one model per GPU).

A file worker builds its job once (`batch.job.build_job`: the source, the processor, the
push sink), loads its labeler lazily and, on a CPU cluster, its model once; it then takes
blocks of items (tens of images) and processes them chunk by chunk (`chunk_size` images per
forward pass), as `batch.engine.run` does on one machine. Each file is caught at its own
boundary by the processor, and decoding runs in a child process
(`batch.processor.decode_pool`), so a file that crashes the decoder is that file's failure,
not a dead actor.

What crosses back to the driver per item (`ItemResult`): the result line; with a training
set, each image with mined labels as its PNG, encoded here at the set's size, and its facts
(the driver only names and writes the files, as the names number each patient's images in
order). On a GPU cluster the fitted images, and with `--push` their headers, go apart
(`FittedImage`, `FileWorker.read`): from the file worker's node to a predict worker's,
through Ray's object store, not through the driver.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batch.interfaces import Outcome, Sink, Source, SourceItem
from batch.job import DicomwebInput, FolderInput, JobSpec, PushOutput, build_job
from batch.results import outcome_line
from batch.sinks import training_labels
from batch.training_set import EncodedPng, encode_png

if TYPE_CHECKING:
    from pydicom.dataset import Dataset

    from batch.pacs.dicomweb import DicomwebServer
    from labeler import ReportLabels
    from labeler.config import LabelerConfig
    from models.dicom import ImageMeta
    from models.image_pipeline import InputSpec, PreparedImage
    from models.precision import Precision

__all__ = ["DisplayCopy", "FileWorker", "FittedImage", "ItemResult", "PredictWorker", "WorkerJob"]


@dataclass(frozen=True)
class WorkerJob:
    """What a worker needs to build its part of the job; everything in it can be pickled
    (a DICOMweb client cannot: each worker opens its own from `dicomweb`).

    Attributes:
        folder: the export (or extracted zip), read at this path on every node.
        dicomweb: or the server the instances are fetched from (and results pushed to).
        push_kinds: "sr" and/or "gsps" pushed by the worker that predicts (empty: none).
        reports, reports_name, file_timeout_s, max_pixels: as in `batch.job.JobSpec`.
        display_size: keep a display copy this large for the training set (None: none).
        labeler: the report labeler's configuration (None: `LabelerConfig()`): the
            driver's, so that the workers read reports as one machine would.
    """

    folder: Path | None = None
    dicomweb: DicomwebServer | None = None
    push_kinds: tuple[str, ...] = ()
    reports: Path | None = None
    reports_name: str | None = None
    file_timeout_s: float | None = None
    max_pixels: int | None = None
    display_size: int | None = None
    labeler: LabelerConfig | None = None

    def spec(self) -> JobSpec:
        """The worker's own `JobSpec` (its own DICOMweb clients; no training-set writer)."""
        if self.dicomweb is not None:
            given: FolderInput | DicomwebInput = DicomwebInput(self.dicomweb.client())
        elif self.folder is not None:
            given = FolderInput(self.folder)
        else:
            raise ValueError("a worker job needs a folder or a DICOMweb server")
        push = None
        if self.push_kinds and self.dicomweb is not None:
            push = PushOutput(self.dicomweb.client(), self.push_kinds)
        return JobSpec(
            given,
            reports=self.reports,
            reports_name=self.reports_name,
            file_timeout_s=self.file_timeout_s,
            max_pixels=self.max_pixels,
            push=push,
        )


@dataclass
class DisplayCopy:
    """What the training-set writer reads of a decoded image (`batch.sinks.DatasetSink`):
    its PNG, encoded by the worker at the set's size, and its facts."""

    display: EncodedPng
    meta: ImageMeta


@dataclass
class ItemResult:
    """One item's result as it crosses to the driver (and through it to a predict worker).

    Attributes:
        line: the result line.
        image: a training-set image's PNG and facts (`DisplayCopy`), or None.
        fitted: its fitted image went to the predict pool (`FileWorker.read`).
    """

    line: dict[str, Any]
    image: DisplayCopy | None = None
    fitted: bool = False


@dataclass(frozen=True)
class FittedImage:
    """An image a file worker fitted for the model, for a predict worker (on a GPU cluster);
    it goes from one to the other in Ray's object store, never through the driver.

    Attributes:
        key: the item's key (its line's `path`).
        prepared: the fitted image.
        header: the instance's header, for the predict worker's push sink (or None).
    """

    key: str
    prepared: PreparedImage
    header: Dataset | None = None


def _line_outcome(line: dict[str, Any]) -> Outcome:
    result = {k: v for k, v in line.items() if k not in ("path", "state", "error")}
    return Outcome(str(line["path"]), str(line["state"]), result, line.get("error"))


class FileWorker:
    """Reads, labels and (without a predict pool) predicts and pushes blocks of items.

    Args:
        job: what to read and where results go.
        recorded: lines of SRs recorded earlier (their labels reach this run's images).
        model: the checkpoint to predict with here (None: no model, or a predict pool).
        device, precision: where and how this worker's model runs.
        input_spec: how to fit images for a predict pool's model (`keep_pixels`).
        keep_pixels: hand the fitted images on (a predict pool predicts them).
        registry: the shared registry of decoded images (`batch.cluster.copies`), or None.
        chunk_size: images per forward pass.
    """

    def __init__(
        self,
        job: WorkerJob,
        recorded: Sequence[dict[str, Any]] = (),
        model: Path | None = None,
        device: str = "cpu",
        precision: Precision = "auto",
        input_spec: InputSpec | None = None,
        keep_pixels: bool = False,
        registry: Any = None,
        chunk_size: int = 8,
    ) -> None:
        from batch.labeling import PipelineLabeler
        from batch.processor import decode_pool

        predictor = None
        if model is not None:
            from models.predict import load_predictor

            predictor = load_predictor(model, device=device, precision=precision)
        self.keep_pixels = keep_pixels
        self.chunk_size = chunk_size
        self.job = build_job(
            job.spec(),
            labeler=PipelineLabeler(job.labeler),
            predictor=predictor,
            input_spec=input_spec,
        )
        if keep_pixels:  # the predict worker pushes; this one keeps the headers for it
            self.job.sinks = []
        processor = self.job.processor
        if job.display_size is not None:
            processor.input_spec = replace(processor.input_spec, display_size=job.display_size)
        self.display_size = job.display_size
        self.headers = bool(job.push_kinds) and keep_pixels  # pushed by the predict worker
        # Decoding in a child process: a file that crashes the decoder fails alone, once,
        # instead of killing this actor (whose block would be charged an attempt).
        processor.decode_pool = decode_pool(workers=1, timeout_s=job.file_timeout_s)
        self.restore(recorded)
        if registry is not None:  # copies read by other workers are skipped here too
            from batch.cluster.copies import SharedInstances

            processor.instances = SharedInstances(registry)

    def ready(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def restore(self, lines: Sequence[dict[str, Any]]) -> None:
        """Learn what recorded lines teach (an SR's labels for images of its study)."""
        for line in lines:
            self.job.processor.restore(line)

    def process(self, rows: Sequence[SourceItem]) -> list[ItemResult]:
        """Process a block, chunk by chunk; one result per item, in order."""
        return self.read(rows)[0]

    def read(self, rows: Sequence[SourceItem]) -> tuple[list[ItemResult], list[FittedImage]]:
        """Process a block (`process`), and with `keep_pixels` also return its fitted images
        apart: on a GPU cluster the driver receives the results and hands the images, as
        an ObjectRef (`ActorPool.submit(..., returns=2)`), to a predict worker.

        Returns:
            One result per item, in order; the fitted images of those marked `fitted`.
        """
        out: list[ItemResult] = []
        fitted: list[FittedImage] = []
        source = self.job.source
        for start in range(0, len(rows), self.chunk_size):
            outcomes = self.job.processor.process(rows[start : start + self.chunk_size])
            for sink in self.job.sinks:  # the push sink (no training-set writer here)
                sink.write(outcomes)
            for outcome in outcomes:
                result = self._result(outcome)
                if self.keep_pixels and outcome.state == "done" and outcome.image is not None:
                    result.fitted = True
                    fitted.append(self._fitted(outcome.key, outcome.image.prepared, source))
                out.append(result)
        return out, fitted

    def _result(self, outcome: Outcome) -> ItemResult:
        image = outcome.image
        result = ItemResult(outcome_line(outcome))
        if image is None or outcome.state != "done":
            return result
        size = self.display_size
        labels = training_labels(outcome)
        if size is not None and image.display is not None and labels is not None:
            # a training-set image: its PNG made here, not on the driver
            result.image = DisplayCopy(encode_png(image.display, size), image.meta)
        return result

    def _fitted(self, key: str, prepared: PreparedImage, source: Source) -> FittedImage:
        header = None
        if self.headers:
            pop = getattr(source, "pop_header", None)
            header = pop(key) if pop is not None else None
        return FittedImage(key, prepared, header)


class PredictWorker:
    """Predicts fitted images, one model per actor (one per GPU), and pushes their results.

    Args:
        model: the checkpoint.
        device, precision: where and how it runs.
        job: for the push sink's server and kinds.
        registry: the shared registry (a first copy whose prediction fails is forgotten).
    """

    def __init__(
        self,
        model: Path,
        device: str,
        precision: Precision = "auto",
        job: WorkerJob | None = None,
        registry: Any = None,
    ) -> None:
        from batch.processor import BatchProcessor
        from models.predict import load_predictor

        predictor = load_predictor(model, device=device, precision=precision)
        self.processor = BatchProcessor(_NoSource(), labeler=_NoLabeler(), predictor=predictor)
        self.headers: dict[str, Dataset] = {}
        self.push: Sink | None = None
        if job is not None and job.push_kinds and job.dicomweb is not None:
            from batch.dicom_push import DicomPushSink

            self.push = DicomPushSink(job.dicomweb.client(), kinds=job.push_kinds,
                                      card=predictor.card, headers=self.headers.pop)  # fmt: skip
        if registry is not None:
            from batch.cluster.copies import SharedInstances

            self.processor.instances = SharedInstances(registry)

    def ready(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def predict(self, results: list[ItemResult], fitted: list[FittedImage]) -> list[ItemResult]:
        """Predict the images the readers fitted; the other items pass through.

        Args:
            results: a file worker's block results (from the driver).
            fitted: its fitted images (an ObjectRef on the driver, the value here).
        """
        images = {image.key: image for image in fitted}
        loaded: list[Outcome] = []
        for item in results:
            line = item.line
            image = images.get(str(line["path"]))
            if line["state"] == "done" and item.fitted and image is not None:
                # the reader's "no model loaded" note does not hold here
                outcome = _line_outcome({k: v for k, v in line.items() if k != "note"})
                outcome.result["model"] = self.processor.model_name
                outcome.result["demo"] = self.processor.demo
                outcome.image = _Prepared(image.prepared)
                if image.header is not None:
                    self.headers[outcome.key] = image.header
                loaded.append(outcome)
        if loaded:
            self.processor._predict(loaded)
            if self.push is not None:
                self.push.write(loaded)
        by_key = {o.key: outcome_line(o) for o in loaded}
        return [replace(item, line=by_key.get(str(item.line["path"]), item.line), fitted=False)
                for item in results]  # fmt: skip


class _Prepared:
    def __init__(self, prepared: PreparedImage) -> None:
        self.prepared = prepared


class _NoSource(Source):
    def scan(self) -> Iterator[SourceItem]:
        return iter(())

    def local_path(self, item: SourceItem) -> Path:
        raise OSError("the predict stage reads no files")


class _NoLabeler:
    version = "unused"

    def label_many(self, items: Sequence[tuple[str, str]]) -> list[ReportLabels]:
        raise RuntimeError("the predict stage labels no reports")
