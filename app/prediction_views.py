"""The API's view of a stored prediction (`PredictionRead`): one builder for every route that
returns a prediction (`POST /v1/images/predict`, `GET /v1/predictions/{id}`, a worklist row
opened), with its heatmap overlay links."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from app.db.models import PredictionRow
from app.schemas import DEMO_NOTICE, BoxRead, ImageRead, ModelCardRead, PredictionRead
from models.boxes import Box

__all__ = ["MIN_OVERLAY_SIDE", "heatmap_url", "prediction_read"]

# The smallest overlay or thumbnail the API renders (a `max_size` bound).
MIN_OVERLAY_SIDE = 64


def heatmap_url(prediction_id: str, label: str) -> str:
    """Path of a heatmap overlay PNG."""
    return f"/v1/predictions/{prediction_id}/heatmaps/{quote(label, safe='')}.png"


def prediction_read(
    row: PredictionRow, *, timings: dict[str, float] | None = None
) -> PredictionRead:
    """The API view of a stored prediction."""
    image = row.image
    study = image.study
    card = dict(row.model_card or {})
    return PredictionRead(
        id=row.id,
        demo=row.demo,
        notice=DEMO_NOTICE if row.demo else None,
        model=ModelCardRead(**_card_fields(card)),
        image=ImageRead(
            study_instance_uid=study.study_instance_uid if study is not None else None,
            series_instance_uid=image.series_instance_uid,
            sop_instance_uid=image.sop_instance_uid,
            sop_class_uid=image.sop_class_uid,
            modality=image.modality,
            rows=image.rows,
            columns=image.columns,
            sha256=image.sha256,
        ),
        probabilities=row.probabilities,
        positive=list(row.positive),
        boxes=[BoxRead.model_validate(Box.from_dict(b)) for b in row.boxes],
        heatmaps={label: heatmap_url(row.id, label) for label in row.heatmap_labels},
        timings=timings if timings is not None else dict(row.timings),
        created_at=row.created_at,
    )


def _card_fields(card: dict[str, Any]) -> dict[str, Any]:
    # The card the API shows: identity, use and labels, plus thresholds and metrics;
    # training internals (architecture details, preprocessing) stay out.
    keep = (
        "name",
        "version",
        "intended_use",
        "labels",
        "demo",
        "thresholds",
        "metrics",
        "training_data",
        "created",
        "code_version",
        "inference",
        "warnings",
    )
    return {k: card[k] for k in keep if k in card}
