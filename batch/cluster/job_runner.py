"""`cxr batch --ray`: a planned batch job run on Ray, the same rows as one machine.

    for outcomes in run_on_ray(spec, items, recorded, model=path):   # one list per block
        ...                                     # the caller writes JSONL, Parquet, the set

The driver (the `cxr` process) lists the items once (the job's source: a folder, an
extracted zip, or a DICOMweb search, paged and capped as on one machine) and plans them
(`engine.plan`: what OUT records is left out). The items then go out in blocks
(`block_size`, 16 by default) to one pool of file workers started once for the whole run
(`batch.cluster.pool`): structured reports first, alone, their labels broadcast to the
workers, then the images, then any copy to read again. Each worker reads (a folder at the
same path on every node, or WADO-RS from the server), labels, and on a CPU cluster
predicts and pushes (STOW-RS) in the same actor; on a GPU cluster a second pool, one actor
per GPU, predicts and pushes (the fitted images go from one pool to the other through Ray's
object store: the driver receives the lines and hands on an ObjectRef). The driver writes
what comes back, block by block as blocks finish: the JSONL lines, the Parquet shards and
the training set (the workers encode its PNGs; the driver names them in the order the
images arrive, as `DatasetWriter` numbers each patient's images, and writes them).

A worker lost (the OOM killer, a node gone) costs its block one attempt; after
`max_attempts` the block's items fail with the reason, and blocks already received are
never redone. A run stopped midway is resumed with `--resume`, as on one machine.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batch.cluster.copies import CopiesAwaitingFirst, across_readers, start_registry
from batch.cluster.pool import ActorPool, BlockFailure, wait_for
from batch.cluster.workers import FileWorker, ItemResult, PredictWorker, WorkerJob
from batch.duplicates import InstanceIndex
from batch.interfaces import BatchInputError, Outcome, SourceItem
from batch.job import DicomwebInput, FolderInput, JobSpec, ZipInput
from batch.results import result_line

if TYPE_CHECKING:
    from batch.pacs.dicomweb import DicomwebServer
    from labeler.config import LabelerConfig
    from models.image_pipeline import InputSpec
    from models.precision import Precision

__all__ = ["ClusterReport", "PredictStage", "run_on_ray", "worker_job"]


@dataclass
class ClusterReport:
    """What the cluster did besides the lines: workers lost, blocks given up, and the
    blocks each Ray node finished."""

    workers: int = 0
    lost: int = 0
    failed_blocks: int = 0
    blocks: int = 0
    blocks_by_node: Counter[str] = field(default_factory=Counter)
    pools: list[ActorPool] = field(default_factory=list, repr=False)


@dataclass(frozen=True)
class PredictStage:
    """The second pool of a two-stage run: the file workers fit the images, these workers
    predict them (and push the results).

    Attributes:
        workers: predict workers (one per GPU).
        options: each one's Ray resources.
        device: where each one's model runs.
    """

    workers: int
    options: tuple[tuple[str, float], ...] = (("num_gpus", 1), ("num_cpus", 0))
    device: str = "cuda"


def worker_job(
    spec: JobSpec, dicomweb: DicomwebServer | None = None, labeler: LabelerConfig | None = None
) -> WorkerJob:
    """The picklable part of `spec` the workers build their jobs from.

    Args:
        spec: the driver's job.
        dicomweb: the server of a `DicomwebInput` (the workers open their own clients).
        labeler: the report labeler's configuration (None: `LabelerConfig()`).

    Raises:
        BatchInputError: the input cannot be read on Ray (a C-STORE inbox: `cxr listen`'s
            queue, on its machine), or a DICOMweb input without `dicomweb`.
    """
    given = spec.input
    folder = None
    if isinstance(given, FolderInput):
        folder = given.path
    elif isinstance(given, ZipInput):  # extracted by the driver's scan: read as a folder
        folder = given.extract_to
    elif isinstance(given, DicomwebInput):
        if dicomweb is None:
            raise BatchInputError("a DICOMweb job on Ray needs the server's settings")
    else:  # a C-STORE inbox (docs/cluster.md, "The C-STORE inbox")
        raise BatchInputError(
            "a C-STORE inbox is processed by the `cxr listen` that receives into it (a live "
            "queue on that machine's disk, its files removed as their lines are recorded); "
            "on Ray, read a folder, a zip, or the instances from the archive with --dicomweb"
        )
    return WorkerJob(
        folder=folder,
        dicomweb=dicomweb if isinstance(given, DicomwebInput) else None,
        push_kinds=tuple(spec.push.kinds) if spec.push is not None else (),
        reports=spec.reports,
        reports_name=spec.reports_name,
        file_timeout_s=spec.file_timeout_s,
        max_pixels=spec.max_pixels,
        display_size=spec.dataset.size if spec.dataset is not None else None,
        labeler=labeler,
    )


def run_on_ray(
    spec: JobSpec,
    items: Sequence[SourceItem],
    recorded: Sequence[dict[str, Any]],
    *,
    model: Path | None,
    device: str = "cpu",
    precision: Precision = "auto",
    chunk_size: int = 8,
    block_size: int = 16,
    actors: int | None = None,
    max_attempts: int = 3,
    dicomweb: DicomwebServer | None = None,
    report: ClusterReport | None = None,
    after_block: Callable[[int], None] | None = None,
    predict_stage: PredictStage | None = None,
    labeler: LabelerConfig | None = None,
) -> Iterator[list[Outcome]]:
    """Process planned items on Ray (connected already); yields each block's outcomes.

    Args:
        spec: the job (its input, reports CSV, limits, push and training-set options).
        items: what to process (`engine.plan`: recorded items left out, SRs first).
        recorded: the lines of an earlier run (their SR labels reach later images).
        model: the checkpoint the workers load (None: images without prediction).
        device: where a CPU cluster's workers run the model ("cuda" on a GPU cluster).
        precision: the model's arithmetic (`models.precision`), resolved on each worker.
        chunk_size: images per forward pass.
        block_size: items per block (per task).
        actors: file workers (None: one per CPU of the cluster).
        max_attempts: tries of a block whose worker dies; then its items fail.
        dicomweb: the server of a DICOMweb input (see `worker_job`).
        report: filled with the workers lost and the blocks given up.
        after_block: called with the number of blocks yielded (tests kill a worker here).
        predict_stage: the predict pool (None: one predict worker per GPU of the cluster
            when it has GPUs, else the file workers predict).
        labeler: the workers' report labeler configuration (None: `LabelerConfig()`).

    Yields:
        The outcomes of a block, as blocks finish; `image` holds a `DisplayCopy` for the
        training-set writer when the job writes one.

    Raises:
        BatchInputError: see `worker_job`.
    """
    from batch.cluster.connection import cluster_cpus, cluster_gpus

    job = worker_job(spec, dicomweb, labeler)
    report = report if report is not None else ClusterReport()
    srs = [i for i in items if i.kind == "sr"]
    rest = [i for i in items if i.kind != "sr"]
    if not items:
        return
    if model is None:
        stage = None
    elif predict_stage is not None:
        stage = predict_stage
    else:
        gpus = cluster_gpus()
        stage = PredictStage(gpus) if gpus else None
    registry = start_registry(recorded) if rest else None
    size = actors or cluster_cpus()
    readers = ActorPool(
        FileWorker,
        size=size,
        init={
            "job": job,
            "recorded": [line for line in recorded if line.get("kind") == "sr"],
            "model": None if stage is not None else model,
            "device": device,
            "precision": precision,
            "input_spec": _input_spec(model) if stage is not None and model is not None else None,
            "keep_pixels": stage is not None,
            "registry": registry,
            "chunk_size": chunk_size,
        },
        options={"num_cpus": 1},
        max_attempts=max_attempts,
        name="file workers",
    )
    pools = [readers]
    predictors = None
    if stage is not None and model is not None:
        predictors = ActorPool(
            PredictWorker,
            size=stage.workers,
            init={
                "model": model,
                "device": stage.device,
                "precision": precision,
                "job": job,
                "registry": registry,
            },  # fmt: skip
            options=dict(stage.options),
            max_attempts=max_attempts,
            name="predict workers",
        )
        pools.append(predictors)
    report.workers = size + (predictors.size if predictors is not None else 0)
    report.pools = pools
    instances = InstanceIndex()
    for line in recorded:
        instances.restore(line)
    copies = CopiesAwaitingFirst(recorded, rest)
    try:
        for phase in (srs, rest):
            if not phase:
                continue
            sr_lines: list[dict[str, Any]] = []
            for outcomes in _run_phase(phase, readers, predictors, block_size, report):
                lines = [_line(o) for o in outcomes]
                if phase is srs:
                    sr_lines += lines
                yield _judged(outcomes, copies.settle(lines), instances)
                report.blocks += 1
                if after_block is not None:
                    after_block(report.blocks)
            if sr_lines:  # their labels reach the images, on every worker
                readers.broadcast("restore", sr_lines)
        # Copies skipped for a first copy whose prediction then failed: read and predicted
        # now (the registry has forgotten that first copy), as one machine would have.
        again, unsettled = copies.retry(), copies.unsettled()
        if again:
            for outcomes in _run_phase(again, readers, predictors, block_size, report):
                yield _judged(outcomes, [_line(o) for o in outcomes], instances)
        if unsettled:
            yield _judged([], unsettled, instances)
    finally:
        report.lost = sum(pool.lost for pool in pools)
        report.failed_blocks = sum(pool.failed_blocks for pool in pools)
        for pool in pools:
            pool.close()


def _line(outcome: Outcome) -> dict[str, Any]:
    return result_line(outcome.key, outcome.state, outcome.result, outcome.error)


def _judged(
    outcomes: Sequence[Outcome], lines: Sequence[dict[str, Any]], instances: InstanceIndex
) -> list[Outcome]:
    """The lines to record, judged across readers, as outcomes (with their display copies)."""
    images = {o.key: o.image for o in outcomes}
    out = []
    for line in lines:
        judged = across_readers(line, instances)
        outcome = Outcome(
            str(judged["path"]),
            str(judged["state"]),
            {k: v for k, v in judged.items() if k not in ("path", "state", "error")},
            judged.get("error"),
        )
        if outcome.state == "done":
            outcome.image = images.get(outcome.key)
        out.append(outcome)
    return out


def _run_phase(
    items: Sequence[SourceItem],
    readers: ActorPool,
    predictors: ActorPool | None,
    block_size: int,
    report: ClusterReport,
) -> Iterator[list[Outcome]]:
    """Submit the items in blocks and yield each block's outcomes as it finishes (through
    the predict pool, when there is one, for a block with images to predict).

    A block of several items given up (its worker lost `max_attempts` times) is split: each
    item gets one more try alone, so that one item that kills its worker (a poison file)
    fails alone, as one machine gives up only the files in flight when its process died.
    """
    blocks: dict[Any, Sequence[SourceItem]] = {
        n: items[start : start + block_size]
        for n, start in enumerate(range(0, len(items), block_size))
    }

    def submit(tag: Any, block: Sequence[SourceItem], attempts_left: int | None = None) -> None:
        if predictors is None:
            readers.submit(tag, "process", list(block), attempts_left=attempts_left)
        else:  # the fitted images stay in the object store, for the predict pool
            readers.submit(tag, "read", list(block), attempts_left=attempts_left, returns=2)

    for n, block in blocks.items():
        submit(n, block)
    read: dict[Any, list[ItemResult]] = {}  # blocks at the predict pool, as read
    left = len(blocks)
    pools = [readers] if predictors is None else [readers, predictors]
    while left:
        for finished in wait_for(pools):
            tag, value = finished.tag, finished.value
            if finished.node is not None:
                report.blocks_by_node[finished.node] += 1
            if finished.pool is readers:
                block = blocks.pop(tag)
                if isinstance(value, BlockFailure) and len(block) > 1:
                    for i, item in enumerate(block):  # one last try each, alone
                        blocks[tag, i] = [item]
                        submit((tag, i), [item], attempts_left=1)
                    left += len(block) - 1
                    continue
                if isinstance(value, BlockFailure):
                    outcomes = [_failed(item, value.reason) for item in block]
                elif predictors is not None and any(r.fitted for r in value):
                    read[tag] = value
                    # the ObjectRef of the fitted images: the predict worker's node fetches
                    # them from the reader's, the driver never does
                    predictors.submit(tag, "predict", value, finished.rest[0])
                    continue
                else:
                    outcomes = [_outcome(r) for r in value]
            elif isinstance(value, BlockFailure):  # the images fail, the rest stands
                outcomes = [_failed_prediction(r, value.reason) for r in read.pop(tag)]
            else:
                read.pop(tag, None)
                outcomes = [_outcome(r) for r in value]
            left -= 1
            yield outcomes


def _failed(item: SourceItem, reason: str) -> Outcome:
    base = {"kind": item.kind, "study_instance_uid": item.study_instance_uid,
            "accession_number": item.accession_number}  # fmt: skip
    return Outcome(item.key, "failed", base, reason)


def _failed_prediction(result: ItemResult, reason: str) -> Outcome:
    outcome = _outcome(result)
    if result.fitted and outcome.state == "done":
        outcome.state, outcome.error, outcome.image = "failed", reason, None
    return outcome


def _outcome(result: ItemResult) -> Outcome:
    line = result.line
    outcome = Outcome(
        str(line["path"]),
        str(line["state"]),
        {k: v for k, v in line.items() if k not in ("path", "state", "error")},
        line.get("error"),
    )
    outcome.image = result.image
    return outcome


def _input_spec(model: Path) -> InputSpec:
    """The model's input size and resize mode, from its card (the readers fit for it)."""
    from models.checkpoint import load_checkpoint
    from models.image_pipeline import InputSpec
    from models.transforms import resize_mode_of

    card = load_checkpoint(model, map_location="cpu").card
    return InputSpec(int(card.image_size), resize_mode_of(card.preprocessing))
