"""Checkpoints: weights plus the model card that makes them usable and honest.

A checkpoint file (format `cxr-checkpoint.v1`, written with `torch.save`, read with
`weights_only=True` so loading never executes code) holds:
  - `card`: the model card (labels, arch, pooling, input size, preprocessing,
    operating thresholds, training data, metrics, code version, demo flag, intended use);
  - `model`: the state dict (float32, or float16 for a checkpoint shipped in a package);
  - `train_state` (optional): optimizer state, epoch/step and the TrainConfig, to resume.
Loading refuses a checkpoint whose labels differ from the ones the caller expects.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import torch
from torch.overrides import TorchFunctionMode

from models.boxes import DEFAULT_BOX_THRESHOLDS
from models.errors import CheckpointError
from models.network import ChestNet, build_model
from models.notices import DEMO_INTENDED_USE, RESEARCH_INTENDED_USE
from models.transforms import preprocessing_record

__all__ = [
    "EDGE_THRESHOLD",
    "FORMAT",
    "Checkpoint",
    "ModelCard",
    "build_demo_checkpoint",
    "code_version",
    "load_checkpoint",
    "model_from_card",
    "save_checkpoint",
]

FORMAT = "cxr-checkpoint.v1"
# Thresholds within this of 0 or 1 are warned about (ModelCard.threshold_warnings).
EDGE_THRESHOLD = 1e-6


def code_version() -> str:
    """Installed `cxr` package version (recorded in every model card)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"cxr {version('cxr')}"
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "cxr (not installed)"


@dataclass
class ModelCard:
    """Everything needed to rebuild, run and judge a model (JSON-able via `to_dict`)."""

    labels: list[str]
    arch: str = "resnet50"
    pooling: str = "lse"
    lse_r: float = 10.0
    pool_on: str = "cams"
    transition_channels: int | None = None
    # CAM geometry: maps are image_size / output_stride cells, cell i centred on input
    # pixel output_stride * i (models.cam). Defaults are those of cards written before
    # these keys existed.
    output_stride: int = 32
    body_stages: int = 4
    dilated: bool = False
    image_size: int = 512
    thresholds: dict[str, float] = field(default_factory=dict)
    # Per-label temperature scaling fitted on validation (models.calibration); the
    # thresholds apply to the calibrated probabilities. Missing label: T = 1.
    temperatures: dict[str, float] = field(default_factory=dict)
    box_thresholds: list[int] = field(default_factory=lambda: list(DEFAULT_BOX_THRESHOLDS))
    # Where heatmaps and boxes come from (models.layercam): "cam", the paper's map on the
    # transition grid (cards written before this key), or "layercam" (what `cxr train` writes) at
    # body stage `heatmap_stage` (2: stride 8; `cxr train` writes 1, stride 4, below 512 px).
    heatmap_method: str = "cam"
    heatmap_stage: int = 2
    heatmap_sigma: float = 0.5  # LayerCAM blur, in cells
    # New cards letterbox; cards saved before `resize_mode` existed stretch (issue 9, item 3).
    preprocessing: dict[str, Any] = field(default_factory=lambda: preprocessing_record("letterbox"))
    training_data: str = ""
    # Resolved training settings (optimizer, lr, accumulation, schedule, epochs, steps).
    training: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    # Problems a user must see, e.g. validation AUC near chance (models.train).
    warnings: list[str] = field(default_factory=list)
    name: str = "cxr-chestnet"
    version: str = "v1"
    demo: bool = False
    intended_use: str = RESEARCH_INTENDED_USE
    code_version: str = field(default_factory=code_version)
    created: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able copy of the card."""
        return asdict(self)

    def threshold_warnings(self) -> list[str]:
        """Warnings for thresholds at the edge of the probability range.

        A threshold of 1 (or 0) is what a validation set with saturated probabilities
        leaves: "p 1.000" is then positive on one image and negative on the next, and the
        label is in effect always negative (or always positive). Not a clinical choice but a
        calibration artifact, said beside the probabilities.
        """
        out = []
        for label, thr in self.thresholds.items():
            if thr >= 1.0 - EDGE_THRESHOLD:
                out.append(
                    f"{label}: threshold {thr:g} is at the top of the probability range (a "
                    "calibration artifact): the model almost never calls it positive; refit "
                    "it on validation cases the model does not saturate on (`cxr train` "
                    "fits thresholds there)"
                )
            elif thr <= EDGE_THRESHOLD:
                out.append(
                    f"{label}: threshold {thr:g} is at the bottom of the probability range: "
                    "every image is called positive; refit it on validation cases with "
                    "negatives (`cxr train` fits thresholds there)"
                )
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelCard:
        """Rebuild a card; unknown keys (from newer versions) are ignored.

        Raises:
            CheckpointError: `labels` is missing or empty.
        """
        known = {f.name for f in fields(cls)}
        if not data.get("labels"):
            raise CheckpointError("model card has no 'labels'; not a cxr checkpoint?")
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model (eval mode, on `map_location`), its card, and the
    training state when the file has one."""

    model: ChestNet
    card: ModelCard
    train_state: dict[str, Any] | None = None


def model_from_card(card: ModelCard, *, weights: Literal["imagenet"] | None = None) -> ChestNet:
    """Build the `ChestNet` a card describes (random init, or an ImageNet-initialised body).

    Raises:
        ModelsError: the card names an unknown arch or impossible sizes.
    """
    return build_model(
        arch=card.arch,
        num_labels=len(card.labels),
        weights=weights,
        pooling=card.pooling,  # type: ignore[arg-type]
        lse_r=card.lse_r,
        pool_on=card.pool_on,  # type: ignore[arg-type]
        # Cards without an explicit width predate the per-depth defaults: 1024 / 512 then.
        transition_channels=card.transition_channels or (1024 if card.arch == "resnet50" else 512),
        output_stride=card.output_stride,
        body_stages=card.body_stages,
        dilated=card.dilated,
    )


def save_checkpoint(
    path: str | os.PathLike[str],
    *,
    model: torch.nn.Module,
    card: ModelCard,
    train_state: dict[str, Any] | None = None,
    half: bool = False,
) -> Path:
    """Write a checkpoint atomically (temp file then rename).

    Args:
        path: destination file (conventionally `*.pt`).
        model: the model (a `ChestNet`, possibly wrapped by DDP or torch.compile).
        card: its model card; `len(card.labels)` must equal the model's outputs.
        train_state: optional resume state (plain tensors/dicts/numbers only).
        half: store floating-point weights as float16 (half the bytes, for a checkpoint
            shipped in a package); `load_checkpoint` loads them into the float32 model.

    Returns:
        The path written.

    Raises:
        CheckpointError: the card's labels do not match the model's output size.
    """
    inner: Any = getattr(model, "module", model)
    inner = getattr(inner, "_orig_mod", inner)
    n_out = int(inner.head.out_features)
    if n_out != len(card.labels):
        raise CheckpointError(
            f"model has {n_out} outputs but the card lists {len(card.labels)} labels"
        )
    state = {k: v.detach().cpu() for k, v in inner.state_dict().items()}
    if half:
        state = {k: v.half() if v.is_floating_point() else v for k, v in state.items()}
    payload = {"format": FORMAT, "card": card.to_dict(), "model": state, "train_state": train_state}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)
    return path


def load_checkpoint(
    path: str | os.PathLike[str],
    *,
    labels: Sequence[str] | None = None,
    map_location: str | torch.device = "cpu",
) -> Checkpoint:
    """Load a checkpoint safely (`weights_only=True`) and rebuild its model.

    Args:
        path: a file written by `save_checkpoint`.
        labels: if given, the label names (in order) the caller expects.
        map_location: device for the weights.

    Returns:
        `Checkpoint` with the model in eval mode.

    Raises:
        CheckpointError: missing/unreadable file, unknown format, label mismatch, or
            weights that do not fit the architecture in the card.
    """
    path = Path(path)
    if not path.is_file():
        kind = "is a folder, not a checkpoint file" if path.is_dir() else "no such checkpoint file"
        raise CheckpointError(f"{path}: {kind}")
    try:
        # mmap: 0.18 -> 0.08 s for a ResNet-50. The mapping is private (writes never reach
        # the file) and `save_checkpoint` replaces files atomically, so a resumed run that
        # saves over its own checkpoint never changes what is mapped.
        payload = torch.load(path, map_location=map_location, weights_only=True, mmap=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many types for bad files
        raise CheckpointError(f"{path}: not a readable checkpoint ({exc})") from exc
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"{path}: format is {found!r}; expected {FORMAT!r}")
    card = ModelCard.from_dict(payload["card"])
    bad = {
        k: v
        for k, v in card.thresholds.items()
        if not isinstance(v, int | float) or not 0.0 <= float(v) <= 1.0
    }
    if bad:
        raise CheckpointError(
            f"{path}: thresholds outside [0, 1] in the model card: {bad}; a threshold is a "
            "probability. Fix the card or retrain (`cxr train` fits thresholds on validation)."
        )
    if labels is not None and [str(x) for x in labels] != list(card.labels):
        raise CheckpointError(
            f"{path}: label mismatch: checkpoint has {list(card.labels)}, expected "
            f"{[str(x) for x in labels]}. Train or pick a checkpoint for this label set."
        )
    with _SkipInit():  # every weight is overwritten below: ~0.15 s less for a ResNet-50
        model = model_from_card(card)
    try:
        model.load_state_dict(payload["model"])  # strict: nothing keeps its skipped init
    except RuntimeError as exc:
        raise CheckpointError(
            f"{path}: weights do not fit the card's architecture ({exc})"
        ) from exc
    model.to(map_location).eval()
    return Checkpoint(model=model, card=card, train_state=payload.get("train_state"))


class _SkipInit(TorchFunctionMode):
    """Make random fills no-ops while a model whose every weight will be loaded is built.

    Matched by name, so both `torch.nn.init`'s functions and the `Tensor.normal_` /
    `Tensor.uniform_` they (or a module's `reset_parameters`) call are skipped.
    """

    _SKIPPED = frozenset(
        {
            "uniform_",
            "normal_",
            "trunc_normal_",
            "kaiming_uniform_",
            "kaiming_normal_",
            "xavier_uniform_",
            "xavier_normal_",
        }
    )

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") in self._SKIPPED:
            return args[0] if args else kwargs["tensor"]
        return func(*args, **kwargs)


def build_demo_checkpoint(
    path: str | os.PathLike[str],
    *,
    arch: str = "resnet18",
    image_size: int = 64,
    labels: Sequence[str] | None = None,
    demo: bool = True,
    seed: int = 0,
) -> Path:
    """Write a tiny randomly initialised checkpoint (for tests and demos; fast, offline).

    Args:
        path: destination file.
        arch: "resnet18" (default, small) or "resnet50".
        image_size: model input side.
        labels: label names; default the 14 ChestX-ray14 labels.
        demo: the card's demo flag.
        seed: torch seed for the random weights (same seed, same weights).

    Returns:
        The path written. Thresholds are 0.5 for every label.
    """
    from labeler.schema import CHESTXRAY14

    names = [str(getattr(x, "value", x)) for x in (labels if labels is not None else CHESTXRAY14)]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        card = ModelCard(
            labels=names,
            arch=arch,
            image_size=image_size,
            thresholds=dict.fromkeys(names, 0.5),
            training_data="none: random initialisation",
            demo=demo,
            intended_use=DEMO_INTENDED_USE if demo else RESEARCH_INTENDED_USE,
            name="cxr-demo-random",
        )
        model = model_from_card(card)
    return save_checkpoint(path, model=model, card=card)
