"""One BLAS for the labeler's parser at every entry point (`app.blas`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app import blas
from app.blas import labeler_blas, one_blas_thread
from app.cli import build_parser
from app.cli.report_commands import _labeler_config
from batch.cluster.job_runner import worker_job
from batch.job import FolderInput, JobSpec
from labeler.config import LabelerConfig

pytestmark = pytest.mark.issue(40)

_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({"OPENBLAS_NUM_THREADS": "1"}, "numpy"),
        ({"OMP_NUM_THREADS": "1"}, "numpy"),  # OpenBLAS falls back on it (as Ray sets it)
        ({"GOTO_NUM_THREADS": "1", "OMP_NUM_THREADS": "8"}, "numpy"),
        ({}, "blis"),  # a thread per core: more CPU than it saves
        ({"OPENBLAS_NUM_THREADS": "4"}, "blis"),
        ({"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "1"}, "blis"),  # OpenBLAS's first
        ({"OPENBLAS_NUM_THREADS": " ", "OMP_NUM_THREADS": "1"}, "numpy"),
    ],
)
def test_numpy_blas_only_with_one_openblas_thread(
    env: pytest.MonkeyPatch, variables: dict[str, str], expected: str
) -> None:
    for name, value in variables.items():
        env.setenv(name, value)
    assert labeler_blas() == expected


def test_numpy_built_on_another_blas_keeps_blis(env: pytest.MonkeyPatch) -> None:
    env.setenv("OPENBLAS_NUM_THREADS", "1")
    env.setattr(
        np, "show_config", lambda mode: {"Build Dependencies": {"blas": {"name": "accelerate"}}}
    )
    assert labeler_blas() == "blis"
    env.setattr(np, "show_config", lambda mode: {})  # a layout this code does not know
    assert labeler_blas() == "blis"


def test_one_blas_thread_leaves_the_callers_choice(env: pytest.MonkeyPatch) -> None:
    one_blas_thread()
    assert blas.os.environ["OPENBLAS_NUM_THREADS"] == "1"
    env.setenv("OPENBLAS_NUM_THREADS", "3")
    one_blas_thread()
    assert blas.os.environ["OPENBLAS_NUM_THREADS"] == "3"


def test_cxr_label_and_ray_workers_take_the_processs_choice(
    env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    args = build_parser().parse_args(["label", "reports.csv"])
    env.setenv("OPENBLAS_NUM_THREADS", "1")
    assert _labeler_config(args).blas == "numpy"
    env.setenv("OPENBLAS_NUM_THREADS", "3")
    assert _labeler_config(args).blas == "blis"
    # `cxr batch --ray`: the workers build their labeler from the driver's configuration
    config = LabelerConfig(blas="numpy")
    job = worker_job(JobSpec(FolderInput(tmp_path)), labeler=config)
    assert job.labeler is config
