"""`cxr batch --dicomweb` and `cxr serve` against a hostile DICOMweb server (issue 18).

Starts the loopback server of tests/hostile_pacs.py and runs, each in a fresh
process of the checkout given by --tree (default: this one), one scenario at a time:

- gzip:   the WADO answer is a gzip bomb (--gzip-mb compressed, about 1000x decoded);
- plain:  the WADO answer is --plain-mb of plain bytes;
- paging: QIDO /studies fills every page with new UIDs, never ending;
- slow:   the WADO answer comes at one byte every --slow-every seconds (`--timeout 5`);
- stuck:  `cxr serve`: a job stuck on the slow answer, a second job queued, DELETE of the
          first; then SIGTERM. Times until the second job ends and until the server exits.

For each it prints the wall time, the peak RSS of the process (os.wait4), its exit status
(or "killed" once --limit-s or --rss-limit-mb is reached) and what the server sent.

    nice -n 10 env PYTHONPATH=. python benchmarks/hostile_dicomweb.py               # this tree
    nice -n 10 env PYTHONPATH=. python benchmarks/hostile_dicomweb.py --tree /work/main

Not a timed test: figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
from bench_kit import say

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "app"))  # service_fixtures: DICOM builders, free_port
sys.path.insert(0, str(ROOT / "tests"))  # the hostile server and dicom_factory

from hostile_pacs import HostileDicomweb  # noqa: E402
from service_fixtures import build_dataset, dx_bytes, free_port, to_bytes  # noqa: E402

WADO = r"/instances/[^/]+$"


def _env(tree: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CXR_")}
    return env | {"PYTHONPATH": str(tree)} | extra


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _run(
    command: list[str], env: dict[str, str], limit_s: float, rss_limit_mb: float
) -> dict[str, Any]:
    """Run until exit, `limit_s` or `rss_limit_mb` (then SIGKILL); peak RSS from wait4."""
    began = time.monotonic()
    # In the tree's folder: `python -m` puts the working folder before PYTHONPATH.
    proc = subprocess.Popen(
        command, cwd=env["PYTHONPATH"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    killed: list[str] = []

    def watch() -> None:
        while proc.poll() is None:
            if time.monotonic() - began > limit_s:
                killed.append(f"killed after {limit_s:g} s")
            elif _rss_mb(proc.pid) > rss_limit_mb:
                killed.append(f"killed at {rss_limit_mb:g} MB RSS")
            if killed:
                proc.kill()
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    watcher.join()
    lines = [line for line in err.splitlines() if line.startswith(("cxr", "Traceback", "  File"))]
    lines = lines or [line for line in err.splitlines() if line.strip()]
    return {
        "ended": time.monotonic(),
        "wall_s": time.monotonic() - began,
        "rss_mb": usage.ru_maxrss / 1024,
        "status": killed[0] if killed else f"exit {proc.returncode}",
        "last": lines[-1][:160] if lines else "",
    }


def _dicom_head(size: int) -> bytes:
    """A DX header whose Pixel Data runs to `size` bytes (zeros follow): once fetched, it
    fails from its header (over CXR_MAX_PIXELS), so the figures are the fetch's."""
    columns = 8192
    ds = build_dataset(pixels=np.zeros((1, columns), np.uint16))
    ds.Rows = size // (2 * columns)
    data = to_bytes(ds)
    head = data[: -(2 * columns + 4)]  # Pixel Data's length and value (OW: 4-byte length)
    return head + struct.pack("<I", size - len(head) - 4)


def _batch(tree: Path, url: str, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", "batch", "--dicomweb", url, "-o", str(out), *extra]


def scenario(name: str, args: argparse.Namespace, tmp: Path) -> None:
    with HostileDicomweb([dx_bytes()]) as pacs:
        extra: list[str] = []
        if name == "gzip":
            pacs.on(WADO, pacs.gzip_bomb(int(args.gzip_mb * 1000) * 2**20))
            what = f"gzip bomb, about {args.gzip_mb:g} MB compressed"
        elif name == "plain":
            size = int(args.plain_mb * 2**20)
            pacs.on(WADO, pacs.huge(size, declare_length=False, prefix=_dicom_head(size)))
            what = f"{args.plain_mb:g} MiB plain WADO answer (no Content-Length)"
        elif name == "paging":
            pacs.on(r"/studies$", pacs.endless_pages())
            what = "endless QIDO paging"
        elif name == "slow":
            pacs.on(WADO, pacs.slow(args.slow_every))
            extra = ["--timeout", "5"]
            what = f"1 byte every {args.slow_every:g} s, --timeout 5"
        elif name == "baseline":
            what = "a well-behaved server, one instance"
        else:
            raise SystemExit(f"unknown scenario {name}")
        result = _run(
            _batch(args.tree, pacs.url, tmp / f"{name}.jsonl", *extra),
            _env(args.tree),
            args.limit_s,
            args.rss_limit_mb,
        )
        pages = sum(1 for r in pacs.requests if "/studies?" in r or r.endswith("/studies"))
        first = pacs.first_request_at
        served = f" ({result['ended'] - first:.1f} s after the first request)" if first else ""
        say(
            f"{name:8s} {what}: {result['wall_s']:.1f} s{served}, "
            f"peak RSS {result['rss_mb']:.0f} MB, "
            f"{result['status']}; server sent {pacs.bytes_sent / 2**20:.2f} MiB"
            + (f", {pages} QIDO pages" if name == "paging" else "")
            + f"\n         last line: {result['last']}"
        )


def stuck(args: argparse.Namespace, tmp: Path) -> None:
    """A job stuck on a slow fetch, a second job, DELETE of the first, then SIGTERM."""
    with HostileDicomweb([dx_bytes()]) as pacs:
        pacs.on(WADO, pacs.slow(args.slow_every, body=b"x" * 10**6))
        port = free_port()
        env = _env(
            args.tree,
            CXR_STORAGE_DIR=str(tmp / "storage"),
            CXR_DICOMWEB_URL=pacs.url,
            CXR_DICOMWEB_TIMEOUT_S="600",  # the deadline is not what frees it here
        )
        began = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "serve", "--port", str(port),
             "--log-level", "warning"],
            cwd=args.tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}/v1/batches"

        def call(method: str, url: str, body: Any = None) -> Any:
            data = json.dumps(body).encode() if body is not None else None
            request = urllib.request.Request(url, data=data, method=method)
            request.add_header("Content-Type", "application/json")
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read()
            return json.loads(text) if text else None

        try:
            while True:
                try:
                    call("GET", base)
                    break
                except OSError:
                    if time.monotonic() - began > 120:
                        raise
                    time.sleep(0.2)
            first = call("POST", base, {"dicomweb": {}})["id"]
            while not any("/instances/" in r for r in pacs.requests):  # the WADO fetch began
                time.sleep(0.1)
            second = call("POST", base, {"dicomweb": {"modality": ["CT"]}})["id"]
            time.sleep(1.0)
            deleted = time.monotonic()
            call("DELETE", f"{base}/{first}")
            state = "queued"
            while state in ("queued", "running") and time.monotonic() - deleted < args.limit_s:
                state = call("GET", f"{base}/{second}")["state"]
                time.sleep(0.1)
            freed = time.monotonic() - deleted
            say(
                f"stuck    DELETE of a job stuck on a slow fetch: the next job is {state} "
                f"{freed:.1f} s later"
            )
            term = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=max(args.limit_s, 60))
                waited = time.monotonic() - term
                say(f"stuck    SIGTERM: exited {proc.returncode} after {waited:.1f} s")
            except subprocess.TimeoutExpired:
                say(f"stuck    SIGTERM: still running after {max(args.limit_s, 60):g} s (killed)")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="checkout to run (PYTHONPATH)")
    parser.add_argument(
        "--scenarios", default="baseline,gzip,plain,paging,slow,stuck", help="comma-separated"
    )
    parser.add_argument("--gzip-mb", type=float, default=1.0, help="compressed size of the bomb")
    parser.add_argument("--plain-mb", type=float, default=200.0)
    parser.add_argument("--slow-every", type=float, default=2.0, help="seconds per byte")
    parser.add_argument("--limit-s", type=float, default=40.0, help="kill a run after this")
    parser.add_argument("--rss-limit-mb", type=float, default=8000.0, help="kill a run above this")
    args = parser.parse_args()
    say(f"tree {args.tree.resolve()}")
    with tempfile.TemporaryDirectory(prefix="cxr-hostile-") as tmp:
        for name in args.scenarios.split(","):
            if name == "stuck":
                stuck(args, Path(tmp))
            else:
                scenario(name, args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
