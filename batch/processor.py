"""The one processor: turns a chunk of `SourceItem`s into `Outcome`s.

Images are reported with their report's mined labels when a report exists: from the
reports CSV (by AccessionNumber, else StudyInstanceUID) or from an SR of the same
study (the engine processes SRs first). Without a model, images are still decoded
(which validates them) and reported with `"prediction": null` and a `note`: "no model"
is not an error.

Every item ends done, skipped or failed, whatever its decoding raises: a third-party
decoder's exception is caught at the boundary of one item and recorded as that item's
error (issue 7, item 2), so good files in the same chunk are still recorded.

A second copy of an image is skipped as a duplicate of the first (`batch.duplicates`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from batch.duplicates import InstanceIndex, duplicate_fields
from batch.interfaces import Labeler, Outcome, Source, SourceItem
from batch.limits import call_with_limit
from batch.read_ahead import FetchedImage, ReadAhead, decode_failure
from batch.reports import ReportIndex
from batch.scan import describe_error
from labeler import ReportLabels

if TYPE_CHECKING:
    from models.decode_pool import DecodePool
    from models.image_pipeline import (
        DecodeTask,
        InputSpec,
        LoadedImage,
        PreparedImage,
        SourceKind,
    )
    from models.predict import Prediction, Predictor

__all__ = ["BatchProcessor"]

log = logging.getLogger(__name__)


def _report_summary(labels: Any, source: str, version: str) -> dict[str, Any]:
    data = labels.to_dict()
    out: dict[str, Any] = {"source": source, "labeler_version": version}
    if data.get("error"):
        out["error"] = data["error"]
        return out
    out["labels"] = data["labels"]
    out["positive"] = [k for k, v in data["labels"].items() if v == "positive"]
    out["no_finding"] = data["no_finding"]
    # Side, site, size, count and change per finding: the discrepancy worklist compares the
    # report's side with the image's.
    out["findings"] = data.get("findings", {})
    return out


class BatchProcessor:
    """Turns items into outcomes: reads images, labels SRs and CSV reports, predicts.

    Args:
        source: where the items' bytes are (`local_path`, `release`).
        labeler: the report labeler.
        predictor: a `models.predict.Predictor`, or None (images reported without prediction).
        reports: reports from a CSV, or None.
        cancelled: checked between items; when it returns True, `process` returns the
            outcomes of the items done so far (the others stay pending).
        file_timeout_s: give up reading one file after this long (None: no limit).
        max_pixels: images with more pixels fail from their header, undecoded (None: no limit).
        input_spec: how images are fitted (`models.image_pipeline.InputSpec`); default the
            predictor's, or a small fit that only checks the image decodes.
        display_size: keep an 8-bit copy of each image, longer side at most this, while
            the chunk's sinks run (the training-set writer's size; None: none).
        decode_pool: decode images in these worker processes (`decode_pool(...)`), so a
            file that crashes the decoder (or runs past the pool's limit) is that file's
            failure and its worker is replaced; None: decode in this process.
        read_workers: inside `reading_ahead`, decode the run's images in this many worker
            processes, ahead of the chunk being predicted (`batch.read_ahead`); 0: one at
            a time in this process (or in `decode_pool`).
    """

    def __init__(
        self,
        source: Source,
        *,
        labeler: Labeler,
        predictor: Predictor | None,
        reports: ReportIndex | None = None,
        cancelled: Callable[[], bool] | None = None,
        file_timeout_s: float | None = None,
        max_pixels: int | None = None,
        input_spec: InputSpec | None = None,
        display_size: int | None = None,
        decode_pool: DecodePool[DecodeTask, LoadedImage | Exception] | None = None,
        read_workers: int = 0,
    ) -> None:
        from models.image_pipeline import InputSpec

        self.source = source
        self.max_pixels = max_pixels
        if input_spec is None:
            input_spec = (
                InputSpec.of(predictor) if predictor is not None else InputSpec(64, "letterbox")
            )
        # Fingerprinted in the decoding worker, so duplicates are found without hashing
        # pixels here.
        self.input_spec = replace(
            input_spec, display_size=display_size, max_pixels=max_pixels, fingerprint=True
        )
        self.labeler = labeler
        self.predictor = predictor
        self.reports = reports
        self.cancelled = cancelled
        self.file_timeout_s = file_timeout_s
        self.decode_pool = decode_pool
        self.read_workers = read_workers
        self._ahead: ReadAhead | None = None
        self._csv_cache: dict[str, dict[str, Any]] = {}
        self._sr_reports: dict[str, dict[str, Any]] = {}
        self.matched_report_keys: set[str] = set()
        self.instances = InstanceIndex()
        card = predictor.card if predictor is not None else {}
        self.model_name = (
            f"{card.get('name', 'unknown')} {card.get('version', '')}".strip()
            if predictor
            else None
        )
        self.demo = bool(card.get("demo", False))

    # --- memory kept across chunks (rebuilt on resume) --------------------------------

    def remember_sr(
        self, study_uid: str | None, accession: str | None, report: dict[str, Any]
    ) -> None:
        """Make an SR's labels available to images of the same study."""
        if "error" in report:
            return
        if accession:
            self._sr_reports.setdefault(f"acc:{accession}", report)
        if study_uid:
            self._sr_reports.setdefault(f"study:{study_uid}", report)

    def restore(self, line: dict[str, Any]) -> None:
        """Take back what an item recorded by an earlier run taught: its SR's labels, which
        CSV report it matched, and which image instances it holds (the resume path of both
        the CLI and the service)."""
        self.instances.restore(line)
        report = line.get("report")
        if not isinstance(report, dict):
            return
        if line.get("kind") == "sr" and line.get("state") == "done":
            self.remember_sr(line.get("study_instance_uid"), line.get("accession_number"), report)
        if self.reports is not None and report.get("source") == "csv":
            found = self.reports.lookup(
                line.get("accession_number"), line.get("study_instance_uid")
            )
            if found is not None:
                self.matched_report_keys.add(found[0])

    def unmatched_reports(self) -> int | None:
        """CSV reports that matched no image so far (None without a reports CSV)."""
        if self.reports is None:
            return None
        return len(self.reports) - len(self.matched_report_keys)

    def report_for(self, accession: str | None, study_uid: str | None) -> dict[str, Any] | None:
        """The mined labels for a study: from the CSV first, else from an SR of the study."""
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

    # --- processing -------------------------------------------------------------------

    @contextlib.contextmanager
    def reading_ahead(self, items: Sequence[SourceItem], *, chunk_size: int) -> Iterator[None]:
        """Inside, `process` takes the images of `items` (processed in this order) from
        `read_workers` processes that read them ahead, about two chunks' worth; without
        read workers, or with a `decode_pool`, nothing changes.

        Raises:
            ValueError: `read_workers` is negative.
        """
        if self.read_workers < 0:
            raise ValueError(f"read_workers must be >= 0, got {self.read_workers}")
        images = [i for i in items if i.kind in ("image", "bitmap")]
        if not self.read_workers or self.decode_pool is not None or not images:
            yield
            return
        ahead = ReadAhead(
            self.source,
            images,
            self.input_spec,
            workers=self.read_workers,
            timeout_s=self.file_timeout_s,
            depth=max(2 * chunk_size, 2 * self.read_workers),
        )
        self._ahead = ahead
        try:
            yield
        finally:
            self._ahead = None
            ahead.close()

    def process(self, items: Sequence[SourceItem]) -> list[Outcome]:
        """Process a chunk; the images read are predicted in one forward pass.

        Returns:
            One outcome per item, in order; fewer (a prefix) when `cancelled` turned true.
        """
        outcomes: list[Outcome] = []
        for item in items:
            if self.cancelled is not None and self.cancelled():
                break
            outcome = self._process_one(item)
            if outcome.state == "failed" and self.cancelled is not None and self.cancelled():
                break  # cut midway by the cancel (an interrupted download): left pending
            outcomes.append(outcome)
        loaded = [o for o in outcomes if o.state == "done" and o.image is not None]
        if loaded:
            self._predict(loaded)
        return outcomes

    def _base(self, item: SourceItem) -> dict[str, Any]:
        return {
            "kind": item.kind,
            "study_instance_uid": item.study_instance_uid,
            "accession_number": item.accession_number,
        }

    def _process_one(self, item: SourceItem) -> Outcome:
        if item.kind == "invalid":
            return Outcome(item.key, "failed", {"kind": item.kind}, item.note or "unreadable")
        if item.kind not in ("image", "bitmap", "sr"):
            return Outcome(
                item.key, "skipped", self._base(item) | {"reason": item.note or item.kind}
            )
        path = None
        try:
            if item.kind != "sr" and self._ahead is not None:
                fetched = self._ahead.take(item, cancelled=self.cancelled)
                path = fetched.path
            else:
                path = self.source.local_path(item)
                if item.kind == "sr":
                    return self._process_sr(item, path)
                fetched = FetchedImage(item, path, self._read_image(item, path))
            if isinstance(fetched.image, Exception):
                raise fetched.image
            return self._image_outcome(item, fetched.image)
        except Exception as exc:  # noqa: BLE001 - the boundary of one input (issue 7 item 2)
            error = describe_error(exc, path, item.key) if path is not None else str(exc)
            log.info("batch item %s failed: %s", item.key, error)
            return Outcome(item.key, "failed", self._base(item), error)
        finally:
            try:
                self.source.release(item)
            except Exception:  # noqa: BLE001 - cleanup must not change the outcome
                log.warning("could not release batch item %s", item.key, exc_info=True)

    def _read_image(self, item: SourceItem, path: Any) -> LoadedImage | Exception:
        """The one image path (decode -> fit -> display copy), in `decode_pool` or here;
        the full-resolution image is dropped inside it, so a chunk holds only fitted
        images."""
        from models.image_pipeline import load_for_model

        kind: SourceKind = "dicom" if item.kind == "image" else "auto"
        if self.decode_pool is not None:
            (image,) = self.decode_pool.map([(str(path), self.input_spec, kind)])
            return image
        return call_with_limit(
            lambda: load_for_model(path, self.input_spec, kind=kind), self.file_timeout_s
        )

    def _image_outcome(self, item: SourceItem, image: LoadedImage) -> Outcome:
        meta = image.meta
        uid, fingerprint = meta.sop_instance_uid, image.fingerprint
        seen = self.instances.see(uid, fingerprint, item.key)
        if seen.duplicate_of is not None and uid and fingerprint:
            log.info("batch item %s skipped: duplicate of %s", item.key, seen.duplicate_of)
            # No prediction, no training image, and the pixels are not kept.
            fields = duplicate_fields(uid, fingerprint, seen.duplicate_of)
            return Outcome(item.key, "skipped", self._base(item) | fields)
        result = self._base(item) | {
            "study_instance_uid": meta.study_instance_uid or item.study_instance_uid,
            "series_instance_uid": meta.series_instance_uid,
            "sop_instance_uid": meta.sop_instance_uid,
            "sop_class_uid": meta.sop_class_uid,
            "accession_number": meta.accession_number or item.accession_number,
            "modality": meta.modality,
            "view_position": getattr(meta, "view_position", None),
            "rows": meta.rows,
            "columns": meta.columns,
            "pixel_fingerprint": fingerprint,
            "model": self.model_name,
            "demo": self.demo,
            "prediction": None,
            "report": self.report_for(
                meta.accession_number or item.accession_number,
                meta.study_instance_uid or item.study_instance_uid,
            ),
        }
        if seen.warning:
            # A derived image that kept its source's UID, or a copy given new UIDs: processed.
            log.info("batch item %s: %s", item.key, seen.warning)
            result["warning"] = seen.warning
        if self.predictor is None:
            result["note"] = "no model loaded: image read and reported without prediction"
        return Outcome(item.key, "done", result, image=image)

    def _process_sr(self, item: SourceItem, path: Any) -> Outcome:
        from models.dicom import read_sr_text

        base = self._base(item)
        report_id = item.accession_number or item.study_instance_uid or item.key

        def read_and_label() -> ReportLabels | None:
            # both under the per-file limit: a hostile SR's text is costly to label too
            text = read_sr_text(path)
            return self.labeler.label_many([(report_id, text)])[0] if text.strip() else None

        labels = call_with_limit(read_and_label, self.file_timeout_s)
        if labels is None:
            return Outcome(item.key, "skipped", base | {"reason": "structured report without text"})
        report = _report_summary(labels, "sr", self.labeler.version)
        self.remember_sr(item.study_instance_uid, item.accession_number, report)
        if "error" in report:
            return Outcome(item.key, "failed", base | {"report": report}, report["error"])
        return Outcome(item.key, "done", base | {"report": report})

    def _predict(self, loaded: list[Outcome]) -> None:
        if self.predictor is None:
            return
        pixels = [o.image.prepared for o in loaded if o.image is not None]
        predictions: list[Prediction | None]
        try:
            predictions = list(self.predict_pixels(pixels))
        except Exception:  # noqa: BLE001 - one bad image must not sink the chunk: retry one by one
            predictions = []
            for outcome, image in zip(loaded, pixels, strict=True):
                try:
                    predictions.append(self.predict_pixels([image])[0])
                except Exception as exc:  # noqa: BLE001 - recorded as this file's error
                    predictions.append(None)
                    outcome.state = "failed"
                    outcome.error = f"prediction failed: {type(exc).__name__}: {exc}"
                    # A failed first copy is no copy: a later one is predicted.
                    result = outcome.result
                    self.instances.forget(
                        result.get("sop_instance_uid"), result.get("pixel_fingerprint"), outcome.key
                    )
        for outcome, pred in zip(loaded, predictions, strict=True):
            if pred is not None:
                outcome.result["prediction"] = {
                    "probabilities": pred.probabilities,
                    "positive": list(pred.positive),
                    "boxes": [b.to_dict() for b in pred.boxes],
                    # the decisions' thresholds: a reader sees positive/negative beside them
                    "thresholds": dict(self.predictor.thresholds),
                }

    def predict_pixels(self, pixels: Sequence[PreparedImage]) -> list[Prediction]:
        """The one call into the image model: fitted images (`models.image_pipeline`) to one
        prediction each, in order, without heatmaps.

        Raises:
            Exception: whatever the model raises (the caller retries one by one).
        """
        if self.predictor is None:
            raise RuntimeError("no model loaded")
        return list(self.predictor.predict(list(pixels), heatmaps="none"))


def decode_pool(
    *, workers: int = 1, timeout_s: float | None = None
) -> DecodePool[DecodeTask, LoadedImage | Exception]:
    """Worker processes for `BatchProcessor(decode_pool=...)`: a decoder crash (a signal,
    the OOM killer) or a file past `timeout_s` fails that file only (`models.decode_pool`).
    Close it when done."""
    from models.decode_pool import DecodePool
    from models.image_pipeline import load_task

    return DecodePool(load_task, workers=workers, on_error=decode_failure, timeout_s=timeout_s)
