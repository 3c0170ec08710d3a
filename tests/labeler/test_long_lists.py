"""Long coordinated lists stay fast and keep their list semantics (a DoS guard).

Deciding the mentions of one sentence used to re-walk the list from every
mention (and rebuild the set of mention tokens per mention and cue), which
grew faster than quadratically: a 400-item list took over 30 s. The bounds
below are generous on purpose: they catch that class, they are not a benchmark.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from spacy.language import Language

from labeler import label_report
from labeler.config import LabelerConfig
from labeler.schema import ReportLabels

_BOUND_S = 5.0


def test_a_negated_list_as_long_as_a_sentence_may_be_is_all_negative(
    label: Callable[[str], ReportLabels],
) -> None:
    # 40 items, 980 characters: within LabelerConfig.max_sentence_chars, one parse
    text = "No " + "pneumothorax, effusion, " * 40 + "or edema."
    assert len(text) <= 1_000
    start = time.process_time()
    result = label(text)
    elapsed = time.process_time() - start
    assert elapsed < _BOUND_S
    assert len(result.mentions) == 81
    assert {m.status for m in result.mentions} == {"negative"}


def test_a_400_item_list_is_cut_at_clause_ends_and_stays_fast(nlp: Language) -> None:
    # 9,600 characters in one "sentence": parsed in pieces of at most 1,000 characters
    # (issue 18: a run-on sentence made parsing and scopes superlinear), cut at commas,
    # so every item is still found. Past the bound the list is no longer parsed as one
    # coordination: which items a negation reaches is then the parser's guess.
    text = "No " + "pneumothorax, effusion, " * 400 + "or edema."
    start = time.process_time()
    # every mention kept, to see where the pieces were cut (the default keeps 100)
    result = label_report(text, nlp=nlp, config=LabelerConfig(max_mentions=1_000))
    elapsed = time.process_time() - start
    assert elapsed < _BOUND_S
    assert len(result.mentions) == 801
    assert result.mentions[0].status == "negative"
    assert max(len(m.sentence) for m in result.mentions) <= 1_000
    pieces = {m.sentence for m in result.mentions}
    assert len(pieces) >= 3
    assert all(p.endswith(",") or p.endswith("or edema.") for p in pieces)


def test_many_cues_times_many_mentions_stays_fast(label: Callable[[str], ReportLabels]) -> None:
    text = "No pneumothorax, " + ", ".join(["no effusion"] * 400) + "."
    start = time.process_time()
    result = label(text)
    elapsed = time.process_time() - start
    assert elapsed < _BOUND_S
    assert {m.status for m in result.mentions} == {"negative"}
