"""The one labeler adapter: lazy or given pipeline, serialized calls, one answer per report."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from batch.interfaces import Labeler
from batch.labeling import PipelineLabeler
from labeler import ReportLabels
from labeler.config import LabelerConfig


def test_pipeline_labeler_answers_every_pair_in_order(labeler: PipelineLabeler) -> None:
    items = [("a", "Small left effusion."), ("b", ""), ("c", "No pneumothorax.")]
    results = labeler.label_many(items)
    assert [r.id for r in results] == ["a", "b", "c"]
    assert results[0].labels["Effusion"] == "positive"
    assert results[1].error is not None and results[1].error.startswith("EmptyReportError")
    assert results[2].labels["Pneumothorax"] == "negative"
    one = labeler.label("Small left effusion.", "a")
    assert one.to_dict() == results[0].to_dict()


def test_pipeline_labeler_uses_a_given_pipeline_and_explains(labeler: PipelineLabeler) -> None:
    shared = PipelineLabeler(LabelerConfig(), nlp=labeler.nlp)
    assert shared.nlp is labeler.nlp
    assert shared.version == labeler.version != "unknown"
    result = shared.label("Small left effusion.")
    assert shared.explain(result)
    checked: Labeler = shared  # satisfies the processor's protocol (mypy checks this line)
    assert checked.label_many([]) == []


def test_pipeline_labeler_serializes_callers(
    labeler: PipelineLabeler, monkeypatch: pytest.MonkeyPatch
) -> None:
    # spaCy pipelines (and the labeler's sentence cache) are not thread-safe: one at a time
    from labeler import pipeline

    original, inside, most = pipeline.label_reports, [0], [0]

    def counting(*args: Any, **kwargs: Any) -> Iterator[ReportLabels]:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.02)
        try:
            yield from original(*args, **kwargs)
        finally:
            inside[0] -= 1

    monkeypatch.setattr(pipeline, "label_reports", counting)
    got: dict[int, str] = {}

    def work(i: int) -> None:
        got[i] = labeler.label_many([(str(i), f"Small effusion {i}.")])[0].id

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == {i: str(i) for i in range(6)}
    assert most[0] == 1
