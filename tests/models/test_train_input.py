"""Training with the issue-19 input: torch.compile by default on CUDA with an eager
fallback, the augmentation on the model card, and phantoms still learned."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from app.cli import build_parser
from models.train import compile_or_eager, load_train_config, train

pytestmark = pytest.mark.issue(19)


def _tiny() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))  # fmt: skip


def test_compile_falls_back_to_eager_with_a_log_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    model = _tiny().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def broken(module: nn.Module, **kwargs: Any) -> Any:
        def call(*args: Any) -> torch.Tensor:
            module(*args)  # runs (touching batch-norm statistics) before it fails
            raise RuntimeError("backend compiler failed: no C compiler found\nmore detail")

        return call

    monkeypatch.setattr(torch, "compile", broken)
    with caplog.at_level(logging.WARNING, logger="models.train"):
        net = compile_or_eager(model, torch.rand(2, 1, 16, 16))
    assert net is model
    [record] = [r for r in caplog.records if "torch.compile failed" in r.getMessage()]
    assert "RuntimeError: backend compiler failed: no C compiler found" in record.getMessage()
    assert "training without it" in record.getMessage()
    # The check left no trace: same statistics, no gradients.
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.slow  # imports torch._dynamo: seconds
def test_compile_checked_on_one_step_leaves_no_trace(caplog: pytest.LogCaptureFixture) -> None:
    model = _tiny().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with caplog.at_level(logging.INFO, logger="models.train"):
        net = compile_or_eager(model, torch.rand(2, 1, 16, 16), backend="eager")
    assert net is not model
    assert any("compiled and checked" in r.getMessage() for r in caplog.records)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    x = torch.rand(3, 1, 16, 16)
    model.eval()
    torch.testing.assert_close(net(x), model(x))


def test_compile_is_on_by_default_only_where_it_pays() -> None:
    assert load_train_config(None, data="x").compile is None  # None: on for CUDA, off for CPU
    parser = build_parser()
    base = ["train", "--data", "x"]
    assert parser.parse_args(base).compile is None
    assert parser.parse_args([*base, "--compile"]).compile is True
    assert parser.parse_args([*base, "--no-compile"]).compile is False
    args = parser.parse_args([*base, "--prepared", "p", "--input-bits", "16", "--prefetch", "6"])
    assert (args.prepared, args.input_bits, args.prefetch) == ("p", 16, 6)
    from models.errors import ModelsError

    with pytest.raises(ModelsError, match="input_bits"):
        load_train_config(None, data="x", input_bits=12)


def test_loader_workers_fill_the_cores_on_a_gpu_and_leave_them_to_the_model_on_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import models.decode_pool
    from models.data import loader_workers
    from models.errors import ModelsError

    monkeypatch.setattr(models.decode_pool, "default_workers", lambda: 16)
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert load_train_config(None, data="x").workers is None
    assert loader_workers(None, cuda) == 15  # the training loop keeps one core
    assert loader_workers(None, cuda, local_world=8) == 2  # eight ranks share the 16
    assert loader_workers(None, cuda, local_world=4) == 3
    assert loader_workers(None, cpu) == 2
    assert loader_workers(5, cuda) == 5 and loader_workers(0, cpu) == 0
    with pytest.raises(ModelsError, match="workers"):
        load_train_config(None, data="x", workers=-1)


@pytest.mark.slow
def test_phantoms_are_still_learned_and_the_card_says_how(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Big, high-contrast lesions, so a few dozen CPU steps separate them from normals.
    from models.checkpoint import load_checkpoint
    from models.phantoms import write_phantom_dataset

    data = write_phantom_dataset(tmp_path / "ph", n=160, seed=2, size=64, prevalence=0.4,
                                 labels=["Cardiomegaly", "Effusion"])  # fmt: skip
    out = tmp_path / "m.pt"
    cfg = load_train_config(
        None, data=str(data), out=str(out), arch="resnet18", weights="none", image_size=64,
        body_stages=3, transition_channels=32, labels="auto", epochs=6, batch_size=16,
        accum=1, lr=3e-3, warmup_steps=5, workers=0, threads=1, progress=False,
        device="cpu", seed=0,
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="models.train"):
        result = train(cfg)
    assert not any("torch.compile" in r.getMessage() for r in caplog.records)  # off on CPU
    assert result.metrics["validation"]["mean_auc"] >= 0.8, result.metrics["validation"]
    training = load_checkpoint(out).card.training
    augmentation = training["augmentation"]
    assert augmentation["rotate_deg"] == 7.0 and augmentation["hflip"] == 0.5
    assert augmentation["scale"] == [0.92, 1.08] and augmentation["brightness"] == 0.05
    assert "per batch on the training device" in augmentation["where"]
    assert training["input"]["dtype"] == "uint8" and training["hflip"] == 0.5
