"""GET /v1/discrepancies: batch results whose report and image disagree (quality review)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from app.deps import SessionDep
from app.worklist import Discrepancy

router = APIRouter(tags=["discrepancies"])


class DiscrepancyListRead(BaseModel):
    """The worklist, newest first, and how many batch items were read to build it."""

    # the worklist's own dataclass: one field list, validated and documented by pydantic
    items: list[Discrepancy]
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
        items=entries,
        scanned=scanned,
    )
