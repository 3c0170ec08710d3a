"""The report labeler as a batch worker uses it: one spaCy pipeline, built once per process.

The service's `app.report_labeler.ReportLabeler` adds what a web process needs (an event-loop
thread, a queue bound); both satisfy `batch.interfaces.Labeler` and label alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from labeler import LabelerError, ReportLabels

if TYPE_CHECKING:
    from spacy.language import Language

    from labeler.config import LabelerConfig

__all__ = ["PipelineLabeler"]


class PipelineLabeler:
    """Labels (id, text) pairs with a pipeline built from `config` (default: the defaults).

    Args:
        config: the labeler configuration; None for `LabelerConfig()`, as `cxr batch` uses.
    """

    def __init__(self, config: LabelerConfig | None = None) -> None:
        from labeler.config import LabelerConfig

        self.config = config if config is not None else LabelerConfig()
        self._nlp: Language | None = None

    @property
    def nlp(self) -> Language:
        """The spaCy pipeline, built at the first use: a worker that reads only images
        never imports spaCy (seconds per Ray actor)."""
        if self._nlp is None:
            from labeler.pipeline import build_nlp

            self._nlp = build_nlp(self.config)
        return self._nlp

    @property
    def version(self) -> str:
        """A short identifier of the labeler's rules, stored beside every result."""
        parts = [getattr(self.config, a, None) for a in ("concepts", "rules", "sections")]
        named = [p for p in parts if isinstance(p, str) and p]
        return "+".join(named)[:64] or "unknown"

    def label_many(self, items: Sequence[tuple[str, str]]) -> list[ReportLabels]:
        """Label (id, text) pairs in one pass; a bad report gives a result with `.error` set."""
        from labeler.pipeline import label_report, label_reports

        try:
            results = list(label_reports(items, nlp=self.nlp, config=self.config, on_error="skip"))
        except LabelerError:
            results = []
        if len(results) == len(items) and all(
            r.id == str(i) for r, (i, _) in zip(results, items, strict=True)
        ):
            return results
        out: list[ReportLabels] = []  # `skip` may drop a bad report: one by one, in order
        for report_id, text in items:
            try:
                out.append(
                    label_report(text, report_id=report_id, nlp=self.nlp, config=self.config)
                )
            except LabelerError as exc:
                out.append(ReportLabels(id=report_id, labels={}, no_finding=False, error=str(exc)))
        return out
