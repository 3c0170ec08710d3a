"""Training throughput on synthetic tensors: images/s of the training step alone.

No data loading: a fixed random batch on the device, so the figure is the model's
forward + weighted loss + backward + AdamW step, as `models.train` runs it
(bf16 autocast and channels_last on CUDA; fp32 and channels_last on CPU).

    python benchmarks/train_throughput.py --device cuda                 # ResNet-50 at 512, 1024
    python benchmarks/train_throughput.py --device cuda --compile
    python benchmarks/train_throughput.py --device cpu --sizes 256 --batch-size 4 --steps 3
    python benchmarks/train_throughput.py --device cpu --arch resnet18 --sizes 256 --batch-size 16
    python benchmarks/train_throughput.py ... --memory-format contiguous   # NCHW, for comparison

Target: >= 800 images/s at 1024 on one H100.

`--end-to-end` also runs the real `cxr train` (its loader, the device-side augmentation,
the same model, batch, precision and compile setting) on generated phantoms at each size,
and prints its steady rate (the best epoch after the first, which holds compilation and
autotuning) and its ratio to the synthetic step rate measured just before:

    python benchmarks/train_throughput.py --device cuda --sizes 1024 --end-to-end
    python benchmarks/train_throughput.py --device cuda --sizes 1024 --end-to-end --prepared
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

from bench_kit import say

ROOT = Path(__file__).resolve().parents[1]


def _path(code: Path) -> str:
    """PYTHONPATH with `code` first, keeping what the caller set (carried wheels)."""
    return os.pathsep.join([str(code), *filter(None, [os.environ.get("PYTHONPATH")])])


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
    parser.add_argument("--end-to-end", action="store_true", help="also time `cxr train`")
    parser.add_argument("--unique", type=int, default=64, help="distinct phantoms generated")
    parser.add_argument("--images", type=int, default=1280, help="training images (copies)")
    parser.add_argument("--epochs", type=int, default=3, help="end-to-end epochs")
    parser.add_argument("--workers", type=int, help="cxr train --workers (default: its own)")
    parser.add_argument(
        "--prepared", action="store_true", help="end-to-end from a `cxr prepare` cache"
    )
    args = parser.parse_args()

    import torch

    from models.loss import compute_loss
    from models.network import build_model

    if args.device == "cuda" and not torch.cuda.is_available():
        say("CUDA is not available; use --device cpu")
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
    say(
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
        say(f"{size} px: {rate:.1f} images/s ({elapsed / args.steps * 1000:.0f} ms/step){memory}")
        if cuda:
            del model, net, optimizer
            torch.cuda.empty_cache()
        if args.end_to_end:
            e2e = end_to_end(args, size)
            if e2e is not None:
                say(
                    f"{size} px end to end (`cxr train`): {e2e:.1f} images/s, "
                    f"{100 * e2e / rate:.0f}% of the synthetic step rate"
                )
    return 0


def _phantom_set(folder: Path, size: int, unique: int, images: int) -> Path:
    """`unique` phantoms at `size`, listed `images` times over as distinct patients (links):
    decoding costs the same whatever the content, and generating is slow."""
    env = {**os.environ, "PYTHONPATH": _path(ROOT)}
    base = folder / "unique"
    subprocess.run([sys.executable, "-m", "app.cli", "phantoms", str(base), "--n", str(unique),
                    "--size", str(size), "--seed", "7"], env=env, check=True,
                   capture_output=True)  # fmt: skip
    out = folder / "data"
    (out / "images").mkdir(parents=True)
    with (base / "Data_Entry.csv").open(newline="") as fp:
        rows = list(csv.reader(fp))
    header, body = rows[0], rows[1:]
    name_col, patient_col = header.index("Image Index"), header.index("Patient ID")
    with (out / "Data_Entry.csv").open("w", newline="") as fp:
        writer = csv.writer(fp)
        writer.writerow(header)
        for i in range(images):
            row = list(body[i % len(body)])
            copy = f"c{i // len(body):03d}_{row[name_col]}"
            (out / "images" / copy).symlink_to((base / "images" / row[name_col]).resolve())
            row[name_col] = copy
            row[patient_col] = f"{i // len(body)}{int(row[patient_col]):06d}"
            writer.writerow(row)
    return out


def end_to_end(args: argparse.Namespace, size: int) -> float | None:
    """Steady images/s of `cxr train` at this size (None when it fails)."""
    env = {**os.environ, "PYTHONPATH": _path(ROOT)}
    with tempfile.TemporaryDirectory(prefix="cxr-e2e-") as tmp:
        data = _phantom_set(Path(tmp), size, args.unique, args.images)
        steps = args.epochs * args.images // args.batch_size
        cmd = [sys.executable, "-m", "app.cli", "train", "--data", str(data),
               "--out", str(Path(tmp) / "model.pt"), "--arch", args.arch,
               "--image-size", str(size), "--batch-size", str(args.batch_size),
               "--output-stride", str(args.output_stride), "--device", args.device,
               "--max-steps", str(steps), "--min-steps", str(steps),
               "--weights", "none", "--no-progress"]  # fmt: skip
        cmd.append("--compile" if args.compile else "--no-compile")
        if args.workers is not None:
            cmd += ["--workers", str(args.workers)]
        if args.prepared:
            cache = Path(tmp) / "cache"
            subprocess.run([sys.executable, "-m", "app.cli", "prepare", "--data", str(data),
                            "--out", str(cache), "--image-size", str(size), "--no-progress"],
                           env=env, check=True, capture_output=True)  # fmt: skip
            cmd += ["--prepared", str(cache)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        text = done.stderr + done.stdout
        rates = [float(m) for m in re.findall(r"epoch \d+: loss [\d.naninf]+, ([\d.]+) img/s",
                                               text)]  # fmt: skip
        waits = re.findall(r"img/s \(([\d.]+) s waiting for input\)", text)
        if done.returncode != 0 or not rates:
            say(f"cxr train failed ({done.returncode}): {(done.stderr or done.stdout)[-1500:]}")
            return None
        say(f"  cxr train epochs: {', '.join(f'{r:.1f}' for r in rates)} images/s")
        if waits:  # this checkout's `cxr train` says how long each epoch waited for input
            say(f"  waiting for input, each epoch: {', '.join(waits)} s")
        return max(rates[1:]) if len(rates) > 1 else rates[0]


if __name__ == "__main__":
    sys.exit(main())
