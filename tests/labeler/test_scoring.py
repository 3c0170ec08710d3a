"""Precision / recall / F1 against a gold standard."""

from __future__ import annotations

from labeler.scoring import format_table, score_labels

GOLD = {
    "r1": {"Effusion": "positive", "Edema": "negative"},
    "r2": {"Effusion": "negative", "Edema": "positive"},
    "r3": {"Effusion": "positive", "Edema": "uncertain"},
}
PRED = {
    "r1": {"Effusion": "positive", "Edema": "positive"},  # Edema FP
    "r2": {"Effusion": "uncertain", "Edema": "positive"},
    "r3": {"Effusion": "absent", "Edema": "uncertain"},  # Effusion FN
}


def test_scoring_counts_and_micro() -> None:
    s = score_labels(PRED, GOLD, ["Effusion", "Edema"])
    eff, ede = s.labels
    assert (eff.tp, eff.fp, eff.fn) == (1, 0, 1)
    assert (ede.tp, ede.fp, ede.fn) == (1, 1, 0)
    assert (s.micro.tp, s.micro.fp, s.micro.fn) == (2, 1, 1)
    assert s.micro.precision == round(2 / 3, 4)
    assert s.macro.f1 == round((eff.f1 + ede.f1) / 2, 4)


def test_scoring_uncertain_as_positive() -> None:
    s = score_labels(PRED, GOLD, ["Effusion", "Edema"], uncertain="positive")
    eff, ede = s.labels
    assert (eff.tp, eff.fp, eff.fn) == (1, 1, 1)  # r2 uncertain now counts
    assert (ede.tp, ede.fp, ede.fn) == (2, 1, 0)  # r3 uncertain on both sides


def test_scoring_missing_prediction_counts_as_negative() -> None:
    s = score_labels({}, GOLD, ["Effusion"])
    assert s.missing_predictions == 3
    assert s.labels[0].fn == 2


def test_scoring_table_lists_labels_and_totals() -> None:
    table = format_table(score_labels(PRED, GOLD, ["Effusion", "Edema"], extra=["Mass"]))
    for word in ("Effusion", "Edema", "micro", "macro", "Mass"):
        assert word in table


def test_score_chexpert_tasks_are_binary_f1_per_label() -> None:
    from labeler.scoring import score_chexpert

    gold = {
        "a": {"Edema": "negative", "Atelectasis": "uncertain"},
        "b": {"Edema": "positive", "Atelectasis": "absent"},
        "c": {"Edema": "absent", "Atelectasis": "negative"},
    }
    pred = {
        "a": {"Edema": "negative", "Atelectasis": "positive"},
        "b": {"Edema": "positive"},
        "c": {"Edema": "negative", "Atelectasis": "negative"},
    }
    s = score_chexpert(pred, gold, ["Edema", "Atelectasis"])
    edema, atel = s.per_label["Edema"], s.per_label["Atelectasis"]
    assert (edema["mention"].tp, edema["mention"].fp) == (2, 1)
    assert edema["negation"].f1 == round(2 * 0.5 * 1.0 / 1.5, 4)
    assert atel["uncertainty"].fn == 1 and atel["uncertainty"].f1 == 0.0
    assert atel["mention"].f1 == 1.0
    # positive: Edema 1/1; Atelectasis has a false positive only -> defined, F1 0
    assert s.defined["positive"] == 2 and s.macro["positive"] == 0.5
    assert s.n_reports == 3
