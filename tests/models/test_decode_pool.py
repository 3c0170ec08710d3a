"""`models.decode_pool`: worker processes, results in input order, one item's failure alone."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import models.decode_pool
from models.decode_pool import (
    DecodePool,
    Prefetch,
    WorkerCrashed,
    WorkerTimeout,
    default_workers,
    start_fork_server,
)


def _work(x: int) -> int:
    if x == 3:
        os._exit(7)  # a decoder that takes its process down
    if x == 5:
        time.sleep(60)  # a decoder that never returns
    if x == 7:
        raise ValueError("bad seven")
    return x * 10


def _why(x: int, exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"


def test_pool_keeps_order_and_fails_a_crashing_a_hanging_and_a_raising_item_alone() -> None:
    with DecodePool(_work, workers=2, on_error=_why, timeout_s=3, max_ahead=4) as pool:
        out = list(pool.map(range(10)))
        again = list(pool.map(range(3)))  # the pool goes on after replacing its workers
    assert out[:3] == [0, 10, 20] and out[4] == 40 and out[6] == 60 and out[8:] == [80, 90]
    assert out[3].startswith(WorkerCrashed.__name__) and "exit code 7" in out[3]
    assert out[5].startswith(WorkerTimeout.__name__)
    assert out[7] == "ValueError: bad seven"
    assert again == [0, 10, 20]


def test_pool_interrupt_ends_a_map_waiting_on_a_hung_item_at_once() -> None:
    got: list[object] = []
    with DecodePool(_work, workers=1, on_error=_why, timeout_s=60) as pool:
        mapping = threading.Thread(target=lambda: got.extend(pool.map([0, 5, 1])))
        mapping.start()
        time.sleep(1.0)  # item 0 done, item 5 hangs its worker
        began = time.monotonic()
        pool.interrupt()
        mapping.join(10)
        assert not mapping.is_alive() and time.monotonic() - began < 3
    assert got == [0]  # what came before; the rest is abandoned


@pytest.mark.issue(42)
def test_pool_abandon_stops_a_hung_item_and_the_pool_goes_on() -> None:
    """An item nobody wants any more (an upload whose client left) stops at once, not at
    the time limit, and the pool serves the next map with a fresh worker; an `abandon`
    that comes before the map hands out its item stops it as well."""
    got: list[object] = []
    with DecodePool(_work, workers=1, on_error=_why, timeout_s=60) as pool:
        mapping = threading.Thread(target=lambda: got.extend(pool.map([5])))
        mapping.start()
        time.sleep(1.0)  # item 5 hangs its worker
        began = time.monotonic()
        pool.abandon()
        mapping.join(10)
        assert not mapping.is_alive() and time.monotonic() - began < 3
        pool.resume()
        assert got == [] and list(pool.map([1, 2])) == [10, 20]
        pool.abandon()  # before the map: it takes nothing
        assert list(pool.map([5])) == []
        pool.resume()
        assert list(pool.map([4])) == [40]


def test_pool_closed_and_used_again_starts_fresh_workers() -> None:
    pool = DecodePool(_double, workers=1, on_error=_why)
    assert list(pool.map([1, 2])) == [2, 4]
    pool.close()
    try:
        assert list(pool.map([3])) == [6]
    finally:
        pool.close()


def test_pool_without_workers_runs_in_the_caller() -> None:
    pool: DecodePool[int, int | str] = DecodePool(_work, workers=0, on_error=_why)
    assert list(pool.map([1, 7, 2])) == [10, "ValueError: bad seven", 20]


def test_pool_bounds_what_it_decodes_ahead() -> None:
    started: list[int] = []

    def items() -> object:
        for i in range(100):
            started.append(i)
            yield i

    with DecodePool(_double, workers=2, on_error=_why, max_ahead=4) as pool:
        stream = pool.map(items())  # type: ignore[arg-type]
        assert next(stream) == 0
        time.sleep(0.3)
        assert len(started) <= 6  # the window, not the whole list
        assert list(stream) == [2 * i for i in range(1, 100)]


def _double(x: int) -> int:
    return 2 * x


def test_pool_refuses_negative_workers() -> None:
    with pytest.raises(ValueError, match="workers"):
        DecodePool(_double, workers=-1, on_error=_why)


def test_fork_server_started_early_serves_later_pools() -> None:
    from multiprocessing import forkserver

    start_fork_server()
    server = forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]
    start_fork_server()  # idempotent: the same server
    assert server is not None
    assert forkserver._forkserver._forkserver_pid == server  # type: ignore[attr-defined]
    with DecodePool(_work, workers=1, on_error=_why) as pool:
        assert list(pool.map([1, 2])) == [10, 20]
    assert forkserver._forkserver._forkserver_pid == server  # type: ignore[attr-defined]


@dataclass
class _Decoded:
    name: str
    pixels: np.ndarray
    display: np.ndarray | None


def _decoded(seed: int) -> _Decoded:
    if seed == 3:
        os._exit(9)  # a decoder crash: the replacement worker gets the same slot
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 65535, (300 + seed, 257), dtype=np.uint16)
    pixels.flags.writeable = False  # as the read-only views of uncompressed files
    display = rng.integers(0, 255, (64, 64 + seed), dtype=np.uint8) if seed % 2 else None
    return _Decoded(f"file{seed}", pixels, display)


def _expected(seed: int) -> _Decoded:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 65535, (300 + seed, 257), dtype=np.uint16)
    display = rng.integers(0, 255, (64, 64 + seed), dtype=np.uint8) if seed % 2 else None
    return _Decoded(f"file{seed}", pixels, display)


def _same(a: object, b: _Decoded) -> bool:
    assert isinstance(a, _Decoded), a
    same_display = (a.display is None and b.display is None) or (
        a.display is not None and b.display is not None and np.array_equal(a.display, b.display)
    )
    return a.name == b.name and np.array_equal(a.pixels, b.pixels) and same_display


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="shared memory slots need memfd")
@pytest.mark.parametrize("unlocked_from", [None, 1], ids=["small: with the lock", "all unlocked"])
def test_pool_moves_arrays_through_shared_memory_and_survives_a_crash(
    unlocked_from: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The caller copies a result's buffers out of the slot with the interpreter lock held
    # (small ones) or released (large ones: NumPy); both give the same arrays.
    if unlocked_from is not None:
        monkeypatch.setattr(models.decode_pool, "_COPY_UNLOCKED_BYTES", unlocked_from)
    start_fork_server()  # its pipes stay open for the process's life: count after them
    fds_before = len(os.listdir("/proc/self/fd"))
    with DecodePool(_decoded, workers=2, on_error=_why) as pool:
        out = list(pool.map(range(8)))
        again = list(pool.map([5, 6]))  # the replacement worker writes into the same slot
        shared = pool.shared_results
    for seed, got in enumerate(out):
        if seed == 3:
            assert isinstance(got, str) and got.startswith(WorkerCrashed.__name__)
        else:
            assert _same(got, _expected(seed)), seed
            assert got.pixels.dtype == np.uint16 and got.pixels.shape == (300 + seed, 257)
    assert _same(again[0], _expected(5)) and _same(again[1], _expected(6))
    assert shared == 9  # every result but the crashed one's came through a slot
    assert len(os.listdir("/proc/self/fd")) <= fds_before  # slots closed with the pool


def test_pool_sends_what_does_not_fit_a_slot_through_the_pipe() -> None:
    with DecodePool(_decoded, workers=1, on_error=_why, slot_bytes=1024) as pool:
        small_slot = list(pool.map([0, 1]))
        assert pool.shared_results == 0
    with DecodePool(_decoded, workers=1, on_error=_why, slot_bytes=0) as pool:
        no_slot = list(pool.map([0, 1]))
        assert pool.shared_results == 0
    for got in (small_slot, no_slot):
        assert _same(got[0], _expected(0)) and _same(got[1], _expected(1))


def test_pool_without_memfd_uses_the_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "memfd_create", raising=False)
    with DecodePool(_decoded, workers=1, on_error=_why) as pool:
        got = list(pool.map([2]))
        assert pool.shared_results == 0
    assert _same(got[0], _expected(2))


class _PickyError(Exception):
    """A decoder's exception whose `__init__` takes other arguments than its `args`."""

    def __init__(self, code: int, where: str) -> None:
        super().__init__(f"code {code} at {where}")


def _refuse() -> None:
    raise ValueError("refused")


class _Unreadable:
    """Pickles in the worker; unpickling it in the caller raises."""

    def __reduce__(self) -> tuple[object, tuple[()]]:
        return _refuse, ()


def _awkward(x: int) -> object:
    if x == 1:
        raise _PickyError(5, "the pixel data")
    if x == 2:
        return _Unreadable()
    if x == 3:
        return lambda: x  # no pickler takes it
    return x


@pytest.mark.parametrize("slot_bytes", [64 << 20, 0], ids=["slot", "pipe"])
def test_pool_fails_a_result_or_an_error_that_does_not_travel_back_alone(slot_bytes: int) -> None:
    with DecodePool(_awkward, workers=1, on_error=_why, slot_bytes=slot_bytes) as pool:
        out = list(pool.map(range(5)))
        [worker] = pool._workers
        pid = worker.process.pid
        again = list(pool.map([0, 4]))
        # Nothing took the worker down or out of step: it serves on, not a replacement.
        assert pool._workers[0].process.pid == pid and worker.process.is_alive()
    # The error arrives as its text; nothing unpickles into the caller's traceback.
    assert out[1] == "RuntimeError: _PickyError: code 5 at the pixel data"
    assert out[2] == "RuntimeError: its result could not be read back (ValueError: refused)"
    why = str(out[3])
    assert why.startswith(("PicklingError", "AttributeError")) and "pickle" in why
    assert (out[0], out[4], again) == (0, 4, [0, 4])


def test_prefetch_keeps_order_and_reraises_producer_errors() -> None:
    assert list(Prefetch(iter(range(20)), depth=3, name="t")) == list(range(20))

    def failing() -> object:
        yield 1
        raise RuntimeError("producer broke")

    got: list[object] = []
    with pytest.raises(RuntimeError, match="producer broke"):
        got.extend(Prefetch(failing(), depth=2, name="t"))  # type: ignore[arg-type]
    assert got == [1]  # the items before the failure arrive first

    stream = Prefetch(iter([1]), depth=1, name="t")
    assert list(stream) == [1]
    assert next(stream, None) is None and stream.ready(0)  # ended: no wait, no hang


def test_prefetch_closed_early_stops_its_thread_at_once() -> None:
    made: list[int] = []

    def endless() -> object:
        n = 0
        while True:
            made.append(n)
            yield n
            n += 1

    stream = Prefetch(endless(), depth=1, name="cxr-test-prefetch")  # type: ignore[arg-type]
    assert next(stream) == 0
    began = time.monotonic()
    stream.close()
    assert time.monotonic() - began < 1.0  # not the 5 s join timeout
    assert not any(t.name == "cxr-test-prefetch" for t in threading.enumerate())
    assert len(made) <= 4  # bounded by the depth while the consumer waited


def test_prefetch_ready_waits_a_while_for_the_next_item() -> None:
    gate = threading.Event()

    def slow() -> object:
        gate.wait(10)
        yield "late"

    stream = Prefetch(slow(), depth=1, name="t")  # type: ignore[arg-type]
    assert not stream.ready(0.05)  # nothing yet: the caller may check a cancel flag
    gate.set()
    assert stream.ready(5) and stream.ready(0)  # held, not lost
    assert list(stream) == ["late"]


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({}, 8),  # no cgroup files: the affinity
        ({"cpu.max": "max 100000\n"}, 8),
        ({"cpu.max": "150000 100000\n"}, 2),  # 1.5 CPUs: two workers
        ({"cpu.max": "2000000 100000\n"}, 8),  # a limit above the cores
        ({"cpu.max": "garbage"}, 8),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, 8),
        ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3),
        ({"cpu,cpuacct/cpu.cfs_quota_us": "20000", "cpu,cpuacct/cpu.cfs_period_us": "100000"}, 1),
    ],
    ids=["none", "v2-max", "v2-limit", "v2-above", "v2-garbage", "v1-none", "v1-limit", "v1-small"],
)
def test_default_workers_respect_a_containers_cpu_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], expected: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert default_workers(tmp_path) == expected
