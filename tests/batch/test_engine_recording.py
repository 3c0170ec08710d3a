"""The engine records a chunk (every sink's `write`) while the next chunk is processed: the
order each sink sees, that the two really overlap, and what is recorded when a sink, the
processor or the caller stops the run."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import cast

import pytest

from batch.engine import RunReport, run
from batch.interfaces import Outcome, Sink, SourceItem
from batch.processor import BatchProcessor

pytestmark = pytest.mark.issue(19)

ITEMS = [SourceItem(f"IM{i}", "image") for i in range(7)]  # chunks of 2: 2, 2, 2, 1


class _Processor:
    """Stands in for `BatchProcessor`: every item done, each chunk announced."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.chunks: list[list[str]] = []
        self.started = threading.Event()  # set when the second chunk starts
        self.fail_at = fail_at

    @contextlib.contextmanager
    def reading_ahead(self, items: Sequence[SourceItem], *, chunk_size: int) -> Iterator[None]:
        yield

    def process(self, chunk: Sequence[SourceItem]) -> list[Outcome]:
        self.chunks.append([i.key for i in chunk])
        if len(self.chunks) == 2:
            self.started.set()
        if self.fail_at == len(self.chunks):
            raise RuntimeError("the model failed")
        return [Outcome(i.key, "done", {"kind": "image"}) for i in chunk]


class _Log(Sink):
    """Logs each call on a shared list, and fails if two calls on sinks ever overlap."""

    def __init__(self, name: str, calls: list[str], busy: threading.Lock) -> None:
        self.name, self.calls, self.busy = name, calls, busy
        self.threads: set[str] = set()

    def _enter(self, what: str) -> None:
        assert self.busy.acquire(blocking=False), "two sink calls at once"
        self.calls.append(f"{self.name}.{what}")
        self.busy.release()

    def begin(self, items: Sequence[SourceItem]) -> None:
        self._enter("begin " + ",".join(i.key for i in items))

    def write(self, outcomes: Sequence[Outcome]) -> None:
        self.threads.add(threading.current_thread().name)
        self._enter("write " + ",".join(o.key for o in outcomes))


def _run(
    processor: _Processor,
    sinks: Sequence[Sink],
    *,
    stop_on_failure: bool = False,
    after_chunk: Callable[[int], None] | None = None,
) -> RunReport:
    return run(
        ITEMS,
        cast(BatchProcessor, processor),
        sinks,
        chunk_size=2,
        stop_on_failure=stop_on_failure,
        after_chunk=after_chunk,
    )


def test_each_chunk_is_begun_before_the_one_before_is_written() -> None:
    calls: list[str] = []
    busy = threading.Lock()
    first, second = _Log("a", calls, busy), _Log("b", calls, busy)
    report = _run(_Processor(), [first, second])
    assert calls == [
        "a.begin IM0,IM1", "b.begin IM0,IM1",
        "a.begin IM2,IM3", "b.begin IM2,IM3",
        "a.write IM0,IM1", "b.write IM0,IM1",
        "a.begin IM4,IM5", "b.begin IM4,IM5",
        "a.write IM2,IM3", "b.write IM2,IM3",
        "a.begin IM6", "b.begin IM6",
        "a.write IM4,IM5", "b.write IM4,IM5",
        "a.write IM6", "b.write IM6",
    ]  # fmt: skip
    assert report.processed == 7 and not report.stopped
    # Recorded off the run's thread (the last chunk on it, at the end).
    assert any(name.startswith("cxr-batch-record") for name in first.threads)


def test_a_chunk_is_recorded_while_the_next_is_processed() -> None:
    processor = _Processor()
    overlapped: list[bool] = []

    class Slow(Sink):
        def write(self, outcomes: Sequence[Outcome]) -> None:
            if outcomes[0].key == "IM0":  # waits for the model to start the next chunk
                overlapped.append(processor.started.wait(timeout=10))

    _run(processor, [Slow()])
    assert overlapped == [True]


def test_the_outcomes_are_counted_after_the_sinks_who_may_fail_them() -> None:
    class RefusedPush(Sink):  # as the DICOMweb push sink does when the PACS refuses
        def write(self, outcomes: Sequence[Outcome]) -> None:
            for outcome in outcomes:
                if outcome.key == "IM3":
                    outcome.state, outcome.error = "failed", "push refused"

    report = _run(_Processor(), [RefusedPush()])
    assert report.failed == 1
    assert report.first_failure == "IM3: push refused"


def test_stop_on_failure_records_each_chunk_before_the_next() -> None:
    processor = _Processor()
    seen: list[str] = []

    class RefusedPush(Sink):
        def write(self, outcomes: Sequence[Outcome]) -> None:
            seen.append(threading.current_thread().name)
            for outcome in outcomes:
                if outcome.key == "IM3":
                    outcome.state, outcome.error = "failed", "push refused"

    report = _run(processor, [RefusedPush()], stop_on_failure=True)
    assert processor.chunks == [["IM0", "IM1"], ["IM2", "IM3"]]  # nothing after the failure
    assert report.stopped and report.failed == 1
    assert seen == [threading.current_thread().name] * 2


def test_a_failing_sink_stops_the_run_and_nothing_later_is_recorded() -> None:
    calls: list[str] = []
    busy = threading.Lock()
    after = _Log("after", calls, busy)

    class Full(Sink):
        def write(self, outcomes: Sequence[Outcome]) -> None:
            if outcomes[0].key == "IM2":
                raise OSError("No space left on device")

    processor = _Processor()
    with pytest.raises(OSError, match="No space left"):
        _run(processor, [Full(), after])
    writes = [c for c in calls if ".write" in c]
    assert writes == ["after.write IM0,IM1"]
    assert len(processor.chunks) <= 3  # at most the chunk processed while it failed


class _Stop(BaseException):
    """Ctrl-C, or the process dying as the tests simulate it."""


def test_an_interrupted_run_records_what_it_processed() -> None:
    calls: list[str] = []

    def stop_after(chunks: int) -> None:
        if chunks == 2:
            raise _Stop

    with pytest.raises(_Stop):
        _run(_Processor(), [_Log("a", calls, threading.Lock())], after_chunk=stop_after)
    assert [c for c in calls if ".write" in c] == ["a.write IM0,IM1", "a.write IM2,IM3"]


def test_a_processor_error_still_records_the_chunks_before() -> None:
    calls: list[str] = []
    with pytest.raises(RuntimeError, match="the model failed"):
        _run(_Processor(fail_at=3), [_Log("a", calls, threading.Lock())])
    assert [c for c in calls if ".write" in c] == ["a.write IM0,IM1", "a.write IM2,IM3"]


def test_the_processor_cancelled_mid_chunk_records_the_part_done() -> None:
    calls: list[str] = []

    class Cancelled(_Processor):
        def process(self, chunk: Sequence[SourceItem]) -> list[Outcome]:
            done = super().process(chunk)
            return done[:1] if len(self.chunks) == 2 else done

    report = _run(Cancelled(), [_Log("a", calls, threading.Lock())])
    assert [c for c in calls if ".write" in c] == ["a.write IM0,IM1", "a.write IM2"]
    assert report.stopped and report.processed == 3


def test_a_sink_failing_while_an_interrupted_run_records_keeps_the_interruption(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Full(Sink):
        def write(self, outcomes: Sequence[Outcome]) -> None:
            if outcomes[0].key == "IM2":
                raise OSError("No space left on device: /inbox/1.2.3.dcm")

    def stop_after(chunks: int) -> None:
        if chunks == 2:
            raise _Stop

    with pytest.raises(_Stop):
        _run(_Processor(), [Full()], after_chunk=stop_after)
    assert "the last chunk processed was not recorded (OSError)" in caplog.text
    assert "1.2.3" not in caplog.text  # a sink's message may name an instance
