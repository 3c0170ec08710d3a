"""FastAPI dependencies as `Annotated` aliases: routes stay thin and testable."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.errors import ModelNotLoaded, ServiceError
from app.inference import InferenceQueue
from app.jobs import BatchRunner
from app.report_labeler import ReportLabeler
from app.security import ApiKeys
from app.service_metrics import Metrics
from app.settings import Settings
from app.storage import Storage
from batch.archive import ZipLimits
from batch.pacs.dicomweb import DicomwebServer

if TYPE_CHECKING:  # models.predict imports torch, which the service loads only with a model
    from models.predict import Predictor

if TYPE_CHECKING:
    from batch.study_questions import StudyQuestions

__all__ = [
    "AppState",
    "InferenceDep",
    "MetricsDep",
    "NlpDep",
    "ReviewerDep",
    "SessionDep",
    "SettingsDep",
    "StateDep",
    "StorageDep",
    "require_api_key",
]


@dataclass
class AppState:
    """Everything the app built at start-up, kept on `app.state.cxr`."""

    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    storage: Storage
    metrics: Metrics
    api_keys: ApiKeys
    zip_limits: ZipLimits
    labeler: ReportLabeler | None = None
    predictor: Predictor | None = None
    inference: InferenceQueue | None = None
    runner: BatchRunner | None = None
    dicomweb: DicomwebServer | None = None
    questions: StudyQuestions | None = None  # built on the first POST /v1/studies/ask


class Unauthorized(ServiceError):
    """No X-API-Key header."""

    status_code = 401


class Forbidden(ServiceError):
    """An X-API-Key that is not one of the configured keys."""

    status_code = 403


async def get_state(request: Request) -> AppState:
    # async: a sync dependency takes a threadpool thread, and every route needs this one
    state: AppState = request.app.state.cxr
    return state


StateDep = Annotated[AppState, Depends(get_state)]


def get_settings_dep(state: StateDep) -> Settings:
    return state.settings


def get_session(state: StateDep) -> Iterator[Session]:
    with state.sessions() as session:
        yield session


def get_storage(state: StateDep) -> Storage:
    return state.storage


def get_metrics(state: StateDep) -> Metrics:
    return state.metrics


def get_labeler(state: StateDep) -> ReportLabeler:
    if state.labeler is None:  # only if start-up was skipped (tests building bare apps)
        raise ServiceError("the report labeler is not loaded")
    return state.labeler


def get_inference(state: StateDep) -> InferenceQueue:
    if state.inference is None:
        raise ModelNotLoaded()
    return state.inference


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
SessionDep = Annotated[Session, Depends(get_session)]
StorageDep = Annotated[Storage, Depends(get_storage)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
NlpDep = Annotated[ReportLabeler, Depends(get_labeler)]
InferenceDep = Annotated[InferenceQueue, Depends(get_inference)]

_api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False)


def get_reviewer(state: StateDep, key: Annotated[str | None, Security(_api_key_header)]) -> str:
    """Who acts: the name of the API key sent (`NAME=sha256:...` in CXR_API_KEYS, else
    `key-<8 hex>`), or "anonymous" on a service without keys."""
    if not state.api_keys.enabled or not key:
        return "anonymous"
    return state.api_keys.name_of(key) or "anonymous"


ReviewerDep = Annotated[str, Depends(get_reviewer)]


def require_api_key(state: StateDep, key: Annotated[str | None, Security(_api_key_header)]) -> None:
    """Check `X-API-Key` when keys are configured (401 missing, 403 wrong)."""
    if not state.api_keys.enabled:
        return
    if not key:
        raise Unauthorized("missing X-API-Key header")
    if not state.api_keys.check(key):
        raise Forbidden("invalid API key")
