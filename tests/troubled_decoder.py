"""A decoding worker's function for tests, in a module light enough to import in a worker:
a file named crash* ends its worker as a segfaulting decoder would, hang* never returns,
raise* raises; others go through the real `load_task`. Shared by the tests of the upload
workers, the batch read-ahead and the listener: pytest puts tests/ on sys.path."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import models.image_pipeline

REAL_LOAD_TASK = models.image_pipeline.load_task


def troubled_load(task: Any) -> Any:
    name = Path(task[0]).name
    if name.startswith("crash"):
        os._exit(139)
    if name.startswith("hang"):
        time.sleep(60)
    if name.startswith("raise"):
        raise RuntimeError("decoder state corrupted")
    return REAL_LOAD_TASK(task)


def troubled_instance_load(task: Any) -> Any:
    """As `troubled_load`, for a C-STORE inbox, whose files are named by SOP Instance UID:
    a UID ending in .666 crashes its worker, one ending in .777 never returns."""
    uid = Path(task[0]).stem
    if uid.endswith(".666"):
        os._exit(139)
    if uid.endswith(".777"):
        time.sleep(60)
    return REAL_LOAD_TASK(task)


def troubled_upload_load(task: Any) -> Any:
    """As `troubled_load`, for the service's uploads (`load_upload_task`), by the name the
    upload was sent under: crash* crashes its worker, hang* never returns."""
    from models.image_pipeline import load_upload_task

    name = task[1]
    if name.startswith("crash"):
        os._exit(139)
    if name.startswith("hang"):
        time.sleep(60)
    return load_upload_task(task)
