"""A response's budget and the connections kept for the health check (issue 42 H1).

uvicorn serves a small ASGI app in a thread with `app.server.guarded_protocol` at a cap
of four connections: `/big` answers 4 MB, `/slow` holds its connection until the test
lets it go, `/healthz` answers at once. Raw sockets play the clients. Before: a client
that never read its response held its connection for ever, pipelined requests queued
without bound, and when every connection was busy `/healthz` got 503 like the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from service_fixtures import free_port

from app.server import guarded_protocol

pytestmark = pytest.mark.issue(42)

BIG = 4 * 1024 * 1024


@dataclass
class ToyApp:
    release: asyncio.Event | None = None
    disconnected: list[str] = field(default_factory=list)

    async def __call__(self, scope: dict, receive, send) -> None:  # type: ignore[no-untyped-def]
        path = scope["path"]
        if path == "/slow":
            if self.release is None:
                self.release = asyncio.Event()
            await self.release.wait()
        body = b"x" * BIG if path == "/big" else b"ok"
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for i in range(0, len(body), 65536):
            chunk = body[i : i + 65536]
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})


@dataclass
class Served:
    port: int
    app: ToyApp
    loop: asyncio.AbstractEventLoop

    def connect(self, rcvbuf: int | None = None) -> socket.socket:
        sock = socket.socket()
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.settimeout(10)
        sock.connect(("127.0.0.1", self.port))
        return sock

    def get(self, path: str, timeout: float = 5) -> tuple[bytes, float]:
        start = time.monotonic()
        with self.connect() as sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
            return _read(sock, timeout), time.monotonic() - start

    def release_slow(self) -> None:
        if self.app.release is not None:
            self.loop.call_soon_threadsafe(self.app.release.set)


def _read(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return data


def _closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed `sock`, reading nothing meanwhile (None: open)."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            # Peek: a close shows only once the unread answer is gone, so look for a reset
            # or for the socket's error state instead of reading.
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                return time.monotonic() - start
            info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)
            if info[0] in (7, 8):  # TCP_CLOSE, TCP_CLOSE_WAIT: the server sent FIN
                return time.monotonic() - start
        except OSError:
            return time.monotonic() - start
        time.sleep(0.05)
    return None


LIMITS = {
    "header_timeout_s": 5,
    "max_connections": 4,
    "send_timeout_s": 1.0,
    "min_send_rate": 200_000,
    "max_pipelined": 4,
    "health_reserve": 2,
}


@pytest.fixture
def served() -> Iterator[Served]:
    with _serve(**LIMITS) as running:
        yield running


@contextlib.contextmanager
def _serve(**limits: Any) -> Iterator[Served]:
    import uvicorn

    app = ToyApp()
    port = free_port()
    protocol = guarded_protocol(**limits)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, http=protocol, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    loops: list[asyncio.AbstractEventLoop] = []

    def run() -> None:
        loop = asyncio.new_event_loop()
        loops.append(loop)
        loop.run_until_complete(server.serve())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.02)
    served = Served(port, app, loops[0])
    try:
        yield served
    finally:
        served.release_slow()
        server.should_exit = True
        thread.join(timeout=10)


def test_guarded_protocol_closes_a_connection_whose_client_never_reads(served: Served) -> None:
    with served.connect(rcvbuf=2048) as sock:
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n" * 3)
        closed = _closed_within(sock, 8)
    assert closed is not None and 0.8 < closed < 4, closed  # send timeout 1 s


def test_guarded_protocol_closes_a_client_that_reads_too_slowly(served: Served) -> None:
    # 16 KiB every 0.1 s (160 KB/s) keeps the buffer moving, below the 200 KB/s minimum.
    with served.connect(rcvbuf=4096) as sock:
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
        got = 0
        start = time.monotonic()
        try:
            while time.monotonic() - start < 15:
                chunk = sock.recv(16384)
                if not chunk:
                    break
                got += len(chunk)
                time.sleep(0.1)
        except ConnectionResetError:
            pass
        waited = time.monotonic() - start
    assert got < BIG and waited < 8, (got, waited)


def test_guarded_protocol_closes_a_connection_past_its_pipelining_cap(served: Served) -> None:
    with served.connect() as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n" * 40)
        data = _read(sock, 5)
    assert data.count(b"HTTP/1.1 200") < 40  # closed, not 40 answers queued
    # A few pipelined requests are still served in order.
    with served.connect() as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n" * 3)
        data = b""
        while data.count(b"HTTP/1.1 200") < 3:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk


def test_guarded_protocol_closes_a_non_reader_for_a_new_client_at_the_cap(
    served: Served,
) -> None:
    hogs = []
    try:
        for _ in range(4):
            sock = served.connect(rcvbuf=2048)
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
            hogs.append(sock)
        time.sleep(0.3)  # every one busy writing to a client that does not read
        answer, seconds = served.get("/other")
        assert answer.startswith(b"HTTP/1.1 200") and seconds < 1, (answer[:80], seconds)
    finally:
        for sock in hogs:
            sock.close()


def test_guarded_protocol_keeps_connections_for_the_health_check(served: Served) -> None:
    busy = []
    try:
        for _ in range(4):  # the cap: every connection busy in the app
            sock = served.connect()
            sock.sendall(b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
            busy.append(sock)
        time.sleep(0.3)
        health, seconds = served.get("/healthz")
        assert health.startswith(b"HTTP/1.1 200") and seconds < 1, (health, seconds)
        other, _ = served.get("/other")
        assert other.startswith(b"HTTP/1.1 503") and b"CXR_MAX_CONNECTIONS" in other, other
        # Reserve connections close after their one answer, so the reserve is not used up.
        for _ in range(3):
            assert served.get("/readyz")[0].startswith(b"HTTP/1.1 200")
    finally:
        served.release_slow()
        for sock in busy:
            sock.close()


def test_guarded_protocol_closes_a_reader_above_the_minimum_rate_at_its_response_budget() -> None:
    """A client that reads fast enough for the minimum rate but would take about 14 s for
    its 4 MB answer is closed at the 3 s response budget; a client that reads at once
    gets the whole answer, and its next request starts a budget of its own."""
    limits = {**LIMITS, "send_timeout_s": 15.0, "min_send_rate": 1000, "response_timeout_s": 3.0}
    with _serve(**limits) as served:
        with served.connect(rcvbuf=4096) as sock:
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
            got = 0
            start = time.monotonic()
            try:
                while time.monotonic() - start < 20:
                    chunk = sock.recv(4096)
                    if not chunk:
                        break
                    got += len(chunk)
                    time.sleep(0.01)  # at most 400 KB/s: about 10 s for the answer
            except ConnectionResetError:
                pass
            waited = time.monotonic() - start
        assert got < BIG and 2.5 < waited < 8, (got, waited)
        with served.connect(rcvbuf=65536) as sock:
            # 3 x 4 MB on one connection, each read within its budget, the three in more
            # than one budget: the last one slowly, at about 2 MB/s.
            start = time.monotonic()
            for pace in (0.0, 0.0, 0.03):
                sock.sendall(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
                data = b""
                while len(data) < BIG:
                    chunk = sock.recv(65536)
                    assert chunk, (len(data), time.monotonic() - start)
                    data += chunk
                    time.sleep(pace)
                time.sleep(1.4)
            assert time.monotonic() - start > 3.0
