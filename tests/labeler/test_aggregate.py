"""Mention verdicts -> report-level status."""

from __future__ import annotations

from labeler.aggregate import aggregate, is_no_finding
from labeler.schema import CHESTXRAY8, CHESTXRAY14, Mention


def _m(label: str, status: str) -> Mention:
    return Mention(label, "x", 0, 1, "x", status)  # type: ignore[arg-type]


def test_aggregate_positive_beats_uncertain_beats_negative() -> None:
    labels = aggregate(
        [
            _m("Effusion", "negative"),
            _m("Effusion", "positive"),
            _m("Effusion", "uncertain"),
            _m("Edema", "negative"),
            _m("Edema", "uncertain"),
            _m("Mass", "negative"),
        ],
        CHESTXRAY14,
    )
    assert labels["Effusion"] == "positive"
    assert labels["Edema"] == "uncertain"
    assert labels["Mass"] == "negative"
    assert labels["Hernia"] == "absent"
    assert list(labels) == [lab.value for lab in CHESTXRAY14]


def test_aggregate_ignores_labels_outside_the_set() -> None:
    labels = aggregate([_m("Emphysema", "positive"), _m("Other", "positive")], CHESTXRAY8)
    assert "Emphysema" not in labels and "Other" not in labels


def test_is_no_finding_counts_other_findings() -> None:
    assert is_no_finding([_m("Effusion", "negative")])
    assert not is_no_finding([_m("Other", "positive")])
    assert not is_no_finding([_m("Mass", "uncertain")])
    assert is_no_finding([])
