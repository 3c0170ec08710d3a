"""Peak memory of one image prediction through the real service (issue 7, item 5).

For each side (default 1024, 3000 and 10000 pixels) this writes a square 8-bit JPEG
Baseline DICOM (smooth synthetic content, so a 10000 x 10000 file is about 1 MB, like
the issue's upload), starts a fresh `cxr serve` (uvicorn, SQLite, a random-weight
ResNet-50 checkpoint, every label positive so every label gets a heatmap), posts the file
twice to `POST /v1/images/predict`, fetches one overlay PNG, and reads the server's
/proc/<pid>/status:

  idle   VmRSS after start-up and one small warm-up request
  peak   VmHWM (high-water mark) after the first large request
  after  VmRSS once the requests are answered (what the server keeps)

A fresh process per size keeps the high-water marks apart. CXR_MAX_PIXELS is raised to
let the 10000 x 10000 image in (by default it is refused, 413, before decoding). Linux
only (/proc).

    python benchmarks/predict_memory.py                      # 1024, 3000, 10000
    python benchmarks/predict_memory.py --sizes 1024 3000 --image-size 512
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def write_jpeg_dicom(path: Path, side: int) -> Path:
    """A side x side MONOCHROME2 8-bit JPEG Baseline DICOM with smooth content."""
    import numpy as np
    from PIL import Image
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.encaps import encapsulate
    from pydicom.uid import UID, JPEGBaseline8Bit, generate_uid

    small = np.random.default_rng(0).integers(0, 255, (64, 64), dtype=np.uint8)
    big = Image.fromarray(small).resize((side, side), Image.Resampling.BICUBIC)
    buffer = io.BytesIO()
    big.save(buffer, format="JPEG", quality=90)
    del big
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = JPEGBaseline8Bit
    ds.file_meta.MediaStorageSOPClassUID = UID("1.2.840.10008.5.1.4.1.1.1.1")
    ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.SOPClassUID = ds.file_meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID = generate_uid()
    ds.SeriesInstanceUID = generate_uid()
    ds.Modality = "DX"
    ds.Rows = ds.Columns = side
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME2"
    ds.BitsAllocated = ds.BitsStored = 8
    ds.HighBit = 7
    ds.PixelRepresentation = 0
    ds.PixelData = encapsulate([buffer.getvalue()])
    ds["PixelData"].VR = "OB"
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, data: bytes) -> dict[str, object]:
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/dicom"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=600) as response:  # noqa: S310 - loopback
        result: dict[str, object] = json.loads(response.read())
        return result


def measure(side: int, dicom: Path, checkpoint: Path, work: Path) -> dict[str, float]:
    """Start a server, warm it up with a small image, post `dicom` twice; RSS in MiB."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("CXR_API_KEYS", None)
    # The default CXR_MAX_PIXELS (50 megapixels) refuses 10000 x 10000 with 413 before
    # decoding; raise it so the largest size is measured (the upload was accepted).
    env["CXR_MAX_PIXELS"] = str(max(side * side, 50_000_000))
    storage = work / f"storage-{side}"
    cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--model",
           str(checkpoint), "--device", "cpu", "--storage-dir", str(storage),
           "--log-level", "warning"]  # fmt: skip
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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
        _post(f"{base}/v1/images/predict", (work / "warm.dcm").read_bytes())
        idle = _status_kb(server.pid)["VmRSS"]
        data = dicom.read_bytes()
        t0 = time.perf_counter()
        body = _post(f"{base}/v1/images/predict", data)
        seconds = time.perf_counter() - t0
        first = _status_kb(server.pid)
        heatmaps = body.get("heatmaps") or {}
        assert isinstance(heatmaps, dict)
        if heatmaps:
            url = next(iter(heatmaps.values()))
            with urllib.request.urlopen(f"{base}{url}", timeout=120) as response:  # noqa: S310
                response.read()
        _post(f"{base}/v1/images/predict", data)
        time.sleep(0.5)
        second = _status_kb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return {
        "idle": idle / 1024,
        "peak": first["VmHWM"] / 1024,
        "after": first["VmRSS"] / 1024,
        "peak2": second["VmHWM"] / 1024,
        "after2": second["VmRSS"] / 1024,
        "seconds": seconds,
        "labels": float(len(heatmaps)),
        "file_mb": len(data) / 1e6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 3000, 10000])
    parser.add_argument("--image-size", type=int, default=512, help="model input side")
    args = parser.parse_args()
    if not Path("/proc/self/status").is_file():
        _say("skipped: needs Linux /proc to read the server's peak RSS")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        checkpoint = write_checkpoint(work / "r50.pt", args.image_size)
        write_jpeg_dicom(work / "warm.dcm", 256)
        _say(
            f"cxr serve (uvicorn, SQLite), ResNet-50 at {args.image_size}, 14 labels all "
            "positive (14 heatmaps per request); RSS of the server process in MiB"
        )
        _say(f"{'input':>12} {'file MB':>8} {'idle':>7} {'peak':>7} {'after':>7} "
             f"{'2nd peak':>9} {'after 2nd':>9} {'s/request':>9}")  # fmt: skip
        for side in args.sizes:
            dicom = write_jpeg_dicom(work / f"{side}.dcm", side)
            r = measure(side, dicom, checkpoint, work)
            _say(
                f"{side:>5}x{side:<6} {r['file_mb']:>8.2f} {r['idle']:>7.0f} {r['peak']:>7.0f} "
                f"{r['after']:>7.0f} {r['peak2']:>9.0f} {r['after2']:>9.0f} {r['seconds']:>9.2f}"
            )
            dicom.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
