"""Train and eval presets: grey float image (rows, columns) in [0, 1] -> (1, S, S) tensor.

The whole image is resized to S x S (no crop), so a model position maps back to
the original image by scaling alone (see `models.cam`). The model applies the
ImageNet normalisation itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["EvalTransform", "TrainTransform", "resize_square"]


def resize_square(pixels: np.ndarray, size: int) -> np.ndarray:
    """Resize a (rows, columns) float image to (size, size): area averaging when shrinking."""
    import cv2

    rows, columns = pixels.shape
    if rows == size and columns == size:
        return np.ascontiguousarray(pixels, dtype=np.float32)
    interp = cv2.INTER_AREA if rows > size or columns > size else cv2.INTER_LINEAR
    return cv2.resize(np.asarray(pixels, np.float32), (size, size), interpolation=interp)


@dataclass(frozen=True)
class EvalTransform:
    """Deterministic preset: resize to (size, size) -> tensor (1, size, size)."""

    size: int

    def __call__(self, pixels: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(resize_square(pixels, self.size))[None]


@dataclass(frozen=True)
class TrainTransform:
    """Mild, anatomy-preserving augmentation (no horizontal flip: the heart is on the left).

    Random affine (rotation, scale, shift), then brightness/contrast and gamma jitter.
    """

    size: int
    rotate_deg: float = 7.0
    scale: tuple[float, float] = (0.92, 1.08)
    shift: float = 0.05
    contrast: float = 0.15
    gamma: float = 0.15

    def __call__(self, pixels: np.ndarray, rng: np.random.Generator | None = None) -> torch.Tensor:
        import cv2

        if rng is None:
            # From torch's RNG, which DataLoader seeds differently in each worker process.
            rng = np.random.default_rng(int(torch.randint(0, 2**31 - 1, ()).item()))
        g = rng
        img = resize_square(pixels, self.size)
        s = self.size
        angle = g.uniform(-self.rotate_deg, self.rotate_deg)
        zoom = g.uniform(*self.scale)
        m = np.asarray(cv2.getRotationMatrix2D((s / 2, s / 2), angle, zoom), np.float64)
        m[:, 2] += g.uniform(-self.shift, self.shift, size=2) * s
        img = cv2.warpAffine(img, m, (s, s), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
        img = np.clip(img, 0.0, 1.0) ** np.exp(g.uniform(-self.gamma, self.gamma))
        c = 1.0 + g.uniform(-self.contrast, self.contrast)
        img = np.clip((img - 0.5) * c + 0.5 + g.uniform(-0.05, 0.05), 0.0, 1.0)
        return torch.from_numpy(np.ascontiguousarray(img, dtype=np.float32))[None]
