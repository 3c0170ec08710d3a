"""HTTP-facing errors of the service; library errors (ImageError, LabelerError) map in main."""

from __future__ import annotations

from starlette.exceptions import HTTPException

__all__ = [
    "BatchSourceError",
    "ModelNotLoaded",
    "NotFound",
    "PayloadTooLarge",
    "ServiceError",
    "UnsafeArchiveError",
    "UnsupportedMediaType",
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


class PayloadTooLarge(ServiceError):
    """The request body exceeds the configured limit."""

    status_code = 413


class UnsupportedMediaType(ServiceError):
    """The request's content type is not one the endpoint accepts."""

    status_code = 415


class UnsafeArchiveError(ServiceError):
    """A zip upload with path traversal, links, or suspicious compression (a zip bomb)."""

    status_code = 422


class BatchSourceError(ServiceError):
    """A batch job's server path is outside CXR_BATCH_ROOTS, missing, or not allowed."""

    status_code = 403
