"""A worklist row's report and image re-read from its batch job's source.

Batch results keep no report text (report text is patient data: stored only on request,
never by batch jobs) and no full-resolution image. Opening a row goes back to where the job
read them: the reports CSV or the structured report for the report, the export folder for
the image. That works while the job's source is still there: a server folder and a reports
CSV under CXR_BATCH_ROOTS stay (unless someone moves them), an uploaded zip and its CSV are
deleted when the job ends, and a DICOMweb job's files are fetched into a scratch folder
removed after each file. When the source is gone, `SourceReport.missing` says so in a
sentence the page shows as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import BatchItem, BatchJobRow
from batch.interfaces import BatchInputError
from batch.reports import load_reports_csv
from models.errors import ImageError
from models.image_pipeline import InputSpec, PreparedImage

__all__ = ["DISPLAY_SIDE", "SourceReport", "read_display", "read_report", "source_file"]

# Longer side of an opened row's image when its file is still there (the page's preview size).
DISPLAY_SIDE = 1024


@dataclass(frozen=True)
class SourceReport:
    """A row's report text as re-read now, or why it cannot be.

    Attributes:
        text: the report's text; None when it cannot be read (`missing` says why).
        origin: where it comes from, for a label ("reports CSV ward3.csv", "structured
            report PAT1/SR/SR000001"); None when the batch found no report.
        missing: a sentence saying why the text is not there; None when it is.
    """

    text: str | None
    origin: str | None
    missing: str | None = None


def source_file(job: BatchJobRow, path: str) -> Path | None:
    """The file of one of a job's items, while the job's source still holds it.

    Only a server folder (`source_kind == "path"`) outlives its job; an uploaded zip's
    extracted files and a DICOMweb job's downloads do not. A path that leads out of the
    folder (it cannot, from a scan: checked anyway) gives None.

    Args:
        job: the item's job.
        path: the item's key (a path relative to the folder, "/" separated).

    Returns:
        The file, or None when the job's source is not a folder or the file is gone.
    """
    if job.source_kind != "path":
        return None
    root = Path(job.source)
    file = root / path
    try:
        inside = root.resolve() in file.resolve().parents
    except (OSError, RuntimeError):  # a symbolic link loop appeared since the scan
        return None
    return file if inside and file.is_file() else None


def read_display(
    job: BatchJobRow, item: BatchItem, kept: PreparedImage, spec: InputSpec
) -> np.ndarray | None:
    """The image of an item at display size, read again from the job's source, when the file
    there is still the image the batch read.

    The batch kept only the model input (a few hundred pixels a side); the radiologist
    reads the film better at `DISPLAY_SIDE`. The file is fitted as the batch fitted it and
    its model input compared with the kept one: a file replaced since gives None, so the
    heatmap is never drawn on another image.

    Args:
        job, item: the item and its job.
        kept: the model input the batch kept.
        spec: how the model fits images (`InputSpec.of(predictor)`).

    Returns:
        The uint8 display copy (longer side at most `DISPLAY_SIDE`), or None when the file
        is gone, unreadable or changed.
    """
    from models.image_pipeline import load_for_model

    file = source_file(job, item.path)
    if file is None:
        return None
    wanted = replace(spec, display_size=DISPLAY_SIDE, fingerprint=False)
    try:
        loaded = load_for_model(file, wanted, kind="dicom" if item.kind == "image" else "auto")
    except (ImageError, OSError):
        return None
    same = loaded.prepared.geometry == kept.geometry and np.array_equal(
        loaded.prepared.pixels, kept.pixels
    )
    return loaded.display if same else None


def _gone_with_job(job: BatchJobRow, what: str) -> str:
    if job.source_kind == "zip":
        return f"{what} was uploaded with the job and deleted when the job ended"
    if job.source_kind == "dicomweb":
        return f"{what} was fetched from the PACS over DICOMweb and is not kept"
    return f"{what} is no longer where the job read it ({job.source})"


def read_report(session: Session, job: BatchJobRow, item: BatchItem) -> SourceReport:
    """The report the batch labeled for an image item, read again from the job's source.

    Args:
        session: a database session (read only: finds the study's structured report item).
        job: the item's job.
        item: an image item whose result records the report's `source` ("csv" or "sr").

    Returns:
        The text with where it came from, or the reason it cannot be read.
    """
    result = item.result or {}
    report = result.get("report")
    source = report.get("source") if isinstance(report, dict) else None
    accession = result.get("accession_number") or item.accession_number
    study = result.get("study_instance_uid") or item.study_instance_uid
    if source == "csv":
        return _csv_report(job, accession, study)
    if source == "sr":
        return _sr_report(session, job, accession, study)
    return SourceReport(None, None, "the batch found no report for this image")


def _csv_report(job: BatchJobRow, accession: str | None, study: str | None) -> SourceReport:
    if not job.reports_path:
        return SourceReport(None, None, "the job was given no reports CSV")
    path = Path(job.reports_path)
    origin = f"reports CSV {path.name}"
    if not path.is_file():
        return SourceReport(None, origin, _gone_with_job(job, f"The reports CSV {path.name}"))
    try:
        found = load_reports_csv(path).lookup(accession, study)
    except BatchInputError as exc:
        return SourceReport(None, origin, f"The reports CSV cannot be read now: {exc}")
    if found is None:
        key = f"accession {accession}" if accession else f"study {study}"
        return SourceReport(None, origin, f"The reports CSV {path.name} no longer has {key}.")
    return SourceReport(found[1], origin)


def _sr_report(
    session: Session, job: BatchJobRow, accession: str | None, study: str | None
) -> SourceReport:
    from models.dicom import read_sr_text

    # as the batch matched them: accession number first, then the study
    candidates = [
        item
        for column, value in (
            (BatchItem.accession_number, accession),
            (BatchItem.study_instance_uid, study),
        )
        if value
        for item in session.scalars(
            select(BatchItem)
            .where(
                BatchItem.job_id == job.id,
                BatchItem.kind == "sr",
                BatchItem.state == "done",
                column == value,
            )
            .order_by(BatchItem.id)
            .limit(1)
        )
    ]
    if not candidates:
        return SourceReport(None, None, "The job no longer lists the study's structured report.")
    sr = candidates[0]
    origin = f"structured report {sr.path}"
    file = source_file(job, sr.path)
    if file is None:
        return SourceReport(None, origin, _gone_with_job(job, f"The structured report {sr.path}"))
    try:
        text = read_sr_text(file)
    except ImageError as exc:
        return SourceReport(None, origin, f"The structured report cannot be read now: {exc}")
    if not text.strip():
        return SourceReport(None, origin, "The structured report holds no text now.")
    return SourceReport(text, origin)
