"""The discrepancy worklist: stored batch results whose report and image disagree.

Batch jobs that had both a report and a model store, per image, the report's labels and
the prediction (probabilities, positives, boxes) in `BatchItem.result`. This module reads
those results (read-only; it never changes a job) and lists, per image and finding, where
the report and the image disagree on presence or side (`batch.study_questions.discrepancy_of`).
Batch results carry the report's `findings` (side, site, size, ...), so a finding on the other
side is flagged too; results written before they did compare presence only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import BatchItem
from batch.study_questions import discrepancy_of
from models.boxes import Box
from models.image_findings import ImageFindings

__all__ = ["Discrepancy", "discrepancies_in_result", "list_discrepancies"]


@dataclass(frozen=True)
class Discrepancy:
    """One finding on which one image's report and prediction disagree."""

    job_id: str
    item: str
    study_instance_uid: str | None
    accession_number: str | None
    label: str
    reason: str
    report: dict[str, object]
    image: dict[str, object]

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict."""
        return {
            "job_id": self.job_id,
            "item": self.item,
            "study_instance_uid": self.study_instance_uid,
            "accession_number": self.accession_number,
            "label": self.label,
            "reason": self.reason,
            "report": self.report,
            "image": self.image,
        }


def _image_of(result: dict[str, Any]) -> ImageFindings | None:
    from models.image_findings import image_findings

    pred = result.get("prediction")
    if not isinstance(pred, dict) or not isinstance(pred.get("probabilities"), dict):
        return None
    boxes = []
    for b in pred.get("boxes") or ():
        try:
            boxes.append(
                Box(
                    str(b["label"]),
                    float(b["x"]),
                    float(b["y"]),
                    float(b["width"]),
                    float(b["height"]),
                    float(b.get("score", 0.0)),  # not from_dict: a box without score counts (0)
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    from models.dicom import ImageMeta

    meta = ImageMeta(
        rows=int(result.get("rows") or 0),
        columns=int(result.get("columns") or 0),
        view_position=result.get("view_position"),
        patient_orientation=result.get("patient_orientation"),
    )
    return image_findings(
        {str(k): float(v) for k, v in pred["probabilities"].items()},
        [str(p) for p in pred.get("positive") or ()],
        boxes,
        None,
        meta,
    )


def discrepancies_in_result(
    result: dict[str, Any], *, job_id: str = "", item: str = ""
) -> list[Discrepancy]:
    """The disagreements of one stored batch result (an image with report and prediction).

    Args:
        result: a `BatchItem.result` (or a `cxr batch` result line).
        job_id, item: copied to each entry.

    Returns:
        One entry per finding that disagrees, in label order; none when the result lacks
        the report's labels or the prediction.
    """
    report = result.get("report")
    if not isinstance(report, dict) or not isinstance(report.get("labels"), dict):
        return []
    image = _image_of(result)
    if image is None:
        return []
    findings = report.get("findings") if isinstance(report.get("findings"), dict) else {}
    out = []
    for label, status in report["labels"].items():
        side = (findings or {}).get(label, {}).get("laterality") if findings else None
        why = discrepancy_of(str(status), side, image, str(label))
        if why is None:
            continue
        out.append(
            Discrepancy(
                job_id=job_id,
                item=item,
                study_instance_uid=result.get("study_instance_uid"),
                accession_number=result.get("accession_number"),
                label=str(label),
                reason=why,
                report={"status": status, "laterality": side, "source": report.get("source")},
                image={
                    "probability": image.probabilities.get(str(label)),
                    "positive": str(label) in image.positive,
                    "side": image.side(str(label)),
                    "boxes": [p.to_dict() for p in image.positions if p.label == label],
                },
            )
        )
    return out


def list_discrepancies(
    session: Session, *, job_id: str | None = None, limit: int = 100, scan: int = 5000
) -> tuple[list[Discrepancy], int]:
    """The newest disagreements across batch jobs (or one job).

    Args:
        session: a database session (read only).
        job_id: only this job's items.
        limit: at most this many entries.
        scan: at most this many done items are read, newest first.

    Returns:
        (entries, items scanned).
    """
    query = select(BatchItem).where(
        BatchItem.state == "done", BatchItem.kind.in_(("image", "bitmap"))
    )
    if job_id:
        query = query.where(BatchItem.job_id == job_id)
    query = query.order_by(BatchItem.updated_at.desc(), BatchItem.id.desc()).limit(scan)
    out: list[Discrepancy] = []
    scanned = 0
    for row in session.execute(query).scalars():
        scanned += 1
        if isinstance(row.result, dict):
            out.extend(discrepancies_in_result(row.result, job_id=row.job_id, item=row.path))
        if len(out) >= limit:
            break
    return out[:limit], scanned
