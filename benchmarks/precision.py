"""float32 against bfloat16 inference: how fast, and how far apart the answers are.

Runs one checkpoint over the same images twice in this process, `--precision float32` and
`bfloat16` (`models.precision`), interleaved, and compares what a user would see:

  - time per image of `Predictor.predict` (forward, maps and boxes; images already decoded);
  - the probabilities: largest, 99th percentile and median difference;
  - the positive labels: images whose set changed (a label on the other side of its threshold);
  - the boxes: for each float32 box, the best IoU among the bfloat16 boxes of its label.

Images: --data (a dataset folder or labels CSV, as `cxr train` takes it; e.g. ../shared/data/nih)
or --files, else fresh phantoms. Model: --model, else the demo model (`app/configs`).

    python benchmarks/precision.py                                    # demo model, phantoms
    python benchmarks/precision.py --data ../shared/data/nih --n 64   # real NIH images
    python benchmarks/precision.py --model runs/phantom_demo.pt --size 512

On a CPU without AMX or AVX512-BF16, bfloat16 is emulated and slower; the comparison of the
answers still holds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench_kit import say

REPO = Path(__file__).resolve().parents[1]


def _iou(a: object, b: object) -> float:
    ax, ay, aw, ah = (getattr(a, k) for k in ("x", "y", "width", "height"))
    bx, by, bw, bh = (getattr(b, k) for k in ("x", "y", "width", "height"))
    w = max(0.0, min(ax + aw, bx + bw) - max(ax, bx))
    h = max(0.0, min(ay + ah, by + bh) - max(ay, by))
    union = aw * ah + bw * bh - w * h
    return w * h / union if union > 0 else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--model", type=Path, help="checkpoint (default: the demo model)")
    parser.add_argument("--data", help="dataset folder or labels CSV (default: fresh phantoms)")
    parser.add_argument("--files", nargs="+", type=Path, help="image files instead of --data")
    parser.add_argument("--n", type=int, default=96, help="images (default 96)")
    parser.add_argument("--size", type=int, default=256, help="phantom side (default 256)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds, interleaved")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    args = parser.parse_args()

    import numpy as np
    import torch

    from models.data import load_records
    from models.images import load_image
    from models.phantoms import write_phantom_dataset
    from models.precision import native_bfloat16
    from models.predict import load_predictor

    if args.threads:
        torch.set_num_threads(args.threads)
    model = args.model or REPO / "app" / "configs" / "demo_phantoms.v3.pt"
    with tempfile.TemporaryDirectory() as tmp:
        if args.files:
            paths = list(args.files)[: args.n]
        elif args.data:
            paths = [r.path for r in load_records(args.data)[: args.n]]
        else:
            data = write_phantom_dataset(Path(tmp), n=args.n, seed=41, size=args.size)
            paths = [r.path for r in load_records(data)]
        predictors = {
            p: load_predictor(model, device="cpu", batch_size=args.batch_size, precision=p)
            for p in ("float32", "bfloat16")
        }
        first = predictors["float32"]
        images = [first.prepare(load_image(path).pixels) for path in paths]
    say(
        f"{len(images)} images; {model.name} ({first.card['arch']} at {first.image_size} px, "
        f"{first.heatmap_method}); {torch.get_num_threads()} threads on {os.cpu_count()} cores; "
        f"native bfloat16 on this CPU: {'yes' if native_bfloat16(torch.device('cpu')) else 'no'}"
    )
    for predictor in predictors.values():
        predictor.predict(images[: args.batch_size])  # warm-up: oneDNN builds its kernels
    seconds: dict[str, list[float]] = {p: [] for p in predictors}
    results = {}
    for _ in range(args.rounds):
        for name, predictor in predictors.items():
            t0 = time.perf_counter()
            results[name] = predictor.predict(images)
            seconds[name].append(time.perf_counter() - t0)
    exact, fast = results["float32"], results["bfloat16"]
    ms = {p: 1000 * statistics.median(s) / len(images) for p, s in seconds.items()}
    say(
        f"time per image, median of {args.rounds}: float32 {ms['float32']:.1f} ms, "
        f"bfloat16 {ms['bfloat16']:.1f} ms (x{ms['float32'] / ms['bfloat16']:.2f})"
    )
    diffs = np.array(
        [abs(a.probabilities[k] - b.probabilities[k])
         for a, b in zip(exact, fast, strict=True) for k in a.probabilities]
    )  # fmt: skip
    say(
        f"probabilities, |float32 - bfloat16| over {diffs.size} values: max {diffs.max():.4f}, "
        f"p99 {np.percentile(diffs, 99):.4f}, median {np.median(diffs):.5f}"
    )
    flips = [
        (path.name, sorted(set(a.positive) ^ set(b.positive)))
        for path, a, b in zip(paths, exact, fast, strict=True)
        if set(a.positive) != set(b.positive)
    ]
    say(f"images whose positive labels changed: {len(flips)} of {len(images)} {flips[:5]}")
    ious = []
    for a, b in zip(exact, fast, strict=True):
        for box in a.boxes:
            same = [other for other in b.boxes if other.label == box.label]
            ious.append(max((_iou(box, other) for other in same), default=0.0))
    if ious:
        iou = np.array(ious)
        say(
            f"boxes: {len(ious)} float32 boxes; best IoU with a bfloat16 box of the same label: "
            f"median {np.median(iou):.3f}, >= 0.9 for {np.mean(iou >= 0.9):.0%}, >= 0.5 for "
            f"{np.mean(iou >= 0.5):.0%}, none for {np.mean(iou == 0):.0%}"
        )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
