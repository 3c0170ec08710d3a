"""The result line: one JSON object per item, written by `cxr batch` to its JSONL file and
served by GET /v1/batches/{id}/results; and reading it back for `--resume`.

Also its flat CSV row (GET /v1/batches/{id}/results?format=csv), in which no cell is one a
spreadsheet would run as a formula."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from batch.interfaces import BatchInputError, Outcome
from labeler.files import spreadsheet_cell

__all__ = [
    "CSV_COLUMNS",
    "csv_header",
    "csv_row",
    "dump_line",
    "outcome_line",
    "read_result_lines",
    "result_line",
]


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


def outcome_line(outcome: Outcome) -> dict[str, Any]:
    """The result line of an outcome."""
    return result_line(outcome.key, outcome.state, outcome.result, outcome.error)


def dump_line(line: dict[str, Any]) -> str:
    """A result line as compact JSON with its newline."""
    return json.dumps(line, separators=(",", ":")) + "\n"


CSV_COLUMNS = (
    "path",
    "state",
    "kind",
    "study_instance_uid",
    "series_instance_uid",
    "sop_instance_uid",
    "accession_number",
    "model_positive",
    "report_source",
    "report_positive",
    "report_no_finding",
    "error",
)
"""The fixed columns of a results CSV; `prob_<label>` and `report_<label>` follow."""


def csv_header(labels: Sequence[str]) -> list[str]:
    """The header of a results CSV: `CSV_COLUMNS`, then `prob_<label>`, `report_<label>`."""
    return [*CSV_COLUMNS, *(f"prob_{x}" for x in labels), *(f"report_{x}" for x in labels)]


def csv_row(line: Mapping[str, Any], labels: Sequence[str]) -> list[Any]:
    """A result line flattened to the cells of `csv_header(labels)`, none of them a
    formula to a spreadsheet (`labeler.files.spreadsheet_cell`).

    Args:
        line: a result line (see `result_line`).
        labels: the label names, in column order.
    """
    prediction = line.get("prediction") or {}
    report = line.get("report") or {}
    probs = prediction.get("probabilities") or {}
    report_labels = report.get("labels") or {}
    cells = [
        line.get("path"),
        line.get("state"),
        line.get("kind"),
        line.get("study_instance_uid"),
        line.get("series_instance_uid"),
        line.get("sop_instance_uid"),
        line.get("accession_number"),
        "|".join(prediction.get("positive") or []),
        report.get("source"),
        "|".join(report.get("positive") or []),
        report.get("no_finding"),
        line.get("error") or report.get("error") or line.get("reason"),
        *[probs.get(label) for label in labels],
        *[report_labels.get(label) for label in labels],
    ]
    return [spreadsheet_cell(cell) for cell in cells]
