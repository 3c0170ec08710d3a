"""Explicit statements ("heart size is normal", "stable cardiac silhouette") as mentions.

A statement is not a finding word that rules negate: it states the finding's
status by itself. Which labels it decides, and how, is data
(`patterns/statements*.yaml`); each match gives one mention per label with
the statement's id as its rule (issue 8, item 2).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from spacy.matcher import Matcher
from spacy.tokens import Doc, Span
from spacy.util import filter_spans
from spacy.vocab import Vocab

from labeler.required_words import RequiredWords
from labeler.vocabulary import Statement, load_statements

__all__ = ["StatementMatch", "StatementMatcher"]


class StatementMatch(NamedTuple):
    """One label decided by a statement: character offsets in the doc's text."""

    label: str
    start: int
    end: int
    status: str
    rule: str


class StatementMatcher:
    """Find the statements of a statement file in a tokenized doc (no parse needed).

    Args:
        vocab: the pipeline's vocab.
        name: statement file name (`statements.v1`) or a path to a YAML file.
        labels: the label set's labels; statements about other labels are dropped.
    """

    def __init__(self, vocab: Vocab, name: str, labels: frozenset[str]) -> None:
        self.name = name
        self.matcher = Matcher(vocab)
        self.statements: dict[str, Statement] = {}
        for st in load_statements(name):
            kept = tuple(lab for lab in st.labels if lab in labels)
            if kept and st.patterns:
                self.statements[st.id] = Statement(st.id, st.status, kept, st.patterns)
                self.matcher.add(st.id, [list(p) for p in st.patterns])
        self._anchor = _anchor_regex(st.patterns for st in self.statements.values())
        # where the caller has the words: the Matcher runs only on a sentence that holds a
        # word for every required token of one pattern (962 of 3,000 OpenI reports'
        # sentences pass the anchor, 412 this)
        self._words = RequiredWords(p for st in self.statements.values() for p in st.patterns)

    def may_match(self, text: str) -> bool:
        """False when `text` holds none of the words a statement must start with.

        A cheap test on the string that spares most sentences the Matcher.
        """
        return bool(self.statements) and (self._anchor is None or bool(self._anchor.search(text)))

    def find(
        self, doc: Doc, text: str | None = None, words: Sequence[str] | None = None
    ) -> list[StatementMatch]:
        """The statements in `doc`: the longest match of each statement where it overlaps itself.

        Args:
            doc: a tokenized sentence.
            text: `doc.text`, when the caller has it (spaCy rebuilds it from the tokens).
            words: its lower-cased tokens, when the caller has them.
        """
        # the words first: a set test, where the anchor is a regex search of the text
        if words is not None and not self._words.may_match(words):
            return []
        if not self.may_match(doc.text if text is None else text):
            return []
        # the match id is the statement id's hash: a Span takes it as is, without hashing
        spans = [Span(doc, s, e, label=mid) for mid, s, e in self.matcher(doc)]
        by_id: dict[str, list[Span]] = {}
        for span in spans:
            by_id.setdefault(span.label_, []).append(span)
        # longest match per statement; different statements may share words
        # ("cardiac and mediastinal silhouettes are stable": heart and mediastinum)
        kept = [sp for group in by_id.values() for sp in filter_spans(group)]
        out: list[StatementMatch] = []
        for span in sorted(kept, key=lambda sp: sp.start):
            st = self.statements[span.label_]
            out.extend(
                StatementMatch(lab, span.start_char, span.end_char, st.status, st.id)
                for lab in st.labels
            )
        return out


def _anchor_regex(
    pattern_sets: Any,
) -> re.Pattern[str] | None:
    """A regex of every word a pattern's first token may be, or None when one is open."""
    words: set[str] = set()
    for patterns in pattern_sets:
        for pattern in patterns:
            first = pattern[0] if pattern else {}
            value = first.get("LOWER") if isinstance(first, dict) else None
            if isinstance(value, str):
                words.add(value)
            elif isinstance(value, dict) and isinstance(value.get("IN"), list):
                words.update(str(w) for w in value["IN"])
            else:
                return None  # a first token this test cannot read: always run the Matcher
    if not words:
        return None
    alternatives = "|".join(sorted(map(re.escape, words), key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w])", re.IGNORECASE)
