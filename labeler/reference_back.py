"""Sizes and changes the parse does not reach: given in the sentence after their finding
("A mass is present in the left midlung. This measures approximately 3.2 cm in diameter.",
"Bilateral nodules. These were not present on the prior study."), or a sentence's one size
beside its one finding ("nodules measure approximately 5 mm").

The attribute rules (`labeler.attributes`) read a size or a change beside its finding,
inside one sentence. A sentence that starts with a word that refers back
(`size.refers_back.starts` in `patterns/attributes.v1.yaml`: "This", "It") gives the size
it states, and the change it states (`change_refers_back`), before any finding of its own
("These were not present on the prior study and may represent infection"), to the first
finding of the sentence before it, when that finding
is not ruled out and has no such attribute of its own. A change after a negation word of
the sentence ("This is not new") is not read. Each value keeps its evidence: the rule id
and the report offsets of the words that state it.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from typing import TypeVar

from labeler.attributes import AttributeRules, has_digit, looks_plural
from labeler.schema import Mention

__all__ = ["attributes_referred_back", "sentences_referring_back"]

_M = TypeVar("_M", bound=Mention)
_LEAD = re.compile(r"^[\W\d]*")  # list numbers and punctuation before the first word
_WORD = re.compile(r"[a-z]+")
_NEGATION = re.compile(r"\b(?:not|no|without|never)\b", re.IGNORECASE)


def attributes_referred_back(
    mentions: Sequence[_M],
    sentences: Sequence[tuple[int, int]],
    text: str,
    rules: AttributeRules,
    referring: Sequence[int] | None = None,
) -> list[_M]:
    """`mentions` with the sizes and changes that later sentences give them.

    Args:
        mentions: the report's mentions (or findings), with report offsets.
        sentences: (start, end) report offsets of the report's sentences, in order.
        text: the report.
        rules: the attribute rules (size pattern, units, change phrases, the words that
            refer back).
        referring: `sentences_referring_back(sentences, text, rules)`, when the caller
            has it (the mentions and the findings of one report).

    Returns:
        A new list; a mention that takes a value is replaced by a copy.
    """
    out = _sole_sizes(list(mentions), text, rules)
    if referring is None:
        referring = sentences_referring_back(sentences, text, rules)
    if not referring:
        return out
    # where each sentence's first finding starts: what a sentence states before its own
    # finding is the one before's ("These were not present on the prior study and may
    # represent infection"); what it states after it is its own
    named: dict[int | None, int] = {}
    for m in out:
        named[m.sentence_start] = min(m.start, named.get(m.sentence_start, m.start))
    for n in referring:
        (before, _), (s, e) = sentences[n - 1], sentences[n]
        own = named.get(s, e) - s
        if own <= 0:
            continue  # it starts with its own finding: what it states is that one's
        sentence = text[s:e]
        target = next(
            (i for i, m in enumerate(out) if m.sentence_start == before and m.status != "negative"),
            None,
        )
        if target is None:
            continue
        size = rules.size_pattern.search(sentence) if has_digit(sentence) else None
        targets = _with_described(out, target, text)
        if size is not None and _before_own(sentence, size.end(), own, e - s):
            for i in targets:
                _give(out, i, "size_mm", rules.size_mm(size), rules.refer_back_rule, s, size)
        change = rules.change_pattern.search(sentence) if rules.change_refer_back_rule else None
        if (
            change is not None
            and _before_own(sentence, change.end(), own, e - s)
            and not _NEGATION.search(sentence, 0, change.start())
        ):
            value = rules.change_phrases[change.group(0).lower()]
            for i in targets:
                _give(out, i, "change", value, rules.change_refer_back_rule, s, change)
    return out


#: how many words may come between a describing finding and the finding it describes
#: ("cavitary bilateral pulmonary masses"), none of them a word that joins two findings
_DESCRIBED_WITHIN = 3
_BETWEEN = re.compile(r"[a-z-]+")
_JOINING = frozenset({"and", "or", "with", "but", "of", "in", "versus", "vs"})


def _with_described(out: Sequence[Mention], target: int, text: str) -> list[int]:
    """`target` and the finding it describes right after it, when only describing words
    come between them in one phrase ("Multiple cavitary bilateral pulmonary masses": the
    cavitation and the masses are one lesion; what the next sentence says of it is said
    of both)."""
    first = out[target]
    after = next(
        (
            i
            for i, m in enumerate(out)
            if m.sentence_start == first.sentence_start and m.start >= first.end
        ),
        None,
    )
    if after is None or out[after].status == "negative":
        return [target]
    between = text[first.end : out[after].start].lower()
    words = between.split()
    if (
        len(words) > _DESCRIBED_WITHIN
        or any(_BETWEEN.fullmatch(w) is None for w in words)
        or set(words) & _JOINING
    ):
        return [target]
    return [target, after]


def sentences_referring_back(
    sentences: Sequence[tuple[int, int]], text: str, rules: AttributeRules
) -> list[int]:
    """The indices of the sentences, after the first, that start with a word that refers
    back (`AttributeRules.refer_back_starts`: "This", "It"), list numbers and punctuation
    before it aside. They depend on the text alone: one reading serves a report's mentions
    and its findings.

    Args:
        sentences: (start, end) report offsets of the report's sentences, in order.
        text: the report.
        rules: the attribute rules.
    """
    starts = rules.refer_back_starts
    if not starts or len(sentences) < 2:
        return []
    whole, heads, initials = _lead_words(starts)
    out = []
    for i in range(1, len(sentences)):
        s, e = sentences[i]
        first = text[s : s + 1]
        if first.isalpha() and first.lower()[:1] not in initials:
            continue  # starts with its first word, and no word that refers back starts so
        sentence = text[s:e]
        lead = sentence[_LEAD.match(sentence).end() :].lower()  # type: ignore[union-attr]
        if lead in whole or lead.startswith(heads):
            out.append(i)
    return out


@functools.lru_cache(maxsize=8)
def _lead_words(
    starts: tuple[str, ...],
) -> tuple[frozenset[str], tuple[str, ...], frozenset[str]]:
    """The words that refer back, each with the space after it ("lead == w or
    lead.startswith(w + ' ')" for each w, in one C call each), and their first letters: a
    sentence that starts with a letter (no list number or punctuation before its first
    word) and not one of these needs no look at its lead."""
    return frozenset(starts), tuple(w + " " for w in starts), frozenset(w[:1] for w in starts)


def _before_own(sentence: str, end: int, own: int, length: int) -> bool:
    """Whether words ending at `end` are said before the sentence's own finding (at `own`;
    `length` where it has none), not of it: "This is new and may represent infection", not
    "It is near a 3 cm mass" or "This may represent resolving or developing pneumonia" (two
    words or fewer between them describe that finding)."""
    return own == length or (end <= own and len(_WORD.findall(sentence[end:own].lower())) > 2)


def _sole_sizes(out: list[_M], text: str, rules: AttributeRules) -> list[_M]:
    """A sentence's one size goes to its one finding when the parse gave it to none ("small
    bilateral pulmonary nodules measure approximately 5 mm"), and the largest of its sizes to
    a plural one ("Two nodules ... measuring 13 mm and one measuring 16 mm"): the finding is
    not ruled out, is the sentence's only mention but for normal statements and devices, and
    has no size."""
    if not rules.sole_size_rule or not has_digit(text):
        return out  # no size in the report (3 in 4 OpenI reports)
    by_sentence: dict[int, list[int]] = {}
    for i, m in enumerate(out):
        if m.sentence_start is not None and getattr(m, "kind", "finding") not in _NOT_SIZED:
            by_sentence.setdefault(m.sentence_start, []).append(i)
    for start, members in by_sentence.items():
        if len({(out[i].start, out[i].end) for i in members}) != 1:
            continue
        m = out[members[0]]
        if m.status == "negative" or "size_mm" in m.attributes:
            continue
        sentence = m.sentence
        if not has_digit(sentence):
            continue
        sizes = [
            s
            for s in rules.size_pattern.finditer(sentence)
            if not rules.is_distance(sentence, s.end())
        ]
        plural = looks_plural(m.text.lower())
        if (len(sizes) > 1 and not plural) or set(
            _WORD.findall(sentence.lower())
        ) & rules.prior_cues:
            # two sizes of one finding, or one that may be an earlier study's ("3 cm
            # previously"); several findings' sizes ("Two nodules measuring 13 mm and 16 mm")
            # give the largest, as a finding's size is
            continue
        size = max(sizes, key=rules.size_mm, default=None)
        if size is None:
            continue
        for i in members:
            _give(out, i, "size_mm", rules.size_mm(size), rules.sole_size_rule, start, size)
    return out


_NOT_SIZED = frozenset({"normal", "device", "technique", "view"})


def _give(
    out: list[_M],
    i: int,
    key: str,
    value: str | float,
    rule: str,
    offset: int,
    match: re.Match[str],
) -> None:
    """Mention `i` takes `key` unless it has it already, with its evidence."""
    m = out[i]
    if key in m.attributes:
        return
    evidence = {
        "attribute": key,
        "value": value,
        "rule": rule,
        "start": offset + match.start(),
        "end": offset + match.end(),
    }
    out[i] = dataclasses.replace(
        m,
        attributes={**m.attributes, key: value},
        attribute_evidence=[*m.attribute_evidence, evidence],
    )
