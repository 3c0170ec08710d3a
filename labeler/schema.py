"""The label vocabulary and the labeler's result types.

The `Label` enum is the project's one label vocabulary: `models` uses the same
names (as strings, in checkpoints) so mined labels feed training directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

__all__ = [
    "ATTRIBUTE_KEYS",
    "CHESTXRAY8",
    "CHESTXRAY14",
    "LABEL_SETS",
    "Label",
    "Mention",
    "ReportFinding",
    "ReportLabels",
    "Status",
    "labels_for",
]


class Label(StrEnum):
    """The 14 ChestX-ray14 thoracic labels (Wang et al. 2017), spelled as in the NIH release."""

    ATELECTASIS = "Atelectasis"
    CARDIOMEGALY = "Cardiomegaly"
    EFFUSION = "Effusion"
    INFILTRATION = "Infiltration"
    MASS = "Mass"
    NODULE = "Nodule"
    PNEUMONIA = "Pneumonia"
    PNEUMOTHORAX = "Pneumothorax"
    CONSOLIDATION = "Consolidation"
    EDEMA = "Edema"
    EMPHYSEMA = "Emphysema"
    FIBROSIS = "Fibrosis"
    PLEURAL_THICKENING = "Pleural_Thickening"
    HERNIA = "Hernia"


CHESTXRAY14: tuple[Label, ...] = tuple(Label)
CHESTXRAY8: tuple[Label, ...] = (
    Label.ATELECTASIS,
    Label.CARDIOMEGALY,
    Label.EFFUSION,
    Label.INFILTRATION,
    Label.MASS,
    Label.NODULE,
    Label.PNEUMONIA,
    Label.PNEUMOTHORAX,
)
LABEL_SETS: dict[str, tuple[Label, ...]] = {"chestxray14": CHESTXRAY14, "chestxray8": CHESTXRAY8}

#: Finding attribute keys, in output order (labeler.attributes).
ATTRIBUTE_KEYS = ("laterality", "location", "severity", "size_mm", "count", "change")

Status = Literal["positive", "uncertain", "negative", "absent"]


def labels_for(label_set: str) -> tuple[Label, ...]:
    """Return the labels of a named label set (`chestxray14` or `chestxray8`).

    Raises:
        ValueError: the name is not a known label set.
    """
    try:
        return LABEL_SETS[label_set.lower()]
    except KeyError:
        known = ", ".join(sorted(LABEL_SETS))
        raise ValueError(f"unknown label set {label_set!r}; expected one of: {known}") from None


#: Characters of a mention's sentence shown with it (`Mention.context`).
SENTENCE_SHOWN = 300


@dataclass(frozen=True)
class Mention:
    """One concept mention found in a report, with its verdict.

    `start`/`end` are character offsets into the original report text, so
    `text == report[start:end]`. `rule` is the id of the rule (or statement)
    that decided the status (None for a plain positive), `cue` the cue words
    that fired it; `negex` is negspacy's verdict ("negated" / "affirmed"), or
    None when negspacy did not run.
    """

    label: str
    text: str
    start: int
    end: int
    sentence: str
    status: Literal["positive", "uncertain", "negative"]
    rule: str | None = None
    negex: str | None = None
    section: str | None = None
    cue: str | None = None
    #: where, how big, how many, changed: {"laterality": "left", "size_mm": 12.0, ...}
    attributes: dict[str, Any] = field(default_factory=dict)
    #: why each attribute: {"attribute", "value", "rule", "start", "end"} (report offsets)
    attribute_evidence: list[dict[str, Any]] = field(default_factory=list)
    #: report offset where `sentence` starts (None: unknown, the sentence is shown whole)
    sentence_start: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of one mention (`sentence` as `context` gives it)."""
        return self._fill({})

    def _fill(self, out: dict[str, Any]) -> dict[str, Any]:
        """`out` with the mention's keys added after its own, field by field:
        dataclasses.asdict deep-copies and is the slowest step of writing a large output
        file."""
        out["label"] = self.label
        out["text"] = self.text
        out["start"] = self.start
        out["end"] = self.end
        out["sentence"] = self.context()
        out["status"] = self.status
        out["rule"] = self.rule
        out["negex"] = self.negex
        out["section"] = self.section
        out["cue"] = self.cue
        out["attributes"] = self.attributes
        out["attribute_evidence"] = self.attribute_evidence
        return out

    def context(self) -> str:
        """The sentence as output: whole up to `SENTENCE_SHOWN` characters, else that many
        around the mention, "…" marking each cut end.

        Real sentences stay whole (the longest of 3,080 OpenI reports has 262 characters);
        a run-on piece of up to `LabelerConfig.max_sentence_chars` would otherwise be
        repeated in full with each of its mentions.
        """
        text = self.sentence
        if len(text) <= SENTENCE_SHOWN or self.sentence_start is None:
            return text
        at = max(0, self.start - self.sentence_start)
        span = max(self.end - self.start, 0)
        lo = max(0, min(at - (SENTENCE_SHOWN - span) // 2, len(text) - SENTENCE_SHOWN))
        hi = lo + SENTENCE_SHOWN
        return ("…" if lo else "") + text[lo:hi] + ("…" if hi < len(text) else "")


@dataclass(frozen=True)
class ReportFinding(Mention):
    """One finding the report names, read with its verdict (`LabelerConfig.findings`): a
    mention whose `label` is the lexicon's concept id, or `open:<word>` for an open finding
    (a finding word such as "opacity" outside any concept).

    `mesh` is the heading as the OpenI coders write it, with the concept's qualifiers and
    the side ("Catheters, Indwelling/right"); empty where they have no heading. `radlex` is
    the concept's RadLex id ("RID5581"); empty where the lexicon gives none.
    """

    name: str = ""
    kind: str = "finding"
    mesh: str = ""
    radlex: str = ""

    @property
    def concept(self) -> str:
        """The concept id (`label`)."""
        return self.label

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of one finding: its concept, then the mention's keys (one dict,
        on the 20,000 findings of 3,000 reports)."""
        return self._fill(
            {
                "concept": self.label,
                "name": self.name,
                "kind": self.kind,
                "mesh": self.mesh,
                "radlex": self.radlex,
            }
        )


@dataclass
class ReportLabels:
    """Report-level result: a status per label, the No Finding flag and the evidence."""

    id: str
    labels: dict[str, Status]
    no_finding: bool
    mentions: list[Mention] = field(default_factory=list)
    error: str | None = None
    #: per label not absent: {"status", "laterality", "location", "severity", "size_mm",
    #: "count", "change"}, aggregated over the label's mentions (labeler.attributes)
    findings: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: mentions found but left out of `mentions` (`LabelerConfig.max_mentions`)
    mentions_omitted: int = 0
    #: every finding the report names (None: not asked, `LabelerConfig.findings`)
    report_findings: list[ReportFinding] | None = None
    #: no abnormal finding read, positive or hedged (None: findings not asked)
    normal: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON Lines object written by `cxr label` and returned by the API."""
        out: dict[str, Any] = {
            "id": self.id,
            "labels": dict(self.labels),
            "no_finding": self.no_finding,
            "mentions": [m.to_dict() for m in self.mentions],
            "findings": self.findings,
        }
        if self.mentions_omitted:
            out["mentions_omitted"] = self.mentions_omitted
        if self.report_findings is not None:
            out["report_findings"] = [f.to_dict() for f in self.report_findings]
            out["normal"] = self.normal
        if self.error is not None:
            out["error"] = self.error
        return out
