"""Precision, recall and F1 of predicted labels against a gold standard."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

__all__ = ["LabelScore", "Scores", "format_table", "score_labels"]

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
