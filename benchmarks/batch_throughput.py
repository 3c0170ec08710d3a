"""`cxr batch` speed: files/s of the whole command over a generated export, by decoding workers.

A hospital labels a PACS export with `cxr batch` (reports, resume, training set), not
`cxr predict`. This runs the real command, start to exit, over --n generated 2500x2048
12-bit DICOMs (distinct pixels and UIDs: no duplicates), with each --workers value
(0: images read one at a time in the run's own thread, the behaviour before the read-ahead;
N: N processes read ahead of the model, `batch.read_ahead`), interleaved over --repeat
rounds. With --base DIR it also runs the code in DIR (a `git worktree` of an older
commit), which reads in its own thread whatever it is given.

The model is a random-weight network written here: the ResNet-50 `cxr train` writes
(`--arch resnet50`, LayerCAM boxes for 2 positive labels an image), a ResNet-18, or none
(images are read, fingerprinted and reported without prediction). Every run's JSON lines
must agree with the first one's: the same files, states, fingerprints and boxes, and
probabilities within 1e-5 (oneDNN's convolutions may differ in the last bits by batch
composition); the script says so or stops.

    python benchmarks/batch_throughput.py --n 64 --arch none --workers 0,2
    python benchmarks/batch_throughput.py --n 32 --arch resnet18 --image-size 224 --workers 0,2
    python benchmarks/batch_throughput.py --n 64 --arch none --workers 2 --dataset --base ../base
    python benchmarks/batch_throughput.py --n 512 --arch resnet50 --image-size 1024 \\
        --device cuda --chunk-size 16 --workers 0,16 --base ../base     # a GPU host
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_kit import say

sys.path.insert(0, str(Path(__file__).resolve().parent))

from predict import synthetic_dicom, write_checkpoint  # noqa: E402 - a sibling script

ROOT = Path(__file__).resolve().parents[1]


def _checkpoint(work: Path, arch: str, image_size: int) -> Path | None:
    if arch == "none":
        return None
    if arch == "resnet50":
        return write_checkpoint(work / "model.pt", image_size, 2, "layercam", 16)
    from models.checkpoint import build_demo_checkpoint

    return build_demo_checkpoint(work / "model.pt", image_size=image_size)


def write_reports(path: Path, n: int) -> Path:
    """A reports CSV naming each generated file's accession number (text written here)."""
    findings = ["Small left pleural effusion.", "No acute cardiopulmonary process.",
                "Mild cardiomegaly. No pneumothorax."]  # fmt: skip
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["AccessionNumber", "Report"])
        writer.writerows([f"BENCH{i}", findings[i % len(findings)]] for i in range(n))
    return path


def batch_run(
    export: Path, out: Path, model: Path | None, *, workers: int | None, code: Path,
    device: str, chunk: int, dataset: tuple[Path, Path] | None = None,
) -> tuple[float, float]:  # fmt: skip
    """(wall seconds, CPU seconds) of one `cxr batch`; the CPU seconds are the process's
    and its children's, which leaves out decoding workers (children of the fork server)."""
    cmd = [sys.executable, "-m", "app.cli", "batch", str(export), "-o", str(out),
           "--chunk-size", str(chunk)]  # fmt: skip
    if model is not None:
        cmd += ["--model", str(model), "--device", device]
    if workers is not None:
        cmd += ["--workers", str(workers)]
    if dataset is not None:  # (reports CSV, training set folder)
        shutil.rmtree(dataset[1], ignore_errors=True)
        cmd += ["--reports", str(dataset[0]), "--dataset", str(dataset[1])]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CXR_")}
    env["PYTHONPATH"] = str(code)
    before = os.times()
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, cwd=code)
    seconds = time.perf_counter() - t0
    after = os.times()
    if done.returncode != 0:
        raise RuntimeError(f"cxr batch failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.children_user + after.children_system) - (
        before.children_user + before.children_system
    )
    return seconds, cpu


def _lines(out: Path) -> dict[str, dict[str, Any]]:
    return {line["path"]: line for line in map(json.loads, out.read_text().splitlines())}


def check_same(
    first: dict[str, dict[str, Any]], other: dict[str, dict[str, Any]], what: str
) -> None:
    """Stop unless `other`'s lines say what `first`'s say (probabilities within 1e-5)."""
    if sorted(first) != sorted(other):
        raise SystemExit(f"{what}: other files than the first run")
    for key, a in first.items():
        b = other[key]
        for field in ("state", "pixel_fingerprint", "rows", "columns"):
            if a.get(field) != b.get(field):
                raise SystemExit(f"{what}: {key} {field} {a.get(field)!r} != {b.get(field)!r}")
        pa, pb = a.get("prediction"), b.get("prediction")
        if (pa is None) != (pb is None):
            raise SystemExit(f"{what}: {key} predicted in one run only")
        if pa is None or pb is None:
            continue
        gap = max(abs(pa["probabilities"][k] - pb["probabilities"][k]) for k in pa["probabilities"])
        if gap > 1e-5 or pa["boxes"] != pb["boxes"] or pa["positive"] != pb["positive"]:
            raise SystemExit(f"{what}: {key} predicted otherwise (probabilities within {gap:g})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=64, help="generated DICOMs (default 64)")
    parser.add_argument("--arch", choices=["resnet50", "resnet18", "none"], default="resnet18")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--chunk-size", type=int, default=8, help="as cxr batch (8)")
    parser.add_argument("--workers", default="0,2", help="comma-separated (default 0,2)")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (median)")
    parser.add_argument("--base", type=Path, help="an older checkout, run beside")
    parser.add_argument(
        "--dataset",
        action="store_true",
        help="also write a training set (--reports with a report per file, --dataset): "
        "a 1024 px PNG per image",
    )
    args = parser.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    with tempfile.TemporaryDirectory(prefix="cxr-batch-bench-") as tmp:
        work = Path(tmp)
        export = work / "export"
        export.mkdir()
        t0 = time.perf_counter()
        for i in range(args.n):
            synthetic_dicom(export / f"{i:05d}.dcm", seed=i)
        model = _checkpoint(work, args.arch, args.image_size)
        dataset = (
            (write_reports(work / "reports.csv", args.n), work / "set") if args.dataset else None
        )
        say(
            ("with a training set; " if dataset else "")
            + f"{args.n} generated 2500x2048 12-bit DICOMs ({time.perf_counter() - t0:.1f} s to "
            f"write); model: {args.arch}"
            + (f" at {args.image_size} px on {args.device}" if model else "")
            + f"; chunks of {args.chunk_size}; {os.cpu_count()} cores"
        )
        runs: list[tuple[str, Path, int | None]] = [(f"--workers {w}", ROOT, w) for w in workers]
        if args.base is not None:
            runs.append((f"base ({args.base})", args.base.resolve(), None))
        times: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in runs}
        reference: dict[str, dict[str, Any]] | None = None
        for round_ in range(args.repeat):
            for name, code, w in runs:
                out = work / f"out-{len(times[name])}-{w}.jsonl"
                seconds, cpu = batch_run(export, out, model, workers=w, code=code,
                                         device=args.device, chunk=args.chunk_size,
                                         dataset=dataset)  # fmt: skip
                lines = _lines(out)
                if reference is None:
                    reference = lines
                else:
                    check_same(reference, lines, f"{name}, round {round_ + 1}")
                times[name].append((seconds, cpu))
                say(f"  round {round_ + 1} {name}: {seconds:.2f} s (CPU {cpu:.2f} s)")
        say(f"whole `cxr batch`, median of {args.repeat} (results agree across runs):")
        for name, got in times.items():
            wall = statistics.median(s for s, _ in got)
            cpu = statistics.median(c for _, c in got)
            say(f"  {name}: {wall:.2f} s, {args.n / wall:.1f} files/s (CPU {cpu:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
