"""Training throughput on synthetic tensors: images/s of the training step alone.

No data loading: a fixed random batch on the device, so the figure is the model's
forward + weighted loss + backward + AdamW step, as `models.train` runs it
(bf16 autocast and channels_last on CUDA; fp32 and channels_last on CPU).

    python benchmarks/train_throughput.py --device cuda                 # ResNet-50 at 512, 1024
    python benchmarks/train_throughput.py --device cuda --compile
    python benchmarks/train_throughput.py --device cpu --sizes 256 --batch-size 4 --steps 3
    python benchmarks/train_throughput.py --device cpu --arch resnet18 --sizes 256 --batch-size 16
    python benchmarks/train_throughput.py ... --memory-format contiguous   # NCHW, for comparison

Target (issue 9): >= 800 images/s at 1024 on one H100.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import nullcontext


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--arch", default="resnet50", choices=["resnet50", "resnet18"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--output-stride", type=int, default=16, choices=[16, 32])
    parser.add_argument("--labels", type=int, default=14)
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument(
        "--memory-format",
        default="channels_last",
        choices=["channels_last", "contiguous"],
        help="model memory format (models.train uses channels_last)",
    )
    args = parser.parse_args()

    import torch

    from models.loss import compute_loss
    from models.network import build_model

    if args.device == "cuda" and not torch.cuda.is_available():
        _say("CUDA is not available; use --device cpu")
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    name = torch.cuda.get_device_name(device) if cuda else f"CPU, {torch.get_num_threads()} threads"
    _say(
        f"device {name}; {args.arch}, output stride {args.output_stride}, batch "
        f"{args.batch_size}, {'bf16 autocast' if cuda else 'fp32'}, {args.memory_format}"
        f"{', torch.compile' if args.compile else ''}"
    )
    for size in args.sizes:
        torch.manual_seed(0)
        model = build_model(
            arch=args.arch, num_labels=args.labels, output_stride=args.output_stride
        ).to(device)
        if args.memory_format == "channels_last":
            model = model.to(memory_format=torch.channels_last)
        net = torch.compile(model) if args.compile else model
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
        x = torch.rand(args.batch_size, 1, size, size, device=device)
        y = (torch.rand(args.batch_size, args.labels, device=device) < 0.2).float()
        autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else nullcontext()

        t0 = time.perf_counter()
        for i in range(args.warmup + args.steps):
            if i == args.warmup:  # untimed steps first: cudnn autotuning, compilation
                if cuda:
                    torch.cuda.synchronize(device)
                    torch.cuda.reset_peak_memory_stats(device)
                t0 = time.perf_counter()
            with autocast:
                logits = net(x)
            loss = compute_loss(logits, y, "weighted")
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - t0
        rate = args.steps * args.batch_size / elapsed
        memory = (
            f", peak GPU memory {torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB"
            if cuda
            else ""
        )
        _say(f"{size} px: {rate:.1f} images/s ({elapsed / args.steps * 1000:.0f} ms/step){memory}")
        if cuda:
            del model, net, optimizer
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
