"""Pydantic request/response models of the HTTP API (`XCreate` in, `XRead` out)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from batch.scan import DEFAULT_MODALITIES
from models.notices import DEMO_NOTICE

__all__ = [
    "DEMO_NOTICE",
    "BatchCreate",
    "BatchRead",
    "BoxRead",
    "DicomwebBatchSource",
    "ErrorRead",
    "HealthRead",
    "ImageRead",
    "AttributeEvidenceRead",
    "MentionRead",
    "ModelCardRead",
    "PredictionRead",
    "ReadyRead",
    "ReportBatchCreate",
    "ReportBatchRead",
    "ReportCreate",
    "ReportLabelsRead",
]


def _as_utc(value: datetime) -> datetime:
    # SQLite keeps no time zone: a stored UTC time reads back naive (issue 7 item 9),
    # and a date-time without an offset is not RFC 3339. Every stored time is UTC.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


UTCDateTime = Annotated[datetime, AfterValidator(_as_utc)]
"""A UTC timestamp, serialized with its offset (`...Z`/`+00:00`)."""

_REPORT_EXAMPLE = (
    "FINDINGS: The heart is enlarged. Small left pleural effusion. No pneumothorax.\n"
    "IMPRESSION: Cardiomegaly with small left effusion."
)


class ErrorRead(BaseModel):
    """Every error response: a sentence for people and the exception class for programs."""

    detail: Any = Field(examples=["scan.dcm: the dataset has no Pixel Data (7FE0,0010)"])
    error: str = Field(examples=["MissingPixelData"])


class ReportCreate(BaseModel):
    """One report to label."""

    # Unknown keys are refused, not ignored: {"text": ..., "reports": [...]} was read as
    # the batch alone, and a misspelt option would silently do nothing.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"id": "ACC123", "text": _REPORT_EXAMPLE}]},
    )

    text: str = Field(min_length=1, description="Report text (FINDINGS/IMPRESSION sections).")
    # No control characters: the id is stored and echoed (PostgreSQL refuses NUL in text).
    id: str = Field(
        default="",
        max_length=128,
        pattern=r"^[^\x00-\x1f\x7f]*$",
        description="Your id, echoed back.",
    )
    study_instance_uid: str | None = Field(
        default=None,
        max_length=64,
        pattern=r"^[0-9]+(\.[0-9]+)*$",
        description="Links the report to a study: a DICOM UID (digits and dots).",
    )
    # Strict: JSON true or false only. 0, 1 and "yes" were accepted as booleans, so a
    # client's mistaken value passed unnoticed (issue 42).
    explain: bool = Field(
        default=False,
        strict=True,
        description="Add an `explanation`: each mention, the rule and cue that fired, and "
        "why each label got its status (as `cxr label --explain`).",
    )
    findings: bool = Field(
        default=False,
        strict=True,
        description="Also read every finding the report names (`report_findings`: concept, "
        "MeSH heading, status, attributes) and whether it is `normal` (as `cxr label "
        "--findings`).",
    )


class ReportBatchCreate(BaseModel):
    """Several reports labeled in one request (at most CXR_MAX_REPORTS_PER_REQUEST)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "reports": [
                        {"id": "r1", "text": _REPORT_EXAMPLE},
                        {"id": "r2", "text": "No acute cardiopulmonary abnormality."},
                    ]
                }
            ]
        },
    )

    reports: list[ReportCreate] = Field(min_length=1)


class AttributeEvidenceRead(BaseModel):
    """Why a mention has an attribute value: the rule id and the words (report offsets)."""

    attribute: str
    value: str | int | float
    rule: str
    start: int
    end: int


class MentionRead(BaseModel):
    """A finding mention with its character span and the rule that decided it."""

    label: str
    text: str
    start: int
    end: int
    sentence: str
    status: Literal["positive", "uncertain", "negative"]
    rule: str | None = None
    negex: str | None = None
    section: str | None = None
    cue: str | None = Field(default=None, description="the cue words that fired `rule`")
    attributes: dict[str, Any] = Field(
        default_factory=dict,
        description="laterality, location (list), severity, size_mm, count, change; "
        "keys without a value are left out",
    )
    attribute_evidence: list[AttributeEvidenceRead] = Field(default_factory=list)


class ReportFindingRead(MentionRead):
    """One finding the report names (`findings: true`): a mention with its concept."""

    concept: str = Field(description="the lexicon's concept id, or `open:<word>`")
    name: str
    kind: str = Field(
        description="finding, device, postop, bone, soft_tissue, anatomy, normal, technique, view"
    )
    mesh: str = Field(description="heading/qualifiers/side as the OpenI coders write it")
    radlex: str = Field(default="", description="the concept's RadLex id; empty where none")


class ReportLabelsRead(BaseModel):
    """The labeler's output for one report (same schema as `cxr label`)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "ACC123",
                    "labels": {"Cardiomegaly": "positive", "Effusion": "positive"},
                    "no_finding": False,
                    "mentions": [],
                    "labeler_version": "concepts.v1+rules.v1+sections.v1",
                }
            ]
        }
    )

    id: str
    labels: dict[str, str]
    no_finding: bool
    mentions: list[MentionRead] = Field(default_factory=list)
    findings: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="per label that is not absent: status, laterality, location (list), "
        "severity, size_mm, count, change; keys without a value are left out",
    )
    mentions_omitted: int = Field(
        default=0,
        description="mentions found but left out of `mentions` (over 100 in one report); "
        "labels and findings count them all",
    )
    error: str | None = None
    labeler_version: str
    explanation: dict[str, Any] | None = Field(
        default=None, description="present when the request asked for `explain`"
    )
    report_findings: list[ReportFindingRead] | None = Field(
        default=None, description="present when the request asked for `findings`"
    )
    normal: bool | None = Field(
        default=None,
        description="no abnormal finding read, positive or hedged (with `findings`)",
    )


class ReportBatchRead(BaseModel):
    """Results in the order of the request; a bad report has `error` set."""

    results: list[ReportLabelsRead]


class InferenceRead(BaseModel):
    """Where and in what arithmetic the model ran: bfloat16 moves probabilities by about 0.01
    from float32 (`CXR_PRECISION`)."""

    device: str
    precision: Literal["float32", "bfloat16"]


class ModelCardRead(BaseModel):
    """What the model is and is not: name, version, intended use, label set, demo flag."""

    model_config = ConfigDict(extra="allow")

    name: str = "unknown"
    version: str = "unknown"
    intended_use: str = ""
    labels: list[str] = Field(default_factory=list)
    demo: bool = False
    inference: InferenceRead | None = Field(
        default=None, description="How this prediction was computed (absent on older ones)."
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="What a reader must know of the model: a label near chance, a "
        "temperature at its cap, a threshold at 0 or 1.",
    )


class BoxRead(BaseModel):
    """A localization box in original image pixel coordinates (x, y = top left).

    Only labels at or above their threshold get boxes, and only boxes whose score (peak
    heat times the label probability) reaches it; nested boxes of one label are merged.
    """

    # The HTTP view of `models.boxes.Box`, built from one (`model_validate(box)`): the same
    # fields, which a test compares; declared here for the OpenAPI descriptions.
    model_config = ConfigDict(from_attributes=True)

    label: str
    x: float
    y: float
    width: float
    height: float
    score: float
    heatmap_level: int | None = Field(
        default=None,
        description="the [0, 255] level of the min/max normalised heatmap whose connected "
        "component this box encloses (60 or 180, the paper's); not a probability threshold",
    )


class ImageRead(BaseModel):
    """The image the prediction was made on: UIDs echoed, no patient data."""

    study_instance_uid: str | None = None
    series_instance_uid: str | None = None
    sop_instance_uid: str | None = None
    sop_class_uid: str | None = None
    modality: str | None = None
    rows: int
    columns: int
    sha256: str


class PredictionRead(BaseModel):
    """Image prediction: probabilities, positives, boxes, heatmap links, model card, timing."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "6f1c2a4e-0d8b-4a7e-9d38-2c7a1f0e5b11",
                    "demo": True,
                    "notice": DEMO_NOTICE,
                    "image": {
                        "study_instance_uid": "1.2.826.0.1.3680043.8.498.1",
                        "series_instance_uid": "1.2.826.0.1.3680043.8.498.2",
                        "sop_instance_uid": "1.2.826.0.1.3680043.8.498.3",
                        "modality": "DX",
                        "rows": 2048,
                        "columns": 2048,
                        "sha256": "9f86d081884c7d659a2feaa0c55ad015"
                        "a3bf4f1b2b0b822cd15d6c15b0f00a08",
                    },
                    "probabilities": {"Cardiomegaly": 0.91, "Effusion": 0.12},
                    "positive": ["Cardiomegaly"],
                    "boxes": [
                        {
                            "label": "Cardiomegaly",
                            "x": 612.0,
                            "y": 830.0,
                            "width": 900.0,
                            "height": 610.0,
                            "score": 0.91,
                            "heatmap_level": 180,
                        }
                    ],
                    "heatmaps": {
                        "Cardiomegaly": "/v1/predictions/6f1c2a4e-0d8b-4a7e-9d38-2c7a1f0e5b11"
                        "/heatmaps/Cardiomegaly.png"
                    },
                    "timings": {
                        "upload": 0.012,
                        "decode": 0.031,
                        "preprocess": 0.001,
                        "forward": 0.011,
                        "cam": 0.0,
                        "boxes": 0.003,
                        "inference_total": 0.016,
                        "store": 0.004,
                        "total": 0.064,
                    },
                }
            ]
        }
    )

    id: str
    demo: bool
    notice: str | None = Field(default=None, description="Set for demo models.")
    model: ModelCardRead
    image: ImageRead
    probabilities: dict[str, float]
    positive: list[str]
    boxes: list[BoxRead]
    heatmaps: dict[str, str] = Field(description="Label -> URL of a heatmap overlay PNG.")
    timings: dict[str, float] = Field(
        description="Seconds: upload (receiving the body), decode (decoding and fitting), "
        "the model's preprocess, forward, cam and boxes, inference_total (waiting for the "
        "batch included) and total."
    )
    created_at: UTCDateTime | None = None


_UID = r"^[0-9]+(\.[0-9]+)*$"


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _plain_path(value: str | None) -> str | None:
    """Refuse a client path with a control character (NUL makes the OS call fail)."""
    bad = _CONTROL.search(value) if value is not None else None
    if bad is not None:
        raise ValueError(
            f"control character U+{ord(bad.group()):04X} at position {bad.start()}: "
            "paths must be printable text"
        )
    return value


# At least one character (an empty `path` names a batch root itself; an empty `reports` was
# taken as none) and at most PATH_MAX (4096), checked before anything else looks at the
# text: a longer path names no file, and error messages quote the path (issue 18 item 6).
PlainPath = Annotated[
    str, StringConstraints(min_length=1, max_length=4096), AfterValidator(_plain_path)
]


class DicomwebBatchSource(BaseModel):
    """Which studies of the configured DICOMweb server (CXR_DICOMWEB_URL) a job pulls."""

    model_config = ConfigDict(extra="forbid")

    study: list[Annotated[str, Field(pattern=_UID, max_length=64)]] = Field(
        default_factory=list, max_length=1000, description="Only these StudyInstanceUIDs."
    )
    since: date | None = Field(default=None, description="Only studies from this day on.")
    modality: list[Annotated[str, Field(pattern=r"^[A-Z]{2,4}$")]] = Field(
        default_factory=lambda: list(DEFAULT_MODALITIES),
        min_length=1,
        description="Series modalities.",
    )
    push: list[Literal["sr", "gsps"]] = Field(
        default_factory=list,
        description="Store results back by STOW-RS: a TID 1500 SR and/or a GSPS per image.",
    )


class BatchCreate(BaseModel):
    """A batch job on a server folder (inside CXR_BATCH_ROOTS) or on the PACS (DICOMweb)."""

    # Unknown keys are refused, as in ReportCreate: {"path": ..., "report": ...} (for
    # `reports`) ran the job without its reports.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"path": "exports/2024-05-ward3", "reports": "exports/ward3.csv"},
                {"dicomweb": {"since": "2024-05-01", "modality": ["CR", "DX"], "push": ["sr"]}},
            ]
        },
    )

    path: PlainPath | None = Field(
        default=None,
        description="Export folder: relative to a batch root, or absolute inside one.",
    )
    reports: PlainPath | None = Field(
        default=None, description="Reports CSV (accession number or StudyInstanceUID + text)."
    )
    dicomweb: DicomwebBatchSource | None = Field(
        default=None, description="Pull from the configured DICOMweb server instead of a folder."
    )

    @model_validator(mode="after")
    def _one_source(self) -> BatchCreate:
        if self.path is None and self.dicomweb is None:
            raise ValueError(
                "no source: give `path` (a folder inside CXR_BATCH_ROOTS) or `dicomweb` "
                "(studies on the configured PACS)"
            )
        if self.path is not None and self.dicomweb is not None:
            raise ValueError(
                "two sources: give either `path` (a server folder) or `dicomweb`, not both"
            )
        return self


class BatchRead(BaseModel):
    """State and progress of a batch job."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "0b5e8f8e-4c3b-4b8e-a0f3-3f1c8d2b9a77",
                    "state": "running",
                    "source_kind": "zip",
                    "total": 1200,
                    "done": 640,
                    "skipped": 12,
                    "failed": 3,
                    "pending": 545,
                    "progress": 0.546,
                    "model": "resnet50-chestxray14 1.0",
                    "demo": False,
                    "results": {
                        "jsonl": "/v1/batches/0b5e8f8e-4c3b-4b8e-a0f3-3f1c8d2b9a77/results",
                        "csv": "/v1/batches/0b5e8f8e-4c3b-4b8e-a0f3-3f1c8d2b9a77/results"
                        "?format=csv",
                    },
                }
            ]
        }
    )

    id: str
    state: Literal["queued", "running", "done", "failed"]
    source_kind: str
    total: int = Field(description="Files found (0 until the scan finishes).")
    done: int
    skipped: int = Field(description="DICOMDIR, non-image SOP classes, non-DICOM files.")
    failed: int
    pending: int
    progress: float = Field(ge=0, le=1)
    model: str | None = Field(default=None, description="Model name and version, or None.")
    demo: bool = False
    error: str | None = None
    created_at: UTCDateTime | None = None
    started_at: UTCDateTime | None = None
    finished_at: UTCDateTime | None = None
    results: dict[str, str]


class HealthRead(BaseModel):
    """Liveness."""

    status: Literal["ok"] = "ok"


class ReadyRead(BaseModel):
    """Readiness: database reachable, labeler loaded, model loaded or explicitly absent."""

    ready: bool
    database: bool
    labeler: bool
    model: Literal["loaded", "absent", "failed"]
    model_name: str | None = None
    demo: bool = False
    detail: str | None = None
