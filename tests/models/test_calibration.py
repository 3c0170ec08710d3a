"""Temperature scaling, calibration error, ROC curves and the evaluation plots."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from app.cli import main
from models.calibration import (
    MAX_TEMPERATURE,
    apply_temperatures,
    fit_temperature,
    fit_temperatures,
    temperature_vector,
)
from models.metrics import expected_calibration_error, reliability_bins, roc_curve


@pytest.mark.parametrize("true_t", [0.5, 1.0, 2.5])
def test_fit_temperature_recovers_a_known_temperature(true_t: float) -> None:
    rng = np.random.default_rng(0)
    z = rng.normal(0.0, 3.0, 20_000)  # calibrated logits
    y = (rng.random(z.shape) < 1 / (1 + np.exp(-z))).astype(np.float32)
    # The model reports z * T: dividing by the fitted T must undo it.
    assert fit_temperature(z * true_t, y) == pytest.approx(true_t, rel=0.06)


def test_fit_temperatures_per_label_and_degenerate_cases() -> None:
    rng = np.random.default_rng(1)
    z = rng.normal(0.0, 2.0, (5000, 2))
    y = (rng.random(z.shape) < 1 / (1 + np.exp(-z))).astype(np.float32)
    y[:, 1] = 0  # one class only: nothing to fit
    temps = fit_temperatures(z * np.array([3.0, 3.0]), y, ["A", "B"])
    assert temps["A"] == pytest.approx(3.0, rel=0.1) and temps["B"] == 1.0
    # Logits with no signal at all: the softest temperature allowed, not an unbounded one.
    noise = rng.normal(0, 1, 2000)
    assert fit_temperature(noise, (rng.random(2000) < 0.5).astype(float)) <= MAX_TEMPERATURE
    assert fit_temperature(np.array([]), np.array([])) == 1.0
    assert fit_temperature(np.array([np.nan, 1.0]), np.array([0, 1])) == 1.0


def test_apply_temperatures_keeps_order_and_matches_formula() -> None:
    logits = torch.tensor([[2.0, -1.0], [0.5, 3.0]])
    t = torch.from_numpy(temperature_vector({"A": 2.0}, ["A", "B"]))
    assert t.tolist() == [2.0, 1.0]
    probs = apply_temperatures(logits, t)
    assert torch.allclose(probs, torch.sigmoid(logits / torch.tensor([2.0, 1.0])))
    assert torch.equal(probs.argsort(dim=0), torch.sigmoid(logits).argsort(dim=0))


def test_expected_calibration_error_hand_cases() -> None:
    y = np.array([1, 1, 1, 1, 0] * 20)
    assert expected_calibration_error(np.full(100, 0.8), y) == pytest.approx(0.0)
    assert expected_calibration_error(np.full(100, 0.9), np.array([1, 0] * 50)) == pytest.approx(
        0.4
    )
    # Two bins: 0.1 predicted with 0% observed, 0.7 predicted with 100%: (0.1 + 0.3) / 2.
    p = np.array([0.1, 0.1, 0.7, 0.7])
    assert expected_calibration_error(p, np.array([0, 0, 1, 1])) == pytest.approx(0.2)
    conf, freq, count = reliability_bins(p, np.array([0, 0, 1, 1]))
    assert count.tolist() == [0, 2, 0, 0, 0, 0, 0, 2, 0, 0]
    assert conf[1] == pytest.approx(0.1) and freq[7] == 1.0 and np.isnan(conf[0])
    assert np.isnan(expected_calibration_error(np.array([]), np.array([])))


def test_roc_curve_endpoints_and_ties() -> None:
    fpr, tpr = roc_curve(np.array([0, 0, 1, 1]), np.array([0.1, 0.5, 0.5, 0.9]))
    assert fpr.tolist() == [0.0, 0.0, 0.5, 1.0] and tpr.tolist() == [0.0, 0.5, 1.0, 1.0]
    assert roc_curve(np.array([1, 1]), np.array([0.1, 0.2]))[0].size == 0


def test_cxr_evaluate_reports_ece_and_writes_pngs_next_to_json(
    demo_checkpoint: Path, phantom_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "eval" / "report.json"
    code = main(["evaluate", "--model", str(demo_checkpoint), "--data", str(phantom_dir),
                 "--split", "all", "--device", "cpu", "-o", str(out)])  # fmt: skip
    assert code == 0
    report = json.loads(out.read_text())
    cal = report["classification"]["calibration"]
    assert 0 <= cal["ece_before"] <= 1 and 0 <= cal["ece_after"] <= 1
    for kind in ("roc", "reliability"):
        png = tmp_path / "eval" / f"report.{kind}.png"
        assert report["plots"][kind] == str(png)
        with Image.open(png) as im:
            assert im.format == "PNG" and im.size[0] > 100
            # Something was drawn besides the white background and the grey grid.
            assert len(im.getcolors(1 << 16) or []) > 5


def test_predictor_applies_the_cards_temperatures(demo_checkpoint: Path) -> None:
    from dataclasses import replace

    from models.checkpoint import load_checkpoint
    from models.predict import Predictor

    ckpt = load_checkpoint(demo_checkpoint)
    image = np.random.default_rng(0).random((80, 70)).astype(np.float32)
    cpu = torch.device("cpu")
    plain = Predictor(ckpt.model, ckpt.card, device=cpu).predict([image], heatmaps="none")[0]
    card = replace(ckpt.card, temperatures={"Effusion": 4.0})
    scaled = Predictor(ckpt.model, card, device=cpu).predict([image], heatmaps="none")[0]
    for name, p in plain.probabilities.items():
        z = np.log(p / (1 - p))
        want = 1 / (1 + np.exp(-z / (4.0 if name == "Effusion" else 1.0)))
        assert scaled.probabilities[name] == pytest.approx(want, abs=1e-5)
