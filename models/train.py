"""Training, in one loop you can read top to bottom (after nanoGPT's train.py).

    cfg = TrainConfig(data="nih/", out="runs/chestnet.pt", arch="resnet50", image_size=512)
    train(cfg)

On CUDA: bf16 autocast, channels_last and torch.compile (checked on one step; a model that
does not compile trains eagerly, with a log line saying why); on CPU: fp32, channels_last.

Input (issue 19): the loader's workers (one thread each) only decode each image to integers
and fit it to the input size (`models.data.FittedDataset`), or read it from a prepared
cache (`models.prepared`, `cxr prepare`); batches travel as uint8 through pinned memory,
and the augmentation runs per batch on the training device (`models.augment`).

Each epoch ends with
validation (per-label AUC), per-label temperature scaling and operating thresholds fitted
on validation, and a checkpoint holding the model card and the state to resume.

Defaults that learn on small and on large data (issue 9):
  - the schedule is set in fractions of the run: linear warmup over `warmup_fraction`
    of the optimizer steps, then cosine decay to `final_lr_fraction` of the peak;
  - accumulation (`accum = None`) adapts to the data: aim at the paper's effective batch
    of `target_batch` (80) images, but never below `min_steps_per_epoch` optimizer steps
    per epoch (`accumulation_steps`);
  - the run's length (`epochs = None`) adapts too: `base_epochs` (10), or more when that
    would leave fewer than `min_steps` optimizer steps in all (`epochs_for`): a network
    learned from scratch on a few hundred images needs hundreds of steps, not 10 epochs;
  - the learning rate (`lr = None`) depends on the optimizer and on the weights
    (`default_lr`): larger from scratch than when fine-tuning ImageNet weights;
  - the heatmap stage (`heatmap_stage = None`) depends on the input size
    (`default_heatmap_stage`): stage 2 (stride 8) when its LayerCAM map has at least 64
    cells a side, else stage 1 (stride 4), so a small lesion spans enough cells to be boxed;
  - a run whose best validation mean AUC stays below `near_chance_auc` ends with a loud
    warning, and its model card's `warnings` says so.

Multi-GPU: launch with torchrun; the CLI passes `distributed=True`:
    torchrun --standalone --nproc_per_node=8 -m app.cli train --data nih/ --out ckpt.pt
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data.distributed import DistributedSampler

from models.augment import BatchAugment, to_unit_float
from models.calibration import MAX_TEMPERATURE, fit_temperatures, temperature_vector
from models.checkpoint import (
    Checkpoint,
    ModelCard,
    load_checkpoint,
    model_from_card,
    save_checkpoint,
)
from models.data import (
    EpochShuffle,
    FittedDataset,
    LabelledImages,
    build_loader,
    is_synthetic,
    label_coverage,
    load_records,
    loader_workers,
    resolve_labels,
    split_records,
)
from models.errors import ImageError, ModelsError
from models.evaluate import predict_dataset
from models.layercam import HEATMAP_METHODS
from models.loss import compute_loss
from models.metrics import choose_thresholds, classification_metrics, expected_calibration_error
from models.network import DEFAULT_BODY_STAGES, DEFAULT_TRANSITION_CHANNELS
from models.notices import DEMO_INTENDED_USE
from models.predict import resolve_device
from models.prepared import PreparedDataset, PreparedImages
from models.transforms import RESIZE_MODES, preprocessing_record

__all__ = [
    "TrainConfig",
    "TrainResult",
    "accumulation_steps",
    "best_checkpoint_path",
    "compile_or_eager",
    "default_heatmap_stage",
    "default_lr",
    "epochs_for",
    "learning_rate_at",
    "load_train_config",
    "train",
    "train_one_epoch",
    "validate",
]

log = logging.getLogger(__name__)
_CACHE_BYTES = 1 << 30  # `cache_images=None`: cache when the uint8 images fit in 1 GiB


@dataclass(frozen=True)
class TrainConfig:
    """Every training setting, flat and typed. TOML files set these keys; unknown keys fail.

    `None` means "chosen from the data and the other settings" (see the module docstring);
    the values used are written to the model card's `training`.
    """

    data: str = ""
    out: str = "runs/chestnet.pt"
    # model
    arch: str = "resnet50"
    weights: str = "imagenet"  # "imagenet" | "none"
    image_size: int = 512
    resize: str = "letterbox"  # fit into the square input: "letterbox" | "stretch"
    pooling: str = "lse"
    lse_r: float = 10.0
    pool_on: str = "cams"  # "cams" (pool class maps) | "features" (paper order)
    transition_channels: int | None = None  # None: 1024 (resnet50), 128 (resnet18 to layer3)
    output_stride: int = 16  # 16: dilated last stage (finer CAM); 32: the paper
    body_stages: int | None = None  # None: 4 for resnet50, 3 (stop after layer3) for resnet18
    # "auto": the findings the data has (a resumed run keeps its checkpoint's); a named set
    # ("chestxray14", "chestxray8") or "A,B,C" trains exactly those. A label no image shows
    # learns nothing, and under the weighted loss its negatives raise every batch's positive
    # weight (beta_P): on 420 phantoms with 5 findings the 9 empty ChestX-ray14 labels left
    # the nodule unlearned on some seeds (docs/classifier.md, "Data seeds and chance").
    labels: str = "auto"
    # optimisation
    epochs: int | None = None  # None: `epochs_for` rule (base_epochs, more for small data)
    base_epochs: int = 10
    min_steps: int = 600  # the epochs rule never leaves fewer optimizer steps in all
    batch_size: int = 16
    accum: int | None = None  # None: `accumulation_steps` rule
    target_batch: int = 80  # effective batch aimed at by the accumulation rule (paper: 80)
    min_steps_per_epoch: int = 50  # accumulation never leaves fewer optimizer steps per epoch
    optimizer: str = "adamw"  # "adamw" | "sgd"
    lr: float | None = None  # None: `default_lr(optimizer, weights)`
    momentum: float = 0.9
    weight_decay: float = 1e-4
    warmup_fraction: float = 0.05  # of all optimizer steps
    warmup_steps: int | None = None  # an explicit count instead of the fraction
    schedule: str = "cosine"  # "cosine" | "constant"
    final_lr_fraction: float = 0.02  # cosine ends at this fraction of the peak lr
    loss: str = "weighted"  # "weighted" (paper Eq. 1) | "bce"
    grad_clip: float = 5.0
    max_steps: int | None = None  # stop after this many optimizer steps (smoke tests)
    near_chance_auc: float = 0.6  # best validation mean AUC below this: loud warning
    # data
    workers: int | None = None  # loader processes (None: `loader_workers` picks)
    seed: int = 0
    augment: bool = True
    aug_shift: float = 0.05  # max random translation, fraction of the side
    hflip: float = 0.5  # probability of a horizontal flip per training image (0: never)
    cache_images: bool | None = None  # None: cache when the images fit in 1 GiB as uint8
    prepared: str = ""  # a `cxr prepare` cache to read the images from instead of the files
    input_bits: int = 8  # loader pixels: 8 (uint8) or 16 (uint16, for 16-bit sources)
    prefetch: int = 4  # batches loaded ahead per worker
    threshold_method: str = "youden"  # "youden" | "f1"
    heatmap_method: str = "layercam"  # "layercam" (finer, aligned) | "cam" (the paper)
    heatmap_stage: int | None = None  # body stage LayerCAM weights (None: by input size)
    heatmap_sigma: float = 0.5  # LayerCAM blur, in cells of that stage
    training_data: str = ""  # free text for the model card
    # runtime
    device: str = "auto"
    resume: bool = False
    compile: bool | None = None  # None: on CUDA yes, on CPU no
    distributed: bool = False
    local_rank: int = 0
    local_world: int = 1  # training processes on this machine (torchrun's LOCAL_WORLD_SIZE)
    threads: int | None = None  # torch CPU threads (None: torch default)
    progress: bool = True
    demo: bool = False  # model card flag; also set when the data carries the synthetic marker

    def validate(self) -> None:
        """Raise ModelsError for a setting outside its allowed values."""
        checks = {
            "arch": (self.arch, ("resnet50", "resnet18")),
            "resize": (self.resize, RESIZE_MODES),
            "weights": (self.weights, ("imagenet", "none")),
            "pooling": (self.pooling, ("lse", "avg", "max")),
            "pool_on": (self.pool_on, ("cams", "features")),
            "optimizer": (self.optimizer, ("sgd", "adamw")),
            "schedule": (self.schedule, ("cosine", "constant")),
            "loss": (self.loss, ("weighted", "bce")),
            "threshold_method": (self.threshold_method, ("youden", "f1")),
            "heatmap_method": (self.heatmap_method, HEATMAP_METHODS),
        }
        for key, (value, allowed) in checks.items():
            if value not in allowed:
                raise ModelsError(f"config {key} = {value!r}; expected one of {', '.join(allowed)}")
        for key in ("epochs", "base_epochs", "min_steps", "batch_size", "accum", "image_size",
                    "target_batch", "min_steps_per_epoch"):  # fmt: skip
            value = getattr(self, key)
            if value is not None and value < 1:
                raise ModelsError(f"config {key} must be >= 1, got {value}")
        for key in ("warmup_fraction", "final_lr_fraction"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ModelsError(f"config {key} must be in [0, 1), got {getattr(self, key)}")
        if not 0.0 <= self.hflip <= 1.0:  # NaN fails too
            raise ModelsError(f"config hflip must be in [0, 1], got {self.hflip}")
        if self.lr is not None and not self.lr > 0:
            raise ModelsError(f"config lr must be > 0, got {self.lr}")
        if self.heatmap_stage is not None and (
            not 1
            <= self.heatmap_stage
            <= (self.body_stages or DEFAULT_BODY_STAGES.get(self.arch, 4))
        ):
            raise ModelsError(
                f"config heatmap_stage must be a body stage, got {self.heatmap_stage}"
            )
        if not self.heatmap_sigma >= 0:
            raise ModelsError(f"config heatmap_sigma must be >= 0, got {self.heatmap_sigma}")
        if self.input_bits not in (8, 16):
            raise ModelsError(f"config input_bits must be 8 or 16, got {self.input_bits}")
        if self.prefetch < 1:
            raise ModelsError(f"config prefetch must be >= 1, got {self.prefetch}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ModelsError(f"config max_steps must be >= 1, got {self.max_steps}")
        if self.workers is not None and self.workers < 0:
            raise ModelsError(f"config workers must be >= 0, got {self.workers}")
        if self.image_size % 32:
            raise ModelsError(f"image_size must be a multiple of 32, got {self.image_size}")
        if not self.data:
            raise ModelsError("config data is empty: give an NIH-layout folder or a labels CSV")


def load_train_config(path: str | os.PathLike[str] | None = None, **overrides: Any) -> TrainConfig:
    """Build a TrainConfig from a TOML file (data, never executed) plus overrides.

    Args:
        path: TOML file with top-level keys named like TrainConfig fields (or None).
        overrides: fields set explicitly (None values are ignored).

    Raises:
        ModelsError: unknown keys, unreadable TOML, or invalid values.
    """
    values: dict[str, Any] = {}
    if path is not None:
        try:
            values = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ModelsError(f"{path}: cannot read train config ({exc})") from exc
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ModelsError(f"unknown train config keys {unknown}; known: {sorted(known)}")
    cfg = TrainConfig(**values)
    cfg.validate()
    return cfg


@dataclass
class TrainResult:
    """What `train` produced: the checkpoint path, the last validation metrics, and the
    warnings also written to the model card (e.g. validation AUC near chance)."""

    checkpoint: Path
    metrics: dict[str, Any]
    epochs_run: int
    steps: int
    warnings: list[str] = field(default_factory=list)


# Peak learning rates by (optimizer, weights). From scratch a network needs larger steps
# than when fine-tuning ImageNet features, which large steps would wreck early on.
_DEFAULT_LR = {
    ("adamw", "none"): 2e-3,
    ("adamw", "imagenet"): 3e-4,
    ("sgd", "none"): 0.05,
    ("sgd", "imagenet"): 0.01,
}


# The fewest LayerCAM map cells a side that stage 2 (stride 8) must give to be used.
_HEATMAP_CELLS = 64


def default_heatmap_stage(image_size: int) -> int:
    """The body stage LayerCAM reads when `heatmap_stage` is not set: 2 (stride 8) when its
    map has at least 64 cells a side (512 px and up; 1024 px: 128 cells), else 1 (stride 4:
    256 px gives 64 cells instead of 32).

    On the phantom benchmark (256 px) stage 2's 32-cell maps boxed 0.25 of the nodules and
    0.50 of the pneumothoraces at IoBB 0.5 (one box per finding), stage 1's 64-cell maps
    0.87 and 0.82 (docs/benchmarks.md#phantom-benchmark).
    """
    return 2 if image_size // 8 >= _HEATMAP_CELLS else 1


def default_lr(optimizer: str, weights: str) -> float:
    """The peak learning rate used when `lr` is not set.

    AdamW: 2e-3 from scratch, 3e-4 from ImageNet; SGD (Nesterov): 0.05 and 0.01.

    Raises:
        ModelsError: unknown optimizer or weights.
    """
    try:
        return _DEFAULT_LR[(optimizer, weights)]
    except KeyError:
        raise ModelsError(
            f"no default lr for optimizer {optimizer!r} with weights {weights!r}"
        ) from None


def accumulation_steps(
    micro_batches_per_epoch: int, *, batch_size: int, world_size: int = 1,
    target_batch: int = 80, min_steps_per_epoch: int = 50,
) -> int:  # fmt: skip
    """Micro-batches per optimizer step when `accum` is not set.

    Rule: aim at an effective batch of `target_batch` images (the paper's 80), i.e.
    `ceil(target_batch / (batch_size x world_size))` micro-batches, but accumulate less
    when that would leave fewer than `min_steps_per_epoch` optimizer steps per epoch; at
    least 1. ChestX-ray14 (78k training images, batch 16): 5; 420 phantoms: 1.

    Args:
        micro_batches_per_epoch: length of one process's loader.
        batch_size: micro-batch size per process.
        world_size: data-parallel processes.
    """
    wanted = math.ceil(target_batch / (batch_size * world_size))
    allowed = micro_batches_per_epoch // min_steps_per_epoch
    return max(1, min(wanted, allowed))


def epochs_for(steps_per_epoch: int, *, base_epochs: int = 10, min_steps: int = 600) -> int:
    """Epochs to run when `epochs` is not set.

    Rule: `base_epochs`, or more when that would leave fewer than `min_steps` optimizer
    steps in all: `max(base_epochs, ceil(min_steps / steps_per_epoch))`. ChestX-ray14 (78k
    training images, effective batch 80: ~980 steps per epoch): 10. 600 phantoms (420
    training images, batch 16, 26 steps per epoch): 24. On those phantoms 10 epochs (260
    steps) left the small lesions unlearned (test AUC 0.83); 24 reached 0.996.

    Args:
        steps_per_epoch: optimizer steps in one epoch (after accumulation).
    """
    return max(base_epochs, math.ceil(min_steps / max(1, steps_per_epoch)))


def learning_rate_at(
    step: int, total_steps: int, *, peak: float, warmup_fraction: float = 0.05,
    schedule: str = "cosine", final_fraction: float = 0.02, warmup_steps: int | None = None,
) -> float:  # fmt: skip
    """Learning rate for optimizer step `step` (0-based) of a run of `total_steps`.

    Linear warmup over the first `round(warmup_fraction x total_steps)` steps (at least
    one when the fraction is > 0), then constant or cosine decay from `peak` to
    `final_fraction x peak` at the last step. Both phases scale with the run's length,
    so a 50-step and a 50,000-step run have the same shape. `warmup_steps`, when given,
    replaces the fraction by a fixed count (kept for recipes that set one).
    """
    total = max(1, total_steps)
    warmup = _warmup_steps(total, warmup_fraction, warmup_steps)
    if step < warmup:
        return peak * (step + 1) / warmup
    if schedule == "constant" or total - warmup <= 1:
        return peak
    progress = min((step - warmup) / (total - warmup - 1), 1.0)
    return peak * (final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * progress)))


def _warmup_steps(total: int, fraction: float, count: int | None) -> int:
    if count is not None:
        return min(max(0, count), total)
    return min(max(1, round(fraction * total)), total) if fraction > 0 else 0


def train_one_epoch(
    model: nn.Module,
    loader: Any,
    optimizer: torch.optim.Optimizer,
    *,
    device: torch.device,
    loss_kind: str,
    accum: int,
    step: int,
    lr_at: Callable[[int], float],
    grad_clip: float = 0.0,
    max_steps: int | None = None,
    distributed: bool = False,
    progress: str | None = None,
    augment: Callable[[torch.Tensor], torch.Tensor] | None = None,
    trained_on: list[int] | None = None,
    batches: Iterator[Any] | None = None,
) -> tuple[int, dict[str, float]]:
    """One pass over `loader`, stepping the optimizer every `accum` micro-batches.

    Args:
        model: the (possibly DDP-wrapped) network, trained in place.
        loader: yields (images (N, 1, H, W) uint8/uint16 or float in [0, 1], targets (N, C),
            indices).
        device: where the model is.
        loss_kind: "weighted" or "bce" (`models.loss.compute_loss`).
        accum: micro-batches per optimizer step.
        step: optimizer steps done before this epoch.
        lr_at: optimizer step -> learning rate.
        grad_clip: max gradient norm (0: no clipping).
        max_steps: stop once this many optimizer steps are done.
        distributed: DDP: skip the gradient all-reduce on non-stepping micro-batches.
        progress: a progress-bar title, or None for no bar.
        augment: run on each batch once on `device`: integer images -> augmented float
            (N, 1, H, W) in [0, 1] (e.g. a `BatchAugment`); None: only the float conversion.
        trained_on: when given, extended with the dataset indices of the images trained on
            (the loader's third element), e.g. to log each DDP rank's shard.
        batches: `iter(loader)` started earlier (its workers already loading this epoch's
            first batches); default: started here.

    Returns:
        (optimizer steps done so far, {"loss": mean loss, "images_per_s": throughput,
        "input_wait_s": seconds spent waiting for the loader's next batch})
    """
    model.train()
    cuda = device.type == "cuda"
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else nullcontext()
    waited = [0.0]
    bar: Any = _timed(iter(loader) if batches is None else batches, waited)
    if progress is not None:
        from tqdm import tqdm

        bar = tqdm(bar, total=len(loader), desc=progress, dynamic_ncols=True, leave=True)
    # Losses stay on the device; reading them back every step would sync the GPU.
    losses: list[torch.Tensor] = []
    seen = 0
    t0 = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    for micro, (x, y, indices) in enumerate(bar):
        if trained_on is not None:
            trained_on.extend(int(i) for i in indices)
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        x = augment(x) if augment is not None else to_unit_float(x)
        if cuda:
            x = x.contiguous(memory_format=torch.channels_last)
        last_micro = (micro + 1) % accum == 0 or micro + 1 == len(loader)
        # DDP: only all-reduce gradients on the micro-batch that steps.
        sync = model.no_sync() if (distributed and not last_micro) else nullcontext()  # type: ignore[operator]
        with sync:
            with autocast:
                logits = model(x)
            loss = compute_loss(logits, y, loss_kind)  # type: ignore[arg-type]
            (loss / accum).backward()  # type: ignore[no-untyped-call]
        losses.append(loss.detach())
        seen += x.shape[0]
        if last_micro:
            lr = lr_at(step)
            for group in optimizer.param_groups:
                group["lr"] = lr
            if grad_clip > 0:
                nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if progress is not None and (step % 10 == 0 or step == 1):
                rate = seen / (time.perf_counter() - t0)
                recent = float(torch.stack(losses[-20:]).mean())
                bar.set_postfix(loss=f"{recent:.4f}", lr=f"{lr:.2e}", img_s=f"{rate:.1f}")
            if max_steps is not None and step >= max_steps:
                break
    if cuda:
        torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - t0
    return step, {
        "loss": float(torch.stack(losses).mean()) if losses else math.nan,
        "images_per_s": seen / elapsed if elapsed > 0 else 0.0,
        "input_wait_s": waited[0],
    }


def _timed(batches: Iterator[Any], waited: list[float]) -> Iterator[Any]:
    """`batches`, adding the seconds each `next` took to `waited[0]`.

    On a GPU the loop runs ahead of the device until its launch queue fills, so this counts
    the time the device may have been left without work, not the loader's own cost."""
    while True:
        t = time.perf_counter()
        try:
            batch = next(batches)
        except StopIteration:
            return
        waited[0] += time.perf_counter() - t
        yield batch


def compile_or_eager(
    model: nn.Module, example: torch.Tensor, *, backend: str = "inductor"
) -> nn.Module:
    """`torch.compile(model)`, checked on one training step; the eager model when it fails.

    Compilation is lazy: whatever stops it (no Triton, no C compiler, an operator the
    backend lacks) surfaces at the first call. This makes that call here, a forward and a
    backward pass of `example` in training mode (under bf16 autocast on CUDA), and on any
    failure logs one line saying why and returns `model` to train eagerly. The check leaves
    no trace: gradients are cleared and the batch-norm statistics restored.

    Args:
        model: the network, on its device, in training mode.
        example: a batch shaped like the training batches, (N, 1, S, S) float.
        backend: the torch.compile backend ("inductor"; tests use "eager").

    Returns:
        The compiled module, or `model`.
    """
    saved = {name: b.detach().clone() for name, b in model.named_buffers()}
    cuda = example.device.type == "cuda"
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else nullcontext()
    t0 = time.perf_counter()
    try:
        compiled: nn.Module = torch.compile(model, backend=backend)  # type: ignore[assignment]
        with autocast:
            logits = compiled(example)
        logits.float().sum().backward()
        if cuda:
            torch.cuda.synchronize(example.device)
    except Exception as exc:  # any failure of the compiler stack means: train eagerly
        dynamo = sys.modules.get("torch._dynamo")  # imported by any compilation that began
        if dynamo is not None:
            dynamo.reset()
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        log.warning(
            "torch.compile failed (%s: %s); training without it (eager)",
            type(exc).__name__, first_line,
        )  # fmt: skip
        return model
    finally:
        model.zero_grad(set_to_none=True)
        with torch.no_grad():
            for name, buffer in model.named_buffers():
                buffer.copy_(saved[name])
    seconds = time.perf_counter() - t0
    log.info("torch.compile (%s): compiled and checked in %.0f s", backend, seconds)
    return compiled


def validate(
    model: nn.Module,
    dataset: LabelledImages,
    *,
    device: torch.device,
    batch_size: int = 32,
    workers: int = 0,
    threshold_method: str = "youden",
) -> tuple[dict[str, Any], dict[str, float], dict[str, float]]:
    """Validation: per-label AUC, then temperature scaling and operating thresholds fitted
    on this set (thresholds apply to the calibrated probabilities).

    Returns:
        (metrics from `classification_metrics` plus "calibration" {ece_before, ece_after},
        thresholds label -> probability, temperatures label -> T)
    """
    inner = getattr(model, "module", model)
    logits, targets = predict_dataset(
        inner, dataset, device=device, batch_size=batch_size, workers=workers
    )
    temperatures = fit_temperatures(logits, targets, dataset.labels)
    raw = torch.sigmoid(torch.from_numpy(logits)).numpy()
    t = temperature_vector(temperatures, dataset.labels)
    probs = torch.sigmoid(torch.from_numpy(logits / t)).numpy()
    thresholds = choose_thresholds(
        probs,
        targets,
        dataset.labels,
        method=threshold_method,  # type: ignore[arg-type]
    )
    metrics = classification_metrics(probs, targets, dataset.labels, thresholds)
    ece = (expected_calibration_error(raw, targets), expected_calibration_error(probs, targets))
    metrics["calibration"] = {
        "ece_before": None if math.isnan(ece[0]) else round(ece[0], 4),
        "ece_after": None if math.isnan(ece[1]) else round(ece[1], 4),
    }
    return metrics, thresholds, temperatures


def best_checkpoint_path(out: str | Path) -> Path:
    """Where `train` keeps the checkpoint with the best validation mean AUC (`run.best.pt`)."""
    out = Path(out)
    return out.with_name(f"{out.stem}.best{out.suffix}")


def train(cfg: TrainConfig) -> TrainResult:
    """Train a ChestNet as configured, writing `cfg.out` after every epoch.

    Returns:
        `TrainResult` with the checkpoint path and the last validation metrics.

    Raises:
        ModelsError (and subclasses): bad config, dataset or checkpoint to resume, or an
            unreadable image (named, in one line; the epochs before it are kept).
    """
    try:
        return _train(cfg)
    except ImageError as exc:
        raise ModelsError(
            f"{_reason(exc)}: an unreadable image ends training; fix it or drop its line "
            f"from the dataset's list, then run again with --resume (the checkpoint of the "
            "last finished epoch is kept)"
        ) from None


def _network(card: ModelCard) -> str:
    return (
        f"{card.arch}, output stride {card.output_stride}, "
        f"{len(card.labels)} labels, transition {card.transition_channels}"
    )


def _reason(exc: ImageError) -> str:
    """The image error's own message: a loader worker's comes wrapped in its traceback."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    last = lines[-1] if lines else type(exc).__name__
    return re.sub(r"^[\w.]*(Error|Exception): ", "", last)


@dataclass(frozen=True)
class _Process:
    """This training process: its device, its rank among `world`, its loader workers."""

    device: torch.device
    rank: int
    world: int
    workers: int

    @property
    def master(self) -> bool:
        """Rank 0 validates, saves and logs."""
        return self.rank == 0


@dataclass(frozen=True)
class _Data:
    """The labelled images and the loader that shuffles the training ones."""

    labels: list[str]
    warnings: list[str]  # label coverage, for the model card
    train_set: LabelledImages
    val_set: LabelledImages
    source: str  # where the pixels come from, for the model card
    dtype: type[np.integer[Any]]
    augment: BatchAugment | None
    augment_rng: torch.Generator
    sampler: EpochShuffle | DistributedSampler[Any]
    loader: Any


@dataclass(frozen=True)
class _Schedule:
    """Accumulation, length and learning rate of the run, all set from the data's size."""

    accum: int
    steps_per_epoch: int
    epochs: int
    total_steps: int
    peak_lr: float
    warmup_fraction: float
    schedule: str
    final_fraction: float
    warmup_steps: int | None

    def lr_at(self, step: int) -> float:
        """The learning rate of optimizer step `step` (`learning_rate_at`)."""
        return learning_rate_at(
            step,
            self.total_steps,
            peak=self.peak_lr,
            warmup_fraction=self.warmup_fraction,
            schedule=self.schedule,
            final_fraction=self.final_fraction,
            warmup_steps=self.warmup_steps,
        )


@dataclass
class _TrainState:
    """Where the run stands (what a checkpoint's `train_state` records, and the last metrics)."""

    start_epoch: int = 0
    step: int = 0
    best_auc: float = -math.inf
    metrics: dict[str, Any] = field(default_factory=dict)


def _train(cfg: TrainConfig) -> TrainResult:
    cfg.validate()
    proc = _start_process(cfg)
    out = Path(cfg.out)
    data, resumed = _load_data(cfg, proc, out)
    schedule = _plan_schedule(cfg, len(data.loader), proc.world)
    card = _model_card(cfg, data, schedule, proc.world)
    model, optimizer, state = _build_model(
        cfg, card, peak_lr=schedule.peak_lr, device=proc.device, out=out, resumed=resumed
    )
    if resumed is not None and proc.master:
        log.info("resumed from %s at epoch %d, step %d", out, state.start_epoch, state.step)
    net = _wrap_model(cfg, model, proc)
    if proc.master:
        log.info(
            "%d training images, %d micro-batches of %d per epoch, accumulating %d "
            "(effective batch %d): %d optimizer steps per epoch, %d epochs, %d steps in all; "
            "%s lr %.2e (weights %s), warmup %d steps, %s decay; horizontal flips p=%.2f",
            len(data.train_set), len(data.loader), cfg.batch_size, schedule.accum,
            cfg.batch_size * schedule.accum * proc.world, schedule.steps_per_epoch,
            schedule.epochs, schedule.total_steps, cfg.optimizer, schedule.peak_lr, cfg.weights,
            card.training["warmup_steps"], cfg.schedule, card.training["hflip"],
        )  # fmt: skip
    augment = (
        partial(data.augment, generator=data.augment_rng) if data.augment is not None else None
    )

    # --- loop ----------------------------------------------------------------------------
    epoch = state.start_epoch
    upcoming: Iterator[Any] | None = None
    for epoch in range(state.start_epoch, schedule.epochs):
        if cfg.max_steps is not None and state.step >= cfg.max_steps:
            break
        if upcoming is None:
            data.sampler.set_epoch(epoch)
            upcoming = iter(data.loader)
        batches, upcoming = upcoming, None
        trained_on: list[int] = []
        title = f"epoch {epoch + 1}/{schedule.epochs}" if cfg.progress and proc.master else None
        state.step, stats = train_one_epoch(
            net,
            data.loader,
            optimizer,
            device=proc.device,
            loss_kind=cfg.loss,
            accum=schedule.accum,
            step=state.step,
            lr_at=schedule.lr_at,
            grad_clip=cfg.grad_clip,
            max_steps=cfg.max_steps,
            distributed=cfg.distributed,
            progress=title,
            augment=augment,
            trained_on=trained_on,
            batches=batches,
        )
        if epoch + 1 < schedule.epochs and (cfg.max_steps is None or state.step < cfg.max_steps):
            # The next epoch's loading starts now, while this one is validated and saved:
            # its first batch would otherwise keep the device waiting at every epoch's
            # start (one worker builds a whole batch: about 0.4 s at 1024 px).
            data.sampler.set_epoch(epoch + 1)
            upcoming = iter(data.loader)
        if cfg.distributed:  # every rank: the shard it trained on (tests check disjointness)
            log.debug("rank %d of %d, epoch %d: trained on images %s", proc.rank, proc.world,
                      epoch + 1, sorted(trained_on))  # fmt: skip
        if proc.master:
            _validate_and_save(
                cfg, proc, model, optimizer, card, data, out, state, epoch=epoch, stats=stats
            )
    if cfg.distributed:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    for warning in card.warnings if proc.master else []:
        log.warning("WARNING: %s", warning)
    return TrainResult(
        checkpoint=out,
        metrics=state.metrics,
        epochs_run=epoch + 1 - state.start_epoch,
        steps=state.step,
        warnings=list(card.warnings) if proc.master else [],
    )


def _start_process(cfg: TrainConfig) -> _Process:
    """Threads, the process group (DDP), the device, the seed and the CUDA math flags."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.distributed:
        import torch.distributed as dist

        # torchrun provides RANK/WORLD_SIZE/MASTER_ADDR; init_process_group reads them.
        if torch.cuda.is_available() and cfg.device != "cpu":
            torch.cuda.set_device(cfg.local_rank)
            dist.init_process_group(backend="nccl")
            device = torch.device("cuda", cfg.local_rank)
        else:  # CPU processes (gloo): slow, but lets the DDP path be tested anywhere
            dist.init_process_group(backend="gloo")
            device = torch.device("cpu")
        rank, world = dist.get_rank(), dist.get_world_size()
    else:
        device = resolve_device(cfg.device)
        rank, world = 0, 1
    torch.manual_seed(cfg.seed + rank)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    workers = loader_workers(cfg.workers, device, cfg.local_world if cfg.distributed else 1)
    log.info("%d loader workers", workers)
    return _Process(device=device, rank=rank, world=world, workers=workers)


def _load_data(cfg: TrainConfig, proc: _Process, out: Path) -> tuple[_Data, Checkpoint | None]:
    """The splits, the datasets and the training loader; and the checkpoint to resume from,
    which is read once the labels are known, so a label mismatch refuses it."""
    records = load_records(cfg.data)
    root = Path(cfg.data) if Path(cfg.data).is_dir() else None
    train_records = split_records(records, "train", root=root, seed=cfg.seed)
    val_records = split_records(records, "val", root=root, seed=cfg.seed)
    if out.is_dir():  # found before the run, not when its first checkpoint is written
        raise ModelsError(
            f"--out {out} is a folder; give the checkpoint's file, e.g. {out / 'model.pt'}"
        )
    resumed: Checkpoint | None = None
    if cfg.resume and out.is_file() and cfg.labels == "auto":
        # the run goes on with the labels it started with
        resumed = load_checkpoint(out, map_location="cpu")
        labels = list(resumed.card.labels)
        data_warnings = label_coverage("auto", labels, records)
    else:
        labels = resolve_labels(cfg.labels, records)
        data_warnings = label_coverage(cfg.labels, labels, records)
    if cfg.resume and out.is_file() and resumed is None:
        resumed = load_checkpoint(out, labels=labels, map_location="cpu")
    if resumed is not None and resumed.train_state is None:
        raise ModelsError(f"{out}: checkpoint has no training state; cannot resume")
    dtype = np.uint16 if cfg.input_bits == 16 else np.uint8
    train_set: LabelledImages
    val_set: LabelledImages
    if cfg.prepared:
        images = PreparedImages.open(
            cfg.prepared, size=cfg.image_size, resize=cfg.resize, bits=cfg.input_bits
        )
        train_set = PreparedDataset(images, train_records, labels)
        val_set = PreparedDataset(images, val_records, labels)
        source = f"prepared cache {cfg.prepared}"
    else:
        cache_images = cfg.cache_images
        if cache_images is None:
            cache_images = len(records) * cfg.image_size**2 <= _CACHE_BYTES
        train_set, val_set = (
            FittedDataset(part, labels, size=cfg.image_size, resize=cfg.resize, dtype=dtype,
                          cache=cache_images)
            for part in (train_records, val_records)
        )  # fmt: skip
        source = "image files" + (", kept in RAM once loaded" if cache_images else "")
    if len(train_set) == 0 or len(val_set) == 0:
        raise ModelsError(
            f"{cfg.data}: {len(train_set)} training and {len(val_set)} validation images; "
            "need at least one of each"
        )
    augment = BatchAugment(shift=cfg.aug_shift, hflip=cfg.hflip) if cfg.augment else None
    # Drawn on the CPU, so a seed gives the same augmentation on any device.
    augment_rng = torch.Generator().manual_seed(cfg.seed + proc.rank)
    sampler: EpochShuffle | DistributedSampler[Any]
    if cfg.distributed:
        # drop_last: each epoch leaves out the last (< world) shuffled images rather than
        # padding with repeats, so the ranks' shards are disjoint.
        sampler = DistributedSampler(train_set, shuffle=True, seed=cfg.seed, drop_last=True)
    else:
        sampler = EpochShuffle(len(train_set), seed=cfg.seed)
    shard = len(sampler)  # this rank's images
    loader = build_loader(
        train_set,
        batch_size=cfg.batch_size,
        sampler=sampler,
        workers=proc.workers,
        pin_memory=proc.device.type == "cuda",
        drop_last=shard > cfg.batch_size,
        prefetch_factor=cfg.prefetch,
    )
    data = _Data(
        labels, data_warnings, train_set, val_set, source, dtype, augment, augment_rng,
        sampler, loader,
    )  # fmt: skip
    return data, resumed


def _plan_schedule(cfg: TrainConfig, micro_batches: int, world: int) -> _Schedule:
    """Everything in fractions of the run: accumulation, epochs, steps, peak learning rate."""
    accum = cfg.accum or accumulation_steps(
        micro_batches,
        batch_size=cfg.batch_size,
        world_size=world,
        target_batch=cfg.target_batch,
        min_steps_per_epoch=cfg.min_steps_per_epoch,
    )
    steps_per_epoch = math.ceil(micro_batches / accum)
    epochs = cfg.epochs or epochs_for(
        steps_per_epoch, base_epochs=cfg.base_epochs, min_steps=cfg.min_steps
    )
    total_steps = steps_per_epoch * epochs
    if cfg.max_steps is not None:
        total_steps = min(total_steps, cfg.max_steps)
    return _Schedule(
        accum=accum,
        steps_per_epoch=steps_per_epoch,
        epochs=epochs,
        total_steps=total_steps,
        peak_lr=cfg.lr if cfg.lr is not None else default_lr(cfg.optimizer, cfg.weights),
        warmup_fraction=cfg.warmup_fraction,
        schedule=cfg.schedule,
        final_fraction=cfg.final_lr_fraction,
        warmup_steps=cfg.warmup_steps,
    )


def _model_card(cfg: TrainConfig, data: _Data, schedule: _Schedule, world: int) -> ModelCard:
    """The card of the model to train: its network, preprocessing and how it is trained."""
    body_stages = cfg.body_stages or DEFAULT_BODY_STAGES.get(cfg.arch, 4)
    synthetic = is_synthetic(cfg.data)
    demo = cfg.demo or synthetic
    card = ModelCard(
        labels=data.labels,
        arch=cfg.arch,
        pooling=cfg.pooling,
        lse_r=cfg.lse_r,
        pool_on=cfg.pool_on,
        transition_channels=cfg.transition_channels
        or DEFAULT_TRANSITION_CHANNELS[(cfg.arch, body_stages)],
        output_stride=cfg.output_stride,
        body_stages=body_stages,
        dilated=cfg.output_stride == 16 and body_stages == 4,
        image_size=cfg.image_size,
        preprocessing=preprocessing_record(cfg.resize),
        heatmap_method=cfg.heatmap_method,
        heatmap_stage=cfg.heatmap_stage or default_heatmap_stage(cfg.image_size),
        heatmap_sigma=cfg.heatmap_sigma,
        training_data=cfg.training_data or _describe(cfg.data, data.train_set, data.val_set),
        training={
            "optimizer": cfg.optimizer,
            "weights": cfg.weights,
            "peak_lr": schedule.peak_lr,
            "batch_size": cfg.batch_size,
            "accum": schedule.accum,
            "effective_batch": cfg.batch_size * schedule.accum * world,
            "epochs": schedule.epochs,
            "epochs_rule": None
            if cfg.epochs
            else f"max({cfg.base_epochs}, "
            f"ceil({cfg.min_steps} / {schedule.steps_per_epoch} steps per epoch))",
            "steps_per_epoch": schedule.steps_per_epoch,
            "total_steps": schedule.total_steps,
            "warmup_steps": _warmup_steps(
                schedule.total_steps, cfg.warmup_fraction, cfg.warmup_steps
            ),
            "schedule": cfg.schedule,
            "augment": cfg.augment,
            "hflip": cfg.hflip if cfg.augment else 0.0,
            "augmentation": data.augment.record() if data.augment is not None else None,
            "input": {
                "source": data.source,
                "dtype": np.dtype(data.dtype).name,
                "fit": f"{cfg.resize} to {cfg.image_size} px on the integers (area "
                "interpolation when shrinking), window stretched to the dtype's range",
            },
            "synthetic_data": synthetic,
        },
        demo=demo,
    )
    if demo:
        card.intended_use = DEMO_INTENDED_USE
    return card


def _build_model(
    cfg: TrainConfig,
    card: ModelCard,
    *,
    peak_lr: float,
    device: torch.device,
    out: Path,
    resumed: Checkpoint | None,
) -> tuple[nn.Module, torch.optim.Optimizer, _TrainState]:
    """The model the card describes and its optimizer, both restored from `resumed` if given."""
    model = model_from_card(
        card, weights=None if (cfg.weights == "none" or resumed is not None) else "imagenet"
    )
    if resumed is not None:
        try:
            model.load_state_dict(resumed.model.state_dict())
        except RuntimeError:
            raise ModelsError(
                f"{out}: cannot resume: its network ({_network(resumed.card)}) is not this "
                f"run's ({_network(card)}); resume with the settings it was trained with, "
                "or write to another --out"
            ) from None
    # channels_last on CPU too: oneDNN trains a ResNet-18 at 256 px 1.36x faster in it
    # (2 cores, batch 16); results differ only by floating-point rounding.
    model = model.to(device).to(memory_format=torch.channels_last)
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    optimizer: torch.optim.Optimizer
    if cfg.optimizer == "sgd":
        optimizer = torch.optim.SGD(groups, lr=peak_lr, momentum=cfg.momentum, nesterov=True)
    else:
        optimizer = torch.optim.AdamW(groups, lr=peak_lr, fused=device.type == "cuda")
    state = _TrainState()
    if resumed is not None and resumed.train_state is not None:
        saved = resumed.train_state
        try:
            optimizer.load_state_dict(saved["optimizer"])
        except (ValueError, KeyError):
            raise ModelsError(
                f"{out}: cannot resume with --optimizer {cfg.optimizer}: the checkpoint's "
                "optimizer state is another's; resume with the optimizer it was trained with"
            ) from None
        state.start_epoch, state.step = int(saved["epoch"]), int(saved["step"])
        state.best_auc = float(saved.get("best_mean_auc", -math.inf))
    return model, optimizer, state


def _wrap_model(cfg: TrainConfig, model: nn.Module, proc: _Process) -> nn.Module:
    """The module that trains: `model` compiled (checked first) and DDP-wrapped as set."""
    net: nn.Module = model
    if cfg.compile if cfg.compile is not None else proc.device.type == "cuda":
        # Shaped, typed and laid out as train_one_epoch's batches, so nothing recompiles.
        example = torch.zeros(cfg.batch_size, 1, cfg.image_size, cfg.image_size, device=proc.device)
        if proc.device.type == "cuda":
            example = example.contiguous(memory_format=torch.channels_last)
        net = compile_or_eager(model, example)
    if cfg.distributed:
        ids = [cfg.local_rank] if proc.device.type == "cuda" else None
        net = nn.parallel.DistributedDataParallel(net, device_ids=ids)
    return net


def _validate_and_save(
    cfg: TrainConfig,
    proc: _Process,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    card: ModelCard,
    data: _Data,
    out: Path,
    state: _TrainState,
    *,
    epoch: int,
    stats: dict[str, float],
) -> None:
    """Validate the epoch's model, write it to `out` (and beside it when it is the best)."""
    val_metrics, thresholds, temperatures = validate(
        model,
        data.val_set,
        device=proc.device,
        batch_size=cfg.batch_size * 2,
        workers=proc.workers,
        threshold_method=cfg.threshold_method,
    )
    state.metrics = {
        "validation": val_metrics,
        "train_loss": round(stats["loss"], 5),
        "train_images_per_s": round(stats["images_per_s"], 2),
        "train_input_wait_s": round(stats["input_wait_s"], 3),
        "epoch": epoch + 1,
        "step": state.step,
        "world_size": proc.world,
    }
    card.thresholds = thresholds
    card.temperatures = temperatures
    card.metrics = state.metrics
    auc = val_metrics["mean_auc"]
    improved = auc is not None and auc > state.best_auc
    if improved:
        state.best_auc = auc
    # Judged on the best epoch so far, so the file on disk always says the truth.
    card.warnings = _near_chance_warnings(state.best_auc, cfg.near_chance_auc, len(data.val_set))
    card.warnings += _label_warnings(val_metrics, temperatures, cfg.near_chance_auc)
    card.warnings += data.warnings
    save_checkpoint(
        out,
        model=model,
        card=card,
        train_state={
            "optimizer": optimizer.state_dict(),
            "epoch": epoch + 1,
            "step": state.step,
            "config": asdict(replace(cfg, resume=False)),
            "best_mean_auc": state.best_auc,
        },
    )
    if improved:
        # The last epoch is not always the best: keep a copy of the best beside it.
        shutil.copyfile(out, best_checkpoint_path(out))
    log.info(
        "epoch %d: loss %.4f, %.1f img/s (%.2f s waiting for input), val mean AUC %s -> %s",
        epoch + 1,
        stats["loss"],
        stats["images_per_s"],
        stats["input_wait_s"],
        val_metrics["mean_auc"],
        out,
    )


def _near_chance_warnings(best_auc: float, limit: float, n_val: int) -> list[str]:
    if best_auc == -math.inf:
        return [
            f"validation mean AUC is undefined: no label has both positive and negative "
            f"images among the {n_val} validation images; this model was never checked"
        ]
    if best_auc < limit:
        return [
            f"validation mean AUC stayed near chance (best {best_auc:.3f} < {limit}): the "
            "model did not learn. Check the labels, train longer, or change lr/epochs"
        ]
    return []


def _label_warnings(
    val_metrics: dict[str, Any], temperatures: dict[str, float], limit: float
) -> list[str]:
    # Per label, what the mean hides (issue 22): a label near chance, or one whose
    # temperature sits at the cap (its logits carry no signal, every probability is ~0.5).
    out: list[str] = []
    for name, entry in (val_metrics.get("per_label") or {}).items():
        auc = entry.get("auc")
        if auc is not None and auc < limit:
            out.append(
                f"{name}: validation AUC {auc:.3f} < {limit} (near chance); do not trust its "
                "probabilities or boxes"
            )
        t = temperatures.get(name)
        if t is not None and t >= MAX_TEMPERATURE:
            out.append(
                f"{name}: temperature at its cap ({MAX_TEMPERATURE:g}): the logits carry "
                "almost no signal, so its probabilities sit near 0.5 on every image"
            )
    return out


def _describe(data: str, train_set: LabelledImages, val_set: LabelledImages) -> str:
    t, v = train_set.describe(), val_set.describe()
    return (
        f"{data}: {t['images']} training images ({t['patients']} patients), {v['images']} "
        f"validation images; training positives per label {t['positives']}"
    )
