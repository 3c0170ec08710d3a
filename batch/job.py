"""The one builder: a typed job spec to its source, processor and sinks.

    job = build_job(JobSpec(FolderInput(export)), labeler=labeler, predictor=predictor)
    remaining = plan(job.source.scan(), recorded, job.processor)
    run_resumed(remaining, job.processor, [*job.sinks, JsonlSink(out)], ...)

`cxr batch`, the service's job runner and `cxr listen` all build their jobs here; each
adds the sinks that are its own (a JSONL file, the database, metrics, progress) after
`job.sinks`, which push results first (the lines written after record what was pushed)
and then add the training set's image names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from batch.archive import ZipLimits
from batch.dicom_push import PUSH_KINDS, DicomPushSink
from batch.dicomweb_source import DicomwebSource
from batch.inbox_source import InboxSource
from batch.interfaces import BatchInputError, Labeler, Sink, Source
from batch.processor import BatchProcessor
from batch.reports import load_reports_csv
from batch.scan import DEFAULT_MODALITIES
from batch.sinks import DatasetSink
from batch.sources import FolderSource, ZipSource
from batch.training_set import DatasetWriter

if TYPE_CHECKING:
    from collections.abc import Callable

    from batch.pacs.dicomweb import DicomwebClient
    from models.image_pipeline import InputSpec
    from models.predict import Predictor

__all__ = [
    "BatchJob",
    "DatasetOutput",
    "DicomwebInput",
    "FolderInput",
    "InboxInput",
    "JobInput",
    "JobSpec",
    "PushOutput",
    "ZipInput",
    "build_job",
]


@dataclass(frozen=True)
class FolderInput:
    """A PACS export folder (keys are paths relative to it)."""

    path: Path


@dataclass(frozen=True)
class ZipInput:
    """A zip of an export, checked by `batch.archive` and extracted into `extract_to`."""

    archive: Path
    extract_to: Path
    limits: ZipLimits


@dataclass(frozen=True)
class DicomwebInput:
    """Instances found by QIDO-RS and fetched by WADO-RS (the caller owns the client)."""

    client: DicomwebClient
    study_uids: tuple[str, ...] = ()
    since: date | None = None
    modalities: tuple[str, ...] = DEFAULT_MODALITIES
    workdir: Path | None = None


@dataclass(frozen=True)
class InboxInput:
    """The folder `cxr listen` writes received instances into."""

    folder: Path


@dataclass(frozen=True)
class DatasetOutput:
    """An NIH-style training set written from the images with mined labels.

    Attributes:
        keep: on resume, the PNG names recorded by the earlier run's lines.
    """

    folder: Path
    size: int = 1024
    uncertain_positive: bool = False
    key: bytes | None = field(default=None, repr=False)
    resume: bool = False
    keep: frozenset[str] = frozenset()


@dataclass(frozen=True)
class PushOutput:
    """A TID 1500 SR and/or a GSPS per predicted image, stored by STOW-RS (the caller owns
    the client)."""

    client: DicomwebClient
    kinds: tuple[str, ...] = PUSH_KINDS


JobInput = FolderInput | ZipInput | DicomwebInput | InboxInput


@dataclass(frozen=True)
class JobSpec:
    """What a batch job reads, with which limits, and the outputs the library writes.

    Attributes:
        input: where the items come from.
        reports: a reports CSV matched to images by accession number or study UID.
        reports_name: how messages name the CSV (an uploaded file's client-side name).
        file_timeout_s: give up reading one file after this long (None: no limit).
        max_pixels: images with more pixels fail from their header (None: no limit).
        dataset: write a training set too.
        push: push SR/GSPS results to a PACS (DICOMweb and inbox inputs).
        read_workers: processes that decode a run's images ahead of the model
            (`batch.read_ahead`); 0: one at a time in the run's thread.
    """

    input: JobInput
    reports: Path | None = None
    reports_name: str | None = None
    file_timeout_s: float | None = None
    max_pixels: int | None = None
    dataset: DatasetOutput | None = None
    push: PushOutput | None = None
    read_workers: int = 0


@dataclass
class BatchJob:
    """A built job: run `processor` over what `source` scans, writing to `sinks` in order."""

    source: Source
    processor: BatchProcessor
    sinks: list[Sink]

    @property
    def dataset(self) -> DatasetSink | None:
        """The training-set sink, if the spec asked for one."""
        return next((s for s in self.sinks if isinstance(s, DatasetSink)), None)


def _source(spec: JobSpec) -> Source:
    given = spec.input
    exclude = [spec.reports] if spec.reports is not None else []
    if isinstance(given, FolderInput):
        return FolderSource(given.path, exclude=exclude, file_timeout_s=spec.file_timeout_s)
    if isinstance(given, ZipInput):
        return ZipSource(
            given.archive,
            given.extract_to,
            given.limits,
            exclude=exclude,
            file_timeout_s=spec.file_timeout_s,
        )
    if isinstance(given, DicomwebInput):
        return DicomwebSource(
            given.client,
            study_uids=given.study_uids,
            since=given.since,
            modalities=given.modalities,
            workdir=given.workdir,
            keep_headers=spec.push is not None,
        )
    return InboxSource(given.folder)


def build_job(
    spec: JobSpec,
    *,
    labeler: Labeler,
    predictor: Predictor | None,
    cancelled: Callable[[], bool] | None = None,
    input_spec: InputSpec | None = None,
) -> BatchJob:
    """Build the source, the processor and the library's sinks of a job.

    Args:
        spec: the job.
        labeler: the report labeler (SRs, CSV reports).
        predictor: the image model, or None (images are read and reported without one).
        cancelled: checked between items; True stops the run, leaving it resumable.
        input_spec: how images are fitted when the model runs elsewhere (a Ray reader);
            default the predictor's.

    Returns:
        The job; the caller closes `job.source` (and the sinks it adds) when done.

    Raises:
        BatchInputError: the reports CSV cannot be read, or `push` is asked of a folder,
            zip or of a source whose headers cannot be pushed.
    """
    if spec.push is not None and isinstance(spec.input, FolderInput | ZipInput):
        raise BatchInputError("pushing results needs a DICOMweb or C-STORE inbox input")
    reports = (
        load_reports_csv(spec.reports, name=spec.reports_name) if spec.reports is not None else None
    )
    source = _source(spec)
    processor = BatchProcessor(
        source,
        labeler=labeler,
        predictor=predictor,
        reports=reports,
        cancelled=cancelled,
        file_timeout_s=spec.file_timeout_s,
        max_pixels=spec.max_pixels,
        input_spec=input_spec,
        display_size=spec.dataset.size if spec.dataset is not None else None,
        read_workers=spec.read_workers,
    )
    sinks: list[Sink] = []
    if spec.push is not None and isinstance(source, DicomwebSource | InboxSource):
        card = predictor.card if predictor is not None else {}
        sinks.append(
            DicomPushSink(
                spec.push.client, kinds=spec.push.kinds, card=card, headers=source.pop_header
            )
        )
    if spec.dataset is not None:
        out = spec.dataset
        writer = DatasetWriter(
            out.folder,
            size=out.size,
            uncertain_positive=out.uncertain_positive,
            key=out.key,
            resume=out.resume,
            keep=out.keep,
        )
        sinks.append(DatasetSink(writer))  # before the caller's sinks: it adds `dataset_image`
    return BatchJob(source, processor, sinks)
