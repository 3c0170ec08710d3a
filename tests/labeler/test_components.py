"""The concept matcher's token patterns run only where a word they require is present."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from spacy.language import Language

from labeler.components import ConceptMatcher


def _matcher(nlp: Language, tmp_path: Path, patterns: list[list[dict[str, Any]]]) -> ConceptMatcher:
    path = tmp_path / "concepts.yaml"
    body = {"phrases": ["atelectasis"], "patterns": patterns}
    path.write_text(yaml.safe_dump({"labels": {"Atelectasis": body}}), encoding="utf-8")
    return ConceptMatcher(nlp, concepts=str(path))


def _found(matcher: ConceptMatcher, nlp: Language, text: str) -> list[tuple[str, str]]:
    return [(span.text, span.label_) for span in matcher.find(nlp.make_doc(text))]


def test_concepts_token_pattern_found_past_an_optional_first_token(
    nlp: Language, tmp_path: Path
) -> None:
    matcher = _matcher(
        nlp,
        tmp_path,
        [
            [
                {"LOWER": "left", "OP": "?"},
                {"LOWER": {"IN": ["lobe", "lung"]}},
                {"LOWER": "collapsed"},
            ]
        ],
    )
    assert _found(matcher, nlp, "The LUNG collapsed.") == [("LUNG collapsed", "Atelectasis")]
    assert _found(matcher, nlp, "Left lung collapsed.") == [("Left lung collapsed", "Atelectasis")]
    assert _found(matcher, nlp, "The heart has collapsed.") == []
    assert _found(matcher, nlp, "Atelectasis.") == [("Atelectasis", "Atelectasis")]


def test_concepts_token_pattern_without_a_required_word_runs_on_every_sentence(
    nlp: Language, tmp_path: Path
) -> None:
    matcher = _matcher(nlp, tmp_path, [[{"IS_DIGIT": True}, {"LOWER": "cm", "OP": "?"}]])
    assert _found(matcher, nlp, "Nodule of 2 cm.") == [("2 cm", "Atelectasis")]
