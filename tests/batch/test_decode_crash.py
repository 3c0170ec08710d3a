"""A file that crashes the decoder's process fails alone when the processor decodes in a
`decode_pool` (as the Ray readers do): the next file is read by a fresh worker."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from service_fixtures import dx_bytes

from batch.interfaces import SourceItem
from batch.job import FolderInput, JobSpec, build_job
from batch.labeling import PipelineLabeler
from models.decode_pool import DecodePool

pytestmark = [pytest.mark.issue(21), pytest.mark.slow]


def _crash_on_crash_dcm(task: Any) -> Any:
    from models.image_pipeline import load_task

    if Path(task[0]).name == "crash.dcm":
        os._exit(139)  # as a segfaulting decoder would
    return load_task(task)


def test_processor_decode_pool_turns_a_crashing_file_into_its_failure(tmp_path: Path) -> None:
    for name in ("crash.dcm", "good.dcm"):
        (tmp_path / name).write_bytes(dx_bytes())
    job = build_job(JobSpec(FolderInput(tmp_path)), labeler=PipelineLabeler(), predictor=None)
    with DecodePool(_crash_on_crash_dcm, workers=1, on_error=lambda _t, e: e) as pool:
        job.processor.decode_pool = pool
        items = [SourceItem(n, "image") for n in ("crash.dcm", "good.dcm", "crash.dcm")]
        outcomes = job.processor.process(items)
    assert [o.state for o in outcomes] == ["failed", "done", "failed"]
    assert "WorkerCrashed" in str(outcomes[0].error), outcomes[0].error
