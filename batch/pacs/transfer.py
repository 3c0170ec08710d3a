"""Bounded HTTP exchanges with an untrusted server: a byte cap and a deadline per request.

    http = BoundedHttp(httpx.Client(...), timeout=120)
    answer = http.exchange("GET", url, max_bytes=256 * 2**20)   # status, headers, body
    http.abort("job cancelled")                                 # from any thread

What an answer can cost is bounded (issue 18):
- bytes: the body is streamed and refused past `max_bytes`, counted on the wire and
  decoded; gzip and deflate are inflated a step at a time, so a bomb is cut at the cap
  instead of being inflated first. Other codings (br, zstd) are refused, never asked for.
- time: `timeout` is a wall-clock deadline for the whole exchange (connection, request,
  headers, body), not per socket read: a server sending a byte every few seconds is cut
  when it passes. The deadline and `abort` cut the connection (socket shutdown wakes a
  read blocked in another thread), so they hold while a read is blocked.
- redirects are never followed; an answer's status is the caller's to judge.

Errors are `TransferError`s without the URL; the caller (the DICOMweb client) names it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import weakref
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = [
    "BoundedHttp",
    "HttpAnswer",
    "TransferAborted",
    "TransferDeadline",
    "TransferError",
    "TransferTooLarge",
]

_ERROR_BODY = 4096  # bytes of a non-2xx answer kept, for the error message
_INFLATE_STEP = 2**20  # decoded bytes per zlib call: a bomb never overshoots the cap by more
_CODINGS = {"": "identity", "identity": "identity", "gzip": "gzip", "x-gzip": "gzip",
            "deflate": "deflate"}  # fmt: skip
_SOCKET_EVENTS = ("connection.connect_tcp.complete", "connection.start_tls.complete")


class TransferError(ValueError):
    """An exchange failed: no connection, a bad answer, or a limit passed."""


class TransferTooLarge(TransferError):
    """The answer passed `max_bytes` (`where`: declared, on the wire, or decoded)."""

    def __init__(self, where: str, limit: int) -> None:
        super().__init__(f"the answer is larger than {_size(limit)} ({where}); not read further")
        self.where = where
        self.limit = limit


class TransferDeadline(TransferError):
    """The exchange took longer than the deadline: cut (`cut`), or a single connect or
    read that waited for all of it."""

    def __init__(self, message: str, *, cut: bool) -> None:
        super().__init__(message)
        self.cut = cut


class TransferAborted(TransferError):
    """`BoundedHttp.abort` was called: the exchange in flight was cut, later ones refused."""


@dataclass
class HttpAnswer:
    """A complete answer: its status, headers and decoded body (at most 4 KB if not 2xx)."""

    status: int
    reason: str
    headers: httpx.Headers
    body: bytes


class _Flight:
    """One exchange in progress: its deadline, and whether it was cut for passing it."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.expired = False


class BoundedHttp:
    """Runs requests on `http` with a deadline for each whole exchange and capped answers.

    Meant for one thread at a time (a batch job's); `abort` may come from any thread.

    Args:
        http: the client (its auth, headers, transport); its own timeouts bound each
            connect and read, within the deadline.
        timeout: seconds for a whole exchange.
    """

    def __init__(self, http: httpx.Client, timeout: float) -> None:
        if not timeout > 0:
            raise TransferError(f"timeout {timeout!r}: expected seconds > 0")
        self.http = http
        self.timeout = timeout
        self._lock = threading.Lock()
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self._flights: set[_Flight] = set()
        self._aborted: str | None = None

    @property
    def aborted(self) -> bool:
        """Whether `abort` was called."""
        return self._aborted is not None

    def abort(self, reason: str) -> None:
        """Cut the exchange in flight and refuse every later one; thread-safe.

        The thread in the exchange gets `TransferAborted(reason)` at once instead of
        waiting for the server.
        """
        with self._lock:
            self._aborted = reason
            sockets = list(self._sockets)
        for sock in sockets:
            _cut(sock)

    def exchange(
        self,
        method: str,
        url: str,
        *,
        max_bytes: int,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
    ) -> HttpAnswer:
        """One request and its whole answer, within the deadline and `max_bytes`.

        Returns:
            The answer, whatever its status (a non-2xx body is cut at 4 KB, not refused).

        Raises:
            TransferTooLarge: a 2xx body over `max_bytes` (declared, on the wire or decoded).
            TransferDeadline: the exchange passed the deadline (or a connect/read timed out).
            TransferAborted: `abort` was called.
            TransferError: no connection, a broken or corrupt answer, an unknown coding.
        """
        flight = _Flight(time.monotonic() + self.timeout)
        with self._lock:
            if self._aborted is not None:
                raise TransferAborted(self._aborted)
            self._flights.add(flight)
        timer = threading.Timer(self.timeout, self._expire, args=(flight,))
        timer.daemon = True
        timer.start()
        try:
            request = self.http.build_request(
                method,
                url,
                params=params,
                headers=headers,
                content=content,
                extensions={"trace": self._trace},
            )
            response = self.http.send(request, stream=True, follow_redirects=False)
            try:
                ok = 200 <= response.status_code < 300
                body = self._read(response, flight, max_bytes if ok else _ERROR_BODY, cut=not ok)
            finally:
                response.close()
        except (httpx.HTTPError, OSError) as exc:
            self._raise_if_cut(flight)
            if isinstance(exc, httpx.TimeoutException):
                raise TransferDeadline(
                    f"no answer within {self.timeout:g} s (timeout)", cut=False
                ) from None
            raise TransferError(f"{type(exc).__name__}: {exc}") from None
        finally:
            timer.cancel()
            with self._lock:
                self._flights.discard(flight)
        self._raise_if_cut(flight)
        return HttpAnswer(response.status_code, response.reason_phrase, response.headers, body)

    # --- cutting ------------------------------------------------------------------------

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        # httpcore's trace hook: keep each socket opened, so a deadline or abort can cut it.
        if event not in _SOCKET_EVENTS:
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            self._sockets.add(sock)
            late = self._aborted is not None or any(f.expired for f in self._flights)
        if late:  # the deadline passed, or abort came, while connecting
            _cut(sock)

    def _expire(self, flight: _Flight) -> None:
        with self._lock:
            if flight not in self._flights:
                return
            flight.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _cut(sock)

    def _raise_if_cut(self, flight: _Flight) -> None:
        if self._aborted is not None:
            raise TransferAborted(self._aborted)
        if flight.expired:
            raise TransferDeadline(
                f"no complete answer within {self.timeout:g} s (the deadline is for the whole "
                "request, not per read)",
                cut=True,
            )

    # --- reading ------------------------------------------------------------------------

    def _read(self, response: httpx.Response, flight: _Flight, cap: int, *, cut: bool) -> bytes:
        """The body, decoded, refused past `cap` (or cut there when `cut`: error bodies)."""
        declared = response.headers.get("content-length", "")
        if not cut and declared.isdigit() and int(declared) > cap:
            raise TransferTooLarge(f"declared Content-Length {declared}", cap)
        given = response.headers.get("content-encoding", "").strip().lower()
        coding = _CODINGS.get(given)
        if coding is None:
            raise TransferError(f"unsupported Content-Encoding {given[:40]!r} (gzip or deflate)")
        chunks: Iterable[bytes] = response.iter_raw()
        if response.is_stream_consumed:  # an answer built in memory (tests): decoded already
            chunks, coding = [response.content], "identity"
        inflater = _Inflater(coding, cap)
        wire = 0
        try:
            for raw in chunks:
                wire += len(raw)
                if wire > cap:
                    raise TransferTooLarge("on the wire", cap)
                inflater.feed(raw)
                if time.monotonic() > flight.deadline:
                    flight.expired = True
                    break
            else:
                inflater.finish()
        except TransferTooLarge:
            if not cut:
                raise
        except zlib.error as exc:
            raise TransferError(f"the {coding} answer is corrupt ({exc})") from None
        del inflater.out[cap:]
        return bytes(inflater.out)


class _Inflater:
    """Decodes a Content-Encoding a step at a time, into `out`, never past `cap` + 1 MiB."""

    def __init__(self, coding: str, cap: int) -> None:
        self.coding = coding
        self.cap = cap
        self.out = bytearray()
        self._z = None if coding == "identity" else zlib.decompressobj(_wbits(coding))
        self._started = False
        self._fed = 0

    def feed(self, data: bytes) -> None:
        if self._z is None:
            self._add(data)
            return
        self._fed += len(data)
        try:
            self._inflate(data)
        except zlib.error:
            if self._started or self.coding != "deflate":
                raise
            # "deflate" is zlib-wrapped by the RFC, raw deflate from some servers.
            self._z = zlib.decompressobj(-zlib.MAX_WBITS)
            self._inflate(data)

    def finish(self) -> None:
        if self._z is not None:
            self._add(self._z.flush())
            # A stream cut short inflates without complaint to what it had: a truncated
            # search answer would read as "no studies". An empty body is just empty.
            if self._fed and not self._z.eof:
                raise zlib.error("the stream ends before its end marker (truncated)")

    def _inflate(self, data: bytes) -> None:
        assert self._z is not None
        while not self._z.eof:
            step = min(_INFLATE_STEP, self.cap - len(self.out) + 1)
            chunk = self._z.decompress(data, step)
            self._started = True
            self._add(chunk)
            data = self._z.unconsumed_tail
            if not data and len(chunk) < step:  # input used up, no output pending
                return

    def _add(self, chunk: bytes) -> None:
        if len(self.out) + len(chunk) > self.cap:
            self.out += chunk[: self.cap + 1 - len(self.out)]
            raise TransferTooLarge("decoded", self.cap)
        self.out += chunk


def _wbits(coding: str) -> int:
    return 16 + zlib.MAX_WBITS if coding == "gzip" else zlib.MAX_WBITS


def _cut(sock: socket.socket) -> None:
    # shutdown() wakes a read blocked in another thread (close() would not, on Linux).
    # socket.socket's own shutdown even on an SSLSocket, whose override would reset state
    # the reading thread is using.
    with contextlib.suppress(OSError):  # already closed, or never connected
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _size(n: int) -> str:
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n} bytes"
