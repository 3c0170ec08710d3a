"""Where `cxr predict`'s time goes: each side's ceiling alone, then the whole path sampled.

`benchmarks/predict.py --mode throughput` gives one number, files/s of `predict_files`.
This script splits it, over the same generated 2500x2048 12-bit DICOMs and random-weight
ResNet-50 (`benchmarks/predict.py`'s checkpoint: two positive labels an image):

  1. decoding alone: files/s of the worker pool (`models.decode_pool`, `load_for_model`)
     with nothing downstream; then reading alone (`read_task`: no fit, what the workers
     do when the device fits), with the workers' CPU seconds per file for each;
  2. the model alone: files/s of `Predictor.model_pass` on batches already decoded
     (input, forward, LayerCAM maps, boxes' projection), synchronised, then with `finish`
     (boxes on CPU threads, results) one after the other; on CUDA also the batch's fit
     on the device (`Predictor.stage` of stored images) followed by the model pass;
  3. the whole path, `predict_files`, while a thread samples every thread's Python stack
     every few milliseconds: the share of wall time each thread spends in each function
     (a thread waiting on the GPU, a pipe or a lock shows the call it waits in); then,
     unsampled, with the fit on the host and on the device (`fit=`);
  4. (printed before 3) one image a pass, as the service runs it, and with --profile on
     CUDA torch.profiler's table of it: how much of the pass the GPU is busy.

The path can go no faster than its slowest side; what the main thread samples say is the
part of the model's time the host adds.

    python benchmarks/predict_ceilings.py --device cuda --image-size 1024 --n 512
    python benchmarks/predict_ceilings.py --n 32 --image-size 256          # CPU, small
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from types import FrameType
from typing import Any

from bench_kit import say

sys.path.insert(0, str(Path(__file__).resolve().parent))

from predict import synthetic_dicom, write_checkpoint  # noqa: E402 - a sibling script

ROOT = Path(__file__).resolve().parents[1]


class StackSampler:
    """Samples every thread's innermost Python frames every `interval_s` (wall clock)."""

    def __init__(self, interval_s: float = 0.002, depth: int = 2) -> None:
        self.interval_s = interval_s
        self.depth = depth
        self.counts: dict[str, Counter[str]] = defaultdict(Counter)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def __enter__(self) -> StackSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _where(self, frame: FrameType | None) -> str:
        parts: list[str] = []
        while frame is not None and len(parts) < self.depth:
            code = frame.f_code
            parts.append(f"{code.co_name} ({Path(code.co_filename).name}:{frame.f_lineno})")
            frame = frame.f_back
        return " < ".join(parts)

    def _run(self) -> None:
        me = threading.get_ident()
        while not self._stop.wait(self.interval_s):
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                name = names.get(ident, "?")
                # Pool threads by their prefix: one line for eight box threads.
                self.counts[name.rstrip("_0123456789")][self._where(frame)] += 1
            self.samples += 1

    def report(self, top: int = 8) -> None:
        for name, counter in sorted(self.counts.items()):
            total = sum(counter.values())
            say(f"  thread {name} ({total} samples)")
            for where, k in counter.most_common(top):
                say(f"    {100 * k / max(1, self.samples):5.1f}%  {where}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--image-size", type=int, default=1024)
    parser.add_argument("--n", type=int, default=512, help="files (default 512)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--workers", type=int, help="decoding processes (default: cores)")
    parser.add_argument("--output-stride", type=int, default=16, choices=[16, 32])
    parser.add_argument("--passes", type=int, default=8, help="model passes timed (default 8)")
    parser.add_argument(
        "--profile", action="store_true", help="CUDA: torch.profiler table of a one-image pass"
    )
    args = parser.parse_args()

    import torch

    from models.decode_pool import DecodePool, default_workers
    from models.image_pipeline import InputSpec, LoadedImage, ReadImage, load_task, read_task
    from models.predict import Predictor, load_predictor, predict_files
    from models.stored_pixels import StoredPixels

    workers = args.workers or default_workers()
    work = Path(tempfile.mkdtemp(prefix="cxr-ceilings-"))
    try:
        made = [synthetic_dicom(work / f"{i:04d}.dcm", seed=i) for i in range(min(8, args.n))]
        files = made + [Path(shutil.copy(made[i % len(made)], work / f"{i:04d}.dcm"))
                        for i in range(len(made), args.n)]  # fmt: skip
        ckpt = write_checkpoint(work / "r50.pt", args.image_size, 2, "layercam", args.output_stride)
        predictor = load_predictor(ckpt, device=args.device, batch_size=args.batch_size)
        cuda = predictor.device.type == "cuda"
        t0 = time.perf_counter()
        captured = predictor.capture_graphs([args.batch_size, 1])
        if cuda:
            say(f"CUDA graphs captured for batches of {captured} in "
                 f"{time.perf_counter() - t0:.1f} s")  # fmt: skip
        name = torch.cuda.get_device_name(predictor.device) if cuda else "cpu"
        say(
            f"{name}, {os.cpu_count()} cores, {workers} decoding workers; {len(files)} "
            f"generated 2500x2048 DICOMs; ResNet-50 at {args.image_size} px, output stride "
            f"{args.output_stride}, LayerCAM, 2 positive labels, batch {args.batch_size}"
        )

        def sync() -> None:
            if cuda:
                torch.cuda.synchronize()

        # 1. Decoding alone: with the fit (the workers' job on the CPU), and reading only
        # (their job when the device fits).
        spec = InputSpec.of(predictor)
        tasks = [(os.fspath(p), spec, "auto") for p in files]
        kept: list[LoadedImage] = []
        kept_stored: list[StoredPixels] = []

        def failed(task: object, exc: Exception) -> Any:
            raise exc

        for what, task_fn in (("decoding and fitting", load_task), ("reading only", read_task)):
            worker_s = 0.0  # the workers' own timings (one thread each)
            with DecodePool(task_fn, workers=workers, on_error=failed,  # type: ignore[arg-type]
                            max_ahead=4 * workers) as pool:  # fmt: skip
                list(pool.map(tasks[: 2 * workers]))  # warm-up: workers started, imports done
                t0 = time.perf_counter()
                for item in pool.map(tasks):
                    worker_s += sum(item.timings.values())
                    if isinstance(item, LoadedImage) and len(kept) < 2 * args.batch_size:
                        kept.append(item)
                    if isinstance(item, ReadImage) and len(kept_stored) < 2 * args.batch_size:
                        kept_stored.append(item.stored)
                seconds = time.perf_counter() - t0
            say(f"1. {what} alone: {len(tasks) / seconds:.1f} files/s ({workers} workers; "
                 f"{1000 * worker_s / len(tasks):.1f} ms of a worker's time a file)")  # fmt: skip

        # 2. The model alone, on decoded batches.
        batches = [[k.prepared for k in kept[i : i + args.batch_size]]
                   for i in range(0, len(kept), args.batch_size)]  # fmt: skip
        for batch in batches:  # warm-up: cuDNN autotuning, allocator
            predictor.finish(predictor.model_pass(batch, "none"))
        sync()
        timings: Counter[str] = Counter()
        t0 = time.perf_counter()
        for k in range(args.passes):
            done = predictor.model_pass(batches[k % len(batches)], "none")
            for key, value in done.timings.items():
                timings[key] += value
        sync()
        images = args.passes * args.batch_size
        pass_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for k in range(args.passes):
            predictor.finish(predictor.model_pass(batches[k % len(batches)], "none"))
        sync()
        both_s = time.perf_counter() - t0
        split = ", ".join(f"{key} {1000 * v / images:.2f}" for key, v in timings.items())
        say(f"2. model pass alone: {images / pass_s:.1f} files/s (ms per file: {split}); "
             f"with finish, serial: {images / both_s:.1f} files/s")  # fmt: skip
        if cuda:  # the same batches, fitted on the device first (what fit="device" adds)
            stored_batches = [kept_stored[i : i + args.batch_size]
                              for i in range(0, len(kept_stored), args.batch_size)]  # fmt: skip
            for batch in stored_batches:
                predictor.model_pass(predictor.stage(batch), "none")
            sync()
            t0 = time.perf_counter()
            for k in range(args.passes):
                predictor.stage(stored_batches[k % len(stored_batches)])
            sync()
            fit_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            for k in range(args.passes):
                staged = predictor.stage(stored_batches[k % len(stored_batches)])
                predictor.model_pass(staged, "none")
            sync()
            fit_pass_s = time.perf_counter() - t0
            say(f"   the batch's fit on the device alone: {images / fit_s:.1f} files/s "
                 f"({1000 * fit_s / images:.2f} ms a file); fit, then model pass: "
                 f"{images / fit_pass_s:.1f} files/s")  # fmt: skip

        # 4 first (it reuses the decoded images): one image at a time, as the service runs.
        one = [batches[0][:1]]

        def one_image_ms(runner: Predictor) -> tuple[float, float]:
            """(median, best) ms of a one-image model pass and finish, after a warm-up."""
            for _ in range(3):
                runner.finish(runner.model_pass(one[0], "none"))
            sync()
            walls = []
            for _ in range(20):
                t0 = time.perf_counter()
                runner.finish(runner.model_pass(one[0], "none"))
                sync()
                walls.append(1000 * (time.perf_counter() - t0))
            return statistics.median(walls), min(walls)

        median, best = one_image_ms(predictor)
        say(f"4. one image a pass (the service's batch): median {median:.1f} ms, "
             f"best {best:.1f} ms (model_pass + finish)")  # fmt: skip
        if cuda:  # the same without CUDA graphs, for comparison
            eager = load_predictor(ckpt, device=args.device, batch_size=args.batch_size,
                                   cuda_graphs=False)  # fmt: skip
            median, best = one_image_ms(eager)
            say(f"   without CUDA graphs: median {median:.1f} ms, best {best:.1f} ms")
            del eager
        if cuda and args.profile:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(5):
                    predictor.finish(predictor.model_pass(one[0], "none"))
                sync()
            table = prof.key_averages().table(sort_by="self_device_time_total", row_limit=14)
            say("   five passes under torch.profiler (the totals at the bottom: host vs GPU):")
            say(table)

        # 3. The whole path, sampled.
        list(predict_files(predictor, files[: 2 * args.batch_size], heatmaps="none",
                           workers=workers))  # fmt: skip
        sampler = StackSampler()
        t0 = time.perf_counter()
        with sampler:
            n = sum(1 for r in predict_files(predictor, files, heatmaps="none", workers=workers)
                    if r.prediction is not None)  # fmt: skip
            sync()
        seconds = time.perf_counter() - t0
        say(f"3. predict_files: {n / seconds:.1f} files/s; where each thread's wall time "
             f"went ({sampler.samples} samples):")  # fmt: skip
        sampler.report()
        for fit in ("host", "device"):
            t0 = time.perf_counter()
            n = sum(1 for r in predict_files(predictor, files, heatmaps="none", workers=workers,
                                             fit=fit)  # type: ignore[arg-type]
                    if r.prediction is not None)  # fmt: skip
            sync()
            say(f"   predict_files, fit on the {fit}: {n / (time.perf_counter() - t0):.1f} "
                 "files/s (unsampled)")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
