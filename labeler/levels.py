"""Which rib or vertebra a bone finding names: "left 4th, 5th, and 6th ribs", "T11".

`LevelFinder` reads a stretch of report text for ordinal ribs and vertebral levels, with
the rules of `patterns/levels.v1.yaml`. The engine (`labeler.pipeline`) gives a finding of
lexicon kind `bone` its `levels` from its clause; questions answer "Which rib is fractured?"
and "How many ribs are fractured?" from them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from labeler.errors import PatternFileError
from labeler.vocabulary import read_pattern_file

__all__ = ["LevelFinder", "load_level_finder"]


class LevelFinder:
    """Find rib and vertebral levels in text.

    Args:
        ordinals: ordinal word -> number ("fifth": 5, "5th": 5).
        range_words: words that join two levels into a range.
        list_words: words that join levels into a list.
        ribs: the number of ribs on a side.
        vertebrae: the number of vertebrae per region letter (C, T, L, S).
        specific: concept id -> {"rib" or "vertebra": the more specific concept id}.
    """

    def __init__(
        self,
        ordinals: Mapping[str, int],
        range_words: tuple[str, ...],
        list_words: tuple[str, ...],
        ribs: int,
        vertebrae: Mapping[str, int],
        specific: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.specific = {k: dict(v) for k, v in (specific or {}).items()}
        self._rib_concepts = frozenset(v["rib"] for v in self.specific.values() if "rib" in v)
        self.ordinals = {k.lower(): v for k, v in ordinals.items()}
        self.ribs, self.vertebrae = ribs, {k.upper(): v for k, v in vertebrae.items()}
        ordinal = "|".join(sorted(map(re.escape, self.ordinals), key=len, reverse=True))
        joiner = "|".join(map(re.escape, (*range_words, *list_words)))
        self._range = frozenset(w.lower() for w in range_words)
        self._list = frozenset(w.lower() for w in list_words)
        # "4th, 5th, and 6th ribs", "5th through 9th anterior ribs", "left 9th rib", a side
        # for each ("right 10th and left 9th posterolateral ribs")
        self._ordinal_ribs = re.compile(
            rf"\b(?P<list>(?:{ordinal})(?:\s*(?:{joiner})\s*(?:and\s+)?(?:(?:left|right)\s+)?"
            rf"(?:{ordinal}))*)"
            rf"(?:\s+(?:left|right|anterior|posterior|lateral|upper|lower|[a-z]+ior|[a-z]+lateral))*"
            rf"\s+ribs?\b",
            re.IGNORECASE,
        )
        self._ordinal = re.compile(rf"\b(?:{ordinal})\b|{joiner}", re.IGNORECASE)
        # "rib 4", "ribs 4-6"
        self._numbered_ribs = re.compile(r"\bribs?\s+(\d{1,2})(?:\s*(-|–|to|through)\s*(\d{1,2}))?")
        letters = "".join(self.vertebrae)
        self._vertebral = re.compile(
            rf"\b([{letters}])(\d{{1,2}})(?:\s*(?:-|–|to|through)\s*([{letters}])?(\d{{1,2}}))?\b"
        )

    def specific_concept(self, concept: str, levels: list[str]) -> str | None:
        """The more specific concept a general one is, given its levels: all ribs or all
        vertebrae; None when there is none."""
        by_kind = self.specific.get(concept)
        if not by_kind or not levels:
            return None
        if all(level.endswith(" rib") for level in levels):
            return by_kind.get("rib")
        if all(not level.endswith(" rib") for level in levels):
            return by_kind.get("vertebra")
        return None

    def of_ribs(self, concept: str, levels: list[str]) -> bool:
        """Whether a bone finding is of the ribs: a rib concept of `specific`, or levels that
        are all ribs."""
        if concept in self._rib_concepts:
            return True
        return bool(levels) and all(level.endswith(" rib") for level in levels)

    def find(self, text: str) -> list[str]:
        """The levels `text` names, in order, each once: "4th rib", "T11"."""
        return list(dict.fromkeys(level for level, _, _ in self.spans(text)))

    def spans(self, text: str) -> list[tuple[str, int, int]]:
        """Each level `text` names with the offsets of the words that name it."""
        out: list[tuple[str, int, int]] = []
        for m in self._ordinal_ribs.finditer(text):
            at = (m.start(), m.end())
            out += [(f"{_ordinal(n)} rib", *at) for n in self._rib_numbers(m["list"])]
        for m in self._numbered_ribs.finditer(text.lower()):
            first = int(m[1])
            last = int(m[3]) if m[3] else first
            out += [
                (f"{_ordinal(n)} rib", m.start(), m.end())
                for n in range(first, last + 1)
                if 1 <= n <= self.ribs
            ]
        for m in self._vertebral.finditer(text):
            region, first = m[1], int(m[2])
            if not 1 <= first <= self.vertebrae[region]:
                continue
            end_region, last = (m[3] or region), (int(m[4]) if m[4] else first)
            if end_region == region and first <= last <= self.vertebrae[region]:
                names = [f"{region}{n}" for n in range(first, last + 1)]
            else:  # "T12-L1" crosses regions: its two ends
                names = [f"{region}{first}"]
                if 1 <= last <= self.vertebrae.get(end_region, 0):
                    names.append(f"{end_region}{last}")
            out += [(name, m.start(), m.end()) for name in names]
        return sorted(out, key=lambda x: x[1])

    def joined(self, between: str) -> bool:
        """Whether the text between two levels lists them together ("T5 and L2", "T5, L2")."""
        words = between.replace(",", " , ").lower().split()
        return bool(words) and all(w in self._list for w in words)

    def _rib_numbers(self, listed: str) -> list[int]:
        numbers: list[int] = []
        pending_range = False
        for tok in self._ordinal.findall(listed):
            word = tok.lower()
            if word in self.ordinals:
                n = self.ordinals[word]
                if pending_range and numbers:
                    numbers += list(range(numbers[-1] + 1, n + 1))
                else:
                    numbers.append(n)
                pending_range = False
            elif word in self._range:
                pending_range = True
        return [n for n in numbers if 1 <= n <= self.ribs]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@functools.lru_cache(maxsize=4)
def load_level_finder(name: str = "levels.v1") -> LevelFinder:
    """Load the level rules: packaged name (`levels.v1`) or a path to a YAML file.

    Raises:
        PatternFileError: the file is missing or malformed.
    """
    where, data = read_pattern_file(name)
    ordinals, vertebrae = data.get("ordinals"), data.get("vertebrae")
    if not isinstance(ordinals, dict) or not all(
        isinstance(v, int) and v > 0 for v in ordinals.values()
    ):
        raise PatternFileError(f"{where}: `ordinals` must map words to positive numbers")
    if not isinstance(vertebrae, dict) or not all(
        isinstance(k, str) and len(k) == 1 and isinstance(v, int) and v > 0
        for k, v in vertebrae.items()
    ):
        raise PatternFileError(f"{where}: `vertebrae` must map region letters to counts")
    ribs = data.get("ribs")
    if not isinstance(ribs, int) or ribs <= 0:
        raise PatternFileError(f"{where}: `ribs` must be a positive number")
    words = {}
    for key in ("range_words", "list_words"):
        raw = data.get(key) or []
        if not isinstance(raw, list) or not all(isinstance(w, str) and w for w in raw):
            raise PatternFileError(f"{where}: `{key}` must be a list of words")
        words[key] = tuple(raw)
    specific = data.get("specific") or {}
    if not isinstance(specific, dict) or not all(
        isinstance(v, dict) and set(v) <= {"rib", "vertebra"} for v in specific.values()
    ):
        raise PatternFileError(f"{where}: `specific` must map concepts to {{rib, vertebra}}")
    return LevelFinder(
        {str(k): int(v) for k, v in ordinals.items()},
        words["range_words"],
        words["list_words"],
        ribs,
        {str(k): int(v) for k, v in vertebrae.items()},
        {str(k): {str(a): str(b) for a, b in v.items()} for k, v in specific.items()},
    )
