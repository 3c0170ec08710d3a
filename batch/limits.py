"""A time limit on reading one file: a decoder stuck in a loop must not freeze a batch."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["FileTimeout", "call_with_limit"]

T = TypeVar("T")


class FileTimeout(RuntimeError):
    """Reading one file took longer than the per-file limit."""


def call_with_limit(fn: Callable[[], T], limit_s: float | None) -> T:
    """Run `fn` in a daemon thread and give up after `limit_s` seconds (None: call it here).

    Python cannot kill a thread: a decoder that never returns keeps its thread, but the
    batch moves on (and the daemon thread does not keep the process alive at exit).
    """
    if limit_s is None:
        return fn()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            box["error"] = exc

    thread = threading.Thread(target=target, name="cxr-batch-read", daemon=True)
    thread.start()
    thread.join(limit_s)
    if thread.is_alive():
        raise FileTimeout(f"reading took longer than {limit_s:g} s (CXR_BATCH_FILE_TIMEOUT_S)")
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value
