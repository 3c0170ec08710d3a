"""The report labeler as the service uses it: one cached spaCy pipeline, serialized access."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, TypeVar

from app.errors import LabelerBusy
from labeler import LabelerError, ReportLabels, label_report

if TYPE_CHECKING:
    from spacy.language import Language

    from labeler.config import LabelerConfig

__all__ = ["ReportLabeler", "load_report_labeler"]

T = TypeVar("T")

#: Label requests that may wait for the labeler at once; more answer 503 (LabelerBusy).
DEFAULT_MAX_WAITING = 64


class ReportLabeler:
    """Labels report text with a pipeline built once.

    spaCy pipelines are not documented as thread-safe, and labeling is CPU-bound
    under the GIL anyway, so calls are serialized with a lock.
    """

    def __init__(
        self, nlp: Language, config: LabelerConfig, *, max_waiting: int = DEFAULT_MAX_WAITING
    ) -> None:
        self.nlp = nlp
        self.config = config
        self.max_waiting = max_waiting
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._waiting = 0  # changed on the event loop only

    async def label_async(self, text: str, report_id: str = "") -> ReportLabels:
        """`label` for the event loop: waits on the labeler's own thread, not the threadpool.

        Raises:
            LabelerError: empty, non-text or too long input.
            LabelerBusy: `max_waiting` requests are already waiting.
        """
        return await self._on_own_thread(partial(self.label, text, report_id))

    async def label_many_async(self, items: Sequence[tuple[str, str]]) -> list[ReportLabels]:
        """`label_many` for the event loop (see `label_async`)."""
        return await self._on_own_thread(partial(self.label_many, items))

    async def _on_own_thread(self, call: Callable[[], T]) -> T:
        # Labeling is serialized, so requests queue. Queued on the shared threadpool, 40
        # of them held every thread that sync routes and dependencies need, and /readyz
        # missed its health check (issue 18 item 1); here they wait on one thread of
        # their own, and past `max_waiting` the caller is told to come back.
        if self._waiting >= self.max_waiting:
            raise LabelerBusy(
                f"{self._waiting} report requests are waiting for the labeler; retry shortly, "
                "or use `cxr label` or a batch job for many reports"
            )
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="labeler")
        self._waiting += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, call)
        finally:
            self._waiting -= 1

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
def _cached(config: LabelerConfig) -> ReportLabeler:
    from labeler.pipeline import build_nlp

    return ReportLabeler(build_nlp(config), config)


def load_report_labeler(config: LabelerConfig | None = None) -> ReportLabeler:
    """The labeler for `config` (default `LabelerConfig()`), built once per process.

    Building the spaCy pipeline takes seconds; app instances and batch runs share it.
    """
    from labeler.config import LabelerConfig

    return _cached(config if config is not None else LabelerConfig())
