"""Slow and hostile clients against a real `cxr serve` on loopback (issue 18 item 11).

Starts `python -m app.cli serve` (SQLite, no model, default settings, --log-level info)
from --code (default: this checkout) with its open-file limit set to --nofile (soft and
hard, so the server cannot raise it: this reproduces at a small scale what 20,000
connections did to a server with a limit of 20,000). Then, for --seconds:

- slowloris: --connections connections that send the start of a request head and then
  one header byte every --trickle seconds, never finishing it; any the server closes is
  reopened (at most --reopen a second);
- garbage: --garbage requests a second that are not HTTP ("Invalid HTTP request
  received." in uvicorn's log);
- a legitimate client: GET /healthz every second on a new connection, 5 s timeout.

Prints how many legitimate requests succeeded and how fast, how many slow connections
were open at the end, the server's open descriptors, and the size the server's log grew
to. Every loop is bounded by --seconds. Linux only (/proc, resource).

    python benchmarks/slow_clients.py                              # this checkout
    python benchmarks/slow_clients.py --code /work/main            # before
    python benchmarks/slow_clients.py --connections 3000 --nofile 2048 --seconds 60
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from bench_kit import free_port, say

ROOT = Path(__file__).resolve().parents[1]
HEAD = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def _open_files(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


class Slowloris(threading.Thread):
    """Holds up to `n` connections that never finish their request head."""

    def __init__(self, port: int, n: int, trickle: float, reopen: int, until: float) -> None:
        super().__init__(daemon=True)
        self.port, self.n, self.trickle, self.reopen, self.until = port, n, trickle, reopen, until
        self.socks: dict[socket.socket, float] = {}  # socket -> when it last sent a byte
        self.opened = 0
        self.closed_by_server = 0
        self.connect_errors = 0

    def _open(self, budget: int) -> None:
        while len(self.socks) < self.n and budget > 0 and time.monotonic() < self.until:
            budget -= 1
            sock = socket.socket()
            sock.setblocking(False)
            try:
                sock.connect(("127.0.0.1", self.port))
            except BlockingIOError:
                pass
            except OSError:
                self.connect_errors += 1
                sock.close()
                continue
            self.socks[sock] = 0.0
            self.opened += 1

    def run(self) -> None:
        self._open(self.n)
        while time.monotonic() < self.until:
            now = time.monotonic()
            for sock, last in list(self.socks.items()):
                if now - last < self.trickle:
                    continue
                try:
                    sock.send(HEAD if last == 0.0 else b"a")
                    self.socks[sock] = now
                    if sock.recv(4096, socket.MSG_PEEK) == b"":
                        raise ConnectionResetError
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    self.closed_by_server += 1
                    del self.socks[sock]
                    sock.close()
            self._open(self.reopen)
            time.sleep(1.0)

    def still_open(self) -> int:
        """Connections the server has not closed (checked without sending)."""
        alive = 0
        for sock in self.socks:
            try:
                if sock.recv(4096, socket.MSG_PEEK) != b"":
                    alive += 1  # an answer (408) before the close: closed soon
            except (BlockingIOError, InterruptedError):
                alive += 1
            except OSError:
                pass
        return alive

    def close(self) -> None:
        for sock in self.socks:
            sock.close()


class Garbage(threading.Thread):
    """Sends `rate` non-HTTP requests a second, each on a new connection."""

    def __init__(self, port: int, rate: int, until: float) -> None:
        super().__init__(daemon=True)
        self.port, self.rate, self.until = port, rate, until
        self.sent = 0

    def run(self) -> None:
        while self.rate and time.monotonic() < self.until:
            tick = time.monotonic()
            for _ in range(self.rate):
                try:
                    sock = socket.create_connection(("127.0.0.1", self.port), timeout=0.2)
                    sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
                    self.sent += 1
                    sock.close()
                except OSError:
                    pass
                if time.monotonic() - tick >= 1.0 or time.monotonic() >= self.until:
                    break
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))


def probe(port: int, until: float) -> list[float | None]:
    """GET /healthz once a second until `until`: latency in seconds, or None on failure."""
    results: list[float | None] = []
    while time.monotonic() < until:
        start = time.monotonic()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                r.read()
                results.append(time.monotonic() - start if r.status == 200 else None)
        except (urllib.error.URLError, OSError):
            results.append(None)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - start)))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=2000, help="slow connections")
    parser.add_argument("--seconds", type=float, default=40.0, help="attack duration")
    parser.add_argument("--trickle", type=float, default=5.0, help="s between header bytes")
    parser.add_argument("--reopen", type=int, default=500, help="reconnects per second")
    parser.add_argument("--garbage", type=int, default=100, help="bad requests per second")
    parser.add_argument("--nofile", type=int, default=1024, help="server's open-file limit")
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout the server runs")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.connections + 256
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    code = args.code.resolve()
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "server.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CXR_")}
        env.update(PYTHONPATH=str(code), CXR_STORAGE_DIR=str(Path(tmp) / "storage"))
        nofile = args.nofile

        def limit() -> None:
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        cmd = [sys.executable, "-m", "app.cli", "serve", "--port", str(port)]
        with log_path.open("wb") as log:
            server = subprocess.Popen(  # noqa: S603 - our own CLI
                cmd, env=env, cwd=code, stdout=log, stderr=log, preexec_fn=limit
            )
        try:
            deadline = time.monotonic() + 180
            while True:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                        break
                except (urllib.error.URLError, ConnectionError):
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(log_path.read_text()[-2000:]) from None
                    time.sleep(0.5)
            start_log = log_path.stat().st_size
            say(
                f"cxr serve from {code}, open-file limit {nofile or 'inherited'}; "
                f"{args.connections} slow connections (a header byte every {args.trickle:g} "
                f"s), {args.garbage} bad requests/s, for {args.seconds:g} s"
            )
            until = time.monotonic() + args.seconds
            slow = Slowloris(port, args.connections, args.trickle, args.reopen, until)
            garbage = Garbage(port, args.garbage, until)
            slow.start()
            garbage.start()
            results = probe(port, until)
            slow.join(timeout=10)
            garbage.join(timeout=10)
            open_fds = _open_files(server.pid)
            alive = slow.still_open()
            after: list[float | None] = []
            alive_server = server.poll() is None
            if alive_server:
                slow.close()
                after = probe(port, time.monotonic() + 3)
            slow.close()
            time.sleep(0.5)
            grown = log_path.stat().st_size - start_log
            text = log_path.read_text(errors="replace")
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=30)
    ok = [r for r in results if r is not None]
    say(
        f"legitimate GET /healthz during the attack: {len(ok)}/{len(results)} answered"
        + (
            f", median {statistics.median(ok) * 1000:.0f} ms, slowest {max(ok) * 1000:.0f} ms"
            if ok
            else ""
        )
    )
    say(
        f"after the attack: {sum(r is not None for r in after)}/{len(after)} answered; "
        f"server alive: {alive_server}"
    )
    say(
        f"slow connections opened {slow.opened}, closed by the server {slow.closed_by_server}, "
        f"still open at the end {alive}; connect errors {slow.connect_errors}; "
        f"server open descriptors at the end {open_fds} (limit {nofile or soft})"
    )
    say(
        f"bad requests sent {garbage.sent}; server log grew {grown / 1024:.0f} KiB in "
        f"{args.seconds:g} s ({text.count('Invalid HTTP request received')} 'Invalid HTTP "
        f"request' lines, {text.count('out of system resource')} 'out of system resource', "
        f"{text.count('suppressed')} 'suppressed' summaries)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
