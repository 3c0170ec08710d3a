"""Running a folder through the batch engine in-process, for the batch library's tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from batch.engine import plan, run
from batch.interfaces import Outcome, Sink
from batch.processor import BatchProcessor
from batch.sources import FolderSource


def run_folder(
    root: Path, labeler: Any, *, predictor: Any = None, **processor_args: Any
) -> dict[str, Outcome]:
    """Every outcome by key, as the sinks saw them (with the chunk's pixels, if kept)."""
    source = FolderSource(root)
    processor = BatchProcessor(source, labeler=labeler, predictor=predictor, **processor_args)
    outcomes: dict[str, Outcome] = {}
    images: dict[str, Any] = {}

    class Keep(Sink):
        def write(self, chunk: Sequence[Outcome]) -> None:
            outcomes.update({o.key: o for o in chunk})
            images.update({o.key: o.image for o in chunk})

    run(plan(source.scan(), [], processor), processor, [Keep()], chunk_size=8)
    for key, outcome in outcomes.items():
        outcome.image = images[key]  # the engine drops them after the sinks
    return outcomes
