"""Copies of one image in a batch: the same SOP Instance UID and the same model input.

A PACS export often holds an instance twice (two folders, a loose copy beside a DICOMDIR
export, a re-export in another transfer syntax). The first copy in source order is
processed; later ones are recorded as skipped, `duplicate_of` the first. The UID alone does
not decide: a derived image (an inverted MONOCHROME1 copy) may keep its source's UID, and is
processed, with a warning. The pixels are compared by the fingerprint of the model input
(`models.image_pipeline.LoadedImage.fingerprint`), made in the decoding worker.

The same pixels under another UID (a copy given new UIDs by a second de-identification pass)
are processed too, with a warning: for a training set such twins may land in different
splits under different pseudonyms, and nothing but the pixels tells them apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["InstanceIndex", "Seen", "duplicate_fields"]


@dataclass(frozen=True)
class Seen:
    """What the index says of a decoded image.

    Attributes:
        duplicate_of: the key of an earlier copy (skip this one), or None.
        warning: why a processed image deserves a look (shared UID, same pixels), or None.
    """

    duplicate_of: str | None = None
    warning: str | None = None


class InstanceIndex:
    """SOP Instance UID -> pixel fingerprint -> key of the first item that had both, and
    fingerprint -> key of the first item with those pixels."""

    def __init__(self) -> None:
        self._firsts: dict[str, dict[str, str]] = {}
        self._pixels: dict[str, str] = {}

    def see(self, uid: str | None, fingerprint: str | None, key: str) -> Seen:
        """Judge a decoded image and, unless it is a copy, remember it."""
        first = self._firsts.get(uid or "", {}).get(fingerprint or "")
        if uid and fingerprint and first is not None and first != key:
            return Seen(duplicate_of=first)
        warnings = []
        others = [k for k in self._firsts.get(uid or "", {}).values() if k != key]
        if others:
            warnings.append(f"SOP Instance UID also used by {others[0]} with other pixels")
        twin = self._pixels.get(fingerprint or "")
        # Same UID and pixels returned above: a twin here has another UID (or none).
        if twin is not None and twin != key:
            warnings.append(
                f"same pixels as {twin} under another SOP Instance UID (a copy given new UIDs?)"
            )
        self.remember(uid, fingerprint, key)
        return Seen(warning="; ".join(warnings) or None)

    def remember(self, uid: str | None, fingerprint: str | None, key: str) -> None:
        """Record that `key` holds this image (kept if an earlier item has it: the first
        copy wins)."""
        if fingerprint:
            self._pixels.setdefault(fingerprint, key)
            if uid:
                self._firsts.setdefault(uid, {}).setdefault(fingerprint, key)

    def forget(self, uid: Any, fingerprint: Any, key: str) -> None:
        """Drop `key` as the first copy (its prediction failed: a later copy is predicted)."""
        copies = self._firsts.get(str(uid), {})
        if copies.get(str(fingerprint)) == key:
            del copies[str(fingerprint)]
        if self._pixels.get(str(fingerprint)) == key:
            del self._pixels[str(fingerprint)]

    def restore(self, line: dict[str, Any]) -> None:
        """Take back the image a recorded result line holds (done, or a skipped copy naming
        its first); lines without a fingerprint (older runs, not images) teach nothing."""
        uid, fingerprint = line.get("sop_instance_uid"), line.get("pixel_fingerprint")
        if not isinstance(fingerprint, str):
            return
        state = line.get("state")
        first = line.get("path") if state == "done" else None
        if state == "skipped":
            first = line.get("duplicate_of")
        if isinstance(first, str):
            self.remember(uid if isinstance(uid, str) else None, fingerprint, first)


def duplicate_fields(uid: str, fingerprint: str, first: str) -> dict[str, Any]:
    """What a skipped copy's result records beside its kind, study and accession."""
    return {
        "sop_instance_uid": uid,
        "pixel_fingerprint": fingerprint,
        "reason": f"duplicate of {first} (same SOP Instance UID and pixels)",
        "duplicate_of": first,
    }
