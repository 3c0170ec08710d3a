"""Training input throughput on CPU: the loader alone, old path against new (issue 19).

Per core: everything runs in this process on one thread (DataLoader with 0 workers, torch
and OpenCV single-threaded), so CPU time per image is what one loader worker spends. Cores
shared with other jobs slow the wall clock, not the CPU time: both are printed.

    old          ChestXrayDataset + TrainTransform: float decode (load_image), float fit,
                 affine, flip, gamma, contrast per image (what main trained with)
    new png      FittedDataset: integer decode + area resize to the input size -> uint8
    new prepared PreparedDataset: a row of a `cxr prepare` shard (memory-mapped, page cache warm)
    + augment    BatchAugment on the uint8 batch, run here on the CPU; in training it runs
                 on the GPU, so it is reported apart from the loader

Data: phantoms written as 1024 x 1024 8-bit PNGs, as ChestX-ray14's images, or with --data a
dataset folder or labels CSV as `cxr train` takes it (the first --n images).

    python benchmarks/input_pipeline.py                    # 512 and 1024 px, 32 images, 3 rounds
    python benchmarks/input_pipeline.py --data ../shared/data/nih --n 64   # real NIH PNGs
    python benchmarks/input_pipeline.py --sizes 1024 --n 64
    python benchmarks/input_pipeline.py --workers 2        # plus a 2-worker loader, wall clock

Targets: at 1024 px from PNG at least 4x the old per-core rate; from the prepared cache at
least 300 images/s per core.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_kit import say

REPO = Path(__file__).resolve().parents[1]


def _cpu_s() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # reaped loader workers
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(loader: Any, passes: int, augment: Any = None) -> tuple[float, float, int]:
    """(wall s, CPU s, images) over `passes` epochs of `loader`."""
    n = 0
    wall, cpu = time.perf_counter(), _cpu_s()
    for _ in range(passes):
        for x, _y, _i in loader:
            if augment is not None:
                x = augment(x)
            n += x.shape[0]
    return time.perf_counter() - wall, _cpu_s() - cpu, n


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--n", type=int, default=32, help="images (default 32)")
    parser.add_argument("--source-size", type=int, default=1024, help="PNG side (1024)")
    parser.add_argument("--passes", type=int, default=1, help="timed epochs per path and round")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds over all paths, interleaved (median shown)"
    )
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--workers", type=int, default=0, help="also time an N-worker loader")
    parser.add_argument("--work", help="folder for the phantoms and caches (default: temp)")
    parser.add_argument(
        "--data", help="a dataset folder or labels CSV instead of the phantoms (cxr train's --data)"
    )
    args = parser.parse_args()

    import cv2
    import numpy as np
    import torch

    from models.augment import BatchAugment
    from models.data import ChestXrayDataset, FittedDataset, build_loader, load_records
    from models.phantoms import write_phantom_dataset
    from models.prepared import PreparedDataset, prepare_images
    from models.transforms import TrainTransform

    torch.set_num_threads(1)
    cv2.setNumThreads(0)
    work = Path(args.work or tempfile.mkdtemp(prefix="cxr-input-"))
    if args.data:
        records = load_records(args.data)[: args.n]
        what = f"images of {args.data}"
    else:
        data = work / f"phantoms{args.source_size}"
        if not (data / "Data_Entry.csv").is_file():
            write_phantom_dataset(data, n=args.n, seed=0, size=args.source_size)
        records = load_records(data)[: args.n]
        what = f"phantom PNGs of {args.source_size} px"
    labels = ["Cardiomegaly", "Effusion", "Mass", "Nodule", "Pneumothorax"]
    load = os.getloadavg()
    say(
        f"{len(records)} {what}; batch {args.batch_size}; "
        f"one thread; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on "
        f"{os.cpu_count()} cores; torch {torch.__version__}, OpenCV {cv2.__version__}"
    )
    say(
        f"{'size':>5} {'path':<24} {'img/s wall':>10} {'CPU ms/img':>10} {'img/s/core':>10}"
        f"   (medians of {args.rounds} rounds)"
    )
    for size in args.sizes:
        generator = torch.Generator().manual_seed(0)
        augment = BatchAugment()

        def augmented(x: torch.Tensor, augment: Any = augment, g: Any = generator) -> Any:
            return augment(x, g)

        prep = work / f"prepared{size}"
        images = prepare_images(records, prep, size=size, shard_images=64, rebuild=True)
        paths: list[tuple[str, Any, Any]] = [
            ("old (load_image+TrainTransform)",
             ChestXrayDataset(records, labels, TrainTransform(size)), None),
            ("new png loader", FittedDataset(records, labels, size=size), None),
            ("new prepared loader", PreparedDataset(images, records, labels), None),
            ("new png + augment (CPU)", FittedDataset(records, labels, size=size), augmented),
            ("new prepared + augment", PreparedDataset(images, records, labels), augmented),
        ]  # fmt: skip
        loaders = [
            (name, build_loader(dataset, batch_size=args.batch_size, workers=0), aug)
            for name, dataset, aug in paths
        ]
        for _, loader, aug in loaders:
            _timed(loader, 1, aug)  # warm: page cache, lazy imports
        # Interleaved rounds: a burst of load from other jobs hits every path alike.
        cpu_ms: dict[str, list[float]] = {name: [] for name, _, _ in paths}
        wall_rate: dict[str, list[float]] = {name: [] for name, _, _ in paths}
        for _ in range(args.rounds):
            for name, loader, aug in loaders:
                wall, cpu, n = _timed(loader, args.passes, aug)
                cpu_ms[name].append(cpu / n * 1000)
                wall_rate[name].append(n / wall)
        rates: dict[str, float] = {}
        for name, _, _ in paths:
            ms = float(np.median(cpu_ms[name]))
            rates[name] = 1000 / ms
            say(
                f"{size:>5} {name[:24]:<24} {np.median(wall_rate[name]):>10.1f} {ms:>10.2f} "
                f"{1000 / ms:>10.1f}   (CPU ms {min(cpu_ms[name]):.2f}-{max(cpu_ms[name]):.2f})"
            )
        old = rates["old (load_image+TrainTransform)"]
        say(
            f"{size:>5} per core vs old: png loader {rates['new png loader'] / old:.1f}x, "
            f"prepared loader {rates['new prepared loader'] / old:.1f}x; with the augmentation "
            f"on this CPU {rates['new png + augment (CPU)'] / old:.1f}x and "
            f"{rates['new prepared + augment'] / old:.1f}x"
        )
        if args.workers:
            for name, dataset in (
                ("new png", FittedDataset(records, labels, size=size)),
                ("new prepared", PreparedDataset(images, records, labels)),
            ):
                loader = build_loader(dataset, batch_size=args.batch_size, workers=args.workers)
                _timed(loader, 1)  # starts the workers
                wall, _, n = _timed(loader, args.passes)
                del loader  # joins the workers
                say(f"{size:>5} {name} loader, {args.workers} workers: {n / wall:.1f} img/s wall")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
