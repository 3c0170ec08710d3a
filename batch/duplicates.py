"""Copies of one image in a batch: the same SOP Instance UID and the same model input.

A PACS export often holds an instance twice (two folders, a loose copy beside a DICOMDIR
export, a re-export in another transfer syntax). The first copy in source order is
processed; later ones are recorded as skipped, `duplicate_of` the first. The UID alone does
not decide: a derived image (an inverted MONOCHROME1 copy) may keep its source's UID, and is
processed, with a warning. The pixels are compared by the fingerprint of the model input
(`models.image_pipeline.LoadedImage.fingerprint`), made in the decoding worker.
"""

from __future__ import annotations

from typing import Any

__all__ = ["InstanceIndex", "duplicate_fields", "shared_uid_warning"]


class InstanceIndex:
    """SOP Instance UID -> pixel fingerprint -> key of the first item that had both."""

    def __init__(self) -> None:
        self._firsts: dict[str, dict[str, str]] = {}

    def remember(self, uid: str | None, fingerprint: str | None, key: str) -> None:
        """Record that `key` holds this image (kept if an earlier item has it: the first
        copy wins)."""
        if uid and fingerprint:
            self._firsts.setdefault(uid, {}).setdefault(fingerprint, key)

    def first_copy(self, uid: str | None, fingerprint: str | None, key: str) -> str | None:
        """The key of an earlier item with this UID and fingerprint (None: no such item, or
        only `key` itself: the same item processed again, a retry)."""
        if not uid or not fingerprint:
            return None
        first = self._firsts.get(uid, {}).get(fingerprint)
        return first if first != key else None

    def others(self, uid: str | None, key: str) -> list[str]:
        """Keys of other items recorded with this UID (whatever their pixels)."""
        return [k for k in self._firsts.get(uid or "", {}).values() if k != key]

    def forget(self, uid: Any, fingerprint: Any, key: str) -> None:
        """Drop `key` as the first copy (its prediction failed: a later copy is predicted)."""
        copies = self._firsts.get(str(uid), {})
        if copies.get(str(fingerprint)) == key:
            del copies[str(fingerprint)]

    def restore(self, line: dict[str, Any]) -> None:
        """Take back the image a recorded result line holds (done, or a skipped copy naming
        its first); lines without a fingerprint (older runs, not images) teach nothing."""
        uid, fingerprint = line.get("sop_instance_uid"), line.get("pixel_fingerprint")
        if not isinstance(uid, str) or not isinstance(fingerprint, str):
            return
        state = line.get("state")
        first = line.get("path") if state == "done" else None
        if state == "skipped":
            first = line.get("duplicate_of")
        if isinstance(first, str):
            self.remember(uid, fingerprint, first)


def duplicate_fields(uid: str, fingerprint: str, first: str) -> dict[str, Any]:
    """What a skipped copy's result records beside its kind, study and accession."""
    return {
        "sop_instance_uid": uid,
        "pixel_fingerprint": fingerprint,
        "reason": f"duplicate of {first} (same SOP Instance UID and pixels)",
        "duplicate_of": first,
    }


def shared_uid_warning(other: str) -> str:
    """The warning on an image whose SOP Instance UID another item has, with other pixels."""
    return f"SOP Instance UID also used by {other} with other pixels"
