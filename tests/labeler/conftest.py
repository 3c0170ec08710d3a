"""Labeler fixtures: one spaCy pipeline per test session (loading it takes a second)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from spacy.language import Language

from labeler.config import LabelerConfig
from labeler.pipeline import build_nlp, label_report
from labeler.schema import Mention, ReportLabels


@pytest.fixture(scope="session")
def config() -> LabelerConfig:
    return LabelerConfig()


@pytest.fixture(scope="session")
def nlp(config: LabelerConfig) -> Language:
    return build_nlp(config)


@pytest.fixture(scope="session")
def label(nlp: Language, config: LabelerConfig) -> Callable[[str], ReportLabels]:
    """Label one report text with the session pipeline."""

    def run(text: str) -> ReportLabels:
        return label_report(text, nlp=nlp, config=config)

    return run


@pytest.fixture(scope="session")
def mention_of(label: Callable[[str], ReportLabels]) -> Callable[[str, str], Mention]:
    """The single mention of `label_name` in a one-sentence report."""

    def find(text: str, label_name: str) -> Mention:
        found = [m for m in label(text).mentions if m.label == label_name]
        assert len(found) == 1, f"expected one {label_name} mention in {text!r}, got {found}"
        return found[0]

    return find
