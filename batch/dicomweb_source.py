"""A batch source on a DICOMweb server: QIDO-RS finds the instances, WADO-RS fetches them.

Each instance's key (the result line's `path`) is its WADO-RS resource below the service
root, `studies/{study}/series/{series}/instances/{sop}`: stable, so a rerun with --resume
(or a resumed service job) leaves recorded instances alone, and `local_path` can fetch an
item from its key alone, as a job resumed after a restart needs.
"""

from __future__ import annotations

import contextlib
import logging
import re
import tempfile
from collections.abc import Iterator, Sequence
from datetime import date
from pathlib import Path

from pydicom.dataset import Dataset

from batch.interfaces import Source, SourceItem
from batch.pacs.dicomweb import DicomwebClient, DicomwebError, InstanceRef, SearchFailure
from batch.scan import DEFAULT_MODALITIES
from models.dicom import read_dicom_dataset

__all__ = ["DicomwebSource", "ref_from_key"]

log = logging.getLogger(__name__)

_U = r"([0-9]+(?:\.[0-9]+)*)"  # a UID: digits, single dots between them
_KEY = re.compile(rf"studies/{_U}/series/{_U}/instances/{_U}")  # fullmatch: `$` passes a "\n"
# Storage SOP classes that are never images: SR documents (…88.x), presentation states (…11.x).
_NOT_IMAGES = ("1.2.840.10008.5.1.4.1.1.88.", "1.2.840.10008.5.1.4.1.1.11.")


def ref_from_key(key: str) -> InstanceRef:
    """The instance an item's key names.

    Raises:
        DicomwebError: the key is not a WADO-RS instance path.
    """
    match = _KEY.fullmatch(key)
    if not match:
        raise DicomwebError(f"{key[:200]!r} is not studies/UID/series/UID/instances/UID")
    return InstanceRef(*match.groups())


class DicomwebSource(Source):
    """Instances of the studies matching the filters, in series of the given modalities.

    Args:
        client: the DICOMweb client (its URL and auth).
        study_uids: only these studies (default: all that match the other filters).
        since: studies from this day on (StudyDate).
        modalities: series modalities to take (default `batch.scan.DEFAULT_MODALITIES`).
        workdir: where instances are downloaded while processed (default: a temp folder);
            each file is removed as soon as its item is processed, leftovers by `close`.
        keep_headers: keep each fetched instance's header for `pop_header` (a push sink
            needs them; off, nothing accumulates over a long pull).
    """

    def __init__(
        self,
        client: DicomwebClient,
        *,
        study_uids: Sequence[str] = (),
        since: date | None = None,
        modalities: Sequence[str] = DEFAULT_MODALITIES,
        workdir: Path | None = None,
        keep_headers: bool = False,
    ) -> None:
        self.client = client
        self.study_uids = tuple(study_uids)
        self.since = since
        self.modalities = tuple(m.strip().upper() for m in modalities if m.strip())
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="cxr-dicomweb-"))
        self._headers: dict[str, Dataset] = {}
        self.keep_headers = keep_headers

    def scan(self) -> Iterator[SourceItem]:
        """Every matching instance, study by study, sorted by UIDs.

        A study or series that cannot be listed, or whose UID from the server is not a
        UID, is one `invalid` item (recorded as failed with the reason); the scan goes on.

        Raises:
            DicomwebError: the search itself fails (unreachable server, refused credentials,
                a redirect, more than the results cap), or the source was interrupted.
        """
        count = 0
        for ref in self.client.iter_instances(
            study_uids=self.study_uids, since=self.since, modalities=self.modalities
        ):
            if isinstance(ref, SearchFailure):
                yield SourceItem(
                    ref.path, "invalid", study_instance_uid=ref.study_instance_uid, note=ref.reason
                )
                continue
            count += 1
            sop_class = ref.sop_class_uid or ""
            if sop_class.startswith(_NOT_IMAGES):
                yield SourceItem(
                    ref.path,
                    "other",
                    study_instance_uid=ref.study_instance_uid,
                    note=f"not an image (SOP Class {sop_class})",
                )
            else:
                yield SourceItem(ref.path, "image", study_instance_uid=ref.study_instance_uid)
        log.info("DICOMweb %s: %d instances to consider", self.client.url, count)

    def local_path(self, item: SourceItem) -> Path:
        """Fetch the instance (WADO-RS) into the work folder; its header is kept for sinks.

        Raises:
            DicomwebError: the instance cannot be retrieved (the message names URL and status).
        """
        ref = ref_from_key(item.key)
        data = self.client.retrieve_instance(ref)
        self.workdir.mkdir(parents=True, exist_ok=True)
        path = self.workdir / f"{ref.sop_instance_uid}.dcm"
        path.write_bytes(data)
        if not self.keep_headers:
            return path
        try:
            self._headers[item.key] = read_dicom_dataset(path)
        except Exception:  # noqa: BLE001 - the reader reports the file's problem itself
            log.debug("no header kept for %s", item.key, exc_info=True)
        return path

    def release(self, item: SourceItem) -> None:
        """Delete the downloaded copy (the header stays until `pop_header`)."""
        match = _KEY.fullmatch(item.key)
        if match:
            (self.workdir / f"{match.group(3)}.dcm").unlink(missing_ok=True)

    def pop_header(self, key: str) -> Dataset | None:
        """The header of a processed instance (patient, study, series identifiers), once."""
        return self._headers.pop(key, None)

    def interrupt(self) -> None:
        """Cut the request in flight and refuse later ones (from another thread): the
        search or fetch under way raises `DicomwebAborted` at once."""
        self.client.abort("interrupted: the job was cancelled or the service is stopping")

    def close(self) -> None:
        """Delete downloads left by an interrupted item (patient data), and close the client."""
        self._headers.clear()
        for leftover in self.workdir.glob("*.dcm"):
            leftover.unlink(missing_ok=True)
        if self._own_workdir:
            with contextlib.suppress(OSError):  # not empty: something else lives there
                self.workdir.rmdir()
        self.client.close()
