"""Metrics on hand-computed cases: AUC, thresholds, IoBB/IoU, localization accuracy/AFP."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from models.boxes import Box
from models.evaluate import format_report, load_bbox_csv, localization_by_side
from models.metrics import (
    GroundTruthBox,
    choose_thresholds,
    classification_metrics,
    iobb,
    iou,
    localization_metrics,
    roc_auc,
)


def test_roc_auc_hand_cases() -> None:
    assert roc_auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.2, 0.8, 0.9])) == 1.0
    assert roc_auc(np.array([0, 0, 1, 1]), np.array([0.9, 0.8, 0.2, 0.1])) == 0.0
    assert roc_auc(np.array([0, 1]), np.array([0.5, 0.5])) == 0.5
    # Pairs (pos, neg): (0.4 vs 0.1 win, 0.4 vs 0.5 lose, 0.8 vs both win) -> 3/4.
    assert roc_auc(np.array([0, 1, 0, 1]), np.array([0.1, 0.4, 0.5, 0.8])) == 0.75
    assert math.isnan(roc_auc(np.array([1, 1]), np.array([0.1, 0.2])))


def test_choose_thresholds_youden_and_f1() -> None:
    probs = np.array([[0.1], [0.3], [0.6], [0.7], [0.9]])
    targets = np.array([[0], [0], [1], [1], [1]])
    assert choose_thresholds(probs, targets, ["A"]) == {"A": 0.6}
    assert choose_thresholds(probs, targets, ["A"], method="f1") == {"A": 0.6}
    assert choose_thresholds(probs, np.zeros_like(targets), ["A"]) == {"A": 0.5}


def test_classification_metrics_at_thresholds() -> None:
    probs = np.array([[0.9, 0.2], [0.1, 0.8], [0.7, 0.6]])
    targets = np.array([[1, 0], [0, 1], [0, 1]])
    m = classification_metrics(probs, targets, ["A", "B"], {"A": 0.5, "B": 0.5})
    a = m["per_label"]["A"]
    assert a["auc"] == 1.0 and a["sensitivity"] == 1.0 and a["specificity"] == 0.5
    assert a["ppv"] == 0.5
    assert m["mean_auc"] == 1.0 and m["n_images"] == 3


def test_iobb_and_iou_hand_computed() -> None:
    gt = (0.0, 0.0, 10.0, 10.0)
    inside = (2.0, 2.0, 4.0, 4.0)
    assert iobb(inside, gt) == 1.0  # predicted box entirely in the truth
    assert iou(inside, gt) == pytest.approx(16 / 100)
    half = (5.0, 0.0, 10.0, 10.0)
    assert iobb(half, gt) == pytest.approx(0.5)
    assert iou(half, gt) == pytest.approx(50 / 150)
    assert iobb((20.0, 20.0, 5.0, 5.0), gt) == 0.0
    assert iobb((0.0, 0.0, 0.0, 5.0), gt) == 0.0


def test_localization_metrics_accuracy_and_false_positives() -> None:
    truth = [
        GroundTruthBox("a.png", "Mass", 0, 0, 10, 10),
        GroundTruthBox("b.png", "Mass", 50, 50, 10, 10),
        GroundTruthBox("b.png", "Nodule", 0, 0, 4, 4),
    ]
    predicted = {
        ("a.png", "Mass"): [Box("Mass", 2, 2, 4, 4, 1.0), Box("Mass", 30, 30, 5, 5, 0.5)],
        ("b.png", "Mass"): [Box("Mass", 45, 50, 10, 10, 1.0)],  # IoBB 0.5, IoU 1/3
        ("b.png", "Nodule"): [],
    }
    out = localization_metrics(predicted, truth)
    at_half = out["iobb"]["0.5"]
    assert at_half["per_label"]["Mass"] == {"acc": 1.0, "afp": 0.5, "n": 2}
    assert at_half["per_label"]["Nodule"] == {"acc": 0.0, "afp": 0.0, "n": 1}
    assert at_half["acc"] == pytest.approx(2 / 3, abs=1e-4)
    assert out["iobb"]["0.75"]["per_label"]["Mass"]["acc"] == 0.5
    assert out["iou"]["0.3"]["per_label"]["Mass"]["acc"] == 0.5  # 0.16 and 0.33: only b
    assert out["iou"]["0.2"]["per_label"]["Mass"]["acc"] == 0.5
    assert out["iou"]["0.1"]["per_label"]["Mass"]["acc"] == 1.0
    assert "Mass" in format_report({"localization": out})


def test_load_bbox_csv_reads_nih_quirks(tmp_path: Path) -> None:
    path = tmp_path / "BBox_List_2017.csv"
    path.write_text(
        "Image Index,Finding Label,Bbox [x,y,w,h],,,\n"
        "00013118_008.png,Infiltrate,225.08,547.01,86.77,79.18,,,\n"
        "00014716_007.png,Atelectasis,686.1,131.5,185.4,313.4\n"
    )
    boxes = load_bbox_csv(path)
    assert [b.label for b in boxes] == ["Infiltration", "Atelectasis"]
    assert boxes[0].xywh == pytest.approx((225.08, 547.01, 86.77, 79.18))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("a.png,Mass,1,2,3\n", r":2: expected Image Index, Finding Label, x, y, w, h"),
        ("a.png,Mass,1,2,nan,4\n", r":2: not a box"),
        ("a.png,Mass,1,2,0,4\n", r":2: not a box"),
        ("a.png,Mass,-5,2,3,4\n", r":2: not a box"),
        ("\n\n", r"no boxes"),
        ("a.png,Mass,1,2,3,4\nb.png,Nodule,x,2,3,4\n", r":3: bad box coordinates"),
    ],
)
def test_load_bbox_csv_refuses_what_is_not_a_box_list(
    tmp_path: Path, body: str, message: str
) -> None:
    # A file of five columns gave no box at all, NaN and empty boxes were scored: silently.
    path = tmp_path / "boxes.csv"
    path.write_text("Image Index,Finding Label,x,y,w,h\n" + body)
    with pytest.raises(ValueError, match=message):
        load_bbox_csv(path)
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"Image Index,Finding Label,x,y,w,h\n\xe9.png,Mass,1,2,3,4\n")
    with pytest.raises(ValueError, match="cannot read the box list"):
        load_bbox_csv(latin)


def test_localization_by_side_shows_a_model_that_finds_one_side_only() -> None:
    # Two 100 px wide images, a pneumothorax band on each side; only the left one is found.
    truth = [
        GroundTruthBox("a.png", "Pneumothorax", 5, 10, 15, 40),
        GroundTruthBox("b.png", "Pneumothorax", 80, 10, 15, 40),
        GroundTruthBox("b.png", "Nodule", 60, 60, 6, 6),
    ]
    predicted = {
        ("a.png", "Pneumothorax"): [Box("Pneumothorax", 6, 12, 10, 30, 1.0)],  # inside: hit
        ("b.png", "Pneumothorax"): [Box("Pneumothorax", 60, 12, 20, 30, 1.0)],  # beside: miss
        ("b.png", "Nodule"): [Box("Nodule", 60, 60, 6, 6, 1.0)],
    }
    sizes = {"a.png": (120, 100), "b.png": (120, 100)}
    sides = localization_by_side(predicted, truth, sizes)
    assert sides["left"] == {"Pneumothorax": {"acc": 1.0, "n": 1}}
    assert sides["right"] == {
        "Nodule": {"acc": 1.0, "n": 1},
        "Pneumothorax": {"acc": 0.0, "n": 1},
    }
    report = {"localization": {**localization_metrics(predicted, truth), "iobb_0.5_by_side": sides}}
    line = format_report(report).splitlines()[-1]
    assert line == (
        "IoBB-0.5 by image half, left/right (boxes): Nodule -/1.00 (0/1), "
        "Pneumothorax 1.00/0.00 (1/1)"
    )
