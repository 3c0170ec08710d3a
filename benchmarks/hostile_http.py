"""Hostile HTTP clients against a real `cxr serve` on loopback (issue 18 items 6, 7, 10;
issue 42 H1 and M1).

Starts `python -m app.cli serve` as a subprocess on a free loopback port (SQLite in a
temp folder, one API key, a batch root), one fresh server per scenario so that each
peak RSS (VmHWM from /proc/<pid>/status) is that scenario's own:

- `nokey`: a large JSON body (`--nokey-mb`, default 99 MiB: under main's 100 MiB
  limit) to POST /v1/reports/label without X-API-Key. Measures the time to the answer,
  how much of the body the client had sent by then, the server's peak RSS and the worst
  /healthz latency seen by a prober polling every 50 ms meanwhile (an event-loop stall
  shows there).
- `batch`: a large JSON body (`--batch-mb`, default 200 MiB, one huge `path`) to
  POST /v1/batches with the key: time, bytes sent, answer status and size (an echoed
  input shows as an answer as large as the body), peak RSS, worst /healthz latency.
- `methods`: `--methods` (default 2,000) requests to /healthz, each with its own method
  name, then GET /metrics: its size and (median of 3) time.
- `atlimit`: `--atlimit-n` (10) JSON bodies just under `--atlimit-mb` (2 MiB, the default
  CXR_MAX_JSON_MB) to POST /v1/batches with the key, one `path` that long: the most a
  client can now make the service parse on its event loop. Median time, answer size,
  worst /healthz latency, peak RSS.
- `slowread` (issue 42 H1): `--attackers` (80) connections each pipeline six GETs of the
  1.5 MB Swagger bundle with a 2 KB receive window and never read, against a server with
  CXR_MAX_CONNECTIONS=`--attack-cap` (64); any the server closes is reopened, for
  `--attack-seconds`. Meanwhile a legitimate client sends GET /healthz and POST
  /v1/reports/label, one of each every 0.5 s on new connections (10 s timeout): their
  statuses and worst times.
- `slowbody` (issue 42 M1): the same, with connections that send a 2 MB report body at
  1,400 bytes a second.
- `trickle` (issue 42): one client under the connection cap pipelines `--trickle-requests`
  (16, the pipelining cap) GETs of the 1.5 MB Swagger bundle and reads them at
  `--trickle-rate` bytes a second (131,072: eight times CXR_SEND_MIN_RATE, and fast
  enough that the write buffer moves before CXR_SEND_TIMEOUT_S on loopback, whose kernel
  buffers hold megabytes) for at most `--trickle-seconds`: how long the server keeps the
  connection, and how much of the 24 MB the client read.
- `amplify`: small text, large answers: 256 reports of 3,900 characters repeating one
  finding (just under CXR_MAX_REPORT_CHARS_PER_REQUEST) to POST /v1/reports/label, and 100
  questions about a 99,000-character one to POST /v1/studies/ask: answer size per request
  byte, time, peak RSS.

Give `--code` to measure another checkout (e.g. the unchanged main):

    python benchmarks/hostile_http.py                       # this checkout
    python benchmarks/hostile_http.py --code /work/main     # the same against main
    python benchmarks/hostile_http.py --only methods --methods 500

Every loop is bounded: bodies are streamed in 1 MiB pieces and sending stops as soon as
the server answers (or after `--timeout` seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench_kit import free_port, say

ROOT = Path(__file__).resolve().parents[1]
KEY = "benchmark-key-0123456789abcdef"
CHUNK = 1 << 20


def _vm_mib(pid: int, field: str) -> float:
    """A /proc/<pid>/status memory field (VmHWM, VmRSS) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Server:
    """`cxr serve` from `code` in a subprocess, on a free loopback port."""

    def __init__(
        self,
        code: Path,
        tmp: Path,
        startup_timeout: float,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        (tmp / "roots").mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CXR_")}
        env.update(
            PYTHONPATH=str(code),
            CXR_API_KEYS=KEY,
            CXR_STORAGE_DIR=str(tmp / "storage"),
            CXR_BATCH_ROOTS=str(tmp / "roots"),
            CXR_RUN_BATCH_JOBS="false",
        )
        env.update(extra_env or {})
        cmd = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1"]
        cmd += ["--port", str(self.port), "--log-level", "warning"]
        self.log = (tmp / "server.log").open("wb")
        # cwd too: `python -m` puts the working folder first on sys.path.
        self.process = subprocess.Popen(cmd, cwd=code, env=env, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + startup_timeout
        while True:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the server did not start; see {tmp / 'server.log'}")
            try:
                if _get(self.port, "/healthz", timeout=2.0)[0] == 200:
                    break
            except OSError:
                time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def _get(port: int, path: str, timeout: float = 30.0) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


class HealthProber:
    """Polls /healthz every 50 ms on a fresh connection; records each latency."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            with contextlib.suppress(OSError):
                _get(self.port, "/healthz", timeout=120.0)
            self.latencies.append(time.perf_counter() - start)
            self._stop.wait(0.05)

    def __enter__(self) -> HealthProber:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=130)

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.latencies) or [float("nan")]
        return {
            "healthz_max_ms": 1000 * ordered[-1],
            "healthz_p50_ms": 1000 * statistics.median(ordered),
        }


def _read_response(sock: socket.socket, timeout: float) -> tuple[int, int]:
    """Read one HTTP response (status, body bytes) off a raw socket."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            break
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and lines[0].startswith("HTTP/") else 0
    length = None
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    received = len(body)
    while length is None or received < length:
        try:
            piece = sock.recv(1 << 20)
        except (TimeoutError, OSError):
            break
        if not piece:
            break
        received += len(piece)
    return status, received


def post_streamed(
    port: int,
    path: str,
    headers: dict[str, str],
    prefix: bytes,
    filler: int,
    suffix: bytes,
    timeout: float,
) -> dict[str, Any]:
    """POST `prefix + b"a" * filler + suffix`, streamed; stop sending once an answer comes."""
    total = len(prefix) + filler + len(suffix)
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {total}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    sock = socket.create_connection(("127.0.0.1", port))
    start = time.perf_counter()
    sock.sendall(head.encode("latin-1") + prefix)
    sent = len(prefix)
    filler_left = filler
    piece = b"a" * CHUNK
    pending = b""
    answered = False
    sock.setblocking(False)
    deadline = start + timeout
    while time.monotonic() < deadline and sent < total:
        readable, writable, _ = select.select([sock], [sock], [], 1.0)
        if readable:
            answered = True
            break
        if writable:
            if not pending:
                if filler_left:
                    pending = piece[: min(CHUNK, filler_left)]
                    filler_left -= len(pending)
                else:
                    pending = suffix
            try:
                n = sock.send(pending)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += n
            pending = pending[n:]
    sock.setblocking(True)
    status, size = _read_response(sock, max(deadline - time.monotonic(), 1.0))
    elapsed = time.perf_counter() - start
    sock.close()
    return {
        "status": status,
        "seconds": elapsed,
        "sent_mib": sent / 2**20,
        "body_mib": total / 2**20,
        "answer_bytes": size,
        "answered_while_sending": answered,
    }


def _streamed_body(
    code: Path,
    args: argparse.Namespace,
    path: str,
    headers: dict[str, str],
    prefix: bytes,
    mb: float,
) -> dict[str, Any]:
    """One huge JSON string field streamed to `path` on a fresh server, probed for liveness."""
    with tempfile.TemporaryDirectory(prefix="cxr-hostile-") as tmp:
        server = Server(code, Path(tmp), args.startup_timeout)
        try:
            idle = _vm_mib(server.process.pid, "VmHWM")
            with HealthProber(server.port) as prober:
                result = post_streamed(
                    server.port, path, headers, prefix, int(mb * 2**20), b'"}', args.timeout
                )
                time.sleep(0.2)
            result.update(prober.summary())
            result["rss_idle_mib"] = idle
            result["rss_peak_mib"] = _vm_mib(server.process.pid, "VmHWM")
        finally:
            server.stop()
    return result


def scenario_nokey(code: Path, args: argparse.Namespace) -> dict[str, Any]:
    json_type = {"Content-Type": "application/json"}
    return _streamed_body(code, args, "/v1/reports/label", json_type, b'{"text": "', args.nokey_mb)


def scenario_batch(code: Path, args: argparse.Namespace) -> dict[str, Any]:
    headers = {"Content-Type": "application/json", "X-API-Key": KEY}
    return _streamed_body(code, args, "/v1/batches", headers, b'{"path": "', args.batch_mb)


def scenario_methods(code: Path, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cxr-hostile-") as tmp:
        server = Server(code, Path(tmp), args.startup_timeout)
        try:
            idle = _vm_mib(server.process.pid, "VmHWM")
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            start = time.perf_counter()
            statuses: dict[int, int] = {}
            for i in range(args.methods):
                conn.request(f"M{i:06d}", "/healthz")
                response = conn.getresponse()
                response.read()
                statuses[response.status] = statuses.get(response.status, 0) + 1
                if response.will_close:
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            sending = time.perf_counter() - start
            conn.close()
            scrapes = []
            size = 0
            for _ in range(3):
                t0 = time.perf_counter()
                status, body = _get(server.port, "/metrics", timeout=600)
                scrapes.append(time.perf_counter() - t0)
                size = len(body)
            result = {
                "requests": args.methods,
                "statuses": statuses,
                "requests_seconds": sending,
                "metrics_status": status,
                "metrics_bytes": size,
                "metrics_scrape_ms": 1000 * statistics.median(scrapes),
                "rss_idle_mib": idle,
                "rss_peak_mib": _vm_mib(server.process.pid, "VmHWM"),
            }
        finally:
            server.stop()
    return result


def scenario_atlimit(code: Path, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cxr-hostile-") as tmp:
        server = Server(code, Path(tmp), args.startup_timeout)
        try:
            idle = _vm_mib(server.process.pid, "VmHWM")
            runs = []
            with HealthProber(server.port) as prober:
                for _ in range(args.atlimit_n):
                    runs.append(
                        post_streamed(
                            server.port,
                            "/v1/batches",
                            {"Content-Type": "application/json", "X-API-Key": KEY},
                            b'{"path": "',
                            int(args.atlimit_mb * 2**20) - 64,
                            b'"}',
                            args.timeout,
                        )
                    )
                time.sleep(0.2)
            result: dict[str, Any] = {
                "requests": len(runs),
                "body_mib": runs[0]["body_mib"],
                "statuses": sorted({r["status"] for r in runs}),
                "seconds_median": statistics.median(r["seconds"] for r in runs),
                "answer_bytes_max": max(r["answer_bytes"] for r in runs),
            }
            result.update(prober.summary())
            result["rss_idle_mib"] = idle
            result["rss_peak_mib"] = _vm_mib(server.process.pid, "VmHWM")
        finally:
            server.stop()
    return result


def _post_json(port: int, path: str, body: bytes, timeout: float) -> tuple[int, int, float]:
    """(status, answer bytes, seconds) of one JSON POST with the key."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    start = time.perf_counter()
    try:
        headers = {"Content-Type": "application/json", "X-API-Key": KEY}
        conn.request("POST", path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, len(response.read()), time.perf_counter() - start
    finally:
        conn.close()


def scenario_amplify(code: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Small text, large answers: a finding repeated to the character limits."""
    repeated = "effusion " * 12_000
    reports = {"reports": [{"id": f"r{i}", "text": repeated[:3_900]} for i in range(256)]}
    ask = {"report": repeated[:99_000], "questions": ["Is there an effusion?"] * 100}
    cases = {
        "reports_256x3900": ("/v1/reports/label", json.dumps(reports).encode()),
        "ask_100_questions": ("/v1/studies/ask", json.dumps(ask).encode()),
    }
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="cxr-hostile-") as tmp:
        server = Server(code, Path(tmp), args.startup_timeout)
        try:
            result["rss_idle_mib"] = _vm_mib(server.process.pid, "VmHWM")
            for name, (path, body) in cases.items():
                status, size, seconds = _post_json(server.port, path, body, args.timeout)
                result[name] = {
                    "status": status,
                    "request_bytes": len(body),
                    "answer_bytes": size,
                    "answer_per_request_byte": round(size / len(body), 1),
                    "seconds": round(seconds, 2),
                }
            result["rss_peak_mib"] = _vm_mib(server.process.pid, "VmHWM")
        finally:
            server.stop()
    return result


DOCS_ASSET = b"GET /docs/assets/swagger-ui-bundle.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


class Attackers(threading.Thread):
    """Keeps `n` hostile connections open until `until`, reopening any the server closes.

    `slowread`: each pipelines six GETs of the 1.5 MB Swagger bundle with a 2 KB receive
    window and never reads. `slowbody`: each POSTs a 2 MB JSON body (under CXR_MAX_JSON_MB)
    and sends 1,400 bytes a second of it (just above the old 1,024 bytes/s minimum)."""

    def __init__(self, port: int, kind: str, n: int, until: float) -> None:
        super().__init__(daemon=True)
        self.port, self.kind, self.n, self.until = port, kind, n, until
        self.socks: list[socket.socket] = []
        self.opened = 0
        self.closed_by_server = 0

    def _open(self) -> None:
        sock = socket.socket()
        if self.kind == "slowread":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
        sock.settimeout(2.0)
        try:
            sock.connect(("127.0.0.1", self.port))
            if self.kind == "slowread":
                sock.sendall(DOCS_ASSET * 6)
            else:
                sock.sendall(
                    b"POST /v1/reports/label HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/json\r\nX-API-Key: " + KEY.encode() + b"\r\n"
                    b"Content-Length: 2000000\r\n\r\n"
                )
        except OSError:
            sock.close()
            return
        sock.setblocking(False)
        self.socks.append(sock)
        self.opened += 1

    def _alive(self, sock: socket.socket) -> bool:
        try:
            if self.kind == "slowbody":
                sock.send(b" " * 1400)
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
            return err == 0 and state == 1  # TCP_ESTABLISHED
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False

    def run(self) -> None:
        while time.monotonic() < self.until:
            for sock in list(self.socks):
                if not self._alive(sock):
                    self.closed_by_server += 1
                    self.socks.remove(sock)
                    sock.close()
            while len(self.socks) < self.n and time.monotonic() < self.until:
                self._open()
            time.sleep(1.0)

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


def _probe(port: int, method: str, path: str, body: bytes | None) -> tuple[int, float]:
    """(status, seconds) of one request on a new connection; status 0: no answer in 10 s."""
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10.0)
    try:
        headers = {"Content-Type": "application/json", "X-API-Key": KEY}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        status = response.status
    except OSError:
        status = 0
    finally:
        conn.close()
    return status, time.perf_counter() - start


def _under_attack(code: Path, args: argparse.Namespace, kind: str) -> dict[str, Any]:
    """Legitimate /healthz and label requests, one of each a second, while `kind` attacks."""
    label = json.dumps({"text": "No pneumothorax. Small left pleural effusion."}).encode()
    extra = {"CXR_MAX_CONNECTIONS": str(args.attack_cap)}
    result: dict[str, Any] = {"attackers": args.attackers, "cap": args.attack_cap}
    with tempfile.TemporaryDirectory(prefix="cxr-hostile-") as tmp:
        server = Server(code, Path(tmp), args.startup_timeout, extra)
        try:
            _probe(server.port, "POST", "/v1/reports/label", label)  # the labeler warm
            until = time.monotonic() + args.attack_seconds
            attack = Attackers(server.port, kind, args.attackers, until)
            attack.start()
            time.sleep(min(5.0, args.attack_seconds / 4))  # the attack in place
            probes: dict[str, list[tuple[int, float]]] = {"healthz": [], "label": []}
            while time.monotonic() < until:
                probes["healthz"].append(_probe(server.port, "GET", "/healthz", None))
                probes["label"].append(_probe(server.port, "POST", "/v1/reports/label", label))
                time.sleep(0.5)
            attack.join()
            for name, seen in probes.items():
                ok = [t for status, t in seen if status == 200]
                result[name] = {
                    "requests": len(seen),
                    "answered_200": len(ok),
                    "statuses": sorted({status for status, _ in seen}),
                    "max_s_when_200": round(max(ok), 3) if ok else None,
                    "max_s": round(max(t for _, t in seen), 3) if seen else None,
                }
            result["attack_connections_opened"] = attack.opened
            result["attack_connections_closed_by_server"] = attack.closed_by_server
            attack.close()
        finally:
            server.stop()
    return result


def scenario_trickle(code: Path, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {
        "rate": args.trickle_rate,
        "requests": args.trickle_requests,
        "wait_s": args.trickle_seconds,
    }
    with tempfile.TemporaryDirectory(prefix="cxr-hostile-") as tmp:
        server = Server(code, Path(tmp), args.startup_timeout)
        try:
            sock = socket.socket()
            sock.settimeout(5.0)
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(DOCS_ASSET * args.trickle_requests)
            start = time.monotonic()
            got, closed = 0, False
            step = 0.25
            while time.monotonic() - start < args.trickle_seconds:
                time.sleep(step)
                try:
                    chunk = sock.recv(int(args.trickle_rate * step))
                except (ConnectionResetError, TimeoutError):
                    closed = True
                    break
                if not chunk:
                    closed = True
                    break
                got += len(chunk)
            sock.close()
            result.update(
                closed_by_server=closed,
                held_s=round(time.monotonic() - start, 1),
                read_mb=round(got / 1e6, 2),
            )
        finally:
            server.stop()
    return result


def scenario_slowread(code: Path, args: argparse.Namespace) -> dict[str, Any]:
    return _under_attack(code, args, "slowread")


def scenario_slowbody(code: Path, args: argparse.Namespace) -> dict[str, Any]:
    return _under_attack(code, args, "slowbody")


SCENARIOS = {
    "nokey": scenario_nokey,
    "batch": scenario_batch,
    "methods": scenario_methods,
    "atlimit": scenario_atlimit,
    "amplify": scenario_amplify,
    "slowread": scenario_slowread,
    "slowbody": scenario_slowbody,
    "trickle": scenario_trickle,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout to serve (PYTHONPATH)")
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append")
    parser.add_argument("--nokey-mb", type=float, default=99.0)
    parser.add_argument("--batch-mb", type=float, default=200.0)
    parser.add_argument("--methods", type=int, default=2000)
    parser.add_argument("--atlimit-mb", type=float, default=2.0, help="body of `atlimit`")
    parser.add_argument("--atlimit-n", type=int, default=10, help="requests of `atlimit`")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    parser.add_argument("--attackers", type=int, default=80, help="slowread/slowbody clients")
    parser.add_argument("--attack-cap", type=int, default=64, help="CXR_MAX_CONNECTIONS then")
    parser.add_argument("--attack-seconds", type=float, default=40.0)
    parser.add_argument("--trickle-rate", type=float, default=131072.0, help="`trickle` B/s")
    parser.add_argument("--trickle-requests", type=int, default=16)
    parser.add_argument("--trickle-seconds", type=float, default=180.0)
    parser.add_argument("--startup-timeout", type=float, default=180.0)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    figures: dict[str, Any] = {"code": str(args.code.resolve())}
    for name in args.only or list(SCENARIOS):
        figures[name] = SCENARIOS[name](args.code.resolve(), args)
        say(f"{name}: {json.dumps(figures[name], sort_keys=True, default=str)}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
