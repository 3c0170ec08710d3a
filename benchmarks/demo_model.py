"""Build the demo model from its recipe, score it against the quality bar, and (with
--install) ship it: the weights beside the recipe in models/configs/.

Trains through the public API exactly as a fallback first start would
(`models.demo.build_demo_model`: `models.phantoms.write_phantom_dataset` + `models.train.train`),
stores the weights as float16, then prints the CPU time, the file size, the per-label
validation AUC from the model card, and on fresh phantoms (another seed, 320 px) the
per-label AUC and the IoBB-0.5 hit rate of the boxes the service shows by default. Exit
status 1 when the bar is missed (the file is then not installed).

    python benchmarks/demo_model.py                    # build and score (about 8 min wall)
    python benchmarks/demo_model.py --install          # ... and replace the shipped file
    python benchmarks/demo_model.py --model models/configs/demo_phantoms.v3.pt   # score only
"""

from __future__ import annotations

import argparse
import logging
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench_kit import say

REPO = Path(__file__).resolve().parents[1]


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--model", type=Path, help="score this checkpoint; build nothing")
    parser.add_argument("--install", action="store_true", help="replace the shipped file")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from app import demo

    with tempfile.TemporaryDirectory() as tmp:
        path = args.model
        if path is None:
            path = Path(tmp) / f"{demo.DEMO_RECIPE}.pt"
            wall, cpu = time.perf_counter(), _cpu_seconds()
            demo.build_demo_model(path, half=True)
            say(
                f"built {demo.DEMO_RECIPE} in {time.perf_counter() - wall:.0f} s wall, "
                f"{_cpu_seconds() - cpu:.0f} s CPU (user + sys)"
            )
        say(f"file: {path.stat().st_size / 2**20:.1f} MiB")
        quality = demo.score_demo_model(path)
        say("label           validation AUC   fresh AUC   fresh IoBB-0.5 hits")
        for label, fresh in quality.fresh_auc.items():
            val = quality.validation_auc.get(label, float("nan"))
            hits = f"{quality.hits[label]}/{quality.lesions[label]}"
            say(f"{label:<15} {val:>14.3f} {fresh:>11.3f}   {hits}")
        say(f"IoBB-0.5 hit rate, all lesions: {quality.hit_rate:.2f}")
        missed = quality.shortfalls()
        for line in missed:
            say(f"MISSED: {line}")
        if missed:
            return 1
        say("the quality bar is met")
        if args.install and args.model is None:
            target = demo.shipped_model_file()
            shutil.copyfile(path, target)
            say(f"installed: {target.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
