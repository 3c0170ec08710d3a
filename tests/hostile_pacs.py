"""A DICOMweb server on 127.0.0.1 that serves a small PACS and misbehaves on demand
(issue 18): gzip bombs, huge or endless answers, one byte every N seconds, endless QIDO
paging, redirects, deeply nested JSON, UIDs that are not UIDs.

    with HostileDicomweb([dx_bytes()]) as pacs:
        pacs.on(r"/instances/[^/]+$", pacs.gzip_bomb(decoded=2**30))
        DicomwebClient(pacs.url).retrieve_instance(...)
        pacs.bytes_sent                           # what the server managed to write

A real HTTP server (http.server in a thread), so clients are driven through their real
sockets, streaming and timeouts. Imported as `hostile_pacs` by the DICOMweb client's
tests (tests/batch/pacs/) and the service's jobs' (tests/app/): pytest puts tests/ on
sys.path; and by benchmarks/hostile_dicomweb.py.
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pydicom
from dicom_factory import build_dataset, chest_pixels, to_bytes

__all__ = ["HostileDicomweb", "Responder", "chest_instances", "tag", "with_bad_series"]

Responder = Callable[["_Handler", "re.Match[str]"], None]
_CHUNK = 64 * 1024
_BOUNDARY = "hostile"


def tag(code: str, value: Any, vr: str = "UI") -> dict[str, Any]:
    """One DICOM JSON element."""
    return {code: {"vr": vr, "Value": [value]}}


def chest_instances(n: int, *, study: str | None = None, series: str | None = None) -> list[bytes]:
    """`n` small chest DX files of one study (a new UID unless given), to serve."""
    study = study or pydicom.uid.generate_uid()
    out = []
    for i in range(n):
        ds = build_dataset(pixels=chest_pixels(64, 64, seed=i), study_uid=study)
        if series is not None:
            ds.SeriesInstanceUID = series
        out.append(to_bytes(ds))
    return out


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        pass  # quiet tests

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.server.owner.dispatch(self)

    do_POST = do_GET

    # --- writing, counted ---------------------------------------------------------------

    def send(
        self,
        status: int,
        body: bytes | Iterable[bytes] = b"",
        *,
        headers: dict[str, str] | None = None,
        length: int | None = None,
    ) -> None:
        """Answer with `body` (bytes, or chunks streamed as they come); stops quietly when
        the client hangs up. `length` (default: len(body) for bytes) sets Content-Length."""
        owner = self.server.owner
        if isinstance(body, bytes):
            length = len(body) if length is None else length
            body = [body]
        try:
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if length is not None:
                self.send_header("Content-Length", str(length))
            else:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
            for chunk in body:
                if owner.stopping.is_set():
                    return
                self.wfile.write(chunk)
                self.wfile.flush()
                with owner.lock:
                    owner.bytes_sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            with owner.lock:
                owner.hangups += 1
        finally:
            if length is None:
                self.close_connection = True

    def send_json(self, value: Any, status: int = 200) -> None:
        self.send(
            status, json.dumps(value).encode(), headers={"Content-Type": "application/dicom+json"}
        )

    @property
    def query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: HostileDicomweb

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client hanging up is what these tests provoke: no traceback on stderr


class HostileDicomweb:
    """A PACS holding `instances` (DICOM Part 10 bytes) whose routes can be overridden.

    Args:
        instances: the instances it serves (QIDO-RS lists them, WADO-RS returns them).

    Attributes:
        url: the DICOMweb service root (http://127.0.0.1:PORT/dicom-web).
        bytes_sent: body bytes written to clients so far (all requests).
        requests: the paths asked for, in order (with their query).
        first_request_at: when the first request came (time.monotonic), or None.
        hangups: answers cut by the client (it closed the connection).
    """

    def __init__(self, instances: Sequence[bytes] = ()) -> None:
        self.datasets = [
            pydicom.dcmread(io.BytesIO(data), stop_before_pixels=True) for data in instances
        ]
        self.files = {
            ds.SOPInstanceUID: data for ds, data in zip(self.datasets, instances, strict=True)
        }
        self.rules: list[tuple[re.Pattern[str], Responder]] = []
        self.requests: list[str] = []
        self.first_request_at: float | None = None  # time.monotonic()
        self.bytes_sent = 0
        self.hangups = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="hostile-pacs", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/dicom-web"

    def __enter__(self) -> HostileDicomweb:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def on(self, pattern: str, responder: Responder) -> None:
        """Answer paths matching `pattern` (re.search on the path below /dicom-web, without
        the query) with `responder`; later rules win."""
        self.rules.insert(0, (re.compile(pattern), responder))

    def dispatch(self, h: _Handler) -> None:
        with self.lock:
            self.requests.append(h.path)
            self.first_request_at = self.first_request_at or time.monotonic()
        path = urlsplit(h.path).path.removeprefix("/dicom-web")
        for pattern, responder in self.rules:
            match = pattern.search(path)
            if match:
                responder(h, match)
                return
        self._pacs(h, path)

    # --- the well-behaved PACS ----------------------------------------------------------

    def _pacs(self, h: _Handler, path: str) -> None:
        parts = path.strip("/").split("/")
        data = self.datasets
        if parts == ["studies"]:
            studies = sorted({d.StudyInstanceUID for d in data})
            h.send_json([tag("0020000D", s) for s in studies])
        elif len(parts) == 3 and parts[2] == "series":
            series = sorted(
                {(d.SeriesInstanceUID, d.Modality) for d in data if d.StudyInstanceUID == parts[1]}
            )
            h.send_json([tag("0020000E", s) | tag("00080060", m, "CS") for s, m in series])
        elif len(parts) == 5 and parts[4] == "instances":
            h.send_json(
                [
                    tag("00080018", d.SOPInstanceUID) | tag("00080016", d.SOPClassUID)
                    for d in data
                    if d.SeriesInstanceUID == parts[3]
                ]
            )
        elif len(parts) == 6 and parts[5] in self.files:
            h.send(200, multipart(self.files[parts[5]]), headers={"Content-Type": MULTIPART})
        else:
            h.send(404, b"no such resource", headers={"Content-Type": "text/plain"})

    # --- misbehaviours (responders) -----------------------------------------------------

    @staticmethod
    def gzip_bomb(decoded: int) -> Responder:
        """A WADO answer of `decoded` zero bytes, gzip-compressed (about 1/1000 on the wire)."""
        body = _gzip_zeros(decoded)

        def respond(h: _Handler, match: re.Match[str]) -> None:
            chunks = (body[i : i + _CHUNK] for i in range(0, len(body), _CHUNK))
            h.send(200, chunks, headers={"Content-Type": MULTIPART, "Content-Encoding": "gzip"},
                   length=len(body))  # fmt: skip

        return respond

    @staticmethod
    def huge(size: int, *, declare_length: bool = True, prefix: bytes = b"") -> Responder:
        """A WADO answer of one part of `size` bytes: `prefix`, then zeros, streamed (never
        held in memory); without `declare_length`, no Content-Length (read to the close)."""
        head = f"--{_BOUNDARY}\r\nContent-Type: application/dicom\r\n\r\n".encode() + prefix
        tail = f"\r\n--{_BOUNDARY}--\r\n".encode()
        size -= len(prefix)

        def chunks() -> Iterable[bytes]:
            yield head
            zeros = bytes(_CHUNK)
            left = size
            while left > 0:
                yield zeros[: min(left, _CHUNK)]
                left -= _CHUNK
            yield tail

        def respond(h: _Handler, match: re.Match[str]) -> None:
            length = len(head) + size + len(tail) if declare_length else None
            h.send(200, chunks(), headers={"Content-Type": MULTIPART}, length=length)

        return respond

    def slow(self, every_s: float, body: bytes = b"x" * 1000, *, head: bool = False) -> Responder:
        """One byte every `every_s` seconds: of the body (after prompt headers), or of the
        status line and headers themselves with `head=True`."""

        def drip(data: bytes) -> Iterable[bytes]:
            for i in range(len(data)):
                if self.stopping.wait(every_s):
                    return
                yield data[i : i + 1]

        def respond(h: _Handler, match: re.Match[str]) -> None:
            if not head:
                h.send(200, drip(body), headers={"Content-Type": MULTIPART}, length=len(body))
                return
            status = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
            try:
                for byte in drip(status):
                    h.wfile.write(byte)
                    h.wfile.flush()
            except OSError:
                pass
            h.close_connection = True

        return respond

    def endless_pages(self, code: str = "0020000D") -> Responder:
        """QIDO answers that always fill the page asked for with new UIDs (never ending)."""
        counter = iter(range(10**12))

        def respond(h: _Handler, match: re.Match[str]) -> None:
            limit = int(h.query.get("limit", "100"))
            h.send_json([tag(code, f"1.2.3.{next(counter)}") for _ in range(limit)])

        return respond

    @staticmethod
    def redirect(location: str, status: int = 302) -> Responder:
        def respond(h: _Handler, match: re.Match[str]) -> None:
            h.send(status, b"", headers={"Location": location})

        return respond

    @staticmethod
    def raw(
        body: bytes,
        status: int = 200,
        content_type: str = "application/dicom+json",
        **headers: str,
    ) -> Responder:
        """`body` as given; `headers` with "_" for "-" (Content_Encoding="gzip")."""
        extra = {name.replace("_", "-"): value for name, value in headers.items()}

        def respond(h: _Handler, match: re.Match[str]) -> None:
            h.send(status, body, headers={"Content-Type": content_type} | extra)

        return respond


MULTIPART = f'multipart/related; type="application/dicom"; boundary={_BOUNDARY}'


def multipart(data: bytes) -> bytes:
    """A one-part WADO-RS body."""
    return (
        f"--{_BOUNDARY}\r\nContent-Type: application/dicom\r\n\r\n".encode()
        + data
        + f"\r\n--{_BOUNDARY}--\r\n".encode()
    )


_BOMBS: dict[int, bytes] = {}


def _gzip_zeros(size: int) -> bytes:
    if size not in _BOMBS:
        packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        block = bytes(2**20)
        out = [packer.compress(block[: min(len(block), size - i)]) for i in range(0, size, 2**20)]
        _BOMBS[size] = b"".join(out) + packer.flush()
    return _BOMBS[size]


def with_bad_series(good: Sequence[bytes]) -> HostileDicomweb:
    """A PACS serving `good` (one study) whose series listing also holds a UID with a final
    newline and a series whose instance listing fails (HTTP 500)."""
    pacs = HostileDicomweb(good)
    study = pacs.datasets[0].StudyInstanceUID
    series = [tag("0020000E", d.SeriesInstanceUID) | tag("00080060", "DX", "CS")
              for d in pacs.datasets]  # fmt: skip
    series += [
        tag("0020000E", "1.2.3\n") | tag("00080060", "DX", "CS"),
        tag("0020000E", "1.2.500") | tag("00080060", "CR", "CS"),
    ]
    pacs.on(rf"/studies/{study}/series$", pacs.raw(json.dumps(series).encode()))
    pacs.on(r"/series/1\.2\.500/instances$", pacs.raw(b"database on fire", 500, "text/plain"))
    return pacs
