"""The report labeler as the service uses it: one cached spaCy pipeline, serialized access."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from labeler import LabelerError, ReportLabels, label_report

__all__ = ["ReportLabeler", "load_report_labeler"]


class ReportLabeler:
    """Labels report text with a pipeline built once.

    spaCy pipelines are not documented as thread-safe, and labeling is CPU-bound
    under the GIL anyway, so calls are serialized with a lock.
    """

    def __init__(self, nlp: Any, config: Any) -> None:
        self.nlp = nlp
        self.config = config
        self._lock = threading.Lock()

    @property
    def version(self) -> str:
        """A short identifier of the labeler's rules, stored beside every result."""
        parts = [getattr(self.config, a, None) for a in ("concepts", "rules", "sections")]
        named = [p for p in parts if isinstance(p, str) and p]
        return "+".join(named)[:64] or "unknown"

    def explain(self, result: ReportLabels) -> dict[str, Any]:
        """Why `result` got its labels: mentions, rules and cues, aggregation."""
        from labeler.explain import explain
        from labeler.labelsets import load_label_set

        return explain(result, load_label_set(self.config.label_set))

    def label(self, text: str, report_id: str = "") -> ReportLabels:
        """Label one report.

        Raises:
            LabelerError: empty, non-text or too long input.
        """
        with self._lock:
            return label_report(text, report_id=report_id, nlp=self.nlp, config=self.config)

    def label_many(self, items: Sequence[tuple[str, str]]) -> list[ReportLabels]:
        """Label (id, text) pairs in one pass; a bad report gives a result with `.error` set."""
        from labeler.pipeline import label_reports

        with self._lock:
            try:
                results = list(
                    label_reports(items, nlp=self.nlp, config=self.config, on_error="skip")
                )
            except LabelerError:
                results = []
        if len(results) == len(items) and all(
            r.id == str(i) for r, (i, _) in zip(results, items, strict=True)
        ):
            return results
        # `skip` may drop bad reports instead of returning them with an error: label
        # one by one so every input gets exactly one answer, in order.
        out: list[ReportLabels] = []
        for report_id, text in items:
            try:
                out.append(self.label(text, report_id))
            except LabelerError as exc:
                out.append(ReportLabels(id=report_id, labels={}, no_finding=False, error=str(exc)))
        return out


@lru_cache(maxsize=2)
def _cached(config: Any) -> ReportLabeler:
    from labeler.pipeline import build_nlp

    return ReportLabeler(build_nlp(config), config)


def load_report_labeler(config: Any = None) -> ReportLabeler:
    """The labeler for `config` (default `LabelerConfig()`), built once per process.

    Building the spaCy pipeline takes seconds; app instances and batch runs share it.
    """
    from labeler.config import LabelerConfig

    return _cached(config if config is not None else LabelerConfig())
