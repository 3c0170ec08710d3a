"""`cxr label --ray`: reports labelled on Ray in blocks of hundreds, one pipeline per actor.

The driver reads the reports and hands them out in blocks (`block_size`, 256 by default:
a block's scheduling and transfer, about a millisecond, is then well under 1% of its
labelling); each actor builds its spaCy pipeline once and labels its blocks with
`label_many` in batches of `batch_size`. Results come back in input order. A block whose
worker is lost `max_attempts` times comes back as reports with the reason as their error.
"""

from __future__ import annotations

import gc
import pickle
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from batch.cluster.pool import ActorPool, BlockFailure, wait_for

if TYPE_CHECKING:
    from labeler import ReportLabels
    from labeler.config import LabelerConfig
    from labeler.schema import Status

__all__ = ["label_reports_on_ray"]


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

    def label(self, block: list[tuple[str, str]]) -> bytes:
        out: list[ReportLabels] = []
        for start in range(0, len(block), self.batch_size):
            out += self.labeler.label_many(block[start : start + self.batch_size])
        return pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)


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
    from batch.cluster.connection import cluster_cpus
    from labeler import ReportLabels

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
    done: dict[int, list[ReportLabels] | BlockFailure] = {}
    sent = next_out = 0
    window = 2 * size * pool.depth  # blocks in flight or waiting to go out in order
    exhausted = False
    labels: list[str] = []
    try:
        while True:
            while not exhausted and sent - next_out < window:
                block = [(str(i), str(t)) for i, t in _take(source, block_size)]
                if not block:
                    exhausted = True
                    break
                blocks[sent] = block
                pool.submit(sent, "label", block)
                sent += 1
            while next_out in done:
                value = done.pop(next_out)
                block = blocks.pop(next_out)
                next_out += 1
                if isinstance(value, BlockFailure):
                    absent: dict[str, Status] = dict.fromkeys(labels, "absent")
                    value = [ReportLabels(i, dict(absent), False, error=value.reason)
                             for i, _ in block]  # fmt: skip
                elif value and not labels:
                    labels = list(value[0].labels)
                yield from value
            if exhausted and next_out == sent:
                return
            for finished in wait_for([pool]):
                value = finished.value
                if not isinstance(value, BlockFailure):
                    value = pickle.loads(value)  # noqa: S301 - written by our own actors
                done[finished.tag] = value
    finally:
        pool.close()


def _take(source: Iterator[tuple[str, str]], n: int) -> list[tuple[str, str]]:
    out = []
    for item in source:
        out.append(item)
        if len(out) == n:
            break
    return out
