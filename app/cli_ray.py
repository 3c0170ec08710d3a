"""`cxr batch --ray` and `cxr label --ray`: the same jobs on a Ray cluster (`batch.cluster`).

The driver (this process) lists the files and plans the resume, as `cxr batch` does; Ray
runs read-and-decode and prediction on its workers; the driver writes the same JSONL
lines (and, with `--parquet DIR`, one Parquet shard per block) and counts them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from batch.job import JobSpec
    from models.predict import Predictor

__all__ = ["add_ray_argument", "run_batch_on_ray"]


def add_ray_argument(p: argparse.ArgumentParser) -> None:
    """Add `--ray [ADDRESS]` to a command."""
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run on Ray: a local Ray without ADDRESS, else the cluster at ADDRESS "
        "('auto', 'ray://HEAD:10001'); see docs/cluster.md",
    )


def run_batch_on_ray(
    args: argparse.Namespace,
    spec: JobSpec,
    model: Path | None,
    predictor: Predictor | None,
    previous: list[dict[str, Any]],
    torn: int,
    started: float,
) -> int:
    """`cxr batch --ray`: plan here, process on Ray, write the lines here."""
    from app.cli_service import CommandError, batch_output, batch_summary
    from batch.cluster import connect, run_on_ray
    from batch.engine import plan
    from batch.interfaces import BatchInputError
    from batch.job import build_job
    from batch.labeling import PipelineLabeler

    if spec.dataset is not None or spec.push is not None or args.dicomweb is not None:
        raise CommandError("--ray reads a folder or a zip; --dataset, --push and --dicomweb "
                           "run on one machine only (drop --ray)")  # fmt: skip
    job = build_job(spec, labeler=PipelineLabeler(), predictor=None)
    try:
        try:
            items = plan(list(job.source.scan()), previous, job.processor)
        except BatchInputError as exc:
            raise CommandError(f"{args.export_dir}: {exc}") from None
        connect(args.ray or None)
        shards = _ParquetShards(args.parquet) if args.parquet is not None else None
        with batch_output(args, previous, len(items), "labeling (ray)") as (tally, out, bar):
            for lines in run_on_ray(
                spec,
                items,
                previous,
                model=model,
                device=args.device,
                precision=args.precision,
                chunk_size=args.chunk_size,
            ):
                outcomes = [_outcome(line) for line in lines]
                out.write(outcomes)
                tally.write(outcomes)
                for line in lines:
                    job.processor.restore(line)  # which CSV reports were matched
                if shards is not None:
                    shards.write(lines)
                bar.update(len(lines))
    finally:
        job.source.close()
    unmatched = job.processor.unmatched_reports()
    summary = batch_summary(args, tally, previous, torn, predictor, unmatched)
    if args.parquet is not None:
        summary += f"; Parquet shards in {args.parquet}"
    sys.stderr.write(f"{summary}; on Ray; {time.perf_counter() - started:.1f} s\n")
    return 1 if tally.counts["failed"] else 0


def _outcome(line: dict[str, Any]) -> Any:
    from batch.interfaces import Outcome

    result = {k: v for k, v in line.items() if k not in ("path", "state", "error")}
    return Outcome(str(line["path"]), str(line["state"]), result, line.get("error"))


class _ParquetShards:
    """One Parquet file per block of result lines: path, state, kind and the line as JSON."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.count = len(list(self.folder.glob("part-*.parquet")))  # a resume appends

    def write(self, lines: list[dict[str, Any]]) -> None:
        import json

        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.table(
            {
                "path": [str(x["path"]) for x in lines],
                "state": [str(x["state"]) for x in lines],
                "kind": [x.get("kind") for x in lines],
                "line": [json.dumps(x, separators=(",", ":")) for x in lines],
            }
        )
        pq.write_table(table, self.folder / f"part-{self.count:05d}.parquet")
        self.count += 1


def label_on_ray(address: str, items: Any, config: Any, batch_size: int, strict: bool) -> Any:
    """`cxr label --ray`: the reports labelled on Ray, in input order (`--strict`: the first
    failed report raises its `LabelerError`, as without `--ray`)."""
    from batch.cluster import connect, label_reports_on_ray
    from labeler import LabelerError

    connect(address or None)
    for result in label_reports_on_ray(items, config=config, batch_size=batch_size):
        if strict and result.error is not None:
            raise LabelerError(f"report {result.id}: {result.error}")
        yield result
