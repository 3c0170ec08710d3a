"""PACS round trip against a real Orthanc (issue 10): pull over DICOMweb, predict, push SR+GSPS.

Uploads N generated CR images (SIZE x SIZE, 12 bits) as one study to Orthanc, then runs
`cxr batch --dicomweb URL --study UID --push sr,gsps` in this process with a random demo
model, and prints the wall time per stage and per instance: QIDO-RS search, WADO-RS
retrieval + decoding + prediction (the batch), and the STOW-RS share measured by the push
sink; then a `--resume` rerun (nothing to do) for the resume overhead.

Needs an Orthanc with DICOMweb: start the CI one with `eval "$(bash .ci/orthanc.sh)"`; skips
cleanly (exit 0) when CXR_TEST_ORTHANC_URL is not set.

    eval "$(bash .ci/orthanc.sh)"
    nice -n 10 env PYTHONPATH=. python benchmarks/pacs_roundtrip.py --n 20 --size 1024
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from bench_kit import dx_bytes
from pydicom.uid import generate_uid

CR = "1.2.840.10008.5.1.4.1.1.1"


def _cr(study: str, series: str, size: int, seed: int) -> bytes:
    y, x = np.mgrid[0:size, 0:size]
    rng = np.random.default_rng(seed)
    pixels = x * 2000 / size + ((y - size / 2) ** 2 + (x - size / 2) ** 2 < (size / 4) ** 2) * 1500
    pixels = (pixels + rng.integers(0, 50, (size, size))).astype(np.uint16)
    return dx_bytes(
        pixels,
        sop_class=CR,
        StudyInstanceUID=study,
        SeriesInstanceUID=series,
        Modality="CR",
        PatientID="BENCH",
        PatientName="Bench^Mark",
        StudyDate="20240301",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=20, help="images in the study")
    parser.add_argument("--size", type=int, default=1024, help="image side in pixels")
    args = parser.parse_args()
    url = os.environ.get("CXR_TEST_ORTHANC_URL")
    if not url:
        sys.stdout.write("pacs_roundtrip: CXR_TEST_ORTHANC_URL not set (.ci/orthanc.sh); skipped\n")
        return 0
    user = os.environ.get("CXR_TEST_ORTHANC_USER") or None
    password = os.environ.get("CXR_TEST_ORTHANC_PASSWORD") or ""
    from app.cli import main as cxr
    from batch import dicom_push
    from models.checkpoint import build_demo_checkpoint

    study, series = generate_uid(), generate_uid()
    auth = (user, password) if user else None
    with httpx.Client(base_url=url, auth=auth, timeout=60) as rest:
        for i in range(args.n):
            rest.post("/instances", content=_cr(study, series, args.size, i)).raise_for_status()

    push_seconds = 0.0
    original = dicom_push.DicomPushSink.write

    def timed(self: dicom_push.DicomPushSink, outcomes: object) -> None:
        nonlocal push_seconds
        began = time.perf_counter()
        original(self, outcomes)  # type: ignore[arg-type]
        push_seconds += time.perf_counter() - began

    dicom_push.DicomPushSink.write = timed  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = build_demo_checkpoint(Path(tmp) / "demo.pt", arch="resnet18", image_size=256)
        out = Path(tmp) / "pacs.jsonl"
        os.environ["CXR_DICOMWEB_PASSWORD"] = password
        command = [
            "batch", "--dicomweb", f"{url}/dicom-web", "--study", study, "-o", str(out),
            "--model", str(checkpoint), "--device", "cpu", "--push", "sr,gsps",
        ] + (["--user", user] if user else [])  # fmt: skip
        began = time.perf_counter()
        status = cxr(command)
        total = time.perf_counter() - began
        lines = out.read_text().splitlines()
        began = time.perf_counter()
        cxr([*command, "--resume"])
        resume = time.perf_counter() - began
    sys.stdout.write(
        f"pacs_roundtrip: {args.n} CR images {args.size}x{args.size} (resnet18 demo at 256 px, "
        f"cpu): exit {status}, {len(lines)} lines; pull+predict+push {total:.1f} s "
        f"({total / args.n:.2f} s/image, of which STOW-RS of SR+GSPS incl. building them "
        f"{push_seconds:.1f} s = {push_seconds / args.n:.2f} s/image); --resume rerun with "
        f"nothing to do {resume:.1f} s\n"
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
