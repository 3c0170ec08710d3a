"""Training, in one loop you can read top to bottom (after nanoGPT's train.py).

    cfg = TrainConfig(data="nih/", out="runs/chestnet.pt", arch="resnet50", image_size=512)
    train(cfg)

On CUDA: bf16 autocast and channels_last; on CPU: plain fp32. Gradients accumulate
over `accum` micro-batches (effective batch = batch_size x accum x world size; the
paper used 80). Each epoch ends with validation (per-label AUC), operating thresholds
chosen on validation, and a checkpoint holding the model card and the state to resume.

Multi-GPU: launch with torchrun; the CLI passes `distributed=True`:
    torchrun --standalone --nproc_per_node=8 -m app.cli train --data nih/ --out ckpt.pt
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import time
import tomllib
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from models.checkpoint import ModelCard, load_checkpoint, save_checkpoint
from models.data import ChestXrayDataset, load_records, resolve_labels, split_records
from models.errors import ModelsError
from models.evaluate import choose_thresholds, classification_metrics, predict_dataset
from models.loss import compute_loss
from models.network import build_model
from models.predict import resolve_device
from models.transforms import RESIZE_MODES, EvalTransform, TrainTransform, preprocessing_record

__all__ = [
    "TrainConfig",
    "TrainResult",
    "best_checkpoint_path",
    "evaluate",
    "load_train_config",
    "train",
    "train_one_epoch",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    """Every training setting, flat and typed. TOML files set these keys; unknown keys fail."""

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
    transition_channels: int | None = None
    output_stride: int = 32
    body_stages: int = 4  # 3: stop after layer3 (needs output_stride 16)
    labels: str = "chestxray14"  # "chestxray14" | "chestxray8" | "auto" | "A,B,C"
    # optimisation
    epochs: int = 10
    batch_size: int = 16
    accum: int = 5
    optimizer: str = "sgd"  # "sgd" | "adamw"
    lr: float = 1e-3
    momentum: float = 0.9
    weight_decay: float = 1e-4
    warmup_steps: int = 50
    schedule: str = "cosine"  # "cosine" | "constant"
    loss: str = "weighted"  # "weighted" (paper Eq. 1) | "bce"
    grad_clip: float = 5.0
    max_steps: int | None = None  # stop after this many optimizer steps (smoke tests)
    # data
    workers: int = 2
    seed: int = 0
    augment: bool = True
    aug_shift: float = 0.05  # max random translation, fraction of the side
    cache_images: bool = False  # keep resized uint8 images in RAM (small sets)
    threshold_method: str = "youden"  # "youden" | "f1"
    training_data: str = ""  # free text for the model card
    # runtime
    device: str = "auto"
    resume: bool = False
    compile: bool = False
    distributed: bool = False
    local_rank: int = 0
    threads: int | None = None  # torch CPU threads (None: torch default)
    progress: bool = True
    demo: bool = False  # model card flag: not a clinically meaningful model

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
        }
        for key, (value, allowed) in checks.items():
            if value not in allowed:
                raise ModelsError(f"config {key} = {value!r}; expected one of {', '.join(allowed)}")
        for key in ("epochs", "batch_size", "accum", "image_size"):
            if getattr(self, key) < 1:
                raise ModelsError(f"config {key} must be >= 1, got {getattr(self, key)}")
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
    """What `train` produced: the checkpoint path and the last validation metrics."""

    checkpoint: Path
    metrics: dict[str, Any]
    epochs_run: int
    steps: int


def _lr_at(step: int, total: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant" or total <= cfg.warmup_steps:
        return cfg.lr
    progress = (step - cfg.warmup_steps) / max(1, total - cfg.warmup_steps)
    return cfg.lr * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def train_one_epoch(
    model: nn.Module,
    loader: Any,
    optimizer: torch.optim.Optimizer,
    *,
    device: torch.device,
    loss_kind: str,
    accum: int,
    step: int,
    total_steps: int,
    cfg: TrainConfig,
    epoch: int,
) -> tuple[int, dict[str, float]]:
    """One pass over `loader`, stepping the optimizer every `accum` micro-batches.

    Returns:
        (optimizer steps done so far, {"loss": mean loss, "images_per_s": throughput})
    """
    model.train()
    cuda = device.type == "cuda"
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else nullcontext()
    show = cfg.progress and cfg.local_rank == 0
    bar: Any = loader
    if show:
        from tqdm import tqdm

        bar = tqdm(loader, desc=f"epoch {epoch + 1}/{cfg.epochs}", dynamic_ncols=True, leave=True)
    # Losses stay on the device; reading them back every step would sync the GPU.
    losses: list[torch.Tensor] = []
    seen = 0
    t0 = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    for micro, (x, y, _) in enumerate(bar):
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        if cuda:
            x = x.contiguous(memory_format=torch.channels_last)
        last_micro = (micro + 1) % accum == 0 or micro + 1 == len(loader)
        # DDP: only all-reduce gradients on the micro-batch that steps.
        sync = model.no_sync() if (cfg.distributed and not last_micro) else nullcontext()  # type: ignore[operator]
        with sync:
            with autocast:
                logits = model(x)
            loss = compute_loss(logits, y, loss_kind)  # type: ignore[arg-type]
            (loss / accum).backward()  # type: ignore[no-untyped-call]
        losses.append(loss.detach())
        seen += x.shape[0]
        if last_micro:
            lr = _lr_at(step, total_steps, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            if cfg.grad_clip > 0:
                nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if show and (step % 10 == 0 or step == 1):
                rate = seen / (time.perf_counter() - t0)
                recent = float(torch.stack(losses[-20:]).mean())
                bar.set_postfix(loss=f"{recent:.4f}", lr=f"{lr:.2e}", img_s=f"{rate:.1f}")
            if cfg.max_steps is not None and step >= cfg.max_steps:
                break
    if cuda:
        torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - t0
    return step, {
        "loss": float(torch.stack(losses).mean()) if losses else math.nan,
        "images_per_s": seen / elapsed if elapsed > 0 else 0.0,
    }


def evaluate(
    model: nn.Module, dataset: ChestXrayDataset, *, device: torch.device, cfg: TrainConfig
) -> tuple[dict[str, Any], dict[str, float]]:
    """Validation: per-label AUC and operating thresholds chosen on this set.

    Returns:
        (metrics dict from `classification_metrics`, thresholds label -> probability)
    """
    inner = getattr(model, "module", model)
    probs, targets = predict_dataset(
        inner, dataset, device=device, batch_size=cfg.batch_size * 2, workers=cfg.workers
    )
    thresholds = choose_thresholds(
        probs,
        targets,
        dataset.labels,
        method=cfg.threshold_method,  # type: ignore[arg-type]
    )
    return classification_metrics(probs, targets, dataset.labels, thresholds), thresholds



def best_checkpoint_path(out: str | Path) -> Path:
    """Where `train` keeps the checkpoint with the best validation mean AUC (`run.best.pt`)."""
    out = Path(out)
    return out.with_name(f"{out.stem}.best{out.suffix}")

def train(cfg: TrainConfig) -> TrainResult:
    """Train a ChestNet as configured, writing `cfg.out` after every epoch.

    Returns:
        `TrainResult` with the checkpoint path and the last validation metrics.

    Raises:
        ModelsError (and subclasses): bad config, dataset or checkpoint to resume.
    """
    cfg.validate()
    # --- setup ---------------------------------------------------------------------------
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
    master = rank == 0
    torch.manual_seed(cfg.seed + rank)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    # --- data ----------------------------------------------------------------------------
    records = load_records(cfg.data)
    root = Path(cfg.data) if Path(cfg.data).is_dir() else None
    train_records = split_records(records, "train", root=root, seed=cfg.seed)
    val_records = split_records(records, "val", root=root, seed=cfg.seed)
    labels = resolve_labels(cfg.labels, records)
    out = Path(cfg.out)
    resume_state: dict[str, Any] | None = None
    if cfg.resume and out.is_file():
        ckpt = load_checkpoint(out, labels=labels, map_location="cpu")
        resume_state = ckpt.train_state
        if resume_state is None:
            raise ModelsError(f"{out}: checkpoint has no training state; cannot resume")
    cache = cfg.image_size if cfg.cache_images else None
    train_tf: Callable[[np.ndarray], torch.Tensor] = (
        TrainTransform(cfg.image_size, shift=cfg.aug_shift, resize=cfg.resize)  # type: ignore[arg-type]
        if cfg.augment
        else EvalTransform(cfg.image_size, cfg.resize)  # type: ignore[arg-type]
    )
    train_set = ChestXrayDataset(train_records, labels, train_tf, cache_size=cache)
    val_tf = EvalTransform(cfg.image_size, cfg.resize)  # type: ignore[arg-type]
    val_set = ChestXrayDataset(val_records, labels, val_tf, cache_size=cache)
    if len(train_set) == 0 or len(val_set) == 0:
        raise ModelsError(
            f"{cfg.data}: {len(train_set)} training and {len(val_set)} validation images; "
            "need at least one of each"
        )
    sampler: Any = None
    if cfg.distributed:
        from torch.utils.data.distributed import DistributedSampler

        sampler = DistributedSampler(train_set, shuffle=True, seed=cfg.seed)
    loader = torch.utils.data.DataLoader(
        train_set,
        batch_size=cfg.batch_size,
        shuffle=sampler is None,
        sampler=sampler,
        num_workers=cfg.workers,
        pin_memory=device.type == "cuda",
        drop_last=len(train_set) > cfg.batch_size,
        persistent_workers=cfg.workers > 0,
    )

    # --- model and optimizer -------------------------------------------------------------
    card = ModelCard(
        labels=labels,
        arch=cfg.arch,
        pooling=cfg.pooling,
        lse_r=cfg.lse_r,
        pool_on=cfg.pool_on,
        transition_channels=cfg.transition_channels,
        output_stride=cfg.output_stride,
        body_stages=cfg.body_stages,
        image_size=cfg.image_size,
        preprocessing=preprocessing_record(cfg.resize),
        training_data=cfg.training_data or _describe(cfg.data, train_set, val_set),
        demo=cfg.demo,
    )
    if cfg.demo:
        from models.checkpoint import DEMO_INTENDED_USE

        card.intended_use = DEMO_INTENDED_USE
    model = build_model(
        arch=cfg.arch,
        num_labels=len(labels),
        weights=None if (cfg.weights == "none" or resume_state) else "imagenet",
        pooling=cfg.pooling,  # type: ignore[arg-type]
        lse_r=cfg.lse_r,
        pool_on=cfg.pool_on,  # type: ignore[arg-type]
        transition_channels=cfg.transition_channels,
        output_stride=cfg.output_stride,
        body_stages=cfg.body_stages,
    )
    if resume_state is not None:
        model.load_state_dict(ckpt.model.state_dict())
    model.to(device)
    if device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    decay = [p for n, p in model.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    optimizer: torch.optim.Optimizer
    if cfg.optimizer == "sgd":
        optimizer = torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=True)
    else:
        optimizer = torch.optim.AdamW(groups, lr=cfg.lr, fused=device.type == "cuda")
    start_epoch, step = 0, 0
    # The last epoch is not always the best: keep a copy of the best on validation beside it.
    best_path = best_checkpoint_path(out)
    best_auc = -math.inf
    if resume_state is not None:
        optimizer.load_state_dict(resume_state["optimizer"])
        start_epoch, step = int(resume_state["epoch"]), int(resume_state["step"])
        best_auc = float(resume_state.get("best_mean_auc", -math.inf))
        log.info("resumed from %s at epoch %d, step %d", out, start_epoch, step)
    net: nn.Module = model
    if cfg.compile:
        net = torch.compile(net)  # type: ignore[assignment]
    if cfg.distributed:
        ids = [cfg.local_rank] if device.type == "cuda" else None
        net = nn.parallel.DistributedDataParallel(net, device_ids=ids)
    steps_per_epoch = math.ceil(len(loader) / cfg.accum)
    total_steps = steps_per_epoch * cfg.epochs
    if cfg.max_steps is not None:
        total_steps = min(total_steps, cfg.max_steps)

    # --- loop ----------------------------------------------------------------------------
    metrics: dict[str, Any] = {}
    epoch = start_epoch
    for epoch in range(start_epoch, cfg.epochs):
        if cfg.max_steps is not None and step >= cfg.max_steps:
            break
        if sampler is not None:
            sampler.set_epoch(epoch)
        step, stats = train_one_epoch(
            net,
            loader,
            optimizer,
            device=device,
            loss_kind=cfg.loss,
            accum=cfg.accum,
            step=step,
            total_steps=total_steps,
            cfg=cfg,
            epoch=epoch,
        )
        if not master:
            continue
        val_metrics, thresholds = evaluate(model, val_set, device=device, cfg=cfg)
        metrics = {
            "validation": val_metrics,
            "train_loss": round(stats["loss"], 5),
            "train_images_per_s": round(stats["images_per_s"], 2),
            "epoch": epoch + 1,
            "step": step,
            "world_size": world,
        }
        card.thresholds = thresholds
        card.metrics = metrics
        auc = val_metrics["mean_auc"]
        improved = auc is not None and auc > best_auc
        if improved:
            best_auc = auc
        save_checkpoint(
            out,
            model=model,
            card=card,
            train_state={
                "optimizer": optimizer.state_dict(),
                "epoch": epoch + 1,
                "step": step,
                "config": asdict(replace(cfg, resume=False)),
                "best_mean_auc": best_auc,
            },
        )
        if improved:
            shutil.copyfile(out, best_path)
        log.info(
            "epoch %d: loss %.4f, %.1f img/s, val mean AUC %s -> %s",
            epoch + 1,
            stats["loss"],
            stats["images_per_s"],
            val_metrics["mean_auc"],
            out,
        )
    if cfg.distributed:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()
    return TrainResult(
        checkpoint=out, metrics=metrics, epochs_run=epoch + 1 - start_epoch, steps=step
    )


def _describe(data: str, train_set: ChestXrayDataset, val_set: ChestXrayDataset) -> str:
    t, v = train_set.describe(), val_set.describe()
    return (
        f"{data}: {t['images']} training images ({t['patients']} patients), {v['images']} "
        f"validation images; training positives per label {t['positives']}"
    )
