"""`cxr listen` against hostile senders (issue 18 items 4 and 5): raw sockets and a
pynetdicom SCU on loopback, the attacker at 127.0.0.2 and the real sender at 127.0.0.1."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import socket
import struct
import tempfile
import time
import tracemalloc
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pydicom
import pytest
from pydicom.uid import ImplicitVRLittleEndian
from pynetdicom import AE
from pynetdicom.association import Association
from pynetdicom.sop_class import Verification  # type: ignore[attr-defined]
from service_fixtures import DX_STORAGE, build_dataset, chest_pixels, to_bytes

from app.cli import main
from batch.listen.association_guard import ListenerLimits, host_of
from batch.listen.listener import ListenerConfigError, StoreListener

pytestmark = pytest.mark.issue(18)

ATTACKER = "127.0.0.2"  # Linux answers on all of 127/8: a second peer address
REAL = "127.0.0.1"
FAST = {"association_timeout_s": 1.0, "idle_timeout_s": 5.0}


@pytest.fixture(scope="module")
def labeler() -> Any:
    from batch.labeling import PipelineLabeler

    return PipelineLabeler()


@pytest.fixture
def spool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pynetdicom's temporary folder for received datasets, private to the test."""
    folder = tmp_path / "spool"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.fixture
def make_listener(
    tmp_path: Path, labeler: Any, spool: Path
) -> Iterator[Callable[..., StoreListener]]:
    started: list[StoreListener] = []

    def make(**kwargs: Any) -> StoreListener:
        limits = kwargs.pop("limits", {})
        listener = StoreListener(
            None,
            out=tmp_path / "out.jsonl",
            labeler=labeler,
            limits=ListenerLimits(**{**FAST, **limits}),
            **kwargs,
        )
        listener.start("127.0.0.1", 0)
        started.append(listener)
        return listener

    yield make
    for listener in started:
        listener.stop()


def _associate(
    port: int, *, bind: str = REAL, ae_title: str = "MODALITY", called: str = "CXR"
) -> Association:
    ae = AE(ae_title=ae_title)
    ae.add_requested_context(Verification)
    ae.add_requested_context(DX_STORAGE, "1.2.840.10008.1.2.1")
    ae.acse_timeout = ae.network_timeout = ae.dimse_timeout = 5
    return ae.associate("127.0.0.1", port, ae_title=called, bind_address=(bind, 0))


def _echo(port: int, bind: str = REAL) -> bool:
    assoc = _associate(port, bind=bind)
    if not assoc.is_established:
        return False
    status = assoc.send_c_echo()
    assoc.release()
    return bool(status) and int(status.Status) == 0


def _store(port: int, ds: pydicom.Dataset, **kwargs: Any) -> int | None:
    """The C-STORE status, or None when the association ends without one."""
    assoc = _associate(port, **kwargs)
    assert assoc.is_established
    try:
        status = assoc.send_c_store(ds)
        return int(status.Status) if status else None
    finally:
        if assoc.is_established:
            assoc.release()


def _raw(port: int, data: bytes, *, bind: str = ATTACKER) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(bind, 0))
    sock.sendall(data)
    return sock


def _socket_of(assoc: Association) -> socket.socket:
    """The requestor's TCP socket, to write past pynetdicom's encoder."""
    wrapper = assoc.dul.socket
    assert wrapper is not None and wrapper.socket is not None
    return wrapper.socket


def _answer(sock: socket.socket) -> bytes:
    """What the listener sent before closing (b"" if it closed without a word)."""
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def _wait(condition: Callable[[], bool], timeout: float) -> float:
    began = time.monotonic()
    while not condition():
        assert time.monotonic() - began < timeout, "condition not met in time"
        time.sleep(0.02)
    return time.monotonic() - began


def _spooled(spool: Path) -> list[Path]:
    """Datasets pynetdicom left in its spool folder (not multiprocessing's `pymp-` folder,
    made there when the decoding workers' fork server starts during the test)."""
    return [p for p in spool.iterdir() if not p.name.startswith("pymp-")]


def _reread(ds: pydicom.Dataset) -> pydicom.Dataset:
    return pydicom.dcmread(io.BytesIO(to_bytes(ds)))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# ---------------------------------------------------------------- before association


def test_listener_header_flood_frees_its_slots_at_once(
    make_listener: Callable[..., StoreListener],
) -> None:
    # A 10 s association timeout: what is freed within 3 s was not waited for.
    listener = make_listener(
        limits={"max_associations": 4, "max_associations_per_host": 4, "association_timeout_s": 10}
    )
    four_gib = struct.pack(">BBL", 0x01, 0, 0xFFFFFFFF) + bytes(10)  # 16 bytes, "4 GiB"
    for _ in range(10):
        _raw(listener.port, four_gib).close()
    began = time.monotonic()
    assert _echo(listener.port)  # the real sender gets in at once
    assert time.monotonic() - began < 3
    _wait(lambda: not listener.open_connections, 3)

    # Kept open instead: each is answered (A-ABORT, or A-ASSOCIATE-RJ while the per-host
    # cap is full) and closed by the listener at once, not left to time out.
    began = time.monotonic()
    held = [_raw(listener.port, four_gib) for _ in range(6)]
    answers = {_answer(s)[:1] for s in held}
    assert answers <= {b"\x07", b"\x03"} and b"\x07" in answers, answers
    assert time.monotonic() - began < 3
    assert _echo(listener.port, bind=ATTACKER)  # its own slots are free again too
    assert listener.counts["aborted"] + listener.counts["refused"] == 16


def test_listener_aborts_a_connection_that_does_not_start_with_a_request(
    make_listener: Callable[..., StoreListener],
) -> None:
    listener = make_listener()
    p_data = struct.pack(">BBL", 0x04, 0, 6) + struct.pack(">LBB", 2, 1, 0x03)
    assert _answer(_raw(listener.port, p_data))[:1] == b"\x07"  # A-ABORT
    assert _answer(_raw(listener.port, b"\x42" + bytes(9)))[:1] == b"\x07"  # not a PDU
    _wait(lambda: not listener.open_connections, 2)
    assert listener.counts["aborted"] == 2 and _echo(listener.port, bind=ATTACKER)


def test_listener_drops_a_stalled_handshake_after_the_association_timeout(
    make_listener: Callable[..., StoreListener],
) -> None:
    listener = make_listener(limits={"max_associations_per_host": 2})
    partial = struct.pack(">BBL", 0x01, 0, 200) + bytes(4)  # 10 of the 206 bytes announced
    stalled = [_raw(listener.port, partial) for _ in range(2)]
    request = struct.pack(">BBL", 0x01, 0, 4) + bytes(4)  # whole (if meaningless)
    refused = _raw(listener.port, request)  # a third from the same address: over the cap
    assert _answer(refused)[:1] == b"\x03"  # A-ASSOCIATE-RJ at once
    assert _echo(listener.port)  # another address is not affected
    began = time.monotonic()
    assert [_answer(s) for s in stalled] == [b"", b""]  # closed, without a word
    assert time.monotonic() - began < 4  # association timeout 1 s
    _wait(lambda: not listener.open_connections, 2)
    assert _echo(listener.port, bind=ATTACKER)


@pytest.mark.issue(42)
def test_listener_closes_the_oldest_stalled_handshake_for_a_new_sender(
    make_listener: Callable[..., StoreListener],
) -> None:
    # Before: stalled handshakes from ten addresses held every handshake slot until the
    # association timeout, and each new sender was refused meanwhile.
    listener = make_listener(
        limits={"max_associations": 4, "max_associations_per_host": 4, "association_timeout_s": 10}
    )
    partial = struct.pack(">BBL", 0x01, 0, 200) + bytes(4)  # 10 of the 206 bytes announced
    # Two handshakes per address at most: a third is refused at once.
    stalled = [_raw(listener.port, partial) for _ in range(2)]
    whole = struct.pack(">BBL", 0x01, 0, 4) + bytes(4)  # (if meaningless)
    with _raw(listener.port, whole) as third:
        assert _answer(third)[:1] == b"\x03"  # A-ASSOCIATE-RJ
    stalled += [_raw(listener.port, partial, bind=f"127.0.0.{host}") for host in range(3, 12)]
    began = time.monotonic()
    assert _echo(listener.port)  # the real sender gets in: the oldest stall is closed
    assert time.monotonic() - began < 3
    assert _answer(stalled[0]) == b""  # closed for a newer connection, without a word
    for sock in stalled:
        sock.close()


# ---------------------------------------------------------------- established associations


def test_listener_keepalive_associations_cannot_starve_other_senders(
    make_listener: Callable[..., StoreListener], tmp_path: Path
) -> None:
    listener = make_listener(limits={"max_associations": 6, "max_associations_per_host": 2})
    held = [_associate(listener.port, bind=ATTACKER) for _ in range(5)]
    try:
        assert [a.is_established for a in held] == [True, True, False, False, False]
        assert all(a.is_rejected for a in held[2:])  # A-ASSOCIATE-RJ, not a timeout
        assert all(int(a.send_c_echo().Status) == 0 for a in held[:2])  # kept alive
        image = _reread(build_dataset(pixels=chest_pixels(64, 64)))
        assert _store(listener.port, image) == 0  # the real sender is not starved
    finally:
        for assoc in held:
            if assoc.is_established:
                assoc.release()
    assert listener.wait_idle(30)
    assert [line["path"] for line in _lines(tmp_path / "out.jsonl")] == [image.SOPInstanceUID]
    assert listener.counts["refused"] == 3


@pytest.mark.issue(42)
def test_listener_keepalive_associations_from_many_addresses_give_way_to_a_sender(
    make_listener: Callable[..., StoreListener], tmp_path: Path
) -> None:
    """Associations from four addresses that only send C-ECHOs fill every slot; a real
    sender still stores its instance: the association quiet longest is aborted for it,
    while one that is storing instances keeps its slot."""
    listener = make_listener(
        limits={"max_associations": 4, "max_associations_per_host": 1, "evict_quiet_s": 1.0}
    )
    held = [_associate(listener.port, bind=f"127.0.0.{10 + i}") for i in range(4)]
    try:
        assert all(a.is_established for a in held)
        time.sleep(1.3)  # all of them quiet for longer than evict_quiet_s
        for assoc in held[1:]:  # kept alive: never idle; held[0] is the quietest
            assert int(assoc.send_c_echo().Status) == 0
        busy = held[3]  # one of them stores an instance: no longer quiet
        image = _reread(build_dataset(pixels=chest_pixels(64, 64)))
        assert int(busy.send_c_store(image).Status) == 0
        second = _reread(build_dataset(pixels=chest_pixels(64, 64)))
        assert _store(listener.port, second) == 0  # a real sender is not starved
        _wait(lambda: held[0].is_aborted, 5)  # quiet longest: aborted for it
        assert held[3].is_established and int(held[3].send_c_echo().Status) == 0
    finally:
        for assoc in held:
            if assoc.is_established:
                assoc.release()
    assert listener.wait_idle(30)
    stored = {line["path"] for line in _lines(tmp_path / "out.jsonl")}
    assert stored == {image.SOPInstanceUID, second.SOPInstanceUID}


@pytest.mark.issue(42)
def test_listener_refuses_a_new_association_when_none_is_quiet(
    make_listener: Callable[..., StoreListener],
) -> None:
    listener = make_listener(
        limits={"max_associations": 2, "max_associations_per_host": 1, "evict_quiet_s": 60.0}
    )
    held = [_associate(listener.port, bind=f"127.0.0.{20 + i}") for i in range(2)]
    try:
        assert all(a.is_established for a in held)
        refused = _associate(listener.port)
        assert refused.is_rejected  # A-ASSOCIATE-RJ at once, nobody aborted
        assert all(a.is_established for a in held)
    finally:
        for assoc in held:
            if assoc.is_established:
                assoc.release()


def test_listener_aborts_an_association_kept_alive_too_long(
    make_listener: Callable[..., StoreListener],
) -> None:
    listener = make_listener(limits={"max_association_s": 1.0})
    assoc = _associate(listener.port, bind=ATTACKER)
    began = time.monotonic()
    while assoc.is_established:  # a C-ECHO every 0.2 s: never idle
        assoc.send_c_echo()
        time.sleep(0.2)
        assert time.monotonic() - began < 6, "still open"
    assert assoc.is_aborted and time.monotonic() - began > 0.9
    assert listener.counts["aborted"] == 1
    _wait(lambda: not listener.open_connections, 2)


def test_listener_aborts_an_idle_association(make_listener: Callable[..., StoreListener]) -> None:
    listener = make_listener(limits={"idle_timeout_s": 0.5})
    assoc = _associate(listener.port, bind=ATTACKER)
    assert assoc.is_established
    _wait(lambda: not assoc.is_established, 5)
    assert assoc.is_aborted
    _wait(lambda: not listener.open_connections, 2)


def test_listener_aborts_a_pdu_longer_than_it_advertised(
    make_listener: Callable[..., StoreListener],
) -> None:
    listener = make_listener(limits={"max_pdu": 16384})
    assoc = _associate(listener.port, bind=ATTACKER)
    assert assoc.is_established and assoc.acceptor.maximum_length == 16384
    # Past pynetdicom's own encoder: a P-DATA-TF header announcing 4 GiB.
    _socket_of(assoc).sendall(struct.pack(">BBL", 0x04, 0, 0xFFFFFFFF) + bytes(10))
    _wait(lambda: not assoc.is_established, 2)
    assert assoc.is_aborted and listener.counts["aborted"] == 1
    _wait(lambda: not listener.open_connections, 2)


# ---------------------------------------------------------------- dataset size


def _element(tag: int, value: bytes) -> bytes:
    if len(value) % 2:
        value += b"\x00"
    return struct.pack("<HHL", tag >> 16, tag & 0xFFFF, len(value)) + value


def _stream_c_store(assoc: Association, ds: pydicom.Dataset, size: int, pdu: int) -> None:
    """C-STORE `ds` with `size` bytes of Pixel Data, written PDU by PDU to the socket.

    pynetdicom's own sender queues every PDU of a dataset before sending, so it would hold
    the whole dataset; this one holds one PDU, so what the test measures is the listener.
    """
    [context] = [c for c in assoc.accepted_contexts if c.abstract_syntax == DX_STORAGE]
    elements = b"".join(
        [
            _element(0x00000002, DX_STORAGE.encode()),
            _element(0x00000100, struct.pack("<H", 0x0001)),  # C-STORE-RQ
            _element(0x00000110, struct.pack("<H", 1)),
            _element(0x00000700, struct.pack("<H", 0)),
            _element(0x00000800, struct.pack("<H", 0x0000)),  # a dataset follows
            _element(0x00001000, str(ds.SOPInstanceUID).encode()),
        ]
    )
    command = _element(0x00000000, struct.pack("<L", len(elements))) + elements
    encoded = io.BytesIO()
    pydicom.dcmwrite(encoded, ds, enforce_file_format=False, implicit_vr=False)
    head = encoded.getvalue() + struct.pack("<HH2sHL", 0x7FE0, 0x0010, b"OW", 0, size)
    sock = _socket_of(assoc)

    def send(header: int, data: bytes) -> None:
        pdv = struct.pack(">LBB", len(data) + 2, context.context_id, header) + data
        sock.sendall(struct.pack(">BBL", 0x04, 0, len(pdv)) + pdv)

    send(0x03, command)
    send(0x00, head)
    chunk, sent = bytes(pdu - 12), 0
    while sent < size:
        part = chunk[: size - sent]
        sent += len(part)
        send(0x02 if sent == size else 0x00, part)


def test_listener_refuses_an_oversized_dataset_while_receiving(
    make_listener: Callable[..., StoreListener],
    spool: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cap, pdu = 1024 * 1024, 16384
    listener = make_listener(limits={"max_dataset_bytes": cap, "max_pdu": pdu})
    caplog.set_level(logging.WARNING, logger="batch.listen.association_guard")
    assoc = _associate(listener.port, bind=ATTACKER)
    assert assoc.is_established
    header = build_dataset(Rows=1024, Columns=2560, SamplesPerPixel=1, BitsAllocated=16)
    tracemalloc.start()
    try:
        with contextlib.suppress(OSError):  # the listener aborts and closes as we send
            _stream_c_store(assoc, header, 5 * 1024 * 1024, pdu)
        _wait(lambda: not listener.open_connections, 3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The requestor's own thread sees the abort a moment after the listener's slot is free.
    _wait(lambda: assoc.is_aborted or not assoc.is_established, 5)
    assert peak < 1024 * 1024, f"peak {peak:,} bytes"  # the listener never held the 5 MB
    [message] = [r.getMessage() for r in caplog.records if "dataset over" in r.getMessage()]
    received = int(message.split("(")[1].split(" received")[0].replace(",", ""))
    assert cap < received <= cap + pdu  # stopped at the PDU that crossed the cap
    assert listener.counts["aborted"] == 1
    assert not _spooled(spool)  # the partial spool file is deleted
    assert not list(listener.inbox.iterdir()) and not _lines(tmp_path / "out.jsonl")

    small = _reread(build_dataset(pixels=chest_pixels(64, 64)))  # under the cap: received
    assert _store(listener.port, small) == 0
    assert listener.wait_idle(30)
    assert [line["path"] for line in _lines(tmp_path / "out.jsonl")] == [small.SOPInstanceUID]
    assert not _spooled(spool)


# ---------------------------------------------------------------- who may send


def test_listener_rejects_a_wrong_called_ae_title(
    make_listener: Callable[..., StoreListener],
) -> None:
    listener = make_listener()
    assoc = _associate(listener.port, called="SOMEONE-ELSE")
    assert assoc.is_rejected and assoc.acceptor.primitive is not None
    assert assoc.acceptor.primitive.diagnostic == 0x07  # called AE title not recognised
    assert _echo(listener.port)


def test_listener_logs_why_it_rejects_an_association(
    make_listener: Callable[..., StoreListener], caplog: pytest.LogCaptureFixture
) -> None:
    # A-ASSOCIATE-RJ tells the sender a diagnostic code only: the listener's log must say
    # which AE title from which address was refused, or the operator cannot tell why.
    caplog.set_level(logging.WARNING)
    listener = make_listener(allow_ae=["ORTHANC"])
    assert _associate(listener.port, ae_title="INTRUDER").is_rejected

    def rejections() -> list[str]:
        return [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]

    _wait(lambda: len(rejections()) == 1, 3)  # logged by the acceptor's thread
    [message] = rejections()
    assert "association from 127.0.0.1 rejected" in message
    assert "calling AE title 'INTRUDER' is not in --allow-ae" in message
    assoc = _associate(listener.port, ae_title="ORTHANC", called="ELSEWHERE", bind=ATTACKER)
    assert assoc.is_rejected
    _wait(lambda: len(rejections()) == 2, 3)
    assert f"from {ATTACKER} rejected: called AE title 'ELSEWHERE'" in rejections()[1]
    assert listener.counts["refused"] == 2
    image = _reread(build_dataset(pixels=chest_pixels(64, 64)))
    assert _store(listener.port, image, ae_title="ORTHANC") == 0
    assert listener.wait_idle(30)
    assert len(rejections()) == 2  # an accepted association logs no rejection

    # Whatever the peer's AE title holds, one line, cut and escaped.
    hostile = "\x1b[2J\nFORGED " + "A" * 100_000
    request = types.SimpleNamespace(calling_ae_title=hostile, called_ae_title="CXR")
    event = types.SimpleNamespace(
        assoc=types.SimpleNamespace(
            requestor=types.SimpleNamespace(primitive=request, address="127.0.0.9"),
            acceptor=types.SimpleNamespace(primitive=None),
        )
    )
    listener._on_rejected(event)
    message = rejections()[-1]
    assert "from 127.0.0.9 rejected" in message
    assert "'\\x1b[2J\\nFORGED AAAA... (100,012 characters)'" in message
    assert "\x1b" not in caplog.text and "\nFORGED" not in caplog.text
    assert "A" * 64 not in caplog.text


@pytest.mark.parametrize("log_uids", [False, True])
@pytest.mark.filterwarnings("ignore:The value length")  # a UID over 64 characters: the point
@pytest.mark.filterwarnings("ignore:The value for the data element")  # its copy in File Meta
def test_listener_never_logs_a_hostile_uid_or_ae_title_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, log_uids: bool
) -> None:
    # A sender controls the SOP Instance UID's length (pydicom reads 100 kB happily) and,
    # past pynetdicom, the AE title: neither may fill the log, or forge lines in it.
    caplog.set_level(logging.DEBUG)
    ds = build_dataset(pixels=chest_pixels(64, 64))
    ds.SOPInstanceUID = "1.2." + "9" * 100_000
    ds.file_meta.TransferSyntaxUID = ImplicitVRLittleEndian  # explicit VR caps UI at 64 KiB
    received = tmp_path / "received.dcm"
    received.write_bytes(to_bytes(ds))
    listener = StoreListener(
        None, out=tmp_path / "out.jsonl", inbox=tmp_path / "inbox", log_uids=log_uids
    )
    requestor = types.SimpleNamespace(ae_title="MOD\nFORGED" + "A" * 100_000)
    event = types.SimpleNamespace(
        dataset_path=str(received), assoc=types.SimpleNamespace(requestor=requestor)
    )
    assert listener._on_store(event) == 0xC000  # cannot understand: refused
    assert "9" * 100 not in caplog.text and "A" * 100 not in caplog.text
    [message] = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert "(100,004 characters) is not a UID" in message
    assert "\nFORGED" not in caplog.text and "MOD\\nFORGED" in message
    assert ("1.2.999" in caplog.text) is log_uids  # the UID's start only where allowed
    assert not list(listener.inbox.iterdir())


def test_listener_allow_host_refuses_other_addresses(
    make_listener: Callable[..., StoreListener],
) -> None:
    listener = make_listener(allow_hosts=["127.0.0.0/31"])  # .0 and .1
    assert _echo(listener.port)
    assoc = _associate(listener.port, bind=ATTACKER)
    assert assoc.is_rejected and listener.counts["refused"] == 1


def test_listener_refuses_a_network_address_without_an_allow_list(
    tmp_path: Path, labeler: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    listener = StoreListener(None, out=tmp_path / "out.jsonl", labeler=labeler)
    with pytest.raises(ListenerConfigError, match="--allow-host"):
        listener.start("0.0.0.0", 0)
    assert main(["listen", "--host", "0.0.0.0", "--port", "0", "--out", str(tmp_path / "o")]) == 2
    assert "--allow-any-caller" in capsys.readouterr().err
    hosts = ["--allow-host", "pacs.example.org", "--out", str(tmp_path / "o")]
    assert main(["listen", "--host", "0.0.0.0", *hosts]) == 2
    assert "give addresses, not host names" in capsys.readouterr().err
    named = StoreListener(None, out=tmp_path / "out.jsonl", labeler=labeler, allow_ae=["PACS"])
    named.start("0.0.0.0", 0)  # an allow-list names the senders: allowed
    named.stop()


# ---------------------------------------------------------------- duplicate instances


def test_listener_refuses_a_conflicting_copy_of_an_instance(
    make_listener: Callable[..., StoreListener], tmp_path: Path, labeler: Any
) -> None:
    listener = make_listener()
    first = _reread(build_dataset(pixels=chest_pixels(64, 64)))
    spoof = _reread(build_dataset(pixels=chest_pixels(64, 80, seed=1)))
    spoof.SOPInstanceUID = spoof.file_meta.MediaStorageSOPInstanceUID = first.SOPInstanceUID
    assert _store(listener.port, first) == 0
    assert _store(listener.port, first) == 0  # the same bytes again: a re-send
    assert _store(listener.port, spoof) == 0x0111  # Duplicate SOP Instance: not acknowledged
    assert listener.wait_idle(30)
    assert listener.counts["duplicate"] == 1 and listener.counts["conflict"] == 1
    [line] = _lines(tmp_path / "out.jsonl")
    assert (line["rows"], line["columns"]) == (64, 64)  # the first copy was kept
    assert len(line["sha256"]) == 64
    listener.stop()

    again = StoreListener(None, out=tmp_path / "out.jsonl", labeler=labeler)  # after a restart
    again.start("127.0.0.1", 0)
    try:
        assert _store(again.port, spoof) == 0x0111  # known from the result line's sha256
        assert _store(again.port, first) == 0
    finally:
        again.stop()
    assert again.counts["conflict"] == 1 and again.counts["duplicate"] == 1


def test_listener_refuses_a_conflicting_copy_of_an_instance_left_in_the_inbox(
    tmp_path: Path, labeler: Any, spool: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Received, then stopped before the model had it: no result line holds its digest, so
    # the restarted listener must take it from the inbox file.
    first = _reread(build_dataset(pixels=chest_pixels(64, 64)))
    spoof = _reread(build_dataset(pixels=chest_pixels(64, 80, seed=1)))
    spoof.SOPInstanceUID = spoof.file_meta.MediaStorageSOPInstanceUID = first.SOPInstanceUID
    out = tmp_path / "out.jsonl"
    stopped = StoreListener(None, out=out, labeler=labeler, limits=ListenerLimits(**FAST))
    monkeypatch.setattr(stopped, "_process", lambda batch: None)  # stopped before its turn
    stopped.start("127.0.0.1", 0)
    try:
        assert _store(stopped.port, first) == 0
        assert stopped.wait_idle(30)
    finally:
        stopped.stop()
    assert [p.name for p in stopped.inbox.iterdir()] == [f"{first.SOPInstanceUID}.dcm"]
    assert not _lines(out)

    again = StoreListener(None, out=out, labeler=labeler, limits=ListenerLimits(**FAST))
    again.start("127.0.0.1", 0)
    try:
        assert _store(again.port, spoof) == 0x0111  # known from the inbox file
        assert _store(again.port, first) == 0  # the same bytes: a re-send
        assert again.wait_idle(30)
    finally:
        again.stop()
    assert again.counts["conflict"] == 1 and again.counts["duplicate"] == 1
    [line] = _lines(out)
    assert (line["rows"], line["columns"]) == (64, 64)  # the first copy was kept
    assert len(line["sha256"]) == 64  # and its digest recorded for the next restart


def test_listener_refuses_instances_while_the_inbox_disk_is_short_of_its_reserve(
    make_listener: Callable[..., StoreListener],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import shutil

    listener = make_listener(limits={"min_free_bytes": 100 * 1024 * 1024})
    real = shutil.disk_usage
    free = {"bytes": 99 * 1024 * 1024}

    def usage(path: str | Path) -> Any:
        total, used, _ = real(path)
        return type(real(path))(total, used, free["bytes"])

    monkeypatch.setattr(shutil, "disk_usage", usage)
    first = _reread(build_dataset(pixels=chest_pixels(64, 64)))
    with caplog.at_level(logging.ERROR, logger="batch.listen.listener"):
        assert _store(listener.port, first) == 0xA700  # out of resources: retry later
    assert listener.counts["disk_full"] == 1
    assert "under the 100 MiB reserve" in caplog.text
    assert not list(listener.inbox.iterdir())  # nothing kept, nothing marked received
    free["bytes"] = 101 * 1024 * 1024  # space freed: the retry is taken
    assert _store(listener.port, first) == 0
    assert listener.wait_idle(30)
    [line] = _lines(tmp_path / "out.jsonl")
    assert line["sop_instance_uid"] == first.SOPInstanceUID
    assert listener.counts["duplicate"] == 0


# ---------------------------------------------------------------- hosts


def test_listener_counts_an_ipv6_host_by_its_64() -> None:
    assert host_of("2001:db8::1") == host_of("2001:db8::ffff:1") == "2001:db8::/64"
    assert host_of("2001:db8:0:1::1") != host_of("2001:db8::1")
    assert host_of("::ffff:10.0.0.5") == "10.0.0.5"  # IPv4 on a dual-stack socket
    assert host_of("10.0.0.5") != host_of("10.0.0.6")


def _associate_rq(calling: bytes) -> bytes:
    """A real A-ASSOCIATE-RQ from pynetdicom, with `calling` as its 16 calling AE bytes."""
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def grab() -> None:
        conn, _ = server.accept()
        with conn:
            got.append(conn.recv(65536))

    thread = threading.Thread(target=grab)
    thread.start()
    ae = AE(ae_title="MODALITY")
    ae.add_requested_context(Verification)
    ae.acse_timeout = 1
    ae.associate("127.0.0.1", server.getsockname()[1], ae_title="CXR")
    thread.join(5)
    server.close()
    request = bytearray(got[0])
    request[26:42] = calling.ljust(16, b" ")
    return bytes(request)


@pytest.mark.issue(42)
@pytest.mark.parametrize("calling", [b"A\\B", b"MOD\x01", b"   ", b"\xff\xfeAE"])
def test_listener_rejects_a_malformed_ae_title_with_one_line_not_a_traceback(
    make_listener: Callable[..., StoreListener], caplog: pytest.LogCaptureFixture, calling: bytes
) -> None:
    # Before: pynetdicom logged a traceback for each such connection, without limit.
    listener = make_listener()
    request = _associate_rq(calling)
    caplog.clear()  # the requestor's own "Association Aborted" when the capture ended
    with caplog.at_level(logging.INFO):
        for _ in range(10):
            with _raw(listener.port, request) as sock:
                assert _answer(sock)[:1] == b"\x03"  # A-ASSOCIATE-RJ
    assert "Traceback" not in caplog.text and not [
        r for r in caplog.records if r.name.startswith("pynetdicom") and r.levelno >= logging.ERROR
    ]
    warnings = [r for r in caplog.records if "AE title is not a DICOM AE title" in r.getMessage()]
    assert len(warnings) == 1  # one per address per WARN_INTERVAL_S
    assert _echo(listener.port)
