"""batch.results: the CSV form of a result line runs no formula in a spreadsheet (OWASP CSV
injection) and keeps numbers numeric."""

from __future__ import annotations

import csv
import io

from batch.results import CSV_COLUMNS, csv_header, csv_row


def test_csv_row_escapes_every_string_column_and_keeps_probabilities_numeric() -> None:
    labels = ["Effusion", "Pneumothorax"]
    line = {
        "path": "=1+2.dcm",
        "state": "done",
        "kind": "image",
        "study_instance_uid": "1.2.3",
        "accession_number": "@A1",
        "prediction": {"probabilities": {"Effusion": 0.75, "Pneumothorax": 0.0}, "positive": []},
        "report": {"source": "csv", "positive": [], "labels": {"Effusion": "-1"}},
        "reason": "-not an error",
    }
    row = csv_row(line, labels)
    header = csv_header(labels)
    assert header[: len(CSV_COLUMNS)] == list(CSV_COLUMNS) and len(row) == len(header)
    cells = dict(zip(header, row, strict=True))
    assert cells["path"] == "'=1+2.dcm" and cells["accession_number"] == "'@A1"
    assert cells["error"] == "'-not an error" and cells["report_Effusion"] == "'-1"
    assert cells["prob_Effusion"] == 0.75 and cells["prob_Pneumothorax"] == 0.0
    written = io.StringIO()
    csv.writer(written).writerow(row)
    assert written.getvalue().split(",")[0] == "'=1+2.dcm"
