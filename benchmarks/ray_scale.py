"""Start-up and marginal cost per report and per image: a local Ray with N CPUs against one
process with N workers, in the same run.

Each path runs two sizes of distinct inputs (the first SMALL and the first LARGE OpenI
reports; the first SMALL and LARGE NIH sample PNGs, predicted by a demo checkpoint at 128
px), each from a cold start (workers and models loaded inside the timing). The marginal
cost per item is the slope of the time after the first result, (LARGE's time after its
first result - SMALL's) / (LARGE - SMALL): the start-up and the first block cancel out
within each run (see `_fit`); the start-up is the intercept, time(SMALL) - SMALL x
marginal. Ray's own start (`ray.init` of a local Ray, timed apart) is added to the Ray
path's start-up. Each figure is the median of `--repeat` runs, the paths interleaved.
The marginal CPU per item counts every process of the path (`_tree_cpu_s`: the driver,
the workers, Ray's own servers; `_TreeCpu`), so that a busy shared machine, which moves the clock
figures by half, barely moves it.

- one process, reports: `labeler.parallel.label_reports_parallel(workers=N)`, what
  `cxr label --workers N` runs.
- one process, images: `batch.job.build_job` with `read_workers=N` + `engine.run`, what
  `cxr batch --workers N` runs (the model in this process, decoding in N workers).
- Ray, reports: `batch.cluster.label_reports_on_ray` (one labeler actor per CPU, blocks
  of 256 reports).
- Ray, images: `batch.cluster.run_on_ray` (one file worker per CPU: decode, label and
  predict in the actor, blocks of 16 images).

Usage:
    python benchmarks/ray_scale.py [--reports 600 2400] [--images 48 144] [--cpus 2] [--repeat 3]
        [--units report image]

Not a timed test: the figures depend on the machine and its load (the load average is
printed; a shared machine inflates everything, Ray's many processes most). Exits 0 with a
message when the shared data is absent (CXR_SHARED_DATA).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
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
    if len(out) < n:
        raise SystemExit(f"ray_scale: only {len(out)} OpenI reports, asked for {n}")
    return out


def _timed(run: Callable[[int], list[float]], sizes: tuple[int, int]) -> tuple[Run, Run]:
    """Each size's run: `run(n)` returns the clock time at which each of its n results
    arrived."""
    out = []
    for n in sizes:
        cpu = CPU.seconds()
        began = time.perf_counter()
        arrived = run(n)
        total = time.perf_counter() - began
        first = arrived[0] - began if arrived else 0.0
        out.append(Run(n, first, total, CPU.seconds() - cpu))
        if len(arrived) != n:
            raise SystemExit(f"ray_scale: {len(arrived)} results for {n} inputs")
    return out[0], out[1]


class _TreeCpu:
    """CPU seconds of this process and all its descendants (Linux /proc), sampled every
    0.2 s by a thread, a process that ended counted with its last sample: the driver, the
    one-process path's workers, and a local Ray's servers and workers (started under this
    process by `ray.init`; Ray ends idle workers, and reaps them unaccounted). Unlike the
    clock, it barely moves with what other users of the machine run."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, int], int] = {}  # (pid, start time) -> CPU ticks
        self._lock = threading.Lock()
        self._tick = os.sysconf("SC_CLK_TCK")
        threading.Thread(target=self._sample_forever, daemon=True).start()

    def seconds(self) -> float:
        """CPU seconds so far."""
        self._sample()
        with self._lock:
            return sum(self._seen.values()) / self._tick

    def _sample_forever(self) -> None:
        while True:
            self._sample()
            time.sleep(0.2)

    def _sample(self) -> None:
        parents: dict[int, int] = {}
        ticks: dict[int, tuple[int, int]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:  # gone meanwhile
                continue
            fields = text[text.rindex(")") + 2 :].split()  # after "pid (name) "
            pid = int(stat.parent.name)
            parents[pid] = int(fields[1])
            ticks[pid] = (int(fields[19]), int(fields[11]) + int(fields[12]))  # start, u+s
        tree = {os.getpid()}
        while more := {pid for pid, parent in parents.items() if parent in tree} - tree:
            tree |= more
        with self._lock:
            for pid in tree:
                if pid in ticks:
                    start, used = ticks[pid]
                    key = (pid, start)
                    self._seen[key] = max(self._seen.get(key, 0), used)


@dataclass(frozen=True)
class Run:
    """One timed run: items, seconds to the first result and to the end, CPU seconds."""

    n: int
    first: float
    total: float
    cpu: float


def _fit(small: Run, large: Run) -> tuple[float, float, float]:
    """(start-up s, marginal s per item, marginal CPU s per item) from two sizes' runs.

    The marginal cost is the slope of the time after the first result, (large.total -
    large.first - small.total + small.first) / (large.n - small.n): both runs reach their
    first result after the same start-up and the same first block, so the start-up's
    variation from run to run (actors start in 2 to 6 s on a loaded 2-core machine, as
    much as the labelling of 2,000 reports) cancels out within each run instead of landing
    in the slope. The start-up is the intercept, small.total - small.n x marginal. The
    marginal CPU is (large.cpu - small.cpu) / (large.n - small.n), all processes counted.
    """
    marginal = (large.total - large.first - small.total + small.first) / (large.n - small.n)
    cpu = (large.cpu - small.cpu) / (large.n - small.n)
    return small.total - small.n * marginal, marginal, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, nargs=2, default=[600, 2400])
    parser.add_argument("--images", type=int, nargs=2, default=[48, 144])
    parser.add_argument("--cpus", type=int, default=2, help="Ray CPUs = one-process workers")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each; the median counts")
    parser.add_argument("--units", nargs="+", choices=["report", "image"],
                        default=["report", "image"], help="what to measure")  # fmt: skip
    args = parser.parse_args()
    data = _data()
    if data is None:
        sys.stdout.write("ray_scale: shared data not found (set CXR_SHARED_DATA); skipped\n")
        return 0
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    global CPU
    CPU = _TreeCpu()
    import ray

    from batch.cluster import connect, disconnect, label_reports_on_ray, run_on_ray
    from batch.engine import plan, run
    from batch.job import FolderInput, JobSpec, build_job
    from batch.labeling import PipelineLabeler
    from labeler.config import LabelerConfig
    from labeler.parallel import label_reports_parallel
    from models.checkpoint import build_demo_checkpoint
    from models.predict import load_predictor

    cpus = args.cpus
    report_sizes = (args.reports[0], args.reports[1])
    image_sizes = (args.images[0], args.images[1])
    reports = _reports(data, max(report_sizes))
    pngs = sorted((data / "nih" / "images").glob("*.png"))
    if len(pngs) < max(image_sizes):
        raise SystemExit(f"ray_scale: only {len(pngs)} NIH images, asked for {max(image_sizes)}")
    tmp = Path(tempfile.mkdtemp(prefix="ray-scale-"))
    model = build_demo_checkpoint(tmp / "demo.pt", image_size=128)
    exports = {}
    for n in image_sizes:
        export = tmp / f"export-{n}"
        export.mkdir()
        for png in pngs[:n]:
            (export / png.name).write_bytes(png.read_bytes())  # a folder source skips links
        exports[n] = export

    def one_reports(n: int) -> list[float]:
        found = label_reports_parallel(
            reports[:n], config=LabelerConfig(), workers=cpus, batch_size=64
        )
        return [time.perf_counter() for _ in found]

    def one_images(n: int) -> list[float]:
        spec = JobSpec(FolderInput(exports[n]), read_workers=cpus)
        predictor = load_predictor(model, device="cpu")
        job = build_job(spec, labeler=PipelineLabeler(), predictor=predictor)
        items = plan(list(job.source.scan()), [], job.processor)
        clock = _Clock()
        run(items, job.processor, [clock], chunk_size=8)
        return clock.arrived

    def ray_reports(n: int) -> list[float]:
        found = label_reports_on_ray(reports[:n], config=LabelerConfig(), actors=cpus)
        return [time.perf_counter() for _ in found]

    def ray_images(n: int) -> list[float]:
        spec = JobSpec(FolderInput(exports[n]))
        job = build_job(spec, labeler=PipelineLabeler(), predictor=None)
        items = plan(list(job.source.scan()), [], job.processor)
        blocks = run_on_ray(spec, items, [], model=model, chunk_size=8, actors=cpus)
        return [now for block in blocks for now in [time.perf_counter()] * len(block)]

    # Ray is started once (timed apart); then each measurement runs `--repeat` times, the
    # two paths interleaved so that both meet the same load; the median run counts.
    began = time.perf_counter()
    connect(None, num_cpus=cpus, object_store_bytes=500 * 2**20)
    ray_start = time.perf_counter() - began
    plan_runs = [
        (name, unit, fn, sizes)
        for name, unit, fn, sizes in (
            ("one process", "report", one_reports, report_sizes),
            ("local Ray", "report", ray_reports, report_sizes),
            ("one process", "image", one_images, image_sizes),
            ("local Ray", "image", ray_images, image_sizes),
        )
        if unit in args.units
    ]
    fits: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    try:
        for _, _, fn, sizes in plan_runs:  # imports and caches paid once, before any timing
            fn(sizes[0])
        idle = CPU.seconds()
        time.sleep(5.0)
        idle = (CPU.seconds() - idle) / 5.0  # a local Ray's own CPU while it waits
        loads = [os.getloadavg()[0]]
        for _ in range(args.repeat):
            for name, unit, fn, sizes in plan_runs:
                small, large = _timed(fn, sizes)
                fits.setdefault((name, unit), []).append(_fit(small, large))
            loads.append(os.getloadavg()[0])
    finally:
        disconnect()
        shutil.rmtree(tmp, ignore_errors=True)  # the copied PNGs: 130 MB per run
    assert not ray.is_initialized()
    rows: list[tuple[str, str, float, float, float, list[float]]] = []
    for name, unit, _, _ in plan_runs:
        found = fits[name, unit]
        start = statistics.median(f[0] for f in found)
        marginal = statistics.median(f[1] for f in found)
        cpu = statistics.median(f[2] for f in found)
        if name == "local Ray":
            start += ray_start
        rows.append((name, unit, start, marginal, cpu, [f[1] for f in found]))

    out = sys.stdout
    out.write(
        f"{cpus} CPUs each: one process with {cpus} workers vs a local Ray with {cpus} CPUs; "
        f"reports {report_sizes}, images {image_sizes} (NIH PNGs, demo model 128 px); "
        f"ray.init {ray_start:.1f} s (in Ray's start-up), idle Ray {idle * 100:.0f}% of a "
        f"CPU; load average {' / '.join(f'{x:.1f}' for x in loads)} (before, after each "
        f"round) on {os.cpu_count()} CPUs; median of {args.repeat} runs\n"
    )
    out.write(f"{'path':<12} {'per':<7} {'start-up s':>10} {'marginal ms':>12} "
              f"{'CPU ms':>7}  marginal of each run, ms\n")  # fmt: skip
    for name, unit, start, marginal, cpu, each in rows:
        runs = " / ".join(f"{x * 1000:.2f}" for x in each)
        out.write(f"{name:<12} {unit:<7} {start:>10.1f} {marginal * 1000:>12.2f} "
                  f"{cpu * 1000:>7.2f}  {runs}\n")  # fmt: skip
    for unit in args.units:
        here = next(r for r in rows if r[0] == "one process" and r[1] == unit)
        there = next(r for r in rows if r[0] == "local Ray" and r[1] == unit)
        out.write(f"marginal cost per {unit}, Ray / one process: {there[3] / here[3]:.2f}x "
                  f"(clock), {there[4] / here[4]:.2f}x (CPU)\n")  # fmt: skip
    return 0


CPU: _TreeCpu


class _Clock:
    """A sink that notes when each outcome arrived."""

    def __init__(self) -> None:
        self.arrived: list[float] = []

    def begin(self, items: object) -> None:
        pass

    def write(self, outcomes: list[object]) -> None:
        self.arrived += [time.perf_counter()] * len(outcomes)

    def close(self) -> None:
        pass


if __name__ == "__main__":
    raise SystemExit(main())
