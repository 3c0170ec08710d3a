"""Throughput of the whole `cxr label` process (start-up included), 1 and 2 workers.

Writes the first N OpenI reports (default 3,000) as `FINDINGS: ...\\nIMPRESSION: ...`
into a temporary CSV and times `python -m app.cli label` as a subprocess,
best of `--repeat` runs. `--cache-size 0` measures without the sentence cache
(every sentence with a cue is parsed), which is closer to the cost on text
that repeats itself less than OpenI does.

Usage:
    python benchmarks/label_speed.py [--n 3000] [--workers 1 2] [--repeat 3] [--cache-size 0]

Not a timed test: the figures depend on the machine and on its load (the
development machine is shared; report the load average with the figures).
Exits 0 with a message when the OpenI data is absent (CXR_SHARED_DATA).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def shared_data() -> Path:
    """../shared/data beside the repository, or $CXR_SHARED_DATA."""
    env = os.environ.get("CXR_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=3000, help="reports (default 3000)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=3, help="runs per setting; best is kept")
    parser.add_argument("--cache-size", type=int, help="passed to cxr label")
    args = parser.parse_args(argv)

    source = shared_data() / "openi" / "indiana_reports_dev.csv"
    if not source.is_file():
        sys.stderr.write(f"OpenI data not found at {source}; skipping (set CXR_SHARED_DATA)\n")
        return 0
    rows = list(csv.DictReader(source.open(encoding="utf-8")))
    with tempfile.TemporaryDirectory() as tmp:
        reports = Path(tmp) / "reports.csv"
        with reports.open("w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["id", "report"])
            for i in range(args.n):  # cycles when n > the 3,080 reports, with new ids
                r = rows[i % len(rows)]
                w.writerow([f"{i}", f"FINDINGS: {r['findings']}\nIMPRESSION: {r['impression']}"])
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        sys.stdout.write(f"{args.n} reports, {os.cpu_count()} CPUs, load average {load:.2f}\n")
        base = None
        for workers in args.workers:
            cmd = [sys.executable, "-m", "app.cli", "label", str(reports), "-q",
                   "-o", str(Path(tmp) / "out.jsonl"), "--workers", str(workers)]  # fmt: skip
            if args.cache_size is not None:
                cmd += ["--cache-size", str(args.cache_size)]
            best = float("inf")
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True)
                best = min(best, time.perf_counter() - t0)
            rate = args.n / best
            base = base or rate
            sys.stdout.write(
                f"workers={workers}: {best:.2f} s, {rate:.0f} reports/s "
                f"(x{rate / base:.2f} vs the first setting)\n"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
