"""Where an original image lies inside the model's square input, and how it got there.

Kept apart from `models.transforms` (which needs torch) so that decoding workers and the
image pipeline's CPU side import no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["RESIZE_MODES", "Geometry", "ResizeMode"]

ResizeMode = Literal["letterbox", "stretch"]
RESIZE_MODES: tuple[str, ...] = ("letterbox", "stretch")


@dataclass(frozen=True)
class Geometry:
    """Where an original image lies inside the model's square input.

    Coordinates are continuous pixel-edge coordinates: original pixel q covers [q, q + 1).
    The original's extent [0, columns) x [0, rows) maps linearly onto the input rectangle
    [left, left + width) x [top, top + height); the rest of the input is padding.

    Attributes:
        rows, columns: the original image size.
        size: the model input side S.
        top, left: offset of the image inside the input, in input pixels.
        height, width: the image's size inside the input, in input pixels.
    """

    rows: int
    columns: int
    size: int
    top: int
    left: int
    height: int
    width: int

    @classmethod
    def fit(cls, rows: int, columns: int, size: int, mode: ResizeMode | str) -> Geometry:
        """The geometry `fit_square` uses for a (rows, columns) image.

        Raises:
            ValueError: unknown mode or a non-positive size.
        """
        if rows < 1 or columns < 1 or size < 1:
            raise ValueError(f"need positive sizes, got {rows}x{columns} into {size}")
        if mode == "stretch":
            return cls(rows, columns, size, 0, 0, size, size)
        if mode != "letterbox":
            raise ValueError(f"resize mode must be one of {RESIZE_MODES}, got {mode!r}")
        scale = size / max(rows, columns)
        height = min(size, max(1, round(rows * scale)))
        width = min(size, max(1, round(columns * scale)))
        return cls(rows, columns, size, (size - height) // 2, (size - width) // 2, height, width)

    @property
    def shrinks_both(self) -> bool:
        """The fit shrinks the image, enlarging neither side (an area average: the fit a
        device can do, `models.device_fit`)."""
        return (self.rows >= self.height and self.columns >= self.width
                and (self.rows > self.height or self.columns > self.width))  # fmt: skip

    @property
    def scale(self) -> tuple[float, float]:
        """(sx, sy): original pixels per input pixel along x and y."""
        return self.columns / self.width, self.rows / self.height

    def to_input(self, x: float, y: float) -> tuple[float, float]:
        """Original edge coordinates -> input edge coordinates."""
        sx, sy = self.scale
        return self.left + x / sx, self.top + y / sy

    def to_original(self, x: float, y: float) -> tuple[float, float]:
        """Input edge coordinates -> original edge coordinates (inverse of `to_input`)."""
        sx, sy = self.scale
        return (x - self.left) * sx, (y - self.top) * sy

    def to_dict(self) -> dict[str, int]:
        """JSON-ready fields."""
        return {
            "rows": self.rows,
            "columns": self.columns,
            "size": self.size,
            "top": self.top,
            "left": self.left,
            "height": self.height,
            "width": self.width,
        }
