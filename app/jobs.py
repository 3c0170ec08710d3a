"""The service's batch jobs: one background thread running queued jobs through the engine.

A job's scan is stored as its items (committed in small chunks), then the engine runs
the items not yet completed, with the database as its sink. Progress is committed per
chunk: after a crash or a restart at most one chunk is redone, and `crud.complete_items`
records each file once.

A job never freezes (issue 7 item 2):
- every item ends done or failed whatever its decoder raises (`BatchProcessor`);
- a job whose own machinery fails (disk, database) is marked failed, never left running;
- items are marked in flight before their chunk runs: a file that kills the process
  (a decoder crash, the OOM killer) is retried alone at the next start, then recorded
  as failed, so a restart never dies on the same file again;
- `cancel(job_id)` stops a job between files; DELETE /v1/batches/{id} uses it;
- a slow PACS cannot hold the worker (issue 18 item 3): each DICOMweb request has a
  deadline for the whole exchange, and `cancel` and `stop` interrupt the running job's
  source, cutting a search or a download in flight, so the next job starts and the
  service stops at once.

One job cannot starve the others (issue 42: a zip of four slow files delayed another
user's one-file job by 491 s): a job that has run for `job_slice_s` while another job
waits yields after its current chunk, goes back to the end of the queue ("queued") and
resumes from its next file when its turn comes again, round-robin.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from app import crud
from app.db.models import BatchJobRow
from app.review_images import ReviewImageSink
from app.service_metrics import Metrics
from app.settings import Settings
from app.storage import Storage
from batch.archive import ZipLimits, remove_tree
from batch.engine import MAX_ATTEMPTS, plan, run_resumed
from batch.interfaces import BatchInputError, Labeler, Outcome, Sink, Source, SourceItem
from batch.job import (
    BatchJob,
    DicomwebInput,
    FolderInput,
    JobInput,
    JobSpec,
    PushOutput,
    ZipInput,
    build_job,
)
from batch.pacs.dicomweb import DicomwebServer
from batch.results import result_line
from batch.scan import DEFAULT_MODALITIES

if TYPE_CHECKING:  # models.predict imports torch: the service loads it only with a model
    from models.predict import Predictor

__all__ = ["BatchRunner", "DatabaseSink", "JobGone", "zip_limits"]

log = logging.getLogger(__name__)


def zip_limits(settings: Settings) -> ZipLimits:
    """The limits from settings; built once at start-up and kept on the app state."""
    return ZipLimits(
        max_total_bytes=int(settings.zip_max_uncompressed_mb * 2**20),
        max_ratio=settings.zip_max_ratio,
        max_members=settings.zip_max_members,
    )


class JobGone(RuntimeError):
    """The job was deleted (cancelled) while it ran."""


class DatabaseSink(Sink):
    """Outcomes stored on a service job's items, one short transaction per chunk.

    Before a chunk runs its items are marked in flight (`crud.mark_in_flight`), so a
    process killed by one file does not die on it forever: see `BatchRunner` above. The
    engine begins the next chunk before it records this one, so a `write` is for the
    oldest chunk begun.
    """

    def __init__(self, sessions: sessionmaker[Session], job_id: str) -> None:
        self.sessions = sessions
        self.job_id = job_id
        self._in_flight: deque[list[str]] = deque()  # keys of the chunks begun, oldest first

    def begin(self, items: Sequence[SourceItem]) -> None:
        """Count an attempt on each item about to be processed."""
        keys = [i.key for i in items]
        with self.sessions() as session:
            crud.mark_in_flight(session, self.job_id, keys)
        self._in_flight.append(keys)

    def write(self, outcomes: Sequence[Outcome]) -> None:
        """Complete the items (idempotent: an item already completed is left alone).

        Raises:
            JobGone: the job was deleted meanwhile.
        """
        # Outcomes written without a chunk begun (items given up unread) have none.
        begun = self._in_flight.popleft() if self._in_flight else []
        with self.sessions() as session:
            changed = crud.complete_items(
                session,
                self.job_id,
                [crud.ItemOutcome(o.key, o.state, o.result, o.error) for o in outcomes],
            )
            if changed < len(outcomes) and crud.get_batch_job(session, self.job_id) is None:
                raise JobGone(self.job_id)
            done = {o.key for o in outcomes}
            # Items of the chunk left unprocessed (a stop between files) were not at fault.
            crud.clear_in_flight(session, self.job_id, [k for k in begun if k not in done])


class _MetricsSink(Sink):
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def write(self, outcomes: Sequence[Outcome]) -> None:
        for outcome in outcomes:
            self.metrics.batch_items.labels(outcome.state).inc()
        images = sum(1 for o in outcomes if o.result.get("prediction"))
        if images:
            self.metrics.predictions.labels("batch").inc(images)


class BatchRunner:
    """Runs batch jobs one at a time in a background thread, resuming unfinished ones.

    Args:
        sessions: database sessions.
        labeler: the report labeler (the service passes its routes' own: one pipeline, one lock).
        predictor: the loaded model, or None.
        storage_root: the storage folder (uploaded zips are extracted under jobs/<id>/).
        zip_limits: caps for extracting uploaded zips (built once at start-up).
        chunk_size: images per forward pass.
        read_workers: processes that decode a job's images ahead of the model
            (`batch.read_ahead`); 0: one at a time in the job's thread.
        metrics: Prometheus metrics, or None.
        file_timeout_s: give up reading one file after this long (None: no limit).
        max_pixels: images with more pixels fail from their header, undecoded (None: no limit).
        max_attempts: starts during which a file may be in flight when the process dies
            before it is recorded as failed without another try.
        dicomweb: the PACS that "dicomweb" jobs pull from (and push results to), or None.
        job_slice_s: a job that has run this long while another waits yields to it after
            its current chunk (None: each job runs to its end).
    """

    def __init__(
        self,
        *,
        sessions: sessionmaker[Session],
        labeler: Labeler,
        predictor: Predictor | None,
        storage_root: Path,
        zip_limits: ZipLimits,
        chunk_size: int = 8,
        read_workers: int = 0,
        metrics: Metrics | None = None,
        file_timeout_s: float | None = None,
        max_attempts: int = MAX_ATTEMPTS,
        max_pixels: int | None = None,
        dicomweb: DicomwebServer | None = None,
        job_slice_s: float | None = 60.0,
    ) -> None:
        self.dicomweb = dicomweb
        self.job_slice_s = job_slice_s
        self.sessions = sessions
        self.labeler = labeler
        self.predictor = predictor
        self.storage_root = Path(storage_root)
        self.zip_limits = zip_limits
        self.chunk_size = chunk_size
        self.read_workers = read_workers
        self.metrics = metrics
        self.file_timeout_s = file_timeout_s
        self.max_attempts = max_attempts
        self.max_pixels = max_pixels
        self._queue: list[str] = []
        self._cancelled: set[str] = set()
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._running: tuple[str, Source] | None = None  # the job in progress, its source

    # --- thread ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker thread and queue every unfinished job found in the database."""
        with self.sessions() as session:
            pending = crud.unfinished_job_ids(session)
        for job_id in pending:
            self.submit(job_id)
        if pending:
            log.info("resuming %d unfinished batch job(s)", len(pending))
        self._thread = threading.Thread(target=self._loop, name="cxr-batch", daemon=True)
        self._thread.start()

    def submit(self, job_id: str) -> None:
        """Queue a job (no-op if already queued)."""
        with self._cv:
            if job_id not in self._queue:
                self._queue.append(job_id)
            self._cv.notify()

    def cancel(self, job_id: str) -> None:
        """Stop a job: dropped from the queue, or stopped between two files if running.

        A running job's source is interrupted: a DICOMweb search or download in flight
        is cut at once rather than waited for. The caller deletes the job's rows; the
        runner then records nothing more for it.
        """
        with self._cv:
            self._cancelled.add(job_id)
            if job_id in self._queue:
                self._queue.remove(job_id)
            running = self._running
        if running is not None and running[0] == job_id:
            running[1].interrupt()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the worker, leaving its job resumable, and wait at most `timeout` seconds.

        The running job's source is interrupted (a download in flight is cut and its file
        stays pending); a decoder that never returns is given up after `timeout` (the
        worker thread is a daemon, so it does not keep the process alive).
        """
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
            running = self._running
        if running is not None:
            running[1].interrupt()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._cv:
                while not self._queue and not self._stop.is_set():
                    self._cv.wait(timeout=1.0)
                if self._stop.is_set():
                    return
                job_id = self._queue.pop(0)
            self.run_job(job_id, stop=self._stop)

    # --- one job --------------------------------------------------------------------

    def job_dir(self, job_id: str) -> Path:
        """Where a job keeps its upload and extracted export."""
        return self.storage_root / "jobs" / job_id

    def _input(self, job: BatchJobRow) -> JobInput:
        if job.source_kind == "dicomweb":
            if self.dicomweb is None:
                raise BatchInputError(
                    "this DICOMweb job needs CXR_DICOMWEB_URL, which is no longer set"
                )
            params = json.loads(job.source)
            since = params.get("since")
            return DicomwebInput(
                self.dicomweb.client(),
                study_uids=tuple(params.get("study") or ()),
                since=date.fromisoformat(since) if since else None,
                modalities=tuple(params.get("modality") or DEFAULT_MODALITIES),
                workdir=self.job_dir(str(job.id)) / "dicomweb",
            )
        if job.source_kind == "zip":
            export = self.job_dir(str(job.id)) / "export"
            return ZipInput(Path(job.source), export, self.zip_limits)
        return FolderInput(Path(job.source))

    def _build(
        self, job: BatchJobRow, stopping: Callable[[], bool], stack: contextlib.ExitStack
    ) -> BatchJob:
        given = self._input(job)
        push = None
        kinds = json.loads(job.source).get("push") if job.source_kind == "dicomweb" else None
        if kinds and self.predictor is not None and self.dicomweb is not None:
            # Its own client: interrupting the source's pulls must not fail the pushes
            # of the files already processed in the chunk.
            push = PushOutput(stack.enter_context(self.dicomweb.client()), tuple(kinds))
        spec = JobSpec(
            given,
            reports=Path(job.reports_path) if job.reports_path else None,
            file_timeout_s=self.file_timeout_s,
            max_pixels=self.max_pixels,
            push=push,
            read_workers=self.read_workers,
        )
        try:
            return build_job(
                spec, labeler=self.labeler, predictor=self.predictor, cancelled=stopping
            )
        except BaseException:
            if isinstance(given, DicomwebInput):
                given.client.close()
            raise

    def run_job(
        self,
        job_id: str,
        *,
        stop: threading.Event | None = None,
        after_chunk: Callable[[int], None] | None = None,
    ) -> None:
        """Run (or resume) one job to done or failed; never raises an `Exception`.

        Args:
            job_id: the job.
            stop: when set, return between files leaving the job resumable.
            after_chunk: called with the number of chunks done so far (tests use it to
                simulate a crash midway).
        """

        def stopping() -> bool:
            return (stop is not None and stop.is_set()) or job_id in self._cancelled

        try:
            self._run_job(job_id, stopping, after_chunk)
        except JobGone:
            log.info("batch job %s cancelled", job_id)
        except _Paused:
            log.info("batch job %s paused during its scan; it rescans at next start", job_id)
        except Exception as exc:  # noqa: BLE001 - a job's failure must not kill the worker
            if job_id in self._cancelled:  # a write raced the DELETE: the job is gone
                log.info("batch job %s cancelled (%s)", job_id, type(exc).__name__)
                return
            log.exception("batch job %s failed", job_id)
            try:
                with self.sessions() as session:
                    crud.set_job_state(
                        session, job_id, "failed", error=f"internal error: {type(exc).__name__}"
                    )
            except Exception:  # noqa: BLE001 - the database itself may be what failed
                log.exception("could not mark batch job %s failed", job_id)
        finally:
            if job_id in self._cancelled:
                remove_tree(self.job_dir(job_id))  # extraction may have run past the DELETE
                self._cancelled.discard(job_id)

    def _run_job(
        self,
        job_id: str,
        stopping: Callable[[], bool],
        after_chunk: Callable[[int], None] | None,
    ) -> None:
        with self.sessions() as session:
            job = crud.get_batch_job(session, job_id)
            if job is None or job.state not in crud.UNFINISHED:
                return
            crud.set_job_state(session, job_id, "running")
        with contextlib.ExitStack() as stack:
            try:
                built = self._build(job, stopping, stack)
            except (ValueError, OSError) as exc:  # bad input: no PACS, bad reports CSV
                self._fail(job_id, exc)
                return
            with self._cv:
                self._running = (job_id, built.source)
            try:
                if stopping():  # cancelled or stopped before `cancel`/`stop` saw the source
                    built.source.interrupt()
                self._run_source(job, built, stopping, after_chunk)
            finally:
                with self._cv:
                    self._running = None
                built.source.close()

    def _fail(self, job_id: str, exc: Exception) -> None:
        message = str(exc).replace(str(self.storage_root.resolve()), "<storage>")
        with self.sessions() as session:
            crud.set_job_state(session, job_id, "failed", error=message)
        log.warning("batch job %s failed: %s", job_id, message)

    def _run_source(
        self,
        job: BatchJobRow,
        built: BatchJob,
        stopping: Callable[[], bool],
        after_chunk: Callable[[int], None] | None,
    ) -> None:
        job_id = str(job.id)
        try:
            if not job.scanned:
                self._scan(job, built.source, stopping)
        except (ValueError, OSError) as exc:  # bad input, bad zip (BatchInputError), disk
            self._fail(job_id, exc)
            return
        with self.sessions() as session:
            items = crud.job_items(session, job_id)
            recorded = (
                result_line(i.path, i.state, i.result, i.error)
                for i in crud.iter_batch_items(session, job_id)
            )
            remaining = plan(items, recorded, built.processor)
            attempts = crud.in_flight_attempts(session, job_id)
        # After the library's sinks, so that the items recorded say what was pushed.
        sinks: list[Sink] = [
            *built.sinks,
            ReviewImageSink(Storage(self.storage_root)),
            DatabaseSink(self.sessions, job_id),
        ]
        if self.metrics is not None:
            sinks.append(_MetricsSink(self.metrics))
        started = time.monotonic()

        def turn_over() -> bool:  # checked between chunks: a turn taken, another waiting
            if self.job_slice_s is None or time.monotonic() - started < self.job_slice_s:
                return False
            with self._cv:
                return bool(self._queue)

        report = run_resumed(
            remaining,
            built.processor,
            sinks,
            attempts=attempts,
            max_attempts=self.max_attempts,
            chunk_size=self.chunk_size,
            should_stop=lambda: stopping() or turn_over(),
            after_chunk=after_chunk,
        )
        if report.stopped and not stopping():
            with self.sessions() as session:
                crud.set_job_state(session, job_id, "queued")
            log.info(
                "batch job %s yields to the next job after %.0f s (CXR_BATCH_JOB_SLICE_S)",
                job_id,
                time.monotonic() - started,
            )
            self.submit(job_id)  # at the end of the queue
            return
        if report.stopped:
            log.info("batch job %s paused; it resumes at next start", job_id)
            return
        self._finish(job)

    def _scan(self, job: BatchJobRow, source: Source, stopping: Callable[[], bool]) -> None:
        def halt() -> Exception:
            return JobGone(job.id) if job.id in self._cancelled else _Paused()

        def watched(items: Iterator[SourceItem]) -> Iterator[SourceItem]:
            try:
                for item in items:
                    if stopping():
                        raise halt()
                    yield item
            except (ValueError, OSError):
                if stopping():  # the search was cut by `cancel` or `stop`: not a failure
                    raise halt() from None
                raise

        with self.sessions() as session:
            crud.remove_batch_items(session, job.id)  # what an interrupted scan left
            total = crud.add_batch_items(session, job.id, watched(source.scan()))
            crud.mark_job_scanned(session, job.id, total)
        log.info("batch job %s: %d files found", job.id, total)
        job.scanned = True
        if job.source_kind == "zip":
            Path(job.source).unlink(missing_ok=True)  # extracted; the upload is no longer needed

    def _finish(self, job: BatchJobRow) -> None:
        if job.source_kind == "zip":
            # Extracted files carry patient data: keep only the results. Removed before
            # the job reads "done", so a client that sees "done" sees a clean storage.
            remove_tree(self.job_dir(str(job.id)))
        with self.sessions() as session:
            crud.set_job_state(session, job.id, "done")
        log.info("batch job %s done", job.id)


class _Paused(Exception):
    """The service is stopping during a scan: the scan is redone at the next start."""
