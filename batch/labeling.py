"""The report labeler as every caller uses it: one spaCy pipeline, built once, used serially.

`cxr batch`, the service's jobs, Ray workers and the C-STORE listener use `PipelineLabeler`
as it is; the service's `app.report_labeler.ReportLabeler` adds only what a web process
needs (its own thread for the event loop, a bound on waiting requests).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spacy.language import Language

    from labeler import ReportLabels
    from labeler.config import LabelerConfig

__all__ = ["PipelineLabeler"]


class PipelineLabeler:
    """Labels report text with one pipeline; satisfies `batch.interfaces.Labeler`.

    spaCy pipelines are not documented as thread-safe (and the labeler's sentence cache is
    shared per pipeline), while labeling is CPU-bound under the GIL anyway: calls are
    serialized with a lock.

    Args:
        config: the labeler configuration; None for `LabelerConfig()`, as `cxr batch` uses.
        nlp: a pipeline from `labeler.pipeline.build_nlp(config)`; None: built at first use.
    """

    def __init__(self, config: LabelerConfig | None = None, *, nlp: Language | None = None) -> None:
        from labeler.config import LabelerConfig

        self.config = config if config is not None else LabelerConfig()
        self._nlp = nlp
        self._lock = threading.Lock()  # held while the pipeline is in use
        self._build_lock = threading.Lock()  # apart: reading `nlp` never waits for a label

    @property
    def nlp(self) -> Language:
        """The spaCy pipeline, built at the first use unless given: a worker that reads only
        images never imports spaCy (seconds per Ray actor)."""
        if self._nlp is None:
            with self._build_lock:
                if self._nlp is None:
                    from labeler.pipeline import build_nlp

                    self._nlp = build_nlp(self.config)
        return self._nlp

    @contextlib.contextmanager
    def pipeline(self) -> Iterator[Language]:
        """The pipeline, for the caller alone while the block runs (e.g. to parse a question
        with its tokenizer while another thread would label)."""
        nlp = self.nlp
        with self._lock:
            yield nlp

    @property
    def version(self) -> str:
        """A short identifier of the labeler's rules, stored beside every result."""
        parts = [getattr(self.config, a, None) for a in ("concepts", "rules", "sections")]
        named = [p for p in parts if isinstance(p, str) and p]
        return "+".join(named)[:64] or "unknown"

    def label(self, text: str, report_id: str = "", *, findings: bool = False) -> ReportLabels:
        """Label one report; with `findings`, also read every finding it names.

        Raises:
            LabelerError: empty, non-text or too long input.
        """
        from labeler.pipeline import label_report

        with self._lock:
            return label_report(
                text, report_id=report_id, nlp=self.nlp, config=self._config(findings)
            )

    def label_with_words(self, text: str, words: Collection[str]) -> ReportLabels:
        """Label one report with its findings, `words` read as open finding words too
        (`labeler.pipeline.label_with_words`); a bad report gives a result with `.error`."""
        from labeler.pipeline import label_with_words

        with self._lock:
            return label_with_words(text, words, nlp=self.nlp, config=self._config(True))

    def label_many(
        self, items: Sequence[tuple[str, str]], *, findings: bool = False
    ) -> list[ReportLabels]:
        """Label (id, text) pairs in one pass; a bad report gives a result with `.error` set.
        With `findings`, also read every finding each report names.

        Returns:
            One result per pair, in input order, with `id` the pair's id as a str.

        Raises:
            LabelerError: the pipeline lacks the labeler's components (no report's fault).
        """
        from labeler.pipeline import label_reports

        with self._lock:
            # "skip" answers every pair, a bad one with `error` set (labeler.pipeline)
            config = self._config(findings)
            return list(label_reports(items, nlp=self.nlp, config=config, on_error="skip"))

    def _config(self, findings: bool) -> LabelerConfig:
        # the same reading, plus the findings pass (the engine is cached per config)
        if findings == self.config.findings:
            return self.config
        return dataclasses.replace(self.config, findings=findings)

    def explain(self, result: ReportLabels) -> dict[str, Any]:
        """Why `result` got its labels: mentions, rules and cues, aggregation."""
        from labeler.explain import explain
        from labeler.labelsets import load_label_set

        return explain(result, load_label_set(self.config.label_set))
