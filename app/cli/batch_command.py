"""`cxr batch`: label and predict a PACS export folder, a zip or a DICOMweb server; `--ray`
runs the same job on a Ray cluster (`batch.cluster`).

Only the standard library and `app.cli.common` are imported at module level; torch,
spaCy and Ray load inside the handler, so `cxr label` starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.common import (
    CommandError,
    add_dicomweb_auth_arguments,
    add_precision_argument,
    add_ray_argument,
    dicomweb_client_from_args,
    dicomweb_server_from_args,
)

if TYPE_CHECKING:
    from tqdm import tqdm

    from app.settings import Settings
    from batch.interfaces import Outcome
    from batch.job import DicomwebInput, JobSpec, PushOutput
    from batch.labeling import PipelineLabeler
    from batch.sinks import JsonlSink, TallySink
    from models.predict import Predictor

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `batch` to `cxr`."""
    p = sub.add_parser(
        "batch",
        help="label a PACS export folder: reports and images, one JSON line per file",
        description="Walk EXPORT_DIR (nested folders, files with or without .dcm, DICOMDIR, "
        "DICOM SR; or a zip of such a folder, checked against the CXR_ZIP_MAX_* limits and "
        "extracted to a temporary folder removed afterwards), label reports (from --reports "
        "CSV keyed by AccessionNumber or "
        "StudyInstanceUID, or SR documents in the export) and predict images with --model. "
        "Writes one JSON line per file found to OUT; a summary goes to stderr; the exit "
        "status is 1 if any file failed. Without a model, images are still read and reported "
        "with their report's labels (prediction null). --dataset also writes an NIH-style "
        "training set (PNG + Data_Entry.csv) for `cxr train --data`. Lines are flushed as "
        "files are done: an interrupted run continues with --resume.",
    )
    p.add_argument("export_dir", type=Path, nargs="?", metavar="EXPORT_DIR", help="folder or .zip")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="OUT.jsonl")
    p.add_argument("--reports", type=Path, metavar="REPORTS.csv")
    p.add_argument("--model", type=Path, help="checkpoint (default: CXR_MODEL if set)")
    p.add_argument("--device", default="auto")
    add_precision_argument(p, env=True)
    _add_dataset_arguments(p)
    p.add_argument(
        "--on-error",
        choices=["skip", "raise"],
        default="skip",
        help="skip (default): record the error and go on; raise: stop at the first failure",
    )
    p.add_argument(
        "--rejects",
        type=Path,
        metavar="REJECTS.jsonl",
        help="where failed files and their reasons go (default: OUT with .rejects.jsonl; "
        "written only when a file failed)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted run: keep OUT's complete lines (a torn last line is "
        "dropped), skip the files recorded there (by path relative to EXPORT_DIR), append "
        "the rest; the summary, rejects and --dataset cover old and new files. A resumed "
        "--dataset needs the first run's --pseudonym-key. Without --resume an existing OUT "
        "is overwritten (and an existing --dataset folder is refused)",
    )
    p.add_argument("--chunk-size", type=int, default=8, help="images per forward pass")
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="processes that decode images ahead of the model (default: CXR_BATCH_WORKERS, "
        "else the number of cores; 0: one at a time in this process); a file that crashes "
        "or hangs its worker fails alone",
    )
    p.add_argument(
        "--max-pixels",
        type=int,
        default=50_000_000,
        help="images with more pixels (rows x columns) fail from their header, undecoded, "
        "like CXR_MAX_PIXELS in the service (50000000; 0: no limit)",
    )
    _add_pacs_arguments(p)
    add_ray_argument(p)
    p.add_argument(
        "--parquet", type=Path, metavar="DIR", help="with --ray: also write Parquet shards here"
    )
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning"])
    p.set_defaults(handler=_batch, log_style="service")


def _add_dataset_arguments(p: argparse.ArgumentParser) -> None:
    """`--dataset`: the NIH-style training set written beside the results."""
    p.add_argument("--dataset", type=Path, metavar="DATASET_DIR", help="write a training set")
    p.add_argument(
        "--dataset-size", type=int, default=1024, help="PNG side (default 1024, as the paper)"
    )
    p.add_argument(
        "--uncertain-positive",
        action="store_true",
        help="count uncertain findings as positive in the training set (default: not)",
    )
    p.add_argument(
        "--pseudonym-key",
        type=Path,
        metavar="FILE",
        help="file holding the secret key for patient pseudonyms (keeps them stable across "
        "runs); default: a random key per run",
    )


def _add_pacs_arguments(p: argparse.ArgumentParser) -> None:
    """The "PACS" group: pull from a DICOMweb server instead of EXPORT_DIR, push results back."""
    from batch.scan import DEFAULT_MODALITIES

    pacs = p.add_argument_group(
        "PACS (instead of EXPORT_DIR)",
        "Pull the instances of matching studies from a DICOMweb server (QIDO-RS, WADO-RS); "
        "each line's path is studies/UID/series/UID/instances/UID, so --resume skips what "
        "OUT holds. --push stores a TID 1500 SR and/or a GSPS per predicted image back to "
        "the same server (STOW-RS; their UIDs are stable, so a rerun does not duplicate them).",
    )
    pacs.add_argument("--dicomweb", metavar="URL", help="DICOMweb service root to pull from")
    pacs.add_argument(
        "--study", action="append", default=[], metavar="UID", help="only this study (repeat)"
    )
    pacs.add_argument("--since", metavar="YYYY-MM-DD", help="only studies from this day on")
    modalities = ",".join(DEFAULT_MODALITIES)
    pacs.add_argument(
        "--modality",
        default=modalities,
        metavar="CR,DX",
        help=f"series modalities (default {modalities})",
    )
    pacs.add_argument("--push", metavar="sr,gsps", help="store results back: sr, gsps or both")
    pacs.add_argument(
        "--max-instance-mb",
        type=float,
        metavar="MB",
        help="largest WADO-RS answer, on the wire and decoded; a larger instance fails "
        "(default CXR_DICOMWEB_MAX_INSTANCE_MB, 256)",
    )
    pacs.add_argument(
        "--max-results",
        type=int,
        metavar="N",
        help="QIDO-RS results (studies, series, instances) the search may list before it "
        "stops with an error (default CXR_DICOMWEB_MAX_RESULTS, 200000)",
    )
    add_dicomweb_auth_arguments(pacs)


def _batch(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    import zipfile

    from batch.results import read_result_lines

    if (args.export_dir is None) == (args.dicomweb is None):
        raise CommandError("give either EXPORT_DIR or --dicomweb URL (one of them)")
    if args.dicomweb is None and (args.push or args.study or args.since):
        raise CommandError("--push, --study and --since need --dicomweb URL")
    for flag, value in (
        ("--timeout", args.timeout),
        ("--max-instance-mb", args.max_instance_mb),
        ("--max-results", args.max_results),
    ):
        if value is not None and not value > 0:
            raise CommandError(f"{flag} {value}: expected a number > 0")
    is_zip = False
    if args.export_dir is not None:
        is_zip = args.export_dir.is_file() and zipfile.is_zipfile(args.export_dir)
        if not args.export_dir.is_dir() and not is_zip:
            raise CommandError(f"{args.export_dir}: not a folder (nor a zip archive of one)")
        export = args.export_dir.resolve()
        for flag, target in (("-o", args.output), ("--dataset", args.dataset)):
            # The export is only read: results written into it could overwrite an instance
            # (or the zip), and a resumed scan would meet them as files of the export.
            where = target.resolve() if target is not None else None
            if where is not None and (where == export or (not is_zip and export in where.parents)):
                raise CommandError(
                    f"{flag} {target}: inside the export {args.export_dir}; write the results "
                    "outside it (the export is only read)"
                )
    if args.chunk_size < 1 or args.dataset_size < 32:
        raise CommandError("--chunk-size must be >= 1 and --dataset-size >= 32")
    if args.max_pixels < 0:
        raise CommandError(f"--max-pixels must be >= 0 (0: no limit), got {args.max_pixels}")
    if args.workers is not None and args.workers < 0:
        raise CommandError(
            f"--workers must be >= 0 (0: decode in this process), got {args.workers}"
        )
    previous, torn = read_result_lines(args.output) if args.resume else ([], 0)
    if (
        args.resume
        and args.dataset is not None
        and args.pseudonym_key is None
        and (args.dataset / "Data_Entry.csv").exists()
    ):
        raise CommandError(
            f"--resume with --dataset {args.dataset} needs --pseudonym-key FILE, the key "
            "of the first run: a new random key would give its patients new pseudonyms "
            "(breaking patient-wise splits). Without that key, write the training set "
            "to a new --dataset folder"
        )
    from app.settings import build_settings

    settings = build_settings()
    if args.workers is None:
        args.workers = settings.resolved_batch_workers
    if args.precision is None:
        args.precision = settings.precision
    if args.ray is not None:
        args.workers = 0  # each Ray reader decodes in its own single worker (`batch.cluster`)
    if args.workers:
        from models.decode_pool import start_fork_server

        start_fork_server()  # before torch's import, which then runs beside it
    model_path = args.model if args.model is not None else settings.model
    predictor = None
    if model_path is not None:
        from app.inference import load_model

        predictor = load_model(model_path, args.device, args.precision)
        if predictor.card.get("demo"):
            from models.notices import DEMO_NOTICE

            sys.stderr.write(f"cxr batch: {DEMO_NOTICE}\n")
        if args.ray is None:
            # A full chunk's pass replayed as one CUDA graph, as `cxr predict` does for its
            # batch (nothing off CUDA); before the read-ahead's threads start.
            predictor.capture_graphs([args.chunk_size])
    with contextlib.ExitStack() as cleanup:
        spec = _batch_spec(args, settings, previous, predictor, is_zip, cleanup)
        if args.ray is not None:
            return _run_batch_on_ray(args, spec, model_path, predictor, previous, torn, started)
        return _run_batch(args, spec, previous, torn, predictor, started)


def _batch_spec(
    args: argparse.Namespace,
    settings: Settings,
    previous: list[dict[str, Any]],
    predictor: Predictor | None,
    is_zip: bool,
    cleanup: contextlib.ExitStack,
) -> JobSpec:
    """The job `cxr batch` runs, from its options (the builder's input, shared with the
    service's jobs and `cxr listen`)."""
    from batch.job import DatasetOutput, FolderInput, JobInput, JobSpec, ZipInput

    given: JobInput
    push = None
    if args.dicomweb is not None:
        given, push = _dicomweb_input(args, predictor, cleanup)
    elif is_zip:
        from app.jobs import zip_limits
        from batch.archive import remove_tree

        tmp = Path(tempfile.mkdtemp(prefix="cxr-batch-"))
        cleanup.callback(remove_tree, tmp)  # extracted files carry patient data
        given = ZipInput(args.export_dir, tmp / "export", zip_limits(settings))
    else:
        given = FolderInput(args.export_dir)
    dataset = None
    if args.dataset is not None:
        dataset = DatasetOutput(
            args.dataset,
            size=args.dataset_size,
            uncertain_positive=args.uncertain_positive,
            key=args.pseudonym_key.read_bytes().strip() if args.pseudonym_key else None,
            resume=args.resume,
            keep=frozenset(
                str(line["dataset_image"]) for line in previous if line.get("dataset_image")
            ),
        )
    return JobSpec(
        given,
        reports=args.reports,
        file_timeout_s=settings.batch_file_timeout_s,
        max_pixels=args.max_pixels or None,
        dataset=dataset,
        push=push,
        read_workers=args.workers,
    )


def _dicomweb_input(
    args: argparse.Namespace, predictor: Predictor | None, cleanup: contextlib.ExitStack
) -> tuple[DicomwebInput, PushOutput | None]:
    """The DICOMweb input of `cxr batch --dicomweb`, and where `--push` sends results."""
    from datetime import date

    from batch.job import DicomwebInput, PushOutput

    since = None
    if args.since:
        try:
            since = date.fromisoformat(args.since)
        except ValueError:
            raise CommandError(f"--since {args.since!r}: expected a date as YYYY-MM-DD") from None
    kinds = [k.strip().lower() for k in (args.push or "").split(",") if k.strip()]
    if args.push is not None and (not kinds or set(kinds) - {"sr", "gsps"}):
        raise CommandError(f"--push {args.push!r}: expected sr, gsps or sr,gsps")
    if kinds and predictor is None:
        raise CommandError("--push needs a model (--model or CXR_MODEL): nothing to push")
    client = dicomweb_client_from_args(args.dicomweb, args)
    cleanup.callback(client.close)
    given = DicomwebInput(
        client,
        study_uids=tuple(args.study or ()),
        since=since,
        modalities=tuple(m for m in args.modality.split(",") if m.strip()),
    )
    if not kinds:
        return given, None
    # Its own client, as in the service: the source's client downloads on the thread that
    # reads ahead of the model while the push sink stores on this one, and a client is
    # meant for one thread at a time.
    pusher = dicomweb_client_from_args(args.dicomweb, args)
    cleanup.callback(pusher.close)
    return given, PushOutput(pusher, tuple(kinds))


def _run_batch(
    args: argparse.Namespace,
    spec: JobSpec,
    previous: list[dict[str, Any]],
    torn: int,
    predictor: Predictor | None,
    started: float,
) -> int:
    from tqdm import tqdm

    from batch.engine import plan, run_resumed
    from batch.interfaces import BatchInputError, Sink
    from batch.job import build_job

    try:
        job = build_job(spec, labeler=_labeler(), predictor=predictor)
    except BatchInputError as exc:
        raise CommandError(str(exc)) from None
    try:
        found = tqdm(
            job.source.scan(), desc="scanning", unit=" files", disable=None, file=sys.stderr
        )
        try:
            # the resume path shared with the service
            items = plan(list(found), previous, job.processor)
        except BatchInputError as exc:
            raise CommandError(f"{args.export_dir}: {exc}") from None
        with _batch_output(args, previous, len(items), "labeling") as (tally, out, bar):

            class Progress(Sink):
                def write(self, outcomes: Sequence[Outcome]) -> None:
                    bar.update(len(outcomes))

            report = run_resumed(
                items,
                job.processor,
                [*job.sinks, out, tally, Progress()],
                attempts=dict(out.attempts),
                chunk_size=args.chunk_size,
                stop_on_failure=args.on_error == "raise",
            )
    finally:
        job.source.close()
    unmatched = job.processor.unmatched_reports()
    summary = _batch_summary(args, tally, previous, torn, predictor, unmatched)
    dataset = job.dataset
    if dataset is not None:
        dataset.close()
        summary += f"; training set: {len(dataset.writer)} images, {dataset.entry}"
    summary += f"; {time.perf_counter() - started:.1f} s"
    sys.stderr.write(summary + "\n")
    if report.stopped and args.on_error == "raise":
        sys.stderr.write(
            f"cxr batch: stopped at the first failure (--on-error raise): {report.first_failure}\n"
        )
    return 1 if tally.counts["failed"] else 0


@contextlib.contextmanager
def _batch_output(
    args: argparse.Namespace, previous: list[dict[str, Any]], todo: int, desc: str
) -> Iterator[tuple[TallySink, JsonlSink, tqdm[Any]]]:
    """`cxr batch`'s tally (counting the lines done before an interruption), its JSONL
    results file and its progress bar, shared by the single-machine and the Ray paths.
    An interruption forgets the lines still in flight; the file is closed either way."""
    from tqdm import tqdm

    from batch.sinks import JsonlSink, TallySink

    tally = TallySink()
    for line in previous:
        tally.add_line(line)
    out = JsonlSink(args.output, previous=previous, resume=args.resume)
    with tqdm(
        total=len(previous) + todo,
        initial=len(previous),
        desc=desc,
        unit=" files",
        disable=None,
        file=sys.stderr,
    ) as bar:
        try:
            yield tally, out, bar
        except KeyboardInterrupt:
            out.forget_in_flight()
            raise
        finally:
            out.close()


def _batch_summary(
    args: argparse.Namespace,
    tally: TallySink,
    previous: list[dict[str, Any]],
    torn: int,
    predictor: Predictor | None,
    unmatched: int | None,
) -> str:
    """The summary line of `cxr batch` (up to the output file and the rejects), shared by
    the single-machine and the Ray paths; writes the rejects file.

    Args:
        unmatched: CSV reports that matched no image (None: no reports CSV).
    """
    counts = tally.counts
    skipped = f"{counts['skipped']:,} skipped"
    if tally.duplicates:  # second copies of an image, among the skipped
        skipped += f" ({tally.duplicates:,} duplicate{'' if tally.duplicates == 1 else 's'})"
    summary = (
        f"cxr batch: {tally.total:,} file{'' if tally.total == 1 else 's'}: "
        f"{counts['done']:,} done, {skipped}, {counts['failed']:,} failed; "
        f"{tally.images:,} images ({tally.with_report:,} with a report)"
    )
    if unmatched is not None:
        summary += f"; {max(unmatched, 0)} CSV reports matched no image"
    if predictor is None:
        summary += "; no model (images reported without prediction)"
    elif predictor.card.get("demo"):
        summary += "; DEMO model"
    if args.resume:
        summary += f"; resumed after {len(previous)} files already in OUT"
        if torn:
            summary += f" ({torn} incomplete line{'s' if torn > 1 else ''} dropped)"
    summary += f"; wrote {args.output}"
    if tally.rejects:
        rejects_path = args.rejects or args.output.with_suffix(".rejects.jsonl")
        with rejects_path.open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, separators=(",", ":")) + "\n" for r in tally.rejects)
        summary += f"; failures listed in {rejects_path}"
    return summary


# --- batch --ray -------------------------------------------------------------------------


def _run_batch_on_ray(
    args: argparse.Namespace,
    spec: JobSpec,
    model: Path | None,
    predictor: Predictor | None,
    previous: list[dict[str, Any]],
    torn: int,
    started: float,
) -> int:
    """`cxr batch --ray`: list and plan here, process on Ray, write the lines (and the
    training set) here."""
    from batch.cluster import ClusterReport, ray_session, run_on_ray
    from batch.engine import plan
    from batch.interfaces import BatchInputError
    from batch.job import build_job
    from batch.results import outcome_line

    server = dicomweb_server_from_args(args.dicomweb, args) if args.dicomweb else None
    labeler = _labeler()
    try:
        job = build_job(spec, labeler=labeler, predictor=predictor)
    except BatchInputError as exc:
        raise CommandError(str(exc)) from None
    report = ClusterReport()
    stopped = None
    try:
        try:
            items = plan(list(job.source.scan()), previous, job.processor)
        except BatchInputError as exc:
            raise CommandError(f"{args.export_dir or args.dicomweb}: {exc}") from None
        shards = _ParquetShards(args.parquet) if args.parquet is not None else None
        dataset = job.dataset
        with (
            _batch_output(args, previous, len(items), "labeling (ray)") as (tally, out, bar),
            # nothing to do (a finished run resumed): no Ray started
            ray_session(args.ray or None, verbose=args.verbose)
            if items
            else contextlib.nullcontext(),
        ):
            bar.set_postfix_str("starting workers")
            for outcomes in run_on_ray(
                spec,
                items,
                previous,
                model=model,
                device=args.device,
                precision=args.precision,
                chunk_size=args.chunk_size,
                dicomweb=server,
                report=report,
                labeler=labeler.config,
            ):
                bar.set_postfix_str("")
                if dataset is not None:
                    dataset.write(outcomes)  # adds `dataset_image` before the line is written
                out.write(outcomes)
                tally.write(outcomes)
                lines = [outcome_line(o) for o in outcomes]
                for line in lines:
                    job.processor.restore(line)  # which CSV reports were matched
                if shards is not None and lines:
                    shards.write(lines)
                bar.update(len(lines))
                failed = next((o for o in outcomes if o.state == "failed"), None)
                if failed is not None and args.on_error == "raise":
                    stopped = f"{failed.key}: {failed.error}"
                    break
    finally:
        job.source.close()
    unmatched = job.processor.unmatched_reports()
    summary = _batch_summary(args, tally, previous, torn, predictor, unmatched)
    if job.dataset is not None:
        job.dataset.close()
        summary += f"; training set: {len(job.dataset.writer)} images, {job.dataset.entry}"
    if args.parquet is not None:
        summary += f"; Parquet shards in {args.parquet}"
    summary += f"; on Ray ({report.workers} workers"
    if report.lost:
        summary += f", {report.lost} lost and replaced"
    if report.failed_blocks:
        summary += f", {report.failed_blocks} blocks given up"
    sys.stderr.write(f"{summary}); {time.perf_counter() - started:.1f} s\n")
    if stopped is not None:
        sys.stderr.write(f"cxr batch: stopped at the first failure (--on-error raise): {stopped}\n")
    return 1 if tally.counts["failed"] else 0


class _ParquetShards:
    """One Parquet file per block of result lines: path, state, kind and the line as JSON."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.count = len(list(self.folder.glob("part-*.parquet")))  # a resume appends

    def write(self, lines: list[dict[str, Any]]) -> None:
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


def _labeler() -> PipelineLabeler:
    """The report labeler of a batch job, its parser on the process's BLAS (`app.blas`);
    Ray's workers build theirs from its `config`."""
    from app.blas import labeler_blas
    from batch.labeling import PipelineLabeler
    from labeler.config import LabelerConfig

    return PipelineLabeler(LabelerConfig(blas=labeler_blas()))
