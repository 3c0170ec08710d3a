"""Report-labeling latency while a batch job scans and reads a large export (issue 7 item 4).

Generates N small DICOMs, starts the service (SQLite in a temporary folder, no model),
posts a batch job on them and, while it runs, sends R report-labeling requests one after
another. Prints the requests' latency (p50, p99, max), how far the job had got, and the
job's total time.

    nice -n 10 env PYTHONPATH=. python benchmarks/batch_scan.py --files 2000 --requests 50
    nice -n 10 env PYTHONPATH=. python benchmarks/batch_scan.py --files 2000 --workers 0
    PYTHONPATH=. python benchmarks/batch_scan.py --files 400 --side 2048 --during reading
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from bench_kit import dx_bytes


def _dicom_bytes(side: int = 64) -> bytes:
    pixels = np.random.default_rng(0).integers(0, 4095, (side, side), dtype=np.uint16)
    return dx_bytes(pixels, AccessionNumber="BENCH")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument(
        "--workers", type=int, help="CXR_BATCH_WORKERS (default: the setting's, the cores)"
    )
    parser.add_argument("--side", type=int, default=64, help="image rows and columns (64)")
    parser.add_argument(
        "--during",
        choices=["scan", "reading"],
        default="scan",
        help="send the requests while the job scans (default) or once its scan is done, "
        "while it reads and decodes the images",
    )
    args = parser.parse_args()
    # Imported here, not at the top: the batch job's decoding workers fork from a server
    # that imports this script as its main module (and would import torch with the app).
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    with tempfile.TemporaryDirectory(prefix="cxr-bench-") as tmp:
        root = Path(tmp) / "roots"
        export = root / "export"
        export.mkdir(parents=True)
        data = _dicom_bytes(args.side)
        for i in range(args.files):
            (export / f"IM{i:06d}.dcm").write_bytes(data)
        settings = Settings(
            storage_dir=Path(tmp) / "storage", batch_roots=[root], batch_workers=args.workers
        )
        # A host the service answers to without CXR_ALLOWED_HOSTS (not TestClient's own).
        with TestClient(create_app(settings), base_url="http://localhost") as client:
            began = time.perf_counter()
            job_id = client.post("/v1/batches", json={"path": "export"}).json()["id"]
            while (
                args.during == "reading" and not client.get(f"/v1/batches/{job_id}").json()["total"]
            ):
                time.sleep(0.05)
            latencies, errors = [], 0
            for i in range(args.requests):
                start = time.perf_counter()
                response = client.post(
                    "/v1/reports/label", json={"id": f"r{i}", "text": "Small left effusion."}
                )
                latencies.append(time.perf_counter() - start)
                errors += response.status_code != 200
            during = client.get(f"/v1/batches/{job_id}").json()
            while (status := client.get(f"/v1/batches/{job_id}").json())["state"] == "running":
                time.sleep(0.2)
            total_s = time.perf_counter() - began
    latencies.sort()
    processed = during["done"] + during["skipped"] + during["failed"]
    recorded = processed + during["pending"]
    p99 = latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))]
    sys.stdout.write(
        f"{args.requests} report requests during a {args.files}-file batch job (SQLite): "
        f"p50 {statistics.median(latencies) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, "
        f"max {latencies[-1] * 1000:.0f} ms, {errors} errors\n"
        f"job after the requests: {during['state']}, {recorded} files recorded by its scan "
        f"({'complete' if during['total'] else 'still scanning'}), {processed} processed; "
        f"whole job {status['state']} in {total_s:.1f} s\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
