"""DICOM-to-result throughput: decode + preprocess + forward + CAM + boxes.

Runs a ResNet-50 ChestNet (random weights: the cost is the same as a trained one) on
DICOM files at model input sizes 512 and 1024, and reports images/s and the share of
time per stage. By default it writes a synthetic 16-bit 2048x2500 CR DICOM (a typical
digital radiograph); pass --dicom to time real files (e.g. ../shared/data/dicom/*.dcm).
Two labels per image are made "positive" (the usual case), so two heatmaps are mapped to
original size and boxed per image.

    python benchmarks/predict.py                     # CPU
    python benchmarks/predict.py --device cuda --batch-size 32 --n 256   # GPU (bf16)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")


def _synthetic_dicom(path: Path, rows: int = 2500, columns: int = 2048) -> Path:
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
    ds.Rows, ds.Columns = rows, columns
    ds.SamplesPerPixel = 1
    ds.PhotometricInterpretation = "MONOCHROME1"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.WindowCenter, ds.WindowWidth = 2048, 3000
    rng = np.random.default_rng(0)
    ds.PixelData = rng.integers(0, 4096, (rows, columns), dtype=np.uint16).tobytes()
    ds.save_as(path, enforce_file_format=True)
    return path


def run(size: int, files: list[Path], *, n: int, batch_size: int, device: str) -> dict[str, float]:
    """Time n images at one input size; returns seconds per stage (totals) and images/s."""
    import torch

    from models.checkpoint import ModelCard, model_from_card
    from models.dicom import read_dicom
    from models.predict import Predictor, resolve_device

    labels = [f"L{i}" for i in range(14)]
    card = ModelCard(labels=labels, arch="resnet50", image_size=size)
    # Two positives per image: the other thresholds are unreachable.
    card.thresholds = {name: (0.0 if i < 2 else 1.1) for i, name in enumerate(labels)}
    torch.manual_seed(0)
    predictor = Predictor(
        model_from_card(card), card, device=resolve_device(device), batch_size=batch_size
    )
    warm = [read_dicom(files[0]).pixels] * min(batch_size, 2)
    predictor.predict(warm)  # warm-up: cudnn autotune, allocator, thread pools
    totals: dict[str, float] = defaultdict(float)
    t_start = time.perf_counter()
    done = 0
    while done < n:
        count = min(batch_size, n - done)
        t0 = time.perf_counter()
        pixels = [read_dicom(files[(done + i) % len(files)]).pixels for i in range(count)]
        totals["decode"] += time.perf_counter() - t0
        for result in predictor.predict(pixels):
            for stage, seconds in result.timings.items():
                totals[stage] += seconds
        done += count
    wall = time.perf_counter() - t_start
    return {**totals, "wall": wall, "images_per_s": n / wall}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--dicom", type=Path, nargs="*", help="DICOM files to decode (cycled)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024])
    parser.add_argument("--n", type=int, default=8, help="images per size")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, auto")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        files = list(args.dicom or [_synthetic_dicom(Path(tmp) / "synthetic.dcm")])
        from models.dicom import read_dicom

        meta = read_dicom(files[0]).meta
        device_name = (
            torch.cuda.get_device_name() if args.device != "cpu" and torch.cuda.is_available()
            else f"cpu ({torch.get_num_threads()} threads)"
        )  # fmt: skip
        _say(
            f"device: {device_name}; input DICOM {meta.rows}x{meta.columns}, "
            f"{meta.bits_stored} bit, {meta.photometric}; resnet50, 14 labels, 2 positive"
        )
        _say(f"{'size':>5} {'img/s':>8} {'ms/img':>8}  share: decode preprocess forward cam boxes")
        for size in args.sizes:
            r = run(size, files, n=args.n, batch_size=args.batch_size, device=args.device)
            stages = ["decode", "preprocess", "forward", "cam", "boxes"]
            total = sum(r[s] for s in stages)
            shares = "  ".join(f"{s} {100 * r[s] / total:4.1f}%" for s in stages)
            _say(f"{size:>5} {r['images_per_s']:>8.2f} {1000 / r['images_per_s']:>8.1f}  {shares}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
