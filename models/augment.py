"""Training augmentation per batch, on the training device, with torch ops only.

The loader ships integer images already fitted to the input size (`models.data.FittedDataset`);
`BatchAugment` turns a batch of them into augmented float images where the model is, with
torch ops only, so one code path runs on CPU and on CUDA:

    images (N, 1, S, S) uint8/uint16 -> float [0, 1]
      -> random affine (rotation, scale, shift) and horizontal flip, one `grid_sample`
         (bilinear, reflected border)
      -> gamma -> contrast and brightness, clipped to [0, 1]

It draws the parameters of `models.transforms.TrainTransform` from the same distributions
and applies them in the same order, including OpenCV's rotation centre (s/2, s/2) in pixel
centre coordinates and its BORDER_REFLECT (edge pixel repeated), so the two agree up to
interpolation rounding. Parameters are drawn on the CPU from a `torch.Generator`, so a seed
gives the same augmentation on every device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["AugmentParams", "BatchAugment", "sampling_matrices", "to_unit_float"]


def to_unit_float(images: torch.Tensor) -> torch.Tensor:
    """Integer images -> float32 in [0, 1] (divided by the dtype's maximum); floats pass through.

    Args:
        images: (N, 1, H, W) uint8, uint16 or floating point.

    Returns:
        (N, 1, H, W) float32 (a float input is returned as is).
    """
    if images.is_floating_point():
        return images
    top = float(torch.iinfo(images.dtype).max)
    out: torch.Tensor = images.to(torch.float32).div_(top)
    return out


@dataclass(frozen=True)
class AugmentParams:
    """The random draws for a batch, one value per image, each a (N,) float64 CPU tensor.

    Attributes:
        angle: rotation in degrees (positive: counter-clockwise, as OpenCV).
        zoom: scale factor.
        shift_x, shift_y: translation in fractions of the side.
        flip: 1.0 where the image is mirrored left-right, else 0.0.
        gamma: the exponent applied to the image (exp of a uniform draw).
        contrast: contrast factor around 0.5.
        brightness: offset added after the contrast.
    """

    angle: torch.Tensor
    zoom: torch.Tensor
    shift_x: torch.Tensor
    shift_y: torch.Tensor
    flip: torch.Tensor
    gamma: torch.Tensor
    contrast: torch.Tensor
    brightness: torch.Tensor


def _uniform(n: int, low: float, high: float, generator: torch.Generator | None) -> torch.Tensor:
    return low + (high - low) * torch.rand(n, generator=generator, dtype=torch.float64)


@dataclass(frozen=True)
class BatchAugment:
    """`TrainTransform`'s augmentation for a whole batch on its device.

    Attributes (the defaults are `TrainTransform`'s):
        rotate_deg: rotation drawn from U(-rotate_deg, rotate_deg) degrees.
        scale: zoom drawn from U(*scale).
        shift: translation per axis drawn from U(-shift, shift) x side.
        contrast: contrast factor 1 + U(-contrast, contrast).
        brightness: offset U(-brightness, brightness) (fixed at 0.05 in `TrainTransform`).
        gamma: exponent exp(U(-gamma, gamma)).
        hflip: probability of a horizontal flip.
    """

    rotate_deg: float = 7.0
    scale: tuple[float, float] = (0.92, 1.08)
    shift: float = 0.05
    contrast: float = 0.15
    brightness: float = 0.05
    gamma: float = 0.15
    hflip: float = 0.5

    def sample(self, n: int, generator: torch.Generator | None = None) -> AugmentParams:
        """Draw the parameters of `n` images on the CPU (each from its own stream of draws,
        so the flip probability changes no other parameter)."""
        return AugmentParams(
            angle=_uniform(n, -self.rotate_deg, self.rotate_deg, generator),
            zoom=_uniform(n, self.scale[0], self.scale[1], generator),
            shift_x=_uniform(n, -self.shift, self.shift, generator),
            shift_y=_uniform(n, -self.shift, self.shift, generator),
            flip=(torch.rand(n, generator=generator, dtype=torch.float64) < self.hflip).double(),
            gamma=torch.exp(_uniform(n, -self.gamma, self.gamma, generator)),
            contrast=1.0 + _uniform(n, -self.contrast, self.contrast, generator),
            brightness=_uniform(n, -self.brightness, self.brightness, generator),
        )

    def __call__(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Augment a batch: draw parameters (`sample`) and apply them (`apply`).

        Args:
            images: (N, 1, S, S) uint8, uint16 or float in [0, 1], on any device.
            generator: CPU generator for the draws (None: torch's global one).

        Returns:
            (N, 1, S, S) float32 in [0, 1] on the images' device.
        """
        return self.apply(images, self.sample(images.shape[0], generator))

    def apply(self, images: torch.Tensor, params: AugmentParams) -> torch.Tensor:
        """Apply drawn parameters: affine + flip (one resampling), gamma, contrast, brightness.

        Args:
            images: (N, 1, H, W) uint8, uint16 or float in [0, 1].
            params: from `sample(N)`.

        Returns:
            (N, 1, H, W) float32 in [0, 1], on the images' device.

        Raises:
            ValueError: images not (N, 1, H, W), or params for another batch size.
        """
        if images.ndim != 4 or images.shape[1] != 1:
            raise ValueError(f"expected (N, 1, H, W) images, got shape {tuple(images.shape)}")
        n, _, h, w = images.shape
        if params.angle.shape[0] != n:
            raise ValueError(f"parameters for {params.angle.shape[0]} images, batch has {n}")
        device = images.device
        # One (N, 9) copy per batch: 6 matrix entries and gamma, contrast, brightness. From
        # pinned memory on CUDA, so the copy does not wait for the previous step to finish.
        per_image = torch.cat(
            [
                sampling_matrices(params, h, w).reshape(n, 6),
                torch.stack([params.gamma, params.contrast, params.brightness], dim=1),
            ],
            dim=1,
        ).to(torch.float32)
        if device.type == "cuda":
            per_image = per_image.pin_memory()
        per_image = per_image.to(device, non_blocking=True)
        theta = per_image[:, :6].view(n, 2, 3)
        gamma, contrast, brightness = per_image[:, 6:].reshape(n, 3, 1, 1).unbind(1)
        x = to_unit_float(images).to(torch.float32)
        x = F.grid_sample(
            x, _grid(theta, h, w), mode="bilinear", padding_mode="reflection", align_corners=False
        )
        # Bilinear weights are convex and the input lies in [0, 1], so no clip is needed
        # before the power (TrainTransform clips; up to float rounding this is the same).
        x = x.pow_(gamma[:, None])
        # (x - 0.5) * c + 0.5 + b, in place.
        x = x.mul_(contrast[:, None]).add_((0.5 - 0.5 * contrast + brightness)[:, None])
        return x.clamp_(0.0, 1.0)

    def record(self) -> dict[str, Any]:
        """The model card's description of this augmentation."""
        return {
            "where": "per batch on the training device (models.augment.BatchAugment)",
            "order": "affine (bilinear, reflected border) -> horizontal flip -> gamma -> "
            "contrast/brightness, clipped to [0, 1]",
            "rotate_deg": self.rotate_deg,
            "scale": list(self.scale),
            "shift": self.shift,
            "hflip": self.hflip,
            "gamma": self.gamma,
            "contrast": self.contrast,
            "brightness": self.brightness,
        }


def sampling_matrices(params: AugmentParams, height: int, width: int) -> torch.Tensor:
    """The (N, 2, 3) float64 matrices that map output to input positions in `grid_sample`'s
    normalised coordinates (align_corners=False) for drawn parameters.

    As `TrainTransform`: OpenCV's forward matrix `getRotationMatrix2D((w/2, h/2), angle,
    zoom)` plus the shift, in pixel-centre coordinates; `warpAffine` samples the source at
    its inverse; the flip mirrors the output (x -> w - 1 - x).
    """
    n = params.angle.shape[0]
    rad = params.angle * (math.pi / 180.0)
    alpha, beta = params.zoom * torch.cos(rad), params.zoom * torch.sin(rad)
    cx, cy = width / 2.0, height / 2.0
    forward = torch.zeros(n, 3, 3, dtype=torch.float64)
    forward[:, 0, 0], forward[:, 0, 1] = alpha, beta
    forward[:, 1, 0], forward[:, 1, 1] = -beta, alpha
    forward[:, 0, 2] = (1 - alpha) * cx - beta * cy + params.shift_x * width
    forward[:, 1, 2] = beta * cx + (1 - alpha) * cy + params.shift_y * height
    forward[:, 2, 2] = 1.0
    # Output pixel -> the pixel it shows before the flip: x -> w - 1 - x where flipped.
    mirror = torch.eye(3, dtype=torch.float64).repeat(n, 1, 1)
    mirror[:, 0, 0] = 1.0 - 2.0 * params.flip
    mirror[:, 0, 2] = params.flip * (width - 1)
    # Pixel centre p <-> normalised u = (2p + 1) / side - 1.
    to_unit = torch.tensor(
        [[2.0 / width, 0.0, 1.0 / width - 1.0], [0.0, 2.0 / height, 1.0 / height - 1.0],
         [0.0, 0.0, 1.0]], dtype=torch.float64,
    )  # fmt: skip
    theta: torch.Tensor = to_unit @ torch.linalg.inv(forward) @ mirror @ torch.linalg.inv(to_unit)
    return theta[:, :2, :]


def _grid(theta: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """`F.affine_grid(theta, (N, 1, H, W), align_corners=False)` by broadcasting a row and a
    column term: on CPU the library's batched matmul over every pixel costs 3x more."""
    device = theta.device
    xs = (torch.arange(width, device=device, dtype=torch.float32) * 2 + 1) / width - 1
    ys = (torch.arange(height, device=device, dtype=torch.float32) * 2 + 1) / height - 1
    grid = torch.empty(theta.shape[0], height, width, 2, device=device, dtype=torch.float32)
    for k in range(2):  # k = 0: x, 1: y of the input position for each output pixel
        along_row = theta[:, k, 0, None] * xs  # (N, W)
        along_column = theta[:, k, 1, None] * ys + theta[:, k, 2, None]  # (N, H)
        torch.add(along_row[:, None, :], along_column[:, :, None], out=grid[..., k])
    return grid
