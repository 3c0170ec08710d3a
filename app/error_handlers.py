"""The exception handlers: library and HTTP errors as the JSON error answers.

Each library's base error is mapped to a status once, here (STYLE.md "Errors at the
boundaries"): `ImageError` to 413/415/422, `LabelerError` and `BatchInputError` to 422.
HTTP errors, validation errors and anything unexpected get the same `{detail, error}` body,
with the server's own folders scrubbed from the messages.
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.errors import (
    InvalidBodyEncoding,
    ServiceError,
    public_validation_errors,
    scrub_paths,
    server_folders,
)

if TYPE_CHECKING:
    from app.deps import AppState

__all__ = ["error_response", "register_exception_handlers"]

log = logging.getLogger("app")


def error_response(
    status: int, detail: Any, error: str, request: Request | None = None
) -> JSONResponse:
    """The JSON error answer `{detail, error}`, without the server's folders when a request
    (and so the app's state) is given."""
    if request is not None:
        # Messages may quote files the service wrote itself; the client must not learn
        # where the server keeps its storage (issue 7 item 9).
        state: AppState | None = getattr(request.app.state, "cxr", None)
        if state is not None:
            detail = scrub_paths(detail, server_folders(state.settings))
    return JSONResponse({"detail": detail, "error": error}, status_code=status)


def register_exception_handlers(app: FastAPI) -> None:
    """Map the libraries' errors, HTTP and validation errors, and any other exception to
    JSON error answers on `app`."""
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
        return error_response(status, str(exc), type(exc).__name__, request)

    async def labeler_error(request: Request, exc: Exception) -> JSONResponse:
        detail = str(exc)
        if isinstance(exc, ReportTooLongError):
            detail += " (here: CXR_MAX_REPORT_CHARS)"  # the limit's name where it is set
        return error_response(422, detail, type(exc).__name__, request)

    async def batch_input_error(request: Request, exc: Exception) -> JSONResponse:
        # An unsafe zip, an unreadable reports CSV: the batch library's own errors.
        return error_response(422, str(exc), type(exc).__name__, request)

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
        response = error_response(exc.status_code, exc.detail, name, request)
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
            return error_response(
                400, f"request body is not valid JSON: {reason}{at}", "MalformedBody", request
            )
        # Never the input: not `input`, nor a message or key quoting it (issue 18 item 6).
        return error_response(
            422, public_validation_errors(errors), "RequestValidationError", request
        )

    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        # Logged with its traceback for the operator; the client gets JSON, not a stack.
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(500, "internal error; see the service log", "InternalServerError")

    app.add_exception_handler(Exception, internal_error)
    app.add_exception_handler(ImageError, image_error)
    app.add_exception_handler(LabelerError, labeler_error)
    app.add_exception_handler(BatchInputError, batch_input_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
