"""What a network peer can make `cxr listen` hold: connections, time, memory and disk.

pynetdicom's acceptor trusts its peer in four places (issue 18, measured at 3.0.4):

1. Before association. Each TCP connection gets an association thread at once, and that
   thread counts against `maximum_associations` (10). It waits `acse_timeout` (30 s) for an
   A-ASSOCIATE-RQ even when the peer has already closed, and its reader blocks for up to
   `network_timeout` (60 s) on a PDU whose header promised more bytes than came. Ten
   16-byte headers claiming 4 GiB held every slot for 30 to 60 s.
2. PDU lengths. The reader reads as many bytes as the 4-byte PDU length claims, into one
   buffer, whatever maximum PDU length was negotiated (and 0, "no limit", was advertised).
3. Dataset size. A C-STORE dataset is accumulated in memory (or, with
   `STORE_RECV_CHUNKED_DATASET`, in a temporary file) without limit, and a temporary file
   is left behind when the association ends half-way.
4. Duration. An association that sends a C-ECHO now and then is never idle, so ten of
   them blocked every other sender indefinitely (issue 42: from eight addresses, four
   each, they filled all 32 slots for the hour an association may last).

This module closes them in front of pynetdicom, in the network layer, where a DICOM
server such as Orthanc or dcm4chee keeps its own limits:

- `GuardedAssociationServer` admits a connection only from an allowed address, with at
  most `max_associations_per_host` connections open from that address (handshaking or
  associated), at most `MAX_HANDSHAKES_PER_HOST` of them handshaking, and at most
  `max_associations` associations (plus as many handshakes) in all; over a limit it
  answers A-ASSOCIATE-RJ "local limit exceeded" (transient) at once. When every handshake
  slot is taken, the oldest incomplete handshake is closed for the new connection (issue
  42: ten addresses stalling half-way through their A-ASSOCIATE-RQ held all 32 slots).
  Its request handler reads the A-ASSOCIATE-RQ itself, within `association_timeout_s`
  for the whole PDU (no per-read reset, so a byte every few seconds does not help) and at
  most `MAX_CONTROL_PDU` bytes, before pynetdicom sees the connection: a peer that closes,
  stalls or lies about the length never reaches pynetdicom's slot count and its thread
  ends when it closes or at the deadline. The handler then waits for the association and
  aborts it after `max_association_s`, and deletes what a half-received C-STORE left on
  disk. When every association slot is taken, a new association aborts the open one
  that has gone longest without receiving an instance (C-STORE), if that is at least
  `evict_quiet_s`: keep-alive associations (C-ECHO only) hold a slot only while no one
  else needs it, as `cxr serve` closes its longest idle connection at its cap.
- `_LimitedSocket`, the association's socket, checks each PDU header before reading the
  PDU: a P-DATA-TF longer than the `max_pdu` we advertised (PS3.8 9.3.1: the peer must not
  send more) or another PDU longer than `MAX_CONTROL_PDU` aborts the association at once,
  with nothing allocated. It also counts the dataset bytes of each DIMSE message as they
  arrive, from the PDV headers: a C-STORE dataset over `max_dataset_bytes`, another
  message's dataset over `MAX_OTHER_DATASET` (pynetdicom keeps those in memory; the
  listener offers no service that takes one) or a command set over `MAX_COMMAND_SET` is
  aborted (A-ABORT) while it is received, not after it has been stored. A PDU must arrive
  whole within `idle_timeout_s`, and an association with no PDU for `idle_timeout_s` is
  aborted (pynetdicom's `network_timeout`).

Why A-ABORT, not an "out of resources" answer, for an oversized dataset: answering needs
the rest of the dataset read (and thrown away), which keeps the slot and the bandwidth
busy for as long as the sender wants, 4 GiB if it says so. The abort is the DICOM upper
layer's answer to a PDU it will not take (PS3.8 9.3.8, "invalid PDU parameter value").
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import queue
import socket
import struct
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from copy import deepcopy
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pynetdicom import evt
from pynetdicom._globals import MODE_ACCEPTOR
from pynetdicom.association import Association
from pynetdicom.transport import AssociationSocket, RequestHandler, ThreadedAssociationServer

__all__ = [
    "WARN_INTERVAL_S",
    "MAX_COMMAND_SET",
    "MAX_HANDSHAKES_PER_HOST",
    "MAX_CONTROL_PDU",
    "MAX_OTHER_DATASET",
    "GuardedAssociationServer",
    "ListenerLimits",
    "host_of",
    "parse_hosts",
]

log = logging.getLogger(__name__)

# An A-ASSOCIATE-RQ proposing all 128 presentation contexts with ten 64-character transfer
# syntaxes each is about 100 KiB; the other control PDUs (release, abort) are 10 bytes.
MAX_CONTROL_PDU = 256 * 1024
# A C-STORE-RQ command set is about 200 bytes (PS3.7 9.3.1.1).
MAX_COMMAND_SET = 64 * 1024
# Datasets of messages other than C-STORE-RQ: pynetdicom keeps them in memory, and the
# listener offers no service (only Storage and Verification) that takes one.
MAX_OTHER_DATASET = 1024 * 1024
# Association requests arriving at once from one address: a modality or a PACS opens its
# associations one after another, each request sent whole in one write.
MAX_HANDSHAKES_PER_HOST = 2

_A_ASSOCIATE_RQ, _P_DATA_TF = 0x01, 0x04
_C_STORE_RQ = 0x0001
_DRAIN_S = 1.0  # after a refusal, how long the refused request is read (and dropped)
WARN_INTERVAL_S = 10.0  # one refusal warning per peer address per interval


@dataclass(frozen=True)
class ListenerLimits:
    """The bounds of `cxr listen` (flags and `CXR_LISTEN_*` settings of the same names).

    Args:
        max_pdu: the Maximum Length advertised in the A-ASSOCIATE-AC and enforced on every
            P-DATA-TF (bytes, 4096..4194304). Default 128 KiB, the largest dcmtk's storescp
            offers: larger PDUs hardly speed up a transfer, and each is held whole in memory.
        max_dataset_bytes: the largest C-STORE dataset (bytes). Default 128 MiB: the largest
            image the listener predicts (`--max-pixels` 50,000,000 at 16 bits) is 100 MB.
        max_associations: associations open at once, from all peers (1..1000); as many
            connections again may be handshaking.
        max_associations_per_host: connections open at once from one IP address, whatever
            their stage (1..max_associations). Default 4: a modality or a PACS sends over one
            or a few associations at a time, and one address can never hold more than 4 of
            the 32 slots.
        association_timeout_s: from connection to a complete A-ASSOCIATE-RQ, and each later
            ACSE wait (release), in seconds.
        idle_timeout_s: an association with no PDU for this long is aborted; each PDU must
            arrive whole within it.
        max_association_s: an association open this long is aborted. Default one hour:
            longer than any legitimate push a listener for chest radiographs receives (a
            PACS may send a day's backlog over one association), short enough that a
            stuck or keep-alive association does not hold a slot for days.
        evict_quiet_s: at the association cap, a new association aborts the one that has
            received no instance (C-STORE) for longest, if for at least this long (from
            its start when it never sent one). Default 10 s: a sender pushing a study
            sends its next instance within a fraction of that, while an association kept
            open with C-ECHOs only, or idle between exams, gives its slot to a sender
            with work. With the per-host cap, this is what keeps keep-alive
            associations from many addresses from starving other senders.
        min_free_bytes: an instance is refused (0xA700, out of resources: the sender
            retries later) while the inbox's file system has less than this free. Default
            1 GiB, so a sender faster than the model, or a flood, stops short of filling the
            disk that the results, the database and the system share (0: no reserve).

    Raises:
        ValueError: a bound out of its range (the message names the flag).
    """

    max_pdu: int = 131_072
    max_dataset_bytes: int = 128 * 1024 * 1024
    max_associations: int = 32
    max_associations_per_host: int = 4
    association_timeout_s: float = 10.0
    idle_timeout_s: float = 60.0
    max_association_s: float = 3600.0
    evict_quiet_s: float = 10.0
    min_free_bytes: int = 1024 * 1024 * 1024

    def __post_init__(self) -> None:
        checks: list[tuple[str, float, float, float]] = [
            ("--max-pdu", self.max_pdu, 4096, 4 * 1024 * 1024),
            ("--max-dataset-mb (bytes)", self.max_dataset_bytes, 1, 2**40),
            ("--max-associations", self.max_associations, 1, 1000),
            ("--max-associations-per-host", self.max_associations_per_host, 1, 1000),
            ("--association-timeout", self.association_timeout_s, 0.1, 600),
            ("--idle-timeout", self.idle_timeout_s, 0.1, 86_400),
            ("--max-association-duration", self.max_association_s, 0.1, 7 * 86_400),
            ("--evict-quiet-after", self.evict_quiet_s, 0, 7 * 86_400),
            ("--min-free-mb (bytes)", self.min_free_bytes, 0, 2**50),
        ]
        for flag, value, low, high in checks:
            if not low <= value <= high:
                raise ValueError(f"{flag} {value}: must be between {low:g} and {high:g}")
        if self.max_associations_per_host > self.max_associations:
            raise ValueError(
                f"--max-associations-per-host {self.max_associations_per_host}: must not "
                f"exceed --max-associations {self.max_associations}"
            )


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_hosts(values: Sequence[str]) -> tuple[Network, ...]:
    """Addresses and networks (`10.0.0.5`, `10.0.0.0/24`, `::1`) as IP networks.

    Raises:
        ValueError: an entry that is not an IP address or network (host names are refused:
            a name resolved once would silently go stale).
    """
    networks = []
    for value in values:
        text = value.strip()
        if not text:
            continue
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ValueError(
                f"--allow-host {text!r}: not an IP address or network (e.g. 10.0.0.5, "
                "10.0.0.0/24); give addresses, not host names"
            ) from None
    return tuple(networks)


def _address(peer: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The peer's IP address; an IPv4 peer on a dual-stack socket as IPv4.

    Raises:
        ValueError: `peer` is not an IP address.
    """
    address = ipaddress.ip_address(peer.split("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def host_of(peer: str) -> str:
    """The key the per-host cap counts `peer` under: its IPv4 address, or its IPv6 /64.

    One IPv6 host usually holds a whole /64 (SLAAC, privacy addresses), so counting single
    IPv6 addresses would let one machine take every slot.
    """
    try:
        address = _address(peer)
    except ValueError:
        return peer
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def _a_associate_rj(result: int, source: int, reason: int) -> bytes:
    return struct.pack(">BBLBBBB", 0x03, 0, 4, 0, result, source, reason)  # PS3.8 9.3.4


def _a_abort(reason: int) -> bytes:
    # Source 2: the service provider (PS3.8 9.3.8); reason 0 not specified, 1 unrecognized
    # PDU, 2 unexpected PDU, 6 invalid PDU parameter value.
    return struct.pack(">BBLBBBB", 0x07, 0, 4, 0, 0, 2, reason)


_REJECT_BUSY = _a_associate_rj(0x02, 0x03, 0x02)  # transient, presentation, local limit
_REJECT_HOST = _a_associate_rj(0x01, 0x01, 0x01)  # permanent, service user, no reason


class _Refused(Exception):
    """The connection ends before pynetdicom sees it (`abort`: the A-ABORT reason, or None)."""

    def __init__(self, message: str, abort: int | None = None) -> None:
        super().__init__(message)
        self.abort = abort


def _recv_exactly(sock: socket.socket, size: int, deadline: float) -> bytes:
    data = bytearray()
    while len(data) < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Refused(f"stalled after {len(data)} of {size} bytes")
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(min(size - len(data), 65536))
        except TimeoutError:
            raise _Refused(f"stalled after {len(data)} of {size} bytes") from None
        except OSError as exc:
            raise _Refused(f"connection failed: {exc}") from None
        if not chunk:
            raise _Refused(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def _read_associate_rq(sock: socket.socket, timeout_s: float) -> bytes:
    """The first PDU, which must be a whole A-ASSOCIATE-RQ of sane length, within timeout_s."""
    deadline = time.monotonic() + timeout_s
    header = _recv_exactly(sock, 6, deadline)
    pdu_type, _, length = struct.unpack(">BBL", header)
    if pdu_type != _A_ASSOCIATE_RQ:
        reason = 2 if 0x01 <= pdu_type <= 0x07 else 1
        raise _Refused(f"first PDU is of type 0x{pdu_type:02X}, not A-ASSOCIATE-RQ", reason)
    if length > MAX_CONTROL_PDU:
        raise _Refused(
            f"A-ASSOCIATE-RQ of {length:,} bytes announced (at most {MAX_CONTROL_PDU:,})", 6
        )
    return header + _recv_exactly(sock, length, deadline)


def _ae_title_problem(request: bytes) -> tuple[str, bytes] | None:
    """Why the A-ASSOCIATE-RQ's called or calling AE title is not an AE value (PS3.5 6.2:
    16 bytes of printable ASCII without backslash, spaces padding, not blank), with the
    A-ASSOCIATE-RJ to answer; None when both are.

    Checked here because pynetdicom logs a traceback for each malformed title (issue 42:
    one per connection, a flood of them unbounded) before it refuses it.
    """
    for start, which, reason in ((10, "called", 7), (26, "calling", 3)):
        raw = request[start : start + 16]
        text = raw.strip(b" \x00")
        if len(raw) < 16 or not text or any(b < 0x20 or b > 0x7E or b == 0x5C for b in text):
            return (
                f"its {which} AE title is not a DICOM AE title (printable ASCII without "
                "backslash, not blank)",
                _a_associate_rj(0x01, 0x01, reason),  # permanent, service user
            )
    return None


def _close_after(
    sock: socket.socket, answer: bytes | None, *, drain: bool, unread: bool = False
) -> None:
    """Send `answer`, then (with `drain`) read and drop what the peer sends for a moment; close.

    With `unread`, the peer's A-ASSOCIATE-RQ has not been read yet: it is read first (for
    at most `_DRAIN_S`), as a requestor takes an A-ASSOCIATE-RJ only as the answer to its
    request. Closing a socket with unread data makes the kernel send a reset, which may
    destroy the answer before the peer reads it; the short drain avoids that for a
    well-behaved peer.
    """
    try:
        if answer and unread:
            if not drain:
                answer = None  # too many refusals at once: close without a word
            else:
                try:
                    _read_associate_rq(sock, _DRAIN_S)
                except _Refused as exc:
                    # Not a request: an invalid one (a length over the limit, another PDU)
                    # gets the A-ABORT an admitted one would; a stalled one, nothing.
                    answer = _a_abort(exc.abort) if exc.abort is not None else None
        if answer:
            sock.settimeout(_DRAIN_S)
            sock.sendall(answer)
            sock.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + _DRAIN_S
            drained = 0
            while drain and drained < MAX_CONTROL_PDU:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                sock.settimeout(left)
                chunk = sock.recv(65536)
                if not chunk:
                    break
                drained += len(chunk)
    except OSError:
        pass
    finally:
        sock.close()


def _discard_received_datasets(assoc: Association) -> None:
    """Delete the temporary files of C-STORE datasets an ended association never handed over.

    With `STORE_RECV_CHUNKED_DATASET`, pynetdicom writes each dataset to a temporary file
    (`delete=False`) and removes it after the C-STORE handler; a message cut off by an
    abort, or received but not yet served when the association ended, keeps its file.
    """
    handles = [getattr(assoc.dimse.message, "_data_set_file", None)]
    while True:
        try:
            _, primitive = assoc.dimse.msg_queue.get_nowait()
        except queue.Empty:
            break
        handles.append(getattr(primitive, "_dataset_file", None))
    for handle in handles:
        if handle is None:
            continue
        try:
            handle.close()
            Path(handle.name).unlink(missing_ok=True)
        except OSError as exc:
            log.warning("cannot remove a partly received dataset %s: %s", handle.name, exc)


def _command_field(command: bytes) -> int | None:
    """(0000,0100) Command Field of a command set (implicit VR little endian, PS3.7 6.3.1)."""
    offset = 0
    while offset + 8 <= len(command):
        group, element, length = struct.unpack_from("<HHL", command, offset)
        if (group, element) == (0x0000, 0x0100) and length == 2 and offset + 10 <= len(command):
            return int(struct.unpack_from("<H", command, offset + 8)[0])
        offset += 8 + length
    return None


class _LimitedSocket(AssociationSocket):
    """pynetdicom's socket with the PDU, dataset and time bounds of the module docstring.

    pynetdicom's reader calls `recv(6)` for a PDU header, then `recv(length)` for the rest;
    `recv` answers the header call from the A-ASSOCIATE-RQ the handler already read, checks
    the length the header announces before reading anything more, and counts dataset bytes
    from the PDV headers of each P-DATA-TF. A refusal sends an A-ABORT, shuts the socket
    and returns short, which pynetdicom handles as a lost connection (A-P-ABORT).
    """

    def __init__(
        self,
        assoc: Association,
        client_socket: socket.socket,
        *,
        received: bytes,
        server: GuardedAssociationServer,
        peer: str,
    ) -> None:
        super().__init__(assoc, client_socket=client_socket)
        self._received = bytearray(received)
        self._server = server
        self._peer = peer
        self._header: tuple[int, int] | None = None  # (type, length) of the PDU being read
        self._command = bytearray()
        self._dataset_limit = MAX_OTHER_DATASET
        self._dataset_bytes = 0
        self._refused = False
        # When this association last received part of an instance (C-STORE), or began.
        self.last_store = time.monotonic()

    @property
    def ready(self) -> bool:
        """True when a PDU is waiting: in the buffered A-ASSOCIATE-RQ, or on the socket."""
        if self._refused:
            return False
        if self._received:
            return True
        return bool(super().ready)

    def recv(self, nr_bytes: int) -> bytearray:
        """`nr_bytes` from the peer, or fewer once a bound is exceeded (the PDU is refused)."""
        if self._refused:
            return bytearray()
        limits = self._server.limits
        data = self._take(nr_bytes, limits.idle_timeout_s)
        if self._header is None:
            if len(data) == 6 and 0x01 <= data[0] <= 0x07:  # pynetdicom refuses the rest
                pdu_type, _, length = struct.unpack(">BBL", data)
                most = limits.max_pdu if pdu_type == _P_DATA_TF else MAX_CONTROL_PDU
                if length > most:
                    return self._refuse(f"a PDU of {length:,} bytes (at most {most:,})", 6)
                self._header = (pdu_type, length)
            return data
        pdu_type, _ = self._header
        self._header = None
        if pdu_type == _P_DATA_TF and len(data) == nr_bytes:
            problem = self._count(bytes(data))
            if problem:
                return self._refuse(problem, 0)
        return data

    def _take(self, size: int, timeout_s: float) -> bytearray:
        deadline = time.monotonic() + timeout_s
        data = self._received[:size]
        del self._received[:size]
        sock = self.socket
        if sock is None:
            return data
        try:
            while len(data) < size:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"a PDU did not arrive whole within {timeout_s:g} s")
                sock.settimeout(remaining)
                chunk = sock.recv(min(size - len(data), 65536))
                if not chunk:
                    break
                data += chunk
        finally:
            sock.settimeout(timeout_s)  # what pynetdicom's sends run under
        return data

    def _count(self, body: bytes) -> str | None:
        """Account the PDVs of one P-DATA-TF; the reason to refuse it, or None."""
        offset = 0
        while offset + 6 <= len(body):
            length = struct.unpack_from(">L", body, offset)[0]
            if length < 2 or offset + 4 + length > len(body):
                return None  # malformed: pynetdicom refuses it (Evt19)
            header = body[offset + 5]
            size = length - 2
            if header & 1:  # command set fragment
                self._command += body[offset + 6 : offset + 4 + length]
                if len(self._command) > MAX_COMMAND_SET:
                    return f"a command set over {MAX_COMMAND_SET:,} bytes"
                if header & 2:  # last one: a C-STORE-RQ may carry a large dataset
                    field = _command_field(bytes(self._command))
                    store = field == _C_STORE_RQ
                    if store:
                        self.last_store = time.monotonic()
                    self._dataset_limit = (
                        self._server.limits.max_dataset_bytes if store else MAX_OTHER_DATASET
                    )
                    self._command.clear()
                    self._dataset_bytes = 0
            else:
                self._dataset_bytes += size
                if self._dataset_limit != MAX_OTHER_DATASET:  # a C-STORE's dataset
                    self.last_store = time.monotonic()
                if self._dataset_bytes > self._dataset_limit:
                    return (
                        f"a dataset over {self._dataset_limit:,} bytes "
                        f"({self._dataset_bytes:,} received so far)"
                    )
                if header & 2:
                    self._dataset_bytes = 0
            offset += 4 + length
        return None

    def _refuse(self, what: str, reason: int) -> bytearray:
        self._refused = True
        self._server.warn(self._peer, "association from %s aborted: %s", what)
        self._server.report("aborted")
        sock = self.socket
        if sock is not None:
            try:
                sock.settimeout(_DRAIN_S)
                sock.sendall(_a_abort(reason))
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return bytearray()


class _GuardedRequestHandler(RequestHandler):
    """One connection: admission, the A-ASSOCIATE-RQ read here, then pynetdicom's association."""

    server: GuardedAssociationServer

    def handle(self) -> None:
        """Admit, read the A-ASSOCIATE-RQ, run the association to its end or time limit."""
        server = self.server
        sock: socket.socket = self.request
        address = str(self.client_address[0])
        peer = host_of(address)
        refusal = server.check_host(address) or server.admit(peer, sock)
        if refusal is not None:
            reason, rejection = refusal
            server.warn(peer, "connection from %s refused: %s", reason)
            server.report("refused")
            server.close_after(sock, rejection, unread=True)
            return
        stage = "handshake"
        answer: bytes | None = None
        try:
            try:
                request = _read_associate_rq(sock, server.limits.association_timeout_s)
            except _Refused as exc:
                if exc.abort is None:  # closed or stalled: port scans, health checks
                    log.info("connection from %s dropped before association: %s", peer, exc)
                else:
                    server.warn(peer, "connection from %s refused: %s", exc)
                    server.report("aborted")
                    answer = _a_abort(exc.abort)
                return
            malformed = _ae_title_problem(request)
            if malformed is not None:
                server.warn(peer, "association from %s rejected: %s", malformed[0])
                server.report("refused")
                answer = malformed[1]
                return
            busy = server.promote(peer, sock)
            if busy is not None:
                server.warn(peer, "association from %s refused: %s", busy)
                server.report("refused")
                answer = _REJECT_BUSY
                return
            stage = "associated"
            assoc = self._create_guarded_association(sock, request, peer)
            server.opened(peer, sock, assoc)
            evt.trigger(assoc, evt.EVT_CONN_OPEN, {"address": self.client_address})
            assoc.start()
            assoc.join(server.limits.max_association_s)
            if assoc.is_alive():
                log.warning(
                    "association from %s aborted: open for more than %g s "
                    "(--max-association-duration)",
                    peer, server.limits.max_association_s,
                )  # fmt: skip
                server.report("aborted")
                assoc.abort()
                assoc.join(server.limits.association_timeout_s)
            _discard_received_datasets(assoc)
        finally:
            server.release(peer, stage, sock)  # before the drain: a refused peer holds no slot
            if stage == "handshake":
                server.close_after(sock, answer)

    def _create_guarded_association(
        self, sock: socket.socket, request: bytes, peer: str
    ) -> Association:
        # pynetdicom 3.0.4's RequestHandler._create_association, with _LimitedSocket.
        assoc = Association(self.ae, MODE_ACCEPTOR)
        assoc._server = self.server
        assoc.name = f"AcceptorThread@{datetime.now():%Y%m%d%H%M%S}"
        assoc.set_socket(
            _LimitedSocket(assoc, sock, received=request, server=self.server, peer=peer)
        )
        assoc.acceptor.maximum_length = self.ae.maximum_pdu_size
        assoc.acceptor.ae_title = self.server.ae_title
        assoc.acceptor.address_info = self.local
        assoc.acceptor.implementation_class_uid = self.ae.implementation_class_uid
        assoc.acceptor.implementation_version_name = self.ae.implementation_version_name
        assoc.acceptor.supported_contexts = deepcopy(self.server.contexts)
        assoc.requestor.address_info = self.remote
        for event, handlers in self.server._handlers.items():
            if event.is_intervention and handlers:
                assoc.bind(event, *handlers)
            elif isinstance(event, evt.NotificationEvent):
                for handler in handlers:
                    assoc.bind(event, handler[0], handler[1])  # type: ignore[index]
        return assoc


class GuardedAssociationServer(ThreadedAssociationServer):
    """pynetdicom's threaded association server behind the admission rules of this module.

    Built by `AE.make_server(..., server_class=GuardedAssociationServer, limits=...)`.

    Args:
        limits: the bounds.
        allow_hosts: if given, only peers in these networks may connect.
        report: called with "refused" (a connection refused by a limit or the host list) or
            "aborted" (an association or handshake ended for exceeding a bound).
    """

    daemon_threads = True  # a connection thread never delays the process's exit
    request_queue_size = 64  # listen backlog: a burst of real senders is not dropped

    def __init__(
        self,
        ae: Any,
        address: tuple[str, int],
        ae_title: str,
        contexts: list[Any],
        ssl_context: Any = None,
        evt_handlers: list[Any] | None = None,
        *,
        limits: ListenerLimits,
        allow_hosts: Sequence[Network] = (),
        report: Callable[[str], None] | None = None,
    ) -> None:
        self.limits = limits
        self.allow_hosts = tuple(allow_hosts)
        self.report: Callable[[str], None] = report or (lambda _kind: None)
        self._slots_lock = threading.Lock()
        self._per_host: Counter[str] = Counter()
        # Connections that have not sent their whole A-ASSOCIATE-RQ, the oldest first.
        self._handshakes: OrderedDict[socket.socket, str] = OrderedDict()
        self._handshakes_per_host: Counter[str] = Counter()
        self._associated = 0
        # Open associations, and those aborted for a newer one (their slot given already).
        self._open: dict[socket.socket, tuple[str, Association]] = {}
        self._evicted: set[socket.socket] = set()
        self._warned: dict[str, tuple[float, int]] = {}
        # Refused connections drained at once (each for up to _DRAIN_S); more are closed
        # without the drain, so a flood of refusals cannot pile up threads.
        self._draining = threading.BoundedSemaphore(64)
        super().__init__(
            ae,
            address,
            ae_title,
            contexts,
            ssl_context,
            evt_handlers=evt_handlers,
            request_handler=_GuardedRequestHandler,
        )

    def check_host(self, address: str) -> tuple[str, bytes] | None:
        """Whether `address` may connect (`allow_hosts`).

        Returns:
            None, or why the connection is refused and the A-ASSOCIATE-RJ to answer.
        """
        if not self.allow_hosts:
            return None
        try:
            ip = _address(address)
        except ValueError:
            return f"{address!r} is not an IP address", _REJECT_HOST
        if not any(ip in network for network in self.allow_hosts):
            return "address not in --allow-host", _REJECT_HOST
        return None

    def admit(self, peer: str, sock: socket.socket) -> tuple[str, bytes] | None:
        """Take a handshake slot for a new connection `sock` from `peer` (a key from
        `host_of`).

        One address may have at most `MAX_HANDSHAKES_PER_HOST` handshakes in progress. When
        all `max_associations` handshake slots are taken, the oldest handshake is closed
        for this one (as `cxr serve` closes its longest idle connection): peers that stall
        half-way through their A-ASSOCIATE-RQ cannot lock out one that sends it at once,
        from however many addresses they stall.

        Returns:
            None, or why the connection is refused and the A-ASSOCIATE-RJ to answer.
        """
        evicted: tuple[socket.socket, str] | None = None
        with self._slots_lock:
            if self._per_host[peer] >= self.limits.max_associations_per_host:
                return (
                    f"{self._per_host[peer]} connections already open from this address "
                    f"(--max-associations-per-host {self.limits.max_associations_per_host})",
                    _REJECT_BUSY,
                )
            if self._handshakes_per_host[peer] >= MAX_HANDSHAKES_PER_HOST:
                return (
                    f"{self._handshakes_per_host[peer]} association requests from this "
                    "address are still arriving",
                    _REJECT_BUSY,
                )
            if len(self._handshakes) >= self.limits.max_associations:
                evicted = self._handshakes.popitem(last=False)
            self._handshakes[sock] = peer
            self._handshakes_per_host[peer] += 1
            self._per_host[peer] += 1
        if evicted is not None:
            self.warn(
                evicted[1],
                "connection from %s closed: %s",
                "every handshake slot was taken; its A-ASSOCIATE-RQ was the oldest incomplete",
            )
            with contextlib.suppress(OSError):  # its thread's read ends; it releases
                evicted[0].shutdown(socket.SHUT_RDWR)
        return None

    def promote(self, peer: str, sock: socket.socket) -> str | None:
        """Turn `peer`'s handshake slot into an association slot; the refusal, or None.

        At the association cap, the open association that has received no instance for
        longest gives its slot, if for at least `evict_quiet_s` (it is aborted)."""
        evicted: tuple[str, Association] | None = None
        with self._slots_lock:
            if sock not in self._handshakes:
                return "its handshake slot was given to a newer connection"
            if self._associated >= self.limits.max_associations:
                evicted = self._quietest()
                if evicted is None:
                    return (
                        f"{self._associated} associations already open, none quiet for "
                        f"{self.limits.evict_quiet_s:g} s "
                        f"(--max-associations {self.limits.max_associations})"
                    )
            del self._handshakes[sock]
            self._handshakes_per_host[peer] -= 1
            if self._handshakes_per_host[peer] <= 0:
                del self._handshakes_per_host[peer]
            self._associated += 1
        if evicted is not None:
            other, assoc = evicted
            self.warn(
                other,
                "association from %s aborted: %s",
                "every association slot was taken and it had received no instance for "
                f"longest (at least {self.limits.evict_quiet_s:g} s, --evict-quiet-after)",
            )
            self.report("aborted")
            # Aborted from a thread of its own: A-ABORT waits for pynetdicom's reactor.
            threading.Thread(target=assoc.abort, name="cxr-listen-evict", daemon=True).start()
        return None

    def _quietest(self) -> tuple[str, Association] | None:
        """Under the lock: take the open association quiet longest (at least
        `evict_quiet_s`) off the count, or None."""
        now = time.monotonic()
        best: tuple[float, socket.socket] | None = None
        for sock, (_, assoc) in self._open.items():
            wrapper = assoc.dul.socket
            last = getattr(wrapper, "last_store", now)
            if now - last >= self.limits.evict_quiet_s and (best is None or last < best[0]):
                best = (last, sock)
        if best is None:
            return None
        sock = best[1]
        self._evicted.add(sock)
        self._associated -= 1
        return self._open.pop(sock)

    def opened(self, peer: str, sock: socket.socket, assoc: Association) -> None:
        """Record `peer`'s association on `sock` (promoted), a candidate to give its slot
        at the cap."""
        with self._slots_lock:
            self._open[sock] = (peer, assoc)

    def release(self, peer: str, stage: str, sock: socket.socket) -> None:
        """Give back `peer`'s slot, handshake or association, when its connection ends."""
        with self._slots_lock:
            if stage == "associated":
                if sock in self._evicted:  # its slot was given to a newer one already
                    self._evicted.discard(sock)
                else:
                    self._associated -= 1
                self._open.pop(sock, None)
            else:
                self._handshakes.pop(sock, None)  # gone already if it was closed for another
                self._handshakes_per_host[peer] -= 1
                if self._handshakes_per_host[peer] <= 0:
                    del self._handshakes_per_host[peer]
            self._per_host[peer] -= 1
            if self._per_host[peer] <= 0:
                del self._per_host[peer]

    def warn(self, peer: str, message: str, reason: object) -> None:
        """Log a refusal, at most once per peer every `WARN_INTERVAL_S` (a flood floods no log)."""
        now = time.monotonic()
        with self._slots_lock:
            last, skipped = self._warned.get(peer, (-WARN_INTERVAL_S, 0))
            if now - last < WARN_INTERVAL_S:
                self._warned[peer] = (last, skipped + 1)
                return
            if len(self._warned) > 4096:  # many peers: forget the old ones
                self._warned.clear()
            self._warned[peer] = (now, 0)
        more = f" ({skipped} more from this address not logged)" if skipped else ""
        log.warning(message + "%s", peer, reason, more)

    def close_after(
        self, sock: socket.socket, answer: bytes | None, *, unread: bool = False
    ) -> None:
        """Answer a refused connection and close it, draining it briefly if few others are.

        Args:
            sock: the connection.
            answer: the A-ASSOCIATE-RJ or A-ABORT to send (None: close without a word).
            unread: the A-ASSOCIATE-RQ is still to be read before `answer` is sent.
        """
        drain = self._draining.acquire(blocking=False)
        try:
            _close_after(sock, answer, drain=drain, unread=unread)
        finally:
            if drain:
                self._draining.release()

    @property
    def open_connections(self) -> dict[str, int]:
        """Connections open per peer address (handshaking or associated)."""
        with self._slots_lock:
            return dict(self._per_host)
