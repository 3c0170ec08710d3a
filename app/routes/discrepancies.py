"""GET /v1/discrepancies: batch results whose report and image disagree (quality review)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel

from app.deps import SessionDep

router = APIRouter(tags=["discrepancies"])


class DiscrepancyRead(BaseModel):
    """One finding on which an image's report and prediction disagree."""

    job_id: str
    item: str
    study_instance_uid: str | None
    accession_number: str | None
    label: str
    reason: str
    report: dict[str, Any]
    image: dict[str, Any]


class DiscrepancyListRead(BaseModel):
    """The worklist, newest first, and how many batch items were read to build it."""

    items: list[DiscrepancyRead]
    scanned: int


@router.get(
    "/discrepancies",
    response_model=DiscrepancyListRead,
    summary="List studies whose report and image disagree",
)
def list_discrepancies(
    session: SessionDep,
    job_id: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> DiscrepancyListRead:
    """From batch jobs that had both a report and a model: per image and finding, the
    report's status (and side, when stored) beside the model's probability, positives and
    boxes placed in the patient, with one sentence saying how they disagree."""
    from app.worklist import list_discrepancies as find

    entries, scanned = find(session, job_id=job_id, limit=limit)
    return DiscrepancyListRead(
        items=[DiscrepancyRead(**e.to_dict()) for e in entries],  # type: ignore[arg-type]
        scanned=scanned,
    )
