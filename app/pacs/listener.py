"""`cxr listen`: a DICOM Storage SCP (pynetdicom) that predicts every image it receives.

    listener = StoreListener(predictor, out=Path("results.jsonl"), ae_title="CXR")
    listener.start("0.0.0.0", 11112)      # returns once the port is bound
    ...
    listener.stop()                      # finishes what was received, then returns

Received instances are written to an inbox folder first (atomically, named by SOP
Instance UID) and answered with Success at once, so a slow model never makes the
sender time out; one worker thread predicts them in chunks and appends one result line
per instance to OUT (the `cxr batch` line format; `path` is the SOP Instance UID). A
line is written before its inbox file is removed: after a crash or a restart, files
still in the inbox are processed first, and an instance already in OUT is not
predicted (or forwarded) again when it is sent a second time.

Non-image objects (SR, presentation states, CT/MR, ...) are accepted, so the sender's
transfer succeeds, and recorded as skipped with the reason. With `forward`, a TID 1500
SR and a GSPS of each predicted image are stored by STOW-RS.
"""

from __future__ import annotations

import io
import json
import logging
import os
import queue
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydicom import dcmread
from pydicom.dataset import Dataset

from app.pacs.dicomweb import DicomwebClient, DicomwebError
from app.pacs.documents import build_gsps, build_sr
from models.predict import Predictor

__all__ = ["StoreListener"]

log = logging.getLogger(__name__)

_SUCCESS = 0x0000
_OUT_OF_RESOURCES = 0xA700
_STOP = object()


def _read_recorded(path: Path) -> set[str]:
    """SOP Instance UIDs already in OUT (a torn last line does not count)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return set()
    done: set[str] = set()
    for chunk in raw.split(b"\n")[:-1]:
        try:
            line = json.loads(chunk)
        except ValueError:
            continue
        if isinstance(line, dict) and isinstance(line.get("path"), str):
            done.add(line["path"])
    return done


class StoreListener:
    """A Storage SCP that predicts received images and writes result lines.

    Args:
        predictor: the loaded model (None: images are read and reported without prediction).
        out: the JSONL file result lines are appended to.
        ae_title: this listener's AE title (callers must address it by this name).
        inbox: where received instances wait for the model (default: OUT + ".inbox").
        allow_ae: if given, only these calling AE titles may associate.
        forward: a DICOMweb client to push each image's SR and GSPS to by STOW-RS.
        chunk_size: images per forward pass.
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
        self._queue: queue.Queue[Any] = queue.Queue()
        self._recorded = _read_recorded(self.out)
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._server: Any = None
        self.counts = {"done": 0, "skipped": 0, "failed": 0, "duplicate": 0}
        card = predictor.card if predictor is not None else {}
        self.card = card
        self.model_name = f"{card.get('name', 'unknown')} {card.get('version', '')}".strip()
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
        """Bind the port, process what a previous run left in the inbox, and serve."""
        from pynetdicom import evt

        self.inbox.mkdir(parents=True, exist_ok=True)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self._worker = threading.Thread(target=self._work, name="cxr-listen", daemon=True)
        self._worker.start()
        for leftover in sorted(self.inbox.glob("*.dcm")):
            uid = leftover.stem
            with self._lock:
                self._pending.add(uid)
            self._queue.put((uid, leftover, "(inbox)"))
        handlers: list[Any] = [
            (evt.EVT_C_STORE, self._on_store),
            (evt.EVT_C_ECHO, lambda event: _SUCCESS),
        ]
        self._server = self.ae.start_server((host, port), block=False, evt_handlers=handlers)
        allowed = ",".join(self.allow_ae) or "any"
        log.info(
            "listening as %s on %s:%d (callers: %s); results to %s",
            self.ae_title, host, port, allowed, self.out,
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
            header = dcmread(io.BytesIO(data), stop_before_pixels=True)
            uid = str(header.SOPInstanceUID)
        except Exception as exc:  # noqa: BLE001 - a malformed dataset from the network
            log.warning("C-STORE from %s: unreadable dataset refused: %s", calling, exc)
            return 0xC000  # Error: cannot understand
        with self._lock:
            if uid in self._recorded or uid in self._pending:
                self.counts["duplicate"] += 1
                log.info("C-STORE from %s: instance %s already received; ignored", calling, uid)
                return _SUCCESS
            self._pending.add(uid)
        path = self.inbox / f"{uid}.dcm"
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
        self._queue.put((uid, path, calling))
        return _SUCCESS

    # ------------------------------------------------------------------ worker

    def _work(self) -> None:
        stopping = False
        while not stopping:
            batch: list[tuple[str, Path, str]] = []
            waiters: list[threading.Event] = []
            item = self._queue.get()
            while True:
                if item is _STOP:
                    stopping = True
                elif isinstance(item, threading.Event):
                    waiters.append(item)
                else:
                    batch.append(item)
                if stopping or len(batch) >= self.chunk_size or self._queue.empty():
                    break
                item = self._queue.get()
            if batch:
                try:
                    self._process(batch)
                except Exception:  # noqa: BLE001 - the listener must outlive one bad chunk
                    log.exception("processing of %d received instances failed", len(batch))
            for waiter in waiters:
                waiter.set()
            if stopping:  # finish what is already queued
                while not self._queue.empty():
                    rest = self._queue.get()
                    if isinstance(rest, tuple):
                        self._process([rest])
                    elif isinstance(rest, threading.Event):
                        rest.set()

    def _process(self, batch: list[tuple[str, Path, str]]) -> None:
        from models.dicom import read_dicom

        lines: list[dict[str, Any]] = []
        images: list[tuple[int, Any, Dataset]] = []
        for uid, path, calling in batch:
            line: dict[str, Any] = {"path": uid, "state": "done", "calling_ae": calling}
            try:
                header = dcmread(path, stop_before_pixels=True)
            except Exception as exc:  # noqa: BLE001 - recorded as this instance's failure
                lines.append(line | {"state": "failed", "error": f"unreadable: {exc}"})
                continue
            line |= _identifiers(header)
            reason = _not_an_image(header)
            if reason:
                lines.append(line | {"state": "skipped", "kind": "other", "reason": reason})
                continue
            try:
                image = read_dicom(path)
            except (ValueError, OSError) as exc:
                lines.append(line | {"state": "failed", "kind": "image", "error": str(exc)})
                continue
            line |= {
                "kind": "image",
                "view_position": image.meta.view_position,
                "rows": image.meta.rows,
                "columns": image.meta.columns,
                "model": self.model_name if self.predictor else None,
                "demo": bool(self.card.get("demo", False)),
                "prediction": None,
                "report": None,
            }
            if self.predictor is None:
                line["note"] = "no model loaded: image read and reported without prediction"
            lines.append(line)
            images.append((len(lines) - 1, image, header))
        self._predict(lines, images)
        self._write(lines)
        for _, path, _ in batch:
            path.unlink(missing_ok=True)

    def _predict(self, lines: list[dict[str, Any]], images: list[tuple[int, Any, Dataset]]) -> None:
        if self.predictor is None or not images:
            return
        try:
            predictions = self.predictor.predict(
                [im.pixels for _, im, _ in images], heatmaps="none"
            )
        except Exception as exc:  # noqa: BLE001 - recorded per instance
            for i, _, _ in images:
                lines[i] |= {"state": "failed", "error": f"prediction failed: {exc}"}
            return
        for (i, _, header), prediction in zip(images, predictions, strict=True):
            lines[i]["prediction"] = {
                "probabilities": prediction.probabilities,
                "positive": list(prediction.positive),
                "boxes": [b.to_dict() for b in prediction.boxes],
            }
            if self.forward is not None:
                lines[i] |= self._push(header, prediction)

    def _push(self, header: Dataset, prediction: Any) -> dict[str, Any]:
        try:
            objects = [
                build_sr(header, prediction, self.card),
                build_gsps(header, prediction, self.card),
            ]
            payload = []
            for ds in objects:
                buffer = io.BytesIO()
                ds.save_as(buffer, enforce_file_format=True)
                payload.append(buffer.getvalue())
            outcome = self.forward.store(payload) if self.forward else None
        except (DicomwebError, ValueError) as exc:
            log.warning("forward of results for %s failed: %s", header.SOPInstanceUID, exc)
            return {"pushed": [], "push_error": str(exc)}
        if outcome is not None and outcome.failed:
            return {"pushed": outcome.stored, "push_error": "; ".join(outcome.failed.values())}
        return {"pushed": [str(ds.SOPInstanceUID) for ds in objects]}

    def _write(self, lines: list[dict[str, Any]]) -> None:
        with self.out.open("a", encoding="utf-8") as f:
            for line in lines:
                f.write(json.dumps(line, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())
        with self._lock:
            for line in lines:
                self._recorded.add(line["path"])
                self._pending.discard(line["path"])
                self.counts[line["state"]] = self.counts.get(line["state"], 0) + 1
        for line in lines:
            log.info("instance %s: %s%s", line["path"], line["state"], _why(line))


def _why(line: dict[str, Any]) -> str:
    text = line.get("error") or line.get("reason")
    return f" ({text})" if text else ""


def _identifiers(header: Dataset) -> dict[str, Any]:
    def text(keyword: str) -> str | None:
        value = header.get(keyword)
        return str(value).strip() or None if value is not None else None

    return {
        "study_instance_uid": text("StudyInstanceUID"),
        "series_instance_uid": text("SeriesInstanceUID"),
        "sop_instance_uid": text("SOPInstanceUID"),
        "sop_class_uid": text("SOPClassUID"),
        "accession_number": text("AccessionNumber"),
        "modality": text("Modality"),
    }


def _not_an_image(header: Dataset) -> str | None:
    from models.dicom import ACCEPTED_MODALITIES

    sop_class = header.get("SOPClassUID")
    name = getattr(sop_class, "name", None) or str(sop_class)
    modality = str(header.get("Modality", "") or "").upper()
    if modality == "SR" or "Rows" not in header:
        return f"not an image (SOP Class {name})"
    if modality not in ACCEPTED_MODALITIES:
        return f"Modality {modality or '(none)'} is not a projection radiograph ({name})"
    return None
