"""`cxr label --ray`: reports labelled on Ray in blocks of hundreds, one pipeline per actor.

    for result in label_reports_on_ray(pairs, config=config):       # ReportLabels, in order
        ...
    for block in label_report_lines_on_ray(pairs, config=config):   # JSON Lines, in order
        out.write(block.lines)

The driver reads the reports and hands them out in blocks (`block_size`, 256 by default:
a block's scheduling and transfer, about a millisecond, is then well under 1% of its
labelling); each actor builds its spaCy pipeline once and labels its blocks with
`label_many` in batches of `batch_size`. Results come back in input order, as results or,
for `cxr label`'s JSON Lines, as the block's lines written by the actor: the driver then
only writes text (serializing a result costs the driver about as much as receiving it, and
one driver serves every actor of the cluster). A block whose worker is lost `max_attempts`
times comes back as reports with the reason as their error.
"""

from __future__ import annotations

import gc
import io
import pickle
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from batch.cluster.pool import ActorPool, BlockFailure, wait_for

if TYPE_CHECKING:
    from labeler import ReportLabels
    from labeler.config import LabelerConfig
    from labeler.schema import Status

__all__ = ["LabelledLines", "label_report_lines_on_ray", "label_reports_on_ray"]


@dataclass(frozen=True)
class LabelledLines:
    """A block of reports labelled, as `cxr label` writes them.

    Attributes:
        lines: one JSON object a line (`labeler.files.write_jsonl`), in input order.
        count: the reports (lines) in the block.
        failures: (index in the block, report id, error) of each report that failed.
        labels: the label names of the results (for a block given up later).
    """

    lines: str
    count: int
    failures: tuple[tuple[int, str, str], ...] = ()
    labels: tuple[str, ...] = ()


class LabelWorker:
    """One labeler pipeline per actor, built once."""

    def __init__(self, config: LabelerConfig, batch_size: int) -> None:
        from labeler.spacy_loading import import_spacy_without_torch

        import_spacy_without_torch()  # thinc would import torch: 1-2 s per actor
        from batch.labeling import PipelineLabeler

        self.labeler = PipelineLabeler(config)
        self.batch_size = batch_size
        self.labeler.label_many([("warm-up", "No acute disease.")])  # builds the pipeline
        # The pipeline's objects out of the collector's full passes, as the one-machine
        # workers do (`labeler.parallel`): about 8% of an actor's labelling time.
        gc.collect()
        gc.freeze()

    def ready(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def _label(self, block: list[tuple[str, str]]) -> list[ReportLabels]:
        out: list[ReportLabels] = []
        for start in range(0, len(block), self.batch_size):
            out += self.labeler.label_many(block[start : start + self.batch_size])
        return out

    def label(self, block: list[tuple[str, str]]) -> bytes:
        """The block's results, pickled."""
        return pickle.dumps(self._label(block), protocol=pickle.HIGHEST_PROTOCOL)

    def label_lines(self, block: list[tuple[str, str]]) -> LabelledLines:
        """The block's results as JSON Lines, written here."""
        return _as_lines(self._label(block))


def _as_lines(results: Sequence[ReportLabels]) -> LabelledLines:
    from labeler.files import write_jsonl

    out = io.StringIO()
    for result in results:
        write_jsonl(result, out)
    failures = tuple((i, r.id, r.error) for i, r in enumerate(results) if r.error is not None)
    labels = tuple(results[0].labels) if results else ()
    return LabelledLines(out.getvalue(), len(results), failures, labels)


def label_reports_on_ray(
    items: Iterable[tuple[str, str]],
    *,
    config: LabelerConfig,
    batch_size: int = 64,
    block_size: int = 256,
    actors: int | None = None,
    max_attempts: int = 3,
) -> Iterator[ReportLabels]:
    """Label (id, text) pairs on Ray (connected already); results in input order.

    Args:
        items: (report id, text) pairs, read as the actors need more (a few blocks ahead).
        config: the labeler configuration (each actor builds its pipeline from it).
        batch_size: reports per `label_many` call inside an actor.
        block_size: reports per block (per task).
        actors: labeler actors (None: one per CPU of the cluster).
        max_attempts: tries of one block when its worker dies.

    Yields:
        One `ReportLabels` per input, in input order; a bad report has `.error` set, and so
        has every report of a block given up.
    """
    labels: list[str] = []
    blocks = _in_order(items, "label", config, batch_size, block_size, actors, max_attempts)
    for block, value in blocks:
        if isinstance(value, BlockFailure):
            yield from _failed(block, labels, value.reason)
            continue
        results: list[ReportLabels] = pickle.loads(value)  # noqa: S301 - our own actors'
        if results and not labels:
            labels = list(results[0].labels)
        yield from results


def label_report_lines_on_ray(
    items: Iterable[tuple[str, str]],
    *,
    config: LabelerConfig,
    batch_size: int = 64,
    block_size: int = 256,
    actors: int | None = None,
    max_attempts: int = 3,
) -> Iterator[LabelledLines]:
    """Label (id, text) pairs on Ray (connected already) into `cxr label`'s JSON Lines,
    written by the actors; blocks in input order. Arguments as `label_reports_on_ray`.

    Yields:
        Each block's lines (the same text `labeler.files.write_jsonl` writes for each
        result, in input order) and its failures; a block given up has every report
        failed with the reason.
    """
    labels: list[str] = []
    blocks = _in_order(items, "label_lines", config, batch_size, block_size, actors, max_attempts)
    for block, value in blocks:
        if isinstance(value, BlockFailure):
            yield _as_lines(_failed(block, labels, value.reason))
            continue
        if value.labels and not labels:
            labels = list(value.labels)
        yield value


def _failed(block: Sequence[tuple[str, str]], labels: list[str], reason: str) -> list[ReportLabels]:
    from labeler import ReportLabels

    absent: dict[str, Status] = dict.fromkeys(labels, "absent")
    return [ReportLabels(i, dict(absent), False, error=reason) for i, _ in block]


def _in_order(
    items: Iterable[tuple[str, str]],
    method: str,
    config: LabelerConfig,
    batch_size: int,
    block_size: int,
    actors: int | None,
    max_attempts: int,
) -> Iterator[tuple[list[tuple[str, str]], Any]]:
    """Each block of `items` with what `LabelWorker.<method>` made of it (or its
    `BlockFailure`), in input order; the pool lives while the caller iterates."""
    from batch.cluster.connection import cluster_cpus

    size = actors or cluster_cpus()
    pool = ActorPool(
        LabelWorker,
        size=size,
        init={"config": config, "batch_size": batch_size},
        options={"num_cpus": 1},
        max_attempts=max_attempts,
        name="labelers",
    )
    source = iter(items)
    blocks: dict[int, list[tuple[str, str]]] = {}
    done: dict[int, Any] = {}
    sent = next_out = 0
    window = 2 * size * pool.depth  # blocks in flight or waiting to go out in order
    exhausted = False
    try:
        while True:
            while not exhausted and sent - next_out < window:
                block = [(str(i), str(t)) for i, t in _take(source, block_size)]
                if not block:
                    exhausted = True
                    break
                blocks[sent] = block
                pool.submit(sent, method, block)
                sent += 1
            while next_out in done:
                yield blocks.pop(next_out), done.pop(next_out)
                next_out += 1
            if exhausted and next_out == sent:
                return
            for finished in wait_for([pool]):
                done[finished.tag] = finished.value
    finally:
        pool.close()


def _take(source: Iterator[tuple[str, str]], n: int) -> list[tuple[str, str]]:
    out = []
    for item in source:
        out.append(item)
        if len(out) == n:
            break
    return out
