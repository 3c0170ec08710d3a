"""Bounded load on a real `cxr serve` (uvicorn) on loopback: report labeling and image
prediction through HTTP, as clients see it.

Starts `python -m app.cli serve` as a subprocess on a free loopback port, with a
random-weight checkpoint (resnet18 by default: the cost of a trained one), a fresh
SQLite storage folder in a temp dir and an API key in the documented
`CXR_API_KEYS=sha256:<hex>` form. Then, for each phase, `--concurrency` client threads
send requests until `--n` requests are done or `--seconds` have passed, whichever comes
first. Prints per phase: requests, errors (any status other than 200), throughput,
p50/p99 latency, and the server's peak RSS (VmHWM from /proc/<pid>/status) after
start-up and after each phase.

    python benchmarks/service_load.py                         # defaults below
    python benchmarks/service_load.py --n-reports 500 --n-images 100 --concurrency 8
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_kit import dx_bytes, free_port, say

ROOT = Path(__file__).resolve().parents[1]

# Written for this benchmark (no shared data): typical short chest X-ray reports.
REPORTS = [
    "FINDINGS: The heart is enlarged. Small left pleural effusion. No pneumothorax.\n"
    "IMPRESSION: Cardiomegaly with small left effusion.",
    "FINDINGS: Lungs are clear. No focal consolidation, effusion or pneumothorax. "
    "Heart size normal.\nIMPRESSION: No acute cardiopulmonary process.",
    "FINDINGS: Patchy opacity in the right lower lobe, may represent pneumonia. "
    "Possible small right effusion.\nIMPRESSION: Right lower lobe pneumonia is suspected.",
    "FINDINGS: Hyperinflated lungs with flattened diaphragms, consistent with emphysema. "
    "A 9 mm nodule in the left upper lobe.\nIMPRESSION: Emphysema. Left upper lobe nodule.",
]


def _report(i: int) -> str:
    # Unique per request: the labeler caches results by text, and a load of repeats
    # would measure the cache.
    return REPORTS[i % len(REPORTS)] + f"\nCOMPARISON: prior study {i} days earlier."


def _dicom_bytes(side: int) -> bytes:
    """A synthetic 16-bit DX radiograph, side x side, as a DICOM file."""
    import numpy as np

    rng = np.random.default_rng(0)
    return dx_bytes(rng.integers(0, 4096, (side, side), dtype=np.uint16))


@contextlib.contextmanager
def serving(
    checkpoint: Path,
    work: Path,
    *,
    device: str = "cpu",
    startup_timeout: float = 180.0,
    precision: str | None = None,
    settings: dict[str, str] | None = None,
) -> Iterator[tuple[str, str, subprocess.Popen[bytes]] | None]:
    """`cxr serve` on a free loopback port with `checkpoint`, an API key and storage in
    `work` (and CXR_PRECISION=`precision` when given, and the CXR_ `settings`): yields (base
    URL, API key, process) once /readyz answers, or None (and the server's log) when it did
    not start; stops it afterwards."""
    from app.security import generate_api_key, hash_api_key

    key = generate_api_key()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CXR_")}
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env.update(PYTHONPATH=path, CXR_API_KEYS=hash_api_key(key),
               CXR_STORAGE_DIR=str(work / "storage"), CXR_DEVICE=device)  # fmt: skip
    if precision:
        env["CXR_PRECISION"] = precision
    env.update(settings or {})
    log_path = work / "server.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port),
             "--model", str(checkpoint), "--log-level", "warning"],
            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=work,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            try:
                urllib.request.urlopen(base + "/readyz", timeout=2).read()
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if server.poll() is not None or time.monotonic() > deadline:
                    say("server did not start:\n" + log_path.read_text()[-2000:])
                    yield None
                    return
                time.sleep(0.3)
        yield base, key, server
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def _vm(pid: int, field: str) -> float:
    """A /proc/<pid>/status memory field (VmHWM, VmRSS) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout: float,
    on_answer: Callable[[bytes], None] | None = None,
) -> int:
    """The status of a POST (0: no answer); `on_answer` gets a 200's body."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = response.read()
            if on_answer is not None:
                on_answer(answer)
            return int(response.status)
    except urllib.error.HTTPError as exc:
        exc.read()
        return int(exc.code)
    except (urllib.error.URLError, TimeoutError, ConnectionError):
        return 0


def run_phase(
    name: str,
    send: Callable[[int], int],
    *,
    n: int,
    seconds: float,
    concurrency: int,
) -> dict[str, float]:
    """Send up to n requests with `concurrency` threads, stopping after `seconds`."""
    lock = threading.Lock()
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    counter = iter(range(n))
    deadline = time.monotonic() + seconds

    def worker() -> None:
        while time.monotonic() < deadline:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            start = time.perf_counter()
            status = send(i)
            elapsed = time.perf_counter() - start
            with lock:
                latencies.append(elapsed)
                statuses[status] = statuses.get(status, 0) + 1

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for future in [pool.submit(worker) for _ in range(concurrency)]:
            future.result()
    wall = time.perf_counter() - start
    done = len(latencies)
    ordered = sorted(latencies)
    errors = done - statuses.get(200, 0)
    result = {
        "requests": done,
        "errors": errors,
        "seconds": wall,
        "per_s": done / wall if wall else 0.0,
        "p50_ms": 1000 * statistics.median(ordered) if ordered else float("nan"),
        "p99_ms": 1000 * ordered[min(done - 1, int(0.99 * done))] if ordered else float("nan"),
    }
    say(
        f"{name}: {done} requests in {wall:.1f} s, {result['per_s']:.1f}/s, "
        f"p50 {result['p50_ms']:.0f} ms, p99 {result['p99_ms']:.0f} ms, "
        f"errors {errors} (statuses {json.dumps(statuses, sort_keys=True)})"
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-reports", type=int, default=300, help="report requests (max)")
    parser.add_argument("--n-images", type=int, default=40, help="image requests (max)")
    parser.add_argument("--seconds", type=float, default=60.0, help="time limit per phase")
    parser.add_argument("--concurrency", type=int, default=4, help="client threads")
    parser.add_argument("--arch", default="resnet18", choices=["resnet18", "resnet50"])
    parser.add_argument("--image-size", type=int, default=512, help="model input side")
    parser.add_argument("--dicom-side", type=int, default=1024, help="uploaded image side")
    parser.add_argument("--batch-reports", type=int, default=0, help="also N-report batches")
    parser.add_argument("--startup-timeout", type=float, default=180.0)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from models.checkpoint import build_demo_checkpoint

    with (
        tempfile.TemporaryDirectory(prefix="cxr-load-") as tmp,
        serving(
            build_demo_checkpoint(
                Path(tmp) / "random.pt", arch=args.arch, image_size=args.image_size
            ),
            Path(tmp),
            startup_timeout=args.startup_timeout,
        ) as started,
    ):
        if started is None:
            return 1
        base, key, server = started
        say(
            f"cxr serve pid {server.pid} on {base}: {args.arch} at {args.image_size} px "
            f"(random weights), SQLite, {os.cpu_count()} CPUs seen, "
            f"{args.concurrency} client threads; peak RSS after start-up "
            f"{_vm(server.pid, 'VmHWM'):.0f} MiB"
        )
        auth = {"X-API-Key": key}
        json_headers = {**auth, "Content-Type": "application/json"}

        def label(i: int) -> int:
            body = {"id": f"r{i}", "text": _report(i)}
            return _post(base + "/v1/reports/label", json.dumps(body).encode(), json_headers, 60)

        run_phase(
            "reports  (POST /v1/reports/label, 1 report)",
            label,
            n=args.n_reports,
            seconds=args.seconds,
            concurrency=args.concurrency,
        )
        say(f"  server peak RSS {_vm(server.pid, 'VmHWM'):.0f} MiB")
        if args.batch_reports:
            size = args.batch_reports

            def label_batch(i: int) -> int:
                reports = [
                    {"id": str(j), "text": _report(10**6 + i * size + j)} for j in range(size)
                ]
                body = json.dumps({"reports": reports}).encode()
                return _post(base + "/v1/reports/label", body, json_headers, 120)

            batch = run_phase(
                f"reports  (POST /v1/reports/label, {size} per request)",
                label_batch,
                n=max(4, args.n_reports // size),
                seconds=args.seconds,
                concurrency=args.concurrency,
            )
            say(
                f"  {batch['per_s'] * size:.0f} reports/s; "
                f"server peak RSS {_vm(server.pid, 'VmHWM'):.0f} MiB"
            )
        dicom = _dicom_bytes(args.dicom_side)
        image_headers = {**auth, "Content-Type": "application/dicom"}
        run_phase(
            f"images   (POST /v1/images/predict, {args.dicom_side}² 16-bit DICOM, "
            f"{len(dicom) / 2**20:.1f} MiB)",
            lambda i: _post(base + "/v1/images/predict", dicom, image_headers, 300),
            n=args.n_images,
            seconds=args.seconds,
            concurrency=args.concurrency,
        )
        say(
            f"  server peak RSS {_vm(server.pid, 'VmHWM'):.0f} MiB "
            f"(now {_vm(server.pid, 'VmRSS'):.0f} MiB)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
