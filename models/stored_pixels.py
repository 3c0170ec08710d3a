"""A decoded grey image as the integers it was stored with, and the map from code to grey.

A radiograph's grey value is a function of its stored code alone: the DICOM modality LUT,
the VOI LUT or window, MONOCHROME1 inversion and min/max scaling are all per pixel. So the
map is computed once per code (4,096 values for a 12-bit image) instead of once per pixel
(five million for a 2500 x 2048 one), and a full-size float image is made only when a
caller asks for one (`StoredPixels.unit`).

`StoredPixels.fit` is the prediction path's fit into the model input: the map is applied
before the area-averaging resize, as `models.transforms.fit_square` does on the float
image, except where the map is a line clamped at both ends (a rescale, then a linear
window: the usual case), where clamping the codes and resizing them first gives the same
result (up to float rounding) without a table lookup per pixel.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from models.geometry import Geometry, ResizeMode

__all__ = ["ClampedLine", "StoredPixels", "UNIT_CODES"]

# What `fit` returns: grey in [0, 1] quantized to uint16 (steps of 1.5e-5: a prediction
# moves by less than 1e-4), half the bytes of float32 between processes and to a device.
UNIT_CODES = 65535

ValueMap = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class ClampedLine:
    """`StoredPixels.fit`'s usual map: output code = slope * clamp(code) + intercept,
    computed after the resize (the clamp before it); bounds may be infinite."""

    slope: float
    intercept: float
    code_low: float
    code_high: float


@dataclass(frozen=True)
class StoredPixels:
    """Stored codes and their grey values.

    Attributes:
        codes: (rows, columns) uint8, uint16 or int16, as decoded.
        offset: the code whose value is `values[0]`.
        values: float64 value of each code in [offset, offset + len(values)) after the
            modality and VOI LUTs (not yet scaled).
        low, high: the smallest and largest value of a code present in the image (they map
            to 0 and 1; every pixel is 0 when high <= low).
        invert: MONOCHROME1: 1 - the scaled value.
    """

    codes: np.ndarray
    offset: int
    values: np.ndarray
    low: float
    high: float
    invert: bool = False

    @classmethod
    def from_codes(
        cls, codes: np.ndarray, values_of: ValueMap, *, invert: bool = False
    ) -> StoredPixels:
        """Evaluate `values_of` on every code from the smallest to the largest present.

        Args:
            codes: (rows, columns) integer image.
            values_of: per-code map, called once on a (1, K) array of the codes' dtype.
            invert: MONOCHROME1.

        Raises:
            ValueError: not a 2-D uint8/uint16/int16 image, or non-finite values.
        """
        if codes.ndim != 2 or codes.dtype not in (np.uint8, np.uint16, np.int16):
            raise ValueError(f"expected 2-D uint8/uint16/int16 codes, got {codes.dtype}")
        lo_code, hi_code = int(codes.min()), int(codes.max())
        grid = np.arange(lo_code, hi_code + 1, dtype=codes.dtype)[None]
        values = np.asarray(values_of(grid), np.float64).reshape(-1)
        if values.shape != (hi_code - lo_code + 1,) or not np.isfinite(values).all():
            raise ValueError("the code-to-value map is not finite over the codes present")
        steps = np.diff(values)
        if (steps >= 0).all() or (steps <= 0).all():  # monotonic: extremes at the end codes
            low, high = float(min(values[0], values[-1])), float(max(values[0], values[-1]))
        else:  # a non-monotonic LUT: the extremes of the codes actually present
            present = values[(codes - lo_code).astype(np.intp, copy=False)]
            low, high = float(present.min()), float(present.max())
        return cls(codes, lo_code, values, low, high, invert)

    @classmethod
    def linear(cls, codes: np.ndarray, low: float, high: float) -> StoredPixels:
        """Codes whose grey is `(code - low) / (high - low)` (bitmaps)."""
        return cls.from_codes(codes, lambda c: c.astype(np.float64)).with_window(low, high)

    def with_window(self, low: float, high: float) -> StoredPixels:
        """The same codes and values, scaled by another [low, high]."""
        return StoredPixels(self.codes, self.offset, self.values, low, high, self.invert)

    @property
    def shape(self) -> tuple[int, int]:
        rows, columns = self.codes.shape
        return int(rows), int(columns)

    def _scale(self) -> tuple[np.float32, np.float32]:
        """(subtract, multiply) that take a value to [0, 1], as float32 like the old path."""
        if not self.high > self.low:
            return np.float32(0.0), np.float32(0.0)
        return np.float32(self.low), np.float32(1.0 / (self.high - self.low))

    def unit(self) -> np.ndarray:
        """The full-size grey image, float32 (rows, columns) in [0, 1]."""
        out = self._gather()
        lo, mul = self._scale()
        out -= lo
        out *= mul
        if self.invert:
            np.subtract(np.float32(1.0), out, out=out)
        return out

    def unit_codes(self) -> np.ndarray:
        """The full-size grey image as uint16 (grey times `UNIT_CODES`): `unit` in half the
        bytes and without float arithmetic per pixel (the training loader's integer input)."""
        lo, mul = self._scale()
        table = (self.values - float(lo)) * float(mul)
        if self.invert:
            table = 1.0 - table
        table = np.clip(table, 0.0, 1.0) * UNIT_CODES + 0.5
        return self._gather(table).astype(np.uint16)

    def _gather(self, table_values: np.ndarray | None = None) -> np.ndarray:
        """float32 value of every pixel (of `values`, or of another per-code table laid out
        like it): one lookup indexed by the codes themselves.

        The table covers every code of the dtype up to the largest present (int16 codes
        index it through their uint16 view), so no shifted copy of the codes is made.
        """
        table, through_uint16 = self.gather_table(
            self.values if table_values is None else table_values
        )
        out: np.ndarray = table[self.codes.view(np.uint16) if through_uint16 else self.codes]
        return out

    def _clamped_affine(self) -> tuple[float, float, float, float] | None:
        """(slope, intercept, low code, high code) when every value is the affine map of the
        code clamped to [low code, high code] (bounds may be infinite), else None.

        That is the shape of the usual chain: a rescale slope and intercept, then a linear
        VOI window, which is affine between its edges and flat outside them. Clamping the
        code first is the same function, so it can be applied before the resize with two
        cheap passes (convert, clip) instead of a table lookup per pixel.
        """
        v = self.values
        if v.size == 1:
            return 0.0, float(v[0]), -np.inf, np.inf
        v_min, v_max = float(v.min()), float(v.max())
        span = max(v_max - v_min, 1e-12)
        tol = 1e-7 * span
        inner = np.flatnonzero((v > v_min + tol) & (v < v_max - tol))
        if inner.size >= 2:  # the sloped part between the flat ones
            i0, i1 = int(inner[0]), int(inner[-1])
        else:  # no flat part to speak of: the line through the end codes
            i0, i1 = 0, v.size - 1
        slope = (v[i1] - v[i0]) / (i1 - i0)
        if slope == 0.0:
            return None
        index = np.arange(v.size, dtype=np.float64)
        fitted = np.clip(v[i0] + slope * (index - i0), v_min, v_max)
        if float(np.abs(fitted - v).max()) > tol:
            return None
        intercept = float(v[i0] - slope * (i0 + self.offset))
        # Where the line meets the flat values, as codes; outside the codes present the
        # clamp changes nothing, so the bounds only matter where the values are flat.
        at_min = (v_min - intercept) / slope
        at_max = (v_max - intercept) / slope
        low, high = min(at_min, at_max), max(at_min, at_max)
        if low <= self.offset:
            low = -np.inf
        if high >= self.offset + v.size - 1:
            high = np.inf
        return float(slope), intercept, float(low), float(high)

    def fit(self, size: int, mode: ResizeMode | str) -> tuple[np.ndarray, Geometry]:
        """Fit into the model input on the host: the image's part only, without the padding.
        (`models.device_fit.fit_stored` does the same on a CUDA device where it pays.)

        Returns:
            uint16 (geometry.height, geometry.width) grey in [0, 1] times `UNIT_CODES`,
            and the `Geometry` (`models.predict` pads on the device).
        """
        import cv2

        from models.geometry import Geometry

        rows, columns = self.shape
        geo = Geometry.fit(rows, columns, size, mode)
        shrink = rows > geo.height or columns > geo.width
        plan = self.fit_plan()
        interp = cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
        if isinstance(plan, ClampedLine):
            codes = self.codes.astype(np.float32)
            if np.isfinite(plan.code_low) or np.isfinite(plan.code_high):
                np.clip(codes, np.float32(plan.code_low), np.float32(plan.code_high), out=codes)
            small = self._resize(codes, geo, interp)
            out = small * np.float32(plan.slope)
            out += np.float32(plan.intercept)
            np.clip(out, 0.0, UNIT_CODES, out=out)
            return out.astype(np.uint16), geo
        small = self._resize(self._gather(plan), geo, interp)
        small += np.float32(0.5)
        return small.astype(np.uint16), geo

    def fit_plan(self) -> ClampedLine | np.ndarray:
        """How `fit` maps codes to output codes: a `ClampedLine` applied around the resize,
        or a per-code table (laid out like `values`) applied before it.

        Where the map is a line clamped at both ends (a rescale, then a linear window: the
        usual case), clamping the codes and resizing them first gives the same result (up
        to float rounding) without a table lookup per pixel.
        """
        lo, mul = self._scale()
        affine = self._clamped_affine()
        if affine is not None:
            # code -> clamped code -> value -> [0, 1] -> inverted -> output codes: the clamp,
            # then one affine map applied to the small image after the resize.
            slope, intercept, code_low, code_high = affine
            a = float(slope) * float(mul)
            b = (float(intercept) - float(lo)) * float(mul)
            if self.invert:
                a, b = -a, 1.0 - b
            return ClampedLine(a * UNIT_CODES, b * UNIT_CODES + 0.5, code_low, code_high)
        # The table maps each code to its output value before the resize; its values lie in
        # [0, UNIT_CODES], and so do their averages: only rounding is left.
        table = (self.values - float(lo)) * float(mul)
        if self.invert:
            table = 1.0 - table
        out: np.ndarray = (np.clip(table, 0.0, 1.0) * UNIT_CODES).astype(np.float32)
        return out

    def gather_table(self, table_values: np.ndarray) -> tuple[np.ndarray, bool]:
        """(table, through_uint16): the lookup `_gather` indexes with the codes, float32;
        `through_uint16`: index it with the codes' uint16 view (int16 codes)."""
        values = table_values.astype(np.float32)
        if self.codes.dtype == np.int16:
            table = np.zeros(65536, np.float32)
            codes = np.arange(self.offset, self.offset + values.size, dtype=np.int16)
            table[codes.view(np.uint16)] = values
            return table, True
        table = np.zeros(self.offset + values.size, np.float32)
        table[self.offset :] = values
        return table, False

    @staticmethod
    def _resize(image: np.ndarray, geo: Geometry, interp: int) -> np.ndarray:
        import cv2

        if image.shape == (geo.height, geo.width):
            return image
        out: np.ndarray = cv2.resize(image, (geo.width, geo.height), interpolation=interp)
        return out
