"""A one-step train and a resume on a tiny phantom set."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from models.checkpoint import load_checkpoint
from models.errors import ModelsError
from models.train import best_checkpoint_path, load_train_config, train


@pytest.mark.slow
def test_train_one_step_then_resume(phantom_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.pt"
    common = dict(
        data=str(phantom_dir), out=str(out), arch="resnet18", weights="none", image_size=64,
        labels="auto", batch_size=4, accum=2, workers=0, transition_channels=16,
        progress=False, threads=1, optimizer="adamw", lr=1e-3, demo=True,
    )  # fmt: skip
    result = train(load_train_config(None, epochs=1, max_steps=1, **common))
    assert result.steps == 1
    first = load_checkpoint(out)
    assert first.train_state is not None and first.train_state["step"] == 1
    assert first.card.demo and first.card.metrics["epoch"] == 1
    assert set(first.card.thresholds) == set(first.card.labels)
    assert first.card.metrics["validation"]["n_images"] > 0
    weights = {k: v.clone() for k, v in first.model.state_dict().items()}

    resumed = train(load_train_config(None, epochs=2, max_steps=2, resume=True, **common))
    assert resumed.steps == 2 and resumed.epochs_run == 1
    second = load_checkpoint(out)
    assert second.train_state is not None and second.train_state["epoch"] == 2
    changed = [k for k, v in second.model.state_dict().items() if not torch.equal(v, weights[k])]
    assert changed  # the resumed run kept training from the saved weights
    # The best epoch on validation is kept beside the last one, and survives the resume.
    best = load_checkpoint(best_checkpoint_path(out))
    best_auc = second.train_state["best_mean_auc"]
    assert best.card.metrics["validation"]["mean_auc"] == best_auc
    assert best_auc >= first.card.metrics["validation"]["mean_auc"]


def test_train_config_rejects_unknown_keys_and_values(tmp_path: Path) -> None:
    toml = tmp_path / "cfg.toml"
    toml.write_text('data = "x"\narch = "resnet18"\nlearning_rate = 0.1\n')
    with pytest.raises(ModelsError, match="unknown train config keys"):
        load_train_config(toml)
    toml.write_text('data = "x"\noptimizer = "lbfgs"\n')
    with pytest.raises(ModelsError, match="optimizer"):
        load_train_config(toml)
    toml.write_text('data = "x"\nepochs = 3\n')
    cfg = load_train_config(toml, epochs=5, lr=None)
    assert cfg.epochs == 5 and cfg.lr == 1e-3
