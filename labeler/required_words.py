"""Whether spaCy token patterns may match a sentence, told from its lower-cased words alone.

spaCy's `Matcher` calls a Python predicate per token and pattern state: 150,000 calls in
3,000 OpenI reports when every sentence with "heart" went through the concepts' patterns.
Most sentences hold no word that a pattern's first required token may be, and a sentence
that lacks a word for any one required token of every pattern cannot match; both are
checked on the words the caller already has, and only the rest go to the `Matcher`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["RequiredWords"]


class RequiredWords:
    """The words each token pattern of a set must hold, to skip the `Matcher` where it
    cannot match.

    Args:
        patterns: spaCy `Matcher` token patterns (lists of token dicts).
    """

    def __init__(self, patterns: Iterable[Iterable[dict[str, Any]]]) -> None:
        # for each pattern, the words each of its required tokens may be; None: a pattern
        # without such a token, whose matches may hold any word
        self._required = _required_words(patterns)
        self._first_words = (
            None
            if self._required is None
            else frozenset(w for required in self._required for w in required[0])
        )

    def may_match(self, words: Sequence[str]) -> bool:
        """Whether a pattern may match a sentence of these lower-cased words: the sentence
        holds a word that each required token of one pattern may be."""
        if self._required is None or self._first_words is None:
            return True
        if self._first_words.isdisjoint(words):
            return False
        present = set(words)
        return any(
            all(not allowed.isdisjoint(present) for allowed in required)
            for required in self._required
        )


def _required_words(
    patterns: Iterable[Iterable[dict[str, Any]]],
) -> list[tuple[frozenset[str], ...]] | None:
    """For each pattern, in token order, the lower-cased words each of its required tokens
    (no `OP`, or "+") with a `LOWER` word or list may be: a match holds one word of each.
    None when a pattern has no such token (its matches may hold any word)."""
    out = []
    for pattern in patterns:
        required = []
        for token in pattern:
            value = token.get("LOWER") if token.get("OP", "+") == "+" else None
            if isinstance(value, str):
                required.append(frozenset({value}))
            elif isinstance(value, dict) and set(value) == {"IN"} and isinstance(value["IN"], list):
                required.append(frozenset(str(w) for w in value["IN"]))
        if not required:
            return None
        out.append(tuple(required))
    return out
