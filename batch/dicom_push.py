"""A batch sink that stores each predicted image's TID 1500 SR and GSPS by STOW-RS.

One STOW-RS request per chunk. The objects' UIDs are derived from the image and the model
(`batch.pacs.documents`), so pushing the same results again does not duplicate them in the
PACS. It runs before the JSONL/database sinks: each line records `pushed` (the UIDs the
server stored); an image whose results the server refused is `failed`, with the reason.

The attributes the results copy from an image are checked first
(`batch.pacs.source_attributes`): a value DICOM forbids is corrected when that is
unambiguous, else left out or sent empty, and each kind of correction is logged once
per sink, that is once per job (keyword and rule, never the value).

A colour image (RGB...) gets its SR alone: a GSPS presents grayscale images only. The
reason is logged once per job and `gsps_skipped` counts the images; with `--push gsps`
alone such an image has no results and its line is `failed`.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any

from pydicom.dataset import Dataset

from batch.interfaces import Outcome, Sink
from batch.pacs.dicomweb import DicomwebClient, DicomwebError
from batch.pacs.documents import NotGrayscaleError, build_gsps, build_sr, predictions_from_line
from batch.pacs.source_attributes import CorrectionLog, copy_source_attributes

__all__ = ["PUSH_KINDS", "DicomPushSink"]

log = logging.getLogger(__name__)

PUSH_KINDS = ("sr", "gsps")


def _encode(ds: Dataset) -> bytes:
    buffer = io.BytesIO()
    ds.save_as(buffer, enforce_file_format=True)
    return buffer.getvalue()


class DicomPushSink(Sink):
    """Push SR and/or GSPS results of predicted images to a DICOMweb server.

    Args:
        client: the DICOMweb client to store to.
        kinds: which objects: "sr", "gsps" or both.
        card: the model card (name, version, demo).
        headers: the header of an item's image by key (the source keeps it), or None.
    """

    def __init__(
        self,
        client: DicomwebClient,
        *,
        kinds: Collection[str],
        card: dict[str, Any],
        headers: Callable[[str], Dataset | None],
    ) -> None:
        unknown = set(kinds) - set(PUSH_KINDS)
        if unknown or not kinds:
            raise ValueError(
                f"push kinds {sorted(unknown) or '(none)'}: expected sr, gsps or sr,gsps"
            )
        self.client = client
        self.kinds = tuple(k for k in PUSH_KINDS if k in kinds)
        self.card = card
        self.headers = headers
        self.pushed = 0
        self.corrections = CorrectionLog(log)
        self.gsps_skipped = 0  # colour images: their SR pushed without a GSPS

    def _skip_gsps(self, reason: NotGrayscaleError) -> None:
        # The SR carries the findings; the GSPS only draws them, on grayscale images.
        if not self.gsps_skipped:
            log.warning("GSPS not built, SR pushed alone: %s (logged once per job)", reason)
        self.gsps_skipped += 1

    def write(self, outcomes: Sequence[Outcome]) -> None:
        """Build and store the results of the chunk's predicted images (one request)."""
        owners: list[tuple[Outcome, list[str]]] = []
        payload: list[bytes] = []
        for outcome in outcomes:
            header = self.headers(outcome.key)
            prediction = predictions_from_line(outcome.result)
            if outcome.state != "done" or header is None or prediction is None:
                continue
            objects: list[Dataset] = []
            try:
                copied = copy_source_attributes(header)
                self.corrections.record(copied.corrections)
                if "sr" in self.kinds:
                    objects.append(build_sr(copied.dataset, prediction, self.card))
                if "gsps" in self.kinds:
                    try:
                        objects.append(build_gsps(header, prediction, self.card))
                    except NotGrayscaleError as exc:
                        if not objects:
                            raise  # nothing else to push: the image has no results
                        self._skip_gsps(exc)
            except (ValueError, AttributeError, TypeError) as exc:
                outcome.state, outcome.error = "failed", f"results not built: {exc}"
                continue
            owners.append((outcome, [str(ds.SOPInstanceUID) for ds in objects]))
            payload += [_encode(ds) for ds in objects]
        if not payload:
            return
        try:
            stored = self.client.store(payload)
        except DicomwebError as exc:
            for outcome, _ in owners:
                outcome.result["pushed"] = []
                outcome.state, outcome.error = "failed", f"push failed: {exc}"
            return
        for outcome, uids in owners:
            outcome.result["pushed"] = [u for u in uids if u in stored.stored]
            refused = [f"{u}: {stored.failed[u]}" for u in uids if u in stored.failed]
            if refused:
                outcome.state = "failed"
                outcome.error = f"push refused by {self.client.url}: " + "; ".join(refused)
            self.pushed += len(outcome.result["pushed"])
