"""Heatmaps kept at class-activation-map resolution and projected on demand.

A `Heatmap` is one label's map as the network produced it, (S, S) cells, plus the
`Geometry` that places the model input on the original image. It costs S * S * 2 bytes
(a 1024 input at stride 32 gives 2 KiB), whatever the original size: a 10000 x 10000
upload no longer yields 400 MB float32 maps per label. Display-size heatmaps and boxes are
computed from it when needed, at the resolution they are needed at (issue 7, item 5).

Geometry (see `models.cam`). In a torchvision ResNet every strided layer is "same"-padded,
so map cell i is centred on input pixel `stride * i` (pixel-index coordinates), where
`stride = S_in / cells` is taken from the map's own shape (16, 32, or 8 with a dilated
last stage). An output pixel j of a grid of n pixels laid over the original's extent
along one axis has its centre at input pixel-index coordinate

    p = offset + (j + 0.5) * length / n - 0.5

(offset, length: where the original lies in the input, from `Geometry`), i.e. cell
coordinate u = p / stride, clamped to [0, cells - 1] and linearly interpolated. With the
stretch geometry (offset 0, length S_in) this is exactly `models.cam.interpolation_matrix`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from models.boxes import DEFAULT_BOX_THRESHOLDS, Box, boxes_from_heatmap, suppress_overlapping
from models.transforms import Geometry

__all__ = ["Heatmap", "axis_weights", "boxes_from_cam", "boxes_from_levels", "project_cam"]


def axis_weights(n_out: int, cells: int, input_size: int, offset: int, length: int) -> np.ndarray:
    """Linear interpolation weights from `cells` map cells to `n_out` output pixels.

    Args:
        n_out: output pixels laid over the original image along this axis.
        cells: map cells along this axis.
        input_size: model input side (stride = input_size / cells).
        offset, length: the original's position and extent in input pixels on this axis.

    Returns:
        float32 (n_out, cells) matrix whose rows sum to 1.
    """
    stride = input_size / cells
    p = offset + (np.arange(n_out, dtype=np.float64) + 0.5) * length / n_out - 0.5
    u = np.clip(p / stride, 0.0, cells - 1)
    lo = np.floor(u).astype(np.int64)
    hi = np.minimum(lo + 1, cells - 1)
    frac = u - lo
    w = np.zeros((n_out, cells), dtype=np.float64)
    index = np.arange(n_out)
    np.add.at(w, (index, lo), 1.0 - frac)
    np.add.at(w, (index, hi), frac)
    return w.astype(np.float32)


def project_cam(cam: np.ndarray, geometry: Geometry, rows: int, columns: int) -> np.ndarray:
    """Project (..., S_r, S_c) maps onto a (rows, columns) grid over the original image.

    Args:
        cam: maps at network resolution (not normalised), any float dtype.
        geometry: where the original lies in the model input.
        rows, columns: output grid; any size (display size, the input content size, or
            the original size itself).

    Returns:
        float32 (..., rows, columns) maps (not normalised).
    """
    cells_r, cells_c = cam.shape[-2:]
    g = geometry
    wy = axis_weights(rows, cells_r, g.size, g.top, g.height)
    wx = axis_weights(columns, cells_c, g.size, g.left, g.width)
    out: np.ndarray = wy @ np.asarray(cam, np.float32) @ wx.T
    return out


def _normalise(m: np.ndarray) -> np.ndarray:
    lo, hi = float(m.min()), float(m.max())
    return (m - lo) / (hi - lo) if hi > lo else np.zeros_like(m)


def boxes_from_cam(
    cam: np.ndarray,
    geometry: Geometry,
    *,
    label: str,
    thresholds: Sequence[int] = DEFAULT_BOX_THRESHOLDS,
) -> list[Box]:
    """The paper's boxes (threshold, connected components) in ORIGINAL pixel coordinates,
    as a reader should see them: one box per region, none finer than the map.

    The map is projected onto the image's own area of the model input (height x width
    input pixels, padding excluded), thresholded there, and each box is scaled by the
    geometry: box edges land on original pixel edges up to one input pixel. A box smaller
    than one map cell (area below stride x stride input pixels) is dropped: the map cannot
    place anything that finely, and such specks sit at the edges of blobs. Nested and
    overlapping boxes are merged by `models.boxes.suppress_overlapping` (NMS by IoBB).

    Args:
        cam: (S_r, S_c) map (positive evidence, not normalised).
        geometry: where the original lies in the model input.
        label: label name put on each box.
        thresholds: [0, 255] levels of the min/max normalised map.

    Returns:
        Boxes (x, y, width, height in original pixels), highest score first.
    """
    grid = project_cam(cam, geometry, geometry.height, geometry.width)
    return boxes_from_levels(
        grid, geometry, cells=cam.shape[-2:], label=label, thresholds=thresholds
    )


def boxes_from_levels(
    grid: np.ndarray,
    geometry: Geometry,
    *,
    cells: tuple[int, ...],
    label: str,
    thresholds: Sequence[int] = DEFAULT_BOX_THRESHOLDS,
) -> list[Box]:
    """`boxes_from_cam` from the map already projected onto the image's part of the input
    (`models.predict` projects and scales a batch of maps on the model's device).

    Args:
        grid: (geometry.height, geometry.width) map, any range (uint8 [0, 255] is used as is).
        geometry: where the original lies in the model input.
        cells: the map's (rows, columns) at network resolution.
        label: label name put on each box.
        thresholds: [0, 255] levels of the min/max normalised map.
    """
    cell = (geometry.size / cells[0]) * (geometry.size / cells[1])  # input px
    boxes = boxes_from_heatmap(
        grid, label=label, thresholds=thresholds, scale=geometry.scale, min_extent=cell - 1e-6
    )
    return suppress_overlapping(boxes)


@dataclass(frozen=True)
class Heatmap:
    """One label's class activation map at network resolution, and where it lies.

    Attributes:
        cam: float16 (S_r, S_c) positive evidence scaled to [0, 1] by its maximum.
        geometry: maps the model input back onto the original image.
    """

    cam: np.ndarray
    geometry: Geometry

    @classmethod
    def from_cam(cls, cam: np.ndarray, geometry: Geometry) -> Heatmap:
        """Store a (S_r, S_c) map compactly (scaling by the maximum changes no rendering)."""
        m = np.asarray(cam, np.float32)
        peak = float(m.max()) if m.size else 0.0
        scaled = m / peak if peak > 0 else np.zeros_like(m)
        return cls(cam=scaled.astype(np.float16), geometry=geometry)

    def render(self, rows: int | None = None, columns: int | None = None) -> np.ndarray:
        """The heatmap over the whole original image at a chosen size, min/max scaled.

        Args:
            rows, columns: output size; default the original size (mind the memory for
                huge images: pass a display size instead).

        Returns:
            float32 (rows, columns) in [0, 1].
        """
        g = self.geometry
        out = project_cam(self.cam, g, rows or g.rows, columns or g.columns)
        return _normalise(out)
