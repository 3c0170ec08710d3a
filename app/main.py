"""The FastAPI application factory.

`create_app(settings)` builds an app; nothing happens at import. Start-up (the
lifespan) applies database migrations, loads the report labeler and, when
configured, the model, then resumes unfinished batch jobs.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.deps import AppState, require_api_key
from app.errors import (
    InvalidBodyEncoding,
    PayloadTooLarge,
    ServiceError,
    public_validation_errors,
    scrub_paths,
    server_folders,
)
from app.http_guards import (
    ApiKeyMiddleware,
    HostOriginMiddleware,
    MethodsMiddleware,
    SecurityHeadersMiddleware,
    docs_csp,
)
from app.media_types import is_json, media_type
from app.route_table import RouteTable, app_path
from app.schemas import DEMO_NOTICE
from app.security import ApiKeys
from app.service_metrics import Metrics, MetricsMiddleware
from app.settings import Settings, get_settings
from batch.pacs.dicomweb import DicomwebLimits, DicomwebServer

if TYPE_CHECKING:  # models.predict imports torch, which the service loads only with a model
    from models.predict import Predictor

__all__ = ["create_app"]

log = logging.getLogger("app")


def _error(status: int, detail: Any, error: str, request: Request | None = None) -> JSONResponse:
    if request is not None:
        # Messages may quote files the service wrote itself; the client must not learn
        # where the server keeps its storage (issue 7 item 9).
        state: AppState | None = getattr(request.app.state, "cxr", None)
        if state is not None:
            detail = scrub_paths(detail, server_folders(state.settings))
    return JSONResponse({"detail": detail, "error": error}, status_code=status)


class UploadLimitMiddleware:
    """Answer 413 for bodies over the limit: early from Content-Length, else while reading.

    File uploads have the large limits: an image to POST /v1/images/predict
    (CXR_MAX_UPLOAD_MB) and a multipart zip to POST /v1/batches (CXR_MAX_BATCH_UPLOAD_MB).
    Every other body, JSON above all, has CXR_MAX_JSON_MB (issue 18 item 6: a 1 GiB JSON
    batch request was read, parsed and echoed back).
    """

    # The operations that take files, and the content types they take them as.
    _FILES = {
        "/v1/images/predict": ("upload", None),  # raw (any type but JSON) or multipart
        "/v1/batches": ("batch", "multipart/form-data"),
        "/v1/studies/ask": ("upload", "multipart/form-data"),  # an image with the questions
    }

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.limits = {
            "upload": (int(settings.max_upload_mb * 2**20), "CXR_MAX_UPLOAD_MB"),
            "batch": (int(settings.max_batch_upload_mb * 2**20), "CXR_MAX_BATCH_UPLOAD_MB"),
            "json": (int(settings.max_json_mb * 2**20), "CXR_MAX_JSON_MB"),
        }

    def _limit(self, scope: Scope) -> tuple[int, str]:
        kind, wanted = self._FILES.get(app_path(scope), ("json", None))
        content_type = media_type(dict(scope.get("headers") or []).get(b"content-type"))
        if is_json(content_type) or (wanted is not None and content_type != wanted):
            kind = "json"
        return self.limits[kind]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, setting = self._limit(scope)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            response = _error(
                413,
                f"request body is {int(length) / 2**20:.1f} MiB; the limit is "
                f"{limit / 2**20:g} MiB ({setting})",
                "PayloadTooLarge",
            )
            await response(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # An HTTPException is re-raised by FastAPI's body parsing (not turned
                    # into a 400), so it reaches the handlers as a 413.
                    raise PayloadTooLarge(
                        f"request body exceeds the limit of {limit / 2**20:g} MiB ({setting})"
                    )
            return message

        await self.app(scope, limited_receive, send)


class DemoHeaderMiddleware:
    """Mark every response `X-CXR-Demo-Model: true` while a demo checkpoint is loaded."""

    def __init__(self, app: ASGIApp, fastapi_app: FastAPI) -> None:
        self.app = app
        self.fastapi_app = fastapi_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state: AppState | None = getattr(self.fastapi_app.state, "cxr", None)
        demo = (
            state is not None
            and state.predictor is not None
            and bool(state.predictor.card.get("demo", False))
        )
        if scope["type"] != "http" or not demo:
            await self.app(scope, receive, send)
            return

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-cxr-demo-model", b"true")]
            await send(message)

        await self.app(scope, receive, send_wrapper)


def _register_exception_handlers(app: FastAPI) -> None:
    from batch.interfaces import BatchInputError
    from labeler import LabelerError
    from labeler.errors import ReportTooLongError
    from models.errors import (
        ImageError,
        ImageTooLargeError,
        UnsupportedImageError,
        UnsupportedTransferSyntax,
    )

    async def image_error(request: Request, exc: Exception) -> JSONResponse:
        # 413: larger than CXR_MAX_PIXELS or the per-side limit (refused before decoding);
        # 415: we cannot handle this kind of file; 422: it claims to be DICOM but is
        # corrupt, has no pixels, or is out of range.
        if isinstance(exc, ImageTooLargeError):
            status = 413
        elif isinstance(exc, UnsupportedImageError | UnsupportedTransferSyntax):
            status = 415
        else:
            status = 422
        return _error(status, str(exc), type(exc).__name__, request)

    async def labeler_error(request: Request, exc: Exception) -> JSONResponse:
        detail = str(exc)
        if isinstance(exc, ReportTooLongError):
            detail += " (here: CXR_MAX_REPORT_CHARS)"  # the limit's name where it is set
        return _error(422, detail, type(exc).__name__, request)

    async def batch_input_error(request: Request, exc: Exception) -> JSONResponse:
        # An unsafe zip, an unreadable reports CSV: the batch library's own errors.
        return _error(422, str(exc), type(exc).__name__, request)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        if isinstance(exc.__cause__, UnicodeDecodeError):
            # FastAPI's JSON body parsing says only "There was an error parsing the body".
            exc = InvalidBodyEncoding.from_decode_error(exc.__cause__)
        name = (
            type(exc).__name__
            if isinstance(exc, ServiceError)
            else HTTPStatus(exc.status_code).phrase.replace(" ", "").replace("-", "")
        )
        response = _error(exc.status_code, exc.detail, name, request)
        if exc.headers:
            response.headers.update(exc.headers)
        return response

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = exc.errors()
        if errors and all(e.get("type") == "json_invalid" for e in errors):
            # A syntax error is a malformed body (400), as the ask route's own parsing says;
            # 422 is for JSON that parses but does not fit the schema.
            loc = errors[0].get("loc", ())
            reason = str((errors[0].get("ctx") or {}).get("error", "malformed"))[:200]
            at = f" at character {loc[-1]}" if loc and isinstance(loc[-1], int) else ""
            return _error(
                400, f"request body is not valid JSON: {reason}{at}", "MalformedBody", request
            )
        # Never the input: not `input`, nor a message or key quoting it (issue 18 item 6).
        return _error(422, public_validation_errors(errors), "RequestValidationError", request)

    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        # Logged with its traceback for the operator; the client gets JSON, not a stack.
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return _error(500, "internal error; see the service log", "InternalServerError")

    app.add_exception_handler(Exception, internal_error)
    app.add_exception_handler(ImageError, image_error)
    app.add_exception_handler(LabelerError, labeler_error)
    app.add_exception_handler(BatchInputError, batch_input_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)


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
    from labeler.config import LabelerConfig

    state.labeler = load_report_labeler(
        LabelerConfig(max_chars=settings.max_report_chars, label_set=settings.label_set)
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

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = await run_in_threadpool(_startup, settings, metrics, predictor)
        app.state.cxr = state
        if state.predictor is not None:
            from app.inference import InferenceQueue

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
                metrics=metrics,
                decoders=decoders,
            )
            await state.inference.start()
        if settings.run_batch_jobs:
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
            )
            await run_in_threadpool(state.runner.start)
        try:
            yield
        finally:
            if state.runner is not None:
                await run_in_threadpool(state.runner.stop)
            if state.inference is not None:
                await state.inference.stop()
            state.engine.dispose()

    app = FastAPI(
        title="cxr",
        version="0.1.0",
        summary="Chest X-ray report labeler and weakly-supervised classifier (ChestX-ray14).",
        description=(
            "Label radiology reports with the 14 ChestX-ray14 findings, classify and localize "
            "findings on chest radiographs (DICOM, PNG, JPEG), and batch-label PACS exports. "
            "Research use only: not a medical device. Send `X-API-Key` when keys are configured."
        ),
        lifespan=lifespan,
        docs_url=None,  # served from local assets below, not a CDN
        redoc_url=None,
    )
    app.state.metrics = metrics
    _register_exception_handlers(app)
    _add_docs(app)

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

    app.openapi = lambda: _openapi_with_errors(app)  # type: ignore[method-assign]
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
    return app


DOCS_ASSETS = "/docs/assets"


def _add_docs(app: FastAPI) -> None:
    """Swagger UI at /docs and ReDoc at /redoc from files shipped with the service.

    FastAPI's defaults load them from a CDN, and a hospital network often has no
    internet access. The files come from the pinned `fastapi-offline` package
    (Swagger UI 5, Apache-2.0; ReDoc, MIT).
    """
    from importlib.resources import files

    from fastapi.openapi.docs import (
        get_redoc_html,
        get_swagger_ui_html,
        get_swagger_ui_oauth2_redirect_html,
    )
    from fastapi.responses import HTMLResponse
    from fastapi.staticfiles import StaticFiles

    assets = Path(str(files("fastapi_offline") / "static"))
    app.mount(DOCS_ASSETS, StaticFiles(directory=assets), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _with_csp(
            get_swagger_ui_html(
                openapi_url=f"{root}{app.openapi_url}",
                title=f"{app.title} - Swagger UI",
                oauth2_redirect_url=f"{root}/docs/oauth2-redirect",
                swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js",
                swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
                swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
            )
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return _with_csp(get_swagger_ui_oauth2_redirect_html())

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _with_csp(
            get_redoc_html(
                openapi_url=f"{root}{app.openapi_url}",
                title=f"{app.title} - ReDoc",
                redoc_js_url=f"{root}{DOCS_ASSETS}/redoc.standalone.js",
                redoc_favicon_url=f"{root}{DOCS_ASSETS}/favicon.png",
                with_google_fonts=False,
            )
        )

    def _with_csp(page: HTMLResponse) -> HTMLResponse:
        # Same origin as the page that keeps the API key: no framing, only its own scripts.
        page.headers["Content-Security-Policy"] = docs_csp(bytes(page.body).decode("utf-8"))
        return page


# Error answers every operation may give besides its own (issue 7 item 9: 400 and 415
# were returned but undocumented). Each is the ErrorRead JSON body.
_KEY_ERRORS = {
    "401": "Missing or empty X-API-Key header (when API keys are configured).",
    "403": "X-API-Key is not one of the configured keys, or a cross-site request (its Origin "
    "or Sec-Fetch-Site shows a page of another site sent it).",
}
_BODY_ERRORS = {
    "400": "Malformed body: invalid JSON, invalid UTF-8 (the message names the byte "
    "offset) or broken multipart data.",
    "413": "Request body over CXR_MAX_JSON_MB (JSON), CXR_MAX_UPLOAD_MB (an image) or "
    "CXR_MAX_BATCH_UPLOAD_MB (a batch zip).",
    "415": "A Content-Type (or file type) this operation does not accept.",
    "422": "The body is well-formed but invalid; `detail` says which field and why.",
}


def _openapi_with_errors(app: FastAPI) -> dict[str, Any]:
    """The generated schema plus the error responses the middleware and handlers give."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    from fastapi.openapi.utils import get_openapi

    from app.schemas import ErrorRead

    schema = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        description=app.description,
        routes=app.routes,
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    _hoist_defs(schema, components)
    components.setdefault(
        "ErrorRead", ErrorRead.model_json_schema(ref_template="#/components/schemas/{model}")
    )
    error_body = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorRead"}}}
    for path, item in schema.get("paths", {}).items():
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            extra = dict(_KEY_ERRORS) if path.startswith("/v1/") else {}
            if "requestBody" in operation:
                extra.update(_BODY_ERRORS)
            responses = operation.setdefault("responses", {})
            for code, description in extra.items():
                responses.setdefault(code, {"description": description, "content": error_body})
    app.openapi_schema = schema
    return schema


def _hoist_defs(node: Any, components: dict[str, Any]) -> None:
    """Move pydantic's nested `$defs` into components and point their `$ref`s there.

    A model schema given as `openapi_extra` keeps `#/$defs/X` references, which resolve
    against the document root and so nowhere (issue 18 item 17).
    """
    if isinstance(node, dict):
        for name, definition in node.pop("$defs", {}).items():
            _hoist_defs(definition, components)
            components.setdefault(name, definition)
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            node["$ref"] = "#/components/schemas/" + ref.removeprefix("#/$defs/")
        for value in list(node.values()):  # components may grow meanwhile
            _hoist_defs(value, components)
    elif isinstance(node, list):
        for item in node:
            _hoist_defs(item, components)
