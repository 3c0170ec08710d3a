"""`models.decode_pool`: worker processes, results in input order, one item's failure alone."""

from __future__ import annotations

import os
import time

import pytest

from models.decode_pool import DecodePool, WorkerCrashed, WorkerTimeout, start_fork_server


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
