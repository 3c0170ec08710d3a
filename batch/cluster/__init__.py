"""Batch jobs and report labeling on Ray: the same rows as one machine, on many.

    with ray_session(None):                       # a local Ray on 127.0.0.1; or "auto"
        for outcomes in run_on_ray(spec, items, recorded, model=path):
            ...                                   # the caller writes JSONL, Parquet, a set
        for labels in label_reports_on_ray(pairs, config=config):
            ...

One pool of long-lived actors per kind of work (`pool`), started once per run and reused
by every phase; work in blocks (hundreds of reports, tens of images per task); bounded
retries when a worker dies. `connection` joins or starts Ray, `report_labeling` labels reports,
`job_runner` runs a `cxr batch` job with its `workers`, and `copies` finds the copies of one image
read by different workers. See docs/cluster.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from batch.cluster.connection import connect, disconnect, ray_session

if TYPE_CHECKING:
    from batch.cluster.job_runner import ClusterReport, run_on_ray
    from batch.cluster.report_labeling import label_report_lines_on_ray, label_reports_on_ray

__all__ = [
    "ClusterReport",
    "connect",
    "disconnect",
    "label_report_lines_on_ray",
    "label_reports_on_ray",
    "ray_session",
    "run_on_ray",
]

# Imported when first asked for: a labeler actor (`report_labeling`) imports this package
# and must not import the image side (torch: seconds per actor) that `job_runner` needs.
_LAZY = {
    "ClusterReport": "batch.cluster.job_runner",
    "run_on_ray": "batch.cluster.job_runner",
    "label_reports_on_ray": "batch.cluster.report_labeling",
    "label_report_lines_on_ray": "batch.cluster.report_labeling",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'batch.cluster' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)
