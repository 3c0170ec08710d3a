"""Network construction and checkpoints (model card, label mismatch)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from models.checkpoint import (
    ModelCard,
    build_demo_checkpoint,
    load_checkpoint,
    model_from_card,
    save_checkpoint,
)
from models.errors import CheckpointError, ModelsError
from models.network import build_model


def test_build_model_output_stride_and_errors() -> None:
    model = build_model(arch="resnet18", num_labels=2, weights=None, output_stride=16).eval()
    with torch.no_grad():
        assert model.forward_features(torch.rand(1, 1, 64, 64)).shape[-2:] == (4, 4)
        assert model(torch.rand(1, 3, 64, 64)).shape == (1, 2)
    with pytest.raises(ModelsError, match="unknown arch"):
        build_model(arch="vgg16", num_labels=2)
    with pytest.raises(ModelsError, match="num_labels"):
        build_model(arch="resnet18", num_labels=0)


def test_build_model_dilated_last_stage_gives_stride_16_maps() -> None:
    # Issue 9: the default dilates layer4, so maps are input / 16 (a 1024 input: 64x64).
    model = build_model(arch="resnet18", num_labels=2, body_stages=4).eval()
    r50 = build_model(arch="resnet50", num_labels=2)
    assert r50.body[-1][1].conv2.dilation == (2, 2) and r50.body[-1][0].conv2.stride == (1, 1)
    old = build_model(arch="resnet18", num_labels=2, body_stages=4, dilated=False)
    assert old.body[-1][1].conv1.dilation == (1, 1)
    with torch.no_grad():
        assert model.forward_features(torch.rand(1, 1, 96, 96)).shape[-2:] == (6, 6)
        assert r50.eval().forward_features(torch.rand(1, 1, 64, 64)).shape[-2:] == (4, 4)
        paper = build_model(arch="resnet18", num_labels=2, body_stages=4, output_stride=32)
        assert paper.eval().forward_features(torch.rand(1, 1, 64, 64)).shape[-2:] == (2, 2)


def test_model_card_geometry_defaults_read_old_cards() -> None:
    # A card written before `dilated` existed rebuilds the undilated stride-1 layer4.
    card = ModelCard.from_dict({"labels": ["A"], "arch": "resnet18", "output_stride": 16,
                                "body_stages": 4})  # fmt: skip
    assert not card.dilated and card.temperatures == {} and card.warnings == []
    model = model_from_card(card)
    assert model.body[-1][1].conv1.dilation == (1, 1)
    assert model.transition[0].out_channels == 512


def test_checkpoint_roundtrip_keeps_card_and_weights(tmp_path: Path) -> None:
    card = ModelCard(labels=["Mass", "Nodule"], arch="resnet18", transition_channels=32,
                     image_size=64, thresholds={"Mass": 0.3, "Nodule": 0.6},
                     temperatures={"Mass": 1.5}, warnings=["near chance"])  # fmt: skip
    model = model_from_card(card)
    path = save_checkpoint(tmp_path / "m.pt", model=model, card=card, train_state={"epoch": 1})
    loaded = load_checkpoint(path, labels=["Mass", "Nodule"])
    assert loaded.card.thresholds == {"Mass": 0.3, "Nodule": 0.6}
    assert loaded.train_state == {"epoch": 1}
    assert not loaded.model.training
    x = torch.rand(1, 1, 64, 64)
    model.eval()
    with torch.no_grad():
        assert torch.allclose(model(x), loaded.model(x), atol=1e-5)


def test_load_checkpoint_refuses_label_mismatch(demo_checkpoint: Path) -> None:
    with pytest.raises(CheckpointError, match="label mismatch"):
        load_checkpoint(demo_checkpoint, labels=["Nodule", "Effusion", "Cardiomegaly"])


def test_load_checkpoint_refuses_foreign_files(tmp_path: Path) -> None:
    torch.save({"state_dict": {}}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="format"):
        load_checkpoint(tmp_path / "other.pt")
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(tmp_path / "junk.pt")
    with pytest.raises(CheckpointError, match="no such"):
        load_checkpoint(tmp_path / "missing.pt")


def test_load_skips_random_init_but_every_weight_comes_from_the_file(tmp_path: Path) -> None:
    card = ModelCard(labels=["Mass"], arch="resnet18", transition_channels=16, image_size=64)
    model = model_from_card(card)
    path = save_checkpoint(tmp_path / "m.pt", model=model, card=card)
    state = torch.get_rng_state()
    loaded = load_checkpoint(path)
    assert torch.equal(torch.get_rng_state(), state)  # no random fill ran while building
    want = model.state_dict()
    for key, value in loaded.model.state_dict().items():
        assert torch.equal(value, want[key]), key
    # A file missing a weight is refused rather than left with uninitialised memory.
    payload = torch.load(path, weights_only=True)
    del payload["model"]["head.weight"]
    torch.save(payload, tmp_path / "short.pt")
    with pytest.raises(CheckpointError, match="do not fit"):
        load_checkpoint(tmp_path / "short.pt")
    # Outside a load, nn.init is untouched.
    w = torch.zeros(4, 4)
    torch.nn.init.kaiming_uniform_(w)
    assert w.abs().sum() > 0


def test_truncated_or_damaged_checkpoints_are_refused_in_one_line(
    tmp_path: Path, demo_checkpoint: Path
) -> None:
    data = demo_checkpoint.read_bytes()
    for name, damaged in {
        "empty": b"",
        "half": data[: len(data) // 2],
        "tail": data[len(data) // 2 :],
        "zeroed-header": bytes(1000) + data[1000:],
    }.items():
        (tmp_path / f"{name}.pt").write_bytes(damaged)
        with pytest.raises(CheckpointError, match="not a readable checkpoint"):
            load_checkpoint(tmp_path / f"{name}.pt")


def test_save_checkpoint_refuses_card_model_mismatch(tmp_path: Path) -> None:
    model = build_model(arch="resnet18", num_labels=3, weights=None)
    with pytest.raises(CheckpointError, match="3 outputs"):
        save_checkpoint(tmp_path / "x.pt", model=model, card=ModelCard(labels=["A"]))


def test_build_demo_checkpoint_defaults_to_chestxray14(tmp_path: Path) -> None:
    from labeler.schema import CHESTXRAY14

    ckpt = load_checkpoint(build_demo_checkpoint(tmp_path / "d.pt"))
    card = ckpt.card.to_dict()
    assert card["labels"] == [label.value for label in CHESTXRAY14]
    assert card["demo"] is True and "DEMONSTRATION" in card["intended_use"]
    assert card["image_size"] == 64 and set(card["thresholds"].values()) == {0.5}


@pytest.mark.issue(44)
def test_card_warns_on_thresholds_at_the_edges_and_loading_refuses_outside(
    tmp_path: Path,
) -> None:
    from models.predict import load_predictor

    path = build_demo_checkpoint(tmp_path / "edge.pt", image_size=64)
    ckpt = load_checkpoint(path)
    first, second, third = ckpt.card.labels[:3]
    ckpt.card.thresholds = {first: 1.0, second: 0.0, third: 0.4}
    save_checkpoint(path, model=ckpt.model, card=ckpt.card)
    warnings = load_checkpoint(path).card.threshold_warnings()
    assert len(warnings) == 2
    assert warnings[0].startswith(f"{first}: threshold 1 is at the top")
    assert warnings[1].startswith(f"{second}: threshold 0 is at the bottom")
    # the served card says it beside the probabilities (the page lists card warnings)
    served = load_predictor(path, device="cpu").card["warnings"]
    assert warnings[0] in served and warnings[1] in served
    ckpt.card.thresholds = {first: 1.5}
    save_checkpoint(path, model=ckpt.model, card=ckpt.card)
    with pytest.raises(CheckpointError, match=r"thresholds outside \[0, 1\].*1\.5"):
        load_checkpoint(path)
