"""Prediction speed: whole-process `cxr predict` wall time and per-stage shares.

Issue 9, item 4: nine DICOMs through `cxr predict` with a ResNet-50 at 224. The files
are the three real ones in ../shared/data/dicom, three copies each; when that folder is
absent, nine generated 2500x2048 12-bit MONOCHROME1 CR DICOMs are used instead.

The benchmark builds a random-weight ResNet-50 checkpoint of the shape `cxr train --arch
resnet50` writes (dilated layer4, output stride 16: the cost of a trained one;
`--output-stride 32` for the paper's undilated network) whose thresholds make two of the 14
labels positive on every image (a typical study), so `--overlays positive` (the default)
writes 2 overlay PNGs per image.

It prints:
  1. whole-process wall time of `python -m app.cli predict ...` (start-up, imports, model
     load, decode, forward, CAM, boxes, writing JSON and overlays), median of --repeat runs;
  2. in-process per-stage shares over the same files (decode, preprocess, forward, cam,
     boxes, write) through `models.predict.predict_files`, the function the CLI uses;
  3. start-up: seconds to import the prediction path and to load the checkpoint.

    python benchmarks/predict.py                          # CPU, the issue's setting
    python benchmarks/predict.py --device cuda --image-size 1024 --batch-size 16 --n 64
    python benchmarks/predict.py --overlays all           # every label's overlay
    python benchmarks/predict.py --heatmaps-from cam          # the paper's CAM instead of LayerCAM
    python benchmarks/predict.py --txrv /tmp/txrv --precision both   # float32 and bfloat16

Two more modes (`--mode`):

  throughput  files/s of `predict_files` (what `cxr predict` runs) over --n generated
              2500x2048 12-bit DICOMs with --workers decoding processes, no overlays,
              after a warm-up pass; with --base DIR, the same through the code in DIR (a
              `git worktree` of an older commit), interleaved, in the same run; --fit both
              fits on the host (the workers) and on the device (the staging thread).
  latency     p50/p99 of single-DICOM requests, one at a time, through a real
              `cxr serve` on loopback (POST /v1/images/predict).
  decode      one thread's time to decode and fit one generated DICOM (best of 7), and with
              --base the older checkout's, interleaved.
  transport   results/s the decoding pool can hand back, whatever the decoder: each of
              --n items is a fitted image of --image-size (uint16, as `cxr predict`'s
              workers return), made at no cost in --workers processes; shared-memory slots
              against the pipe, and with --base the older checkout's pool, interleaved;
              also with a pure-Python thread busy beside the one taking results (as
              `cxr predict`'s other threads), at the interpreter's default switch interval
              (5 ms) and at the one `predict_files` sets.

    python benchmarks/predict.py --mode throughput --n 64 --image-size 1024 --device cuda
    python benchmarks/predict.py --mode throughput --n 32 --base ../base       # before/after
    python benchmarks/predict.py --mode latency --n 100 --image-size 1024 --device cuda
    python benchmarks/predict.py --mode decode --n 1 --image-size 1024 --base ../base --repeat 2
    python benchmarks/predict.py --mode transport --n 2000 --image-size 1024 --base ../base
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Literal

from bench_kit import say

ROOT = Path(__file__).resolve().parents[1]
SHARED_DICOM = ROOT.parent / "shared" / "data" / "dicom"


def _path(code: Path) -> str:
    """PYTHONPATH with `code` first, keeping what the caller set (carried wheels)."""
    return os.pathsep.join([str(code), *filter(None, [os.environ.get("PYTHONPATH")])])


def synthetic_dicom(path: Path, rows: int = 2500, columns: int = 2048, seed: int = 0) -> Path:
    """A 16-bit (12 stored) MONOCHROME1 CR DICOM with smooth content."""
    import numpy as np
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import UID, ExplicitVRLittleEndian, generate_uid

    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.file_meta.MediaStorageSOPClassUID = UID("1.2.840.10008.5.1.4.1.1.1")
    ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.SOPClassUID = ds.file_meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID
    ds.Modality = "CR"
    ds.AccessionNumber = f"BENCH{seed}"  # a reports CSV can name it (batch_throughput.py)
    ds.Rows, ds.Columns = rows, columns
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME1"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.WindowCenter, ds.WindowWidth = 2048, 3000
    rng = np.random.default_rng(seed)
    ds.PixelData = rng.integers(0, 4096, (rows, columns), dtype=np.uint16).tobytes()
    ds.save_as(path, enforce_file_format=True)
    return path


def input_files(folder: Path, n: int) -> tuple[list[Path], str]:
    """n DICOMs in `folder`: copies of the shared real files, else generated ones."""
    real = sorted(SHARED_DICOM.glob("*.dcm")) if SHARED_DICOM.is_dir() else []
    files: list[Path] = []
    for i in range(n):
        if real:
            src = real[i % len(real)]
            files.append(Path(shutil.copy(src, folder / f"{i:03d}_{src.name}")))
        else:
            files.append(synthetic_dicom(folder / f"{i:03d}_synthetic.dcm", seed=i))
    what = f"{len(real)} real DICOMs from {SHARED_DICOM}" if real else "generated 2500x2048 CR"
    return files, what


def write_checkpoint(
    path: Path, image_size: int, positives: int, heatmaps: str, output_stride: int
) -> Path:
    """A random-weight ResNet-50 of the shape `cxr train --arch resnet50` writes (dilated
    layer4, output stride 16, 1024-channel transition; `output_stride` 32: the paper's
    undilated one); the first `positives` labels always positive, the others never;
    heatmaps and boxes by `heatmaps` ("layercam", what `cxr train` writes, or "cam")."""
    import torch

    from labeler.schema import CHESTXRAY14
    from models.checkpoint import ModelCard, model_from_card, save_checkpoint
    from models.network import DEFAULT_TRANSITION_CHANNELS

    labels = [str(getattr(x, "value", x)) for x in CHESTXRAY14]
    card = ModelCard(
        labels=labels,
        arch="resnet50",
        transition_channels=DEFAULT_TRANSITION_CHANNELS[("resnet50", 4)],
        output_stride=output_stride,
        dilated=output_stride == 16,
        image_size=image_size,
        thresholds={n: (0.0 if i < positives else 1.0) for i, n in enumerate(labels)},
        heatmap_method=heatmaps,
        training_data="none: random initialisation (benchmark)",
        demo=True,
    )
    torch.manual_seed(0)
    return save_checkpoint(path, model=model_from_card(card), card=card)


def model_gflops(checkpoint: Path, stage: int = 2) -> tuple[float, float, float]:
    """(forward, a LayerCAM map's later stages, its transition layer) GFLOP for one image of
    the checkpoint's model, counted by torch's FlopCounterMode on the meta device (shapes
    only: instant, any size).

    A map is a backward pass from the transition layer's output to body stage `stage`: the
    later stages' input gradient, and the transition convolution's, counted dense here;
    `models.layercam` computes the latter only over the cells that carry a gradient (a few
    percent of them on this benchmark's model), so a map costs between the two."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from models.checkpoint import load_checkpoint

    loaded = load_checkpoint(checkpoint)
    model = loaded.model.eval().to("meta")
    size = int(loaded.card.image_size)
    x = torch.zeros(1, 1, size, size, device="meta")

    def count(fn: object) -> float:
        counter = FlopCounterMode(display=False)
        with counter:
            fn()  # type: ignore[operator]
        return counter.get_total_flops() / 1e9

    with torch.no_grad():
        forward = count(lambda: model.forward_head(model.forward_features(x)))
    head, tail = model.split_body(stage)
    with torch.no_grad():
        early = head(model.prepare_input(x))
    a = early.clone().requires_grad_(True)
    body = tail(a)
    conv = model.transition[0]
    later = count(lambda: torch.autograd.grad(body.sum(), a))
    out = conv(body.detach())
    transition = count(
        lambda: torch.nn.grad.conv2d_input(body.shape, conv.weight, out, padding=conv.padding)
    )
    return forward, later, transition


def whole_process(
    files: list[Path], checkpoint: Path, out: Path, *, device: str, batch: int, overlays: str,
    code: Path = ROOT, precision: str | None = None,
) -> tuple[float, float]:  # fmt: skip
    """(wall seconds, CPU seconds of it and its children) for one `python -m app.cli predict`
    run of the code in `code`, start to exit (`--precision` given only when not None)."""
    env = {**os.environ, "PYTHONPATH": _path(code)}
    cmd = [sys.executable, "-m", "app.cli", "predict", "--model", str(checkpoint), "-o",
           str(out), "--device", device, "--batch-size", str(batch), "--overlays", overlays,
           *(["--precision", precision] if precision else []), *map(str, files)]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, cwd=code)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"cxr predict failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return seconds, cpu


def _peer_weights(work: Path, txrv: Path) -> Path | None:
    """A random DenseNet-121 state dict for the peer to load (as it would its weights)."""
    path = work / "densenet121.pt"
    code = (
        "import sys, torch, torchxrayvision as xrv; torch.manual_seed(0); "
        "torch.save(xrv.models.DenseNet(weights=None).state_dict(), sys.argv[1])"
    )
    env = {**os.environ, "PYTHONPATH": str(txrv)}
    done = subprocess.run([sys.executable, "-c", code, str(path)], env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        say(f"torchxrayvision not usable from {txrv}: {done.stderr.strip().splitlines()[-1:]}")
        return None
    return path


def txrv_process(files: list[Path], txrv: Path, weights: Path) -> float:
    """Seconds for one whole-process run of benchmarks/predict_txrv.py."""
    env = {**os.environ, "PYTHONPATH": str(txrv)}
    script = Path(__file__).with_name("predict_txrv.py")
    cmd = [sys.executable, str(script), f"--weights={weights}", *map(str, files)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"torchxrayvision run failed: {done.stderr[-2000:]}")
    return seconds


def stages(
    files: list[Path], checkpoint: Path, out: Path, *, device: str, batch: int, overlays: str
) -> dict[str, float]:
    """Seconds per stage over `files`, in this process (the CLI's path, minus start-up)."""
    import json

    from models.overlay import render_overlay
    from models.predict import load_predictor, predict_files

    predictor = load_predictor(checkpoint, device=device, batch_size=batch)
    # Warm-up: thread pools, allocator, cuDNN autotuning on GPU.
    list(predict_files(predictor, files[:batch], heatmaps="none", display_size=None))
    if predictor.device.type == "cuda":
        import torch

        torch.cuda.synchronize()
    totals: dict[str, float] = defaultdict(float)
    t_start = time.perf_counter()
    display = None if overlays == "none" else 512
    policy: Literal["positive", "all", "none"] = overlays  # type: ignore[assignment]
    for result in predict_files(predictor, files, heatmaps=policy, display_size=display):
        prediction = result.prediction
        if prediction is None:
            raise RuntimeError(f"{result.path}: {result.error}")
        for stage, seconds in {**result.timings, **prediction.timings}.items():
            totals[stage] += seconds
        t0 = time.perf_counter()
        for label, heat in prediction.heatmaps.items():
            if result.display is None:
                break
            boxes = [b for b in prediction.boxes if b.label == label]
            png = render_overlay(result.display, heat, boxes=boxes, max_side=512)
            (out / f"{result.path.name}.{label}.png").write_bytes(png)
        (out / f"{result.path.name}.json").write_text(json.dumps(prediction.to_dict()))
        totals["write"] += time.perf_counter() - t0
    totals["wall"] = time.perf_counter() - t_start
    return dict(totals)


_THROUGHPUT = """
import sys, time, json
from models.predict import load_predictor, predict_files
cfg = json.loads(sys.argv[1])
extra = {"precision": cfg["precision"]} if cfg.get("precision") else {}
predictor = load_predictor(cfg["model"], device=cfg["device"], batch_size=cfg["batch"], **extra)
kw = {"workers": cfg["workers"]} if cfg["workers"] is not None else {}
if cfg.get("fit"):
    kw["fit"] = cfg["fit"]
try:
    predict_files(predictor, [], display_size=None, **kw)
except TypeError:  # older code: no workers or fit argument
    kw = {}
stages = {}
def run(files):
    n = 0
    stages.clear()
    for r in predict_files(predictor, files, heatmaps="none", display_size=None, **kw):
        if r.prediction is None:
            raise SystemExit(f"{r.path}: {r.error}")
        for k, v in r.timings.items():
            stages["worker " + k] = stages.get("worker " + k, 0.0) + v
        for k, v in r.prediction.timings.items():
            stages["main " + k] = stages.get("main " + k, 0.0) + v
        n += 1
    if predictor.device.type == "cuda":
        import torch; torch.cuda.synchronize()
    return n
run(cfg["files"][: 2 * cfg["batch"]])  # warm-up: pools, allocator, cuDNN autotuning
t0 = time.perf_counter()
n = run(cfg["files"])
print(json.dumps({"files": n, "seconds": time.perf_counter() - t0, "stages": stages}))
"""


def throughput(
    files: list[Path], checkpoint: Path, *, code: Path, device: str, batch: int,
    workers: int | None, fit: str | None = None, precision: str | None = None,
) -> float:  # fmt: skip
    """Files/s of `predict_files` with the code in `code`, in a fresh process (`fit`:
    where images are fitted, `precision` the predictor's; None: the code's default)."""
    import json

    cfg = {"model": str(checkpoint), "device": device, "batch": batch, "workers": workers,
           "fit": fit, "precision": precision, "files": [str(f) for f in files]}  # fmt: skip
    env = {**os.environ, "PYTHONPATH": _path(code)}
    done = subprocess.run([sys.executable, "-c", _THROUGHPUT, json.dumps(cfg)], env=env,
                          capture_output=True, text=True, check=False, cwd=code)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"throughput run failed: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    n, seconds = float(result["files"]), float(result["seconds"])
    per_file = ", ".join(
        f"{k} {1000 * v / n:.1f}" for k, v in sorted(result.get("stages", {}).items())
    )
    if per_file:
        say(f"  ms per file: {per_file} (workers' stages run in parallel)")
    return n / seconds


_DECODE = """
import sys, time, json
import cv2
cv2.setNumThreads(1)
path, size = sys.argv[1], int(sys.argv[2])
import os
if os.path.exists(os.path.join("models", "image_pipeline.py")):
    from models.image_pipeline import InputSpec, load_for_model
    spec = InputSpec(size, "letterbox")
    run = lambda: load_for_model(path, spec)
else:  # older code: float decode, float fit
    from models.images import load_image
    from models.transforms import fit_square
    run = lambda: fit_square(load_image(path).pixels, size)
times = []
for _ in range(7):
    t0 = time.perf_counter(); run(); times.append(time.perf_counter() - t0)
print(json.dumps(min(times)))
"""


def decode_time(dicom: Path, size: int, code: Path) -> float:
    """Best-of-7 seconds to decode and fit one DICOM, one thread, with the code in `code`."""
    env = {**os.environ, "PYTHONPATH": _path(code), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _DECODE, str(dicom), str(size)], env=env,
                          capture_output=True, text=True, check=False, cwd=code)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"decode run failed: {done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


_TRANSPORT = """
import functools, sys, threading, time
import numpy as np
from models.decode_pool import DecodePool
n, size, workers, slot, busy = (int(a) for a in sys.argv[1:6])
if float(sys.argv[6]) > 0:
    sys.setswitchinterval(float(sys.argv[6]))
kwargs = {} if slot < 0 else {"slot_bytes": slot}
make = functools.partial(np.zeros, dtype=np.uint16)  # picklable; a fresh image per item
stop = threading.Event()
def spin():  # pure Python, as `cxr predict`'s model, finishing and box threads often are
    while not stop.is_set():
        pass
with DecodePool(make, workers=workers, on_error=lambda _i, e: e, max_ahead=4 * workers,
                **kwargs) as pool:
    list(pool.map([(size, size)] * (2 * workers)))  # warm-up: workers started
    spinner = threading.Thread(target=spin)
    if busy:
        spinner.start()
    t0 = time.perf_counter()
    got = sum(a.shape == (size, size) for a in pool.map([(size, size)] * n))
    seconds = time.perf_counter() - t0
    stop.set()
    if busy:
        spinner.join()
assert got == n
print(n / seconds)
"""


def transport_rate(
    n: int, size: int, workers: int, code: Path, slot_bytes: int | None, *, busy: bool = False,
    switch_s: float = 0.0,
) -> float:  # fmt: skip
    """Results/s through the decoding pool of the code in `code`.

    Args:
        slot_bytes: None: the code's default.
        busy: with a pure-Python thread running beside the one taking the results.
        switch_s: the interpreter's switch interval (0: its default, 5 ms).
    """
    env = {**os.environ, "PYTHONPATH": _path(code)}
    args = [str(n), str(size), str(workers), str(-1 if slot_bytes is None else slot_bytes),
            str(int(busy)), str(switch_s)]  # fmt: skip
    done = subprocess.run([sys.executable, "-c", _TRANSPORT, *args], env=env,
                          capture_output=True, text=True, check=False, cwd=code)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"transport run failed: {done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def latency(
    checkpoint: Path,
    dicom: Path,
    *,
    device: str,
    n: int,
    work: Path,
    precision: str | None = None,
    decode_in_workers: bool | None = None,
) -> None:
    """p50/p99 of one-at-a-time POST /v1/images/predict through `cxr serve` on loopback,
    and the median of each stage the service reports in its answer's `timings`
    (`decode_in_workers`: CXR_DECODE_IN_WORKERS, None: the service's default)."""
    import json

    sys.path.insert(0, str(Path(__file__).parent))
    from service_load import _post, run_phase, serving

    settings = {}
    if decode_in_workers is not None:
        settings["CXR_DECODE_IN_WORKERS"] = str(decode_in_workers).lower()
    with serving(
        checkpoint, work, device=device, startup_timeout=300, precision=precision,
        settings=settings,
    ) as started:  # fmt: skip
        if started is None:
            return
        base, key, _ = started
        body = dicom.read_bytes()
        headers = {"X-API-Key": key, "Content-Type": "application/dicom"}
        stages: defaultdict[str, list[float]] = defaultdict(list)
        where = "worker processes" if decode_in_workers else "the server's threads"

        def timed(answer: bytes) -> None:
            for stage, seconds in (json.loads(answer).get("timings") or {}).items():
                stages[stage].append(float(seconds))

        def send(_: int) -> int:
            return _post(base + "/v1/images/predict", body, headers, 300, on_answer=timed)

        for _ in range(5):  # warm-up: first batches, allocator, cuDNN autotuning
            send(0)
        stages.clear()
        run_phase(
            f"latency, one request at a time ({len(body) / 2**20:.1f} MiB DICOM"
            f"{f', {precision}' if precision else ''}"
            f"{'' if decode_in_workers is None else ', decoded in ' + where})",
            send, n=n, seconds=600, concurrency=1,
        )  # fmt: skip
        shown = ", ".join(
            f"{stage} {statistics.median(values) * 1000:.1f}" for stage, values in stages.items()
        )
        say(f"  the service's own timings, median ms: {shown}")


def startup(checkpoint: Path, device: str) -> tuple[float, float]:
    """(import seconds, checkpoint load seconds) in a fresh interpreter."""
    code = (
        "import time; t0 = time.perf_counter(); import models.predict, models.images, "
        "models.overlay; t1 = time.perf_counter(); from models.predict import load_predictor; "
        f"load_predictor({str(checkpoint)!r}, device={device!r}); t2 = time.perf_counter(); "
        "import sys; sys.stdout.write(f'{t1 - t0} {t2 - t1} ' + str('torchvision' in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": _path(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    imports, load, tv = done.stdout.split()
    if tv == "True":
        say("note: torchvision was imported on the prediction path")
    return float(imports), float(load)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--mode",
        default="stages",
        choices=["stages", "throughput", "latency", "decode", "transport"],
    )
    parser.add_argument("--n", type=int, default=9, help="number of files (default 9)")
    parser.add_argument("--workers", type=int, help="decoding processes (throughput mode)")
    parser.add_argument(
        "--base",
        type=Path,
        metavar="DIR",
        help="older checkout to compare, interleaved (whole-process, throughput, decode and "
        "transport modes)",
    )
    parser.add_argument("--synthetic", action="store_true", help="generated DICOMs only")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--batch-size", type=int, default=16, help="as cxr predict (16)")
    parser.add_argument("--positives", type=int, default=2, help="positive labels per image")
    parser.add_argument("--overlays", default="positive", choices=["positive", "all", "none"])
    parser.add_argument(
        "--heatmaps-from",
        default="layercam",
        choices=["layercam", "cam"],
        help="the card's heatmap method: layercam (what cxr train writes) or the paper's cam",
    )
    parser.add_argument(
        "--output-stride",
        type=int,
        default=16,
        choices=[16, 32],
        help="16: the dilated model cxr train writes (default); 32: the paper's undilated one",
    )
    parser.add_argument(
        "--fit",
        default="auto",
        choices=["auto", "host", "device", "both"],
        help="throughput mode: where `predict_files` fits the images (auto: on a GPU when "
        "the model runs on one); both: host and device, interleaved",
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N")
    parser.add_argument(
        "--precision",
        default="auto",
        choices=["auto", "float32", "bfloat16", "both"],
        help="stages, throughput and latency modes: the model's arithmetic (both: float32 "
        "and bfloat16)",
    )
    parser.add_argument(
        "--decode",
        default="default",
        choices=["default", "workers", "threads", "both"],
        help="latency mode: where the service decodes uploads (CXR_DECODE_IN_WORKERS; both: "
        "the two, interleaved over --repeat rounds)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="whole-process runs (median)")
    parser.add_argument(
        "--txrv",
        type=Path,
        metavar="DIR",
        help="folder holding torchxrayvision and its dependencies (pip install --target DIR): "
        "also time its pipeline (benchmarks/predict_txrv.py), runs interleaved with ours",
    )
    args = parser.parse_args()
    precisions = ["float32", "bfloat16"] if args.precision == "both" else [args.precision]

    from models.errors import ModelsError
    from models.predict import resolve_device

    try:
        device = resolve_device(args.device)
    except ModelsError as exc:
        sys.stderr.write(f"benchmarks/predict.py: {exc}\n")
        return 2
    if args.mode == "transport":
        from models.decode_pool import default_workers

        workers = args.workers or default_workers()
        mib = 2 * args.image_size**2 / 2**20
        say(f"transport: {args.n} fitted images of {args.image_size} px ({mib:.1f} MiB, "
             f"uint16) from {workers} worker processes, {os.cpu_count()} cores")  # fmt: skip
        from models.predict import PREDICT_SWITCH_INTERVAL_S as fast

        ms = f"{1000 * fast:g} ms"
        here, base = ROOT, args.base.resolve() if args.base else None
        runs: list[tuple[str, Path, int | None, bool, float]] = [
            ("this checkout, shared memory", here, None, False, 0.0),
            ("this checkout, pipe (slot_bytes=0)", here, 0, False, 0.0),
            ("this checkout, a busy thread beside", here, None, True, 0.0),
            (f"this checkout, a busy thread beside, switch interval {ms}", here, None, True, fast),
        ]
        if base is not None:
            runs += [
                ("base", base, None, False, 0.0),
                ("base, a busy thread beside", base, None, True, 0.0),
                (f"base, a busy thread beside, switch interval {ms}", base, None, True, fast),
            ]
        for label, code, slot, busy, switch_s in runs * max(1, args.repeat):
            rate = transport_rate(args.n, args.image_size, workers, code, slot, busy=busy,
                                  switch_s=switch_s)  # fmt: skip
            say(f"transport, {label}: {rate:,.0f} results/s ({rate * mib:,.0f} MiB/s)")
        return 0
    import torch

    name = (
        torch.cuda.get_device_name(device) if device.type == "cuda"
        else f"cpu ({torch.get_num_threads()} threads, {os.cpu_count()} cores)"
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "in").mkdir()
        if args.mode != "stages" or args.synthetic:
            # Eight distinct files, copied: decoding costs the same, generating is slow.
            made = [synthetic_dicom(work / "in" / f"{i:04d}.dcm", seed=i)
                    for i in range(min(8, args.n))]  # fmt: skip
            files = made + [Path(shutil.copy(made[i % len(made)], work / "in" / f"{i:04d}.dcm"))
                            for i in range(len(made), args.n)]  # fmt: skip
            what = "generated 2500x2048 12-bit CR"
        else:
            files, what = input_files(work / "in", args.n)
        checkpoint = write_checkpoint(
            work / "r50.pt",
            args.image_size,
            args.positives,
            args.heatmaps_from,
            args.output_stride,
        )
        say(
            f"device: {name}; {len(files)} files ({what}); ResNet-50 at {args.image_size}, "
            f"output stride {args.output_stride}, 14 labels, {args.positives} positive per "
            f"image, overlays {args.overlays}, "
            f"heatmaps {args.heatmaps_from}, batch {args.batch_size}"
        )
        if args.mode == "throughput":
            fits = ["host", "device"] if args.fit == "both" else [args.fit]
            trials: list[tuple[str, Path, str | None, str | None]] = [
                (f"this checkout{'' if f == 'auto' else f', fit on the {f}'}"
                 f"{'' if p == 'auto' else f', {p}'}", ROOT,
                 None if f == "auto" else f, None if p == "auto" else p)
                for p in precisions for f in fits
            ]  # fmt: skip
            primary = trials[-1][0]  # this checkout's last trial: the median's
            trials += [("base", args.base.resolve(), None, None)] if args.base else []
            rates: list[float] = []
            for label, code, fit, prec in trials * max(1, args.repeat):
                rate = throughput(files, checkpoint, code=code, device=args.device,
                                  batch=args.batch_size, workers=args.workers, fit=fit,
                                  precision=prec)  # fmt: skip
                workers = "default" if args.workers is None else args.workers
                say(f"throughput, {label}: {rate:.3g} files/s (workers {workers})")
                if label == primary:
                    rates.append(rate)
            rate = statistics.median(rates)
            maps = args.positives if args.heatmaps_from == "layercam" else 0
            forward, later, transition = model_gflops(checkpoint)
            low, high = forward + maps * later, forward + maps * (later + transition)
            say(
                f"  model work per file: forward {forward:.0f} GFLOP + {maps} LayerCAM maps x "
                f"({later:.0f} through the later stages + up to {transition:.0f} in the "
                f"transition layer, where its gradient is) = {low:.0f}-{high:.0f} GFLOP; at "
                f"this checkout's median rate {low * rate / 1000:.3g}-{high * rate / 1000:.3g} "
                f"TFLOP/s; 300 files/s would need {low * 0.3:.3g}-{high * 0.3:.3g} TFLOP/s"
            )
            return 0
        if args.mode == "decode":
            runs = [("this checkout", ROOT)]
            if args.base:
                runs.append(("base", args.base.resolve()))
            for label, code in runs * max(1, args.repeat):
                ms = 1000 * decode_time(files[0], args.image_size, code)
                say(f"decode + fit to {args.image_size} px, one thread, {label}: {ms:.1f} ms")
            return 0
        if args.mode == "latency":
            choices: dict[str, list[bool | None]] = {
                "default": [None], "workers": [True], "threads": [False], "both": [False, True]
            }  # fmt: skip
            decodes = choices[args.decode]
            for _ in range(max(1, args.repeat) if args.decode == "both" else 1):
                for precision in precisions:
                    for in_workers in decodes:
                        latency(checkpoint, files[0], device=args.device, n=args.n, work=work,
                                precision=None if precision == "auto" else precision,
                                decode_in_workers=in_workers)  # fmt: skip
            return 0
        walls: dict[str, list[float]] = {p: [] for p in precisions}
        cpus: dict[str, list[float]] = {p: [] for p in precisions}
        base_walls: list[float] = []
        base_cpus: list[float] = []
        peer: list[float] = []
        peer_weights = _peer_weights(work, args.txrv) if args.txrv else None
        settings = {"device": args.device, "batch": args.batch_size, "overlays": args.overlays}
        for i in range(args.repeat):
            out = work / f"out{i}"
            for precision in precisions:
                flag = None if precision == "auto" else precision
                wall, cpu = whole_process(files, checkpoint, out, **settings, precision=flag)
                walls[precision].append(wall)
                cpus[precision].append(cpu)
                shutil.rmtree(out)
            if args.base:
                wall, cpu = whole_process(files, checkpoint, out, code=args.base.resolve(),
                                          **settings)  # fmt: skip
                base_walls.append(wall)
                base_cpus.append(cpu)
                shutil.rmtree(out)
            if args.txrv and peer_weights:
                peer.append(txrv_process(files, args.txrv, peer_weights))
        medians = {p: statistics.median(w) for p, w in walls.items()}
        for precision, runs in walls.items():
            ours = ", ".join(f"{w:.2f}" for w in runs)
            say(
                f"whole process, `cxr predict --precision {precision}` on {len(files)} files: "
                f"{medians[precision]:.2f} s median ({ours}); "
                f"CPU {statistics.median(cpus[precision]):.2f} s"
            )
        if base_walls:
            b_runs = ", ".join(f"{w:.2f}" for w in base_walls)
            say(
                f"whole process, the code in {args.base}: {statistics.median(base_walls):.2f} s "
                f"median ({b_runs}); CPU {statistics.median(base_cpus):.2f} s"
            )
        if peer:
            p_median = statistics.median(peer)
            p_runs = ", ".join(f"{w:.2f}" for w in peer)
            faster = "; ".join(f"{p} {p_median / m:.2f}x" for p, m in medians.items())
            say(
                f"whole process, torchxrayvision DenseNet-121 + saliency: {p_median:.2f} s "
                f"median ({p_runs}); cxr predict is faster by: {faster}"
            )
        imports, load = startup(checkpoint, args.device)
        say(f"start-up: imports {imports:.2f} s, checkpoint load {load:.2f} s")
        out = work / "stages"
        out.mkdir()
        t = stages(files, checkpoint, out, device=args.device, batch=args.batch_size,
                   overlays=args.overlays)  # fmt: skip
        names = ["decode", "preprocess", "forward", "cam", "boxes", "write"]
        total = sum(t.get(s, 0.0) for s in names)
        shares = ", ".join(f"{s} {100 * t.get(s, 0.0) / total:.0f}%" for s in names)
        say(
            f"in-process, after warm-up: {t['wall']:.2f} s for {len(files)} files "
            f"({1000 * t['wall'] / len(files):.0f} ms/file); stage shares: {shares}"
        )
        say("(decode and preprocess run in worker processes, overlapped with forward)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
