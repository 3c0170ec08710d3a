"""Global pooling of the transition layer's maps (Wang et al. 2017, section 3.2).

Log-Sum-Exp pooling interpolates between average pooling (r -> 0) and max pooling
(r -> infinity); the paper found it the most robust choice for localization.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

__all__ = ["GlobalPool", "PoolingName", "avg_pool", "lse_pool", "max_pool"]

PoolingName = Literal["lse", "avg", "max"]


def lse_pool(x: torch.Tensor, r: float = 10.0) -> torch.Tensor:
    """Log-Sum-Exp pooling over the spatial dimensions, Eq. 3 of the paper.

    x_p = x* + (1/r) log( (1/S) sum_ij exp(r (x_ij - x*)) ), with x* = max_ij x_ij, which
    never overflows however large r * x gets.

    Args:
        x: (N, D, H, W) activations.
        r: sharpness, > 0. Large r approaches max pooling, small r average pooling.

    Returns:
        (N, D) pooled activations.

    Raises:
        ValueError: r is not positive.
    """
    if r <= 0:
        raise ValueError(f"lse_pool: r must be > 0, got {r}")
    flat = x.flatten(2)
    x_star = flat.amax(dim=2, keepdim=True)
    # logsumexp - log(S) == log(mean(exp)); logsumexp itself is max-shifted, so this is Eq. 3.
    # log(S) as a Python number: a tensor made on the device here is a host-to-device copy,
    # which waits for the whole forward pass queued before it (a sync per batch on CUDA).
    lse = torch.logsumexp(r * (flat - x_star), dim=2) - math.log(flat.shape[2])
    return x_star.squeeze(2) + lse / r


def avg_pool(x: torch.Tensor) -> torch.Tensor:
    """Average over the spatial dimensions: (N, D, H, W) -> (N, D)."""
    return x.mean(dim=(2, 3))


def max_pool(x: torch.Tensor) -> torch.Tensor:
    """Maximum over the spatial dimensions: (N, D, H, W) -> (N, D)."""
    return x.amax(dim=(2, 3))


class GlobalPool(nn.Module):
    """Global pooling layer: (N, D, H, W) -> (N, D) by `lse`, `avg` or `max`."""

    def __init__(self, kind: PoolingName = "lse", r: float = 10.0) -> None:
        super().__init__()
        if kind not in ("lse", "avg", "max"):
            raise ValueError(f"pooling must be 'lse', 'avg' or 'max', got {kind!r}")
        if kind == "lse" and r <= 0:
            raise ValueError(f"LSE pooling needs r > 0, got {r}")
        self.kind = kind
        self.r = r

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "lse":
            # In fp32: exp/log of bf16 activations under autocast loses too much precision.
            return lse_pool(x.float(), self.r)
        return avg_pool(x) if self.kind == "avg" else max_pool(x)

    def extra_repr(self) -> str:
        return f"kind={self.kind!r}" + (f", r={self.r}" if self.kind == "lse" else "")
