"""`cxr label` attribute columns and `cxr evaluate-labels` on attribute gold (issue 12)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from app.cli import main

pytestmark = pytest.mark.issue(12)

REPORTS = [
    (
        "a1",
        "FINDINGS: Stable small left pleural effusion. New 8 mm nodule in the right upper lobe.",
    ),
    ("a2", "IMPRESSION: The right pneumothorax has resolved. Multiple pulmonary nodules."),
]


def _reports(tmp_path: Path) -> Path:
    src = tmp_path / "r.csv"
    with src.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "report"])
        w.writerows(REPORTS)
    return src


def test_cli_label_csv_attribute_columns(tmp_path: Path) -> None:
    out = tmp_path / "labels.csv"
    args = ["label", str(_reports(tmp_path)), "-o", str(out), "-q", "--attribute-columns"]
    assert main(args) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    header = list(rows[0])
    # the CheXpert-style columns come first and unchanged, attributes after them
    assert header.index("error") < header.index("Effusion laterality")
    assert rows[0]["Effusion laterality"] == "left"
    assert rows[0]["Effusion severity"] == "mild"
    assert rows[0]["Effusion change"] == "unchanged"
    assert rows[0]["Nodule size_mm"] == "8.0"
    assert rows[0]["Nodule location"] == "right upper lobe"
    assert rows[0]["Nodule change"] == "new"
    assert rows[0]["Mass laterality"] == ""
    assert rows[1]["Pneumothorax change"] == "resolved"
    assert rows[1]["Nodule count"] == "multiple"


def test_cli_label_csv_without_the_option_has_no_attribute_columns(tmp_path: Path) -> None:
    out = tmp_path / "labels.csv"
    assert main(["label", str(_reports(tmp_path)), "-o", str(out), "-q"]) == 0
    header = next(csv.reader(out.open(encoding="utf-8")))
    assert not any(" " in h and h.split(" ")[-1] == "laterality" for h in header)


def test_cli_label_jsonl_has_findings(tmp_path: Path) -> None:
    out = tmp_path / "labels.jsonl"
    assert main(["label", str(_reports(tmp_path)), "-o", str(out), "-q"]) == 0
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert first["findings"]["Effusion"]["laterality"] == "left"
    assert first["findings"]["Nodule"]["size_mm"] == 8.0


def test_cli_evaluate_labels_scores_attribute_gold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pred = tmp_path / "labels.jsonl"
    assert main(["label", str(_reports(tmp_path)), "-o", str(pred), "-q"]) == 0
    gold = tmp_path / "attrs.csv"
    gold.write_text(
        "id,label,attribute,expected\n"
        "a1,Effusion,laterality,left\n"
        "a1,Effusion,severity,mild\n"
        "a1,Nodule,size_mm,8\n"
        "a1,Nodule,location,right upper lobe\n"
        "a2,Pneumothorax,change,resolved\n"
        "a2,Nodule,count,multiple\n"
        "a2,Nodule,laterality,left\n",  # wrong on purpose: no laterality is given
        encoding="utf-8",
    )
    scores_file = tmp_path / "scores.json"
    assert main(["evaluate-labels", str(pred), str(gold), "-o", str(scores_file)]) == 0
    assert "overall" in capsys.readouterr().out
    scores = json.loads(scores_file.read_text(encoding="utf-8"))
    assert (scores["overall"]["correct"], scores["overall"]["total"]) == (6, 7)
    assert scores["errors"] == [
        {"id": "a2", "label": "Nodule", "attribute": "laterality", "expected": "left",
         "predicted": None}
    ]  # fmt: skip


def test_cli_evaluate_labels_attribute_gold_with_bad_attribute(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pred = tmp_path / "labels.jsonl"
    pred.write_text('{"id": "1", "labels": {}, "findings": {}}\n', encoding="utf-8")
    gold = tmp_path / "attrs.csv"
    gold.write_text("id,label,attribute,expected\n1,Effusion,colour,blue\n", encoding="utf-8")
    assert main(["evaluate-labels", str(pred), str(gold)]) == 2
    assert "colour" in capsys.readouterr().err
