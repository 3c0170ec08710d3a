"""What a model's prediction says about one image, placed in the patient: each finding's
probability, side and zone in the lung field (`models.position`), ready to answer a
question about the study or to be compared with its report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from models.dicom import ImageMeta
    from models.heatmaps import Heatmap
    from models.image_pipeline import LoadedImage
    from models.position import BoxLike, BoxPosition, LungField, Orientation

__all__ = [
    "LUNG_FIELD_SIDE",
    "ImageFindings",
    "image_findings",
    "lung_field_of",
    "rendered_heatmaps",
]


@dataclass(frozen=True)
class ImageFindings:
    """What the model says about one image, placed in the patient.

    Attributes:
        probabilities: label -> probability.
        positive: labels at or above their operating threshold.
        positions: the distinct boxes with side and zone (`models.position.locate_boxes`).
        orientation: how left and right were decided.
        lung_field: the estimated lung field (zones are its thirds).
    """

    probabilities: dict[str, float]
    positive: list[str]
    positions: list[BoxPosition]
    orientation: Orientation
    lung_field: LungField
    placed_by_heat: frozenset[str] = frozenset()

    def side(self, label: str) -> str:
        """The finding's side on the image: left, right, bilateral or unknown."""
        from models.position import sides_of

        return sides_of([p for p in self.positions if p.label == label])

    def evidence(self, label: str) -> dict[str, object]:
        """The image evidence for one finding (JSON-ready)."""
        return {
            "probability": self.probabilities.get(label),
            "positive": label in self.positive,
            "boxes": [p.to_dict() for p in self.positions if p.label == label],
            "placed_by": "heatmap" if label in self.placed_by_heat else "boxes",
            "orientation": {
                "image_right": self.orientation.image_right,
                "basis": self.orientation.basis,
                "note": self.orientation.note,
            },
            "lung_field": {
                "x": round(self.lung_field.x, 1),
                "y": round(self.lung_field.y, 1),
                "width": round(self.lung_field.width, 1),
                "height": round(self.lung_field.height, 1),
                "method": self.lung_field.method,
            },
        }


def image_findings(
    probabilities: dict[str, float],
    positive: Sequence[str],
    boxes: Sequence[BoxLike],
    pixels: np.ndarray | None,
    meta: ImageMeta | None,
    *,
    view_position: str | None = None,
    lung_field: LungField | None = None,
    heatmaps: Mapping[str, np.ndarray] | None = None,
) -> ImageFindings:
    """Place a prediction's boxes in the patient.

    Args:
        probabilities, positive, boxes: from `models.predict.Prediction`.
        pixels: the image (rows, columns) for the lung-field estimate; None: the whole
            image (from `meta.rows`/`meta.columns`) is the field.
        meta: the image's metadata (View Position, Patient Orientation), if any.
        view_position: overrides `meta.view_position` (e.g. a CSV column).
        lung_field: an estimate made earlier (when the pixels were dropped); wins over
            `pixels`.
        heatmaps: label -> (h, w) map over the whole image at any resolution
            (`Heatmap.render`): a finding with a map is placed by its strongest evidence
            inside the lung field (`models.position.locate_heat`), positive or not; the
            others by their boxes.
    """
    from models.position import (
        LungField,
        estimate_lung_field,
        locate_boxes,
        locate_heat,
        orientation_of,
    )

    orientation = orientation_of(
        view_position or (meta.view_position if meta else None),
        meta.patient_orientation if meta else None,
    )
    if lung_field is not None:
        lung = lung_field
    elif pixels is not None:
        lung = estimate_lung_field(pixels)
    else:
        cols = float(meta.columns if meta else 0) or 1.0
        rows = float(meta.rows if meta else 0) or 1.0
        lung = LungField(0.0, 0.0, cols, rows, "image")
    if pixels is not None:
        size = (int(pixels.shape[0]), int(pixels.shape[1]))
    else:
        size = (int(meta.rows) if meta else 0, int(meta.columns) if meta else 0)
    placed = []
    by_heat: set[str] = set()
    for label, heat in (heatmaps or {}).items():
        pos = locate_heat(label, heat, size[0], size[1], lung, orientation)
        if pos is not None:
            # The score as the model's boxes carry it (peak heat times the probability,
            # `models.boxes.scored_boxes`), so `cxr ask`, the service and `cxr predict`
            # give one score for one image; a negative finding's place scores low.
            x, y, w, h, peak = pos.box
            p = float(probabilities.get(label, 1.0))
            placed.append(replace(pos, box=(x, y, w, h, round(peak * p, 4))))
            by_heat.add(label)
    placed += locate_boxes(
        [b for b in boxes if b.label in positive and b.label not in by_heat], lung, orientation
    )
    return ImageFindings(
        probabilities=dict(probabilities),
        positive=list(positive),
        positions=placed,
        orientation=orientation,
        lung_field=lung,
        placed_by_heat=frozenset(by_heat),
    )


# Longer side of the display copy the lung field is estimated on (`lung_field_of`): the
# estimate works on a 256 px image whatever the original size.
LUNG_FIELD_SIDE = 256


def lung_field_of(loaded: LoadedImage) -> LungField:
    """The lung field of an image read by `models.image_pipeline.load_for_model` with a
    display copy, in original pixels."""
    from models.position import estimate_lung_field

    if loaded.display is None:
        raise ValueError("the image was loaded without a display copy")
    rows, columns = loaded.display.shape
    field = estimate_lung_field(loaded.display)
    return field.scaled(loaded.meta.columns / columns, loaded.meta.rows / rows)


def rendered_heatmaps(
    heatmaps: Mapping[str, Heatmap], rows: int, columns: int, *, side: int = 128
) -> dict[str, np.ndarray]:
    """Render `Prediction.heatmaps` small (long side `side`) for `image_findings`.

    Args:
        heatmaps: label -> `models.heatmaps.Heatmap`.
        rows, columns: the original image's size (for the aspect ratio).
        side: the rendered long side in pixels.
    """
    if rows <= 0 or columns <= 0:
        return {}
    scale = side / max(rows, columns)
    r, c = max(1, round(rows * scale)), max(1, round(columns * scale))
    return {label: hm.render(r, c) for label, hm in heatmaps.items()}
