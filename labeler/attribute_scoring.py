"""Score finding attributes against a gold CSV (`id`, `label`, `attribute`, `expected`).

Each gold row is one question ("where is the effusion in report 17?"). The
prediction is `findings[label][attribute]` of that report in `cxr label`
output; a blank `expected` means the attribute must be left out. Locations are
compared as sets (gold lists them separated by `;` or `|`), sizes within half a
millimetre, everything else as lower-case text.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from labeler.errors import InputError
from labeler.files import iter_label_results

__all__ = [
    "AttributeScore",
    "AttributeScores",
    "format_attribute_table",
    "read_attribute_gold",
    "read_findings",
    "score_attributes",
]

_GOLD_COLUMNS = ("id", "label", "attribute", "expected")
_ATTRIBUTES = frozenset(
    {"status", "laterality", "location", "severity", "size_mm", "count", "change"}
)
_SIZE_TOLERANCE_MM = 0.5


@dataclass(frozen=True)
class GoldAttribute:
    """One gold row."""

    report_id: str
    label: str
    attribute: str
    expected: str


@dataclass(frozen=True)
class AttributeScore:
    """Right answers out of the gold rows for one attribute (or all)."""

    attribute: str
    correct: int
    total: int
    accuracy: float


@dataclass(frozen=True)
class AttributeScores:
    """Per-attribute accuracy, the overall accuracy, and the wrong answers."""

    attributes: list[AttributeScore]
    overall: AttributeScore
    missing_reports: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def read_attribute_gold(path: Path) -> list[GoldAttribute]:
    """Read the gold CSV.

    Raises:
        InputError: the file is unreadable, lacks a column, or names an unknown attribute.
    """
    try:
        with path.open(encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in _GOLD_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise InputError(
                    f"{path}: attribute gold needs the columns {', '.join(_GOLD_COLUMNS)}; "
                    f"missing {', '.join(missing)}"
                )
            rows = []
            for n, row in enumerate(reader, start=2):
                attribute = (row["attribute"] or "").strip().lower()
                if attribute not in _ATTRIBUTES:
                    raise InputError(
                        f"{path}: line {n}: unknown attribute {row['attribute']!r}; expected one "
                        f"of {', '.join(sorted(_ATTRIBUTES))}"
                    )
                rows.append(
                    GoldAttribute(
                        str(row["id"]).strip(),
                        (row["label"] or "").strip(),
                        attribute,
                        (row["expected"] or "").strip(),
                    )
                )
            return rows
    except OSError as exc:
        raise InputError(f"cannot read attribute gold {path}: {exc}") from None


def read_findings(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Read `findings` per report id from `cxr label` JSONL output.

    Raises:
        InputError: unreadable file or a line that is not a `cxr label` object.
    """
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for n, obj in iter_label_results(path):
        try:
            out[str(obj["id"])] = dict(obj.get("findings") or {})
        except (TypeError, ValueError):
            raise InputError(
                f"{path}: line {n} is not a `cxr label` JSON object with findings"
            ) from None
    return out


def _matches(attribute: str, expected: str, predicted: Any) -> bool:
    if not expected:
        return predicted in (None, "", [])
    if predicted is None:
        return False
    if attribute == "location":
        want = {p.strip().lower() for p in expected.replace("|", ";").split(";") if p.strip()}
        got = {str(p).lower() for p in (predicted if isinstance(predicted, list) else [predicted])}
        return want == got
    if attribute == "size_mm":
        try:
            return abs(float(expected) - float(predicted)) <= _SIZE_TOLERANCE_MM
        except (TypeError, ValueError):
            return False
    return str(predicted).strip().lower() == expected.lower()


def score_attributes(
    findings: Mapping[str, Mapping[str, Mapping[str, Any]]], gold: list[GoldAttribute]
) -> AttributeScores:
    """Accuracy of predicted attributes, per attribute and overall.

    A gold row whose report has no prediction counts as wrong (and is counted
    in `missing_reports`).
    """
    right: dict[str, int] = {}
    total: dict[str, int] = {}
    errors: list[dict[str, Any]] = []
    missing: set[str] = set()
    for row in gold:
        report = findings.get(row.report_id)
        if report is None:
            missing.add(row.report_id)
        predicted = (report or {}).get(row.label, {}).get(row.attribute)
        ok = _matches(row.attribute, row.expected, predicted)
        total[row.attribute] = total.get(row.attribute, 0) + 1
        right[row.attribute] = right.get(row.attribute, 0) + int(ok)
        if not ok:
            errors.append(
                {
                    "id": row.report_id,
                    "label": row.label,
                    "attribute": row.attribute,
                    "expected": row.expected,
                    "predicted": predicted,
                }
            )
    per = [
        AttributeScore(a, right[a], total[a], round(right[a] / total[a], 4)) for a in sorted(total)
    ]
    n = sum(total.values())
    correct = sum(right.values())
    overall = AttributeScore("overall", correct, n, round(correct / n, 4) if n else 0.0)
    return AttributeScores(per, overall, len(missing), errors)


def format_attribute_table(scores: AttributeScores) -> str:
    """A plain-text table: attribute, correct, total, accuracy."""
    lines = [f"{'attribute':<12} {'correct':>7} {'total':>6} {'accuracy':>8}"]
    for s in [*scores.attributes, scores.overall]:
        lines.append(f"{s.attribute:<12} {s.correct:>7} {s.total:>6} {s.accuracy:>8.3f}")
    if scores.missing_reports:
        lines.append(f"({scores.missing_reports} gold report(s) had no prediction)")
    return "\n".join(lines)
