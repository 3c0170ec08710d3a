"""Decoder time bombs: JPEG scan bombs as files and against a real `cxr serve` (issue 42 H2).

A progressive JPEG whose smallest scan is repeated `--repeats` times (3,000: about 70 KB
at 2048 x 2048; `tests/dicom_factory.scan_bomb_jpeg`) is decoded one pass over the image
per scan. Two scenarios, each run with the code of `--code` (default: this checkout):

- `file`: the bomb as a JPEG (`models.images.load_image`) and as a JPEG Baseline DICOM
  (`models.dicom.read_dicom`), each in a fresh process (`--timeout` seconds at most): the
  time to the decoded image or to the refusal, and which.
- `service`: `cxr serve` with the shipped demo model (one decode slot per core, the
  defaults otherwise). One real upload (a 1024 x 1024 DICOM) is timed alone; then
  `--bombs` bomb uploads are posted at once, each client giving up after `--give-up`
  seconds, and the real upload is sent again while they are queued: its time, the
  bombs' statuses, and the time until a third real upload answers at its normal speed.
- `leave`: `cxr serve` with the demo model and one decode slot (CXR_MAX_CONCURRENT_DECODES
  =1, CXR_DECODE_TIMEOUT_S=120). A slow upload that passes every check (16-bit noise as
  JPEG 2000 lossless, `--slow-side` pixels a side: the decoder's worst content) is
  posted by a client that gives up after 1.5 s; then a real upload is timed: it waits for
  the abandoned decode unless that decode is stopped when its client leaves.

    nice -n 10 python benchmarks/hostile_decode.py                    # this checkout
    nice -n 10 python benchmarks/hostile_decode.py --code /work/base   # before
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hostile_http import KEY, Server

ROOT = Path(__file__).resolve().parents[1]
sys.path += [str(ROOT / "tests")]  # dicom_factory: the scan bomb, its DICOM, a real image

_DECODE = """
import sys, time
from models.images import load_image
from models.dicom import read_dicom
kind, path = sys.argv[1], sys.argv[2]
start = time.perf_counter()
try:
    (load_image if kind == "jpeg" else read_dicom)(path)
    outcome = "decoded"
except Exception as exc:
    outcome = type(exc).__name__
print(f"{outcome} {time.perf_counter() - start:.3f}")
"""


def _inputs(tmp: Path, repeats: int) -> dict[str, Path]:
    from dicom_factory import build_dataset, chest_pixels, jpeg_dicom, scan_bomb_jpeg, to_bytes

    bomb = scan_bomb_jpeg(side=2048, repeats=repeats)
    paths = {
        "jpeg": tmp / "bomb.jpg",
        "dicom": tmp / "bomb.dcm",
        "real": tmp / "real.dcm",
    }
    paths["jpeg"].write_bytes(bomb)
    paths["dicom"].write_bytes(to_bytes(jpeg_dicom(bomb, 2048, 2048)))
    paths["real"].write_bytes(to_bytes(build_dataset(pixels=chest_pixels(1024, 1024))))
    return paths


def scenario_file(code: Path, args: argparse.Namespace, paths: dict[str, Path]) -> dict[str, Any]:
    result: dict[str, Any] = {"bomb_kb": round(paths["jpeg"].stat().st_size / 1024, 1)}
    for kind in ("jpeg", "dicom"):
        command = [sys.executable, "-c", _DECODE, kind, str(paths[kind])]
        env = {"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"}
        try:
            run = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=args.timeout, cwd=code
            )
            outcome, seconds = run.stdout.split()[-2:]
            result[kind] = {"outcome": outcome, "seconds": float(seconds)}
        except subprocess.TimeoutExpired:
            result[kind] = {"outcome": f"still decoding after {args.timeout:g} s"}
    return result


def _post(port: int, body: bytes, timeout: float) -> tuple[int, float]:
    """(status, seconds) of one DICOM upload; status 0: no answer within `timeout`."""
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/dicom", "X-API-Key": KEY}
        conn.request("POST", "/v1/images/predict", body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        status = response.status
    except OSError:
        status = 0
    finally:
        conn.close()
    return status, time.perf_counter() - start


def scenario_service(
    code: Path, args: argparse.Namespace, paths: dict[str, Path]
) -> dict[str, Any]:
    real, bomb = paths["real"].read_bytes(), paths["dicom"].read_bytes()
    extra = {"CXR_MODEL": str(ROOT / "models" / "configs" / "demo_phantoms.v3.pt")}
    result: dict[str, Any] = {"bombs": args.bombs}
    with tempfile.TemporaryDirectory(prefix="cxr-decode-") as tmp:
        server = Server(code, Path(tmp), args.startup_timeout, extra)
        try:
            _post(server.port, real, 60)  # warm: the worker and the model
            result["real_alone_s"] = round(_post(server.port, real, 60)[1], 3)
            with concurrent.futures.ThreadPoolExecutor(args.bombs + 1) as pool:
                flood = [
                    pool.submit(_post, server.port, bomb, args.give_up) for _ in range(args.bombs)
                ]
                time.sleep(1.0)  # the bombs received and queued
                status, seconds = _post(server.port, real, 600)
                result["real_during_s"] = round(seconds, 3)
                result["real_during_status"] = status
                statuses = [f.result()[0] for f in flood]
            result["bomb_statuses"] = {str(s): statuses.count(s) for s in sorted(set(statuses))}
            began = time.perf_counter()
            normal = 3 * result["real_alone_s"] + 1.0
            while True:  # until image prediction answers at its normal speed again
                status, seconds = _post(server.port, real, 600)
                if status == 200 and seconds <= normal:
                    break
                if time.perf_counter() - began > 900:
                    break
            result["normal_again_after_s"] = round(time.perf_counter() - began, 2)
        finally:
            server.stop()
    return result


def scenario_leave(code: Path, args: argparse.Namespace, paths: dict[str, Path]) -> dict[str, Any]:
    from predict_memory import write_noise_j2k

    real = paths["real"].read_bytes()
    extra = {
        "CXR_MODEL": str(ROOT / "models" / "configs" / "demo_phantoms.v3.pt"),
        "CXR_MAX_CONCURRENT_DECODES": "1",
        "CXR_DECODE_TIMEOUT_S": "120",
    }
    with tempfile.TemporaryDirectory(prefix="cxr-leave-") as tmp:
        slow = write_noise_j2k(Path(tmp) / "slow.dcm", args.slow_side).read_bytes()
        result: dict[str, Any] = {"slow_mb": round(len(slow) / 1e6, 1), "side": args.slow_side}
        server = Server(code, Path(tmp), args.startup_timeout, extra)
        try:
            _post(server.port, real, 60)  # warm: the worker and the model
            result["real_alone_s"] = round(_post(server.port, real, 60)[1], 3)
            result["slow_alone"] = _post(server.port, slow, 300)
            result["slow_alone"] = [result["slow_alone"][0], round(result["slow_alone"][1], 2)]
            status, _ = _post(server.port, slow, 1.5)  # the client gives up while it decodes
            result["left_status"] = status
            status, seconds = _post(server.port, real, 300)
            result["real_after_leave"] = [status, round(seconds, 2)]
        finally:
            server.stop()
    return result


SCENARIOS = {"file": scenario_file, "service": scenario_service, "leave": scenario_leave}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout to run (PYTHONPATH)")
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append")
    parser.add_argument("--slow-side", type=int, default=5000, help="side of `leave`'s image")
    parser.add_argument("--repeats", type=int, default=3000, help="repeats of the bomb's scan")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds for `file`")
    parser.add_argument("--bombs", type=int, default=20, help="bomb uploads of `service`")
    parser.add_argument("--give-up", type=float, default=10.0, help="a bomb client's patience")
    parser.add_argument("--startup-timeout", type=float, default=180.0)
    args = parser.parse_args(argv)
    code = args.code.resolve()
    figures: dict[str, Any] = {"code": str(code)}
    with tempfile.TemporaryDirectory(prefix="cxr-bombs-") as tmp:
        paths = _inputs(Path(tmp), args.repeats)
        for name in args.only or list(SCENARIOS):
            figures[name] = SCENARIOS[name](code, args, paths)
            sys.stdout.write(f"{name}: {json.dumps(figures[name], sort_keys=True)}\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
