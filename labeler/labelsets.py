"""Label sets as data: which labels, from which vocabulary, rules and statements, aggregated how.

A label set file (`patterns/labelset.<name>.v1.yaml`, or a path to a YAML file
of the same shape) names its output labels in order, the concept, rule,
statement and section files that find and decide their mentions, and the
report-level conventions: which labels do not block No Finding, which
mentions imply another label, and the CSV column order.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from labeler.certainty import DEFAULT_PROFILE
from labeler.errors import PatternFileError
from labeler.vocabulary import load_concepts, read_pattern_file

__all__ = ["PACKAGED", "Implication", "LabelSet", "load_label_set"]

#: packaged label set names -> file names in `labeler/patterns/`
PACKAGED: dict[str, str] = {
    "chestxray14": "labelset.chestxray14.v1",
    "chestxray8": "labelset.chestxray8.v1",
    "chexpert": "labelset.chexpert.v2",
    "chexpert-labeler": "labelset.chexpert-labeler.v1",
}


@dataclass(frozen=True)
class Implication:
    """A mention whose text is one of `phrases` (positive or uncertain) also sets `label`."""

    phrases: frozenset[str]
    label: str
    status: Literal["positive", "uncertain", "negative"]


@dataclass(frozen=True)
class LabelSet:
    """One label set: output labels, the files that decide them, report-level conventions."""

    name: str
    labels: tuple[str, ...]
    concepts: str
    rules: str
    sections: str
    statements: str | None
    #: the certainty scale that grades hedges, and the profile that maps its levels
    certainty: str
    certainty_profile: str
    #: labels whose positive or uncertain mentions do not rule out No Finding
    no_finding_ignores: frozenset[str]
    implies: tuple[Implication, ...]
    #: CSV columns in order: label names, "No Finding", "Header={field}" (id, text, error)
    csv_columns: tuple[str, ...]
    #: (label, rule id) pairs whose mentions are reported absent, not negative
    #: (a removed device is not a negative Support Devices mention)
    absent_when: frozenset[tuple[str, str]] = frozenset()


@functools.lru_cache(maxsize=16)
def load_label_set(name: str) -> LabelSet:
    """Load a label set by packaged name (`chestxray14`, `chestxray8`, `chexpert`) or path.

    Raises:
        PatternFileError: unknown name, malformed file, or a label the concept
            file does not define.
    """
    key = PACKAGED.get(name.lower(), name)
    if key == name and not name.endswith((".yaml", ".yml")):
        raise PatternFileError(
            f"unknown label set {name!r}; expected one of {', '.join(PACKAGED)} "
            "or a path to a label set .yaml file"
        )
    where, data = read_pattern_file(key)
    labels = data.get("labels")
    if not isinstance(labels, list) or not labels or not all(isinstance(x, str) for x in labels):
        raise PatternFileError(f"{where}: `labels:` must be a non-empty list of names")
    files = data.get("files") or {}
    if not isinstance(files, dict) or not isinstance(files.get("concepts"), str):
        raise PatternFileError(f"{where}: `files:` must name at least `concepts`")
    concepts = files["concepts"]
    missing = sorted(set(labels) - load_concepts(concepts).labels)
    if missing:
        raise PatternFileError(f"{where}: concept file {concepts!r} lacks label(s) {missing}")
    nf = data.get("no_finding") or {}
    implies = []
    for i, imp in enumerate(data.get("implies") or []):
        if (
            not isinstance(imp, dict)
            or imp.get("label") not in labels
            or imp.get("status") not in ("positive", "uncertain", "negative")
            or not isinstance(imp.get("phrases"), list)
        ):
            raise PatternFileError(
                f"{where}: implies #{i} needs `phrases`, a `label` of the set and a `status`"
            )
        implies.append(
            Implication(
                frozenset(" ".join(str(p).lower().split()) for p in imp["phrases"]),
                imp["label"],
                imp["status"],
            )
        )
    absent_when: set[tuple[str, str]] = set()
    for i, entry in enumerate(data.get("absent_when") or []):
        if (
            not isinstance(entry, dict)
            or entry.get("label") not in labels
            or not isinstance(entry.get("rules"), list)
        ):
            raise PatternFileError(
                f"{where}: absent_when #{i} needs a `label` of the set and `rules`"
            )
        absent_when.update((entry["label"], str(rule)) for rule in entry["rules"])
    columns = data.get("csv_columns") or ["id={id}", *labels, "No Finding", "error={error}"]
    return LabelSet(
        name=str(data.get("name") or name),
        labels=tuple(labels),
        concepts=concepts,
        rules=str(files.get("rules") or "rules.v1"),
        sections=str(files.get("sections") or "sections.v1"),
        statements=files.get("statements"),
        certainty=str(files.get("certainty") or "certainty.v1"),
        certainty_profile=str(data.get("certainty_profile") or DEFAULT_PROFILE),
        no_finding_ignores=frozenset(nf.get("ignore") or ()),
        implies=tuple(implies),
        csv_columns=tuple(str(c) for c in columns),
        absent_when=frozenset(absent_when),
    )
