"""Training-set images per second on the process that writes the set: encoding the PNGs
there (one machine, and the Ray driver before its workers encoded them) against writing
PNGs encoded elsewhere (`batch.training_set.encode_png` on a Ray worker: the driver only
names and writes them).

Reads the first N NIH sample PNGs (1024 px grey) once, then alternates the two ways of
`DatasetWriter.add_many` over them in chunks of 16 (as the Ray driver writes a block), each
into a fresh folder; prints images per second of the writing process (median of
`--repeat`), and the workers' encoding cost per image. Exits 0 with a message when the
shared data is absent (CXR_SHARED_DATA).

    python benchmarks/dataset_writes.py --images 64 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench_kit import say


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--size", type=int, default=1024, help="the set's PNG side")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    default = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
    nih = Path(os.environ.get("CXR_SHARED_DATA", default)).resolve() / "nih" / "images"
    pngs = sorted(nih.glob("*.png"))[: args.images] if nih.is_dir() else []
    if len(pngs) < args.images:
        say(f"dataset_writes: {len(pngs)} NIH images found, {args.images} asked; skipped")
        return 0
    import cv2

    from batch.training_set import DatasetImage, DatasetWriter, encode_png

    labels = {"Effusion": "positive", "Mass": "negative"}
    images = [
        DatasetImage(cv2.imread(str(p), cv2.IMREAD_GRAYSCALE), labels, f"patient-{i % 7}", "PA")
        for i, p in enumerate(pngs)
    ]
    began = time.perf_counter()
    encoded = [replace(i, pixels=encode_png(i.pixels, args.size)) for i in images]
    encode_ms = (time.perf_counter() - began) / len(images) * 1000
    tmp = Path(tempfile.mkdtemp(prefix="dataset-writes-"))
    rates: dict[str, list[float]] = {"encoded on the writer": [], "encoded on the workers": []}
    try:
        for r in range(args.repeat):
            for name, given in zip(rates, (images, encoded), strict=True):
                writer = DatasetWriter(tmp / f"{r}-{len(rates[name])}-{name[-7:]}",
                                       size=args.size, key=b"k" * 32)  # fmt: skip
                began = time.perf_counter()
                for start in range(0, len(given), 16):
                    writer.add_many(given[start : start + 16])
                writer.close()
                rates[name].append(len(given) / (time.perf_counter() - began))
    finally:
        shutil.rmtree(tmp)
    say(f"{len(images)} NIH PNGs at {args.size} px, chunks of 16, median of {args.repeat}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")  # fmt: skip
    for name, found in rates.items():
        say(f"  {name:<24} {statistics.median(found):7.0f} images/s of the writing process")
    say(f"  encode_png on a worker: {encode_ms:.1f} ms of one core per image")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
