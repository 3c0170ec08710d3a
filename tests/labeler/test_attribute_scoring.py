"""Scoring finding attributes against a gold CSV (issue 12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labeler.attribute_scoring import (
    format_attribute_table,
    read_attribute_gold,
    read_findings,
    score_attributes,
)
from labeler.errors import InputError

pytestmark = pytest.mark.issue(12)


def _write(tmp_path: Path) -> tuple[Path, Path]:
    pred = tmp_path / "pred.jsonl"
    rows = [
        {"id": "1", "labels": {}, "findings": {
            "Effusion": {"status": "positive", "laterality": "left", "severity": "mild"},
            "Nodule": {"status": "positive", "location": ["right upper lobe", "lingula"],
                       "size_mm": 12.0, "count": 2},
        }},
        {"id": "2", "labels": {}, "findings": {"Pneumothorax": {"status": "negative"}}},
    ]  # fmt: skip
    pred.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    gold = tmp_path / "gold.csv"
    gold.write_text(
        "id,label,attribute,expected\n"
        "1,Effusion,laterality,left\n"
        "1,Effusion,severity,moderate\n"  # wrong
        "1,Nodule,location,lingula; right upper lobe\n"
        "1,Nodule,size_mm,12.2\n"
        "1,Nodule,count,2\n"
        "2,Pneumothorax,change,\n"  # blank: must be left out
        "3,Edema,laterality,left\n",  # no prediction for report 3
        encoding="utf-8",
    )
    return pred, gold


def test_score_attributes_counts_right_answers(tmp_path: Path) -> None:
    pred, gold = _write(tmp_path)
    scores = score_attributes(read_findings(pred), read_attribute_gold(gold))
    per = {s.attribute: (s.correct, s.total) for s in scores.attributes}
    assert per == {
        "change": (1, 1),
        "count": (1, 1),
        "laterality": (1, 2),
        "location": (1, 1),
        "severity": (0, 1),
        "size_mm": (1, 1),
    }
    assert (scores.overall.correct, scores.overall.total) == (5, 7)
    assert scores.missing_reports == 1
    assert {e["attribute"] for e in scores.errors} == {"severity", "laterality"}
    assert "overall" in format_attribute_table(scores)


def test_attribute_gold_needs_its_columns(tmp_path: Path) -> None:
    gold = tmp_path / "gold.csv"
    gold.write_text("id,label,expected\n1,Effusion,left\n", encoding="utf-8")
    with pytest.raises(InputError, match="attribute"):
        read_attribute_gold(gold)


def test_attribute_gold_rejects_unknown_attribute(tmp_path: Path) -> None:
    gold = tmp_path / "gold.csv"
    gold.write_text("id,label,attribute,expected\n1,Effusion,colour,blue\n", encoding="utf-8")
    with pytest.raises(InputError, match="colour"):
        read_attribute_gold(gold)
