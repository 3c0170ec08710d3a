"""POST /v1/studies/ask: questions in plain English about a report, an image, or both."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from app.deps import AppState, NlpDep, StateDep
from app.errors import (
    InvalidBodyEncoding,
    MalformedBody,
    ModelNotLoaded,
    ServiceError,
    UnsupportedMediaType,
)
from app.image_intake import Upload, decode_upload, form_upload
from app.media_types import is_json, media_type
from app.schemas import ErrorRead
from models.image_findings import LUNG_FIELD_SIDE

if TYPE_CHECKING:
    from app.report_labeler import ReportLabeler
    from batch.study_questions import Answer, StudyQuestions
    from models.image_findings import ImageFindings
    from models.image_pipeline import LoadedImage
    from models.predict import Prediction

router = APIRouter(tags=["studies"])

_MAX_QUESTIONS = 100
_MAX_QUESTION_CHARS = 500
_MAX_REPORT_CHARS = 100_000
_ENGINE_LOCK = threading.Lock()


class StudyAskCreate(BaseModel):
    """Questions about one study: the report text and one question or several."""

    # Unknown keys are refused, as for reports: a misspelt key would silently do nothing.
    model_config = ConfigDict(extra="forbid")

    id: str = Field(
        "",
        max_length=128,
        pattern=r"^[^\x00-\x1f\x7f]*$",  # echoed in every answer: no control characters
        description="copied to each answer (suffixed per question)",
    )
    report: str | None = Field(None, max_length=_MAX_REPORT_CHARS, description="report text")
    question: str | None = Field(None, max_length=_MAX_QUESTION_CHARS)
    questions: list[Annotated[str, Field(max_length=_MAX_QUESTION_CHARS)]] | None = Field(
        None, max_length=_MAX_QUESTIONS
    )
    view_position: str | None = Field(
        None,
        max_length=16,
        # DICOM's Code String (VR CS, PS3.5 6.2): the value (0018,5101) would have.
        pattern=r"^[A-Za-z0-9_ ]+$",
        description="View Position for an image without one (PA, AP, LL)",
    )


class AnswerRead(BaseModel):
    """One answer (see docs/questions.md)."""

    id: str
    question: str
    type: str = Field(examples=["position"])
    label: str | None = Field(examples=["Effusion"])
    answer: str | int | float | list[str] | None = Field(examples=["yes", ["left", "lower"]])
    source: str | None = Field(examples=["both"])
    evidence: dict[str, Any]
    discrepancy: bool
    message: str | None = None
    unit: str | None = None
    demo_model: bool = Field(
        default=False, description="true when the image was read by a demo model: meaningless"
    )


class StudyAnswersRead(BaseModel):
    """The answers, in question order, and the model that read the image (if any)."""

    answers: list[AnswerRead]
    model: dict[str, Any] | None = None


class BadQuestionRequest(ServiceError):
    """A request without a question, or with more than the allowed number."""

    status_code = 422


@router.post(
    "/studies/ask",
    response_model=StudyAnswersRead,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": StudyAskCreate.model_json_schema()},
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "question": {"type": "array", "items": {"type": "string"}},
                            "report": {"type": "string"},
                            "view_position": {"type": "string"},
                            "file": {"type": "string", "format": "binary"},
                        },
                        "required": ["question"],
                    }
                },
            },
        }
    },
    responses={
        413: {
            "model": ErrorRead,
            "description": "Upload over CXR_MAX_UPLOAD_MB or CXR_MAX_PIXELS.",
        },
        415: {"model": ErrorRead, "description": "Not JSON or multipart; an unsupported image."},
        422: {"model": ErrorRead, "description": "No question, a bad report, a corrupt image."},
        503: {"model": ErrorRead, "description": "An image was sent but no model is loaded."},
    },
    summary="Answer questions about a study's report and image",
)
async def ask_study(request: Request, state: StateDep, labeler: NlpDep) -> StudyAnswersRead:
    """Answer plain-English questions (presence, position, size, count, change, severity)
    from the report text, the image (multipart field `file`: DICOM, PNG, JPEG) or both,
    with the report spans and rule ids, the image boxes and probabilities used, and
    `discrepancy: true` where the report and the image disagree on presence or side.

    JSON: `{"report": "...", "question": "..."}` (or `"questions": [...]`, up to 100).
    Multipart: fields `question` (repeatable), `report`, `view_position` and `file`.
    A question that is not understood is answered `type: "unsupported"` with a message.
    """
    content_type = media_type(request.headers.get("content-type"))
    image: ImageFindings | None = None
    model: dict[str, Any] | None = None
    if is_json(content_type):
        raw = await request.body()
        try:
            parsed = json.loads(raw)
        except UnicodeDecodeError as exc:
            raise InvalidBodyEncoding.from_decode_error(exc) from None
        except (ValueError, RecursionError) as exc:
            raise MalformedBody.from_json_error(exc) from None
        try:
            body = StudyAskCreate.model_validate(parsed)
        except ValidationError as exc:
            raise BadQuestionRequest(f"invalid JSON body: {_short(exc)}") from None
    elif content_type == "multipart/form-data":
        form = await request.form(max_files=1, max_fields=_MAX_QUESTIONS + 5)
        try:
            if any(k != "file" and isinstance(v, UploadFile) for k, v in form.multi_items()):
                # A report sent as a file would be ignored, and the answer would say that no
                # report was given: refuse it instead.
                raise BadQuestionRequest(
                    "only `file` (the image) may be a file; send `report`, `question`, `id` "
                    "and `view_position` as text fields"
                )
            fields = {
                "id": _text(form.get("id")) or "",
                "report": _text(form.get("report")),
                "questions": [q for q in form.getlist("question") if isinstance(q, str)],
                "view_position": _text(form.get("view_position")),
            }
            try:
                body = StudyAskCreate.model_validate(fields)
            except ValidationError as exc:
                raise BadQuestionRequest(f"invalid form: {_short(exc)}") from None
            part = form.get("file")
            if isinstance(part, UploadFile):
                image, model = await _image(request, state, form_upload(part), body.view_position)
        finally:
            await form.close()
    else:
        raise UnsupportedMediaType(
            f"Content-Type {content_type or 'missing'!r}: send JSON "
            '({"report": ..., "question": ...}) or multipart/form-data with `question`, '
            "`report` and an image in `file`"
        )
    questions = ([body.question] if body.question else []) + list(body.questions or [])
    if not questions:
        raise BadQuestionRequest("no question: send `question` (or `questions`)")
    if len(questions) > _MAX_QUESTIONS:
        raise BadQuestionRequest(f"{len(questions)} questions; the limit is {_MAX_QUESTIONS}")
    report = (
        await labeler.label_async(body.report, report_id=body.id, findings=True)
        if body.report
        else None
    )  # with its findings: questions may ask about any of them, or about the whole study
    demo = bool(model and model.get("demo")) and image is not None
    engine = await run_in_threadpool(_engine, state, labeler)

    def answer_all() -> list[dict[str, Any]]:
        answers: list[Answer] = []
        with _ENGINE_LOCK:
            for i, q in enumerate(questions):
                # "Has it grown?" after a question about the nodule asks about the nodule
                referent = answers[-1].label if answers else None
                qid = _qid(body.id, i, len(questions))
                answers.append(
                    engine.ask(
                        q,
                        report=report,
                        image=image,
                        question_id=qid,
                        referent=referent,
                        report_text=body.report or None,
                    )
                )
        for answer in answers:
            answer.demo_model = demo
        return [a.to_dict() for a in answers]

    answers = await run_in_threadpool(answer_all)
    return StudyAnswersRead(answers=[AnswerRead(**a) for a in answers], model=model)


def _engine(state: AppState, labeler: ReportLabeler) -> StudyQuestions:
    from batch.study_questions import StudyQuestions

    with _ENGINE_LOCK:
        engine = state.questions
        if engine is None or engine.labeler is not labeler:
            engine = StudyQuestions(labeler)
            state.questions = engine
        return engine


def _qid(base: str, i: int, n: int) -> str:
    if n == 1:
        return base
    return f"{base}#{i + 1}" if base else str(i + 1)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "body"
        return f"{where}: {err.get('msg')}"
    return type(exc).__name__


async def _image(
    request: Request, state: AppState, upload: Upload, view_position: str | None
) -> tuple[ImageFindings, dict[str, Any]]:
    inference = state.inference
    if inference is None:
        raise ModelNotLoaded()
    loaded = await decode_upload(
        request,
        inference,
        upload,
        display_size=LUNG_FIELD_SIDE,
        max_pixels=state.settings.max_pixels,
    )
    prediction = await inference.predict(loaded.prepared)
    findings = await run_in_threadpool(_findings, loaded, prediction, view_position)
    card = inference.predictor.card or {}
    return findings, {"name": card.get("name"), "demo": bool(card.get("demo", False))}


def _findings(
    loaded: LoadedImage, prediction: Prediction, view_position: str | None
) -> ImageFindings:
    """The prediction placed in the patient: the lung field is estimated on the display
    copy and put back into original pixels."""
    from models.image_findings import image_findings, lung_field_of, rendered_heatmaps

    meta = loaded.meta
    return image_findings(
        prediction.probabilities,
        prediction.positive,
        prediction.boxes,
        None,
        meta,
        view_position=view_position,
        lung_field=lung_field_of(loaded),
        heatmaps=rendered_heatmaps(prediction.heatmaps, meta.rows, meta.columns),
    )
