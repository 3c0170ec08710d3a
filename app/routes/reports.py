"""POST /v1/reports/label: the report labeler over HTTP."""

from __future__ import annotations

import hashlib

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from app import crud
from app.deps import MetricsDep, NlpDep, SessionDep, SettingsDep
from app.errors import PayloadTooLarge, ServiceError, UnsupportedMediaType
from app.media_types import is_json, media_type
from app.report_labeler import ReportLabeler
from app.schemas import (
    ErrorRead,
    ReportBatchCreate,
    ReportBatchRead,
    ReportCreate,
    ReportLabelsRead,
)
from labeler import ReportLabels


def require_json(request: Request) -> None:
    """415 for a body sent as anything but JSON (FastAPI would answer a vague 422)."""
    content_type = media_type(request.headers.get("content-type"))
    if not is_json(content_type):
        raise UnsupportedMediaType(
            f"Content-Type {content_type or 'missing'!r}: send the report as JSON "
            '(Content-Type: application/json, body {"text": "..."} or {"reports": [...]})'
        )


router = APIRouter(tags=["reports"], dependencies=[Depends(require_json)])


class TooManyReports(ServiceError):
    """A report batch larger than CXR_MAX_REPORTS_PER_REQUEST."""

    status_code = 422


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@router.post(
    "/reports/label",
    response_model=ReportLabelsRead | ReportBatchRead,
    responses={
        413: {
            "model": ErrorRead,
            "description": "More report text than CXR_MAX_REPORT_CHARS_PER_REQUEST in one request.",
        },
        422: {"model": ErrorRead, "description": "Empty, non-text or too long report."},
        503: {
            "model": ErrorRead,
            "description": "Too many report requests already waiting for the labeler "
            "(CXR_MAX_WAITING_LABEL_REQUESTS); retry after the Retry-After seconds.",
        },
    },
    summary="Label one report, or a batch of reports",
)
async def label_reports(
    body: ReportCreate | ReportBatchCreate,
    session: SessionDep,
    labeler: NlpDep,
    settings: SettingsDep,
    metrics: MetricsDep,
) -> ReportLabelsRead | ReportBatchRead:
    """Mine the 14 ChestX-ray14 labels from report text.

    Send `{"text": ...}` for one report (errors answer 422), or `{"reports": [...]}`
    for up to CXR_MAX_REPORTS_PER_REQUEST reports (a bad report gets `error` set,
    the others are labeled). The response includes each finding's evidence (words,
    sentence, offsets). The service stores the labels, offsets and rule ids with the
    report's SHA-256; the evidence words and sentences only with
    CXR_STORE_REPORT_TEXT=true, the full text never. Report text is never logged.
    """
    version = labeler.version
    texts = [body.text] if isinstance(body, ReportCreate) else [r.text for r in body.reports]
    budget = settings.max_report_chars_per_request
    if sum(len(t) for t in texts) > budget:
        raise PayloadTooLarge(
            f"{sum(len(t) for t in texts):,} characters of report text in one request; the "
            f"limit is {budget:,} (CXR_MAX_REPORT_CHARS_PER_REQUEST). Split it into smaller "
            "requests, or use `cxr label` for files."
        )
    if isinstance(body, ReportCreate):
        result = await labeler.label_async(body.text, report_id=body.id, findings=body.findings)
        await run_in_threadpool(
            crud.create_label_results,
            session,
            [(result, _sha(body.text), body.study_instance_uid)],
            labeler_version=version,
            source="api",
            store_text=settings.store_report_text,
        )
        metrics.reports.labels("api").inc()
        return _read(result, version, labeler if body.explain else None)
    limit = settings.max_reports_per_request
    if len(body.reports) > limit:
        raise TooManyReports(
            f"{len(body.reports)} reports in one request; the limit is {limit} "
            "(CXR_MAX_REPORTS_PER_REQUEST). Split the batch, or use `cxr label` for files."
        )
    results = await labeler.label_many_async(
        [(r.id, r.text) for r in body.reports], findings=any(r.findings for r in body.reports)
    )
    for result, report in zip(results, body.reports, strict=True):
        if not report.findings:  # read for another report of the batch: not asked here
            result.report_findings = result.normal = None
    await run_in_threadpool(
        crud.create_label_results,
        session,
        [
            (res, _sha(r.text), r.study_instance_uid)
            for res, r in zip(results, body.reports, strict=True)
        ],
        labeler_version=version,
        source="api",
        store_text=settings.store_report_text,
    )
    metrics.reports.labels("api").inc(len(results))
    return ReportBatchRead(
        results=[
            _read(res, version, labeler if r.explain else None)
            for res, r in zip(results, body.reports, strict=True)
        ]
    )


def _read(result: ReportLabels, version: str, explainer: ReportLabeler | None) -> ReportLabelsRead:
    explanation = explainer.explain(result) if explainer is not None else None
    return ReportLabelsRead(**result.to_dict(), labeler_version=version, explanation=explanation)
