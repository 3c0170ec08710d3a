"""batch.reports: the reports CSV of a batch job, read strictly."""

from __future__ import annotations

from pathlib import Path

import pytest

from batch.interfaces import BatchInputError
from batch.reports import load_reports_csv


def test_reports_csv_with_an_unclosed_quote_is_refused_not_merged(tmp_path: Path) -> None:
    src = tmp_path / "reports.csv"
    src.write_text('AccessionNumber,Report\nA1,"Small effusion.\nA2,"No pneumothorax."\n')
    with pytest.raises(BatchInputError, match="line 3"):
        load_reports_csv(src)


def test_reports_csv_keeps_a_quoted_report_over_several_lines(tmp_path: Path) -> None:
    src = tmp_path / "reports.csv"
    src.write_text('AccessionNumber,Report\nA1,"Small\neffusion."\nA2,He said "no" effusion\n')
    index = load_reports_csv(src)
    assert index.by_accession == {"A1": "Small\neffusion.", "A2": 'He said "no" effusion'}


def test_reports_csv_with_two_reports_under_one_key_is_refused(tmp_path: Path) -> None:
    # The last row won, silently: which report labelled the study was an accident of order.
    src = tmp_path / "reports.csv"
    src.write_text(
        "AccessionNumber,StudyInstanceUID,Report\n"
        "A1,1.2.3,No effusion.\nA2,1.2.4,Small effusion.\nA1,1.2.5,Large effusion.\n"
    )
    with pytest.raises(BatchInputError, match=r"AccessionNumber 'A1' \(lines 2 and 4\)"):
        load_reports_csv(src)
    src.write_text("AccessionNumber,Report\nA1,No effusion.\nA1,No effusion.\nA2,Small effusion.\n")
    assert load_reports_csv(src).by_accession == {"A1": "No effusion.", "A2": "Small effusion."}
