"""`cxr listen`: a DICOM Storage SCP (pynetdicom) that predicts every image it receives.

    listener = StoreListener(predictor, out=Path("results.jsonl"), ae_title="CXR")
    listener.start("0.0.0.0", 11112)      # returns once the port is bound
    ...
    listener.stop()                      # finishes what was received, then returns

Received instances are written to an inbox folder first (atomically, named by SOP
Instance UID) and answered with Success at once, so a slow model never makes the
sender time out. One worker thread runs them through the batch engine, as `cxr batch`
and the service's jobs do: the C-STORE inbox is a source (`app.batch.inbox_source`), the
one processor reads and predicts them in chunks (same limits, same errors), and sinks
push the SR and GSPS (with `forward`) and append one result line per instance to OUT
(the `cxr batch` line format; `path` is the SOP Instance UID, plus `calling_ae`). A line
is written before its inbox file is removed: after a crash or a restart, files still in
the inbox are processed first, and an instance already in OUT is not predicted (or
forwarded) again when it is sent a second time.

Non-image objects (SR, presentation states, CT/MR, ...) are accepted, so the sender's
transfer succeeds, and recorded as skipped with the reason.
"""

from __future__ import annotations

import io
import logging
import os
import queue
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydicom import dcmread

from app.batch.dicom_push import PUSH_KINDS, DicomPushSink
from app.batch.engine import run
from app.batch.inbox_source import InboxSource
from app.batch.interfaces import Outcome, Sink
from app.batch.processor import BatchProcessor
from app.batch.results import read_result_lines
from app.batch.sinks import JsonlSink
from app.labeling import ReportLabeler
from app.pacs.dicomweb import DicomwebClient
from models.predict import Predictor

__all__ = ["StoreListener"]

log = logging.getLogger(__name__)

_SUCCESS = 0x0000
_OUT_OF_RESOURCES = 0xA700
_CANNOT_UNDERSTAND = 0xC000
_STOP = object()


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

    Raises:
        ValueError: an AE title that DICOM does not allow.
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
        labeler: ReportLabeler | None = None,
        max_pixels: int | None = 50_000_000,
        file_timeout_s: float | None = 300.0,
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
        self.labeler = labeler
        self.max_pixels = max_pixels
        self.file_timeout_s = file_timeout_s
        self._previous, _ = read_result_lines(self.out)
        self._recorded = {str(line["path"]) for line in self._previous}
        self._pending: set[str] = set()
        self._callers: dict[str, str] = {}
        self._lock = threading.Lock()
        self._queue: queue.Queue[Any] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._server: Any = None
        self._sinks: list[Sink] = []
        self._jsonl: JsonlSink | None = None
        self._processor: BatchProcessor | None = None
        self.source = InboxSource(self.inbox)
        self.counts = {"done": 0, "skipped": 0, "failed": 0, "duplicate": 0}
        self.ae = AE(ae_title=ae_title)
        self._configure_contexts()
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
        self.ae.maximum_pdu_size = 0  # no limit on received PDUs

    # ------------------------------------------------------------------ lifecycle

    def start(self, host: str, port: int) -> None:
        """Bind the port, queue what a previous run left in the inbox, and serve."""
        from pynetdicom import evt

        if self.labeler is None:
            from app.labeling import load_report_labeler

            self.labeler = load_report_labeler()
        self._processor = BatchProcessor(
            self.source,
            labeler=self.labeler,
            predictor=self.predictor,
            file_timeout_s=self.file_timeout_s,
            max_pixels=self.max_pixels,
        )
        self._jsonl = JsonlSink(self.out, previous=self._previous, resume=True)
        self._sinks = []
        if self.forward is not None:
            card = self.predictor.card if self.predictor is not None else {}
            self._sinks.append(
                DicomPushSink(
                    self.forward, kinds=PUSH_KINDS, card=card, headers=self.source.pop_header
                )
            )
        self._sinks += [_Annotate(self), self._jsonl, _Settle(self)]
        self._worker = threading.Thread(target=self._work, name="cxr-listen", daemon=True)
        self._worker.start()
        for item in self.source.scan():
            with self._lock:
                if item.key in self._recorded:  # recorded, but the file outlived a crash
                    self.source.remove(item.key)
                    continue
                self._pending.add(item.key)
            self._queue.put((item.key, "(inbox)"))
        handlers: list[Any] = [
            (evt.EVT_C_STORE, self._on_store),
            (evt.EVT_C_ECHO, lambda event: _SUCCESS),
        ]
        self._server = self.ae.start_server((host, port), block=False, evt_handlers=handlers)
        allowed = ",".join(self.allow_ae) or "any"
        log.info(
            "listening as %s on %s:%d (callers: %s); results to %s",
            self.ae_title, host, self.port, allowed, self.out,
        )  # fmt: skip

    @property
    def port(self) -> int:
        """The bound port (useful when started on port 0)."""
        return int(self._server.server_address[1])

    def stop(self, timeout: float = 60.0) -> None:
        """Stop accepting, then finish the instances already received."""
        if self._server is not None:
            self._server.shutdown()
            self._server = None
        if self._worker is not None:
            self._queue.put(_STOP)
            self._worker.join(timeout)
            self._worker = None
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Block until every received instance has its result line (tests, shutdown)."""
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    # ------------------------------------------------------------------ C-STORE

    def _on_store(self, event: Any) -> int:
        calling = str(event.assoc.requestor.ae_title).strip()
        try:
            data = event.encoded_dataset(include_meta=True)
            uid = str(dcmread(io.BytesIO(data), stop_before_pixels=True).SOPInstanceUID)
            path = self.source.path_of(uid)
        except Exception as exc:  # noqa: BLE001 - a malformed dataset from the network
            log.warning("C-STORE from %s: unreadable dataset refused: %s", calling, exc)
            return _CANNOT_UNDERSTAND
        with self._lock:
            if uid in self._recorded or uid in self._pending:
                self.counts["duplicate"] += 1
                log.info("C-STORE from %s: instance %s already received; ignored", calling, uid)
                return _SUCCESS
            self._pending.add(uid)
        try:
            tmp = path.with_suffix(".part")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        except OSError as exc:
            with self._lock:
                self._pending.discard(uid)
            log.error("C-STORE from %s: cannot keep instance %s: %s", calling, uid, exc)
            return _OUT_OF_RESOURCES
        log.info("received instance %s from %s (%d bytes)", uid, calling, len(data))
        self._queue.put((uid, calling))
        return _SUCCESS

    # ------------------------------------------------------------------ worker

    def _work(self) -> None:
        stopping = False
        while not stopping:
            batch: list[tuple[str, str]] = []
            waiters: list[threading.Event] = []
            entry = self._queue.get()
            while True:
                if entry is _STOP:
                    stopping = True
                elif isinstance(entry, threading.Event):
                    waiters.append(entry)
                else:
                    batch.append(entry)
                if stopping or len(batch) >= self.chunk_size or self._queue.empty():
                    break
                entry = self._queue.get()
            if stopping:  # finish what is already queued, then stop
                while not self._queue.empty():
                    rest = self._queue.get()
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
        except Exception:  # noqa: BLE001 - the listener must outlive one bad chunk
            log.exception("processing of %d received instances failed", len(items))
            with self._lock:
                for uid, _ in batch:
                    self._pending.discard(uid)  # left in the inbox: retried at next start


class _Annotate(Sink):
    """Adds the calling AE title to each line (before the JSONL sink writes it)."""

    def __init__(self, listener: StoreListener) -> None:
        self.listener = listener

    def write(self, outcomes: Sequence[Outcome]) -> None:
        for outcome in outcomes:
            outcome.result["calling_ae"] = self.listener._callers.pop(outcome.key, None)


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
            log.info("instance %s: %s%s", outcome.key, outcome.state, f" ({why})" if why else "")
