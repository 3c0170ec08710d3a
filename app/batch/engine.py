"""The engine shared by `cxr batch` and the service's jobs: one resume path, one loop.

    remaining = plan(items, recorded_lines, processor)   # resume: skip what is recorded
    run(remaining, processor, sinks, chunk_size=8)        # chunk -> outcomes -> sinks

A resume is the same as a first run with nothing recorded: the items recorded by an
earlier run (JSONL lines for the CLI, completed rows for a job) are left out, and what
they taught the processor (SR labels for later images of a study, matched CSV reports)
is restored from their lines.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app.batch.interfaces import Sink, SourceItem
from app.batch.processor import BatchProcessor

__all__ = ["RunReport", "plan", "run"]

log = logging.getLogger(__name__)


def plan(
    items: Iterable[SourceItem],
    recorded: Iterable[dict[str, Any]],
    processor: BatchProcessor,
) -> list[SourceItem]:
    """The items still to process, structured reports first (so images find their labels).

    Args:
        items: every item of the source, in its stable order.
        recorded: the result lines already recorded by an earlier run (may be empty).
        processor: restored from the recorded lines.

    Returns:
        The items whose key is not recorded; SRs first, else in source order.
    """
    keys: set[str] = set()
    for line in recorded:
        keys.add(str(line["path"]))
        processor.restore(line)
    remaining = [item for item in items if item.key not in keys]
    remaining.sort(key=lambda item: item.kind != "sr")  # stable: source order otherwise
    return remaining


@dataclass
class RunReport:
    """How a run ended."""

    processed: int = 0
    failed: int = 0
    stopped: bool = False  # cancelled, or stopped at the first failure
    first_failure: str | None = None


def run(
    items: Sequence[SourceItem],
    processor: BatchProcessor,
    sinks: Sequence[Sink],
    *,
    chunk_size: int,
    should_stop: Callable[[], bool] | None = None,
    stop_on_failure: bool = False,
    after_chunk: Callable[[int], None] | None = None,
) -> RunReport:
    """Process `items` chunk by chunk and hand each chunk's outcomes to every sink in order.

    Sinks are not closed here (the caller owns them).

    Args:
        items: what to process (see `plan`).
        processor: the processor (its `cancelled` hook stops mid-chunk).
        sinks: called in order per chunk: `begin(items)`, then `write(outcomes)`.
        chunk_size: images per forward pass.
        should_stop: checked before each chunk; True stops the run (resumable).
        stop_on_failure: stop after the chunk holding the first failure (`on_error=raise`).
        after_chunk: called with the number of chunks done (tests simulate a crash with it).
    """
    report = RunReport()
    for chunks, start in enumerate(range(0, len(items), chunk_size), start=1):
        if should_stop is not None and should_stop():
            report.stopped = True
            break
        chunk = items[start : start + chunk_size]
        for sink in sinks:
            sink.begin(chunk)
        began = time.perf_counter()
        outcomes = processor.process(chunk)
        for sink in sinks:
            sink.write(outcomes)
        for outcome in outcomes:
            outcome.image = None  # free the pixels
            report.processed += 1
            if outcome.state == "failed":
                report.failed += 1
                report.first_failure = report.first_failure or f"{outcome.key}: {outcome.error}"
        log.debug("batch chunk of %d in %.2fs", len(outcomes), time.perf_counter() - began)
        if after_chunk is not None:
            after_chunk(chunks)
        if len(outcomes) < len(chunk):  # the processor saw the cancel flag
            report.stopped = True
            break
        if stop_on_failure and report.failed:
            report.stopped = True
            break
    return report
