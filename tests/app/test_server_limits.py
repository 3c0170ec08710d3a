"""Slow and hostile clients against a real `cxr serve` on loopback (issue 18 item 11).

Before: a connection that never finished its request head, or its body, was held
forever; about 20,000 of them exhausted the file descriptors, legitimate requests timed
out for 80 s and the log grew 400 MB in 90 s. The server here runs with 3 s header and
4 s body timeouts and an open-file limit of 256, so its connection cap is sized from
that limit; raw sockets play the clients.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from service_fixtures import free_port

from app.server import HEALTH_RESERVE, RepeatFilter, connection_budget

pytestmark = [pytest.mark.issue(18), pytest.mark.skipif(os.name != "posix", reason="POSIX")]

OPEN_FILES = 256


@dataclass
class Server:
    port: int
    pid: int
    log: Path

    def connect(self, timeout: float = 10.0) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        return sock

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def open_files(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))


def _limit_open_files() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("serve")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CXR_")}
    env.update(
        CXR_STORAGE_DIR=str(tmp / "storage"),
        CXR_HEADER_TIMEOUT_S="3",
        CXR_BODY_TIMEOUT_S="4",
        CXR_SEND_TIMEOUT_S="3",
        CXR_LOG_REPEAT_LIMIT="3",
        PYTHONPATH=str(Path(__file__).resolve().parents[2]),
    )
    log = tmp / "server.log"
    with log.open("wb") as err:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "app.cli",
                "serve",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],  # fmt: skip
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=_limit_open_files,  # noqa: PLW1509 - no threads in the test yet
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"cxr serve did not start: {log.read_text()[-2000:]}")
                time.sleep(0.3)
        yield Server(port, process.pid, log)
    finally:
        process.terminate()
        process.wait(timeout=30)


def _read_all(sock: socket.socket, limit: float) -> tuple[bytes, float]:
    """Everything until the server closes (or `limit` seconds), and when it closed.

    A reset counts as a close: a server that closes a connection with request bytes still
    unread in it sends RST rather than FIN (and the kernel may drop what it had sent)."""
    start = time.monotonic()
    sock.settimeout(limit)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return data, time.monotonic() - start


def _pace(opened: list[socket.socket]) -> None:
    # The listen backlog is 32 at this open-file limit: a faster burst overflows it and
    # the kernel retries the handshakes a second later, spreading the flood past the
    # header timeout.
    if len(opened) % 16 == 0:
        time.sleep(0.05)


def _get_healthz(server: Server) -> tuple[int, float]:
    start = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz", timeout=10) as r:
        return int(r.status), time.monotonic() - start


def test_server_closes_an_incomplete_request_head_with_408(server: Server) -> None:
    with server.connect() as sock:
        sock.sendall(b"POST /v1/reports/label HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        data, waited = _read_all(sock, 10)
    assert data.startswith(b"HTTP/1.1 408 "), data
    assert b"CXR_HEADER_TIMEOUT_S" in data
    assert 2.8 < waited < 9, waited  # 3 s, and closed (before: held forever)


def test_server_closes_a_silent_connection(server: Server) -> None:
    with server.connect() as sock:
        data, waited = _read_all(sock, 10)
    assert data == b"" and 2.8 < waited < 9, (data, waited)


def test_server_answers_408_to_a_stalled_body(server: Server) -> None:
    with server.connect() as sock:
        sock.sendall(
            b"POST /v1/reports/label HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"text": "No acute'
        )
        data, waited = _read_all(sock, 15)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ") and b"connection: close" in head.lower(), data
    assert b'"error":"RequestTimeout"' in body and b"CXR_BODY_TIMEOUT_S" in body
    assert 3.8 < waited < 10, waited


def test_server_answers_408_to_a_trickling_body(server: Server) -> None:
    # One byte every 0.5 s never pauses for the 4 s idle timeout, but averages 2 bytes/s,
    # far below CXR_BODY_MIN_RATE (16,384 bytes/s).
    with server.connect() as sock:
        sock.sendall(
            b"POST /v1/reports/label HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n"
        )
        sock.settimeout(0.5)
        start = time.monotonic()
        data = b""
        while time.monotonic() - start < 20:
            try:
                sock.sendall(b" ")
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:  # reset once the server closed
                break
            if not chunk:
                break
            data += chunk
        waited = time.monotonic() - start
    assert data.startswith(b"HTTP/1.1 408 "), data
    assert b"CXR_BODY_MIN_RATE" in data
    assert waited < 12, waited


def test_server_survives_a_connection_flood_within_its_open_file_limit(server: Server) -> None:
    text = server.log_text()
    cap_line = re.search(r"serving at most (\d+) connections, not CXR_MAX_CONNECTIONS=1024", text)
    assert cap_line, text[-2000:]
    cap = int(cap_line.group(1))
    assert 8 <= cap < OPEN_FILES // 2
    idle = []
    try:
        for _ in range(OPEN_FILES + 50):  # more than the server could hold open
            idle.append(server.connect())
            _pace(idle)
        time.sleep(0.3)
        assert server.open_files() < OPEN_FILES
        status, seconds = _get_healthz(server)  # a client that sends its request at once
        assert status == 200 and seconds < 3, seconds
        # The longest idle connections were closed to make room.
        idle[0].settimeout(5)
        assert idle[0].recv(100) == b""
    finally:
        for sock in idle:
            sock.close()
    assert "connection limit reached: closed the longest idle connection" in server.log_text()


@pytest.mark.issue(42)
def test_server_closes_the_oldest_request_body_for_a_new_request_at_the_cap(
    server: Server,
) -> None:
    # Before: connections whose bodies trickled in held every slot, and every other
    # request got 503 (the health check included).
    cap = int(re.findall(r"serving at most (\d+) connections", server.log_text())[0])
    busy = []
    try:
        for _ in range(cap + 5):
            # A complete head with a body still to come: a request in progress, not idle.
            sock = server.connect()
            sock.sendall(
                b"POST /v1/reports/label HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                b"application/json\r\nContent-Length: 100\r\n\r\n"
            )
            busy.append(sock)
            _pace(busy)
        time.sleep(0.5)  # every head read: the cap is held by bodies alone
        status, seconds = _get_healthz(server)
        assert status == 200 and seconds < 1, seconds
        alive = [s for s in busy if _read_all(s, 0.01)[1] >= 0.01]  # no close within 10 ms
        assert len(alive) < len(busy)
    finally:
        for sock in busy:
            sock.close()
    assert "closed the connection whose request body has been arriving longest" in (
        server.log_text()
    )


@pytest.mark.issue(42)
def test_server_closes_a_connection_that_never_reads_its_responses(server: Server) -> None:
    # Six pipelined requests for the 1.5 MB Swagger bundle, a small receive window, and
    # nothing read: before, "busy with a request" for ever.
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", server.port))
    with sock:
        get = b"GET /docs/assets/swagger-ui-bundle.js HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        sock.sendall(get * 6)
        start = time.monotonic()
        deadline = start + 30
        while "read nothing of its response" not in server.log_text():
            assert time.monotonic() < deadline, "the connection was never closed"
            time.sleep(0.2)
        closed_after = time.monotonic() - start
    assert 2.5 < closed_after < 8, closed_after  # CXR_SEND_TIMEOUT_S=3


def test_server_log_does_not_grow_with_a_flood_of_bad_requests(server: Server) -> None:
    before = server.log_text().count("Invalid HTTP request received.")
    for _ in range(60):
        with server.connect() as sock:
            sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            _read_all(sock, 5)
    lines = server.log_text().count("Invalid HTTP request received.")
    assert before + 1 <= lines <= 3, lines  # CXR_LOG_REPEAT_LIMIT=3 per minute


def _head(extra: int) -> bytes:
    """A GET /healthz head padded with `extra` bytes of headers of 1,000 bytes each."""
    lines = [f"X-Pad-{i}: {'a' * 990}\r\n".encode() for i in range(extra // 1000)]
    return b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(lines) + b"\r\n"


def test_server_answers_431_to_a_request_head_over_its_limit(server: Server) -> None:
    # uvicorn's h11 protocol refused heads over 16 KiB; its httptools protocol sets no limit.
    with server.connect() as sock:
        sock.sendall(_head(20_000))
        data, _ = _read_all(sock, 5)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431 ") and b"connection: close" in head.lower(), data
    assert b'"error":"RequestHeaderFieldsTooLarge"' in body
    assert "431: a request head larger than 16384 bytes" in server.log_text()


def test_server_refuses_a_header_line_that_never_ends(server: Server) -> None:
    # No header is complete, so the parser hands none over: the reads are counted.
    with server.connect() as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Endless: ")
        sent = 0
        try:
            for _ in range(400):  # 3.2 MB if nothing stopped it
                time.sleep(0.005)
                sock.sendall(b"a" * 8192)
                sent += 8192
        except OSError:  # reset: the server has closed
            pass
        data, _ = _read_all(sock, 5)
    assert sent < 400 * 8192, "the server read the endless header to its end"
    assert data.startswith(b"HTTP/1.1 431 ") or data == b"", data


def test_server_answers_400_to_an_http11_request_without_host(server: Server) -> None:
    # RFC 9112 section 3.2; uvicorn's h11 protocol refused it, its httptools one does not.
    with server.connect() as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
        data, _ = _read_all(sock, 5)
    assert data.startswith(b"HTTP/1.1 400 "), data
    with server.connect() as sock:  # HTTP/1.0 needs none
        sock.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        data, _ = _read_all(sock, 5)
    assert data.startswith(b"HTTP/1.1 200 "), data


def test_server_accepts_a_large_head_sent_in_pieces_and_pipelined_requests(
    server: Server,
) -> None:
    # 15 KB of headers in 1 KB writes: each piece counted once, under the limit.
    request = _head(15_000)
    with server.connect() as sock:
        for i in range(0, len(request), 1000):
            sock.sendall(request[i : i + 1000])
            time.sleep(0.002)
        sock.settimeout(10)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
    # Two requests in one write: both answered, in order, on the one connection.
    with server.connect() as sock:
        sock.sendall(_head(0) * 2)
        sock.settimeout(10)
        data = b""
        while data.count(b"HTTP/1.1 200 ") < 2:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
    assert data.count(b"HTTP/1.1 200 ") == 2


def test_repeat_filter_drops_repeats_and_counts_them() -> None:
    now = [0.0]
    flood = RepeatFilter(2, 60.0, clock=lambda: now[0])

    def record(msg: str, level: int = logging.WARNING, *args: object) -> logging.LogRecord:
        return logging.LogRecord("uvicorn.error", level, __file__, 1, msg, args or None, None)

    passed = [flood.filter(record("Invalid HTTP request received.")) for _ in range(5)]
    assert passed == [True, True, False, False, False]
    assert flood.filter(record("another message"))
    assert flood.filter(record("Invalid HTTP request received.", logging.INFO))  # below WARNING
    now[0] = 61.0
    summary = record("Invalid HTTP request received.")
    assert flood.filter(summary)
    assert summary.getMessage() == (
        "Invalid HTTP request received. [3 similar messages suppressed in the last 60 s]"
    )
    # Records differing only in their arguments are the same template.
    assert flood.filter(record("%d slow", logging.WARNING, 1))
    assert flood.filter(record("%d slow", logging.WARNING, 2))
    assert not flood.filter(record("%d slow", logging.WARNING, 3))


def test_connection_budget_raises_the_soft_limit_and_fits_below_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import resource

    limits = {"soft": 1024, "hard": 4096}
    monkeypatch.setattr(resource, "getrlimit", lambda _: (limits["soft"], limits["hard"]))

    def setrlimit(_: int, value: tuple[int, int]) -> None:
        limits["soft"] = value[0]

    monkeypatch.setattr(resource, "setrlimit", setrlimit)
    budget = connection_budget(1024)
    assert limits["soft"] == 4096 and budget.open_files == 4096
    assert budget.max_connections == 1024 and budget.backlog == 512
    limits.update(soft=256, hard=256)
    small = connection_budget(1024)
    in_use = len(os.listdir("/proc/self/fd"))
    assert small.max_connections == max(8, (256 - in_use - 64 - 32) // 2 - HEALTH_RESERVE)
    assert 2 * (small.max_connections + HEALTH_RESERVE) + small.backlog + in_use < 256


def test_cxr_serve_takes_its_log_filter_off_when_it_stops(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # The handlers outlive an in-process server (tests, embedding applications): a filter
    # left on them would drop other code's repeated warnings afterwards.
    import logging

    import uvicorn

    from app.cli import main
    from app.server import RepeatFilter

    seen: list[bool] = []

    def filtered() -> bool:
        handlers = logging.getLogger().handlers
        return any(isinstance(f, RepeatFilter) for h in handlers for f in h.filters)

    def run(app: object, **kwargs: object) -> None:
        seen.append(filtered())

    monkeypatch.setattr(uvicorn, "run", run)
    monkeypatch.setenv("CXR_STORAGE_DIR", str(tmp_path))
    assert main(["serve", "--port", "8124"]) == 0
    assert seen == [True]  # on while serving
    assert not filtered()
