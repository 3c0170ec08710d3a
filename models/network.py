"""The paper's unified DCNN (Wang et al. 2017, Fig. 4): ResNet body, transition layer,
global pooling, prediction layer.

Input is a grey image batch (N, 1, H, W) in [0, 1]; the model repeats it to three
channels and applies the ImageNet normalisation itself, so a checkpoint needs no
separate preprocessing code beyond resizing. S = H / output_stride: with the default
dilated last stage (`output_stride=16`, torchvision's `replace_stride_with_dilation` for
layer4) a 1024 input gives 64x64 maps; the paper's `output_stride=32` gives 32x32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import torch
from torch import nn

from models.errors import ModelsError
from models.pooling import GlobalPool, PoolingName

__all__ = [
    "ARCHS",
    "DEFAULT_BODY_STAGES",
    "DEFAULT_TRANSITION_CHANNELS",
    "Arch",
    "ChestNet",
    "build_model",
]

Arch = Literal["resnet50", "resnet18"]
ARCHS: tuple[str, ...] = ("resnet50", "resnet18")
_BODY_CHANNELS = {("resnet50", 4): 2048, ("resnet18", 4): 512, ("resnet50", 3): 1024,
                  ("resnet18", 3): 256}  # fmt: skip
DEFAULT_BODY_STAGES = {"resnet50": 4, "resnet18": 3}
"""Default depth per arch: ResNet-18 is the small CPU/small-data model; stopping after
layer3 (stride 16) keeps its maps fine and its cost low."""
DEFAULT_TRANSITION_CHANNELS = {("resnet50", 4): 1024, ("resnet50", 3): 1024,
                               ("resnet18", 4): 512, ("resnet18", 3): 128}  # fmt: skip
_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)


class ChestNet(nn.Module):
    """ResNet body -> transition conv (D channels) -> global pooling -> linear (D x C).

    `pool_on="features"` is the paper's order: pool each of the D maps, then the linear
    prediction layer. `pool_on="cams"` (default) applies the prediction layer at every
    position first (the class activation maps) and pools those per class. With average
    pooling the two are identical; with LSE/max pooling, pooling the class maps makes the
    heatmap exactly the evidence the score is pooled from; in our phantom runs it
    localized better at the same AUC.

    `forward_features` returns the transition maps (N, D, S, S) that CAM weights with
    the prediction layer; `forward_head` pools and classifies them to logits (N, C).
    """

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(
        self,
        body: nn.Module,
        *,
        body_channels: int,
        num_labels: int,
        transition_channels: int,
        pooling: PoolingName,
        lse_r: float,
        pool_on: str = "cams",
    ) -> None:
        super().__init__()
        self.body = body
        # Transition layer (paper section 3.2): brings the body's maps to a uniform S x S x D.
        self.transition = nn.Sequential(
            nn.Conv2d(body_channels, transition_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(transition_channels),
            nn.ReLU(inplace=True),
        )
        self.pool = GlobalPool(pooling, lse_r)
        self.pool_on = pool_on
        self.head = nn.Linear(transition_channels, num_labels)
        mean, std = torch.tensor(_IMAGENET_MEAN), torch.tensor(_IMAGENET_STD)
        self.register_buffer("mean", mean.view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", std.view(1, 3, 1, 1), persistent=False)

    @property
    def num_labels(self) -> int:
        return int(self.head.out_features)

    def prepare_input(self, x: torch.Tensor) -> torch.Tensor:
        """(N, 1 or 3, H, W) in [0, 1] -> the body's input: 3 channels, ImageNet-normalised."""
        if x.shape[1] == 1:
            x = x.expand(-1, 3, -1, -1)
        x = (x - self.mean) / self.std
        if x.is_cuda:
            # Normalising the expanded grey batch yields a plain NCHW tensor; conv1 runs
            # fastest (bf16 tensor cores) on channels_last.
            x = x.contiguous(memory_format=torch.channels_last)
        return x

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """(N, 1 or 3, H, W) in [0, 1] -> transition maps (N, D, H/stride, W/stride)."""
        return self.transition(self.body(self.prepare_input(x)))  # type: ignore[no-any-return]

    def split_body(self, stage: int) -> tuple[nn.Module, nn.Module]:
        """The body cut after ResNet stage `stage` (1-4): (stem..layer{stage}, the rest).

        The body is conv1, bn1, relu, maxpool, layer1 .. layer3 or layer4
        (`models.network._body`); `models.layercam` weights the first part's output.

        Raises:
            ValueError: no such stage in this body.
        """
        assert isinstance(self.body, nn.Sequential)
        stages = len(self.body) - 4
        if not 1 <= stage <= stages:
            raise ValueError(f"heatmap stage must be in 1..{stages}, got {stage}")
        return self.body[: 4 + stage], self.body[4 + stage :]

    def forward_head(self, features: torch.Tensor) -> torch.Tensor:
        """Transition maps (N, D, S, S) -> logits (N, C)."""
        if self.pool_on == "cams":
            return self.pool(self.class_activation_maps(features))  # type: ignore[no-any-return]
        pooled = self.pool(features).to(self.head.weight.dtype)
        return self.head(pooled)  # type: ignore[no-any-return]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, 1 or 3, H, W) in [0, 1] -> logits (N, C)."""
        return self.forward_head(self.forward_features(x))

    def class_activation_maps(self, features: torch.Tensor) -> torch.Tensor:
        """CAM (Zhou et al. 2016): prediction-layer weights applied to each map position.

        Args:
            features: (N, D, S, S) from `forward_features`.

        Returns:
            (N, C, S, S) float32 maps, one per label (bias included so pooling of an
            avg-pooled model's map gives its logit).
        """
        w = self.head.weight.float()
        maps = torch.einsum("cd,ndhw->nchw", w, features.float())
        return maps + self.head.bias.float().view(1, -1, 1, 1)


def _dilate_last_stage(layer: nn.Sequential) -> None:
    """Stride 2 -> 1 in the stage's first block, dilation 2 in the later blocks' 3x3 convs.

    The same change as torchvision's `replace_stride_with_dilation` (which BasicBlock
    refuses); parameter shapes are unchanged, so ImageNet weights still load.
    """
    for i, block in enumerate(layer):
        b: Any = block  # torchvision BasicBlock / Bottleneck
        bottleneck = hasattr(b, "conv3")
        if i == 0:
            first: nn.Conv2d = b.conv2 if bottleneck else b.conv1
            first.stride = (1, 1)
            if b.downsample is not None:
                b.downsample[0].stride = (1, 1)
            continue
        convs: tuple[nn.Conv2d, ...] = (b.conv2,) if bottleneck else (b.conv1, b.conv2)
        for conv in convs:
            conv.dilation = (2, 2)
            conv.padding = (2, 2)


def _body(
    arch: str, weights: str | None, output_stride: int, stages: int = 4, dilated: bool = True
) -> nn.Module:
    # torchvision is imported only for ImageNet weights: its package import costs seconds
    # (see models.resnet); random-init bodies, which inference loads its weights over, are
    # the same modules without it.
    tvm: Any
    if weights == "imagenet":
        import torchvision.models

        tvm = torchvision.models
    else:
        from models import resnet

        tvm = resnet

    net: Any
    if arch == "resnet50":
        w = tvm.ResNet50_Weights.IMAGENET1K_V1 if weights == "imagenet" else None
        net = _with_weights(lambda: tvm.resnet50(weights=w), w)
    elif arch == "resnet18":
        w18 = tvm.ResNet18_Weights.IMAGENET1K_V1 if weights == "imagenet" else None
        net = _with_weights(lambda: tvm.resnet18(weights=w18), w18)
    else:
        raise ModelsError(f"unknown arch {arch!r}; expected one of {', '.join(ARCHS)}")
    if stages == 3:
        # Stop after layer3 (stride 16): a smaller receptive field, sharper maps, half the
        # compute of layer4 at stride 16. For small inputs (the CPU phantom benchmark).
        return nn.Sequential(
            net.conv1, net.bn1, net.relu, net.maxpool, net.layer1, net.layer2, net.layer3
        )
    if output_stride == 16 and dilated:
        # Finer maps (issue 9): layer4 keeps layer3's resolution, dilated so each unit
        # sees what it saw at stride 32.
        _dilate_last_stage(net.layer4)
    elif output_stride == 16:
        # Checkpoints from before the dilation (card `dilated: false`): stride 1, no dilation.
        block = net.layer4[0]
        conv = block.conv2 if hasattr(block, "conv3") else block.conv1
        conv.stride = (1, 1)
        if block.downsample is not None:
            block.downsample[0].stride = (1, 1)
    # Fully connected layers removed (paper section 3.2): keep conv1 .. layer4.
    return nn.Sequential(
        net.conv1, net.bn1, net.relu, net.maxpool, net.layer1, net.layer2, net.layer3, net.layer4
    )


def _with_weights(make: Callable[[], nn.Module], weights: object) -> nn.Module:
    try:
        return make()
    except (OSError, RuntimeError) as exc:
        if weights is None:
            raise
        url = getattr(weights, "url", "?")
        raise ModelsError(
            f"cannot load ImageNet weights {weights} ({exc}); they are downloaded once from {url} "
            "into the torch hub cache ($TORCH_HOME/hub/checkpoints). Pre-fetch them on a "
            "connected machine, or train with --weights none"
        ) from exc


def build_model(
    *,
    arch: Arch | str = "resnet50",
    num_labels: int,
    weights: Literal["imagenet"] | None = None,
    pooling: PoolingName = "lse",
    lse_r: float = 10.0,
    transition_channels: int | None = None,
    output_stride: int = 16,
    body_stages: int | None = None,
    pool_on: Literal["cams", "features"] = "cams",
    dilated: bool = True,
) -> ChestNet:
    """Build the classifier.

    Args:
        arch: "resnet50" (the paper's best) or "resnet18" (fast, for CPU and tests).
        num_labels: number of output labels C.
        weights: "imagenet" for torchvision's IMAGENET1K_V1 body weights (from the local
            torch hub cache, else downloaded), None for random init.
        pooling: "lse" (default, r = `lse_r`), "avg" or "max".
        lse_r: LSE sharpness r (paper: 10).
        transition_channels: D; default `DEFAULT_TRANSITION_CHANNELS[(arch, body_stages)]`
            (1024 for resnet50, 128 for resnet18 up to layer3, 512 for a full resnet18).
        pool_on: "cams" (pool the per-class maps; default) or "features" (the paper's
            order: pool the D transition maps, then the prediction layer).
        body_stages: 4 (conv1..layer4, the paper) or 3 (stop after layer3; needs
            output_stride=16): smaller receptive field and compute, for small inputs.
            Default `DEFAULT_BODY_STAGES[arch]` (4 for resnet50, 3 for resnet18).
        output_stride: 16 (default: S = H/16, finer heatmaps) or 32 (the paper: S = H/32).
        dilated: with output_stride 16 and 4 stages, dilate layer4 (default) rather than
            only dropping its stride (older checkpoints).

    Returns:
        `ChestNet` mapping (N, 1, H, W) in [0, 1] to logits (N, C).

    Raises:
        ModelsError: unknown arch, bad sizes, or ImageNet weights unavailable offline.
    """
    if arch not in ARCHS:
        raise ModelsError(f"unknown arch {arch!r}; expected one of {', '.join(ARCHS)}")
    if num_labels < 1:
        raise ModelsError(f"num_labels must be >= 1, got {num_labels}")
    if weights not in (None, "imagenet"):
        raise ModelsError(f"weights must be 'imagenet' or None, got {weights!r}")
    if pool_on not in ("cams", "features"):
        raise ModelsError(f"pool_on must be 'cams' or 'features', got {pool_on!r}")
    if body_stages is None:
        body_stages = DEFAULT_BODY_STAGES[arch]
    if output_stride not in (16, 32):
        raise ModelsError(f"output_stride must be 16 or 32, got {output_stride}")
    if body_stages not in (3, 4) or (body_stages == 3 and output_stride != 16):
        raise ModelsError(
            f"body_stages must be 4, or 3 with output_stride 16; got {body_stages} and "
            f"{output_stride}"
        )
    d = transition_channels or DEFAULT_TRANSITION_CHANNELS[(arch, body_stages)]
    if pooling not in ("lse", "avg", "max") or lse_r <= 0:
        raise ModelsError(f"pooling must be lse (r > 0), avg or max; got {pooling!r}, r={lse_r}")
    return ChestNet(
        _body(arch, weights, output_stride, body_stages, dilated),
        body_channels=_BODY_CHANNELS[(arch, body_stages)],
        num_labels=num_labels,
        transition_channels=d,
        pooling=pooling,
        lse_r=lse_r,
        pool_on=pool_on,
    )
