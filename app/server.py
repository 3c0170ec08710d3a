"""How `cxr serve` holds up against slow and hostile clients.

By itself uvicorn waits forever for a request head (its protocols have only a keep-alive
timeout), never bounds the wait between body chunks, accepts connections until the
process runs out of file descriptors, and logs a warning per malformed request: about
20,000 slow unauthenticated connections exhausted the descriptors, legitimate requests
timed out for 80 s and the log grew 400 MB in 90 s. Here:

- `guarded_protocol`: uvicorn's httptools protocol with a request-head deadline (a
  connection whose request head is not complete `header_timeout_s` after it opened, or
  after its previous response, gets 408 if it sent anything, and is closed), a head size
  limit (431), a send timeout, a cap on pipelined requests and a connection cap. At the cap
  a new connection closes, in this order, the longest idle one (waiting for its request
  head, or kept alive between requests), the one whose client has not read its response
  for the longest, and the one whose request body has been arriving for the longest: a
  crowd of slow clients, readers or writers, cannot lock out a client that sends its
  request at once. Only when every connection is busy with the app is a new one refused
  (503), except that a few more connections are kept for `/healthz` and `/readyz` alone,
  so the health check answers even then. uvicorn's own `limit_concurrency` does none of
  this: it counts idle connections too and acts only once a request head is complete.
- The send timeout (nginx's `send_timeout`; neither uvicorn nor h11 have one): a
  connection whose client reads nothing of its response for `send_timeout_s`, or reads it
  slower than `min_send_rate` bytes a second once it has been written to for that long,
  is closed. Before, a client that pipelined requests for a large static file and never
  read held its connection, "busy with a request", for ever.
- The response budget: what is written to a connection must have been read by its client
  within `response_timeout_s` of the first byte of it (the count restarts with a request
  that starts once everything before it was sent; pipelined requests share one budget).
  A client reading just above the minimum rate held its connection for as long as its
  responses lasted (16 x 1.5 MB pipelined at 128 KiB/s: over 3 minutes); now for at most
  this long.
- `BodyTimeoutMiddleware`: 408 when a request body stalls (no data for `idle_timeout_s`)
  or trickles below `min_rate` bytes a second.
- `connection_budget`: raises the soft open-file limit to the hard one and sizes the
  connection cap and the listen backlog so that the limit is never reached.
- `RepeatFilter`: identical log records (same logger, level and message template) beyond
  `limit` per `window_s` are dropped; the next one let through says how many were.

Nothing here logs a client address or request content.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import ServiceError

if TYPE_CHECKING:
    from uvicorn._types import ASGI3Application
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _ProtocolBase
    from uvicorn.protocols.http.httptools_impl import RequestResponseCycle
else:  # uvicorn is imported only when serving (`guarded_protocol`), not with the app
    _ProtocolBase = object

__all__ = [
    "BodyTimeoutMiddleware",
    "ConnectionBudget",
    "RepeatFilter",
    "repeat_filter",
    "RequestTimeout",
    "connection_budget",
    "guarded_protocol",
]

log = logging.getLogger("app.server")


class RequestTimeout(ServiceError):
    """The request body stalled; the connection is closed after the answer."""

    status_code = 408

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.headers = {"Connection": "close"}


# --- request bodies ------------------------------------------------------------------------


class BodyTimeoutMiddleware:
    """Answer 408 when a request body stalls while the app reads it.

    Each wait for the next body chunk is bounded by `idle_timeout_s`; once the body has
    been read for longer than that, it must also average at least `min_rate` bytes a
    second (0: no minimum), so one byte every few seconds does not hold a connection
    for hours. Only the body is bounded: once its last chunk is in, an app waiting on
    `receive` for the client's disconnect is not.
    """

    def __init__(self, app: ASGIApp, *, idle_timeout_s: float, min_rate: float) -> None:
        self.app = app
        self.idle_timeout_s = idle_timeout_s
        self.min_rate = min_rate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        idle = self.idle_timeout_s
        min_rate = self.min_rate
        loop = asyncio.get_running_loop()
        started: float | None = None
        received = 0
        done = False

        async def timed_receive() -> Message:
            nonlocal started, received, done
            if done:
                return await receive()
            if started is None:
                started = loop.time()
            try:
                message = await asyncio.wait_for(receive(), idle)
            except TimeoutError:
                log.warning("408: no request body data for %g s (CXR_BODY_TIMEOUT_S)", idle)
                raise RequestTimeout(
                    f"no request body data for {idle:g} s (CXR_BODY_TIMEOUT_S); send the "
                    "body without pausing"
                ) from None
            if message["type"] != "http.request":
                done = True
                return message
            received += len(message.get("body", b""))
            if not message.get("more_body", False):
                done = True
                return message
            elapsed = loop.time() - started
            if min_rate and elapsed > idle and received < min_rate * elapsed:
                log.warning(
                    "408: request body slower than %g bytes/s (CXR_BODY_MIN_RATE)", min_rate
                )
                raise RequestTimeout(
                    f"request body arrives at {received / elapsed:.0f} bytes/s, below the "
                    f"minimum of {min_rate:g} (CXR_BODY_MIN_RATE)"
                )
            return message

        await self.app(scope, timed_receive, send)


# --- connections ---------------------------------------------------------------------------

_RESPONSE_408 = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)
_RESPONSE_431 = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)
_RESPONSE_503 = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"retry-after: 5\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
)


def _raw_response(template: bytes, detail: str, error: str) -> bytes:
    import json

    body = json.dumps({"detail": detail, "error": error}, separators=(",", ":")).encode()
    return template % (len(body), body)


# h11's limit, which uvicorn's h11 protocol applied; nginx allows 4 x 8 KiB by default.
MAX_HEAD_BYTES = 16 * 1024
# Requests read ahead of the one being answered. uvicorn's httptools protocol parses a
# whole read (up to 256 KiB of small requests) into its queue; h11 and nginx hold at most
# one buffer's worth. A connection past this is closed.
MAX_PIPELINED = 16
# Connections beyond the cap that may only ask the health endpoints (then close).
HEALTH_RESERVE = 8
HEALTH_PATHS = (b"/healthz", b"/readyz")


class _HeadTooLarge(Exception):
    """Raised from a parser callback to stop parsing an oversized request head."""


class _MissingHost(Exception):
    """Raised from a parser callback: an HTTP/1.1 request head without Host."""


# A refused connection is kept half-closed this long (at most this many at once).
_LINGER_S = 1.0
_LINGER_MAX = 64


def guarded_protocol(
    *,
    header_timeout_s: float,
    max_connections: int,
    send_timeout_s: float = 30.0,
    min_send_rate: float = 0.0,
    response_timeout_s: float = 0.0,
    max_head_bytes: int = MAX_HEAD_BYTES,
    max_pipelined: int = MAX_PIPELINED,
    health_reserve: int = HEALTH_RESERVE,
) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with a request-head deadline, a head size limit, a
    send timeout, a pipelining cap and a connection cap.

    Pass the class as `uvicorn.run(..., http=...)`. Each call makes a class with its own
    registry of idle connections: one per server. httptools (llhttp, in C) receives a
    10 MiB upload in about half the time of uvicorn's pure-Python h11 protocol, but sets no
    limit on a request head, which h11 did (16 KiB): `max_head_bytes` is that limit here.

    Args:
        header_timeout_s: a request head must be complete this long after the connection
            opened or its previous response was sent (408 if partly sent, then closed).
        max_connections: open connections at most; see the module docstring.
        send_timeout_s: a connection whose client reads nothing of what was written to
            it for this long is closed (the transport stays above its high-water mark).
        min_send_rate: once a connection has been writing for `send_timeout_s`, its
            client must have read at least this many bytes a second of it on average
            (0: no minimum); checked whenever the write buffer fills.
        response_timeout_s: what is written to a connection must have been read (its
            write buffer empty) within this many seconds of its first byte, else the
            connection is reset (0: no budget). Checked once that long after the first
            write; a client that caught up by then, or a request that starts with
            everything before it sent, starts afresh. Pipelined requests share one.
        max_head_bytes: a request head (request line and headers) larger than this is
            answered 431 and the connection closed. A head that is still incomplete is
            counted from the read after the one it began in, so it may grow by one read
            (at most 256 KiB) beyond the limit before it is refused.
        max_pipelined: requests queued behind the one being answered, at most; past
            that the connection is closed.
        health_reserve: connections beyond `max_connections` kept for `GET /healthz`
            and `GET /readyz` (anything else on them: 503); each closes after its answer.
    """
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    guard = _Guard(
        header_timeout_s=header_timeout_s,
        max_connections=max_connections,
        max_head_bytes=max_head_bytes,
        send_timeout_s=send_timeout_s,
        min_send_rate=min_send_rate,
        response_timeout_s=response_timeout_s,
        max_pipelined=max_pipelined,
        health_reserve=health_reserve,
        timeout_408=_raw_response(
            _RESPONSE_408,
            f"the request head was not complete within {header_timeout_s:g} s "
            "(CXR_HEADER_TIMEOUT_S)",
            "RequestTimeout",
        ),
        busy_503=_raw_response(
            _RESPONSE_503,
            f"the server is at its limit of {max_connections} connections, all busy with "
            "requests (CXR_MAX_CONNECTIONS); retry shortly",
            "ServiceUnavailable",
        ),
        too_large_431=_raw_response(
            _RESPONSE_431,
            f"the request line and headers are larger than {max_head_bytes} bytes",
            "RequestHeaderFieldsTooLarge",
        ),
    )

    class GuardedProtocol(_GuardedConnection, HttpToolsProtocol):
        _guard = guard

    return GuardedProtocol


@dataclass
class _Guard:
    """One server's limits, its prepared refusals and its registry of idle connections."""

    header_timeout_s: float
    max_connections: int
    max_head_bytes: int
    send_timeout_s: float
    min_send_rate: float
    response_timeout_s: float
    max_pipelined: int
    health_reserve: int
    timeout_408: bytes
    busy_503: bytes
    too_large_431: bytes
    # Connections with no request in progress, the longest idle first.
    idle: OrderedDict[_GuardedConnection, None] = field(default_factory=OrderedDict)
    # Connections whose write buffer is full (the client is not reading), longest first.
    unread: OrderedDict[_GuardedConnection, None] = field(default_factory=OrderedDict)
    # Connections whose request body is still arriving, the oldest first.
    bodies: OrderedDict[_GuardedConnection, None] = field(default_factory=OrderedDict)
    lingering: int = 0  # refused connections still open
    reserved: int = 0  # open connections of the health reserve

    def evictable(self) -> tuple[_GuardedConnection, str] | None:
        """The connection to close for a new one at the cap, and why; None: none."""
        for registry, reason in (
            (self.idle, "the longest idle connection"),
            (self.unread, "the connection whose client has not read its response longest"),
            (self.bodies, "the connection whose request body has been arriving longest"),
        ):
            if registry:
                oldest, _ = registry.popitem(last=False)
                return oldest, reason
        return None


class _CountingTransport:
    """A transport that counts the bytes written through it since `since` (for the send
    rate and the response budget): from the first write after the last `restart`, which
    calls `on_first_write`."""

    def __init__(
        self,
        transport: asyncio.Transport,
        clock: Callable[[], float],
        on_close: Callable[[], None],
        on_first_write: Callable[[], None],
    ) -> None:
        self._transport = transport
        self._clock = clock
        self._on_close = on_close
        self._on_first_write = on_first_write
        self.written = 0
        self.since: float | None = None

    def close(self) -> None:
        self._transport.close()
        self._on_close()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self.since is None:
            self.since = self._clock()
            self._on_first_write()
        self.written += len(data)
        self._transport.write(data)

    def restart(self) -> bool:
        """Count afresh from the next write if everything written was sent; whether so."""
        if self._transport.get_write_buffer_size() == 0:
            self.written, self.since = 0, None
            return True
        return False

    def __getattr__(self, name: str) -> object:
        return getattr(self._transport, name)


class _GuardedConnection(_ProtocolBase):
    """The guards of `guarded_protocol` on one connection, over uvicorn's httptools
    protocol (the next class in the MRO of the class it makes). `_guard` is that server's."""

    _guard: ClassVar[_Guard]
    _head_timer: asyncio.TimerHandle | None = None
    _refused = False
    _lingers = False
    _in_head = False  # a request head has begun and is not complete
    _messages = 0  # request heads begun on this connection
    _head_read = 0  # bytes of the current head's reads after the one it began in
    _head_parsed = 0  # bytes of its request line and complete headers
    _head_too_large = False
    _reserved = False  # one of the health reserve: health endpoints only
    _reserve_head: bytes | None = b""  # its first bytes, until its request line is in
    _counter: _CountingTransport
    _send_timer: asyncio.TimerHandle | None = None
    _budget_timer: asyncio.TimerHandle | None = None
    _running: RequestResponseCycle | None = None  # the cycle being answered

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        guard = self._guard
        if len(self.connections) - guard.reserved >= guard.max_connections:
            victim = guard.evictable()
            if victim is not None:
                other, why = victim
                if other.transport.get_write_buffer_size():  # a client that does not read
                    other._abort(f"connection limit reached: closed {why}")
                else:
                    other._close(f"connection limit reached: closed {why}")
            elif guard.reserved < guard.health_reserve:
                guard.reserved += 1
                self._reserved = True
            else:
                self._refuse(transport)
                return
        super().connection_made(transport)  # type: ignore[arg-type]
        self._counter = _CountingTransport(
            self.transport, self.loop.time, self._closing, self._writing
        )
        self.transport = self._counter  # type: ignore[assignment]
        self._await_head()

    def _refuse(self, transport: asyncio.BaseTransport) -> None:
        # 503, then half-close and read what the client sends for a moment: closing a
        # socket with unread data resets it, and the client would never see the 503.
        # At most `_LINGER_MAX` linger at once (they hold a descriptor each).
        log.warning("503: every connection is busy (CXR_MAX_CONNECTIONS)")
        self._refused = True
        assert isinstance(transport, asyncio.Transport)
        transport.write(self._guard.busy_503)
        if self._guard.lingering >= _LINGER_MAX or not transport.can_write_eof():
            transport.close()
            return
        self._guard.lingering += 1
        self._lingers = True
        transport.write_eof()
        self.loop.call_later(_LINGER_S, transport.close)

    def data_received(self, data: bytes) -> None:
        if self._refused or self._head_too_large:
            return
        if self._reserved and self._reserve_head is not None:
            # Read the request line before anything is parsed: health probes only.
            self._reserve_head += data
            line, found, _ = self._reserve_head.partition(b"\r\n")
            if not found and len(self._reserve_head) < 1024:
                return
            data, self._reserve_head = self._reserve_head, None
            parts = line.split(b" ")
            if not (
                found
                and len(parts) == 3
                and parts[0] in (b"GET", b"HEAD")
                and parts[1].split(b"?")[0] in HEALTH_PATHS
            ):
                log.warning("503: every connection is busy; the reserve is for /healthz")
                self.transport.write(self._guard.busy_503)
                self._close_quietly()
                return
        in_head, messages = self._in_head, self._messages
        super().data_received(data)
        # A head that began in an earlier read and is still not complete after this
        # one: the whole read was head. (A single header line is handed to the
        # callbacks only once complete, so a line without end is counted here.)
        if in_head and self._in_head and messages == self._messages:
            self._head_read += len(data)
            if self._head_read > self._guard.max_head_bytes and not self.transport.is_closing():
                self._refuse_head()

    # The parser's callbacks, from within `data_received`.
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._messages += 1
        self._head_read = self._head_parsed = 0

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self.parser.get_http_version() == "1.1" and not any(
            name == b"host" for name, _ in self.headers
        ):
            # RFC 9112 3.2: a 1.1 request without Host gets 400 (h11 did so; llhttp
            # does not). Raised through the parser: uvicorn's 400 and close.
            raise _MissingHost
        if not self._busy():
            # A request that starts at once, with everything before it written out, has a
            # response budget of its own (a keep-alive client that read each answer is not
            # cut off by an earlier one's timer). Pipelined requests share one budget.
            self._restart_counting()
        super().on_headers_complete()
        if self._busy():
            self._guard.idle.pop(self, None)
            self._cancel_head_timer()
        if len(self.pipeline) > self._guard.max_pipelined:
            self._close(
                f"closed a connection with more than {self._guard.max_pipelined} pipelined requests"
            )
            return
        if not self.pipeline:  # its body is read now (a queued one's waits)
            self._guard.bodies[self] = None

    def on_message_complete(self) -> None:
        self._guard.bodies.pop(self, None)
        super().on_message_complete()

    def _count_head(self, size: int) -> None:
        self._head_parsed += size
        if self._head_parsed > self._guard.max_head_bytes:
            # Raised through the parser, which uvicorn answers with
            # `send_400_response`: answered 431 there.
            self._head_too_large = True
            raise _HeadTooLarge

    def send_400_response(self, msg: str) -> None:
        if self._head_too_large:
            self._refuse_head()
            return
        super().send_400_response(msg)

    def _refuse_head(self) -> None:
        self._head_too_large = True
        log.warning("431: a request head larger than %d bytes", self._guard.max_head_bytes)
        self.transport.write(self._guard.too_large_431)
        self._close_quietly()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused:
            if self._lingers:
                self._guard.lingering -= 1
            return
        self._forget()
        if self._reserved:
            self._guard.reserved -= 1
        running = self._running
        if running is not None and not running.response_complete:
            # uvicorn marks only its newest cycle disconnected: with requests pipelined
            # behind it, the one being answered would go on writing to a closed socket.
            running.disconnected = True
            running.message_event.set()
        super().connection_lost(exc)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        self._running = cycle
        super()._start_asgi_task(cycle, app)

    # Flow control from the transport: the client is (not) reading what is written.
    def pause_writing(self) -> None:
        super().pause_writing()
        guard = self._guard
        guard.unread[self] = None
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(guard.send_timeout_s, self._send_timeout)
        since = self._counter.since
        if guard.min_send_rate and since is not None:
            elapsed = self.loop.time() - since
            read = self._counter.written - self.transport.get_write_buffer_size()
            if elapsed > guard.send_timeout_s and read < guard.min_send_rate * elapsed:
                self._abort(
                    f"closed a connection whose client reads its response at "
                    f"{read / elapsed:.0f} bytes/s, below CXR_SEND_MIN_RATE"
                )

    def resume_writing(self) -> None:
        super().resume_writing()
        self._guard.unread.pop(self, None)
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _closing(self) -> None:
        # A closed transport stays open until its buffer is written: with a client that
        # does not read, for ever (and below the high-water mark, never paused).
        if self._send_timer is None and self.transport.get_write_buffer_size() > 0:
            self._send_timer = self.loop.call_later(self._guard.send_timeout_s, self._send_timeout)

    def _restart_counting(self) -> None:
        # Everything written was sent: the read rate and the response budget start afresh.
        if self._counter.restart() and self._budget_timer is not None:
            self._budget_timer.cancel()
            self._budget_timer = None

    def _writing(self) -> None:
        # The first write since the client last caught up: the response budget starts.
        budget = self._guard.response_timeout_s
        if budget and self._budget_timer is None:
            self._budget_timer = self.loop.call_later(budget, self._response_timeout)

    def _response_timeout(self) -> None:
        self._budget_timer = None
        if self._counter.restart():  # the client caught up: the next write starts afresh
            return
        self._abort(
            "closed a connection whose client had not read its responses "
            f"{self._guard.response_timeout_s:g} s after they began (CXR_RESPONSE_TIMEOUT_S)"
        )

    def _send_timeout(self) -> None:
        # Also when closing: the buffer is still unwritten (or the timer would be off).
        self._send_timer = None
        self._abort(
            "closed a connection whose client read nothing of its response for "
            f"{self._guard.send_timeout_s:g} s (CXR_SEND_TIMEOUT_S)"
        )

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._reserved:
            self.transport.close()  # after the buffered answer is written
        elif not self.transport.is_closing() and not self._busy():
            self._await_head()

    def _busy(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _await_head(self) -> None:
        self._guard.idle[self] = None
        self._guard.idle.move_to_end(self)
        self._restart_counting()
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self._guard.header_timeout_s, self._head_timeout)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self._busy():
            return
        if self._in_head:
            self.transport.write(self._guard.timeout_408)
        self._close(
            "408: closed a connection whose request head was not complete within "
            "CXR_HEADER_TIMEOUT_S"
        )

    def _close(self, reason: str) -> None:
        log.warning(reason)
        self._close_quietly()

    def _abort(self, reason: str) -> None:
        # `close` would wait for the write buffer to drain: for a client that does not
        # read, for ever. `abort` drops it, and a zero linger makes the kernel reset the
        # connection instead of keeping the unsent bytes of an orphaned socket (nginx's
        # `reset_timedout_connection`).
        log.warning(reason)
        self._forget()
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    def _close_quietly(self) -> None:
        self._forget()
        self.transport.close()

    def _forget(self) -> None:
        self._guard.idle.pop(self, None)
        self._guard.unread.pop(self, None)
        self._guard.bodies.pop(self, None)
        self._cancel_head_timer()
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None
        if self._budget_timer is not None:
            self._budget_timer.cancel()
            self._budget_timer = None


# --- file descriptors ----------------------------------------------------------------------


@dataclass(frozen=True)
class ConnectionBudget:
    """Connection cap and listen backlog that fit the process's open-file limit.

    Attributes:
        max_connections: the cap to enforce (the setting, or less if the limit needs it).
        backlog: the listen backlog (accepted sockets arrive before the cap is checked).
        open_files: the soft RLIMIT_NOFILE after raising it (0: unknown, no resource module).
    """

    max_connections: int
    backlog: int
    open_files: int


def connection_budget(requested: int) -> ConnectionBudget:
    """Raise the soft open-file limit to the hard one and fit the connection cap below it.

    Each connection may hold two descriptors (its socket and a spooled upload), sockets
    accepted in one batch (up to the backlog) are open before the cap applies, and the
    process needs the descriptors it already holds plus a margin (database, logs, batch
    files), and the health reserve sits above the cap. So: cap = min(requested, (limit -
    open now - 64 - backlog) / 2 - HEALTH_RESERVE), at least 8.
    """
    try:
        import resource
    except ImportError:  # not POSIX
        return ConnectionBudget(requested, 1024, 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft == resource.RLIM_INFINITY or soft < ceiling:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
            soft = ceiling
        except (ValueError, OSError):
            log.warning("could not raise the open-file limit from %d to %d", soft, ceiling)
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        in_use = 64
    backlog = max(16, min(1024, soft // 8))
    fit = (soft - in_use - 64 - backlog) // 2 - HEALTH_RESERVE
    cap = max(8, min(requested, fit))
    if cap < requested:
        log.warning(
            "serving at most %d connections, not CXR_MAX_CONNECTIONS=%d: the open-file "
            "limit is %d (raise it with `ulimit -n` or the container's nofile)",
            cap,
            requested,
            soft,
        )
    return ConnectionBudget(cap, backlog, int(soft))


# --- logs ----------------------------------------------------------------------------------


class RepeatFilter(logging.Filter):
    """Drop identical records beyond `limit` per `window_s`; say how many were dropped.

    Records are identical when their logger, level and message template (before `%`
    arguments) are, so "Invalid HTTP request received." from a flood of bad requests, or
    a timeout warning per slow client, grows the log by at most `limit` lines per
    window. The first record let through after a window with drops carries "[N similar
    messages suppressed in the last W s]". At most `max_keys` templates are tracked (the
    least recently seen is forgotten), so the filter's own memory is bounded.
    """

    def __init__(
        self,
        limit: int,
        window_s: float,
        *,
        min_level: int = logging.WARNING,
        max_keys: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.limit = limit
        self.window_s = window_s
        self.min_level = min_level
        self.max_keys = max_keys
        self.clock = clock
        # key -> [window start, records let through in it, records dropped in it]
        self._seen: OrderedDict[tuple[str, int, str], list[float]] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < self.min_level or self.limit <= 0:
            return True
        key = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        entry = self._seen.get(key)
        if entry is None or now - entry[0] >= self.window_s:
            dropped = int(entry[2]) if entry is not None else 0
            self._seen[key] = [now, 1, 0]
            self._seen.move_to_end(key)
            while len(self._seen) > self.max_keys:
                self._seen.popitem(last=False)
            if dropped:
                record.msg = (
                    f"{record.getMessage()} [{dropped} similar messages suppressed in the "
                    f"last {self.window_s:g} s]"
                )
                record.args = None
            return True
        self._seen.move_to_end(key)
        if entry[1] < self.limit:
            entry[1] += 1
            return True
        entry[2] += 1
        return False


@contextlib.contextmanager
def repeat_filter(limit: int, window_s: float) -> Iterator[RepeatFilter]:
    """Put one `RepeatFilter` on every handler of the root logger (where uvicorn's,
    asyncio's and the app's records end up when `log_config=None`) while the server runs,
    and take it off afterwards: the handlers outlive the server when it runs in a process
    that goes on (a test run, an embedding application)."""
    flood = RepeatFilter(limit, window_s)
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(flood)
    try:
        yield flood
    finally:
        for handler in handlers:
            handler.removeFilter(flood)
