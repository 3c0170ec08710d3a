"""Mention verdicts -> report-level status."""

from __future__ import annotations

from labeler.aggregate import aggregate, deciding_first, is_no_finding
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


def test_deciding_first_keeps_each_labels_deciding_mention_within_the_limit() -> None:
    mentions = [_m("Effusion", "negative") for _ in range(8)]
    mentions += [_m("Effusion", "positive"), _m("Mass", "uncertain"), _m("Edema", "negative")]
    statuses = aggregate(mentions, CHESTXRAY14)
    kept = deciding_first(mentions, statuses, 4)
    assert len(kept) == 4
    # the three deciding mentions, then the first of the rest, in report order
    assert kept == [mentions[0], mentions[8], mentions[9], mentions[10]]
    assert deciding_first(mentions, statuses, 20) == mentions
    assert deciding_first(mentions, statuses, 2) == [mentions[8], mentions[9]]
