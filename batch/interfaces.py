"""What crosses the engine's seams: an item found by a source, its outcome, and the
`Source` and `Sink` contracts that new inputs (DICOMweb, a C-STORE inbox) and new
outputs (DICOM push) implement."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from labeler import ReportLabels

__all__ = ["BatchInputError", "Labeler", "Outcome", "Sink", "Source", "SourceItem"]

# Kinds an item can have, decided from its header (see batch.scan):
# image, bitmap, sr, dicomdir, other, ignored, invalid.
PROCESSED_KINDS = ("image", "bitmap", "sr")


class BatchInputError(ValueError):
    """The export, the archive or the reports CSV cannot be used as given (the service
    answers 422)."""


class Labeler(Protocol):
    """What the processor needs of a report labeler (`batch.labeling.PipelineLabeler`, which
    the service's labeler extends)."""

    @property
    def version(self) -> str:
        """A short identifier of the labeler's rules, stored beside every result."""
        ...

    def label_many(self, items: Sequence[tuple[str, str]]) -> list[ReportLabels]:
        """Label (id, text) pairs; a bad report gives a result with `.error` set."""
        ...


@dataclass(frozen=True)
class SourceItem:
    """One input of a batch, classified from its header (pixels not decoded yet).

    Attributes:
        key: the item's stable identity within its source, recorded as `path` in the
            result line and in the database: a path relative to the export for a folder
            or a zip; a source-chosen stable string (e.g. built from the SOP Instance UID)
            for other sources. A rerun or a resume recognises done items by this key.
        kind: image, bitmap, sr, dicomdir, other, ignored or invalid.
        study_instance_uid, accession_number: from the header, to match a report.
        note: why the item is skipped or invalid (empty for items to process).
    """

    key: str
    kind: str
    study_instance_uid: str | None = None
    accession_number: str | None = None
    note: str | None = None


@dataclass
class Outcome:
    """The outcome of one item: state done, skipped or failed, with its result.

    `image` holds the decoded `models.dicom.DicomImage` while the sinks of its chunk
    run (the dataset sink writes its pixels), and is dropped afterwards.
    """

    key: str
    state: str
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    image: Any | None = field(default=None, repr=False)


class Source(ABC):
    """Where a batch's items come from (a folder, a zip, later DICOMweb or a C-STORE inbox).

    The engine calls `scan()` once per run (or once per job in the service, which stores
    the items), then, for each item it processes, `local_path(item)` and `release(item)`.
    """

    @abstractmethod
    def scan(self) -> Iterator[SourceItem]:
        """Every item of the source, classified from headers only, in a stable order.

        Raises:
            BatchInputError: the source itself cannot be read (missing folder, bad zip).
        """

    @abstractmethod
    def local_path(self, item: SourceItem) -> Path:
        """A local file holding the item's bytes (a remote source downloads it here).

        Raises:
            OSError or ValueError: the item cannot be fetched; it is recorded as failed.
        """

    def release(self, item: SourceItem) -> None:  # noqa: B027 - optional hook
        """Called once the item is processed: drop a downloaded copy (default: nothing)."""

    def interrupt(self) -> None:  # noqa: B027 - optional hook
        """Called from another thread when the run must stop now (a cancelled job, a
        stopping service): a remote source cuts the download or search in flight, which
        then raises. Default: nothing (local reads end on their own)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Free what the source holds (connections, temporary files); default: nothing."""


class Sink(ABC):
    """Where outcomes go (a JSONL file, the database, a training set, later a PACS).

    Sinks of a run are called in order, chunk by chunk: a sink may add fields to an
    outcome's `result` for the sinks after it (the dataset sink adds `dataset_image`
    before the JSONL sink writes the line).
    """

    def begin(self, items: Sequence[SourceItem]) -> None:  # noqa: B027 - optional hook
        """Called before a chunk is processed (the database marks its items in flight)."""

    @abstractmethod
    def write(self, outcomes: Sequence[Outcome]) -> None:
        """Record the outcomes of one chunk, durably before returning."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Flush and finish; called once at the end of a run, also after an interruption."""
