"""Per-label confusion and the rules behind the errors (issue 20 item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labeler.disagreements import (
    NO_MENTION,
    find_disagreements,
    format_disagreements,
    read_mention_rules,
)

pytestmark = pytest.mark.issue(20)


def test_confusion_counts_and_error_rules() -> None:
    gold = {
        "a": {"Effusion": "positive", "Edema": "negative"},
        "b": {"Effusion": "uncertain", "Edema": "absent"},
        "c": {"Effusion": "negative", "Edema": "positive"},
    }
    pred = {
        "a": {"Effusion": "positive", "Edema": "uncertain"},
        "b": {"Effusion": "positive", "Edema": "absent"},
        "c": {"Effusion": "negative", "Edema": "absent"},
    }
    rules = {
        "a": {"Edema": ["unc.modal"]},
        "b": {"Effusion": ["unc.hedge_adjective@probable"]},
        "c": {},
    }
    found = find_disagreements(pred, gold, ["Effusion", "Edema"], rules)
    assert found.confusion["Effusion"] == {
        ("positive", "positive"): 1,
        ("uncertain", "positive"): 1,
        ("negative", "negative"): 1,
    }
    assert found.confusion["Edema"][("positive", "absent")] == 1
    assert found.rules == {"unc.modal": 1, "unc.hedge_adjective@probable": 1, NO_MENTION: 1}
    text = format_disagreements(found)
    assert "Effusion" in text and "unc.hedge_adjective@probable" in text
    assert found.to_dict()["confusion"]["Effusion"]["uncertain->positive"] == 1


def test_a_binary_gold_is_compared_at_its_granularity() -> None:
    gold = {"a": {"Mass": "negative"}, "b": {"Mass": "positive"}}
    pred = {"a": {"Mass": "absent"}, "b": {"Mass": "uncertain"}}
    strict = find_disagreements(pred, gold, ["Mass"], {})
    assert strict.confusion["Mass"] == {("negative", "negative"): 1, ("positive", "negative"): 1}
    lenient = find_disagreements(pred, gold, ["Mass"], {}, uncertain="positive")
    assert lenient.confusion["Mass"][("positive", "positive")] == 1


def test_rules_come_from_jsonl_and_no_finding_from_what_blocked_it(tmp_path: Path) -> None:
    pred = tmp_path / "pred.jsonl"
    line = {
        "id": "r1",
        "labels": {"Effusion": "negative"},
        "mentions": [
            {"label": "Effusion", "status": "negative", "rule": "neg.det"},
            {"label": "Other", "status": "positive", "rule": None},
        ],
    }
    pred.write_text(json.dumps(line) + "\n", encoding="utf-8")
    rules = read_mention_rules(pred)
    assert rules == {
        "r1": {"Effusion": ["neg.det"], "Other": ["concept.plain"], "No Finding": ["concept.plain"]}
    }
    assert read_mention_rules(tmp_path / "pred.csv") is None
    text = format_disagreements(
        find_disagreements({}, {"r1": {"Effusion": "positive"}}, ["Effusion"], None)
    )
    assert "need `cxr label` JSONL" in text
