"""Copies of one image read by different workers: the shared registry the readers ask, and
the driver's second judgement of each line as it arrives (`across_readers`).

One machine meets the files in order and knows, for each image, whether a copy came before
(`batch.duplicates.InstanceIndex`). On Ray the readers work at once: they share one
registry actor, so a copy that another reader decoded first is skipped before it is
predicted, and the driver judges each line again, so a copy that slipped through (the
registry lost with its node) is still recorded as a duplicate. A copy skipped for a first
copy whose prediction then failed is read again (`CopiesAwaitingFirst`), as one machine
would have predicted it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from batch.duplicates import InstanceIndex, Seen, duplicate_fields
from batch.interfaces import SourceItem
from batch.results import result_line

__all__ = ["CopiesAwaitingFirst", "SharedInstances", "across_readers", "start_registry"]


class _InstanceRegistry:
    """The readers' shared `InstanceIndex` (a Ray actor): the first reader to decode an
    image holds it, and a copy that another reader decodes later is skipped before it
    is predicted. The driver still judges every line as it arrives (`across_readers`),
    so a registry lost with its node costs only the prediction of a copy."""

    def __init__(self, recorded: list[dict[str, Any]]) -> None:
        self.index = InstanceIndex()
        for line in recorded:
            self.index.restore(line)

    def see(self, uid: str | None, fingerprint: str | None, key: str) -> Seen:
        return self.index.see(uid, fingerprint, key)

    def forget(self, uid: Any, fingerprint: Any, key: str) -> None:
        self.index.forget(uid, fingerprint, key)


class SharedInstances(InstanceIndex):
    """A reader's `InstanceIndex` that asks the shared registry; if the registry cannot be
    reached, each image counts as a first copy and the driver finds the copies."""

    def __init__(self, registry: Any) -> None:
        super().__init__()
        self.registry = registry

    def see(self, uid: str | None, fingerprint: str | None, key: str) -> Seen:
        import ray

        try:
            seen: Seen = ray.get(self.registry.see.remote(uid, fingerprint, key), timeout=60)
        except (ray.exceptions.RayError, TimeoutError):
            return super().see(uid, fingerprint, key)
        return seen

    def forget(self, uid: Any, fingerprint: Any, key: str) -> None:
        import ray

        super().forget(uid, fingerprint, key)
        # A copy read from now on is predicted; one skipped already is read again by the
        # driver once this line reaches it (`CopiesAwaitingFirst`).
        with contextlib.suppress(ray.exceptions.RayError, TimeoutError):
            ray.get(self.registry.forget.remote(uid, fingerprint, key), timeout=60)


def start_registry(recorded: Sequence[dict[str, Any]]) -> Any:
    """A registry actor holding the images of the recorded lines (only what it needs)."""
    import ray

    fields = ("path", "state", "sop_instance_uid", "pixel_fingerprint", "duplicate_of")
    images = [
        {k: line.get(k) for k in fields}
        for line in recorded
        if isinstance(line.get("pixel_fingerprint"), str)
    ]
    actor = ray.remote(num_cpus=0, max_restarts=0)(_InstanceRegistry)
    return actor.remote(images)


class CopiesAwaitingFirst:
    """Holds a skipped copy's line until its first copy's line arrives: if that copy was
    done, the line goes out; if its prediction failed, the copy is read again (`retry`).

    A reader skips a copy as soon as another reader has decoded the image, before that
    image is predicted; on Ray the lines come back as blocks finish, so the first copy's
    fate is known only later.
    """

    def __init__(self, recorded: Sequence[dict[str, Any]], items: Sequence[SourceItem]) -> None:
        self.state = {str(line.get("path")): str(line.get("state")) for line in recorded}
        self.items = {item.key: item for item in items}
        self.waiting: dict[str, list[dict[str, Any]]] = {}
        self.again: list[SourceItem] = []

    def settle(self, lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The lines to record now, in order; held and retried copies left out."""
        out: list[dict[str, Any]] = []
        for line in lines:
            first = line.get("duplicate_of") if line.get("state") == "skipped" else None
            if isinstance(first, str) and str(line.get("path")) in self.items:
                if first not in self.state:
                    self.waiting.setdefault(first, []).append(line)
                    continue
                if self.state[first] == "failed":
                    self.again.append(self.items[str(line.get("path"))])
                    continue
            out.append(line)
            key = str(line.get("path"))
            self.state[key] = str(line.get("state"))
            for held in self.waiting.pop(key, []):
                if self.state[key] == "failed":
                    self.again.append(self.items[str(held.get("path"))])
                else:
                    out.append(held)
        return out

    def retry(self) -> list[SourceItem]:
        """The copies to read again, in source order."""
        order = {key: n for n, key in enumerate(self.items)}
        return sorted(self.again, key=lambda item: order[item.key])

    def unsettled(self) -> list[dict[str, Any]]:
        """Held lines whose first copy's line never came (recorded as they are)."""
        return [line for held in self.waiting.values() for line in held]


def across_readers(line: dict[str, Any], instances: InstanceIndex) -> dict[str, Any]:
    """The readers skip the copies of an image that the shared registry
    (`_InstanceRegistry`) knows, and the driver judges each line again as it arrives: a
    copy that reached it unskipped (the registry lost with its node) becomes a duplicate
    here, of the copy whose line arrived first (Ray hands blocks back as they finish, not
    always in source order)."""
    uid, fingerprint = line.get("sop_instance_uid"), line.get("pixel_fingerprint")
    key = str(line["path"])
    if line.get("state") == "failed":  # no first copy: a later one is predicted
        instances.forget(uid, fingerprint, key)
    if line.get("state") != "done" or not isinstance(fingerprint, str):
        instances.restore(line)  # a reader's own duplicate names its first copy
        return line
    if not isinstance(uid, str):  # a bitmap: only its pixels can match
        uid = None
    seen = instances.see(uid, fingerprint, key)
    if seen.duplicate_of is None or uid is None:
        if seen.warning and "warning" not in line:
            return {**line, "warning": seen.warning}
        return line
    fields = duplicate_fields(uid, fingerprint, seen.duplicate_of)
    base = {k: line.get(k) for k in ("kind", "study_instance_uid", "accession_number")}
    return result_line(key, "skipped", base | fields, None)
