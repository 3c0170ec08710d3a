"""Batch-label a PACS export: scan the folder tree, label reports, predict images.

The same code serves `cxr batch` (results streamed to a JSONL file) and
`POST /v1/batches` (results persisted per file, so a job survives restarts).

What happens to each file found (one result per file, never more):

| kind       | what it is                                   | state                          |
|------------|----------------------------------------------|--------------------------------|
| `image`    | DICOM with pixel data, projection modality   | done (or failed: unreadable)   |
| `bitmap`   | .png/.jpg/.tif next to the DICOMs            | done (or failed)               |
| `sr`       | DICOM Structured Report: its text is labeled | done (or failed)               |
| `dicomdir` | the export's index file                      | skipped (files are walked)     |
| `other`    | a DICOM without pixels, or CT/MR/...         | skipped, with the reason       |
| `ignored`  | viewer software, README.TXT, .DS_Store, ...  | skipped, with the reason       |
| `invalid`  | not DICOM, truncated or corrupt              | failed, with the reader's error|

Images are reported with their report's mined labels when a report exists: from
the reports CSV (by AccessionNumber, else StudyInstanceUID) or from an SR of the
same study in the export (SRs are processed first). Without a model, images are
still decoded (which validates them) and reported with `"prediction": null` and
a `note`: "no model" is not an error.
"""

from __future__ import annotations

import csv
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from app import crud
from app.archive import ZipLimits, extract_zip
from app.labeling import ReportLabeler
from app.metrics import Metrics

__all__ = [
    "BatchInputError",
    "BatchProcessor",
    "BatchRunner",
    "ExportFile",
    "FileOutcome",
    "ReportIndex",
    "load_reports_csv",
    "read_result_lines",
    "result_line",
    "scan_export",
]

log = logging.getLogger(__name__)

_BITMAP_EXT = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp"}
# Files that ride along on PACS export media (viewers, autorun, docs): never DICOM.
_IGNORED_EXT = {
    ".txt", ".htm", ".html", ".xml", ".xsl", ".css", ".js", ".json", ".pdf", ".inf", ".ini",
    ".exe", ".dll", ".ico", ".bat", ".sh", ".cfg", ".md", ".csv", ".zip", ".log", ".jar",
}  # fmt: skip
_IGNORED_NAMES = {".ds_store", "thumbs.db", "desktop.ini"}


class BatchInputError(ValueError):
    """The export folder or the reports CSV cannot be used as given."""


@dataclass(frozen=True)
class ExportFile:
    """A file found in an export, classified from its header."""

    path: str
    kind: str
    study_instance_uid: str | None = None
    accession_number: str | None = None
    note: str | None = None


@dataclass
class FileOutcome:
    """The outcome for one file: state done, skipped or failed, with its result."""

    path: str
    state: str
    result: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def result_line(
    path: str, state: str, result: dict[str, Any] | None, error: str | None
) -> dict[str, Any]:
    """The JSON object written per file by `cxr batch` and GET /v1/batches/{id}/results."""
    line: dict[str, Any] = {"path": path, "state": state}
    line.update(result or {})
    if error is not None:
        line["error"] = error
    return line


def read_result_lines(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The complete result lines of a `cxr batch` output, for `--resume`.

    A last line without its newline (or not valid JSON) is the line being written when
    the run was interrupted: it is dropped, so its file is processed again. A path
    recorded twice keeps its first line.

    Returns:
        (one result line per path, in file order; the number of lines dropped).

    Raises:
        BatchInputError: a line before the last is not a JSON object with a "path".
    """
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return [], 0
    except OSError as exc:
        raise BatchInputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    chunks = raw.split(b"\n")
    torn = chunks.pop()  # b"" when the file ends with a newline
    lines: dict[str, dict[str, Any]] = {}
    dropped = 1 if torn.strip() else 0
    for number, chunk in enumerate(chunks, start=1):
        if not chunk.strip():
            continue
        try:
            line = json.loads(chunk)
            if not isinstance(line, dict) or not isinstance(line.get("path"), str):
                raise ValueError("not a result object with a path")
        except ValueError as exc:
            if number == len(chunks):  # a torn last line that happens to end in a newline
                dropped += 1
                continue
            raise BatchInputError(
                f"{path}, line {number}: not a `cxr batch` result line ({exc}); "
                "resume needs the output of an earlier run, or start over without --resume"
            ) from None
        if line["path"] in lines:
            dropped += 1
        else:
            lines[line["path"]] = line
    return list(lines.values()), dropped


# --------------------------------------------------------------------------- scan


def _classify(root: Path, rel: str) -> ExportFile:
    from models.dicom import ACCEPTED_MODALITIES, read_dicom_header

    path = root / rel
    name = path.name.lower()
    ext = path.suffix.lower()
    if name in _IGNORED_NAMES or ext in _IGNORED_EXT:
        return ExportFile(rel, "ignored", note=f"not a DICOM file ({ext or name})")
    if ext in _BITMAP_EXT:
        return ExportFile(rel, "bitmap")
    try:
        header = read_dicom_header(path)
    except (ValueError, OSError) as exc:  # ImageError is a ValueError
        return ExportFile(rel, "invalid", note=str(exc) or type(exc).__name__)
    common = {
        "study_instance_uid": header.study_instance_uid,
        "accession_number": header.accession_number,
    }
    if header.is_dicomdir:
        return ExportFile(
            rel, "dicomdir", note="DICOMDIR index; the files it lists are read directly"
        )
    if header.is_structured_report:
        return ExportFile(rel, "sr", **common)
    if not header.has_pixel_data:
        return ExportFile(
            rel, "other", note=f"no pixel data (SOP Class {header.sop_class_uid})", **common
        )
    modality = (header.modality or "").upper()
    if modality not in ACCEPTED_MODALITIES:
        return ExportFile(
            rel, "other", note=f"Modality {modality} is not a projection radiograph", **common
        )
    return ExportFile(rel, "image", **common)


def scan_export(root: Path, *, exclude: Sequence[Path] = ()) -> Iterator[ExportFile]:
    """Walk an export folder and classify every file (headers only, pixels not decoded).

    Symbolic links are not followed out of the export: a linked file whose target
    lies outside `root` is reported as `invalid`, linked folders are not entered.

    Args:
        root: the export folder.
        exclude: files to leave out (e.g. the reports CSV when it sits in the export).

    Yields:
        One `ExportFile` per file, in sorted path order.

    Raises:
        BatchInputError: `root` is not a folder.
    """
    root = Path(root)
    if not root.is_dir():
        raise BatchInputError(f"{root}: not a folder (expected a PACS export directory)")
    real_root = root.resolve()
    skip = {Path(p).resolve() for p in exclude}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for filename in sorted(filenames):
            full = Path(dirpath) / filename
            rel = full.relative_to(root).as_posix()
            resolved = full.resolve()
            if resolved in skip:
                continue
            if full.is_symlink() and real_root not in resolved.parents:
                yield ExportFile(rel, "invalid", note="symbolic link pointing outside the export")
                continue
            if not resolved.is_file():
                yield ExportFile(rel, "ignored", note="not a regular file")
                continue
            yield _classify(root, rel)


# ------------------------------------------------------------------------ reports


def _norm(header: str) -> str:
    return re.sub(r"[^a-z0-9]", "", header.lower())


_ACCESSION_COLS = ("accessionnumber", "accession", "accessionno", "accno")
_STUDY_COLS = ("studyinstanceuid", "studyuid", "studyinstance")
_TEXT_COLS = ("report", "reporttext", "text", "body", "reportbody")


@dataclass
class ReportIndex:
    """Report texts by accession number and by StudyInstanceUID."""

    by_accession: dict[str, str] = field(default_factory=dict)
    by_study: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return max(len(self.by_accession), len(self.by_study))

    def lookup(self, accession: str | None, study_uid: str | None) -> tuple[str, str] | None:
        """(key, text) of the report for a study, accession number first."""
        if accession and accession in self.by_accession:
            return f"acc:{accession}", self.by_accession[accession]
        if study_uid and study_uid in self.by_study:
            return f"study:{study_uid}", self.by_study[study_uid]
        return None


def load_reports_csv(path: Path) -> ReportIndex:
    """Read a reports CSV keyed by accession number and/or StudyInstanceUID.

    Recognized headers (case, spaces and underscores ignored): `AccessionNumber`
    (or `accession`), `StudyInstanceUID`, and the text as `report`/`text`, or
    `findings` + `impression` (joined as "FINDINGS: ...\\nIMPRESSION: ...").

    Raises:
        BatchInputError: unreadable file, or no key column or no text column.
    """
    csv.field_size_limit(16 * 2**20)  # long reports exceed the 128 KiB default
    index = ReportIndex()
    try:
        with Path(path).open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            headers = {_norm(h): h for h in (reader.fieldnames or [])}
            acc = next((headers[c] for c in _ACCESSION_COLS if c in headers), None)
            study = next((headers[c] for c in _STUDY_COLS if c in headers), None)
            text = next((headers[c] for c in _TEXT_COLS if c in headers), None)
            findings, impression = headers.get("findings"), headers.get("impression")
            if acc is None and study is None:
                raise BatchInputError(
                    f"{path}: no AccessionNumber or StudyInstanceUID column "
                    f"(found: {', '.join(reader.fieldnames or []) or 'no header'})"
                )
            if text is None and findings is None and impression is None:
                raise BatchInputError(
                    f"{path}: no report text column; expected 'report' (or 'text'), "
                    "or 'findings'/'impression'"
                )
            for row in reader:
                if text is not None:
                    body = (row.get(text) or "").strip()
                else:
                    parts = [
                        f"{title}: {(row.get(col) or '').strip()}"
                        for title, col in (("FINDINGS", findings), ("IMPRESSION", impression))
                        if col is not None and (row.get(col) or "").strip()
                    ]
                    body = "\n".join(parts)
                if acc is not None and (row.get(acc) or "").strip():
                    index.by_accession[(row[acc] or "").strip()] = body
                if study is not None and (row.get(study) or "").strip():
                    index.by_study[(row[study] or "").strip()] = body
    except OSError as exc:
        raise BatchInputError(f"{path}: cannot read reports CSV ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise BatchInputError(f"{path}: not a UTF-8 CSV file ({exc})") from None
    return index


# ---------------------------------------------------------------------- processing


def _report_summary(labels: Any, source: str, version: str) -> dict[str, Any]:
    data = labels.to_dict()
    out: dict[str, Any] = {"source": source, "labeler_version": version}
    if data.get("error"):
        out["error"] = data["error"]
        return out
    out["labels"] = data["labels"]
    out["positive"] = [k for k, v in data["labels"].items() if v == "positive"]
    out["no_finding"] = data["no_finding"]
    return out


OnImage = Callable[[ExportFile, Any, dict[str, Any]], None]


class BatchProcessor:
    """Turns `ExportFile`s into `FileOutcome`s.

    Args:
        root: the export folder the files' paths are relative to.
        labeler: the report labeler.
        predictor: a `models.predict.Predictor`, or None (images reported without prediction).
        reports: reports from a CSV, or None.
        on_image: called as (file, DicomImage, result) for each image read (dataset writer).
    """

    def __init__(
        self,
        root: Path,
        *,
        labeler: ReportLabeler,
        predictor: Any | None,
        reports: ReportIndex | None = None,
        on_image: OnImage | None = None,
    ) -> None:
        self.root = Path(root)
        self.labeler = labeler
        self.predictor = predictor
        self.reports = reports
        self.on_image = on_image
        self._csv_cache: dict[str, dict[str, Any]] = {}
        self._sr_reports: dict[str, dict[str, Any]] = {}
        self.matched_report_keys: set[str] = set()
        card = predictor.card if predictor is not None else {}
        self.model_name = (
            f"{card.get('name', 'unknown')} {card.get('version', '')}".strip()
            if predictor
            else None
        )
        self.demo = bool(card.get("demo", False))

    def remember_sr(
        self, study_uid: str | None, accession: str | None, report: dict[str, Any]
    ) -> None:
        """Make an SR's labels available to images of the same study (also used on resume)."""
        if "error" in report:
            return
        if accession:
            self._sr_reports.setdefault(f"acc:{accession}", report)
        if study_uid:
            self._sr_reports.setdefault(f"study:{study_uid}", report)

    def report_for(self, accession: str | None, study_uid: str | None) -> dict[str, Any] | None:
        """The mined labels for a study: from the CSV first, else from an SR in the export."""
        if self.reports is not None:
            found = self.reports.lookup(accession, study_uid)
            if found is not None:
                key, text = found
                self.matched_report_keys.add(key)
                if key not in self._csv_cache:
                    labels = self.labeler.label_many([(key.split(":", 1)[1], text)])[0]
                    self._csv_cache[key] = _report_summary(labels, "csv", self.labeler.version)
                return self._csv_cache[key]
        for sr_key in (
            f"acc:{accession}" if accession else None,
            f"study:{study_uid}" if study_uid else None,
        ):
            if sr_key and sr_key in self._sr_reports:
                return self._sr_reports[sr_key]
        return None

    def process(self, files: Sequence[ExportFile]) -> list[FileOutcome]:
        """Process a chunk of files; images are predicted in one forward pass.

        Returns:
            One outcome per input file, in order.
        """
        outcomes: list[FileOutcome | None] = [None] * len(files)
        loaded: list[tuple[int, Any]] = []
        for i, f in enumerate(files):
            if f.kind in ("image", "bitmap"):
                outcome, image = self._read_image(f)
                outcomes[i] = outcome
                if image is not None:
                    loaded.append((i, image))
            elif f.kind == "sr":
                outcomes[i] = self._process_sr(f)
            elif f.kind == "invalid":
                outcomes[i] = FileOutcome(
                    f.path, "failed", {"kind": f.kind}, f.note or "unreadable"
                )
            else:
                outcomes[i] = FileOutcome(
                    f.path, "skipped", self._base(f) | {"reason": f.note or f.kind}
                )
        if loaded:
            self._predict(files, outcomes, loaded)
        return [o for o in outcomes if o is not None]

    def _base(self, f: ExportFile) -> dict[str, Any]:
        return {
            "kind": f.kind,
            "study_instance_uid": f.study_instance_uid,
            "accession_number": f.accession_number,
        }

    def _read_image(self, f: ExportFile) -> tuple[FileOutcome, Any]:
        from models.dicom import read_dicom
        from models.images import load_image

        path = self.root / f.path
        try:
            image = read_dicom(path) if f.kind == "image" else load_image(path)
        except (ValueError, OSError) as exc:
            return FileOutcome(
                f.path, "failed", self._base(f), str(exc) or type(exc).__name__
            ), None
        meta = image.meta
        result = self._base(f) | {
            "study_instance_uid": meta.study_instance_uid or f.study_instance_uid,
            "series_instance_uid": meta.series_instance_uid,
            "sop_instance_uid": meta.sop_instance_uid,
            "sop_class_uid": meta.sop_class_uid,
            "accession_number": meta.accession_number or f.accession_number,
            "modality": meta.modality,
            "view_position": getattr(meta, "view_position", None),
            "rows": meta.rows,
            "columns": meta.columns,
            "model": self.model_name,
            "demo": self.demo,
            "prediction": None,
            "report": self.report_for(
                meta.accession_number or f.accession_number,
                meta.study_instance_uid or f.study_instance_uid,
            ),
        }
        if self.predictor is None:
            result["note"] = "no model loaded: image read and reported without prediction"
        return FileOutcome(f.path, "done", result), image

    def _process_sr(self, f: ExportFile) -> FileOutcome:
        from models.dicom import read_sr_text

        base = self._base(f)
        try:
            text = read_sr_text(self.root / f.path)
        except (ValueError, OSError) as exc:
            return FileOutcome(f.path, "failed", base, str(exc) or type(exc).__name__)
        if not text.strip():
            return FileOutcome(
                f.path, "skipped", base | {"reason": "structured report without text"}
            )
        labels = self.labeler.label_many(
            [(f.accession_number or f.study_instance_uid or f.path, text)]
        )[0]
        report = _report_summary(labels, "sr", self.labeler.version)
        self.remember_sr(f.study_instance_uid, f.accession_number, report)
        if "error" in report:
            return FileOutcome(f.path, "failed", base | {"report": report}, report["error"])
        return FileOutcome(f.path, "done", base | {"report": report})

    def _predict(
        self,
        files: Sequence[ExportFile],
        outcomes: list[FileOutcome | None],
        loaded: list[tuple[int, Any]],
    ) -> None:
        predictions: list[Any] = [None] * len(loaded)
        if self.predictor is not None:
            try:
                predictions = self.predictor.predict(
                    [im.pixels for _, im in loaded], heatmaps="none"
                )
            except Exception:  # one bad image must not sink the chunk: retry one by one
                for j, (i, im) in enumerate(loaded):
                    try:
                        predictions[j] = self.predictor.predict([im.pixels], heatmaps="none")[0]
                    except Exception as exc:  # noqa: BLE001 - recorded as this file's error
                        out = outcomes[i]
                        assert out is not None
                        out.state, out.error = "failed", f"prediction failed: {exc}"
        for (i, image), pred in zip(loaded, predictions, strict=True):
            out = outcomes[i]
            assert out is not None
            if out.state != "done":
                continue
            if pred is not None:
                out.result["prediction"] = {
                    "probabilities": pred.probabilities,
                    "positive": list(pred.positive),
                    "boxes": [b.to_dict() for b in pred.boxes],
                }
            if self.on_image is not None:
                self.on_image(files[i], image, out.result)


# ---------------------------------------------------------------------- server jobs


class BatchRunner:
    """Runs batch jobs one at a time in a background thread, resuming unfinished ones.

    Progress is committed per chunk of files: after a crash or restart at most
    one chunk is redone, and `crud.complete_items` records each file once.
    """

    def __init__(
        self,
        *,
        sessions: sessionmaker[Session],
        labeler: ReportLabeler,
        predictor: Any | None,
        storage_root: Path,
        zip_limits: ZipLimits,
        chunk_size: int = 8,
        metrics: Metrics | None = None,
    ) -> None:
        self.sessions = sessions
        self.labeler = labeler
        self.predictor = predictor
        self.storage_root = Path(storage_root)
        self.zip_limits = zip_limits
        self.chunk_size = chunk_size
        self.metrics = metrics
        self._queue: list[str] = []
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the worker thread and queue every unfinished job found in the database."""
        with self.sessions() as session:
            pending = crud.unfinished_job_ids(session)
        for job_id in pending:
            self.submit(job_id)
        if pending:
            log.info("resuming %d unfinished batch job(s)", len(pending))
        self._thread = threading.Thread(target=self._loop, name="cxr-batch", daemon=True)
        self._thread.start()

    def submit(self, job_id: str) -> None:
        """Queue a job (no-op if already queued)."""
        with self._cv:
            if job_id not in self._queue:
                self._queue.append(job_id)
            self._cv.notify()

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the worker to stop after the current chunk, and wait for it."""
        self._stop.set()
        with self._cv:
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._cv:
                while not self._queue and not self._stop.is_set():
                    self._cv.wait(timeout=1.0)
                if self._stop.is_set():
                    return
                job_id = self._queue.pop(0)
            try:
                self.run_job(job_id, stop=self._stop)
            except Exception:  # noqa: BLE001 - a job's failure must not kill the worker
                log.exception("batch job %s crashed", job_id)

    def source_dir(self, job: Any) -> Path:
        """The folder a job reads: its server path, or its extracted zip."""
        if job.source_kind == "path":
            return Path(job.source)
        return self.storage_root / "jobs" / str(job.id) / "export"

    def _prepare_zip(self, job: Any) -> Path:
        export = self.source_dir(job)
        marker = export.parent / ".extracted"
        if not marker.exists():
            from app.archive import remove_tree

            remove_tree(export)  # a half-finished extraction from before a crash
            extract_zip(Path(job.source), export, self.zip_limits)
            marker.touch()
        return export

    def run_job(
        self,
        job_id: str,
        *,
        stop: threading.Event | None = None,
        after_chunk: Callable[[int], None] | None = None,
    ) -> None:
        """Run (or resume) one job to completion.

        Args:
            job_id: the job.
            stop: when set, return after the current chunk leaving the job resumable.
            after_chunk: called with the number of chunks done so far (tests use it to
                simulate a crash midway).
        """
        with self.sessions() as session:
            job = crud.get_batch_job(session, job_id)
            if job is None or job.state not in crud.UNFINISHED:
                return
            crud.set_job_state(session, job, "running")
            if job.scanned and not crud.pending_items(session, job.id, 1):
                self._finish(session, job)  # crashed between the last chunk and "done"
                return
            try:
                root = self._prepare_zip(job) if job.source_kind == "zip" else Path(job.source)
                reports_path = Path(job.reports_path) if job.reports_path else None
                if not job.scanned:
                    found = scan_export(root, exclude=[reports_path] if reports_path else [])
                    n = crud.add_batch_items(
                        session,
                        job,
                        (
                            crud.NewItem(
                                f.path, f.kind, f.study_instance_uid, f.accession_number, f.note
                            )
                            for f in found
                        ),
                    )
                    log.info("batch job %s: %d files found", job.id, n)
                    if job.source_kind == "zip":
                        Path(job.source).unlink(
                            missing_ok=True
                        )  # extracted; the upload is no longer needed
                reports = load_reports_csv(reports_path) if reports_path else None
            except (ValueError, OSError) as exc:
                crud.set_job_state(session, job, "failed", error=str(exc))
                log.warning("batch job %s failed: %s", job.id, exc)
                return
            processor = BatchProcessor(
                root, labeler=self.labeler, predictor=self.predictor, reports=reports
            )
            for item in crud.done_report_items(session, job.id):
                report = (item.result or {}).get("report")
                if report:
                    processor.remember_sr(item.study_instance_uid, item.accession_number, report)
            chunks = 0
            while True:
                if stop is not None and stop.is_set():
                    log.info("batch job %s paused; it resumes at next start", job.id)
                    return
                items = crud.pending_items(session, job.id, self.chunk_size)
                if not items:
                    break
                files = [
                    ExportFile(
                        i.path, i.kind, i.study_instance_uid, i.accession_number, i.scan_note
                    )
                    for i in items
                ]
                start = time.perf_counter()
                outcomes = processor.process(files)
                crud.complete_items(
                    session,
                    [
                        crud.ItemOutcome(item.id, o.state, o.result, o.error)
                        for item, o in zip(items, outcomes, strict=True)
                    ],
                )
                if self.metrics is not None:
                    for o in outcomes:
                        self.metrics.batch_items.labels(o.state).inc()
                    images = sum(1 for o in outcomes if o.result.get("prediction"))
                    if images:
                        self.metrics.predictions.labels("batch").inc(images)
                log.debug(
                    "batch job %s: chunk of %d in %.2fs",
                    job.id,
                    len(items),
                    time.perf_counter() - start,
                )
                chunks += 1
                if after_chunk is not None:
                    after_chunk(chunks)
            self._finish(session, job)

    def _finish(self, session: Session, job: Any) -> None:
        if job.source_kind == "zip":
            from app.archive import remove_tree

            # Extracted files carry patient data: keep only the results. Removed before
            # the job reads "done", so a client that sees "done" sees a clean storage.
            remove_tree(self.source_dir(job).parent)
        crud.set_job_state(session, job, "done")
        log.info("batch job %s done", job.id)
