"""Report inputs and label files: streaming readers and writers.

Readers yield `(report_id, text)` pairs one at a time, so inputs of any size
are read in constant memory. A row whose text is missing or not text is passed
on as is (None, bytes, a number) for the labeler to reject with a precise error.
"""

from __future__ import annotations

import codecs
import csv
import json
import logging
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Literal

from labeler.errors import InputError, NotTextError
from labeler.schema import ATTRIBUTE_KEYS, ReportLabels

__all__ = [
    "CHEXPERT_CODES",
    "InputFormat",
    "NO_FINDING",
    "InputError",
    "count_reports",
    "detect_input_format",
    "iter_label_results",
    "iter_reports",
    "read_gold",
    "read_predictions",
    "write_csv_header",
    "write_csv_row",
    "write_jsonl",
]

InputFormat = Literal["csv", "jsonl", "folder"]
NO_FINDING = "No Finding"
#: CheXpert convention for label files: 1 positive, 0 negative, -1 uncertain, blank absent.
CHEXPERT_CODES: dict[str, str] = {"positive": "1", "negative": "0", "uncertain": "-1", "absent": ""}

# Reports can be long; the csv module's default field limit (128 KiB) is not a
# limit we want to impose (LabelerConfig.max_chars is).
csv.field_size_limit(2**31 - 1)


def detect_input_format(path: Path) -> InputFormat:
    """`folder` for a directory, `jsonl` for .jsonl/.ndjson/.json, else `csv`.

    Raises:
        InputError: `path` does not exist.
    """
    if path.is_dir():
        return "folder"
    if not path.is_file():
        raise InputError(f"input {str(path)!r} does not exist")
    if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    return "csv"


log = logging.getLogger(__name__)

# Hospital exports that are not UTF-8 are nearly always Windows-1252 (a superset of
# Latin-1). Read as UTF-8 with replacement they would lose "×", "°" and "µ" to U+FFFD,
# and the sizes written with them.
LEGACY_ENCODING = "cp1252"


def text_encoding(path: Path) -> str:
    """ "utf-8-sig" when the file at `path` decodes as UTF-8, else Windows-1252 (logged)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        log.warning("%s is not UTF-8 (byte %d); read as Windows-1252", path, exc.start)
        return LEGACY_ENCODING
    return "utf-8-sig"


def _decoded(data: bytes, name: object) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        log.warning("%s is not UTF-8 (byte %d); read as Windows-1252", name, exc.start)
        return data.decode(LEGACY_ENCODING, errors="replace")


# What a CSV column name looks like: short, a few words, no sentence punctuation. A
# header field that does not is text (a report given as a CSV) and is never echoed.
_COLUMN_NAME = re.compile(r"(?![^:]*:\s)(?![^.]*\.\s)\s*\S+(?:\s+\S+){0,3}\s*")


def _looks_like_column(name: str) -> bool:
    return not name.strip() or (len(name) <= 64 and _COLUMN_NAME.fullmatch(name) is not None)


def iter_reports(
    path: Path,
    *,
    fmt: InputFormat | None = None,
    id_column: str = "id",
    text_column: str = "report",
) -> Iterator[tuple[str, Any]]:
    """Stream (report id, text) pairs from a CSV, a JSONL file or a folder of .txt files.

    Args:
        path: the input.
        fmt: input format; detected from `path` when None.
        id_column: CSV column / JSON key of the report id.
        text_column: CSV column / JSON key of the report text.

    Yields:
        (id, text) pairs in file order; text is whatever the row holds (None for a
        missing field, a `NotTextError` for a JSONL line that is not JSON), for the
        labeler to reject. A file that is not UTF-8 is read as Windows-1252
        (`text_encoding`), with a warning logged.

    Raises:
        InputError: the file is missing, or a CSV lacks the id/text columns.
    """
    fmt = fmt or detect_input_format(path)
    if fmt == "folder":
        yield from _iter_folder(path)
    elif fmt == "jsonl":
        yield from _iter_jsonl(path, id_column, text_column)
    else:
        yield from _iter_csv(path, id_column, text_column)


def _iter_csv(path: Path, id_column: str, text_column: str) -> Iterator[tuple[str, Any]]:
    with path.open(newline="", encoding=text_encoding(path), errors="replace") as f:
        # strict: a quote left open swallowed the rows after it into one report, silently
        reader = csv.DictReader(f, strict=True)
        try:
            columns = reader.fieldnames or []
        except csv.Error as exc:
            raise _malformed(path, reader.reader.line_num, exc) from None
        missing = [c for c in (id_column, text_column) if c not in columns]
        if missing:
            # A header field that is not a column name is text (a report given as a
            # CSV): never echo it, it may name the patient.
            if not all(_looks_like_column(c) for c in columns):
                found = f"{len(columns)} fields, and the first line is not a CSV header"
            else:
                found = f"columns are {', '.join(map(repr, columns)) or '(none)'}"
            raise InputError(
                f"{path}: no column {', '.join(map(repr, missing))}; {found}. "
                "Choose them with --id-column / --text-column"
            )
        try:
            for n, row in enumerate(reader, start=1):
                yield (row.get(id_column) or f"row{n}"), row.get(text_column)
        except csv.Error as exc:
            raise _malformed(path, reader.reader.line_num, exc) from None


def _malformed(path: Path, line: int, exc: csv.Error) -> InputError:
    return InputError(
        f"{path}: line {line}: not valid CSV ({exc}); a quoted field must end with a quote "
        'before the next comma, and a quote inside it is written twice ("")'
    )


def _iter_jsonl(path: Path, id_column: str, text_column: str) -> Iterator[tuple[str, Any]]:
    # utf-8-sig: Windows tools start a file with a byte-order mark, which is not JSON
    with path.open(encoding=text_encoding(path), errors="replace") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                # Passed on as a non-text report so the run records the error.
                yield f"line{n}", NotTextError(f"line {n} is not valid JSON: {exc.msg}")
                continue
            if not isinstance(obj, dict):
                yield f"line{n}", NotTextError(f"line {n} is not a JSON object")
                continue
            rid = obj.get(id_column)
            rid = str(rid) if rid is not None else f"line{n}"
            if text_column not in obj:
                keys = ", ".join(map(repr, obj)) or "none"
                yield (
                    rid,
                    NotTextError(
                        f"line {n} has no key {text_column!r} (keys: {keys}); "
                        "choose the text key with --text-column"
                    ),
                )
                continue
            yield rid, obj[text_column]


def _text_files(path: Path) -> list[Path]:
    """The .txt files under `path`, any case of the suffix (exports from Windows: .TXT)."""
    return sorted(p for p in path.rglob("*") if p.suffix.lower() == ".txt" and p.is_file())


def _iter_folder(path: Path) -> Iterator[tuple[str, Any]]:
    for file in _text_files(path):
        rid = file.relative_to(path).with_suffix("").as_posix()
        yield rid, _decoded(file.read_bytes(), file)


def count_reports(path: Path, fmt: InputFormat | None = None) -> int | None:
    """Number of reports in `path` (for a progress bar), or None when unknown."""
    fmt = fmt or detect_input_format(path)
    if fmt == "folder":
        return len(_text_files(path))
    with path.open(newline="", encoding="utf-8-sig", errors="replace") as f:
        if fmt == "jsonl":
            return sum(1 for line in f if line.strip())
        reader = csv.reader(f, strict=True)
        try:
            return max(sum(1 for _ in reader) - 1, 0)
        except csv.Error as exc:
            raise _malformed(path, reader.line_num, exc) from None


def write_jsonl(
    result: ReportLabels, out: IO[str], explanation: dict[str, Any] | None = None
) -> None:
    """Write one result as a JSON Lines object, with its `explanation` when given."""
    obj = result.to_dict()
    if explanation is not None:
        obj["explanation"] = explanation
    # a result is a tree of fresh dicts and lists: no cycle for the encoder to look for
    # (its check records every container; 8% of the encoding of `cxr label --findings`)
    out.write(json.dumps(obj, ensure_ascii=False, check_circular=False))
    out.write("\n")


def _column(spec: str) -> tuple[str, str | None]:
    """A label set's CSV column: "Header={field}" (field id, text or error) or a label name."""
    header, sep, field = spec.partition("={")
    return (header, field.rstrip("}")) if sep else (spec, None)


def _label_columns(columns: Sequence[str]) -> list[str]:
    return [c for c in columns if _column(c)[1] is None and c != NO_FINDING]


def write_csv_header(writer: Any, columns: Sequence[str], *, attributes: bool = False) -> None:
    """Header of a label CSV, in the label set's column order (`LabelSet.csv_columns`).

    With `attributes`, one column per label and attribute follows, named
    "<label> <attribute>" ("Effusion laterality"), after the label set's
    columns so that readers of the plain layout still work.
    """
    labels = _label_columns(columns)
    extra = [f"{lab} {key}" for lab in labels for key in ATTRIBUTE_KEYS] if attributes else []
    writer.writerow([*(_column(c)[0] for c in columns), *extra])


# A spreadsheet runs a cell that starts with one of these as a formula (OWASP, "CSV
# Injection"): an id, a file name or a report from an export may, =HYPERLINK(...) included.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(value: Any) -> Any:
    """`value` as a CSV cell that no spreadsheet evaluates.

    A string starting with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading
    `'`, so it is shown as the text it is (the OWASP remedy); anything else, numbers
    included, is returned unchanged.
    """
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def write_csv_row(
    writer: Any,
    result: ReportLabels,
    columns: Sequence[str],
    text: str | None = None,
    *,
    attributes: bool = False,
) -> None:
    """One CheXpert-style row: 1 / 0 / -1 / blank per label, No Finding 1 or blank.

    Args:
        writer: a csv writer.
        result: the report's labels.
        columns: the label set's `csv_columns`.
        text: the report text, for a "Reports={text}" column (CheXpert's first column).
        attributes: also the report's findings (locations joined by "; ",
            blank where a label has no value).
    """
    fields = {"id": result.id, "text": text if isinstance(text, str) else "", "error": result.error}
    row = []
    for spec in columns:
        header, field = _column(spec)
        if field is not None:  # text from the input: never a formula (label codes are)
            row.append(spreadsheet_cell(fields.get(field) or ""))
        elif header == NO_FINDING:
            row.append("1" if result.no_finding and result.error is None else "")
        else:
            row.append(CHEXPERT_CODES[result.labels.get(header, "absent")])
    if attributes:
        row.extend(
            _attribute_cell(result.findings.get(lab, {}).get(key))
            for lab in _label_columns(columns)
            for key in ATTRIBUTE_KEYS
        )
    writer.writerow(row)


def _attribute_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return str(value)


# --- label files for evaluation ------------------------------------------------------

_CODE_TO_STATUS = {
    "1": "positive",
    "1.0": "positive",
    "0": "negative",
    "0.0": "negative",
    "-1": "uncertain",
    "-1.0": "uncertain",
    "": "absent",
}


def _status(value: Any, where: str) -> str:
    if isinstance(value, str) and value in ("positive", "negative", "uncertain", "absent"):
        return value
    text = "" if value is None else str(value).strip()
    try:
        return _CODE_TO_STATUS[text]
    except KeyError:
        raise InputError(f"{where}: label value {value!r} is not one of 1, 0, -1, blank") from None


def read_predictions(
    path: Path, *, id_column: str = "id", labels: Sequence[str]
) -> dict[str, dict[str, str]]:
    """Read predicted statuses from our JSONL output or a CheXpert-style CSV.

    Args:
        path: `cxr label` JSONL, or a CSV with an id column and label columns (1/0/-1/blank).
        id_column: the CSV id column.
        labels: label columns to read (missing ones count as absent); `No Finding`
            is read as well when present.

    Returns:
        {report id: {label: status}}.

    Raises:
        InputError: unreadable file, missing id column or a bad value.
    """
    out: dict[str, dict[str, str]] = {}
    if detect_input_format(path) == "jsonl":
        seen: set[str] = set()
        for n, obj in iter_label_results(path):
            rid = str(obj["id"])
            _check_once(rid, seen, path, n)
            if obj.get("error"):
                continue  # its labelling failed: no prediction, counted as missing
            try:
                row = {lab: obj["labels"].get(lab, "absent") for lab in labels}
            except (KeyError, TypeError, AttributeError):
                raise InputError(
                    f"{path}: line {n} is not a `cxr label` JSON object "
                    '({"id": ..., "labels": {...}})'
                ) from None
            row[NO_FINDING] = "positive" if obj.get("no_finding") else "absent"
            out[rid] = row
        return out
    return _read_label_csv(path, id_column=id_column, labels=labels)


def _check_once(rid: str, seen: set[str], path: Path, line: int) -> None:
    """Refuse a report id met before: the last one would silently win the scoring."""
    if rid in seen:
        raise InputError(
            f"{path}: line {line} repeats the id of an earlier line; give each report once"
        )
    seen.add(rid)


def iter_label_results(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each line of `cxr label` JSONL output; blank lines skipped.

    The one reader of that output: scoring, attribute scoring and the disagreement report
    each take their part of every object.

    Raises:
        InputError: an unreadable file, or a line that is not a JSON object with an "id".
    """
    try:
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    obj = None
                if not isinstance(obj, dict) or "id" not in obj:
                    raise InputError(f"{path}: line {n} is not a `cxr label` JSON object")
                yield n, obj
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None


def read_gold(
    path: Path, *, id_column: str = "id", labels: Sequence[str]
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Read a gold CSV: an id column and one column per label (1/0, or 1/0/-1/blank).

    Returns:
        ({report id: {label: status}}, the labels among `labels` that the file has).

    Raises:
        InputError: unreadable file, missing id column, no label column, or a bad value.
    """
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            columns = csv.DictReader(f).fieldnames or []
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    present = [lab for lab in labels if lab in columns]
    if not present:
        raise InputError(
            f"{path}: none of the label columns {', '.join(labels)} is present; "
            f"columns are {', '.join(columns)}"
        )
    return _read_label_csv(path, id_column=id_column, labels=present), present


def _read_label_csv(
    path: Path, *, id_column: str, labels: Sequence[str]
) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            columns = reader.fieldnames or []
            if id_column not in columns:
                raise InputError(
                    f"{path}: no id column {id_column!r}; columns are {', '.join(columns)}. "
                    "Choose it with --id-column"
                )
            wanted = [lab for lab in (*labels, NO_FINDING) if lab in columns]
            seen: set[str] = set()
            for n, row in enumerate(reader, start=2):
                _check_once(row[id_column], seen, path, n)
                out[row[id_column]] = {
                    lab: _status(row[lab], f"{path}: line {n}, column {lab!r}") for lab in wanted
                }
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    return out


def open_output(path: str | None) -> IO[str]:
    """`path` opened for writing (UTF-8, newline-safe for CSV), or stdout for None / "-"."""
    if path is None or path == "-":
        return sys.stdout
    return Path(path).open("w", encoding="utf-8", newline="")
