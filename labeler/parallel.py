"""Label a stream of reports with several worker processes, keeping input order.

Each worker builds its own pipeline once. At most `4 * workers` batches are in
flight, so memory stays bounded however long the input is.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import islice
from multiprocessing.pool import AsyncResult
from typing import TYPE_CHECKING, Any, Literal

from labeler.config import LabelerConfig
from labeler.schema import ReportLabels

if TYPE_CHECKING:
    from spacy.language import Language

__all__ = ["label_reports_parallel", "loading"]

_worker_state: dict[str, Any] = {}


def _init_worker(config: LabelerConfig) -> None:
    _worker_state["nlp"] = _load(config)
    _worker_state["config"] = config


def _load(config: LabelerConfig) -> Language:
    """The pipeline for `config`, with what labelling with it needs (`prepare`: matchers,
    the lexicon's phrase index), loaded and frozen (`loading`)."""
    from labeler.pipeline import build_nlp, prepare

    with loading():
        nlp = build_nlp(config)
        prepare(nlp, config)
    return nlp


@contextlib.contextmanager
def loading() -> Iterator[None]:
    """A block that loads what lives as long as the process (modules, pattern files, the
    pipeline): the collector does not run in it, and what it made is frozen at its end.

    Young-generation collections walked the loaded objects again and again while they
    were being made, to free nothing (4 collections, 0.025 s of `cxr label --findings`).
    Frozen, the spaCy model and pattern matchers, hundreds of thousands of objects, stay
    out of every later collection (each generation-2 one walked them: about 5% of
    labelling time) and are not written to by the collector, which keeps forked workers'
    pages shared. No collection first: it walked the whole heap (0.03 s of every
    `cxr label`) to free the few thousand objects that loading left in cycles, which now
    stay frozen. The collector's thresholds are back after the block.

    Paused by a first threshold of 0, not `gc.disable()`: loading a spaCy model enables
    the collector whatever it found (srsly's msgpack reader).
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(0)
    try:
        yield
    finally:
        gc.freeze()
        gc.set_threshold(*thresholds)


def _label_batch(
    batch: list[tuple[str, Any]], on_error: str, batch_size: int
) -> list[ReportLabels]:
    from labeler.pipeline import label_reports

    return list(
        label_reports(
            batch,
            nlp=_worker_state["nlp"],
            config=_worker_state["config"],
            on_error=on_error,  # type: ignore[arg-type]
            batch_size=batch_size,
        )
    )


def label_reports_parallel(
    items: Iterable[tuple[str, Any]],
    *,
    config: LabelerConfig,
    workers: int = 1,
    on_error: Literal["raise", "skip"] = "skip",
    batch_size: int = 64,
) -> Iterator[ReportLabels]:
    """Label (id, text) pairs with `workers` processes; results come in input order.

    Args:
        items: (report id, text) pairs; consumed lazily.
        config: labeler configuration (each worker builds its pipeline from it).
        workers: number of processes; 1 labels in this process.
        on_error: as in `labeler.pipeline.label_reports`.
        batch_size: reports per task sent to a worker.

    Yields:
        One `ReportLabels` per input pair, in input order.

    Raises:
        LabelerError: a report cannot be labelled and on_error is "raise".
        ValueError: workers < 1.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if workers == 1:
        from labeler.pipeline import label_reports

        nlp = _load(config)
        yield from label_reports(
            items, nlp=nlp, config=config, on_error=on_error, batch_size=batch_size
        )
        return
    # fork starts workers in milliseconds with the already imported modules;
    # spawn elsewhere (macOS, Windows).
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    ctx = mp.get_context(method)
    if method == "fork":
        # Load the pipeline and its matchers once here; forked workers share them
        # copy-on-write.
        _init_worker(config)
        pool_args: dict[str, Any] = {}
    else:
        pool_args = {"initializer": _init_worker, "initargs": (config,)}
    it = iter(items)
    try:
        with ctx.Pool(workers, **pool_args) as pool:
            pending: deque[AsyncResult[list[ReportLabels]]] = deque()
            while batch := list(islice(it, batch_size)):
                pending.append(pool.apply_async(_label_batch, (batch, on_error, batch_size)))
                if len(pending) >= 4 * workers:
                    yield from pending.popleft().get()
            while pending:
                yield from pending.popleft().get()
    finally:
        _worker_state.clear()
