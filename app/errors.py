"""HTTP-facing errors of the service; library errors (ImageError, LabelerError) map in main."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException

if TYPE_CHECKING:
    from app.settings import Settings

__all__ = [
    "BadCursor",
    "BatchSourceError",
    "BatchSourceNotFound",
    "ClientGone",
    "DecodeQueueFull",
    "InvalidBodyEncoding",
    "ModelNotLoaded",
    "NotFound",
    "PayloadTooLarge",
    "ServiceError",
    "UnsupportedMediaType",
    "public_validation_errors",
    "scrub_paths",
    "server_folders",
]

NO_MODEL_HELP = (
    "no image model is loaded, so image prediction is unavailable (report labeling works). "
    "Point the service at a checkpoint with CXR_MODEL=/path/model.pt or `cxr serve --model "
    "/path/model.pt` (train one with `cxr train`), or try the service with a demo model "
    "trained on synthetic phantoms: `cxr serve --demo`."
)


class ServiceError(HTTPException):
    """Base of the service's own errors; the class name is reported as `error`."""

    status_code = 400

    def __init__(self, detail: str) -> None:
        super().__init__(status_code=type(self).status_code, detail=detail)


class NotFound(ServiceError):
    """No such prediction, heatmap or batch job."""

    status_code = 404


class ModelNotLoaded(ServiceError):
    """Image prediction asked of a service started without a checkpoint."""

    status_code = 503

    def __init__(self, detail: str = NO_MODEL_HELP) -> None:
        super().__init__(detail)


class LabelerBusy(ServiceError):
    """Too many report requests are already waiting for the (serialized) labeler."""

    status_code = 503

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.headers = {"Retry-After": "1"}


class DecodeQueueFull(ServiceError):
    """Too many uploads wait for a decode slot, in all or from this client."""

    status_code = 503

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.headers = {"Retry-After": "5"}


class ClientGone(ServiceError):
    """The client closed its connection while its upload waited for a decode slot; the
    upload is dropped undecoded. 499 as nginx logs it: nobody reads the answer."""

    status_code = 499


class PayloadTooLarge(ServiceError):
    """The request body exceeds the configured limit."""

    status_code = 413


class UnsupportedMediaType(ServiceError):
    """The request's content type is not one the endpoint accepts."""

    status_code = 415


class BatchSourceError(ServiceError):
    """A batch job's server path is outside CXR_BATCH_ROOTS, or server paths are disabled."""

    status_code = 403


class BatchSourceNotFound(BatchSourceError):
    """A batch job's server path lies inside CXR_BATCH_ROOTS but does not exist.

    Only paths inside the roots get 404; outside them the answer is 403 whether the
    path exists or not, so nothing is revealed about the rest of the server.
    """

    status_code = 404


class EmptyUpload(ServiceError):
    """The request carried no file, or an empty one."""

    status_code = 422


class BadCursor(ServiceError):
    """A paging cursor from another sort or order, or not a cursor at all."""

    status_code = 400


class MalformedBody(ServiceError):
    """A request body that does not parse as JSON (syntax, or nested too deeply)."""

    status_code = 400

    @classmethod
    def from_json_error(cls, exc: ValueError | RecursionError) -> MalformedBody:
        """The error for what `json.loads` raised on the whole body (never its text)."""
        if isinstance(exc, RecursionError):
            return cls("request body is not valid JSON: nested too deeply")
        where = getattr(exc, "pos", None)
        reason = getattr(exc, "msg", "malformed")
        return cls(
            f"request body is not valid JSON: {reason}"
            + (f" at character {where}" if isinstance(where, int) else "")
        )


class InvalidBodyEncoding(ServiceError):
    """A request body that is not valid UTF-8; the message names the first bad byte."""

    status_code = 400

    @classmethod
    def from_decode_error(cls, exc: UnicodeDecodeError) -> InvalidBodyEncoding:
        """The error for `exc`, raised while decoding the whole request body."""
        bad = bytes(exc.object[exc.start : min(exc.end, exc.start + 4)])
        return cls(
            f"request body is not valid {exc.encoding.upper()}: byte offset {exc.start} "
            f"(0x{bad.hex()}): {exc.reason}. Send the JSON body encoded as UTF-8"
        )


def shown(value: str, limit: int = 80) -> str:
    """`value` quoted for an error message, cut to `limit` characters: an id or name the
    client sent comes back recognisable, never whole (a 60 KB id made a 60 KB 404)."""
    return repr(value if len(value) <= limit else value[:limit] + "...")


_MAX_MSG = 200
# Field names and pydantic's union tags (`function-after[_plain_path(), str]`).
_LOC_PART = re.compile(r"[A-Za-z0-9_.\-\[\](), ]{1,64}")


def public_validation_errors(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Validation errors as `{loc, msg, type}`, without anything the client sent.

    `input` and `ctx` are dropped; a message quoting the input has it replaced by
    `<input>` and is cut to 200 characters; an unknown key (`extra_forbidden`), or any
    `loc` part that does not look like a field name, is shown as `<key>` (issue 18 item
    6: a 1 GiB batch request came back whole in its 422). The schema names the keys.
    """
    public = []
    for error in errors:
        message = str(error.get("msg", ""))
        value = error.get("input")
        if isinstance(value, str) and len(value) >= 3 and value in message:
            message = message.replace(value, "<input>")
        if len(message) > _MAX_MSG:
            message = message[:_MAX_MSG] + "..."
        loc = [
            part if isinstance(part, int) or _LOC_PART.fullmatch(str(part)) else "<key>"
            for part in error.get("loc", ())
        ]
        if error.get("type") == "extra_forbidden" and loc:
            loc[-1] = "<key>"  # the key itself is what the client sent
        public.append({"loc": loc, "msg": message, "type": str(error.get("type", ""))})
    return public


def _separators(root: str) -> str:
    # The folder as a regex that also matches it written with backslashes or doubled
    # ones (as the repr() of a path inside a message would show it).
    return r"[\\/]+".join(re.escape(part) for part in re.split(r"[\\/]+", root))


def scrub_paths(detail: Any, folders: Mapping[Path, str]) -> Any:
    """`detail` with each server folder written as its placeholder (`<storage>`, ...).

    Applied to every error message sent to clients: a message about a file the service
    wrote (an upload, an extracted export) must not reveal where the server keeps it.
    Lists and dicts (validation errors) are scrubbed item by item.
    """
    if isinstance(detail, str):
        # Longest first, so a folder inside another gets its own placeholder.
        for folder in sorted(folders, key=lambda f: len(str(f)), reverse=True):
            text = str(folder)
            if len(text) > 1:
                detail = re.sub(_separators(text), folders[folder].replace("\\", r"\\"), detail)
        return detail
    if isinstance(detail, list):
        return [scrub_paths(item, folders) for item in detail]
    if isinstance(detail, dict):
        return {key: scrub_paths(value, folders) for key, value in detail.items()}
    return detail


def server_folders(settings: Settings) -> dict[Path, str]:
    """The server's own folders, and the placeholders error messages show instead."""
    folders: dict[Path, str] = {}
    for root in settings.batch_roots:
        folders[root.absolute()] = folders[root.resolve()] = "<batch root>"
    storage = settings.storage_dir
    folders[storage.absolute()] = folders[storage.resolve()] = "<storage>"
    return folders
