"""Every finding a report names: lexicon concepts, and open findings headed by a finding word.

`FindingMatcher` reads a sentence for the concepts of the chest lexicon (`labeler.lexicon`:
findings, devices, post-operative changes, bone and soft-tissue findings, normal statements)
and for open findings, a finding word radiologists use for what they see ("opacity",
"density", "lesion") outside any concept. The engine (`labeler.pipeline`) decides each one's
status with the same negation and certainty rules as the labels' mentions, in a pass of its
own, so the label outputs do not change when findings are read.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from spacy.matcher import PhraseMatcher
from spacy.tokens import Doc, Span
from spacy.util import filter_spans

if TYPE_CHECKING:
    from spacy.language import Language

    from labeler.lexicon import Lexicon

__all__ = ["OPEN_PREFIX", "FindingMatcher", "is_abnormal", "lexicon_matcher"]

#: Span label prefix of an open finding: "open:opacity".
OPEN_PREFIX = "open:"
#: Kinds whose positive reading does not make a report abnormal.
_NOT_ABNORMAL = frozenset({"normal", "anatomy"})


class FindingMatcher:
    """Find lexicon concepts and open findings in a tokenized sentence.

    Args:
        nlp: the pipeline whose vocab and tokenizer build the patterns.
        lexicon: the chest lexicon.
    """

    def __init__(self, nlp: Language, lexicon: Lexicon) -> None:
        self.lexicon = lexicon
        self.phrases = lexicon_matcher(nlp, lexicon, skip_kinds={"anatomy"})
        self.open_heads = frozenset(lexicon.open_finding_heads)
        self._strings = nlp.vocab.strings

    def find(self, doc: Doc, words: Sequence[str] | None = None) -> list[Span]:
        """Concepts (longest match wins) and open findings, in text order.

        Args:
            doc: a tokenized sentence.
            words: its lower-cased tokens, when the caller has them (spaCy builds a Token
                object on every access).

        Returns:
            Spans labelled with the concept id, or `open:<head word>` for an open finding.
        """
        if words is None:
            words = [t.lower_ for t in doc]
        spans = [
            Span(doc, start, end, label=self._strings[match_id])
            for match_id, start, end in self.phrases(doc)
        ]
        kept = filter_spans(spans)
        taken = {i for span in kept for i in range(span.start, span.end)}
        heads = self.open_heads
        for i, word in enumerate(words):
            if word in heads and i not in taken:
                kept.append(Span(doc, i, i + 1, label=OPEN_PREFIX + _singular(word)))
        kept.sort(key=lambda s: (s.start, s.end))
        return kept


def lexicon_matcher(
    nlp: Language, lexicon: Lexicon, *, skip_kinds: Collection[str] = ()
) -> PhraseMatcher:
    """A matcher of the lexicon's phrases on lower-cased tokens, each match named by the most
    specific concept the phrase belongs to; concepts of `skip_kinds` left out."""
    matcher = PhraseMatcher(nlp.vocab, attr="LOWER")
    for concept_id, phrases in lexicon.phrases_by_concept(skip_kinds).items():
        matcher.add(concept_id, [nlp.make_doc(p) for p in phrases])
    return matcher


def is_abnormal(kind: str) -> bool:
    """Whether a positive finding of this kind makes the report not normal."""
    return kind not in _NOT_ABNORMAL


def _singular(word: str) -> str:
    # "opacities" -> "opacity", "densities" -> "density", "lesions" -> "lesion"
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word
