"""Which BLAS the report labeler's parser multiplies with: one choice for every entry point.

thinc ships a BLIS build with no kernel for CPUs newer than it (AMD Zen 3 and 4), where it
runs BLIS's generic reference code; NumPy's OpenBLAS parses about 40% faster there, with
the same tags and trees on every OpenI dev sentence (`benchmarks/parse_ops.py`). Only with
one thread: with its default of a thread per core, OpenBLAS spends more CPU than it saves
on the parser's small matrices (5.2 s against 2.4 s of CPU on two busy cores), and its
idle threads spin on the cores torch computes on. OpenBLAS reads its thread count once,
when NumPy loads: `OPENBLAS_NUM_THREADS`, else `GOTO_NUM_THREADS`, else `OMP_NUM_THREADS`.

So: `cxr` sets `OPENBLAS_NUM_THREADS=1` before anything loads NumPy, unless the caller set
it (`one_blas_thread`, first thing in `app.cli.run`; child processes inherit it), and every
entry point that builds a labeler asks `labeler_blas()`: NumPy's BLAS where it is OpenBLAS
running one thread, thinc's BLIS otherwise (a caller who asked for more threads, a
service started by another runner without the variable, a NumPy built on another BLAS).
Ray gives an actor of one CPU `OMP_NUM_THREADS=1` when the driver set none, and a local
Ray's workers inherit the driver's environment: its labeler actors run one thread too.
"""

from __future__ import annotations

import os
from typing import Literal

__all__ = ["labeler_blas", "one_blas_thread"]

#: The variables OpenBLAS reads its thread count from, first found first.
_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def one_blas_thread() -> None:
    """One OpenBLAS thread for this process and its children, unless the caller chose.

    Read by OpenBLAS when NumPy loads: call it before anything imports NumPy.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def labeler_blas() -> Literal["numpy", "blis"]:
    """`LabelerConfig.blas` for this process: "numpy" where NumPy's BLAS is OpenBLAS with
    one thread, else "blis".

    Loads NumPy (as the labeler's spaCy would): call it after `one_blas_thread`.
    """
    threads = next((v for v in (os.environ.get(k, "").strip() for k in _THREAD_VARIABLES) if v), "")
    if threads != "1":
        return "blis"
    try:
        import numpy as np

        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    except Exception:  # noqa: BLE001 - an unknown build: keep the library's default
        return "blis"
    return "numpy" if "openblas" in str(blas).lower() else "blis"
