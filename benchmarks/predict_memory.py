"""Peak memory of image prediction through the real service (issue 7 item 5, issue 18 item 13).

Each case starts a fresh `cxr serve` (uvicorn, SQLite, a random-weight checkpoint, every
label positive so every label gets a heatmap), warms it up with a small image, then reads
the server's /proc/<pid>/status:

  idle   VmRSS after start-up and one small warm-up request
  peak   VmHWM (high-water mark) after the case's requests
  after  VmRSS once the requests are answered (what the server keeps)
  +workers  the processes under the server (the decoding workers of CXR_DECODE_IN_WORKERS
         and their fork server): their VmHWM summed, above their RSS after the warm-up
  w. after  their RSS once the requests are answered, above the same

Cases (--cases; default all):

  jpeg        a square 8-bit JPEG Baseline DICOM per --sizes (smooth synthetic content, so
              a 10000 x 10000 file is about 1 MB, like issue 7's upload), posted twice
  rescale16   a 7070 x 7070 16-bit uncompressed DICOM with Rescale Slope/Intercept and a
              window (100 MB, just under the default CXR_MAX_PIXELS), posted once
  j2k16       the same image as 16-bit JPEG 2000 lossless (pylibjpeg-openjpeg), posted once
  j2knoise    12-bit noise as JPEG 2000 lossless, one per --noise-sides (noise hardly
              compresses: the decoder's worst case per pixel), posted once; the status is
              shown when the server refuses it
  concurrent  --concurrent (8) simultaneous posts of the rescale16 file

A fresh process per case keeps the high-water marks apart. CXR_MAX_PIXELS is raised to
let a 10000 x 10000 JPEG in (by default it is refused, 413, before decoding). Linux only
(/proc). --code runs the server from another checkout, e.g. the main branch, for a
before/after comparison on the same machine.

    python benchmarks/predict_memory.py                          # every case
    python benchmarks/predict_memory.py --cases rescale16 j2k16 concurrent
    python benchmarks/predict_memory.py --cases concurrent --code /work/main
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench_kit import dx_dataset, free_port, say

ROOT = Path(__file__).resolve().parents[1]
CASES = ("jpeg", "rescale16", "j2k16", "concurrent", "j2knoise")


def write_jpeg_dicom(path: Path, side: int) -> Path:
    """A side x side MONOCHROME2 8-bit JPEG Baseline DICOM with smooth content."""
    import numpy as np
    from PIL import Image
    from pydicom.encaps import encapsulate
    from pydicom.uid import JPEGBaseline8Bit

    small = np.random.default_rng(0).integers(0, 255, (64, 64), dtype=np.uint8)
    big = Image.fromarray(small).resize((side, side), Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    big.save(buffer, format="JPEG", quality=90)
    del big
    ds = dx_dataset(side, side, bits=8, syntax=JPEGBaseline8Bit)
    ds.PixelData = encapsulate([buffer.getvalue()])
    ds["PixelData"].VR = "OB"
    ds.save_as(path, enforce_file_format=True)
    return path


def write_16bit_dicom(path: Path, side: int, *, jpeg2000: bool = False) -> Path:
    """A side x side 16-bit DICOM with Rescale Slope/Intercept and a window; uncompressed
    (2 bytes a pixel: 100 MB at 7070) or JPEG 2000 lossless."""
    import numpy as np
    from PIL import Image
    from pydicom.uid import JPEG2000Lossless

    small = np.random.default_rng(0).integers(0, 65535, (64, 64)).astype(np.float32)
    big = Image.fromarray(small, mode="F").resize((side, side), Image.Resampling.BICUBIC)
    pixels = np.clip(np.asarray(big), 0, 65535).astype(np.uint16)
    del big
    ds: Any = dx_dataset(side, side, bits=16)
    ds.RescaleSlope = "1.5"
    ds.RescaleIntercept = "-1024"
    ds.RescaleType = "US"
    ds.WindowCenter = "30000"
    ds.WindowWidth = "60000"
    if jpeg2000:
        ds.compress(JPEG2000Lossless, pixels, encoding_plugin="pylibjpeg")
    else:
        ds.PixelData = pixels.tobytes()
    ds.save_as(path, enforce_file_format=True)
    return path


def write_noise_j2k(path: Path, side: int) -> Path:
    """A side x side 12-bit DICOM of uniform noise (a radiograph's bit depth; it codes to
    about 1.6 bytes a pixel, 80 MB at 50 megapixels, under CXR_MAX_UPLOAD_MB), JPEG 2000
    lossless."""
    import numpy as np
    from pydicom.uid import JPEG2000Lossless

    pixels = np.random.default_rng(0).integers(0, 4096, (side, side), dtype=np.uint16)
    ds: Any = dx_dataset(side, side, bits=16, stored=12)
    ds.compress(JPEG2000Lossless, pixels, encoding_plugin="pylibjpeg")
    ds.save_as(path, enforce_file_format=True)
    return path


def write_checkpoint(path: Path, image_size: int) -> Path:
    """Random ResNet-50, 14 labels, every label positive (threshold 0)."""
    from models.checkpoint import build_demo_checkpoint, load_checkpoint, save_checkpoint

    build_demo_checkpoint(path, arch="resnet50", image_size=image_size)
    ckpt = load_checkpoint(path)
    ckpt.card.thresholds = dict.fromkeys(ckpt.card.labels, 0.0)
    return save_checkpoint(path, model=ckpt.model, card=ckpt.card)


def _status_kb(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in {"VmRSS", "VmHWM"}:
            out[key] = int(value.split()[0])
    return out


def _descendants(pid: int) -> list[int]:
    """Processes under `pid` (the fork server and the decoding workers it forks)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        parents[int(stat.parent.name)] = int(fields[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found += children
        frontier += children
    return found


def _workers_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM summed over the server's descendant processes."""
    total = {"VmRSS": 0, "VmHWM": 0}
    for child in _descendants(pid):
        try:
            status = _status_kb(child)
        except OSError:
            continue
        for key in total:
            total[key] += status.get(key, 0)
    return total


def _post(url: str, data: bytes) -> dict[str, object]:
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/dicom"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=600) as response:  # noqa: S310 - loopback
        result: dict[str, object] = json.loads(response.read())
        return result


@contextmanager
def serve(
    checkpoint: Path, storage: Path, code: Path, max_pixels: int
) -> Iterator[tuple[Any, str]]:
    """A fresh `cxr serve` from `code` on a free loopback port; yields (process, base URL)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(code), "CXR_MAX_PIXELS": str(max_pixels)}
    env.pop("CXR_API_KEYS", None)
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--model",
           str(checkpoint), "--device", "cpu", "--storage-dir", str(storage),
           "--log-level", "warning"]  # fmt: skip
    server = subprocess.Popen(
        cmd, env=env, cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(f"{base}/readyz", timeout=5):  # noqa: S310
                    break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None or time.monotonic() > deadline:
                    err = server.stderr.read().decode() if server.stderr else ""
                    raise RuntimeError(f"server did not start: {err[-2000:]}") from None
                time.sleep(0.5)
        yield server, base
    finally:
        server.terminate()
        server.wait(timeout=30)


def measure(
    dicom: Path,
    checkpoint: Path,
    work: Path,
    code: Path,
    *,
    posts: int = 2,
    concurrent: int = 1,
    max_pixels: int = 50_000_000,
) -> dict[str, float]:
    """Start a server, warm it up with a small image, post `dicom` (`posts` times in a row,
    or `concurrent` at once); RSS in MiB."""
    storage = work / f"storage-{dicom.stem}-{concurrent}"
    with serve(checkpoint, storage, code, max_pixels) as (server, base):
        _post(f"{base}/v1/images/predict", (work / "warm.dcm").read_bytes())
        idle = _status_kb(server.pid)["VmRSS"]
        workers_idle = _workers_kb(server.pid)["VmRSS"]
        data = dicom.read_bytes()
        status = 200
        t0 = time.perf_counter()
        if concurrent > 1:
            errors: list[str] = []

            def one() -> None:
                try:
                    _post(f"{base}/v1/images/predict", data)
                except (urllib.error.URLError, ConnectionError) as exc:
                    errors.append(str(exc))

            threads = [threading.Thread(target=one) for _ in range(concurrent)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if errors:
                raise RuntimeError(f"{len(errors)} of {concurrent} requests failed: {errors[0]}")
            body: dict[str, object] = {}
        else:
            try:
                body = _post(f"{base}/v1/images/predict", data)
            except urllib.error.HTTPError as exc:  # refused: the figures say what it cost
                body, posts, status = {}, 1, exc.code
        seconds = time.perf_counter() - t0
        first = _status_kb(server.pid)
        workers = _workers_kb(server.pid)
        heatmaps = body.get("heatmaps") or {}
        assert isinstance(heatmaps, dict)
        if heatmaps:
            url = next(iter(heatmaps.values()))
            with urllib.request.urlopen(f"{base}{url}", timeout=120) as response:  # noqa: S310
                response.read()
        time.sleep(0.5)
        workers_after = _workers_kb(server.pid)["VmRSS"]
        second = first
        if posts > 1:
            _post(f"{base}/v1/images/predict", data)
            time.sleep(0.5)
            second = _status_kb(server.pid)
    return {
        "idle": idle / 1024,
        "peak": first["VmHWM"] / 1024,
        "after": first["VmRSS"] / 1024,
        "peak2": second["VmHWM"] / 1024,
        "after2": second["VmRSS"] / 1024,
        "seconds": seconds,
        "file_mb": len(data) / 1e6,
        # Decoding workers (CXR_DECODE_IN_WORKERS): the sum of their high-water marks
        # above their idle RSS; an older checkout decodes in the server and has none.
        "workers": (workers["VmHWM"] - workers_idle) / 1024,
        "workers_after": (workers_after - workers_idle) / 1024,
        "status": float(status),
    }


def _row(label: str, r: dict[str, float], posts: int) -> str:
    if r.get("status", 200) != 200:
        label = f"{label} ({r['status']:.0f})"
    second = f"{r['peak2']:>9.0f} {r['after2']:>9.0f}" if posts > 1 else f"{'-':>9} {'-':>9}"
    return (
        f"{label:<22} {r['file_mb']:>8.1f} {r['idle']:>7.0f} {r['peak']:>7.0f} "
        f"{r['peak'] - r['idle']:>+7.0f} {r['after']:>7.0f} {second} {r['seconds']:>8.2f}"
        f" {r['workers']:>+9.0f} {r['workers_after']:>+9.0f}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 3000, 10000])
    parser.add_argument("--side16", type=int, default=7070, help="side of the 16-bit images")
    parser.add_argument(
        "--noise-sides", type=int, nargs="+", default=[7070, 5000], help="j2knoise sides"
    )
    parser.add_argument("--concurrent", type=int, default=8, help="posts at once (concurrent)")
    parser.add_argument("--image-size", type=int, default=512, help="model input side")
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout the server runs")
    args = parser.parse_args()
    if not Path("/proc/self/status").is_file():
        say("skipped: needs Linux /proc to read the server's peak RSS")
        return 0
    code = args.code.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        checkpoint = write_checkpoint(work / "r50.pt", args.image_size)
        write_jpeg_dicom(work / "warm.dcm", 256)
        say(
            f"cxr serve from {code} (uvicorn, SQLite), ResNet-50 at {args.image_size}, "
            "14 labels all positive (14 heatmaps per request); RSS of the server in MiB"
        )
        say(f"{'input':<22} {'file MB':>8} {'idle':>7} {'peak':>7} {'+peak':>7} "
             f"{'after':>7} {'2nd peak':>9} {'after 2nd':>9} {'seconds':>8} "
             f"{'+workers':>9} {'w. after':>9}")  # fmt: skip
        if "jpeg" in args.cases:
            for side in args.sizes:
                dicom = write_jpeg_dicom(work / f"{side}.dcm", side)
                r = measure(dicom, checkpoint, work, code, max_pixels=max(side**2, 50_000_000))
                say(_row(f"{side}x{side} JPEG 8-bit", r, 2))
                dicom.unlink()
        side = args.side16
        if "rescale16" in args.cases or "concurrent" in args.cases:
            raw = write_16bit_dicom(work / f"raw16-{side}.dcm", side)
            if "rescale16" in args.cases:
                r = measure(raw, checkpoint, work, code, posts=1)
                say(_row(f"{side}x{side} 16-bit rescale", r, 1))
            if "concurrent" in args.cases:
                r = measure(raw, checkpoint, work, code, posts=1, concurrent=args.concurrent)
                say(_row(f"{args.concurrent} x {side}x{side} 16-bit", r, 1))
            raw.unlink()
        if "j2k16" in args.cases:
            j2k = write_16bit_dicom(work / f"j2k16-{side}.dcm", side, jpeg2000=True)
            r = measure(j2k, checkpoint, work, code, posts=1)
            say(_row(f"{side}x{side} 16-bit JPEG 2000", r, 1))
        if "j2knoise" in args.cases:
            for noise_side in args.noise_sides:
                noise = write_noise_j2k(work / f"j2knoise-{noise_side}.dcm", noise_side)
                r = measure(noise, checkpoint, work, code, posts=1)
                say(_row(f"{noise_side}x{noise_side} noise J2K", r, 1))
                noise.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
