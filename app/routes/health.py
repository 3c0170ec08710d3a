"""Liveness, readiness and Prometheus metrics (no API key: for orchestrators and scrapers)."""

from __future__ import annotations

import anyio
from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from app import crud
from app.deps import StateDep
from app.schemas import HealthRead, ReadyRead

router = APIRouter(tags=["health"])

# The probes run on the event loop, and the database check on a thread of its own: a
# threadpool busy with requests must not make the orchestrator restart a working service.
_PROBE_THREADS = anyio.CapacityLimiter(1)


@router.get("/healthz", response_model=HealthRead, summary="Process alive")
async def healthz() -> HealthRead:
    """Answers 200 as long as the process serves requests."""
    return HealthRead()


@router.get(
    "/readyz",
    response_model=ReadyRead,
    responses={503: {"model": ReadyRead, "description": "Not ready."}},
    summary="Ready to serve",
)
async def readyz(state: StateDep, response: Response) -> ReadyRead:
    """Database reachable, labeler loaded, model loaded or explicitly absent (no CXR_MODEL)."""

    def ping() -> None:
        with state.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    database = True
    detail = None
    try:
        await anyio.to_thread.run_sync(ping, limiter=_PROBE_THREADS)
    except Exception as exc:  # noqa: BLE001 - any failure means not ready
        database = False
        detail = f"database unreachable: {type(exc).__name__}"
    if state.predictor is not None:
        model = "loaded"
    elif state.settings.model is None:
        model = "absent"
    else:
        model = "failed"
    card = state.predictor.card if state.predictor is not None else {}
    ready = database and state.labeler is not None and model != "failed"
    if not ready:
        response.status_code = 503
    return ReadyRead(
        ready=ready,
        database=database,
        labeler=state.labeler is not None,
        model=model,  # type: ignore[arg-type]
        model_name=f"{card.get('name')} {card.get('version')}" if card else None,
        demo=bool(card.get("demo", False)),
        detail=detail,
    )


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(state: StateDep) -> Response:
    """Requests, latencies, predictions, labeled reports, batch jobs by state."""
    m = state.metrics
    try:
        with state.sessions() as session:
            counts = crud.job_counts_by_state(session)
        for job_state in ("queued", "running", "done", "failed"):
            m.batch_jobs.labels(job_state).set(counts.get(job_state, 0))
    except Exception:  # noqa: BLE001, S110 - metrics must not fail because the database does
        pass
    return Response(generate_latest(m.registry), media_type=CONTENT_TYPE_LATEST)
