"""Batch sinks: a JSONL file, an NIH-style training set, a tally (the service's database sink
lives in `app.jobs`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from batch.interfaces import Outcome, Sink, SourceItem
from batch.results import dump_line, outcome_line
from batch.training_set import DatasetImage, DatasetWriter

__all__ = ["DatasetSink", "JsonlSink", "TallySink", "in_flight_path", "training_labels"]


def in_flight_path(out: Path) -> Path:
    """Where `JsonlSink` counts the attempts on the items of the chunk being processed."""
    return out.with_name(out.name + ".inflight.json")


class JsonlSink(Sink):
    """Result lines appended to a JSONL file, flushed per line (a kill loses at most the line
    being written, which `read_result_lines` drops on resume).

    Beside it, OUT.inflight.json counts attempts on the items of the chunk in progress
    (removed when the run ends cleanly): see `engine.run_resumed`.

    Args:
        path: the output file (its folder is created).
        previous: with `resume`, the complete lines of the earlier run, kept first.
        resume: keep `previous` and append; otherwise the file is overwritten.
    """

    def __init__(
        self, path: Path, *, previous: Sequence[dict[str, Any]] = (), resume: bool = False
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._in_flight_path = in_flight_path(self.path)
        self.attempts: dict[str, int] = {}
        if resume:  # keep the complete lines only (the torn one goes), then append
            tmp = self.path.with_name(self.path.name + ".tmp")
            with tmp.open("w", encoding="utf-8") as f:
                f.writelines(dump_line(line) for line in previous)
            tmp.replace(self.path)
            self.attempts = self._read_attempts()
            for line in previous:
                self.attempts.pop(str(line["path"]), None)
        self._save_attempts()
        self._file: IO[str] | None = self.path.open("a" if resume else "w", encoding="utf-8")

    def _read_attempts(self) -> dict[str, int]:
        try:
            data = json.loads(self._in_flight_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # none, or torn by the crash: nothing to count
        if not isinstance(data, dict):
            return {}
        return {str(k): int(v) for k, v in data.items() if isinstance(v, int)}

    def _save_attempts(self) -> None:
        if not self.attempts:
            self._in_flight_path.unlink(missing_ok=True)
            return
        tmp = self._in_flight_path.with_name(self._in_flight_path.name + ".tmp")
        tmp.write_text(json.dumps(self.attempts), encoding="utf-8")
        tmp.replace(self._in_flight_path)

    def begin(self, items: Sequence[SourceItem]) -> None:
        """Count an attempt on each item about to be processed."""
        for item in items:
            self.attempts[item.key] = self.attempts.get(item.key, 0) + 1
        self._save_attempts()

    def forget_in_flight(self) -> None:
        """The run was interrupted (Ctrl-C), not killed by a file: the chunk is not to blame."""
        self.attempts.clear()
        self._save_attempts()

    def write(self, outcomes: Sequence[Outcome]) -> None:
        """Append one line per outcome."""
        if self._file is None:
            raise ValueError(f"{self.path}: write after close")
        for outcome in outcomes:
            self._file.write(dump_line(outcome_line(outcome)))
            self._file.flush()
        for outcome in outcomes:
            self.attempts.pop(outcome.key, None)
        self._save_attempts()

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None


def training_labels(outcome: Outcome) -> dict[str, str] | None:
    """The mined report labels a done image enters the training set with (None: it has
    none and stays out)."""
    report = outcome.result.get("report")
    if outcome.state != "done" or not report or "labels" not in report:
        return None
    return dict(report["labels"])


class DatasetSink(Sink):
    """Images with mined report labels written as a training set (PNG + Data_Entry.csv).

    Adds `dataset_image` (the PNG's name) to the outcome's result, so it must come before
    the sinks that write results.
    """

    def __init__(self, writer: DatasetWriter) -> None:
        self.writer = writer
        self.entry: Path | None = None

    def write(self, outcomes: Sequence[Outcome]) -> None:
        """Add each done image that has report labels (the chunk's PNGs written at once)."""
        chosen: list[Outcome] = []
        images: list[DatasetImage] = []
        for outcome in outcomes:
            labels = training_labels(outcome)
            image = outcome.image
            if labels is None or image is None:
                continue  # no mined labels, nothing to train on
            meta = image.meta
            patient = (
                meta.patient_id or meta.accession_number or meta.study_instance_uid or outcome.key
            )
            if image.display is None:
                raise RuntimeError("the batch processor kept no display copy for the dataset")
            chosen.append(outcome)
            images.append(
                DatasetImage(
                    image.display,
                    labels,
                    str(patient),
                    getattr(meta, "view_position", None),
                )
            )
        for outcome, name in zip(chosen, self.writer.add_many(images), strict=True):
            outcome.result["dataset_image"] = name

    def close(self) -> None:
        """Write Data_Entry.csv sorted."""
        if self.entry is None:
            self.entry = self.writer.close()


class TallySink(Sink):
    """Counts by state, images with a report, duplicates skipped, and the failures (for
    summaries, rejects)."""

    def __init__(self) -> None:
        self.counts = {"done": 0, "skipped": 0, "failed": 0}
        self.images = 0
        self.duplicates = 0  # skipped as another copy of an image (counted in skipped too)
        self.with_report = 0
        self.rejects: list[dict[str, Any]] = []

    def add_line(self, line: dict[str, Any]) -> None:
        """Count one result line (also used for the lines of an earlier run)."""
        self.counts[line["state"]] = self.counts.get(line["state"], 0) + 1
        if line.get("kind") in ("image", "bitmap") and line["state"] == "done":
            self.images += 1
            self.with_report += bool(line.get("report"))
        if line["state"] == "skipped" and line.get("duplicate_of"):
            self.duplicates += 1
        if line["state"] == "failed":
            self.rejects.append({"path": line["path"], "error": line.get("error")})

    def write(self, outcomes: Sequence[Outcome]) -> None:
        """Count the chunk."""
        for outcome in outcomes:
            self.add_line(outcome_line(outcome))

    @property
    def total(self) -> int:
        """Items counted."""
        return sum(self.counts.values())
