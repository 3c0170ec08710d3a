"""A batch source on the C-STORE inbox: the folder `cxr listen` writes received instances into.

Each instance is one file `<SOP Instance UID>.dcm`, and its key (the result line's `path`)
is the SOP Instance UID. The listener removes a file once its line is recorded, so what is
still in the inbox at start-up is what an interrupted run had not finished.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

from pydicom.dataset import Dataset

from batch.interfaces import Source, SourceItem
from batch.scan import classify_file
from models.dicom import read_dicom_dataset

__all__ = ["InboxSource"]

log = logging.getLogger(__name__)

# fullmatch: `$` would also match before a final newline ("1.2.3\n")
_UID = re.compile(r"[0-9]+(\.[0-9]+)*")


class InboxSource(Source):
    """Received instances waiting in `folder`, one `<SOP Instance UID>.dcm` file each.

    Structured reports are skipped with the reason: the listener predicts images (and its
    own results, TID 1500 SRs, must never be read back as radiology reports).

    Args:
        folder: the inbox (created if missing).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def path_of(self, key: str) -> Path:
        """The inbox file of an instance.

        Raises:
            ValueError: `key` is not a UID (it would name a file outside the inbox).
        """
        if not _UID.fullmatch(key) or len(key) > 64:
            # Cut: the key comes from a sender and may be megabytes long.
            shown = f"{key[:64]!r}..." if len(key) > 64 else repr(key)
            raise ValueError(f"{shown} ({len(key):,} characters) is not a SOP Instance UID")
        return self.folder / f"{key}.dcm"

    def item(self, key: str) -> SourceItem:
        """Classify one received instance from its header."""
        found = classify_file(self.path_of(key), key)
        if found.kind == "sr":
            return SourceItem(
                key,
                "other",
                study_instance_uid=found.study_instance_uid,
                accession_number=found.accession_number,
                note="structured report: `cxr listen` predicts images only",
            )
        return found

    def scan(self) -> Iterator[SourceItem]:
        """The instances in the inbox, oldest first."""
        files = sorted(self.folder.glob("*.dcm"), key=lambda p: (p.stat().st_mtime, p.name))
        for path in files:
            if _UID.fullmatch(path.stem):
                yield self.item(path.stem)
            else:
                log.warning("inbox file %s is not named by a SOP Instance UID; left alone", path)

    def local_path(self, item: SourceItem) -> Path:
        """The received file."""
        return self.path_of(item.key)

    def pop_header(self, key: str) -> Dataset | None:
        """The instance's header (for the DICOM push sink), or None if unreadable."""
        try:
            return read_dicom_dataset(self.path_of(key))
        except Exception:  # noqa: BLE001 - the processor has recorded the file's problem
            return None

    def remove(self, key: str) -> None:
        """Drop a received instance once its result is recorded."""
        self.path_of(key).unlink(missing_ok=True)
