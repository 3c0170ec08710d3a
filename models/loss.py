"""Losses for multi-label training (Wang et al. 2017, section 3.3)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

__all__ = ["LossName", "compute_loss", "weighted_bce"]

LossName = Literal["weighted", "bce"]


def weighted_bce(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The paper's weighted cross-entropy (Eq. 1), averaged over the N x C entries.

    L = beta_P * sum_{y=1} -ln f(x) + beta_N * sum_{y=0} -ln(1 - f(x)), with
    beta_P = (|P| + |N|) / |P| and beta_N = (|P| + |N|) / |N| counted over the batch.
    A batch with no positive (or no negative) entry has an empty sum there; its beta is
    set to 0 instead of dividing by zero.

    Args:
        logits: (N, C) raw scores.
        targets: (N, C) 0/1.

    Returns:
        Scalar loss.
    """
    t = targets.float()
    total = float(t.numel())
    n_pos = t.sum()
    n_neg = total - n_pos
    beta_p = torch.where(n_pos > 0, total / n_pos.clamp(min=1), torch.zeros_like(n_pos))
    beta_n = torch.where(n_neg > 0, total / n_neg.clamp(min=1), torch.zeros_like(n_neg))
    per_entry = F.binary_cross_entropy_with_logits(logits.float(), t, reduction="none")
    weights = t * beta_p + (1 - t) * beta_n
    return (weights * per_entry).mean()


def compute_loss(logits: torch.Tensor, targets: torch.Tensor, kind: LossName) -> torch.Tensor:
    """Dispatch: "weighted" (Eq. 1) or "bce" (plain mean binary cross-entropy)."""
    if kind == "weighted":
        return weighted_bce(logits, targets)
    if kind == "bce":
        return F.binary_cross_entropy_with_logits(logits.float(), targets.float())
    raise ValueError(f"loss must be 'weighted' or 'bce', got {kind!r}")
