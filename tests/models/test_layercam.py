"""LayerCAM heatmaps (issue 9, item 2): aligned with what raised the score, finer than CAM,
and what predictors and `cxr evaluate` use when the model card says so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from models.checkpoint import build_demo_checkpoint, load_checkpoint, save_checkpoint
from models.errors import ModelsError
from models.layercam import _conv_input_grad, _drop_negligible, _split_transition, layercam_maps
from models.network import build_model
from models.pooling import lse_pool
from models.predict import load_predictor


class ShiftedNet(nn.Module):
    """A network whose CAM is one cell off: the failure LayerCAM exists for.

    Stage 1 averages 4x4 blocks (a bright spot lights its own cell); the "transition
    layer" is a 3x3 convolution that reports every cell one cell down and right, as a
    learned last-stage kernel may; the score is LSE pooling of that map.
    """

    def __init__(self) -> None:
        super().__init__()
        self.stage1 = nn.AvgPool2d(4)
        self.transition = nn.Conv2d(1, 1, 3, padding=1, bias=False)
        with torch.no_grad():
            self.transition.weight.zero_()
            self.transition.weight[0, 0, 0, 0] = 1.0  # out(i, j) = in(i - 1, j - 1)

    def prepare_input(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def split_body(self, stage: int) -> tuple[nn.Module, nn.Module]:
        assert stage == 1
        return self.stage1, nn.Identity()

    def forward_head(self, features: torch.Tensor) -> torch.Tensor:
        return lse_pool(features, 10.0)


def test_layercam_finds_the_lesion_where_the_cam_is_one_cell_off() -> None:
    model = ShiftedNet()
    x = torch.zeros(1, 1, 64, 64)
    x[..., 20:24, 36:40] = 1.0  # cell (5, 9) of the 16 x 16 grid
    with torch.no_grad():
        cam = model.transition(model.stage1(x))[0, 0].numpy()
    assert np.unravel_index(cam.argmax(), cam.shape) == (6, 10)  # the CAM's peak is off
    maps = layercam_maps(model, x, [[0]], stage=1, sigma=0.0)
    m = maps[0][0]
    assert m.shape == (16, 16) and m.min() >= 0.0
    assert np.unravel_index(m.argmax(), m.shape) == (5, 9)  # LayerCAM's is on the spot
    assert m.max() > 10 * np.delete(m.ravel(), 5 * 16 + 9).max()


def test_layercam_maps_are_finer_and_only_for_the_labels_asked() -> None:
    torch.manual_seed(0)
    model = build_model(arch="resnet18", num_labels=4, weights=None, transition_channels=8).eval()
    x = torch.rand(3, 1, 64, 96)
    maps = layercam_maps(model, x, [[0, 2], [], [3]])
    assert [sorted(m) for m in maps] == [[0, 2], [], [3]]
    for m in (maps[0][0], maps[0][2], maps[2][3]):
        assert m.shape == (8, 12)  # stage 2: stride 8, twice as fine as the stride-16 CAM
        assert m.dtype == np.float32 and m.min() >= 0.0 and np.isfinite(m).all()
    # Stage 3 of this body is its output: the CAM's own grid.
    assert layercam_maps(model, x[:1], [[1]], stage=3)[0][1].shape == (4, 6)
    assert layercam_maps(model, x, [[], [], []]) == [{}, {}, {}]
    with pytest.raises(ValueError, match="one label list per image"):
        layercam_maps(model, x, [[0]])
    with pytest.raises(ValueError, match="heatmap stage must be in 1..3"):
        layercam_maps(model, x[:1], [[0]], stage=4)
    # No gradients are left behind on the weights.
    assert all(p.grad is None for p in model.parameters())


def _with_method(src: Path, dst: Path, method: str) -> Path:
    ckpt = load_checkpoint(src)
    ckpt.card.heatmap_method = method
    return save_checkpoint(dst, model=ckpt.model, card=ckpt.card)


def test_predictor_uses_the_cards_heatmap_method(tmp_path: Path) -> None:
    src = build_demo_checkpoint(tmp_path / "demo.pt", labels=["Mass", "Nodule"], image_size=64)
    assert load_checkpoint(src).card.heatmap_method == "cam"  # cards from before LayerCAM
    image = np.random.default_rng(1).random((80, 100), dtype=np.float32)
    results = {}
    for method in ("cam", "layercam"):
        predictor = load_predictor(_with_method(src, tmp_path / f"{method}.pt", method))
        predictor.thresholds = {"Mass": 0.0, "Nodule": 2.0}  # Mass positive, Nodule not
        results[method] = predictor.predict([image])[0]
    cam, layer = results["cam"], results["layercam"]
    assert cam.probabilities == layer.probabilities  # the method changes maps, not scores
    assert set(layer.heatmaps) == {"Mass"} and layer.positive == ["Mass"]
    assert cam.heatmaps["Mass"].cam.shape == (2, 2)  # this card: stride 32 at 64 px
    assert layer.heatmaps["Mass"].cam.shape == (8, 8)  # stride 8
    assert layer.heatmaps["Mass"].render().shape == (80, 100)
    assert layer.boxes and all(b.label == "Mass" for b in layer.boxes)
    for b in layer.boxes:
        assert b.x >= 0 and b.x + b.width <= 100 + 1e-6 and b.y + b.height <= 80 + 1e-6


def test_bad_heatmap_settings_in_a_card_are_refused_at_load(tmp_path: Path) -> None:
    src = build_demo_checkpoint(tmp_path / "demo.pt", labels=["Mass"], image_size=64)
    with pytest.raises(ModelsError, match="heatmap_method is 'gradcam'"):
        load_predictor(_with_method(src, tmp_path / "bad.pt", "gradcam"))
    for key, value, message in (("heatmap_stage", 7, "heatmap stage must be in 1..4"),
                                ("heatmap_sigma", float("nan"), "heatmap_sigma is nan"),
                                ("heatmap_sigma", -1.0, "heatmap_sigma is -1.0")):  # fmt: skip
        ckpt = load_checkpoint(_with_method(src, tmp_path / "layer.pt", "layercam"))
        setattr(ckpt.card, key, value)
        bad = save_checkpoint(tmp_path / "bad.pt", model=ckpt.model, card=ckpt.card)
        with pytest.raises(ModelsError, match=message):
            load_predictor(bad)


def test_negligible_gradients_are_dropped_before_they_turn_subnormal() -> None:
    # LSE pooling with r = 10 over cells 10 apart weights the low ones by ~exp(-100): carried
    # back through a network they become subnormal floats, ~20x slower on x86 CPUs.
    features = torch.zeros(1, 1, 4, 4)
    features[0, 0, 0, 0] = 10.0
    features[0, 0, 0, 1] = 9.0
    features.requires_grad_(True)
    (raw,) = torch.autograd.grad(lse_pool(features, 10.0).sum(), features)
    assert 0 < raw[0, 0, 3, 3] < 1e-40  # what reaches the body without the hook
    kept = _drop_negligible(raw)
    assert kept[0, 0, 3, 3] == 0 and kept[0, 0, 0, 0] == raw[0, 0, 0, 0]
    assert kept[0, 0, 0, 1] == raw[0, 0, 0, 1]  # 4.5e-5 of the largest: kept


def test_layercam_maps_match_plain_autograd() -> None:
    torch.manual_seed(0)
    model = build_model(num_labels=3, arch="resnet18", weights=None).eval()
    x = torch.rand(2, 1, 64, 64)
    maps = layercam_maps(model, x, [[0, 2], [1]], stage=2, sigma=0.0)
    head, tail = model.split_body(2)
    with torch.no_grad():
        a = head(model.prepare_input(x))
    a.requires_grad_(True)
    logits = model.forward_head(model.transition(tail(a)))
    for i, c in ((0, 0), (0, 2), (1, 1)):
        (g,) = torch.autograd.grad(logits[i, c], a, retain_graph=True)
        want = (g[i].clamp(min=0) * a[i].detach()).sum(0).clamp(min=0).numpy()
        np.testing.assert_allclose(maps[i][c], want, rtol=1e-4, atol=1e-6 * float(want.max()))


@pytest.mark.parametrize(
    ("kernel", "padding", "active"),
    [(3, 1, 0.1), (3, 0, 0.1), (1, 0, 0.2), (5, 2, 0.05), (3, 1, 0.9), (3, 1, 0.0)],
)
def test_input_gradient_over_the_active_cells_equals_the_dense_one(
    kernel: int, padding: int, active: float
) -> None:
    torch.manual_seed(kernel + padding)
    conv = nn.Conv2d(6, 5, kernel, padding=padding, bias=False)
    size = torch.Size((3, 6, 9, 7))  # non-square, three images
    out_h, out_w = 9 + 2 * padding - kernel + 1, 7 + 2 * padding - kernel + 1
    grad = torch.randn(3, 5, out_h, out_w)
    grad *= (torch.rand(3, 1, out_h, out_w) < active).float()  # whole cells zero
    grad[0, :, 0, 0] = 0.0
    grad[0, 2, 0, 0] = 1.5 if active else 0.0  # one channel alone keeps a cell (a corner)
    want = torch.nn.grad.conv2d_input(size, conv.weight.detach(), grad, padding=padding)
    got = _conv_input_grad(conv, grad, size)
    assert got.shape == size
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # Under bfloat16 autocast the products run in bfloat16 (the result meets bfloat16
    # activations next): float32 out, within bfloat16's rounding of the exact one.
    fast = _conv_input_grad(conv, grad, size, torch.bfloat16)
    assert fast.dtype == torch.float32 and fast.shape == size
    scale = float(want.abs().max()) or 1.0
    assert float((fast - want).abs().max()) <= 0.02 * scale


def test_only_plain_stride_one_transitions_take_the_cell_path() -> None:
    conv, after = _split_transition(build_model(num_labels=2, arch="resnet18").transition)
    assert isinstance(conv, nn.Conv2d) and [type(m) for m in after] == [
        nn.BatchNorm2d,
        nn.ReLU,
    ]
    for odd in (
        nn.Conv2d(4, 4, 3, stride=2, padding=1),
        nn.Conv2d(4, 4, 3, dilation=2, padding=2),
        nn.Conv2d(4, 4, 3, groups=2, padding=1),
        nn.Conv2d(4, 4, 3, padding=1, padding_mode="reflect"),
        nn.Conv2d(4, 4, 3, padding="same"),
        nn.Sequential(nn.BatchNorm2d(4), nn.Conv2d(4, 4, 3, padding=1)),
    ):
        assert _split_transition(odd) == (None, odd)


def test_layercam_through_an_odd_transition_matches_plain_autograd() -> None:
    torch.manual_seed(1)
    model = build_model(num_labels=2, arch="resnet18", weights=None).eval()
    model.transition = nn.Sequential(nn.Conv2d(256, 128, 3, padding=2, dilation=2), nn.ReLU())
    x = torch.rand(1, 1, 64, 64)
    maps = layercam_maps(model, x, [[1]], stage=2, sigma=0.0)
    head, tail = model.split_body(2)
    with torch.no_grad():
        a = head(model.prepare_input(x))
    a.requires_grad_(True)
    (g,) = torch.autograd.grad(model.forward_head(model.transition(tail(a)))[0, 1], a)
    want = (g[0].clamp(min=0) * a[0].detach()).sum(0).clamp(min=0).numpy()
    np.testing.assert_allclose(maps[0][1], want, rtol=1e-4, atol=1e-6 * float(want.max()))


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.7])
@pytest.mark.parametrize("shape", [(1, 1), (3, 40), (40, 3), (7, 5), (128, 128)])
def test_blur_maps_equals_opencv_with_replicated_borders(
    shape: tuple[int, int], sigma: float
) -> None:
    import cv2

    from models.layercam import blur_maps

    rng = np.random.default_rng(int(sigma * 10) + shape[0] * 1000 + shape[1])
    maps = rng.random((3, *shape), dtype=np.float32)
    maps[1] = 0.0
    maps[1][-1, :] = 1.0  # all evidence on the last row: replicated, not pulled to zero
    got = blur_maps(torch.from_numpy(maps.copy()), sigma)
    assert got.shape == (3, *shape) and got.dtype == torch.float32
    for m, blurred in zip(maps, got.numpy(), strict=True):
        want = cv2.GaussianBlur(m, (0, 0), sigmaX=sigma, borderType=cv2.BORDER_REPLICATE)
        np.testing.assert_allclose(blurred, want, rtol=0, atol=1e-6)


def test_blur_maps_without_sigma_or_maps_changes_nothing() -> None:
    from models.layercam import blur_maps

    maps = torch.rand(2, 8, 12)
    assert torch.equal(blur_maps(maps, 0.0), maps)
    empty = blur_maps(torch.zeros(0, 8, 8), 1.0)
    assert empty.shape == (0, 8, 8)


def test_maps_to_host_gives_each_maps_values_for_equal_and_mixed_shapes() -> None:
    from models.layercam import maps_to_host

    torch.manual_seed(2)
    same = [{0: torch.rand(8, 8), 2: torch.rand(8, 8)}, {}, {1: torch.rand(8, 8)}]
    mixed = [{0: torch.rand(8, 8)}, {2: torch.rand(4, 6), 1: torch.rand(8, 8)}, {}]
    for maps in (same, mixed):
        host = maps_to_host(maps)
        assert len(host) == len(maps)
        for per_image, on_device in zip(host, maps, strict=True):
            assert list(per_image) == list(on_device)  # labels kept, in order
            for c, cell in per_image.items():
                assert isinstance(cell, np.ndarray) and cell.dtype == np.float32
                np.testing.assert_array_equal(cell, on_device[c].numpy())
    # Maps of another float type come back as float32 too.
    wide = torch.rand(5, 5, dtype=torch.float64)
    [[(_, cell)]] = [list(m.items()) for m in maps_to_host([{3: wide}])]
    assert cell.dtype == np.float32
    np.testing.assert_array_equal(cell, wide.float().numpy())


def test_maps_to_host_keeps_empty_dicts_empty() -> None:
    from models.layercam import maps_to_host

    assert maps_to_host([]) == []
    assert maps_to_host([{}, {}, {}]) == [{}, {}, {}]
