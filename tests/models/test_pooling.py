"""LSE pooling (paper Eq. 3) and the pooling layer."""

from __future__ import annotations

import pytest
import torch

from models.pooling import GlobalPool, lse_pool


def _maps() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(2, 3, 5, 7, dtype=torch.float64)


def test_lse_pool_tends_to_max_as_r_grows() -> None:
    x = _maps()
    top = x.amax(dim=(2, 3))
    gaps = [float((top - lse_pool(x, r)).abs().max()) for r in (1.0, 10.0, 100.0, 1000.0)]
    assert gaps == sorted(gaps, reverse=True)
    # The gap is at most log(S)/r: S = 35 positions.
    assert gaps[-1] < torch.log(torch.tensor(35.0)).item() / 1000 + 1e-12


def test_lse_pool_tends_to_mean_as_r_shrinks() -> None:
    x = _maps()
    mean = x.mean(dim=(2, 3))
    assert torch.allclose(lse_pool(x, 1e-6), mean, atol=1e-5)
    assert float((lse_pool(x, 1e-2) - mean).abs().max()) < float(
        (lse_pool(x, 1.0) - mean).abs().max()
    )


def test_lse_pool_is_stable_for_large_values() -> None:
    x = torch.full((1, 1, 4, 4), 1e4)
    x[0, 0, 0, 0] = 2e4
    out = lse_pool(x, 10.0)
    assert torch.isfinite(out).all()
    # Naive log(mean(exp(r x)))/r overflows here; the stable form stays within [mean, max].
    assert 1e4 <= out.item() <= 2e4
    assert torch.isfinite(lse_pool(torch.full((1, 1, 2, 2), -1e6), 50.0)).all()


def test_lse_pool_gradients_flow() -> None:
    x = _maps().requires_grad_()
    lse_pool(x, 10.0).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    # d/dx of LSE is a softmax over positions: each map's gradient sums to 1.
    assert torch.allclose(x.grad.sum(dim=(2, 3)), torch.ones(2, 3, dtype=torch.float64))


def test_global_pool_kinds_and_validation() -> None:
    x = _maps().float()
    assert torch.allclose(GlobalPool("avg")(x), x.mean(dim=(2, 3)))
    assert torch.allclose(GlobalPool("max")(x), x.amax(dim=(2, 3)))
    assert GlobalPool("lse", 10.0)(x).shape == (2, 3)
    with pytest.raises(ValueError, match="r > 0"):
        GlobalPool("lse", 0.0)
    with pytest.raises(ValueError, match="pooling"):
        GlobalPool("median")  # type: ignore[arg-type]
