"""POST /v1/batches (a server folder or an uploaded zip), job status and results."""

from __future__ import annotations

import csv
import io
import json
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, NamedTuple

from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from app import crud
from app.db.models import BatchJobRow
from app.deps import AppState, SessionDep, StateDep
from app.errors import (
    BatchSourceError,
    BatchSourceNotFound,
    InvalidBodyEncoding,
    ModelNotLoaded,
    NotFound,
    ServiceError,
    UnsupportedMediaType,
    scrub_paths,
    server_folders,
    shown,
)
from app.media_types import media_type
from app.schemas import BatchCreate, BatchRead, ErrorRead
from batch.archive import check_zip
from batch.interfaces import BatchInputError
from batch.results import csv_header, csv_row, result_line

router = APIRouter(tags=["batches"])


class DicomwebNotConfigured(ServiceError):
    """A DICOMweb batch job was asked for, but no server is configured."""

    status_code = 503


class BadBatchRequest(ServiceError):
    """A batch request that cannot be understood (missing path or zip)."""

    status_code = 422


def resolve_in_roots(raw: str, roots: list[Path], *, want_dir: bool) -> Path:
    """Resolve a client-given server path, refusing anything outside the batch roots.

    Relative paths are tried under each root in turn; absolute paths must lie in one.
    Symbolic links are resolved first, so a link cannot lead out of a root.

    Raises:
        BatchSourceError: no roots configured, or the path is outside them (403).
        BatchSourceNotFound: inside the roots, but no such folder or file (404).
    """
    if not roots:
        raise BatchSourceError(
            "server-side batch paths are disabled: set CXR_BATCH_ROOTS to the folders the "
            "service may read, or upload a zip instead"
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in raw):
        raise BadBatchRequest(f"{raw!r}: a path must not contain control characters")
    real_roots = [r.resolve() for r in roots]
    candidate = Path(raw)
    tries = [candidate] if candidate.is_absolute() else [r / candidate for r in real_roots]
    inside = False
    for path in tries:
        try:
            resolved = path.resolve()
            if not any(resolved == r or r in resolved.parents for r in real_roots):
                continue
            inside = True
            if (resolved.is_dir() if want_dir else resolved.is_file()) and resolved.exists():
                return resolved
        except (OSError, ValueError) as exc:  # a name too long, a surrogate: no such path
            raise BadBatchRequest(f"{raw!r}: not a usable path ({type(exc).__name__})") from None
    if not inside:
        raise BatchSourceError(f"{raw!r} is outside the configured batch roots (CXR_BATCH_ROOTS)")
    kind = "folder" if want_dir else "file"
    raise BatchSourceNotFound(f"{raw!r}: no such {kind} inside the batch roots")


def batch_read(job: BatchJobRow, counts: dict[str, int], state: AppState) -> BatchRead:
    """The API view of a job with its progress."""
    total = job.total
    finished = counts["done"] + counts["skipped"] + counts["failed"]
    card = job.options.get("model") or {}
    return BatchRead(
        id=job.id,
        state=job.state,  # type: ignore[arg-type]
        source_kind=job.source_kind,
        total=total,
        done=counts["done"],
        skipped=counts["skipped"],
        failed=counts["failed"],
        pending=counts["pending"],
        progress=round(finished / total, 4) if total else (1.0 if job.state == "done" else 0.0),
        model=f"{card.get('name')} {card.get('version')}" if card else None,
        demo=bool(card.get("demo", False)),
        error=scrub_paths(job.error, server_folders(state.settings)),
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        results={
            "jsonl": f"/v1/batches/{job.id}/results",
            "csv": f"/v1/batches/{job.id}/results?format=csv",
        },
    )


def _client_name(filename: str | None) -> str:
    """An uploaded file's name for messages: printable, never empty."""
    cleaned = "".join(c if c.isprintable() else "?" for c in (filename or ""))[:200]
    return cleaned or "reports"


def _check_reports_csv(path: Path, name: str) -> None:
    """Refuse at submission a reports CSV the job could not read (encoding, columns)."""
    from batch.reports import load_reports_csv

    try:
        load_reports_csv(path, name=name)
    except BatchInputError as exc:
        raise BadBatchRequest(str(exc)) from None


def _save_upload(state: AppState, upload: UploadFile, suffix: str) -> Path:
    key = state.storage.put_stream(upload.file, suffix)
    return state.storage.path(key)


_OPENAPI_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": BatchCreate.model_json_schema()},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "file": {"type": "string", "format": "binary", "description": "zip"},
                        "reports": {
                            "type": "string",
                            "format": "binary",
                            "description": "optional reports CSV",
                        },
                    },
                    "required": ["file"],
                }
            },
        },
    }
}


@router.post(
    "/batches",
    status_code=202,
    response_model=BatchRead,
    openapi_extra=_OPENAPI_BODY,
    responses={
        403: {"model": ErrorRead, "description": "Path outside CXR_BATCH_ROOTS."},
        404: {"model": ErrorRead, "description": "No such folder or file inside the roots."},
        415: {"model": ErrorRead, "description": "Neither JSON nor multipart."},
        413: {"model": ErrorRead, "description": "Zip over CXR_MAX_BATCH_UPLOAD_MB."},
        422: {
            "model": ErrorRead,
            "description": "Unsafe zip (traversal, links, bomb, duplicate names, no readable "
            "file), a path with control characters, or a reports CSV that is not UTF-8 or has "
            "no key column. A zip member that cannot be extracted on its own (encrypted, a "
            "name over 255 bytes, corrupt, a file named like a folder) does not refuse the "
            "zip: the job records it as failed or skipped with its reason.",
        },
        503: {
            "model": ErrorRead,
            "description": "`dicomweb` without CXR_DICOMWEB_URL, or `push` without a model.",
        },
    },
    summary="Start a batch job on a PACS export",
)
async def create_batch(request: Request, response: Response, state: StateDep) -> BatchRead:
    """Label every file of a PACS export in the background; answers 202 with the job.

    Either JSON `{"path": ..., "reports": ...}` naming a folder inside
    CXR_BATCH_ROOTS, JSON `{"dicomweb": {"study": [...], "since": ..., "modality":
    [...], "push": ["sr", "gsps"]}}` pulling from the PACS configured in
    CXR_DICOMWEB_URL, or multipart with the export as a zip in `file` (and an
    optional reports CSV in `reports`). Reports CSVs are keyed by AccessionNumber
    or StudyInstanceUID; DICOM SR documents in the export are used too.
    """
    content_type = media_type(request.headers.get("content-type"))
    job_id = str(uuid.uuid4())
    if content_type == "application/json":
        given = await _json_source(request, state)
    elif content_type == "multipart/form-data":
        given = await _zip_source(request, state, job_id)
    else:
        raise UnsupportedMediaType(
            f"Content-Type {content_type!r}: send application/json with a `path`, "
            "or multipart/form-data with the export zip as `file`"
        )
    options: dict[str, Any] = {}
    if state.predictor is not None:
        card = state.predictor.card
        options["model"] = {k: card.get(k) for k in ("name", "version", "demo")}
        options["model"]["inference"] = state.predictor.inference

    def create() -> tuple[BatchJobRow, dict[str, int]]:
        with state.sessions() as session:
            job = crud.create_batch_job(
                session,
                job_id=job_id,
                source_kind=given.kind,
                source=str(given.source),
                reports_path=str(given.reports) if given.reports else None,
                options=options,
            )
            return job, crud.batch_counts(session, job.id)

    job, counts = await run_in_threadpool(create)
    if state.runner is not None:
        state.runner.submit(job.id)
    response.headers["Location"] = f"/v1/batches/{job.id}"
    return batch_read(job, counts, state)


class _BatchSource(NamedTuple):
    """What a batch job reads: its kind ("path", "dicomweb", "zip"), the source as the job
    records it, and the reports CSV if one was given."""

    kind: str
    source: Any
    reports: Path | None


async def _json_source(request: Request, state: AppState) -> _BatchSource:
    """A JSON body: a folder inside CXR_BATCH_ROOTS, or the studies to pull over DICOMweb."""
    settings = state.settings
    raw = await request.body()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidBodyEncoding.from_decode_error(exc) from None
    try:
        body = BatchCreate.model_validate_json(raw)
    except ValidationError as exc:
        # The body is read by hand (a zip upload shares the route), so its errors go
        # through the handler every route's validation errors take: the same `detail`
        # list, rid of the input (issue 18 item 6), with `loc` from "body" as FastAPI's.
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        ) from None
    reports = (
        resolve_in_roots(body.reports, settings.batch_roots, want_dir=False)
        if body.reports
        else None
    )
    if reports is not None and body.reports is not None:
        await run_in_threadpool(_check_reports_csv, reports, body.reports)
    if body.dicomweb is not None:
        if state.dicomweb is None:
            raise DicomwebNotConfigured(
                "DICOMweb batch jobs are disabled: set CXR_DICOMWEB_URL (and "
                "CXR_DICOMWEB_USER/CXR_DICOMWEB_PASSWORD or CXR_DICOMWEB_TOKEN)"
            )
        if body.dicomweb.push and state.predictor is None:
            raise ModelNotLoaded("`push` needs a model (CXR_MODEL): there is nothing to push")
        # The job records what to pull, never the server's credentials.
        return _BatchSource("dicomweb", body.dicomweb.model_dump_json(), reports)
    assert body.path is not None  # BatchCreate checks one of path/dicomweb is given
    source = resolve_in_roots(body.path, settings.batch_roots, want_dir=True)
    return _BatchSource("path", source, reports)


async def _zip_source(request: Request, state: AppState, job_id: str) -> _BatchSource:
    """A multipart upload: the export as a zip in `file` (checked before the job is made)
    and an optional reports CSV in `reports`, both moved into the job's folder."""
    form = await request.form(max_files=2, max_fields=10)
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise BadBatchRequest("multipart batch upload without a `file` field (the zip)")
        zip_path = await run_in_threadpool(_save_upload, state, upload, ".zip")
        try:
            await run_in_threadpool(check_zip, zip_path, state.zip_limits)
        except BatchInputError:  # an unsafe archive: 422 (app.error_handlers)
            zip_path.unlink(missing_ok=True)
            raise
        reports_upload = form.get("reports")
        reports = (
            await run_in_threadpool(_save_upload, state, reports_upload, ".csv")
            if isinstance(reports_upload, UploadFile)
            else None
        )
        if reports is not None and isinstance(reports_upload, UploadFile):
            try:
                await run_in_threadpool(
                    _check_reports_csv, reports, _client_name(reports_upload.filename)
                )
            except ServiceError:
                zip_path.unlink(missing_ok=True)
                reports.unlink(missing_ok=True)
                raise
    finally:
        await form.close()
    # The job owns its copy of the zip (deleted once extracted).
    job_dir = state.storage.job_dir(job_id)
    job_dir.mkdir(parents=True)
    source = job_dir / "upload.zip"
    shutil.move(zip_path, source)
    if reports is not None:
        # Report texts are patient data: kept with the job, so they go with its folder
        # once the job is done (or deleted), as the extracted export does.
        shutil.move(reports, job_dir / "reports.csv")
        reports = job_dir / "reports.csv"
    return _BatchSource("zip", source, reports)


@router.get("/batches", response_model=list[BatchRead], summary="Recent batch jobs")
def list_batches(
    session: SessionDep,
    state: StateDep,
    limit: int = Query(50, ge=1, le=500, description="How many, newest first."),
) -> list[BatchRead]:
    """The most recent batch jobs with their progress, newest first."""
    return [
        batch_read(job, crud.batch_counts(session, job.id), state)
        for job in crud.list_batch_jobs(session, limit)
    ]


@router.delete(
    "/batches/{job_id}",
    status_code=204,
    responses={404: {"model": ErrorRead}},
    summary="Delete a batch job and its results, cancelling it if it runs",
)
def delete_batch(job_id: str, session: SessionDep, state: StateDep) -> Response:
    """Remove a job, its per-file results and any files it kept.

    A queued or running job is cancelled first: the runner stops between two files and
    records nothing more for it.
    """
    job = crud.get_batch_job(session, job_id)
    if job is None:
        raise NotFound(f"no batch job {shown(job_id)}")
    if job.state in crud.UNFINISHED and state.runner is not None:
        state.runner.cancel(job_id)
    unreferenced = crud.delete_batch_job(session, job)
    state.storage.remove_job_dir(job_id)
    for key in unreferenced:  # the review images it kept, unless another row refers to them
        state.storage.delete(key)
    return Response(status_code=204)


@router.get(
    "/batches/{job_id}",
    response_model=BatchRead,
    responses={404: {"model": ErrorRead}},
    summary="Batch job state and progress",
)
def get_batch(job_id: str, session: SessionDep, state: StateDep) -> BatchRead:
    """State (queued, running, done, failed) and counts of done/skipped/failed/pending files."""
    job = crud.get_batch_job(session, job_id)
    if job is None:
        raise NotFound(f"no batch job {shown(job_id)}")
    return batch_read(job, crud.batch_counts(session, job.id), state)


@router.get(
    "/batches/{job_id}/results",
    responses={
        200: {
            "content": {"application/x-ndjson": {}, "text/csv": {}},
            "description": "One line per file (done, skipped or failed).",
        },
        404: {"model": ErrorRead},
    },
    summary="Batch results, streamed as JSON Lines or CSV",
)
def get_batch_results(
    job_id: str,
    state: StateDep,
    format: Literal["jsonl", "csv"] = Query("jsonl", description="jsonl (default) or csv"),
) -> StreamingResponse:
    """Results of the files processed so far (all files once the job is done).

    JSON Lines: one object per file with `path`, `state`, `kind`, UIDs, `prediction`
    (probabilities, positive, boxes), `report` (mined labels) and `error`/`reason`.
    CSV: the same flattened, with `prob_<label>` and `report_<label>` columns.
    """
    with state.sessions() as session:
        job = crud.get_batch_job(session, job_id)
        if job is None:
            raise NotFound(f"no batch job {shown(job_id)}")
    from labeler.schema import CHESTXRAY14

    labels = [label.value for label in CHESTXRAY14]

    def lines() -> Iterator[dict[str, Any]]:
        folders = server_folders(state.settings)  # no server paths in errors (issue 7)
        with state.sessions() as session:
            for item in crud.iter_batch_items(session, job_id):
                yield result_line(
                    item.path, item.state, item.result, scrub_paths(item.error, folders)
                )

    def jsonl() -> Iterator[bytes]:
        for line in lines():
            yield (json.dumps(line, separators=(",", ":")) + "\n").encode("utf-8")

    def csv_rows() -> Iterator[bytes]:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(csv_header(labels))
        for i, line in enumerate(lines()):
            writer.writerow(csv_row(line, labels))
            if i % 200 == 0:
                yield buffer.getvalue().encode("utf-8")
                buffer.seek(0)
                buffer.truncate()
        yield buffer.getvalue().encode("utf-8")

    if format == "csv":
        return StreamingResponse(
            csv_rows(),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="batch-{job_id}.csv"'},
        )
    return StreamingResponse(jsonl(), media_type="application/x-ndjson")
