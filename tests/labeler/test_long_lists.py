"""Long coordinated lists stay fast and keep their list semantics (a DoS guard).

Deciding the mentions of one sentence used to re-walk the list from every
mention (and rebuild the set of mention tokens per mention and cue), which
grew faster than quadratically: a 400-item list took over 30 s. The bounds
below are generous on purpose: they catch that class, they are not a benchmark.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from labeler.schema import ReportLabels

_BOUND_S = 5.0


def test_a_400_item_negated_list_is_fast_and_all_negative(
    label: Callable[[str], ReportLabels],
) -> None:
    text = "No " + "pneumothorax, effusion, " * 400 + "or edema."
    start = time.process_time()
    result = label(text)
    elapsed = time.process_time() - start
    assert elapsed < _BOUND_S
    assert len(result.mentions) == 801
    assert {m.status for m in result.mentions} == {"negative"}


def test_many_cues_times_many_mentions_stays_fast(label: Callable[[str], ReportLabels]) -> None:
    text = "No pneumothorax, " + ", ".join(["no effusion"] * 400) + "."
    start = time.process_time()
    result = label(text)
    elapsed = time.process_time() - start
    assert elapsed < _BOUND_S
    assert {m.status for m in result.mentions} == {"negative"}
