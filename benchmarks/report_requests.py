"""The service's report labelling, one request at a time: thinc's BLIS against NumPy's BLAS.

`POST /reports/label` labels one report per request with the service's labeler
(`app.report_labeler`, a `PipelineLabeler`): its sentences are parsed as a batch of their
own, smaller matrices than `cxr label`'s batches of 64 reports. This labels the first N
OpenI dev reports (`FINDINGS: ...\\nIMPRESSION: ...`, all distinct) one call each, with a
labeler built on each BLAS (`LabelerConfig.blas`), and prints the CPU time of each (best
of `--repeat`, passes interleaved, each from an empty sentence cache) and whether every
result is the same. OpenBLAS runs one thread, as under `cxr serve` (`app.blas`).

Usage:
    python benchmarks/report_requests.py [--n 3000] [--repeat 3] [--findings]

The report text stays in ../shared/data (CXR_SHARED_DATA); exits 0 with a message when it
is absent. Not a timed test: report the load average with the figures.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as `cxr serve` runs; before numpy loads

from bench_kit import shared_data  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=3000, help="reports (default 3000)")
    parser.add_argument("--repeat", type=int, default=3, help="passes per BLAS; best is kept")
    parser.add_argument("--findings", action="store_true", help="read every finding too")
    args = parser.parse_args(argv)
    source = shared_data() / "openi" / "indiana_reports_dev.csv"
    if not source.is_file():
        sys.stderr.write(f"OpenI data not found at {source}; skipping (set CXR_SHARED_DATA)\n")
        return 0
    rows = list(csv.DictReader(source.open(encoding="utf-8")))[: args.n]
    reports = [f"FINDINGS: {r['findings']}\nIMPRESSION: {r['impression']}" for r in rows]

    from labeler.spacy_loading import import_spacy_without_torch

    import_spacy_without_torch()
    from app.report_labeler import ReportLabeler
    from labeler import pipeline
    from labeler.config import LabelerConfig

    labelers = {
        blas: ReportLabeler(config, nlp=pipeline.build_nlp(config))
        for blas in ("blis", "numpy")
        for config in (LabelerConfig(blas=blas),)
    }
    best = dict.fromkeys(labelers, float("inf"))
    results: dict[str, list[dict[str, object]]] = {}
    for _ in range(args.repeat):
        for blas, labeler in labelers.items():  # interleaved: both see the same load
            pipeline._ENGINES.clear()  # an empty sentence cache, as a fresh service has
            start = time.process_time()
            out = [
                labeler.label(text, report_id=str(i), findings=args.findings)
                for i, text in enumerate(reports)
            ]
            best[blas] = min(best[blas], time.process_time() - start)
            results[blas] = [r.to_dict() for r in out]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    sys.stdout.write(
        f"{len(reports)} reports, one request each{' with findings' if args.findings else ''};"
        f" load average {load:.2f}\n"
    )
    for blas, cpu in best.items():
        sys.stdout.write(
            f"blas={blas}: {cpu:.2f} s CPU, {len(reports) / cpu:.0f} reports/s of CPU\n"
        )
    same = results["blis"] == results["numpy"]
    sys.stdout.write(f"results identical: {'yes' if same else 'NO'}\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
