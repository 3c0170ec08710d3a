"""Training: the schedule and accumulation rules, a one-step train and a resume on a tiny
phantom set, and the near-chance warning."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from app.cli import main
from models.checkpoint import load_checkpoint
from models.errors import ModelsError
from models.train import (
    accumulation_steps,
    best_checkpoint_path,
    default_lr,
    epochs_for,
    learning_rate_at,
    load_train_config,
    train,
)


@pytest.mark.parametrize("workers", [0, 1])
def test_an_unreadable_training_image_is_one_line_naming_it(
    phantom_dir: Path, tmp_path: Path, workers: int
) -> None:
    # In a loader worker it ended `cxr train` with the worker's whole traceback.
    import shutil

    from models.errors import ModelsError

    data = tmp_path / "data"
    shutil.copytree(phantom_dir, data)
    victim = sorted((data / "images").iterdir())[0]
    victim.write_bytes(victim.read_bytes()[:100])
    cfg = load_train_config(
        None, data=str(data), out=str(tmp_path / "run.pt"), arch="resnet18", weights="none",
        image_size=64, labels="auto", batch_size=64, workers=workers, transition_channels=16,
        progress=False, threads=1, epochs=1, max_steps=1, cache_images=False,
    )  # fmt: skip
    with pytest.raises(ModelsError) as caught:
        train(cfg)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith(f"{victim}: ") and "--resume" in message


def test_train_refuses_before_running_what_would_fail_after(
    phantom_dir: Path, tmp_path: Path
) -> None:
    # A folder as --out failed when the first checkpoint was written; --max-steps 0 wrote a
    # model that never trained; resuming another network ended in load_state_dict's traceback.
    from models.errors import ModelsError

    common = dict(
        data=str(phantom_dir), arch="resnet18", weights="none", image_size=64, labels="auto",
        batch_size=8, workers=0, transition_channels=16, progress=False, threads=1,
        epochs=1, max_steps=1,
    )  # fmt: skip
    (tmp_path / "folder").mkdir()
    with pytest.raises(ModelsError, match=r"is a folder; give the checkpoint's file"):
        train(load_train_config(None, **{**common, "out": str(tmp_path / "folder")}))
    with pytest.raises(ModelsError, match="max_steps must be >= 1"):
        load_train_config(None, **{**common, "out": "x.pt", "max_steps": 0})
    out = tmp_path / "run.pt"
    train(load_train_config(None, **{**common, "out": str(out)}))
    other = {**common, "out": str(out), "transition_channels": 32, "resume": True}
    with pytest.raises(
        ModelsError, match=r"cannot resume: its network \(resnet18.*transition 16\)"
    ):
        train(load_train_config(None, **other))


@pytest.mark.slow
def test_train_one_step_then_resume(phantom_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.pt"
    common = dict(
        data=str(phantom_dir), out=str(out), arch="resnet18", weights="none", image_size=64,
        labels="auto", batch_size=4, accum=2, workers=0, transition_channels=16,
        progress=False, threads=1, optimizer="adamw", lr=1e-3,
    )  # fmt: skip
    result = train(load_train_config(None, epochs=1, max_steps=1, **common))
    assert result.steps == 1
    first = load_checkpoint(out)
    assert first.train_state is not None and first.train_state["step"] == 1
    # Phantoms carry the synthetic marker: the card says demo without being told (issue 7).
    assert first.card.demo and "DEMONSTRATION" in first.card.intended_use
    assert first.card.training["synthetic_data"] and first.card.metrics["epoch"] == 1
    assert first.card.training["hflip"] == 0.5  # the default, written down
    assert set(first.card.temperatures) == set(first.card.labels)
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
    assert cfg.epochs == 5 and cfg.lr is None and cfg.accum is None
    bad_values = ("warmup_fraction = 1.5", "lr = -1.0", "accum = 0", "hflip = 1.5", "hflip = nan",
                  "heatmap_sigma = -0.5", "heatmap_sigma = nan")  # fmt: skip
    for bad in bad_values:
        toml.write_text(f'data = "x"\n{bad}\n')
        with pytest.raises(ModelsError):
            load_train_config(toml)


def test_heatmap_stage_follows_the_input_size_unless_set(tmp_path: Path) -> None:
    from models.train import default_heatmap_stage

    # Stage 2 (stride 8) once its map has 64 cells a side; finer (stride 4) below that.
    assert [default_heatmap_stage(s) for s in (128, 256, 448, 512, 1024)] == [1, 1, 1, 2, 2]
    cfg = load_train_config(None, data="x", arch="resnet18", heatmap_stage=3)
    assert cfg.heatmap_stage == 3  # an explicit stage is kept
    with pytest.raises(ModelsError, match="heatmap_stage"):
        load_train_config(None, data="x", arch="resnet18", heatmap_stage=4)  # no layer4


@pytest.mark.parametrize("total", [10, 55, 100_000])
def test_learning_rate_schedule_is_set_in_fractions_of_the_run(total: int) -> None:
    peak = 2e-3
    lrs = np.array([learning_rate_at(s, total, peak=peak, warmup_fraction=0.1) for s in
                    range(total)])  # fmt: skip
    warmup = max(1, round(0.1 * total))
    # Warmup: linear up to the peak, reached at the end of the warmup share of the run.
    assert lrs[0] == pytest.approx(peak / warmup)
    assert lrs[warmup - 1] == pytest.approx(peak) and lrs.max() == pytest.approx(peak)
    assert np.all(np.diff(lrs[:warmup]) > 0)
    # Decay: monotone cosine down to 2% of the peak at the last step.
    assert np.all(np.diff(lrs[warmup - 1 :]) <= 1e-12)
    assert lrs[-1] == pytest.approx(0.02 * peak)
    # The run's middle sits at the same point of the curve whatever its length
    # (the issue's run: 50 fixed warmup steps of 55 left no time to learn).
    mid = (warmup + total - 1) // 2
    assert lrs[mid] == pytest.approx(peak * (0.02 + 0.98 * 0.5), rel=0.15)
    assert learning_rate_at(total // 2, total, peak=peak, schedule="constant",
                            warmup_fraction=0.1) == peak  # fmt: skip


def test_accumulation_rule_keeps_enough_steps_per_epoch() -> None:
    # ChestX-ray14's 78,468 training images in micro-batches of 16: the paper's batch of 80.
    assert accumulation_steps(math.ceil(78_468 / 16), batch_size=16) == 5
    # 420 phantoms: 26 micro-batches; accumulating would leave < 50 steps per epoch.
    assert accumulation_steps(26, batch_size=16) == 1
    # In between: as much accumulation as keeps 50 steps per epoch.
    assert accumulation_steps(150, batch_size=16) == 3
    # Eight GPUs with 16 each already make 128 >= 80.
    assert accumulation_steps(10_000, batch_size=16, world_size=8) == 1
    assert accumulation_steps(0, batch_size=16) == 1


@pytest.mark.issue(9)
def test_epochs_rule_gives_small_data_enough_steps() -> None:
    # ChestX-ray14 at the paper's batch of 80: ~980 steps per epoch, 10 epochs are plenty.
    assert epochs_for(math.ceil(78_468 / 80)) == 10
    # The issue's 600 phantoms: 26 steps per epoch; 10 epochs (260 steps) did not learn.
    assert epochs_for(26) == 24 and 24 * 26 >= 600
    # Tiny sets get the minimum number of steps, never fewer than base_epochs.
    assert epochs_for(1) == 600
    assert epochs_for(0) == 600
    assert epochs_for(200, base_epochs=3, min_steps=100) == 3
    assert epochs_for(7, base_epochs=1, min_steps=50) == 8


@pytest.mark.slow
@pytest.mark.issue(9)
def test_train_without_epochs_runs_the_rules_length(phantom_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.pt"
    cfg = load_train_config(
        None, data=str(phantom_dir), out=str(out), arch="resnet18", weights="none",
        image_size=32, labels="auto", batch_size=8, workers=0, transition_channels=8,
        progress=False, threads=1, min_steps=6, base_epochs=1, heatmap_sigma=0.75,
    )  # fmt: skip
    assert cfg.epochs is None
    result = train(cfg)
    card = load_checkpoint(out).card
    # 32 px: stage 2's map would be 4 cells a side, so the rule picks stage 1 (stride 4).
    assert card.heatmap_method == "layercam" and card.heatmap_stage == 1
    assert card.heatmap_sigma == 0.75  # the config's blur is what prediction uses
    training = card.training
    steps_per_epoch = training["steps_per_epoch"]
    assert training["epochs"] == epochs_for(steps_per_epoch, base_epochs=1, min_steps=6)
    assert training["epochs"] * steps_per_epoch >= 6
    assert result.epochs_run == training["epochs"] and result.steps == training["total_steps"]
    assert "ceil(6 /" in training["epochs_rule"]


def test_default_lr_depends_on_weights() -> None:
    assert default_lr("adamw", "none") > default_lr("adamw", "imagenet")
    assert default_lr("sgd", "none") > default_lr("sgd", "imagenet")
    with pytest.raises(ModelsError, match="no default lr"):
        default_lr("lbfgs", "none")


@pytest.mark.issue(9)
def test_near_chance_run_warns_loudly_and_card_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # Identical images with random labels: nothing to learn, validation AUC is 0.5.
    from PIL import Image

    rng = np.random.default_rng(0)
    (tmp_path / "images").mkdir()
    rows = ["path,Patient ID,Mass,Nodule"]
    for i in range(40):
        Image.new("L", (32, 32), 128).save(tmp_path / "images" / f"{i}.png")
        mass, nodule = (int(v) for v in rng.integers(0, 2, size=2))
        rows.append(f"images/{i}.png,{i},{i % 2 if i < 4 else mass},{nodule}")
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "run.pt"
    with caplog.at_level(logging.WARNING, logger="models.train"):
        code = main(["train", "--data", str(tmp_path / "labels.csv"), "--out", str(out),
                     "--arch", "resnet18", "--image-size", "32", "--weights", "none",
                     "--labels", "Mass,Nodule", "--epochs", "1", "--workers", "0",
                     "--threads", "1", "--transition-channels", "8", "--no-progress"])  # fmt: skip
    assert code == 0
    assert "*** WARNING: validation mean AUC" in capsys.readouterr().err
    assert any("near chance" in r.getMessage() for r in caplog.records)
    card = load_checkpoint(out).card
    assert card.warnings and "near chance" in card.warnings[0]
    assert not card.demo  # real-looking data without the synthetic marker


@pytest.mark.issue(22)
def test_label_warnings_name_chance_labels_and_capped_temperatures() -> None:
    from models.calibration import MAX_TEMPERATURE
    from models.train import _label_warnings

    metrics = {"per_label": {"Mass": {"auc": 0.99}, "Pneumothorax": {"auc": 0.27}, "X": {}}}
    temperatures = {"Mass": 0.8, "Pneumothorax": MAX_TEMPERATURE, "Cardiomegaly": MAX_TEMPERATURE}
    warnings = _label_warnings(metrics, temperatures, 0.6)
    assert len(warnings) == 2 and all(w.startswith("Pneumothorax: ") for w in warnings)
    assert "0.270 < 0.6" in warnings[0] and "cap" in warnings[1]
    assert _label_warnings({"per_label": {"Mass": {"auc": 0.9}}}, {"Mass": 1.0}, 0.6) == []


def test_the_next_epoch_starts_loading_while_this_one_is_validated(
    phantom_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each epoch began with the device waiting for its first batch (a worker builds a whole
    # batch), a stall of about 0.4 s per epoch at 1024 px on a GPU; the training loader
    # started only after validation and the checkpoint.
    import time

    import models.train as train_module
    from models.data import FittedDataset

    journal = tmp_path / "loads.txt"
    load = FittedDataset.__getitem__

    def logged(self: FittedDataset, index: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        with journal.open("a") as f:  # from the loader's worker process
            f.write(f"{len(self)} {time.time()}\n")
        return load(self, index)

    validations: list[tuple[float, float]] = []
    validate = train_module.validate

    def slow_validate(*args: object, **kwargs: object) -> object:
        start = time.time()
        time.sleep(1.0)  # the worker has time to load ahead, if it was asked to
        result = validate(*args, **kwargs)  # type: ignore[arg-type]
        validations.append((start, time.time()))
        return result

    monkeypatch.setattr(FittedDataset, "__getitem__", logged)
    monkeypatch.setattr(train_module, "validate", slow_validate)
    cfg = load_train_config(
        None, data=str(phantom_dir), out=str(tmp_path / "run.pt"), arch="resnet18",
        weights="none", image_size=64, labels="auto", batch_size=8, workers=1,
        transition_channels=16, progress=False, threads=1, epochs=2, cache_images=False,
        augment=False,
    )  # fmt: skip
    result = train(cfg)
    assert result.epochs_run == 2 and len(validations) == 2
    loads = [line.split() for line in journal.read_text().splitlines()]
    train_size = int(loads[0][0])  # the first image loaded is a training image
    start, end = validations[0]
    during = [t for n, t in loads if int(n) == train_size and start <= float(t) <= end]
    assert during, "no training image was loaded while the first epoch was validated"
    assert load_checkpoint(tmp_path / "run.pt").card.metrics["train_input_wait_s"] >= 0


@pytest.mark.issue(43)
def test_the_default_trains_the_findings_the_data_has(phantom_dir: Path, tmp_path: Path) -> None:
    """Labels no image shows learn nothing, and their negatives raise the weighted loss's
    positive weight on every batch; with them the phantom nodule went unlearned on some
    seeds. The default trains the data's own findings; a run that named a set and is resumed
    with the default keeps its labels."""
    common = dict(
        data=str(phantom_dir), arch="resnet18", weights="none", image_size=64, batch_size=4,
        accum=1, workers=0, transition_channels=16, progress=False, threads=1, lr=1e-3,
    )  # fmt: skip
    out = tmp_path / "auto.pt"
    train(load_train_config(None, out=str(out), epochs=1, max_steps=1, **common))
    phantom_labels = ["Cardiomegaly", "Effusion", "Mass", "Nodule", "Pneumothorax"]
    assert load_checkpoint(out).card.labels == phantom_labels

    named = tmp_path / "named.pt"
    train(load_train_config(None, out=str(named), labels="chestxray14", epochs=1, max_steps=1,
                            **common))  # fmt: skip
    assert len(load_checkpoint(named).card.labels) == 14
    train(load_train_config(None, out=str(named), resume=True, epochs=2, max_steps=2, **common))
    resumed = load_checkpoint(named)
    assert len(resumed.card.labels) == 14 and resumed.train_state is not None
    assert resumed.train_state["step"] == 2
