"""CPU per report of the driver of `cxr label --ray`, which bounds a cluster's reports/s:
receiving results and writing the JSON Lines itself, against writing the lines the actors
wrote (`batch.cluster.label_report_lines_on_ray`, what `cxr label --ray` runs for JSONL).

Labels the first N OpenI dev reports on a local Ray with 2 CPUs, each way `--repeat`
times, alternated; counts the driver process's CPU from the first block to the last (the
actors' start-up left out) and checks that both ways write the same text. Exits 0 with a
message when the shared data is absent (CXR_SHARED_DATA).

    PYTHONPATH=$PWD python benchmarks/ray_driver.py --reports 3000 --repeat 2

(PYTHONPATH reaches Ray's workers, which then import this tree, not the installed one.)
"""

from __future__ import annotations

import argparse
import io
import os
import time

from bench_kit import say
from ray_scale import _data, _reports


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    data = _data()
    if data is None:
        say("ray_driver: shared data not found (set CXR_SHARED_DATA); skipped")
        return 0
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from batch.cluster import connect, disconnect, label_report_lines_on_ray, label_reports_on_ray
    from labeler.config import LabelerConfig
    from labeler.files import write_jsonl

    reports = _reports(data, args.reports)
    config = LabelerConfig()

    def results_here(out: io.StringIO) -> float | None:
        began = None
        for result in label_reports_on_ray(reports, config=config):
            began = began if began is not None else time.process_time()
            write_jsonl(result, out)
        return began

    def lines_there(out: io.StringIO) -> float | None:
        began = None
        for block in label_report_lines_on_ray(reports, config=config):
            began = began if began is not None else time.process_time()
            out.write(block.lines)
        return began

    connect(None, num_cpus=2)
    found: dict[str, list[float]] = {"results, JSON written by the driver": [],
                                     "lines written by the actors": []}  # fmt: skip
    texts: dict[str, str] = {}
    try:
        for _ in range(args.repeat):
            for name, way in zip(found, (results_here, lines_there), strict=True):
                out = io.StringIO()
                began = way(out)
                if began is not None:
                    found[name].append((time.process_time() - began) / len(reports))
                texts[name] = out.getvalue()
    finally:
        disconnect()
    same = len(set(texts.values())) == 1
    load = os.getloadavg()[0]
    say(f"{len(reports)} OpenI reports, local Ray with 2 CPUs, {args.repeat} runs each; load "
        f"average {load:.1f} on {os.cpu_count()} CPUs; same text: {same}")  # fmt: skip
    for name, each in found.items():
        shown = " / ".join(f"{x * 1000:.3f}" for x in each)
        say(f"  {name:<36} driver CPU per report {min(each) * 1000:.3f} ms (runs: {shown})")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
