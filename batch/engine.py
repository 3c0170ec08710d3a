"""The engine shared by `cxr batch` and the service's jobs: one resume path, one loop.

    remaining = plan(items, recorded_lines, processor)   # resume: skip what is recorded
    run(remaining, processor, sinks, chunk_size=8)        # chunk -> outcomes -> sinks

While `run` goes through the chunks, the processor's decoding workers (if it has any,
`BatchProcessor(read_workers=...)`) read the images of the chunks after, in order.

A resume is the same as a first run with nothing recorded: the items recorded by an
earlier run (JSONL lines for the CLI, completed rows for a job) are left out, and what
they taught the processor (SR labels for later images of a study, matched CSV reports)
is restored from their lines.

Sinks that record durably also count attempts: before a chunk runs its items are
marked in flight (the database marks its rows; the JSONL sink keeps OUT.inflight.json).
`run_resumed` retries alone the items that were in flight when the process died, and
records as failed, unread, those in flight `MAX_ATTEMPTS` times: a file that kills the
process cannot kill every restart (issue 7 item 2).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from batch.interfaces import BatchInputError, Outcome, Sink, SourceItem
from batch.processor import BatchProcessor

__all__ = ["MAX_ATTEMPTS", "RunReport", "plan", "run", "run_resumed"]

# A file may be in flight this many times when the process dies before it is recorded
# as failed without another try (a decoder that crashes the interpreter, the OOM killer).
MAX_ATTEMPTS = 2

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

    Raises:
        BatchInputError: lines are recorded but name none of the source's items, or name
            items whose header now gives another study: they are another source's (or an
            older version's) results, and resuming would keep them and their labels.
    """
    items = list(items)
    recorded = list(recorded)
    keys = {str(line["path"]) for line in recorded}
    if keys and keys.isdisjoint(item.key for item in items):
        example = min(keys)
        raise BatchInputError(
            f"none of the {len(keys)} files already recorded in the results (e.g. "
            f"{example[:120]!r}) is in this source: they are another export's results; "
            "write to a new output instead of resuming"
        )
    changed = sorted(_changed_since_recorded(items, recorded))
    if changed:
        raise BatchInputError(
            f"{len(changed)} of the files already recorded in the results (e.g. "
            f"{changed[0][:120]!r}) now belong to another study or accession than when "
            "they were recorded: the export changed, or this is another export with the "
            "same paths; write to a new output instead of resuming"
        )
    for line in recorded:
        processor.restore(line)
    remaining = [item for item in items if item.key not in keys]
    remaining.sort(key=lambda item: item.kind != "sr")  # stable: source order otherwise
    return remaining


def _changed_since_recorded(
    items: Sequence[SourceItem], recorded: Sequence[dict[str, Any]]
) -> Iterator[str]:
    """Keys whose recorded study UID or accession number differs from the header now (both
    known): the same path holds another file."""
    by_key = {item.key: item for item in items}
    for line in recorded:
        item = by_key.get(str(line["path"]))
        if item is None:
            continue
        for field, now in (
            ("study_instance_uid", item.study_instance_uid),
            ("accession_number", item.accession_number),
        ):
            then = line.get(field)
            if then and now and str(then) != now:
                yield item.key
                break


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

    A chunk's outcomes are recorded (every sink's `write`) on a thread of the run's own while
    the next chunk is processed, so that writing a training set's PNGs, a database
    transaction or a push to the PACS does not leave the model idle. With
    `stop_on_failure` they are recorded before the next chunk starts, so that a failure a
    sink finds (a refused push) stops the run where it happened. Everything processed is
    recorded before `run` returns or raises, unless a sink itself failed.

    Sinks are not closed here (the caller owns them).

    Args:
        items: what to process (see `plan`).
        processor: the processor (its `cancelled` hook stops mid-chunk).
        sinks: called in order per chunk: `begin(items)`, then `write(outcomes)`; see
            `_Recorder` for how the calls of two chunks interleave.
        chunk_size: images per forward pass.
        should_stop: checked before each chunk; True stops the run (resumable).
        stop_on_failure: stop after the chunk holding the first failure (`on_error=raise`).
        after_chunk: called with the number of chunks processed (tests simulate a crash
            with it); the chunk's outcomes may not be recorded yet.
    """
    report = RunReport()
    recorder = _Recorder(sinks, report, overlap=not stop_on_failure)
    with processor.reading_ahead(items, chunk_size=chunk_size), recorder:
        for chunks, start in enumerate(range(0, len(items), chunk_size), start=1):
            if should_stop is not None and should_stop():
                report.stopped = True
                break
            chunk = items[start : start + chunk_size]
            recorder.begin(chunk)
            began = time.perf_counter()
            outcomes = processor.process(chunk)
            log.debug("batch chunk of %d in %.2fs", len(outcomes), time.perf_counter() - began)
            recorder.processed(outcomes)
            if after_chunk is not None:
                after_chunk(chunks)
            if len(outcomes) < len(chunk):  # the processor saw the cancel flag
                report.stopped = True
                break
            if stop_on_failure and report.failed:
                report.stopped = True
                break
    return report


class _Recorder:
    """Records processed chunks: every sink's `write`, in order, then the count.

    With `overlap`, a chunk is recorded on a thread of its own while the next chunk is
    processed. Calls on the sinks never run at once: the next chunk's `begin` runs on the
    run's thread, before the previous chunk is handed to the recording thread, and each
    recording is waited for before the chunk after it is processed to its end. A sink thus
    sees begin(1), begin(2), write(1), begin(3), write(2), ..., write(last): two chunks
    may be in flight at once (both count an attempt if the process dies then), and a
    sink's `write` is for its oldest begun chunk.
    """

    def __init__(self, sinks: Sequence[Sink], report: RunReport, *, overlap: bool) -> None:
        self._sinks = sinks
        self._report = report
        self._thread = (
            ThreadPoolExecutor(1, thread_name_prefix="cxr-batch-record") if overlap else None
        )
        self._held: Sequence[Outcome] = ()  # processed, waiting for the next chunk's begin
        self._recording: Future[None] | None = None
        self._broken = False  # a sink raised: nothing more is recorded

    def begin(self, chunk: Sequence[SourceItem]) -> None:
        """Announce the chunk about to be processed, then start recording the one before."""
        for sink in self._sinks:
            sink.begin(chunk)
        if self._held and self._thread is not None:
            held, self._held = self._held, ()
            self._recording = self._thread.submit(self._record, held)

    def processed(self, outcomes: Sequence[Outcome]) -> None:
        """Take a chunk's outcomes once the recording before them is done (its error, if any,
        is raised here)."""
        self._wait()
        if self._thread is None:
            self._record(outcomes)
        else:
            self._held = outcomes

    def _wait(self) -> None:
        recording, self._recording = self._recording, None
        if recording is not None:
            recording.result()

    def _record(self, outcomes: Sequence[Outcome]) -> None:
        try:
            for sink in self._sinks:
                sink.write(outcomes)
        except BaseException:
            self._broken = True
            raise
        report = self._report
        for outcome in outcomes:
            outcome.image = None  # free the pixels
            report.processed += 1
            if outcome.state == "failed":  # sinks may fail an outcome (a refused push)
                report.failed += 1
                report.first_failure = report.first_failure or f"{outcome.key}: {outcome.error}"

    def __enter__(self) -> _Recorder:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """Record what was processed and not yet recorded, also when the run is interrupted
        (Ctrl-C, a cancelled job, a processor's error): results computed are not lost."""
        try:
            if kind is None:
                self._flush()
                return
            try:
                self._flush()
            except Exception as exc:  # noqa: BLE001 - the error raised already is reported
                # Its type only: a sink's message may name files (UIDs in a C-STORE inbox).
                log.error(
                    "batch: the last chunk processed was not recorded (%s)", type(exc).__name__
                )
                log.debug("the failure above", exc_info=True)
        finally:
            if self._thread is not None:
                self._thread.shutdown(wait=True)

    def _flush(self) -> None:
        try:
            self._wait()
        finally:
            held, self._held = self._held, ()
        if held and not self._broken:
            self._record(held)


def _given_up(item: SourceItem, attempts: int) -> Outcome:
    return Outcome(
        item.key,
        "failed",
        {
            "kind": item.kind,
            "study_instance_uid": item.study_instance_uid,
            "accession_number": item.accession_number,
        },
        f"{item.key}: the process stopped {attempts} times while reading this file (it may "
        "crash the decoder); not retried",
    )


def run_resumed(
    items: Sequence[SourceItem],
    processor: BatchProcessor,
    sinks: Sequence[Sink],
    *,
    attempts: dict[str, int],
    chunk_size: int,
    max_attempts: int = MAX_ATTEMPTS,
    should_stop: Callable[[], bool] | None = None,
    stop_on_failure: bool = False,
    after_chunk: Callable[[int], None] | None = None,
) -> RunReport:
    """`run`, after dealing with the items an earlier process died on.

    Args:
        items: what to process (see `plan`).
        attempts: key -> times the item was in flight when a process stopped.
        max_attempts: at this many, the item is recorded as failed without reading it.
        (others as in `run`)

    Returns:
        How the run ended (the retried and given-up items are counted in it).
    """
    given_up = [i for i in items if attempts.get(i.key, 0) >= max_attempts]
    retried = [i for i in items if 0 < attempts.get(i.key, 0) < max_attempts]
    rest = [i for i in items if not attempts.get(i.key)]
    report = RunReport()
    if given_up:
        log.warning("batch: %d file(s) stopped the process before; failed", len(given_up))
        outcomes = [_given_up(i, attempts[i.key]) for i in given_up]
        for sink in sinks:
            sink.write(outcomes)
        report.processed = report.failed = len(outcomes)
        report.first_failure = f"{outcomes[0].key}: {outcomes[0].error}"
    if retried:  # one at a time, so that a crash names its file
        log.warning("batch: retrying alone %d file(s) in flight when it stopped", len(retried))
        first = run(retried, processor, sinks, chunk_size=1, should_stop=should_stop)
        report.processed += first.processed
        report.failed += first.failed
        report.first_failure = report.first_failure or first.first_failure
        if first.stopped:
            report.stopped = True
            return report
    if stop_on_failure and report.failed:
        report.stopped = bool(rest)
        return report
    last = run(
        rest,
        processor,
        sinks,
        chunk_size=chunk_size,
        should_stop=should_stop,
        stop_on_failure=stop_on_failure,
        after_chunk=after_chunk,
    )
    report.processed += last.processed
    report.failed += last.failed
    report.first_failure = report.first_failure or last.first_failure
    report.stopped = last.stopped
    return report
