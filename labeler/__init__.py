"""Chest X-ray report labeler: ChestX-ray14, CheXpert or any label set's labels from reports.

`label_report` is imported lazily so that `import labeler.schema` (used by
`models` for the label vocabulary) does not pull in spaCy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from labeler.errors import LabelerError
from labeler.schema import ReportLabels

if TYPE_CHECKING:
    from labeler.pipeline import label_report

__all__ = ["LabelerError", "ReportLabels", "label_report"]


def __getattr__(name: str) -> Any:
    if name == "label_report":
        from labeler.pipeline import label_report

        return label_report
    raise AttributeError(f"module 'labeler' has no attribute {name!r}")
