"""The report labeler as the service uses it: the library's `PipelineLabeler`, plus an
event-loop entry on the labeler's own thread and a bound on the requests waiting for it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache, partial
from typing import TYPE_CHECKING, TypeVar

from app.errors import LabelerBusy
from batch.labeling import PipelineLabeler

if TYPE_CHECKING:
    from spacy.language import Language

    from labeler import ReportLabels
    from labeler.config import LabelerConfig

__all__ = ["ReportLabeler", "load_report_labeler"]

T = TypeVar("T")

#: Label requests that may wait for the labeler at once; more answer 503 (LabelerBusy).
DEFAULT_MAX_WAITING = 64


class ReportLabeler(PipelineLabeler):
    """`PipelineLabeler` with `*_async` methods for routes.

    A subclass, not a wrapper: routes and the batch job runner share one instance, so
    both go through the one lock of its one pipeline.

    Args:
        config, nlp: as for `PipelineLabeler`.
        max_waiting: requests that may wait for the labeler at once; more raise LabelerBusy.
    """

    def __init__(
        self,
        config: LabelerConfig | None = None,
        *,
        nlp: Language | None = None,
        max_waiting: int = DEFAULT_MAX_WAITING,
    ) -> None:
        super().__init__(config, nlp=nlp)
        self.max_waiting = max_waiting
        self._executor: ThreadPoolExecutor | None = None
        self._waiting = 0  # changed on the event loop only

    async def label_async(
        self, text: str, report_id: str = "", *, findings: bool = False
    ) -> ReportLabels:
        """`label` for the event loop: waits on the labeler's own thread, not the threadpool.

        Raises:
            LabelerError: empty, non-text or too long input.
            LabelerBusy: `max_waiting` requests are already waiting.
        """
        return await self._on_own_thread(partial(self.label, text, report_id, findings=findings))

    async def label_many_async(
        self, items: Sequence[tuple[str, str]], *, findings: bool = False
    ) -> list[ReportLabels]:
        """`label_many` for the event loop (see `label_async`)."""
        return await self._on_own_thread(partial(self.label_many, items, findings=findings))

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


@lru_cache(maxsize=2)
def _cached(config: LabelerConfig) -> ReportLabeler:
    from labeler.pipeline import build_nlp

    # built now, at start-up, so that the first request does not wait seconds for it
    return ReportLabeler(config, nlp=build_nlp(config))


def load_report_labeler(config: LabelerConfig | None = None) -> ReportLabeler:
    """The labeler for `config` (default `LabelerConfig()`), built once per process.

    Building the spaCy pipeline takes seconds; app instances in one process share it.
    """
    from labeler.config import LabelerConfig

    return _cached(config if config is not None else LabelerConfig())
