"""Weak-localization benchmark on synthetic phantoms (CPU, a few minutes).

Generates chest phantoms with known lesion boxes (`cxr phantoms`), trains a ResNet-18
ChestNet on IMAGE-LEVEL labels only, then scores the test split with the evaluator of
`cxr evaluate`: per-label ROC AUC, and localization accuracy at T(IoBB) = 0.5 using
boxes drawn from the class activation maps alone. Targets: mean AUC >= 0.95 and
IoBB-0.5 accuracy >= 0.6. Leaves a demo checkpoint (model card demo=True) usable by
`cxr serve --model` and `cxr predict`.

    python benchmarks/phantom.py                 # ~5 min on 2 CPU cores
    python benchmarks/phantom.py --n 600 --epochs 3   # quick look

Setting: ResNet-18 body up to layer3 (stride 16: 12x12 maps at 192 px, a smaller
receptive field than layer4), transition layer D=128, LSE pooling (r=10) of the class
maps, weighted cross-entropy, AdamW, translation augmentation, no ImageNet weights.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1600, help="phantoms to generate")
    parser.add_argument("--size", type=int, default=192, help="phantom and model input side")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pooling", default="lse", choices=["lse", "avg", "max"])
    parser.add_argument("--lse-r", type=float, default=10.0)
    parser.add_argument("--pool-on", default="cams", choices=["cams", "features"])
    parser.add_argument("--stages", type=int, default=3, choices=[3, 4], help="body stages")
    parser.add_argument("--shift", type=float, default=0.12, help="translation augmentation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=REPO / "runs" / "phantom")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "phantom_demo.pt")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, help="also write the full report here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)

    import torch

    from models.evaluate import evaluate_checkpoint, format_report
    from models.phantoms import write_phantom_dataset
    from models.train import load_train_config, train

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    data = write_phantom_dataset(args.work, n=args.n, seed=args.seed, size=args.size)
    t1 = time.perf_counter()
    cfg = load_train_config(
        None,
        data=str(data),
        out=str(args.out),
        arch="resnet18",
        weights="none",
        image_size=args.size,
        output_stride=16,  # 12x12 maps at 192 px
        body_stages=args.stages,
        pooling=args.pooling,
        lse_r=args.lse_r,
        pool_on=args.pool_on,
        aug_shift=args.shift,  # 8x8 maps at 128 px: fine enough to box a nodule
        transition_channels=128,
        labels="auto",
        epochs=args.epochs,
        batch_size=args.batch_size,
        accum=1,
        optimizer="adamw",
        lr=args.lr,
        weight_decay=1e-4,
        warmup_steps=30,
        workers=0,
        cache_images=True,
        threads=args.threads,
        seed=args.seed,
        device=args.device,
        demo=True,
        training_data=f"{args.n} synthetic phantoms ({args.size} px, seed {args.seed}), "
        "image-level labels only",
    )
    result = train(cfg)
    t2 = time.perf_counter()
    report = evaluate_checkpoint(
        result.checkpoint,
        data,
        split="test",
        boxes=data / "BBox_List.csv",
        device=args.device,
        seed=args.seed,
    )
    t3 = time.perf_counter()
    _say(format_report(report))
    mean_auc = report["classification"]["mean_auc"]
    acc = report["localization"]["iobb"]["0.5"]["acc"]
    timing = {"generate_s": t1 - t0, "train_s": t2 - t1, "evaluate_s": t3 - t2}
    _say("")
    _say(
        f"test images {report['classification']['n_images']}, "
        f"boxes {report['localization']['n_boxes']}"
    )
    _say(f"mean AUC {mean_auc:.3f} (target >= 0.95)")
    _say(f"IoBB-0.5 localization accuracy {acc:.3f} (target >= 0.6)")
    _say(
        f"time: generate {timing['generate_s']:.0f}s, train {timing['train_s']:.0f}s "
        f"({result.metrics.get('train_images_per_s')} img/s), evaluate {timing['evaluate_s']:.0f}s"
    )
    _say(f"demo checkpoint: {result.checkpoint}")
    if args.json:
        args.json.write_text(json.dumps({**report, "timing": timing}, indent=2) + "\n")
    return 0 if mean_auc >= 0.95 and acc >= 0.6 else 1


if __name__ == "__main__":
    sys.exit(main())
