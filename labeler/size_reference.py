"""Sizes given in the sentence after their finding: "A mass is present in the left midlung.
This measures approximately 3.2 cm in diameter."

The attribute rules (`labeler.attributes`) read a size beside its finding, inside one
sentence. A sentence that starts with a word that refers back (`size.refers_back.starts` in
`patterns/attributes.v1.yaml`: "This", "It"), names no finding of its own and states a size
gives that size to the first finding of the sentence before it, when that finding is not
ruled out and has no size of its own. The size keeps its evidence: the rule id and the
report offsets of the words that state it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TypeVar

from labeler.attributes import AttributeRules
from labeler.schema import Mention

__all__ = ["sizes_referred_back"]

_M = TypeVar("_M", bound=Mention)
_LEAD = re.compile(r"^[\W\d]*")  # list numbers and punctuation before the first word


def sizes_referred_back(
    mentions: Sequence[_M],
    sentences: Sequence[tuple[int, int]],
    text: str,
    rules: AttributeRules,
) -> list[_M]:
    """`mentions` with the sizes that later sentences give them.

    Args:
        mentions: the report's mentions (or findings), with report offsets.
        sentences: (start, end) report offsets of the report's sentences, in order.
        text: the report.
        rules: the attribute rules (size pattern, units, the words that refer back).

    Returns:
        A new list; a mention that takes a size is replaced by a copy.
    """
    out = list(mentions)
    starts = rules.refer_back_starts
    if not starts or len(sentences) < 2:
        return out
    named = {m.sentence_start for m in out}
    for (before, _), (s, e) in zip(sentences, sentences[1:], strict=False):
        if s in named or not any(c.isdigit() for c in text[s:e]):
            continue  # it names its own finding (the size is that one's), or states no size
        sentence = text[s:e]
        lead = sentence[_LEAD.match(sentence).end() :].lower()  # type: ignore[union-attr]
        if not any(lead == w or lead.startswith(w + " ") for w in starts):
            continue
        match = rules.size_pattern.search(sentence)
        if match is None:
            continue
        target = next(
            (i for i, m in enumerate(out) if m.sentence_start == before and m.status != "negative"),
            None,
        )
        if target is None or "size_mm" in out[target].attributes:
            continue
        m = out[target]
        size = rules.size_mm(match)
        evidence = {
            "attribute": "size_mm",
            "value": size,
            "rule": rules.refer_back_rule,
            "start": s + match.start(),
            "end": s + match.end(),
        }
        out[target] = dataclasses.replace(
            m,
            attributes={**m.attributes, "size_mm": size},
            attribute_evidence=[*m.attribute_evidence, evidence],
        )
    return out
