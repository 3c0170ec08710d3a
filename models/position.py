"""Where a box lies in the patient: side (left/right) and lung zone (upper/middle/lower).

Side. A frontal chest radiograph (View Position PA or AP) is displayed as if facing the
patient: the patient's left is on the image's right. Patient Orientation (0020,0020),
when present, names the patient direction of the image's rows and columns and wins:
its first value `L` means the image's right is the patient's left, `R` that the image
was flipped. A lateral view (`LL`, `RL`, `LATERAL`, or a row direction `A`/`P`) has no
left and right on the image: the side is `unknown`. An image without either element (a
PNG or JPEG) is read by the display convention of frontal views, and the answer says so
(`basis: "convention"`).

Zones. The lung field is estimated from the image itself: the image is smoothed and
split at Otsu's threshold into dark (air, lung) and bright (body, bone, heart); the dark
connected components that do not touch the image border are the lungs (the air outside
the body does); the two largest (or one, when only one is found) give the lung field's
bounding box. Its height is cut in thirds: upper, middle, lower. Its horizontal centre is
the midline. When no lung component is found the whole image is used and the answer says
so (`method: "image"`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

__all__ = [
    "VIEW_POSITIONS",
    "BoxLike",
    "BoxPosition",
    "LungField",
    "Orientation",
    "estimate_lung_field",
    "locate_boxes",
    "locate_heat",
    "orientation_of",
    "sides_of",
]

Side = Literal["left", "right", "bilateral", "unknown"]

_FRONTAL = frozenset({"PA", "AP", "POSTEROANTERIOR", "ANTEROPOSTERIOR", "AP SUPINE", "PA ERECT"})
_LATERAL = frozenset({"LL", "RL", "LAT", "LATERAL", "RLD", "LLD"})
#: The View Position values (DICOM (0018,5101) and common spellings) this module reads.
VIEW_POSITIONS = _FRONTAL | _LATERAL


class BoxLike(Protocol):
    """A box in original image pixels (`models.predict.Box` is one)."""

    @property
    def label(self) -> str: ...
    @property
    def x(self) -> float: ...
    @property
    def y(self) -> float: ...
    @property
    def width(self) -> float: ...
    @property
    def height(self) -> float: ...
    @property
    def score(self) -> float: ...


@dataclass(frozen=True)
class Orientation:
    """Which patient side the image's right shows.

    Attributes:
        image_right: `left` or `right` (the patient's side on the image's right), or None
            when it cannot be known (lateral view, unreadable orientation).
        basis: `patient_orientation`, `view_position`, `convention` (no metadata: the
            display convention of frontal views) or `lateral`.
        note: one sentence saying how it was decided.
    """

    image_right: Literal["left", "right"] | None
    basis: str
    note: str


def orientation_of(
    view_position: str | None = None, patient_orientation: str | None = None
) -> Orientation:
    """Decide the image's left-right from View Position and Patient Orientation.

    Args:
        view_position: (0018,5101), e.g. `PA`, `AP`, `LL`; None when absent.
        patient_orientation: (0020,0020) as `row\\column`, e.g. `L\\F`; None when absent.

    Returns:
        The orientation and how it was decided.
    """
    if patient_orientation:
        row = patient_orientation.replace(" ", "").split("\\")[0].upper()
        if row.startswith("L"):
            return Orientation(
                "left",
                "patient_orientation",
                f"Patient Orientation {row}: image right is patient left",
            )
        if row.startswith("R"):
            return Orientation(
                "right",
                "patient_orientation",
                f"Patient Orientation {row}: image right is patient right (flipped)",
            )
        if row[:1] in ("A", "P", "H", "F"):
            return Orientation(
                None,
                "lateral",
                f"Patient Orientation {row}: the rows run front-back, no left or right",
            )
    view = (view_position or "").strip().upper()
    if view in _FRONTAL:
        return Orientation(
            "left",
            "view_position",
            f"View Position {view}: patient's left shown on the image's right",
        )
    if view in _LATERAL:
        return Orientation(
            None, "lateral", f"View Position {view}: a lateral view has no left or right"
        )
    if view:
        return Orientation(
            None, "view_position", f"View Position {view!r} is not a known frontal view"
        )
    return Orientation(
        "left",
        "convention",
        "no View Position or Patient Orientation: read as a frontal view displayed with "
        "the patient's left on the image's right",
    )


@dataclass(frozen=True)
class LungField:
    """The estimated lung field, in original pixels, and how it was found."""

    x: float
    y: float
    width: float
    height: float
    method: Literal["otsu_components", "image"]

    @property
    def midline(self) -> float:
        """The x coordinate between the two lungs."""
        return self.x + self.width / 2

    def scaled(self, sx: float, sy: float) -> LungField:
        """The same field in coordinates `sx` times wider and `sy` times taller (an estimate
        made on a display copy, put back into original pixels)."""
        return LungField(self.x * sx, self.y * sy, self.width * sx, self.height * sy, self.method)


def estimate_lung_field(pixels: np.ndarray) -> LungField:
    """Estimate the lung field's bounding box from the image (see the module docstring).

    Args:
        pixels: grey image (rows, columns), any range, bright = dense.

    Returns:
        The box in the same pixel coordinates.

    Raises:
        ValueError: `pixels` is not 2-D.
    """
    import cv2

    img = np.asarray(pixels, dtype=np.float32)
    if img.ndim != 2:
        raise ValueError(f"pixels must be a 2-D grey image, got shape {img.shape}")
    rows, cols = img.shape
    whole = LungField(0.0, 0.0, float(cols), float(rows), "image")
    if rows < 16 or cols < 16:
        return whole
    scale = 256 / max(rows, cols)
    small = cv2.resize(
        img,
        (max(8, round(cols * scale)), max(8, round(rows * scale))),
        interpolation=cv2.INTER_AREA,
    )
    lo, hi = float(small.min()), float(small.max())
    if not hi > lo:
        return whole
    u8 = cv2.GaussianBlur(((small - lo) * (255.0 / (hi - lo))).astype(np.uint8), (0, 0), 2.0)
    _, dark = cv2.threshold(u8, 0, 1, cv2.THRESH_BINARY_INV + cv2.THRESH_OTSU)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(dark.astype(np.uint8), connectivity=4)
    h, w = u8.shape
    min_area = 0.01 * h * w
    parts = []
    for i in range(1, n):
        x, y, bw, bh, area = (int(v) for v in stats[i])
        touches = x == 0 or y == 0 or x + bw >= w or y + bh >= h
        if not touches and area >= min_area:
            parts.append((area, x, y, bw, bh))
    if not parts:
        return whole
    parts.sort(reverse=True)
    keep = parts[:2]
    if len(keep) == 2 and keep[1][0] < 0.2 * keep[0][0]:
        keep = keep[:1]
    x0 = min(p[1] for p in keep)
    y0 = min(p[2] for p in keep)
    x1 = max(p[1] + p[3] for p in keep)
    y1 = max(p[2] + p[4] for p in keep)
    return LungField(
        x0 / scale, y0 / scale, (x1 - x0) / scale, (y1 - y0) / scale, "otsu_components"
    )


@dataclass(frozen=True)
class BoxPosition:
    """A box placed in the patient.

    Attributes:
        label: the box's finding.
        side: the patient's side of the box centre, `bilateral` when the box spans both
            lungs, `unknown` when the orientation is unknown.
        zone: upper, middle or lower third of the lung field (of the box centre).
        box: x, y, width, height, score in original pixels.
    """

    label: str
    side: Side
    zone: Literal["upper", "middle", "lower"]
    box: tuple[float, float, float, float, float]

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict."""
        x, y, w, h, s = self.box
        return {
            "label": self.label,
            "side": self.side,
            "zone": self.zone,
            "x": x,
            "y": y,
            "width": w,
            "height": h,
            "score": s,
        }


def _distinct(boxes: Sequence[BoxLike]) -> list[BoxLike]:
    """The innermost box of each nest (a box at a high heat level inside one at a low
    level marks the same place), then those scoring at least half the best."""
    ordered = sorted(boxes, key=lambda b: b.width * b.height)
    kept: list[BoxLike] = []
    for b in ordered:
        cx, cy = b.x + b.width / 2, b.y + b.height / 2
        inside = any(
            k.x <= cx <= k.x + k.width
            and k.y <= cy <= k.y + k.height
            or b.x <= k.x + k.width / 2 <= b.x + b.width
            and b.y <= k.y + k.height / 2 <= b.y + b.height
            for k in kept
        )
        if not inside:
            kept.append(b)
    if not kept:
        return []
    best = max(k.score for k in kept)
    return sorted((k for k in kept if k.score >= 0.5 * best), key=lambda k: -k.score)


def locate_boxes(
    boxes: Sequence[BoxLike], field: LungField, orientation: Orientation
) -> list[BoxPosition]:
    """Place boxes in the patient: side and zone of each distinct box, best first.

    Nested boxes of one finding (heat levels of one component) count once, as the
    innermost; boxes scoring under half the best are left out.

    Args:
        boxes: boxes in original pixels (one or more labels).
        field: the lung field (`estimate_lung_field`).
        orientation: from `orientation_of`.

    Returns:
        One `BoxPosition` per distinct box.
    """
    out: list[BoxPosition] = []
    by_label: dict[str, list[BoxLike]] = {}
    for b in boxes:
        by_label.setdefault(b.label, []).append(b)
    for label, group in by_label.items():
        for b in _distinct(group):
            cx, cy = b.x + b.width / 2, b.y + b.height / 2
            side: Side
            if orientation.image_right is None:
                side = "unknown"
            else:
                half = field.width / 2
                spans_both = (
                    b.x < field.midline - 0.25 * half
                    and b.x + b.width > field.midline + 0.25 * half
                )
                if spans_both:
                    side = "bilateral"
                else:
                    on_right = cx >= field.midline
                    other = "right" if orientation.image_right == "left" else "left"
                    side = orientation.image_right if on_right else other  # type: ignore[assignment]
            rel = (cy - field.y) / field.height if field.height > 0 else 0.5
            zone: Literal["upper", "middle", "lower"] = (
                "upper" if rel < 1 / 3 else ("middle" if rel < 2 / 3 else "lower")
            )
            out.append(BoxPosition(label, side, zone, (b.x, b.y, b.width, b.height, b.score)))
    return out


def locate_heat(
    label: str,
    heat: np.ndarray,
    rows: int,
    columns: int,
    field: LungField,
    orientation: Orientation,
    *,
    level: float = 0.7,
) -> BoxPosition | None:
    """Place a finding by its heatmap: where its strongest evidence lies inside the lung field.

    The heat outside the lung field (widened by a tenth on each side) is ignored: the
    lesions asked about lie in the lungs, and a weakly supervised map often has stray heat
    at the image border. The pixels at or above `level` times the in-field maximum form the
    region: its heat-weighted centre gives the side and zone, its bounding box the box. It
    is `bilateral` when each side holds at least a third of the region's heat.

    Args:
        label: the finding.
        heat: (h, w) map over the whole image, any resolution, bright = evidence.
        rows, columns: the original image's size (the map is scaled to it).
        field: the lung field, in original pixels.
        orientation: from `orientation_of`.
        level: the region's share of the maximum.

    Returns:
        The position (box in original pixels, score the in-field maximum), or None for a
        flat or empty map.
    """
    h = np.asarray(heat, dtype=np.float32)
    if h.ndim != 2 or h.size == 0 or rows <= 0 or columns <= 0:
        return None
    sy, sx = rows / h.shape[0], columns / h.shape[1]
    pad_x, pad_y = field.width * 0.1, field.height * 0.1
    x0 = max(0, int((field.x - pad_x) / sx))
    x1 = min(h.shape[1], int(np.ceil((field.x + field.width + pad_x) / sx)))
    y0 = max(0, int((field.y - pad_y) / sy))
    y1 = min(h.shape[0], int(np.ceil((field.y + field.height + pad_y) / sy)))
    inside = h[y0:y1, x0:x1]
    if inside.size == 0:
        return None
    top = float(inside.max())
    low = float(inside.min())
    if not top > low:
        return None
    region = inside >= low + level * (top - low)
    ys, xs = np.nonzero(region)
    weights = inside[ys, xs] - low
    cx = (float((xs * weights).sum() / weights.sum()) + x0 + 0.5) * sx
    cy = (float((ys * weights).sum() / weights.sum()) + y0 + 0.5) * sy
    bx0, bx1 = (xs.min() + x0) * sx, (xs.max() + x0 + 1) * sx
    by0, by1 = (ys.min() + y0) * sy, (ys.max() + y0 + 1) * sy
    side: Side
    if orientation.image_right is None:
        side = "unknown"
    else:
        px = (xs + x0 + 0.5) * sx
        right_share = float(weights[px >= field.midline].sum() / weights.sum())
        if min(right_share, 1 - right_share) >= 1 / 3:
            side = "bilateral"
        else:
            other: Side = "right" if orientation.image_right == "left" else "left"
            side = orientation.image_right if cx >= field.midline else other
    rel = (cy - field.y) / field.height if field.height > 0 else 0.5
    zone: Literal["upper", "middle", "lower"] = (
        "upper" if rel < 1 / 3 else ("middle" if rel < 2 / 3 else "lower")
    )
    box = (
        round(float(bx0), 1),
        round(float(by0), 1),
        round(float(bx1 - bx0), 1),
        round(float(by1 - by0), 1),
        round(top, 4),
    )
    return BoxPosition(label, side, zone, box)


def sides_of(positions: Sequence[BoxPosition]) -> Side:
    """One side for a finding's boxes: left, right, bilateral (both), or unknown."""
    sides = {p.side for p in positions}
    if not sides or "unknown" in sides:
        return "unknown"
    if "bilateral" in sides or {"left", "right"} <= sides:
        return "bilateral"
    return next(iter(sides))
