"""`cxr listen`: a DICOM Storage SCP (pynetdicom) that predicts every image it receives.

    listener = StoreListener(predictor, out=Path("results.jsonl"), ae_title="CXR")
    listener.start("0.0.0.0", 11112)      # returns once the port is bound
    ...
    listener.stop()                      # finishes what was received, then returns

Received instances are written to an inbox folder first (atomically, named by SOP
Instance UID) and answered with Success at once, so a slow model never makes the
sender time out. One worker thread runs them through the batch engine, as `cxr batch`
and the service's jobs do: the C-STORE inbox is a source (`batch.inbox_source`), the
one processor reads and predicts them in chunks (same limits, same errors), and sinks
push the SR and GSPS (with `forward`) and append one result line per instance to OUT
(the `cxr batch` line format; `path` is the SOP Instance UID, plus `calling_ae`). A line
is written before its inbox file is removed: after a crash or a restart, files still in
the inbox are processed first, and an instance already in OUT is not predicted (or
forwarded) again when it is sent a second time.

Non-image objects (SR, presentation states, CT/MR, ...) are accepted, so the sender's
transfer succeeds, and recorded as skipped with the reason.

Hostile input (issue 18; bounds and figures in docs/security/listener.md):

- Who may send. Callers must address the listener by its AE title (`require_called_aet`);
  `allow_ae` and `allow_hosts` restrict the calling AE titles and peer addresses. Calling
  AE titles are spoofable, so they are the convenience check (as Orthanc's
  `DicomModalities`), and addresses the real one (Orthanc's `DicomCheckModalityHost`).
  `start` refuses a non-loopback address unless one of the two lists is given or
  `allow_any_caller` says that an open listener is intended: the default host, 127.0.0.1,
  needs neither, so a laptop works out of the box, and a listener put on the network has to
  say who may send to it. An association pynetdicom rejects (AE titles) is logged with the
  peer's address and the refused AE title, since A-ASSOCIATE-RJ tells the sender only a code.
- What reaches the log: UIDs only with `log_uids`, and a sender's values (AE titles, UIDs,
  error messages quoting them) cut and with control characters escaped (`_clip`).
- What they may hold: connections, association time, PDU and dataset sizes are bounded by
  `ListenerLimits`, enforced by `batch.listen.association_guard` while the data arrives.
  Datasets are spooled to a temporary file (pynetdicom's `STORE_RECV_CHUNKED_DATASET`, in
  TMPDIR) and moved into the inbox, never held whole in memory.
- The same SOP Instance UID twice. The first copy is kept (Orthanc's default,
  `OverwriteInstances: false`). A copy with the same dataset bytes (SHA-256 of the dataset
  as received, kept in the result line as `sha256`) is a harmless re-send: answered Success
  and counted as a duplicate. A copy with different bytes is not acknowledged: it is
  answered 0x0111 "Duplicate SOP Instance" (PS3.7 C.4) with an error comment, counted as a
  conflict and logged, so the sender sees that it was not processed. Taking the newer copy
  instead would let any later sender replace a result; refusing it loudly keeps the first
  and tells both sides. Re-encoded copies (another transfer syntax) differ in bytes and are
  refused as conflicts: a false alarm, never a silent loss.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import os
import queue
import shutil
import socket
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from pydicom.dataset import Dataset

from batch.engine import run
from batch.inbox_source import InboxSource
from batch.interfaces import Labeler, Outcome, Sink
from batch.job import InboxInput, JobSpec, PushOutput, build_job
from batch.listen.association_guard import GuardedAssociationServer, ListenerLimits, parse_hosts
from batch.listen.decode_slots import DecodeSlots
from batch.log_text import one_line
from batch.pacs.dicomweb import DicomwebClient
from batch.processor import BatchProcessor
from batch.results import read_result_lines
from batch.sinks import JsonlSink
from models.dicom import read_dicom_dataset
from models.predict import Predictor

__all__ = ["ListenerConfigError", "StoreListener"]

log = logging.getLogger(__name__)

_SUCCESS = 0x0000
_OUT_OF_RESOURCES = 0xA700
_CANNOT_UNDERSTAND = 0xC000
_DUPLICATE_SOP_INSTANCE = 0x0111  # PS3.7 C.4: a general failure status
_STOP = object()
_COPY_CHUNK = 1024 * 1024
# Peer-supplied text echoed in a log line (AE titles, UIDs when logged) is cut to this many
# characters, and messages that may quote it (a reader's error) to _MESSAGE_CHARS: a hostile
# sender's megabyte value must not fill the log.
_PEER_CHARS = 64
_MESSAGE_CHARS = 400


class ListenerConfigError(ValueError):
    """A listener configuration refused at start (e.g. an open listener on the network)."""


class StoreListener:
    """A Storage SCP that predicts received images and writes result lines.

    Args:
        predictor: the loaded model (None: images are read and reported without prediction).
        out: the JSONL file result lines are appended to (kept across restarts).
        ae_title: this listener's AE title (callers must address it by this name).
        inbox: where received instances wait for the model (default: OUT + ".inbox").
        allow_ae: if given, only these calling AE titles may associate.
        forward: a DICOMweb client to push each image's SR and GSPS to by STOW-RS.
        chunk_size: images per forward pass.
        labeler: the report labeler the batch processor needs (loaded at start if None).
        max_pixels: images with more pixels fail from their header, undecoded (None: no limit).
        file_timeout_s: give up reading one instance after this long (None: no limit).
        limits: connection, time and size bounds (see `ListenerLimits` for the defaults).
        allow_hosts: if given, only peers at these addresses or networks may connect
            ("10.0.0.5", "10.0.0.0/24").
        allow_any_caller: allow `start` on a non-loopback address without `allow_ae` or
            `allow_hosts` (an open listener, anyone who reaches the port may send).
        log_uids: name instances by SOP Instance UID in logs (CXR_LOG_PATIENT_DATA); off:
            "<uid>", the result lines still carry them.
        decode_in_worker: decode received images in worker processes, so that an instance
            that crashes the decoder, or runs past `file_timeout_s`, fails alone while the
            listener goes on (and a restart does not crash on it again); False: in the
            listener's own thread, where such an instance would stop the listener.
        decode_slots: with `decode_in_worker`, images decoded at once, each in a process
            of its own and handed on as it finishes (`batch.listen.decode_slots`), so a
            slow instance holds one slot, not the instances behind it.

    Raises:
        ValueError: an AE title that DICOM does not allow, or an `allow_hosts` entry that is
            not an address or network.
    """

    def __init__(
        self,
        predictor: Predictor | None,
        *,
        out: Path,
        ae_title: str = "CXR",
        inbox: Path | None = None,
        allow_ae: Sequence[str] = (),
        forward: DicomwebClient | None = None,
        chunk_size: int = 8,
        labeler: Labeler | None = None,
        max_pixels: int | None = 50_000_000,
        file_timeout_s: float | None = 300.0,
        limits: ListenerLimits | None = None,
        allow_hosts: Sequence[str] = (),
        allow_any_caller: bool = False,
        log_uids: bool = False,
        decode_in_worker: bool = True,
        decode_slots: int = 2,
    ) -> None:
        from pynetdicom import AE

        if not ae_title.strip() or len(ae_title) > 16 or "\\" in ae_title:
            raise ValueError(f"AE title {ae_title!r}: 1 to 16 characters, no backslash")
        self.predictor = predictor
        self.out = Path(out)
        self.inbox = Path(inbox) if inbox else self.out.with_name(self.out.name + ".inbox")
        self.forward = forward
        self.chunk_size = chunk_size
        self.ae_title = ae_title
        self.allow_ae = tuple(a.strip() for a in allow_ae if a.strip())
        self.allow_hosts = parse_hosts(allow_hosts)
        self.allow_any_caller = allow_any_caller
        self.limits = limits or ListenerLimits()
        self.log_uids = log_uids
        self.labeler = labeler
        self.max_pixels = max_pixels
        self.file_timeout_s = file_timeout_s
        self.decode_in_worker = decode_in_worker
        self.decode_slots = decode_slots
        self._slots: DecodeSlots | None = None
        self._previous, _ = read_result_lines(self.out)
        self._recorded = {str(line["path"]) for line in self._previous}
        # SHA-256 of each received dataset, to tell a re-send from a conflicting copy.
        self._digests = {
            str(line["path"]): str(line["sha256"]) for line in self._previous if line.get("sha256")
        }
        self._pending: set[str] = set()
        self._callers: dict[str, str] = {}
        self._lock = threading.Lock()
        self._queue: queue.Queue[Any] = queue.Queue()  # received, in arrival order
        self._ready: queue.Queue[Any] = self._queue  # what the worker takes (decoded)
        self._worker: threading.Thread | None = None
        self._server: GuardedAssociationServer | None = None
        self._sinks: list[Sink] = []
        self._jsonl: JsonlSink | None = None
        self._processor: BatchProcessor | None = None
        self.source = InboxSource(self.inbox)
        self.counts = {
            "done": 0,
            "skipped": 0,
            "failed": 0,
            "duplicate": 0,
            "conflict": 0,
            "refused": 0,
            "aborted": 0,
            "disk_full": 0,
        }
        self.ae = AE(ae_title=ae_title)
        self._configure_contexts()
        self.ae.require_called_aet = True  # A-ASSOCIATE-RJ "called AE title not recognized"
        if self.allow_ae:
            self.ae.require_calling_aet = list(self.allow_ae)

    def _configure_contexts(self) -> None:
        from pynetdicom import ALL_TRANSFER_SYNTAXES, AllStoragePresentationContexts
        from pynetdicom.sop_class import Verification  # type: ignore[attr-defined]

        # Every storage class, every transfer syntax: refusing a context would fail the
        # sender's whole transfer; what is not an image is recorded as skipped instead.
        for context in AllStoragePresentationContexts:
            if context.abstract_syntax is not None:
                self.ae.add_supported_context(context.abstract_syntax, ALL_TRANSFER_SYNTAXES)
        self.ae.add_supported_context(Verification)
        limits = self.limits
        self.ae.maximum_pdu_size = limits.max_pdu
        self.ae.maximum_associations = limits.max_associations
        self.ae.acse_timeout = limits.association_timeout_s
        self.ae.network_timeout = limits.idle_timeout_s  # idle association: A-ABORT
        self.ae.dimse_timeout = limits.idle_timeout_s

    # ------------------------------------------------------------------ lifecycle

    def start(self, host: str, port: int) -> None:
        """Bind the port, queue what a previous run left in the inbox, and serve.

        Raises:
            ListenerConfigError: `host` is not a loopback address and neither `allow_ae`,
                `allow_hosts` nor `allow_any_caller` was given.
            OSError: the port cannot be bound.
        """
        from pynetdicom import _config, evt

        named = self.allow_ae or self.allow_hosts or self.allow_any_caller
        if not named and not _is_loopback(host, port):
            raise ListenerConfigError(
                f"listening on {host} lets anyone who reaches port {port} send instances: "
                "name the senders with --allow-host (addresses) and/or --allow-ae (calling "
                "AE titles), or pass --allow-any-caller to run an open listener on purpose"
            )
        # Datasets go to a temporary file as they arrive, not to memory. Process-wide in
        # pynetdicom; `cxr` runs no other storage SCP.
        _config.STORE_RECV_CHUNKED_DATASET = True
        if self.labeler is None:
            from batch.labeling import PipelineLabeler

            self.labeler = PipelineLabeler()
        job = build_job(
            JobSpec(
                InboxInput(self.inbox),
                file_timeout_s=self.file_timeout_s,
                max_pixels=self.max_pixels,
                push=PushOutput(self.forward) if self.forward is not None else None,
            ),
            labeler=self.labeler,
            predictor=self.predictor,
        )
        self._processor = job.processor
        if self.decode_in_worker:  # processes started at the first image, stopped by `stop`
            self._ready = queue.Queue()
            self._slots = DecodeSlots(
                self.source,
                job.processor.input_spec,
                slots=self.decode_slots,
                timeout_s=self.file_timeout_s,
                incoming=self._queue,
                ready=self._ready,
                stop=_STOP,
            )
            job.processor.decode_pool = self._slots.lookup_pool()
            self._slots.start()
        self._jsonl = JsonlSink(self.out, previous=self._previous, resume=True)
        self._sinks = list(job.sinks)  # the push sink, first
        self._sinks += [_Annotate(self), self._jsonl, _Settle(self)]
        self._worker = threading.Thread(target=self._work, name="cxr-listen", daemon=True)
        self._worker.start()
        for item in self.source.scan():
            digest = None
            if item.key not in self._recorded:
                digest = self._inbox_digest(item.key)
            with self._lock:
                if item.key in self._recorded:  # recorded, but the file outlived a crash
                    self.source.remove(item.key)
                    continue
                self._pending.add(item.key)
                # Received before the stop but not recorded: no result line carries its
                # digest, so without this a copy with other content would pass as a re-send.
                if digest is not None:
                    self._digests[item.key] = digest
            self._queue.put((item.key, "(inbox)"))
        handlers: list[Any] = [
            (evt.EVT_C_STORE, self._on_store),
            (evt.EVT_C_ECHO, lambda event: _SUCCESS),
            (evt.EVT_REJECTED, self._on_rejected),
        ]
        server = cast(
            GuardedAssociationServer,
            self.ae.make_server(
                (host, port),
                evt_handlers=handlers,
                server_class=GuardedAssociationServer,
                limits=self.limits,
                allow_hosts=self.allow_hosts,
                report=self._count,
            ),
        )
        # As AE.start_server(block=False) does; the AE counts its servers' associations.
        self.ae._servers.append(server)
        threading.Thread(target=server.serve_forever, name="cxr-listen-accept", daemon=True).start()
        self._server = server
        allowed = ",".join(self.allow_ae) or "any AE title"
        hosts = ",".join(str(n) for n in self.allow_hosts) or "any address"
        log.info(
            "listening as %s on %s:%d (callers: %s from %s); results to %s",
            self.ae_title, host, self.port, allowed, hosts, self.out,
        )  # fmt: skip

    @property
    def port(self) -> int:
        """The bound port (useful when started on port 0)."""
        if self._server is None:
            raise RuntimeError("the listener is not started: call start() first")
        return int(self._server.server_address[1])

    @property
    def open_connections(self) -> dict[str, int]:
        """Connections open now per peer address, handshaking or associated."""
        return self._server.open_connections if self._server is not None else {}

    def stop(self, timeout: float = 60.0) -> None:
        """Stop accepting, then finish the instances already received."""
        if self._server is not None:
            self._server.shutdown()
            self._server = None
        if self._worker is not None:
            self._queue.put(_STOP)
            self._worker.join(timeout)
            self._worker = None
        if self._slots is not None:
            self._slots.join(timeout)
            self._slots.close()
            self._slots = None
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Block until every received instance has its result line (tests, shutdown)."""
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    # ------------------------------------------------------------------ C-STORE

    def _count(self, kind: str) -> None:
        with self._lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1

    def _uid(self, uid: str) -> str:
        # Cut even when UIDs may be logged: a refused UID can be any length.
        return _clip(uid) if self.log_uids else "<uid>"

    def _scrub(self, text: object, *uids: str) -> str:
        """An error message for a log line: `uids` hidden unless logged, cut, escaped.

        File names in the inbox are UIDs, so an OSError or a reader's error names them.
        """
        message = str(text)
        if not self.log_uids:
            for uid in uids:
                if uid:
                    message = message.replace(uid, "<uid>")
        return _clip(message, _MESSAGE_CHARS)

    def _inbox_digest(self, uid: str) -> str | None:
        """The SHA-256 of an instance waiting in the inbox, or None if it cannot be read."""
        try:
            return _dataset_sha256(self.source.path_of(uid))
        except Exception as exc:  # noqa: BLE001 - its processing records what is wrong
            log.warning(
                "inbox instance %s: no digest, a copy with other content will not be refused "
                "as a conflict: %s",
                self._uid(uid), self._scrub(exc, uid),
            )  # fmt: skip
            return None

    def _on_rejected(self, event: Any) -> None:
        """Log why pynetdicom rejected an association (AE titles), so the sender's operator
        can be told; A-ASSOCIATE-RJ alone tells the sender only a diagnostic code."""
        assoc = event.assoc
        request = assoc.requestor.primitive
        calling = str(getattr(request, "calling_ae_title", "") or "").strip()
        called = str(getattr(request, "called_ae_title", "") or "").strip()
        try:
            address = str(assoc.requestor.address)
        except ValueError:  # no address information
            address = "an unknown address"
        reasons = []
        if self.allow_ae and calling not in self.allow_ae:
            reasons.append(f"calling AE title '{_clip(calling, 16)}' is not in --allow-ae")
        if called != self.ae_title.strip():
            reasons.append(
                f"called AE title '{_clip(called, 16)}' is not this listener's "
                f"({self.ae_title!r}, --ae-title)"
            )
        if not reasons:
            answer = assoc.acceptor.primitive
            reasons.append(
                f"A-ASSOCIATE-RJ result {getattr(answer, 'result', None)}, source "
                f"{getattr(answer, 'result_source', None)}, reason "
                f"{getattr(answer, 'diagnostic', None)} (calling AE title '{_clip(calling, 16)}')"
            )
        self._count("refused")
        reason = "; ".join(reasons)
        server = self._server
        if server is not None:  # a retrying sender: one line per address every few seconds
            server.warn(address, "association from %s rejected: %s", reason)
        else:
            log.warning("association from %s rejected: %s", address, reason)

    def _on_store(self, event: Any) -> int | Dataset:
        calling_ae = str(event.assoc.requestor.ae_title).strip()  # for the result line
        # pynetdicom allows 16 printable characters; the log does not rely on that.
        calling = _clip(calling_ae, 16)
        received = Path(event.dataset_path)  # pynetdicom's temporary file, removed after us
        try:
            # Guarded: a deflated dataset is inflated whole to read even its header.
            header = read_dicom_dataset(str(received), max_pixels=self.max_pixels)
            uid = str(header.SOPInstanceUID)
        except Exception as exc:  # noqa: BLE001 - a malformed dataset from the network
            log.warning(
                "C-STORE from %s: unreadable dataset refused: %s", calling, self._scrub(exc)
            )
            return _CANNOT_UNDERSTAND
        try:
            path = self.source.path_of(uid)
        except ValueError:
            # Not the error's text: it quotes the start of the UID, which is not logged.
            log.warning(
                "C-STORE from %s: instance %s refused: its SOP Instance UID (%s characters) "
                "is not a UID (at most 64 digits and dots) and cannot name an inbox file",
                calling, self._uid(uid), f"{len(uid):,}",
            )  # fmt: skip
            return _CANNOT_UNDERSTAND
        try:
            digest = _dataset_sha256(received)
        except Exception as exc:  # noqa: BLE001 - a malformed dataset from the network
            log.warning(
                "C-STORE from %s: instance %s refused: %s",
                calling, self._uid(uid), self._scrub(exc, uid),
            )  # fmt: skip
            return _CANNOT_UNDERSTAND
        with self._lock:
            if uid in self._recorded or uid in self._pending:
                first = self._digests.get(uid)
                if first is None or first == digest:
                    self.counts["duplicate"] += 1
                    log.info(
                        "C-STORE from %s: instance %s already received; ignored",
                        calling, self._uid(uid),
                    )  # fmt: skip
                    return _SUCCESS
                self.counts["conflict"] += 1
                log.warning(
                    "C-STORE from %s: instance %s already received with other content; "
                    "refused (0x0111), the first copy is kept",
                    calling, self._uid(uid),
                )  # fmt: skip
                status = Dataset()
                status.Status = _DUPLICATE_SOP_INSTANCE
                status.ErrorComment = "SOP Instance UID already received, other content"
                return status
            free = shutil.disk_usage(path.parent).free
            if free < self.limits.min_free_bytes:
                self.counts["disk_full"] += 1
                log.error(
                    "C-STORE from %s: instance %s refused (0xA700): %d MiB free in the inbox's "
                    "file system, under the %d MiB reserve (--min-free-mb)",
                    calling, self._uid(uid), free >> 20, self.limits.min_free_bytes >> 20,
                )  # fmt: skip
                status = Dataset()
                status.Status = _OUT_OF_RESOURCES
                status.ErrorComment = "Receiver short of disk space; retry later"
                return status
            self._pending.add(uid)
            self._digests[uid] = digest
        try:
            tmp = path.with_suffix(".part")
            try:
                os.replace(received, tmp)  # same file system: no copy
            except OSError:
                shutil.copyfile(received, tmp)
            os.replace(tmp, path)
        except OSError as exc:
            with self._lock:
                self._pending.discard(uid)
                self._digests.pop(uid, None)
            log.error(
                "C-STORE from %s: cannot keep instance %s: %s",
                calling, self._uid(uid), self._scrub(exc, uid),
            )  # fmt: skip
            return _OUT_OF_RESOURCES
        log.info(
            "received instance %s from %s (%d bytes)",
            self._uid(uid), calling, path.stat().st_size,
        )  # fmt: skip
        self._queue.put((uid, calling_ae))
        return _SUCCESS

    # ------------------------------------------------------------------ worker

    def _work(self) -> None:
        stopping = False
        while not stopping:
            batch: list[tuple[str, str]] = []
            waiters: list[threading.Event] = []
            ready = self._ready
            entry = ready.get()
            while True:
                if entry is _STOP:
                    stopping = True
                elif isinstance(entry, threading.Event):
                    waiters.append(entry)
                else:
                    batch.append(entry)
                if stopping or len(batch) >= self.chunk_size or ready.empty():
                    break
                entry = ready.get()
            if stopping:  # finish what is already queued, then stop
                while not ready.empty():
                    rest = ready.get()
                    if isinstance(rest, tuple):
                        batch.append(rest)
                    elif isinstance(rest, threading.Event):
                        waiters.append(rest)
            if batch:
                self._process(batch)
            for waiter in waiters:
                waiter.set()

    def _process(self, batch: list[tuple[str, str]]) -> None:
        assert self._processor is not None, "start() first"
        items = []
        for uid, calling in batch:
            self._callers[uid] = calling
            items.append(self.source.item(uid))
        try:
            run(items, self._processor, self._sinks, chunk_size=self.chunk_size)
        except Exception as exc:  # noqa: BLE001 - the listener must outlive one bad chunk
            # The message, not the traceback, at ERROR: a traceback's messages may quote
            # UIDs (inbox file names) that CXR_LOG_PATIENT_DATA keeps out of the log.
            log.error(
                "processing of %d received instances failed (%s: %s); they stay in the inbox "
                "and are retried at the next start",
                len(items), type(exc).__name__, self._scrub(exc, *(uid for uid, _ in batch)),
            )  # fmt: skip
            log.debug("the failure above", exc_info=True)
            with self._lock:
                for uid, _ in batch:
                    self._pending.discard(uid)  # left in the inbox: retried at next start


class _Annotate(Sink):
    """Adds the calling AE title and the dataset's SHA-256 to each line (before the JSONL sink)."""

    def __init__(self, listener: StoreListener) -> None:
        self.listener = listener

    def write(self, outcomes: Sequence[Outcome]) -> None:
        for outcome in outcomes:
            outcome.result["calling_ae"] = self.listener._callers.pop(outcome.key, None)
            outcome.result["sha256"] = self.listener._digests.get(outcome.key)


class _Settle(Sink):
    """After the JSONL sink: marks instances recorded, removes their inbox files, logs."""

    def __init__(self, listener: StoreListener) -> None:
        self.listener = listener

    def write(self, outcomes: Sequence[Outcome]) -> None:
        listener = self.listener
        with listener._lock:
            for outcome in outcomes:
                listener._recorded.add(outcome.key)
                listener._pending.discard(outcome.key)
                listener.counts[outcome.state] = listener.counts.get(outcome.state, 0) + 1
        for outcome in outcomes:
            listener.source.remove(outcome.key)
            why = outcome.error or outcome.result.get("reason")
            # The error names the inbox file, i.e. the UID, and may quote dataset values.
            shown = f" ({listener._scrub(why, outcome.key)})" if why else ""
            log.info("instance %s: %s%s", listener._uid(outcome.key), outcome.state, shown)


def _is_loopback(host: str, port: int) -> bool:
    """Whether every address `host` resolves to is a loopback address."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return bool(found) and all(
        ipaddress.ip_address(str(entry[4][0]).split("%")[0]).is_loopback for entry in found
    )


def _clip(text: str, limit: int = _PEER_CHARS) -> str:
    # Peer-supplied values reach the log through it: a sender can neither flood the log
    # with one value nor forge log lines (newlines, terminal escapes).
    return one_line(text, limit)


def _dataset_sha256(path: Path) -> str:
    """SHA-256 of the dataset in a DICOM file as received (its File Meta is pynetdicom's)."""
    from pynetdicom.dsutils import split_dataset

    _, offset = split_dataset(path)
    digest = hashlib.sha256()
    with path.open("rb") as f:
        f.seek(offset)
        while chunk := f.read(_COPY_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
