"""Where a labeler and a gold standard disagree: per-label confusion counts and the rules
behind the errors, so a site can see what to tune (`cxr evaluate-labels`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labeler.errors import InputError
from labeler.files import NO_FINDING, iter_label_results

__all__ = ["Disagreements", "find_disagreements", "format_disagreements", "read_mention_rules"]

STATUSES = ("positive", "uncertain", "negative", "absent")
#: the rule id shown for a predicted label no rule decided (a plain positive mention)
PLAIN = "concept.plain"
#: shown for an error where nothing was predicted (the gold has a finding we missed)
NO_MENTION = "(no mention)"


@dataclass(frozen=True)
class Disagreements:
    """Confusion counts per label (gold status -> predicted status) and error rule ids."""

    confusion: dict[str, dict[tuple[str, str], int]]
    rules: Counter[str] = field(default_factory=Counter)
    rules_known: bool = True  # False for predictions without mentions (a CSV)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: `{"confusion": {label: {"gold->pred": n}}, "error_rules": ...}`."""
        return {
            "confusion": {
                label: {f"{g}->{p}": n for (g, p), n in sorted(cells.items())}
                for label, cells in self.confusion.items()
            },
            "error_rules": dict(self.rules.most_common()) if self.rules_known else None,
        }


def read_mention_rules(path: Path) -> dict[str, dict[str, list[str]]] | None:
    """The rule id of every mention, per report and label, from `cxr label` JSONL.

    Returns:
        {report id: {label: [rule id, ...]}} (under "No Finding": the rules of the
        positive and uncertain mentions, which decided it), or None for a file that is
        not JSONL (a CheXpert-style CSV carries no mentions).

    Raises:
        InputError: a JSONL line that is not a `cxr label` result.
    """
    if path.suffix.lower() not in (".jsonl", ".ndjson", ".json"):
        return None
    out: dict[str, dict[str, list[str]]] = {}
    for n, obj in iter_label_results(path):
        try:
            per_label: dict[str, list[str]] = {}
            for m in obj.get("mentions") or ():
                rule = str(m.get("rule") or PLAIN)
                per_label.setdefault(str(m["label"]), []).append(rule)
                if m.get("status") in ("positive", "uncertain"):
                    # what kept the report from No Finding, which has no mentions
                    per_label.setdefault(NO_FINDING, []).append(rule)
        except (KeyError, TypeError, AttributeError):
            raise InputError(f"{path}: line {n} is not a `cxr label` JSON object") from None
        out[str(obj["id"])] = per_label
    return out


def find_disagreements(
    pred: Mapping[str, Mapping[str, str]],
    gold: Mapping[str, Mapping[str, str]],
    labels: Sequence[str],
    rules: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
    uncertain: str = "negative",
) -> Disagreements:
    """Count gold-versus-predicted statuses per label over the reports in `gold`.

    A label whose gold is binary (only positive and negative, as OpenI's 1/0) is compared
    at that granularity: a prediction is positive (uncertain too, with
    `uncertain="positive"`) or negative, so "absent" against a gold 0 is no error.

    Args:
        pred: {report id: {label: status}}; a report missing here counts as all absent.
        gold: {report id: {label: status}}.
        labels: the labels to count.
        rules: mention rule ids per report and label (`read_mention_rules`), or None.
        uncertain: how an uncertain prediction counts against a binary gold.

    Returns:
        The confusion counts, and how often each rule id decided a mention of a label
        whose status disagrees with the gold (`(no mention)` when nothing was found).
    """
    confusion: dict[str, dict[tuple[str, str], int]] = {label: {} for label in labels}
    error_rules: Counter[str] = Counter()
    positive = {"positive", "uncertain"} if uncertain == "positive" else {"positive"}
    binary = {
        label
        for label in labels
        if {row.get(label, "absent") for row in gold.values()} <= {"positive", "negative"}
    }
    for rid, gold_row in gold.items():
        pred_row = pred.get(rid, {})
        for label in labels:
            g = gold_row.get(label, "absent")
            p = pred_row.get(label, "absent")
            if label in binary:
                p = "positive" if p in positive else "negative"
            cell = confusion[label]
            cell[(g, p)] = cell.get((g, p), 0) + 1
            if g != p and rules is not None:
                fired = rules.get(rid, {}).get(label) or [NO_MENTION]
                error_rules.update(dict.fromkeys(fired, 1))
    return Disagreements(confusion, error_rules, rules is not None)


def format_disagreements(found: Disagreements, top: int = 10) -> str:
    """A table per label of gold (rows) against predicted (columns), and the top rule ids."""
    short = {"positive": "pos", "uncertain": "unc", "negative": "neg", "absent": "abs"}
    lines = [
        "Confusion per label where the gold disagrees (rows: gold, columns: predicted):",
        f"{'label':28s} {'gold':5s} " + " ".join(f"{short[s]:>5s}" for s in STATUSES),
    ]
    for label, cells in found.confusion.items():
        if not any(n for (g, p), n in cells.items() if g != p):
            continue  # full agreement: nothing to tune
        for g in STATUSES:
            counts = [cells.get((g, p), 0) for p in STATUSES]
            if any(counts):
                row = " ".join(f"{n:5d}" for n in counts)
                lines.append(f"{label:28s} {short[g]:5s} {row}")
    if len(lines) == 2:
        lines[1:] = ["  none: every label agrees with the gold"]
    if not found.rules_known:
        lines.append(
            "\nRules behind the errors: need `cxr label` JSONL predictions (with mentions)."
        )
    elif found.rules:
        lines.append(f"\nThe {top} rule ids most often behind an error:")
        for rule, n in found.rules.most_common(top):
            lines.append(f"  {n:5d}  {rule}")
    return "\n".join(lines)
