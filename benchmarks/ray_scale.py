"""Reports/s and files/s on a local Ray with 1 and 2 CPUs against the single-process path.

Reports: the first N OpenI reports (findings + impression), labelled by one in-process
`PipelineLabeler` and by `batch.cluster.label_reports_on_ray`. Files: the NIH sample PNGs
(decoded and predicted by a demo checkpoint at 128 px), through `batch.job.build_job` +
`engine.run` in this process and through `batch.cluster.run_on_ray`. Everything runs in
one process, one configuration after the other, on the same machine; Ray is restarted
for each CPU count, and its start-up is timed apart from the work (`start`). The
overhead per item is (Ray wall time x CPUs - single-process time) / items.

Usage:
    python benchmarks/ray_scale.py [--reports 2000] [--files 151] [--cpus 1 2]

Not a timed test: the figures depend on the machine and its load (report the load
average). Exits 0 with a message when the shared data is absent (CXR_SHARED_DATA).
"""

from __future__ import annotations

import argparse
import collections
import csv
import os
import sys
import tempfile
import time
from pathlib import Path


def _data() -> Path | None:
    default = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    path = Path(os.environ.get("CXR_SHARED_DATA", default)).resolve()
    ok = (path / "openi" / "indiana_reports_dev.csv").is_file() and (path / "nih").is_dir()
    return path if ok else None


def _reports(data: Path, n: int) -> list[tuple[str, str]]:
    out = []
    with (data / "openi" / "indiana_reports_dev.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            text = f"FINDINGS: {row['findings']}\nIMPRESSION: {row['impression']}"
            out.append((row["uid"], text))
            if len(out) == n:
                break
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=2000)
    parser.add_argument("--files", type=int, default=151)
    parser.add_argument("--cpus", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    data = _data()
    if data is None:
        sys.stdout.write("ray_scale: shared data not found (set CXR_SHARED_DATA); skipped\n")
        return 0
    import ray

    from batch.cluster import label_reports_on_ray, run_on_ray
    from batch.engine import plan, run
    from batch.job import FolderInput, JobSpec, build_job
    from batch.labeling import PipelineLabeler
    from models.checkpoint import build_demo_checkpoint

    reports = _reports(data, args.reports)
    images = sorted((data / "nih" / "images").glob("*.png"))[: args.files]
    tmp = Path(tempfile.mkdtemp(prefix="ray-scale-"))
    export = tmp / "export"
    export.mkdir()
    for image in images:
        (export / image.name).write_bytes(image.read_bytes())  # a folder source skips links
    model = build_demo_checkpoint(tmp / "demo.pt", image_size=128)
    spec = JobSpec(FolderInput(export))
    rows: list[tuple[str, float, float, float]] = []  # path, start s, reports/s, files/s

    labeler = PipelineLabeler()
    began = time.perf_counter()
    for start in range(0, len(reports), 64):
        labeler.label_many(reports[start : start + 64])
    single_reports = time.perf_counter() - began
    from models.predict import load_predictor

    job = build_job(spec, labeler=labeler, predictor=load_predictor(model, device="cpu"))
    items = plan(list(job.source.scan()), [], job.processor)
    kinds = collections.Counter(i.kind for i in items)
    began = time.perf_counter()
    run(items, job.processor, [], chunk_size=8)
    single_files = time.perf_counter() - began
    rows.append(("one process", 0.0, len(reports) / single_reports, len(items) / single_files))

    for cpus in args.cpus:
        began = time.perf_counter()
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
        started = time.perf_counter() - began
        from labeler.config import LabelerConfig

        began = time.perf_counter()
        done = sum(1 for _ in label_reports_on_ray(reports, config=LabelerConfig()))
        ray_reports = time.perf_counter() - began
        began = time.perf_counter()
        files = sum(len(b) for b in run_on_ray(spec, items, [], model=model, chunk_size=8))
        ray_files = time.perf_counter() - began
        ray.shutdown()
        assert done == len(reports) and files == len(items)
        rows.append((f"Ray, {cpus} CPU", started, done / ray_reports, files / ray_files))
        overhead_r = (ray_reports * cpus - single_reports) / len(reports) * 1000
        overhead_f = (ray_files * cpus - single_files) / len(items) * 1000
        rows[-1] = (f"{rows[-1][0]} ({overhead_r:+.1f} / {overhead_f:+.0f} ms CPU per "
                    "report / file)", *rows[-1][1:])  # fmt: skip

    load = os.getloadavg()[0]
    sys.stdout.write(
        f"{len(reports)} OpenI reports, {len(items)} NIH PNGs {dict(kinds)} (demo model, 128 px); "
        f"load average {load:.1f}, {os.cpu_count()} CPUs\n"
    )
    sys.stdout.write(f"{'path':<62} {'start s':>8} {'reports/s':>10} {'files/s':>8}\n")
    for name, start_s, rps, fps in rows:
        sys.stdout.write(f"{name:<62} {start_s:>8.1f} {rps:>10.0f} {fps:>8.1f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
