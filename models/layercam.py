"""Finer, better-aligned heatmaps: LayerCAM at an earlier body stage (Jiang et al. 2021).

The paper's class activation map (`models.cam`) lives on the transition layer's grid
(stride 16 or 32) and shows WHERE THE SCORE WAS POOLED FROM. Nothing ties that place to the
lesion: the 3x3 convolutions of the last stage and of the transition layer may learn to
report a lesion one or two cells away from it, and weak supervision never corrects it,
since the image-level score is the same. On the phantom benchmark (issue 9) the nodule
heatmaps peaked about 1.2 cells up and left of every nodule: AUC 0.99, yet IoBB-0.5
accuracy 0.04.

LayerCAM follows the score back instead: with A the activations of body stage k (stage
2: stride 8, twice as fine as the default CAM) and g = d score / d A,

    M = ReLU( sum over channels of ReLU(g) * A )

i.e. the features that raised this label's score, where they are, then a Gaussian blur
of `sigma` cells that joins the fragments a finer map breaks a large finding into. On the
same model: nodule IoBB-0.5 0.04 -> 0.98, mean over the five labels 0.70 -> 0.91, IoU-0.3
0.31 -> 0.54. The map costs a graph of the later stages during the forward pass and one
backward per label asked for, so `models.predict` computes it only for the labels it
shows (the positive ones by default).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.grad import conv2d_input

if TYPE_CHECKING:
    from models.cuda_graphs import LayerCamGraphs

__all__ = [
    "HEATMAP_METHODS",
    "blur_maps",
    "check_heatmap_settings",
    "forward_with_layercam",
    "layercam_chunk",
    "layercam_maps",
    "maps_to_host",
]

HEATMAP_METHODS: tuple[str, ...] = ("cam", "layercam")

# Images per pass with gradients: the later stages' graph of a 1024 px ResNet-50 costs
# about a gigabyte per image, so large inputs go a few at a time: two at 1024 px in host
# memory, sixteen on a GPU (16 GB of its memory; small passes leave a GPU idle).
_GRAPH_PIXELS = 8 * 512 * 512
_GRAPH_PIXELS_CUDA = 64 * 512 * 512

Chooser = Callable[[int, torch.Tensor], Sequence[Sequence[int]]]


def check_heatmap_settings(model: torch.nn.Module, method: str, stage: int, sigma: float) -> None:
    """Refuse a model card's heatmap settings that would fail on every image, up front.

    Raises:
        ValueError: an unknown method, a stage the model's body does not have, or a blur
            outside 0-16 cells (NaN included).
    """
    if method not in HEATMAP_METHODS:
        raise ValueError(
            f"heatmap_method is {method!r}; expected one of {', '.join(HEATMAP_METHODS)}"
        )
    if method != "layercam":
        return
    model.split_body(stage)  # type: ignore[operator]
    if not 0.0 <= sigma <= 16.0:
        raise ValueError(f"heatmap_sigma is {sigma!r}; expected 0 to 16 cells")


def forward_with_layercam(
    model: torch.nn.Module,
    x: torch.Tensor,
    choose: Chooser,
    *,
    stage: int = 2,
    sigma: float = 0.5,
    autocast: Callable[[], contextlib.AbstractContextManager[Any]] = contextlib.nullcontext,
    graphs: LayerCamGraphs | None = None,
) -> tuple[torch.Tensor, list[dict[int, torch.Tensor]]]:
    """One forward pass that also yields LayerCAM maps for labels chosen from its logits.

    The early stages run without gradients; the later ones keep their graph, so each map
    costs one backward (batched over the images that want a map for that slot), not a
    second forward.

    Args:
        model: a `ChestNet` (uses `split_body`, `prepare_input`, `transition`, `forward_head`).
        x: (N, 1, H, W) model input in [0, 1].
        choose: (offset of the chunk in the batch, its logits (n, C), detached) -> for each
            of the n images, the label indices to map (may be empty).
        stage: body stage whose activations are weighted (1-4; 2 gives stride 8).
        sigma: Gaussian blur of each map, in cells (0: none).
        autocast: context for the forward pass (bf16 autocast on CUDA).
        graphs: CUDA graphs of the body stages (`models.cuda_graphs`), for the chunk shapes
            they hold; others, and None, run eagerly.

    Returns:
        (logits (N, C) float32, for each image label index -> float32 (S, S) map on x's
        device, >= 0, not normalised, at the stage's resolution; `maps_to_host` copies
        them in one go).

    Raises:
        ValueError: a bad stage, or `choose` not returning one list per image.
    """
    head, tail = model.split_body(stage)  # type: ignore[operator]
    conv, after = _split_transition(model.transition)  # type: ignore[arg-type]
    chunk = layercam_chunk(x)
    all_logits: list[torch.Tensor] = []
    maps: list[dict[int, torch.Tensor]] = []
    for start in range(0, x.shape[0], chunk):
        part = x[start : start + chunk]
        graphed = graphs.stages(part) if graphs is not None else None
        # The early stages per chunk too: at 1024 px their activations are large as well.
        if graphed is not None:
            early = graphed.early(part)
        else:
            with torch.no_grad(), autocast():
                early = head(model.prepare_input(part))  # type: ignore[operator]
        with torch.enable_grad():
            a = early.requires_grad_(True)
            if graphed is not None:
                body = graphed.tail(a)
            with autocast():
                if graphed is None:
                    body = tail(a)
                if conv is None:
                    cut = body
                else:
                    # The graph is cut at the transition convolution's output: its input
                    # gradient is computed by `_conv_input_grad`, over the cells that carry one.
                    with torch.no_grad():
                        cut = conv(body)
                    cut.requires_grad_(True)
                # A copy: `after` may open with an in-place ReLU (batch norm folded away).
                logits = model.forward_head(after(cut.clone()))  # type: ignore[operator]
            wanted = choose(start, logits.detach().float())
            if len(wanted) != a.shape[0]:
                raise ValueError(
                    f"need one label list per image: {len(wanted)} for {a.shape[0]} images"
                )
            found: list[dict[int, torch.Tensor]] = [{} for _ in wanted]
            slots = max((len(w) for w in wanted), default=0)
            for k in range(slots):
                # Images are independent in eval mode: one backward serves the k-th label
                # of every image at once.
                pairs = [(i, w[k]) for i, w in enumerate(wanted) if len(w) > k]
                score = torch.stack([logits[i, c] for i, c in pairs]).float().sum()
                more = k + 1 < slots
                (g_cut,) = torch.autograd.grad(score, cut, retain_graph=more or conv is None)
                g_cut = _drop_negligible(g_cut)
                g_body = (
                    g_cut if conv is None
                    else _conv_input_grad(conv, g_cut, body.shape, body.dtype)
                )  # fmt: skip
                # A scalar to differentiate: `grad_outputs` would import sympy (0.3 s, cold).
                carried = (body * g_body.to(body.dtype)).float().sum()
                (g,) = torch.autograd.grad(carried, a, retain_graph=more)
                m = (g.float().clamp(min=0) * a.detach().float()).sum(dim=1).clamp(min=0)
                # The maps stay where they were made: a copy to the host here would wait
                # for this backward before the next one is queued.
                blurred = blur_maps(m[[i for i, _ in pairs]], sigma)
                for (i, c), cell in zip(pairs, blurred, strict=True):
                    found[i][c] = cell
        all_logits.append(logits.detach().float())
        maps.extend(found)
    return torch.cat(all_logits), maps


def maps_to_host(maps: Sequence[dict[int, torch.Tensor]]) -> list[dict[int, np.ndarray]]:
    """`forward_with_layercam`'s maps as float32 host arrays, in one copy (one device sync)."""
    keys = [(i, c) for i, per_image in enumerate(maps) for c in per_image]
    out: list[dict[int, np.ndarray]] = [{} for _ in maps]
    if not keys:
        return out
    shapes = {tuple(maps[i][c].shape) for i, c in keys}
    if len(shapes) == 1:
        stacked = torch.stack([maps[i][c] for i, c in keys]).float().cpu().numpy()
        for (i, c), cell in zip(keys, stacked, strict=True):
            out[i][c] = cell
    else:  # chunks of another size (not made by one pass): one copy each
        for i, c in keys:
            out[i][c] = maps[i][c].float().cpu().numpy()
    return out


def blur_maps(maps: torch.Tensor, sigma: float) -> torch.Tensor:
    """Gaussian blur of `sigma` cells over (n, rows, columns) maps, on their device.

    The kernel is OpenCV's for float images (`cv2.GaussianBlur` with a size derived from
    sigma: 2 * round(4 sigma) + 1 taps), applied along rows then columns with replicated
    borders, so evidence at the image edge is not pulled towards zero.
    """
    if sigma <= 0 or maps.numel() == 0:
        return maps
    taps = _gaussian_taps(float(sigma), maps.device)
    k = taps.numel()
    x = maps.float().unsqueeze(1)
    x = F.pad(x, (k // 2, k // 2, k // 2, k // 2), mode="replicate")
    x = F.conv2d(x, taps.view(1, 1, 1, k))
    x = F.conv2d(x, taps.view(1, 1, k, 1))
    return x.squeeze(1)


@functools.cache
def _gaussian_taps(sigma: float, device: torch.device) -> torch.Tensor:
    """The kernel, kept on `device`: a copy from host memory on every call would wait for
    the work queued before it (a device sync per map slot)."""
    import cv2

    size = int(round(sigma * 4 * 2 + 1)) | 1  # OpenCV's choice for float images
    taps = torch.from_numpy(cv2.getGaussianKernel(size, sigma, cv2.CV_64F).ravel()).float()
    return taps.to(device)


def layercam_chunk(x: torch.Tensor) -> int:
    """Images of `x`'s size that one pass with gradients takes (`forward_with_layercam`
    splits a larger batch)."""
    budget = _GRAPH_PIXELS_CUDA if x.is_cuda else _GRAPH_PIXELS
    return max(1, budget // max(1, x.shape[-2] * x.shape[-1]))


def layercam_maps(
    model: torch.nn.Module,
    x: torch.Tensor,
    wanted: Sequence[Sequence[int]],
    *,
    stage: int = 2,
    sigma: float = 0.5,
) -> list[dict[int, np.ndarray]]:
    """LayerCAM maps of body stage `stage` for chosen labels of each image.

    Args:
        model: a `ChestNet`.
        x: (N, 1, H, W) model input in [0, 1].
        wanted: for each of the N images, the label indices to map (may be empty).
        stage: body stage whose activations are weighted (1-4; 2 gives stride 8).
        sigma: Gaussian blur of the map, in cells (0: none).

    Returns:
        For each image, label index -> float32 (S, S) map, >= 0, not normalised, at the
        stage's resolution (H / stride of that stage).

    Raises:
        ValueError: `wanted` does not have one entry per image, or a bad stage.
    """
    if len(wanted) != x.shape[0]:
        raise ValueError(f"need one label list per image: {len(wanted)} for {x.shape[0]} images")
    if not any(wanted):
        return [{} for _ in wanted]

    def choose(start: int, logits: torch.Tensor) -> Sequence[Sequence[int]]:
        return wanted[start : start + logits.shape[0]]

    return maps_to_host(forward_with_layercam(model, x, choose, stage=stage, sigma=sigma)[1])


def _drop_negligible(grad: torch.Tensor) -> torch.Tensor:
    """Zero the gradient entries below 1e-12 of each image's largest, before the body.

    LSE pooling (r = 10) gives the cells far below a map's peak weights like exp(-100);
    carried back through the convolutions they become subnormal floats, which x86 CPUs
    handle ~20x slower: a ResNet-50 at 224 took 7.5 s instead of 1.6 s for two maps of
    nine images. Entries this small change no map by more than float32 rounding, and the
    cells left with none are skipped by `_conv_input_grad`.
    """
    tiny = grad.detach().abs().amax(dim=tuple(range(1, grad.dim())), keepdim=True) * 1e-12
    return grad.masked_fill(grad.abs() < tiny, 0.0)


def _split_transition(transition: nn.Module) -> tuple[nn.Conv2d | None, nn.Module]:
    """(the transition layer's leading convolution, the layers after it), when that
    convolution is one `_conv_input_grad` computes (stride 1, no dilation, one group,
    zero padding); else (None, the whole transition layer)."""
    first: nn.Module = transition
    after: nn.Module = nn.Identity()
    if isinstance(transition, nn.Sequential) and len(transition):
        first, after = transition[0], transition[1:]
    if not (
        isinstance(first, nn.Conv2d)
        and first.stride == (1, 1)
        and first.dilation == (1, 1)
        and first.groups == 1
        and first.padding_mode == "zeros"
        and not isinstance(first.padding, str)
    ):
        return None, transition
    return first, after


def _conv_input_grad(
    conv: nn.Conv2d, grad: torch.Tensor, size: torch.Size, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The gradient at `conv`'s input (shape `size`) from `grad` at its output, float32,
    its products computed in `dtype`.

    What `torch.nn.grad.conv2d_input` gives, but one matrix product over the output cells
    whose gradient is not all zero, scattered by kernel offset. LSE pooling leaves a
    class's gradient on part of the map (14-47% of the cells on the images and models
    measured), and the dense product over every cell is the largest share of each map's
    backward pass (the 3x3 2048 -> 1024 transition of a ResNet-50: 3.7 GMAC per image).

    `dtype` is the body's. Under bfloat16 autocast the convolution ran in bfloat16, `grad`
    is bfloat16, and the result is rounded to bfloat16 where it meets the body's
    activations: bfloat16 products with float32 accumulation are what autocast's own
    backward of this convolution computes. Float32 products would buy nothing; on a GPU
    they run as TF32, at half bfloat16's rate, and on a CPU with AMX at about a third.
    """
    g = grad.detach().to(dtype)  # bfloat16 already under autocast: no copy, no round trip
    n, c_out, h, w = g.shape
    kh, kw = conv.kernel_size
    ph, pw = cast(tuple[int, int], conv.padding)  # `_split_transition` admits no str
    rows = g.permute(0, 2, 3, 1).reshape(-1, c_out)
    active = rows.abs().amax(dim=1).nonzero().squeeze(1)
    weight = conv.weight.detach().to(dtype)
    if 2 * active.numel() > rows.shape[0]:
        # Most cells carry a gradient: the dense (vendor) kernel is as fast or faster.
        dense: torch.Tensor = conv2d_input(size, weight, g, padding=conv.padding)  # type: ignore[no-untyped-call]
        return dense.float()
    c_in = weight.shape[1]
    # (cells, kh, kw, c_in): each kernel offset's contribution is a contiguous block.
    flat = weight.permute(0, 2, 3, 1).reshape(c_out, -1)
    spread = (rows[active] @ flat).float().view(-1, kh, kw, c_in)
    image, cell = active // (h * w), active % (h * w)
    i, j = cell // w, cell % w
    # Padded input grid: output cell (i, j) reaches padded input (i + u, j + v).
    hp, wp = h + kh - 1, w + kw - 1
    out = g.new_zeros(n * hp * wp, c_in, dtype=torch.float32)
    for u in range(kh):
        for v in range(kw):
            out.index_add_(0, (image * hp + i + u) * wp + j + v, spread[:, u, v])
    grid = out.view(n, hp, wp, c_in)[:, ph : ph + size[2], pw : pw + size[3]]
    return grid.permute(0, 3, 1, 2)
