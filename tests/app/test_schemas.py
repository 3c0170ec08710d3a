"""HTTP models that show a library dataclass or default keep it: one definition, one view."""

from __future__ import annotations

import dataclasses

from app.schemas import BoxRead
from models.boxes import Box


def test_box_read_has_the_fields_of_the_library_box() -> None:
    assert set(BoxRead.model_fields) == {f.name for f in dataclasses.fields(Box)}


def test_box_read_is_built_from_a_box() -> None:
    box = Box("Nodule", 10.0, 20.5, 30.0, 40.0, 0.8, heatmap_level=180)
    assert BoxRead.model_validate(box).model_dump() == box.to_dict()
    stored = {**box.to_dict(), "threshold": 60}
    del stored["heatmap_level"]  # as written before the level was named
    assert BoxRead.model_validate(Box.from_dict(stored)).heatmap_level == 60


def test_dicomweb_job_pulls_the_library_default_modalities() -> None:
    from app.schemas import DicomwebBatchSource
    from batch.job import DicomwebInput
    from batch.scan import DEFAULT_MODALITIES

    assert DicomwebBatchSource().modality == list(DEFAULT_MODALITIES)
    assert DicomwebInput(client=None).modalities == DEFAULT_MODALITIES  # type: ignore[arg-type]
