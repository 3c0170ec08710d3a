"""Worker processes that decode files in parallel, results in input order.

`DecodePool.map(fn, items)` runs `fn(item)` in worker processes and yields one result per
item, in order, at most `max_ahead` items beyond the one the caller is waiting for, so
memory stays bounded whatever the number of files. One item's trouble is that item's
failure and nothing else's:

- `fn` raises: the item's result is `on_error(item, the exception)`;
- the worker dies (a decoder crash, the kernel's OOM killer): the same with a
  `WorkerCrashed`, and a fresh worker takes its place;
- the item runs past `timeout_s`: its worker is killed, the same with a `WorkerTimeout`;
- the caller no longer wants it (`abandon`, from another thread): its worker is killed
  and replaced, and `map` returns without its result.

Workers start with the "forkserver" method: they are forked from a small clean process
that has imported only the decoding modules, never from a parent holding CUDA, a model,
or OpenCV's and OpenMP's thread pools. `workers=0` runs everything in the caller's
thread (no isolation from crashes or hangs), for tests and one-off calls.

Results travel through shared memory, not the pipe: each worker owns a slot (an anonymous
Linux memfd, so Docker's small /dev/shm does not matter) and writes its result's array
buffers there (pickle protocol 5, out of band); the pipe carries the rest. A 2 MiB fitted
image costs the caller one copy out of the slot instead of a pickle, 32 pipe round trips
and an unpickle: 190-240 results/s through pipes against 840-960 on two cores
(`python benchmarks/predict.py --mode transport`). The slot is free again when the caller has
copied the result out, before its worker gets the next item. A result larger than the
slot, a system without memfd, or an error, goes through the pipe as before.
"""

from __future__ import annotations

import contextlib
import math
import mmap
import multiprocessing as mp
import os
import pickle
import queue
import threading
import time
import warnings
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import DupFd, ForkingPickler
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import numpy as np

__all__ = [
    "DecodePool",
    "WorkerCrashed",
    "WorkerTimeout",
    "default_workers",
    "named_failure",
    "Prefetch",
    "start_fork_server",
]

T = TypeVar("T")
R = TypeVar("R")

# Modules a worker needs, imported once in the fork server rather than in every worker.
_PRELOAD = ["numpy", "cv2", "pydicom", "models.image_pipeline"]


# Bytes of shared memory per worker for its results' arrays. Virtual: only the pages a
# result touches are backed (a 1024 px model's fitted image and display copy: 3 MiB).
DEFAULT_SLOT_BYTES = 64 << 20

# Result buffers from this size on are copied out of a slot without the interpreter lock
# (`ResultSlot.take`): a fitted 1024 px image (2 MiB) keeps it, stored codes (10 MB) not.
_COPY_UNLOCKED_BYTES = 4 << 20


class WorkerCrashed(RuntimeError):
    """The worker process died while handling the item."""


class WorkerTimeout(RuntimeError):
    """The item ran past the pool's time limit; its worker was killed."""


def named_failure(name: str, exc: Exception) -> Exception:
    """An item's failure as its error, for a pool's `on_error`: a crash or a timeout of its
    worker becomes a `models.errors.DecoderFailedError` naming the item (an image error,
    the input's own failure); a decoder's own exception is kept as raised."""
    from models.errors import DecoderFailedError

    if isinstance(exc, WorkerCrashed | WorkerTimeout):
        return DecoderFailedError(f"{name}: {exc}")
    return exc


def default_workers(cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """The number of cores this process may use: the CPUs it may run on, fewer under a
    container's CPU limit (`docker run --cpus 4`, a Kubernetes CPU limit), which the
    affinity does not show: a 4-CPU container on a 64-core host would otherwise start 64
    decoding workers, sixteen to a CPU.

    Args:
        cgroup: where the cgroup file system is mounted (tests give another folder).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = _cpu_quota(cgroup)
    return max(1, min(cores, math.ceil(quota))) if quota is not None else cores


def _cpu_quota(cgroup: Path) -> float | None:
    """CPUs' worth of time the cgroup allows (quota / period), None without a limit."""
    try:  # cgroup v2: "max 100000" or "400000 100000"
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    for folder in ("cpu", "cpu,cpuacct"):  # cgroup v1: a quota of -1 is no limit
        try:
            quota_us = int((cgroup / folder / "cpu.cfs_quota_us").read_text())
            period_us = int((cgroup / folder / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
        return quota_us / period_us if quota_us > 0 and period_us > 0 else None
    return None


def start_fork_server() -> None:
    """Start the fork server now, in the background (idempotent).

    It imports the decoding modules in its own process (about half a second); a caller
    that starts it before importing torch and loading a model gets that done on another
    core meanwhile, and the pools it makes later fork their workers at once.
    """
    from multiprocessing import forkserver

    mp.get_context("forkserver").set_forkserver_preload(_PRELOAD)
    forkserver.ensure_running()


def _limit_threads() -> None:
    """One thread per worker: the pool, not each decoder, supplies the parallelism.

    Decoders also stay quiet: a worker's stderr is the caller's, where pydicom's warnings
    (which quote header values, a patient's name among them) and OpenCV's log lines
    would interleave with the caller's one line per file. A file's trouble reaches the
    caller as its error instead.
    """
    warnings.simplefilter("ignore")
    with contextlib.suppress(ImportError):
        import cv2

        cv2.setNumThreads(1)
        # errors only: no "[ WARN:0@...] ... PNG input buffer is incomplete"
        cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_ERROR)


class ResultSlot:
    """Shared memory one worker writes its results' array buffers into (Linux memfd).

    Created by the pool, handed to the worker process as a duplicated file descriptor,
    mapped on both sides. Only one result is in it at a time: the worker writes, the
    caller copies out, and only then does the worker get its next item.
    """

    def __init__(self, size: int, fd: int | None = None) -> None:
        self.size = size
        if fd is None:
            fd = os.memfd_create("cxr-decode-slot", os.MFD_CLOEXEC)
            os.ftruncate(fd, size)
        self.fd = fd
        self.map = mmap.mmap(fd, size)

    @classmethod
    def create(cls, size: int) -> ResultSlot | None:
        """A slot of `size` bytes, or None where memfd is missing (not Linux) or refused."""
        if size <= 0 or not hasattr(os, "memfd_create"):
            return None
        try:
            return cls(size)
        except OSError:
            return None

    def __reduce__(self) -> tuple[Callable[[_DuplicatedFd, int], ResultSlot], tuple[object, int]]:
        # Pickled for the worker's start: the descriptor travels as a duplicate.
        return _attach_slot, (DupFd(self.fd), self.size)

    def put(self, result: object) -> tuple[bytes, list[int]] | None:
        """Pickle `result` with its buffers written here: (the pickle, buffer lengths),
        or None when they do not fit (the caller sends the result through the pipe)."""
        buffers: list[pickle.PickleBuffer] = []
        try:
            data = pickle.dumps(result, protocol=5, buffer_callback=buffers.append)
        except (pickle.PicklingError, TypeError, AttributeError):
            return None  # what plain pickle cannot do, the pipe's pickler may
        views = [b.raw() for b in buffers]
        if sum(v.nbytes for v in views) > self.size:
            return None
        offset = 0
        for v in views:
            self.map[offset : offset + v.nbytes] = v
            offset += v.nbytes
        return data, [v.nbytes for v in views]

    def take(self, data: bytes, lengths: list[int]) -> object:
        """The result `put` wrote, its buffers copied out of the slot (free again after)."""
        # A large buffer is copied by NumPy, without the interpreter lock: a bytearray copy
        # holds it (5.8 ms for a 10 MB DICOM's stored codes on the 2-core VM), and no other
        # thread of the caller runs meanwhile. A small one keeps the lock: getting it back
        # after a release costs up to a switch interval whenever another thread is running
        # Python, more than the copy (`python benchmarks/predict.py --mode transport`).
        # The arrays unpickled from these buffers use them in place.
        buffers: list[bytearray | np.ndarray] = []
        offset = 0
        view = memoryview(self.map)
        try:
            for n in lengths:
                if n < _COPY_UNLOCKED_BYTES:
                    buffers.append(bytearray(view[offset : offset + n]))
                else:
                    out = np.empty(n, np.uint8)
                    np.copyto(out, np.frombuffer(view, np.uint8, n, offset))
                    buffers.append(out)
                offset += n
        finally:
            view.release()
        return pickle.loads(data, buffers=buffers)

    def close(self) -> None:
        with contextlib.suppress(BufferError, ValueError):
            self.map.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


class _DuplicatedFd(Protocol):
    def detach(self) -> int: ...


def _attach_slot(fd: _DuplicatedFd, size: int) -> ResultSlot:
    return ResultSlot(size, fd=fd.detach())


def _serve(fn: Callable[[T], R], conn: Connection, slot: ResultSlot | None = None) -> None:
    """A worker's loop: (index, item) in; out (index, True, result), (index, None, (pickle,
    buffer lengths)) when the result's buffers are in `slot`, or (index, False, error)."""
    _limit_threads()
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        index, item = task
        try:
            result = fn(item)
            shared = slot.put(result) if slot is not None else None
            if shared is None:
                conn.send((index, True, result))
            else:
                conn.send((index, None, shared))
        except Exception as exc:  # noqa: BLE001 - one item's failure, reported to the caller
            conn.send((index, False, _portable(exc)))


def _portable(exc: Exception) -> Exception:
    """`exc` when it survives a pickle round trip, else a RuntimeError naming it.

    An exception pickles as its class and `args`; one whose `__init__` takes other
    arguments (common in third-party decoders) pickles, then fails to unpickle on the
    caller's side.
    """
    try:
        pickle.loads(ForkingPickler.dumps(exc))
    except Exception:  # noqa: BLE001 - whatever fails, the text still travels
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


@dataclass
class _Worker:
    process: BaseProcess
    conn: Connection
    slot: ResultSlot | None = None
    task: int | None = None
    started: float = 0.0


class DecodePool(Generic[T, R]):
    """A pool of worker processes running one function.

    Args:
        fn: a module-level function (workers receive it pickled).
        workers: processes (0: run in the caller's thread).
        on_error: builds an item's result from the exception that failed it.
        timeout_s: an item running longer is that item's failure (None: no limit).
        max_ahead: items decoded beyond the next one to yield (bounds memory);
            default four per worker.
        slot_bytes: shared memory per worker for results' arrays (0: results go through
            the pipe); larger results go through the pipe.
    """

    def __init__(
        self,
        fn: Callable[[T], R],
        *,
        workers: int,
        on_error: Callable[[T, Exception], R],
        timeout_s: float | None = None,
        max_ahead: int | None = None,
        slot_bytes: int = DEFAULT_SLOT_BYTES,
    ) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        self.fn = fn
        self.on_error = on_error
        self.timeout_s = timeout_s
        self.max_ahead = max(1, max_ahead if max_ahead is not None else 4 * max(1, workers))
        self._n = workers
        self.slot_bytes = slot_bytes
        self.shared_results = 0  # results that came through shared memory (for tests)
        self._workers: list[_Worker] = []
        self._ctx = mp.get_context("forkserver") if workers else None
        if self._ctx is not None:
            self._ctx.set_forkserver_preload(_PRELOAD)
        # `interrupt` writes here, waking a `map` that waits on its workers.
        self._interrupted = False
        self._abandoned = False  # `abandon`: until `resume`
        self._wake_read, self._wake_write = os.pipe() if workers else (-1, -1)
        if self._wake_read >= 0:
            os.set_blocking(self._wake_read, False)

    def __enter__(self) -> DecodePool[T, R]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self, slot: ResultSlot | None = None) -> _Worker:
        """A fresh worker; a replacement reuses its predecessor's slot."""
        assert self._ctx is not None
        if slot is None:
            slot = ResultSlot.create(self.slot_bytes)
        parent, child = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(
            target=_serve, args=(self.fn, child, slot), name="cxr-decode", daemon=True
        )
        process.start()
        child.close()
        return _Worker(process, parent, slot)

    def interrupt(self) -> None:
        """Make a `map` running in another thread return at once, with the items in its
        workers abandoned (a caller closing the pool while one waits on a hung file);
        the pool then takes no more work. Call `close` after the mapping thread ended."""
        self._interrupted = True
        self._wake()

    def abandon(self) -> None:
        """Make the `map` running in another thread return at once, its items abandoned
        and their workers killed and replaced (the next `map` gets fresh ones); a `map`
        that starts before `resume` returns at once too.

        For a caller whose item is no longer wanted while it decodes (an upload whose
        client has gone): the decode stops at once instead of running on to `timeout_s`.
        Unlike `interrupt`, the pool stays usable: call `resume` once the mapping thread
        has returned.
        """
        self._abandoned = True
        for w in list(self._workers):
            if w.task is not None:
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    w.process.kill()
        self._wake()

    def resume(self) -> None:
        """Take work again after `abandon` (call it once the abandoned `map` returned)."""
        self._abandoned = False
        self._drain_wake()

    def _wake(self) -> None:
        if self._wake_write >= 0:
            with contextlib.suppress(OSError):
                os.write(self._wake_write, b"x")

    def _drain_wake(self) -> None:
        if self._wake_read >= 0:
            with contextlib.suppress(OSError):
                while os.read(self._wake_read, 64):
                    pass

    def close(self) -> None:
        """Stop the workers (idempotent)."""
        for w in self._workers:
            with contextlib.suppress(OSError, ValueError):
                w.conn.send(None)
        deadline = time.monotonic() + 2.0
        for w in self._workers:
            w.process.join(max(0.0, deadline - time.monotonic()))
            if w.process.is_alive():
                w.process.kill()
                w.process.join(1.0)
            w.conn.close()
            if w.slot is not None:
                w.slot.close()
        self._workers.clear()
        for fd in (self._wake_read, self._wake_write):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._wake_read = self._wake_write = -1

    def map(self, items: Iterable[T]) -> Generator[R, None, None]:
        """`fn(item)` for each item, in order (failures from `on_error`)."""
        if self._n == 0:
            for item in items:
                try:
                    yield self.fn(item)
                except Exception as exc:  # noqa: BLE001 - that item's failure
                    yield self.on_error(item, exc)
            return
        while len(self._workers) < self._n:
            self._workers.append(self._start())
        for i, w in enumerate(self._workers):  # killed idle (by `abandon`): replace it
            if w.task is None and not w.process.is_alive():
                w.conn.close()
                self._workers[i] = self._start(w.slot)
        source = iter(enumerate(items))
        given: dict[int, T] = {}
        done: dict[int, R] = {}
        exhausted = False
        following = 0  # index of the next result to yield
        upcoming = 0  # index of the next item to hand out
        try:
            while not self._interrupted and not self._abandoned:
                # Hand out work while workers are idle and the window allows it.
                for w in self._workers:
                    if w.task is not None or exhausted:
                        continue
                    if upcoming - following >= self.max_ahead:
                        break
                    nxt = next(source, None)
                    if nxt is None:
                        exhausted = True
                        break
                    index, item = nxt
                    upcoming = index + 1
                    given[index] = item
                    w.task, w.started = index, time.monotonic()
                    w.conn.send((index, item))
                while following in done:
                    yield done.pop(following)
                    following += 1
                busy = [w for w in self._workers if w.task is not None]
                if not busy:
                    if exhausted and not given:
                        return
                    continue
                self._collect(busy, given, done)
        finally:
            # An abandoned iteration leaves workers mid-item: replace them next time
            # (an interrupted pool is about to close: no replacements).
            for i, w in enumerate(self._workers):
                if w.task is not None:
                    w.process.kill()
                    w.process.join(1.0)
                    if self._interrupted:
                        w.task = None
                        continue
                    w.conn.close()
                    self._workers[i] = self._start(w.slot)

    def _collect(self, busy: list[_Worker], given: dict[int, T], done: dict[int, R]) -> None:
        """Wait for a result, a death or a deadline among the busy workers."""
        wait_s: float | None = None
        if self.timeout_s is not None:
            now = time.monotonic()
            wait_s = max(0.0, min(w.started + self.timeout_s - now for w in busy))
        by_handle: dict[object, _Worker] = {}
        handles: list[Connection | int] = [self._wake_read] if self._wake_read >= 0 else []
        for w in busy:
            by_handle[w.conn] = by_handle[w.process.sentinel] = w
            handles += [w.conn, w.process.sentinel]
        ready = wait(handles, timeout=wait_s)
        if self._interrupted or self._abandoned:
            return
        handled: set[int] = set()
        for handle in ready:
            if handle == self._wake_read:  # a stale wake-up (an `abandon` after its map)
                self._drain_wake()
                continue
            w = by_handle[handle]
            if id(w) in handled or w.task is None:
                continue
            if handle is w.conn or w.conn.poll():
                index = w.task  # one task per worker at a time
                try:
                    _, ok, payload = w.conn.recv()
                    if ok is None and w.slot is not None:
                        payload, ok = w.slot.take(*payload), True
                        self.shared_results += 1
                except (EOFError, OSError):
                    pass  # died while sending: the sentinel below reports it
                except Exception as exc:  # noqa: BLE001 - a result that does not unpickle here
                    # The message was read whole: the worker and its pipe are still in step.
                    why = f"its result could not be read back ({type(exc).__name__}: {exc})"
                    done[index] = self.on_error(given[index], RuntimeError(why))
                else:
                    done[index] = payload if ok else self.on_error(given[index], payload)
                if index in done:
                    del given[index]
                    w.task = None
                    handled.add(id(w))
                    continue
            w.process.join(1.0)
            why = f"its decoding worker crashed (exit code {w.process.exitcode})"
            self._fail(w, given, done, WorkerCrashed(why))
            handled.add(id(w))
        if self.timeout_s is not None:
            now = time.monotonic()
            for w in busy:
                if w.task is not None and now - w.started > self.timeout_s:
                    why = f"decoding took longer than {self.timeout_s:g} s"
                    self._fail(w, given, done, WorkerTimeout(why))

    def _fail(self, w: _Worker, given: dict[int, T], done: dict[int, R], why: Exception) -> None:
        assert w.task is not None
        index = w.task
        done[index] = self.on_error(given.pop(index), why)
        w.process.kill()
        w.process.join(1.0)
        w.conn.close()
        fresh = self._start(w.slot)
        w.process, w.conn, w.task = fresh.process, fresh.conn, None


_END = object()
_NOTHING = object()


class Prefetch(Generic[T]):
    """`items` as a background thread (named `name`) produces them, at most `depth` ahead,
    in order; the producer's exception is raised after the items before it.

    It keeps a `DecodePool.map` moving while the caller works on something else: the
    thread hands out files and takes results off the workers' pipes, so a worker never
    waits with a decoded image in its pipe. `close` stops the thread within 50 ms of its
    current item; `ready` lets the caller wait for the next item a while at a time.
    """

    def __init__(self, items: Iterable[T], *, depth: int, name: str) -> None:
        self._q: queue.Queue[object] = queue.Queue(maxsize=max(1, depth))
        self._failure: list[BaseException] = []
        self._stop = threading.Event()
        self._held: object = _NOTHING
        self._ended = False
        self._thread = threading.Thread(target=self._work, args=(items,), name=name, daemon=True)
        self._thread.start()

    def _put(self, thing: object) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(thing, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _work(self, items: Iterable[T]) -> None:
        try:
            for item in items:
                if not self._put(item):
                    return
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            self._failure.append(exc)
        self._put(_END)

    def __iter__(self) -> Prefetch[T]:
        return self

    def ready(self, timeout_s: float) -> bool:
        """Wait at most `timeout_s` for the next item (or the end); True when it is here."""
        if self._held is _NOTHING and not self._ended:
            try:
                self._held = self._q.get(timeout=timeout_s)
            except queue.Empty:
                return False
        return True

    def __next__(self) -> T:
        if self._ended:
            raise StopIteration
        thing, self._held = (self._held if self._held is not _NOTHING else self._q.get()), _NOTHING
        if thing is _END:
            self.close()
            if self._failure:
                raise self._failure.pop()
            raise StopIteration
        return thing  # type: ignore[return-value]  # every other object queued is a T

    def close(self) -> None:
        """Stop the thread (idempotent); items produced and not taken are dropped."""
        self._ended = True
        self._stop.set()
        self._held = _NOTHING
        with contextlib.suppress(queue.Empty):
            while True:
                self._q.get_nowait()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
