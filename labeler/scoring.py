"""Precision, recall and F1 of predicted labels against a gold standard."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = [
    "CHEXPERT_TASKS",
    "ChexpertScores",
    "LabelScore",
    "Scores",
    "format_chexpert_table",
    "format_table",
    "score_chexpert",
    "score_labels",
]

UncertainPolicy = Literal["negative", "positive"]


@dataclass(frozen=True)
class LabelScore:
    """Counts and metrics of one label (or of a micro/macro total)."""

    label: str
    tp: int
    fp: int
    fn: int
    precision: float
    recall: float
    f1: float
    support: int


@dataclass(frozen=True)
class Scores:
    """Per-label scores and micro/macro totals over `labels` (extra labels are not totalled)."""

    labels: list[LabelScore]
    micro: LabelScore
    macro: LabelScore
    extra: list[LabelScore] = field(default_factory=list)
    n_reports: int = 0
    missing_predictions: int = 0
    uncertain: str = "negative"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, as written by `cxr evaluate-labels -o`."""
        return asdict(self)


def _metrics(label: str, tp: int, fp: int, fn: int) -> LabelScore:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return LabelScore(label, tp, fp, fn, round(p, 4), round(r, 4), round(f, 4), tp + fn)


def score_labels(
    pred: Mapping[str, Mapping[str, str]],
    gold: Mapping[str, Mapping[str, str]],
    labels: Sequence[str],
    *,
    extra: Sequence[str] = (),
    uncertain: UncertainPolicy = "negative",
) -> Scores:
    """Score predicted statuses against gold statuses, report by report.

    Every gold report counts; a report missing from `pred` counts as all
    negative. A label is positive when its status is "positive" (and
    "uncertain" too with `uncertain="positive"`, in both pred and gold).

    Args:
        pred: {report id: {label: status}}.
        gold: {report id: {label: status}}.
        labels: labels scored and totalled (micro: pooled counts; macro: mean of F1, P, R).
        extra: labels scored but not totalled (e.g. "No Finding").
        uncertain: how "uncertain" counts.

    Returns:
        The scores.
    """
    positive = {"positive"} | ({"uncertain"} if uncertain == "positive" else set())
    counts = {lab: [0, 0, 0] for lab in (*labels, *extra)}
    missing = 0
    for rid, g in gold.items():
        p = pred.get(rid)
        if p is None:
            missing += 1
            p = {}
        for lab, c in counts.items():
            y = g.get(lab, "absent") in positive
            yhat = p.get(lab, "absent") in positive
            if y and yhat:
                c[0] += 1
            elif yhat:
                c[1] += 1
            elif y:
                c[2] += 1
    per = [_metrics(lab, *counts[lab]) for lab in labels]
    tp, fp, fn = (sum(counts[lab][i] for lab in labels) for i in range(3))
    n = max(len(per), 1)
    macro = LabelScore(
        "macro",
        tp,
        fp,
        fn,
        round(sum(s.precision for s in per) / n, 4),
        round(sum(s.recall for s in per) / n, 4),
        round(sum(s.f1 for s in per) / n, 4),
        tp + fn,
    )
    return Scores(
        labels=per,
        micro=_metrics("micro", tp, fp, fn),
        macro=macro,
        extra=[_metrics(lab, *counts[lab]) for lab in extra],
        n_reports=len(gold),
        missing_predictions=missing,
        uncertain=uncertain,
    )


def format_table(scores: Scores) -> str:
    """A fixed-width text table: one row per label, then micro and macro."""
    head = f"{'label':<20} {'P':>6} {'R':>6} {'F1':>6} {'TP':>5} {'FP':>5} {'FN':>5} {'support':>7}"
    rows = [head, "-" * len(head)]

    def row(s: LabelScore) -> str:
        return (
            f"{s.label:<20} {s.precision:6.3f} {s.recall:6.3f} {s.f1:6.3f} "
            f"{s.tp:5d} {s.fp:5d} {s.fn:5d} {s.support:7d}"
        )

    rows += [row(s) for s in scores.labels]
    rows.append("-" * len(head))
    rows += [row(scores.micro), row(scores.macro)]
    if scores.extra:
        rows.append("-" * len(head))
        rows += [row(s) for s in scores.extra]
    rows.append(
        f"{scores.n_reports} gold reports, {scores.missing_predictions} without prediction; "
        f"uncertain counted as {scores.uncertain}"
    )
    return "\n".join(rows)


# --- the CheXpert paper's metrics (Irvin et al., AAAI 2019, Table 2) -----------------

#: task -> the statuses that count as that task's class
CHEXPERT_TASKS: dict[str, frozenset[str]] = {
    "mention": frozenset({"positive", "negative", "uncertain"}),
    "negation": frozenset({"negative"}),
    "uncertainty": frozenset({"uncertain"}),
    "positive": frozenset({"positive"}),
}


@dataclass(frozen=True)
class ChexpertScores:
    """F1 of mention, negation, uncertainty and positive per label, and their macro means.

    A task's macro mean is over the labels where its F1 is defined (some gold
    or predicted cases); `defined` says how many.
    """

    per_label: dict[str, dict[str, LabelScore]]
    macro: dict[str, float]
    defined: dict[str, int]
    n_reports: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def score_chexpert(
    pred: Mapping[str, Mapping[str, str]],
    gold: Mapping[str, Mapping[str, str]],
    labels: Sequence[str],
) -> ChexpertScores:
    """Score statuses with the CheXpert paper's four tasks, each a binary F1 per label.

    mention: any of positive / negative / uncertain vs blank; negation:
    negative vs the rest; uncertainty: uncertain vs the rest; positive:
    positive vs the rest. Every gold report counts (a missing prediction is blank).

    Args:
        pred: {report id: {label: status}}.
        gold: {report id: {label: status}} read from 1 / 0 / -1 / blank.
        labels: the labels scored (CheXpert: the 13 observations, No Finding apart).

    Returns:
        The scores.
    """
    per: dict[str, dict[str, LabelScore]] = {}
    for lab in labels:
        per[lab] = {}
        for task, cls in CHEXPERT_TASKS.items():
            tp = fp = fn = 0
            for rid, g in gold.items():
                y = g.get(lab, "absent") in cls
                yhat = pred.get(rid, {}).get(lab, "absent") in cls
                tp += y and yhat
                fp += yhat and not y
                fn += y and not yhat
            per[lab][task] = _metrics(lab, tp, fp, fn)
    macro: dict[str, float] = {}
    defined: dict[str, int] = {}
    for task in CHEXPERT_TASKS:
        scores = [s[task] for s in per.values() if s[task].tp + s[task].fp + s[task].fn]
        defined[task] = len(scores)
        macro[task] = round(sum(s.f1 for s in scores) / len(scores), 4) if scores else 0.0
    return ChexpertScores(per_label=per, macro=macro, defined=defined, n_reports=len(gold))


def format_chexpert_table(scores: ChexpertScores) -> str:
    """A fixed-width table: F1 per label and task (support in brackets), then the macro row."""
    tasks = list(CHEXPERT_TASKS)
    head = f"{'observation':<28}" + "".join(f"{t:>18}" for t in tasks)
    rows = [head, "-" * len(head)]
    for lab, s in scores.per_label.items():
        cells = "".join(
            f"{s[t].f1:>11.3f} ({s[t].support:>4d})"
            if s[t].tp + s[t].fp + s[t].fn
            else f"{'-':>18}"
            for t in tasks
        )
        rows.append(f"{lab:<28}{cells}")
    rows.append("-" * len(head))
    rows.append(
        f"{'macro':<28}"
        + "".join(f"{scores.macro[t]:>11.3f} ({scores.defined[t]:>2d} lb)" for t in tasks)
    )
    rows.append(
        f"{scores.n_reports} gold reports; F1 per task (gold support); "
        "macro over the labels where the task has cases"
    )
    return "\n".join(rows)
