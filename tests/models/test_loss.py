"""The paper's weighted cross-entropy (Eq. 1)."""

from __future__ import annotations

import math

import pytest
import torch

from models.loss import compute_loss, weighted_bce


def test_weighted_bce_matches_eq1_by_hand() -> None:
    logits = torch.tensor([[0.0, 2.0], [-1.0, 1.0]])
    targets = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    f = torch.sigmoid(logits)
    # |P| = 1, |N| = 3: beta_P = 4/1, beta_N = 4/3.
    by_hand = 4.0 * -math.log(f[0, 0]) + (4.0 / 3.0) * (
        -math.log(1 - f[0, 1]) - math.log(1 - f[1, 0]) - math.log(1 - f[1, 1])
    )
    assert weighted_bce(logits, targets).item() == pytest.approx(by_hand / 4, rel=1e-5)


def test_weighted_bce_guards_batch_without_positives() -> None:
    logits = torch.tensor([[0.5, -0.5]], requires_grad=True)
    targets = torch.zeros(1, 2)
    loss = weighted_bce(logits, targets)
    assert torch.isfinite(loss)
    # With no positives beta_N = 1: plain BCE on negatives.
    plain = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets)
    assert loss.item() == pytest.approx(plain.item(), rel=1e-6)
    loss.backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()
    assert torch.isfinite(weighted_bce(logits, torch.ones(1, 2)))


def test_compute_loss_dispatch() -> None:
    logits, targets = torch.zeros(2, 3), torch.ones(2, 3)
    assert compute_loss(logits, targets, "bce").item() == pytest.approx(math.log(2), rel=1e-6)
    with pytest.raises(ValueError, match="weighted"):
        compute_loss(logits, targets, "focal")  # type: ignore[arg-type]
