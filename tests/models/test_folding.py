"""Batch norm folded into the convolutions for inference: same outputs, same heatmaps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from models.folding import fold_batchnorm
from models.layercam import layercam_maps
from models.network import build_model


def _trained_looking(arch: str, **kwargs: object) -> nn.Module:
    """A random model whose batch norms are not the identity (as after training)."""
    torch.manual_seed(0)
    model = build_model(num_labels=3, arch=arch, weights=None, **kwargs)  # type: ignore[arg-type]
    for bn in model.modules():
        if isinstance(bn, nn.BatchNorm2d):
            bn.running_mean.uniform_(-0.5, 0.5)  # type: ignore[union-attr]
            bn.running_var.uniform_(0.5, 2.0)  # type: ignore[union-attr]
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.2, 0.2)
    return model.eval()


@pytest.mark.parametrize(
    ("arch", "kwargs"),
    [("resnet18", {}), ("resnet50", {"transition_channels": 64})],
)
def test_folded_model_gives_the_same_logits(arch: str, kwargs: dict[str, object]) -> None:
    model = _trained_looking(arch, **kwargs)
    x = torch.rand(2, 1, 64, 64)
    with torch.no_grad():
        want = model(x)
    norms = sum(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    assert fold_batchnorm(model) == norms > 0
    assert not any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    with torch.no_grad():
        torch.testing.assert_close(model(x), want, rtol=1e-4, atol=1e-4)


def test_folded_model_gives_the_same_layercam_maps() -> None:
    plain, folded = _trained_looking("resnet18"), _trained_looking("resnet18")
    fold_batchnorm(folded)
    x = torch.rand(2, 1, 64, 64)
    want = layercam_maps(plain, x, [[0, 2], [1]], stage=2, sigma=0.0)
    got = layercam_maps(folded, x, [[0, 2], [1]], stage=2, sigma=0.0)
    for i, c in ((0, 0), (0, 2), (1, 1)):
        scale = float(want[i][c].max())
        np.testing.assert_allclose(got[i][c], want[i][c], rtol=1e-3, atol=1e-4 * scale)


def test_only_a_batch_norm_right_after_a_convolution_is_folded() -> None:
    kept = nn.Sequential(nn.BatchNorm2d(3), nn.Conv2d(3, 3, 1), nn.ReLU(), nn.BatchNorm2d(3))
    assert fold_batchnorm(kept.eval()) == 0
    assert [type(m) for m in kept] == [nn.BatchNorm2d, nn.Conv2d, nn.ReLU, nn.BatchNorm2d]
    live = nn.Sequential(nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3, track_running_stats=False))
    assert fold_batchnorm(live.eval()) == 0  # normalises by each batch's statistics


def test_a_model_in_training_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="eval mode"):
        fold_batchnorm(nn.Sequential(nn.Conv2d(1, 1, 1), nn.BatchNorm2d(1)))
