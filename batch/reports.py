"""The reports CSV: report texts indexed by accession number and StudyInstanceUID."""

from __future__ import annotations

import codecs
import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from batch.interfaces import BatchInputError

__all__ = ["ReportIndex", "load_reports_csv"]


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


def _decode(data: bytes, name: str) -> str:
    """The CSV's text; a byte that is not UTF-8 is named with its offset in the file."""
    start = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[start:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = start + exc.start
        raise BatchInputError(
            f"{name}: not a UTF-8 CSV file: byte 0x{data[offset]:02x} at offset {offset} "
            f"({exc.reason}); save it as UTF-8"
        ) from None


def load_reports_csv(path: Path, *, name: str | None = None) -> ReportIndex:
    """Read a reports CSV keyed by accession number and/or StudyInstanceUID.

    Recognized headers (case, spaces and underscores ignored): `AccessionNumber`
    (or `accession`), `StudyInstanceUID`, and the text as `report`/`text`, or
    `findings` + `impression` (joined as "FINDINGS: ...\\nIMPRESSION: ...").

    Args:
        path: the CSV file.
        name: how messages name it (default: `path`; the service gives the client's name,
            never a server storage path).

    Raises:
        BatchInputError: unreadable file, not UTF-8 (with the byte offset), no key
            column or no text column (with the columns found), or two different reports
            under one key (with their lines; identical rows are one report).
    """
    csv.field_size_limit(16 * 2**20)  # long reports exceed the 128 KiB default
    index = ReportIndex()
    accession_lines: dict[str, int] = {}  # the CSV line of each key's first row
    study_lines: dict[str, int] = {}
    label = str(path) if name is None else name
    try:
        text_data = _decode(Path(path).read_bytes(), label)
        with io.StringIO(text_data, newline="") as f:
            # strict: a quote left open would swallow the rows after it into one report
            reader = csv.DictReader(f, strict=True)
            headers = {_norm(h): h for h in (reader.fieldnames or [])}
            acc = next((headers[c] for c in _ACCESSION_COLS if c in headers), None)
            study = next((headers[c] for c in _STUDY_COLS if c in headers), None)
            text = next((headers[c] for c in _TEXT_COLS if c in headers), None)
            findings, impression = headers.get("findings"), headers.get("impression")
            if acc is None and study is None:
                raise BatchInputError(
                    f"{label}: no AccessionNumber or StudyInstanceUID column "
                    f"(found: {', '.join(reader.fieldnames or []) or 'no header'})"
                )
            if text is None and findings is None and impression is None:
                raise BatchInputError(
                    f"{label}: no report text column; expected 'report' (or 'text'), "
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
                for column, table, lines in (
                    (acc, index.by_accession, accession_lines),
                    (study, index.by_study, study_lines),
                ):
                    key = (row.get(column) or "").strip() if column is not None else ""
                    if not key:
                        continue
                    if key in table and table[key] != body:
                        # The last row used to win, silently: a preliminary report and its
                        # final one, or two studies under one number, are the user's call.
                        raise BatchInputError(
                            f"{label}: two different reports for {column} {key[:64]!r} (lines "
                            f"{lines[key]} and {reader.line_num}); keep one row per study, "
                            "with an addendum joined to its report"
                        )
                    table[key] = body
                    lines.setdefault(key, reader.line_num)
    except OSError as exc:
        raise BatchInputError(f"{label}: cannot read reports CSV ({exc.strerror or exc})") from None
    except csv.Error as exc:
        raise BatchInputError(
            f"{label}: not a readable CSV file (line {reader.reader.line_num}: {exc}); a quoted "
            "field must end with a quote before the next comma"
        ) from None
    return index
