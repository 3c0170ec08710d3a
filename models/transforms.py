"""Train and eval presets: grey float image (rows, columns) in [0, 1] -> (1, S, S) tensor.

Fitting an image into the model's square input (issue 9, item 3):

- "letterbox" (default since model cards record it): scale so the LONGER side is S,
  keep the aspect ratio, centre it and pad the rest with 0 (black). Real radiographs are
  2500x2048, 1955x1841, ...: stretching them distorts the heart and costophrenic angles.
- "stretch": the whole image resized to S x S. Checkpoints whose card does not record
  `preprocessing["resize_mode"]` were trained this way and keep it.

Nothing is cropped, so a model position maps back to the original image exactly through a
`Geometry` (scale and offset per axis). The model applies the ImageNet normalisation itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from models.geometry import RESIZE_MODES, Geometry, ResizeMode

__all__ = [
    "RESIZE_MODES",
    "EvalTransform",
    "Geometry",
    "ResizeMode",
    "TrainTransform",
    "fit_long_side",
    "fit_square",
    "fit_square_integer",
    "preprocessing_record",
    "resize_mode_of",
    "resize_square",
]


def resize_mode_of(preprocessing: Mapping[str, Any] | None) -> ResizeMode:
    """The resize mode a model card's preprocessing records; "stretch" when absent (old cards).

    Raises:
        ValueError: the card names an unknown mode.
    """
    mode = (preprocessing or {}).get("resize_mode", "stretch")
    if mode not in RESIZE_MODES:
        raise ValueError(f"model card resize_mode is {mode!r}; expected one of {RESIZE_MODES}")
    return mode  # type: ignore[no-any-return]


def preprocessing_record(mode: ResizeMode | str = "letterbox") -> dict[str, Any]:
    """The `preprocessing` entry of a model card for a resize mode."""
    if mode not in RESIZE_MODES:
        raise ValueError(f"resize mode must be one of {RESIZE_MODES}, got {mode!r}")
    how = (
        "longer side scaled to image_size, aspect ratio kept, centred, padded with 0"
        if mode == "letterbox"
        else "whole image stretched to image_size x image_size"
    )
    return {
        "input": "grey float in [0, 1]: DICOM modality LUT -> VOI LUT/window -> "
        "MONOCHROME1 inversion -> min/max; bitmaps min/max",
        "resize_mode": mode,
        "resize": f"{how} (area interpolation when shrinking)",
        "normalisation": "ImageNet mean/std on the grey channel repeated x3 (inside the model)",
    }


def _resize(pixels: np.ndarray, rows: int, columns: int) -> np.ndarray:
    import cv2

    src = np.asarray(pixels, np.float32)
    if src.shape == (rows, columns):
        return np.ascontiguousarray(src)
    shrink = src.shape[0] > rows or src.shape[1] > columns
    interp = cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
    return np.asarray(cv2.resize(src, (columns, rows), interpolation=interp), np.float32)


def fit_square(
    pixels: np.ndarray, size: int, mode: ResizeMode | str = "letterbox"
) -> tuple[np.ndarray, Geometry]:
    """Fit a (rows, columns) float image into a (size, size) float32 square.

    Args:
        pixels: grey image, any size.
        size: output side S.
        mode: "letterbox" (keep aspect ratio, pad with 0) or "stretch".

    Returns:
        The (size, size) float32 image and the `Geometry` that maps it back.

    Raises:
        ValueError: `pixels` is not 2-D, or an unknown mode.
    """
    if np.ndim(pixels) != 2:
        raise ValueError(f"expected a (rows, columns) image, got shape {np.shape(pixels)}")
    rows, columns = pixels.shape
    geo = Geometry.fit(rows, columns, size, mode)
    content = _resize(pixels, geo.height, geo.width)
    if geo.height == size and geo.width == size:
        return content, geo
    out = np.zeros((size, size), np.float32)
    out[geo.top : geo.top + geo.height, geo.left : geo.left + geo.width] = content
    return out, geo


def resize_square(pixels: np.ndarray, size: int) -> np.ndarray:
    """Stretch a (rows, columns) float image to (size, size): area averaging when shrinking."""
    return fit_square(pixels, size, "stretch")[0]


def fit_long_side(pixels: np.ndarray, side: int) -> np.ndarray:
    """Downscale so the longer side is at most `side`, keeping the aspect ratio (no padding).

    Used for caches and display copies: letterboxing or stretching the result to `side`
    gives (up to rounding) what it gives on the original.
    """
    rows, columns = pixels.shape
    if max(rows, columns) <= side:
        return np.ascontiguousarray(pixels, dtype=np.float32)
    geo = Geometry.fit(rows, columns, side, "letterbox")
    return _resize(pixels, geo.height, geo.width)


def fit_square_integer(
    pixels: np.ndarray,
    size: int,
    mode: ResizeMode | str = "letterbox",
    *,
    low: float,
    high: float,
    dtype: type[np.unsignedinteger[Any]] = np.uint8,
) -> tuple[np.ndarray, Geometry]:
    """`fit_square` for integer images, staying in integers: the training loader's fit.

    The stored integers are resized first (area averaging when shrinking, as `fit_square`),
    then the window [low, high] is stretched to [0, max of `dtype`] through a lookup table,
    so no full-size float copy is made. Up to rounding, the result divided by the maximum
    is `fit_square` of `(pixels - low) / (high - low)`.

    Args:
        pixels: (rows, columns) uint8 or uint16, e.g. `models.images.IntegerImage.pixels`.
        size: output side S.
        mode: "letterbox" (pad with 0) or "stretch".
        low, high: stored values that map to 0 and to the maximum (all 0 when high <= low).
        dtype: np.uint8 or np.uint16.

    Returns:
        The (size, size) image of `dtype` and its `Geometry`.

    Raises:
        ValueError: not a 2-D uint8/uint16 image, another dtype asked for, or an unknown mode.
    """
    import cv2

    if np.ndim(pixels) != 2 or pixels.dtype not in (np.uint8, np.uint16):
        raise ValueError(
            f"expected a (rows, columns) uint8 or uint16 image, got {pixels.dtype} "
            f"of shape {np.shape(pixels)}"
        )
    if dtype not in (np.uint8, np.uint16):
        raise ValueError(f"dtype must be np.uint8 or np.uint16, got {dtype}")
    rows, columns = pixels.shape
    geo = Geometry.fit(rows, columns, size, mode)
    content = pixels
    if content.shape != (geo.height, geo.width):
        shrink = rows > geo.height or columns > geo.width
        interp = cv2.INTER_AREA if shrink else cv2.INTER_LINEAR
        content = cv2.resize(content, (geo.width, geo.height), interpolation=interp)
    top = float(np.iinfo(dtype).max)
    if not (pixels.dtype == dtype and low == 0 and high == top):
        codes = np.arange(np.iinfo(pixels.dtype).max + 1, dtype=np.float64)
        scale = top / (high - low) if high > low else 0.0
        lut = np.clip((codes - low) * scale + 0.5, 0.0, top).astype(dtype)
        # OpenCV's table lookup is ~10x numpy's indexing for 8-bit images.
        content = cv2.LUT(content, lut) if lut.size == 256 else lut[content]
    if geo.height == size and geo.width == size:
        # Writable and owned (a decoder's read-only buffer would make torch warn).
        return np.require(content, requirements=["C", "W", "O"]), geo
    out = np.zeros((size, size), dtype)
    out[geo.top : geo.top + geo.height, geo.left : geo.left + geo.width] = content
    return out, geo


@dataclass(frozen=True)
class EvalTransform:
    """Deterministic preset: fit into (size, size) -> tensor (1, size, size)."""

    size: int
    resize: ResizeMode = "letterbox"

    def __call__(self, pixels: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(fit_square(pixels, self.size, self.resize)[0])[None]


@dataclass(frozen=True)
class TrainTransform:
    """Mild augmentation: the same fit as `EvalTransform` (letterbox by default), then a
    random affine (rotation, scale, shift), a horizontal flip with probability `hflip`
    (CheXNet's 0.5 by default), and brightness/contrast and gamma jitter.

    The flip puts the heart on the wrong side of half the images. Without it a model may
    learn a finding's edge on one side only, and nothing in its validation AUC shows it: on
    the phantom benchmark (seed 7) one boxed 30/30 pneumothoraces in one lung and 0/30 in
    the other (IoBB-0.5 0.50; 0.67 with flips). `hflip=0` keeps every image as acquired.

    `models.train` no longer runs this per image on the loader's CPUs: it runs the same
    augmentation, with the same parameters and order, per batch on the training device
    (`models.augment.BatchAugment`, issue 19). This stays as the reference it is tested
    against, and for callers that want one augmented float image.
    """

    size: int
    rotate_deg: float = 7.0
    scale: tuple[float, float] = (0.92, 1.08)
    shift: float = 0.05
    contrast: float = 0.15
    gamma: float = 0.15
    hflip: float = 0.5
    resize: ResizeMode = "letterbox"

    def __call__(self, pixels: np.ndarray, rng: np.random.Generator | None = None) -> torch.Tensor:
        import cv2

        if rng is None:
            # From torch's RNG, which DataLoader seeds differently in each worker process.
            rng = np.random.default_rng(int(torch.randint(0, 2**31 - 1, ()).item()))
        g = rng
        img = fit_square(pixels, self.size, self.resize)[0]
        s = self.size
        angle = g.uniform(-self.rotate_deg, self.rotate_deg)
        zoom = g.uniform(*self.scale)
        m = np.asarray(cv2.getRotationMatrix2D((s / 2, s / 2), angle, zoom), np.float64)
        m[:, 2] += g.uniform(-self.shift, self.shift, size=2) * s
        img = cv2.warpAffine(img, m, (s, s), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
        if g.random() < self.hflip:  # drawn every time: the later draws do not depend on it
            img = img[:, ::-1]
        img = np.clip(img, 0.0, 1.0) ** np.exp(g.uniform(-self.gamma, self.gamma))
        c = 1.0 + g.uniform(-self.contrast, self.contrast)
        img = np.clip((img - 0.5) * c + 0.5 + g.uniform(-0.05, 0.05), 0.0, 1.0)
        return torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32))[None]
