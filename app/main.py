"""The FastAPI application factory.

`create_app(settings)` builds an app; nothing happens at import. Start-up (the
lifespan) applies database migrations, loads the report labeler and, when
configured, the model, then resumes unfinished batch jobs. The exception handlers
live in `app/error_handlers.py`, the API documentation in `app/openapi_docs.py` and
the middlewares in `app/http_guards.py`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import Depends, FastAPI
from starlette.concurrency import run_in_threadpool

from app.deps import AppState, require_api_key
from app.error_handlers import register_exception_handlers
from app.http_guards import (
    ApiKeyMiddleware,
    DemoHeaderMiddleware,
    HostOriginMiddleware,
    MethodsMiddleware,
    SecurityHeadersMiddleware,
    UploadLimitMiddleware,
)
from app.openapi_docs import add_docs, openapi_with_errors
from app.route_table import RouteTable
from app.schemas import DEMO_NOTICE
from app.security import ApiKeys
from app.service_metrics import Metrics, MetricsMiddleware
from app.settings import Settings, get_settings
from batch.pacs.dicomweb import DicomwebLimits, DicomwebServer

if TYPE_CHECKING:  # models.predict imports torch, which the service loads only with a model
    from models.predict import Predictor

__all__ = ["create_app"]

log = logging.getLogger("app")


def _dicomweb_server(settings: Settings) -> DicomwebServer | None:
    """The PACS that DICOMweb batch jobs pull from (CXR_DICOMWEB_URL), or None."""
    if not settings.dicomweb_url:
        return None
    return DicomwebServer(
        settings.dicomweb_url,
        user=settings.dicomweb_user,
        password=settings.dicomweb_password,
        token=None if settings.dicomweb_user else settings.dicomweb_token,
        log_uids=settings.log_patient_data,
        timeout=settings.dicomweb_timeout_s,
        limits=DicomwebLimits(
            max_instance_bytes=int(settings.dicomweb_max_instance_mb * 2**20),
            max_json_bytes=int(settings.dicomweb_max_json_mb * 2**20),
            max_results=settings.dicomweb_max_results,
        ),
    )


def _startup(settings: Settings, metrics: Metrics, predictor: Predictor | None) -> AppState:
    """Blocking start-up work (run in a thread): database, labeler, model."""
    from app.db.migrate import upgrade
    from app.db.session import build_engine, build_sessionmaker
    from app.jobs import zip_limits
    from app.report_labeler import load_report_labeler
    from app.storage import Storage

    settings.storage_dir.mkdir(parents=True, exist_ok=True)
    url = settings.resolved_database_url
    engine = build_engine(url)
    upgrade(url, engine=engine)
    state = AppState(
        settings=settings,
        engine=engine,
        sessions=build_sessionmaker(engine),
        storage=Storage(settings.storage_dir),
        metrics=metrics,
        api_keys=ApiKeys(settings.api_keys),
        zip_limits=zip_limits(settings),
        dicomweb=_dicomweb_server(settings),
    )
    from app.blas import labeler_blas
    from labeler.config import LabelerConfig

    state.labeler = load_report_labeler(
        LabelerConfig(
            max_chars=settings.max_report_chars,
            label_set=settings.label_set,
            blas=labeler_blas(),  # NumPy's OpenBLAS where it runs one thread (app.blas)
        )
    )
    state.labeler.max_waiting = settings.max_waiting_label_requests
    if predictor is None and settings.model is not None:
        from app.inference import load_model

        # A configured but broken checkpoint stops start-up: serving without the
        # model the operator asked for would fail later, and less clearly.
        predictor = load_model(settings.model, settings.device, settings.precision)
    if predictor is not None:
        state.predictor = predictor
        card = predictor.card
        metrics.model_loaded.set(1)
        log.info(
            "model %s %s loaded from %s (%d labels, on %s in %s)",
            card.get("name"),
            card.get("version"),
            settings.model,
            len(card.get("labels", [])),
            predictor.device,
            predictor.precision,
        )
        if card.get("demo"):
            log.warning("the loaded model is a DEMO checkpoint: %s", DEMO_NOTICE)
    else:
        metrics.model_loaded.set(0)
        log.warning("no model configured (CXR_MODEL): image prediction answers 503")
    if state.api_keys.enabled:
        log.info(
            "API keys required on /v1 (X-API-Key); %d key(s) configured", len(settings.api_keys)
        )
    else:
        log.warning(
            "no API key configured (CXR_API_KEYS): the API is open, so it must listen on "
            "localhost only"
        )
    return state


def create_app(settings: Settings | None = None, *, predictor: Predictor | None = None) -> FastAPI:
    """Build the service.

    Args:
        settings: configuration; default `get_settings()` (from `CXR_*` variables).
        predictor: an already loaded `models.predict.Predictor` (`cxr serve` loads the
            checkpoint before starting, to report a bad one in one line); default: load
            `settings.model` at start-up, if set.

    Returns:
        The FastAPI app. Its lifespan migrates the database, loads the labeler and
        model, and starts the batch runner; the state is on `app.state.cxr`.
    """
    settings = settings if settings is not None else get_settings()
    metrics = Metrics()
    app = FastAPI(
        title="cxr",
        version="0.1.0",
        summary="Chest X-ray report labeler and weakly-supervised classifier (ChestX-ray14).",
        description=(
            "Label radiology reports with the 14 ChestX-ray14 findings, classify and localize "
            "findings on chest radiographs (DICOM, PNG, JPEG), and batch-label PACS exports. "
            "Research use only: not a medical device. Send `X-API-Key` when keys are configured."
        ),
        lifespan=_lifespan(settings, metrics, predictor),
        docs_url=None,  # served from local assets (app/openapi_docs.py), not a CDN
        redoc_url=None,
    )
    app.state.metrics = metrics
    register_exception_handlers(app)
    add_docs(app)
    _include_routers(app)
    app.openapi = lambda: openapi_with_errors(app)  # type: ignore[method-assign]
    _add_middlewares(app, settings, metrics)
    return app


def _lifespan(
    settings: Settings, metrics: Metrics, predictor: Predictor | None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: start-up builds `app.state.cxr`, shut-down stops what it started."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = await run_in_threadpool(_startup, settings, metrics, predictor)
        app.state.cxr = state
        if state.predictor is not None:
            await _start_inference(state, settings, metrics)
        if settings.run_batch_jobs:
            await _start_batch_runner(state, settings, metrics)
        try:
            yield
        finally:
            if state.runner is not None:
                await run_in_threadpool(state.runner.stop)
            if state.inference is not None:
                await state.inference.stop()
            state.engine.dispose()

    return lifespan


async def _start_inference(state: AppState, settings: Settings, metrics: Metrics) -> None:
    """Start the queue that batches image predictions for the loaded model."""
    from app.inference import InferenceQueue

    assert state.predictor is not None  # the lifespan starts it only with a model
    decoders = None
    if settings.decode_in_workers:
        from models.upload_decoding import UploadDecoders

        decoders = UploadDecoders(
            settings.max_concurrent_decodes, timeout_s=settings.decode_timeout_s
        )
    state.inference = InferenceQueue(
        state.predictor,
        max_batch=settings.inference_max_batch,
        max_wait_s=settings.inference_max_wait_ms / 1000.0,
        max_decodes=settings.max_concurrent_decodes,
        max_waiting=settings.max_waiting_decodes,
        max_per_client=settings.max_decodes_per_client,
        metrics=metrics,
        decoders=decoders,
    )
    await state.inference.start()


async def _start_batch_runner(state: AppState, settings: Settings, metrics: Metrics) -> None:
    """Start the runner of batch jobs, which resumes the unfinished ones."""
    from app.jobs import BatchRunner

    assert state.labeler is not None  # set by _startup
    state.runner = BatchRunner(
        sessions=state.sessions,
        labeler=state.labeler,
        predictor=state.predictor,
        storage_root=state.storage.root,
        zip_limits=state.zip_limits,
        chunk_size=settings.batch_chunk_size,
        read_workers=settings.resolved_batch_workers,
        file_timeout_s=settings.batch_file_timeout_s,
        metrics=metrics,
        max_pixels=settings.max_pixels,
        dicomweb=state.dicomweb,
        job_slice_s=settings.batch_job_slice_s,
    )
    await run_in_threadpool(state.runner.start)


def _include_routers(app: FastAPI) -> None:
    """Health and the web page at the root; every resource under /v1, behind the API key."""
    from app.routes import (
        batches,
        discrepancies,
        health,
        images,
        predictions,
        reports,
        studies,
        web,
    )

    secured = [Depends(require_api_key)]
    app.include_router(health.router)
    app.include_router(web.router)  # the page at `/`; its data calls /v1 with the key
    for module in (reports, images, predictions, batches, studies, discrepancies):
        app.include_router(module.router, prefix="/v1", dependencies=secured)


def _add_middlewares(app: FastAPI, settings: Settings, metrics: Metrics) -> None:
    """The middlewares around the routes (docs/security/http.md lists their order)."""
    # The last added runs first: metrics see every answer, then the headers are set on
    # it, then Host/Origin, the key and the methods are checked before the body is read.
    routes = RouteTable(app)
    app.add_middleware(UploadLimitMiddleware, settings=settings)
    app.add_middleware(MethodsMiddleware, routes=routes)
    app.add_middleware(ApiKeyMiddleware, keys=ApiKeys(settings.api_keys))
    app.add_middleware(HostOriginMiddleware, settings=settings)
    app.add_middleware(DemoHeaderMiddleware, fastapi_app=app)
    app.add_middleware(SecurityHeadersMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=metrics, routes=routes)
    from app.server import BodyTimeoutMiddleware

    app.add_middleware(  # outermost: it bounds every read of the body
        BodyTimeoutMiddleware,
        idle_timeout_s=settings.body_timeout_s,
        min_rate=settings.body_min_rate,
    )
