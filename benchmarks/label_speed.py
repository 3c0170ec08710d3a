"""Throughput of the whole `cxr label` process (start-up included), 1 and 2 workers.

Writes the first N OpenI reports (default 3,000) as `FINDINGS: ...\\nIMPRESSION: ...`
into a temporary CSV and times `python -m app.cli label` as a subprocess,
best of `--repeat` runs. `--cache-size 0` measures without the sentence cache
(every sentence with a cue is parsed), which is closer to the cost on text
that repeats itself less than OpenI does.

It also prints the CPU time of the process (user + system), which a busy
machine inflates far less than the wall clock. `--against DIR` runs another
checkout of the project (e.g. `git worktree add /tmp/base 62bc7c2`) on the
same input, interleaved with this one, for a before/after on the same load;
with `--findings` this checkout also reads every finding (`cxr label --findings`)
and the other runs plain `cxr label`, the issue's bar for the findings reader.

Usage:
    python benchmarks/label_speed.py [--n 3000] [--workers 1 2] [--repeat 3] [--cache-size 0]
                                     [--labels chexpert] [--findings] [--against DIR]

Not a timed test: the figures depend on the machine and on its load (the
development machine is shared; report the load average with the figures).
Exits 0 with a message when the OpenI data is absent (CXR_SHARED_DATA).
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
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
    parser.add_argument("--labels", help="label set, passed to cxr label")
    parser.add_argument(
        "--findings", action="store_true", help="this checkout reads every finding (--findings)"
    )
    parser.add_argument("--against", type=Path, help="another checkout to compare, same input")
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
        roots = [("this", Path(__file__).resolve().parents[1])]
        if args.against is not None:
            roots.append(("against", args.against.resolve()))
        for workers in args.workers:
            cmd = [sys.executable, "-m", "app.cli", "label", str(reports), "-q",
                   "-o", str(Path(tmp) / "out.jsonl"), "--workers", str(workers)]  # fmt: skip
            if args.cache_size is not None:
                cmd += ["--cache-size", str(args.cache_size)]
            if args.labels:
                cmd += ["--labels", args.labels]
            best = {name: (float("inf"), float("inf")) for name, _ in roots}
            for _ in range(args.repeat):
                for name, root in roots:  # interleaved: both see the same load
                    env = {**os.environ, "PYTHONPATH": str(root)}
                    extra = ["--findings"] if args.findings and name == "this" else []
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    t0 = time.perf_counter()
                    subprocess.run(cmd + extra, check=True, cwd=root, env=env)
                    wall = time.perf_counter() - t0
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                    best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
            for name, _ in roots:
                wall, cpu = best[name]
                rate = args.n / wall
                base = base or rate
                label = "" if len(roots) == 1 else f"{name} "
                sys.stdout.write(
                    f"{label}workers={workers}: {wall:.2f} s, {rate:.0f} reports/s "
                    f"(x{rate / base:.2f} vs the first setting); CPU {cpu:.2f} s\n"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
