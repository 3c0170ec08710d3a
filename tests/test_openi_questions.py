"""The clinicians' question set (benchmarks/data/openi_questions.v1.csv) and its scorer.

The set is data, read by people: these tests check its shape and that no row copies the
report it asks about (the reports' licence), and the scorer of `ask_questions.py --openi`
on answer rows built by hand. They do not check any answer of the engine.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from script_loader import load_script

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "benchmarks" / "data" / "openi_questions.v1.csv"


bench = load_script("benchmarks/ask_questions.py")


_STOP = {"a", "an", "the", "in", "on", "of", "at", "is", "are", "there", "and", "or", "to"}


def _content_words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP]


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    loaded: list[dict[str, str]] = bench.load_openi_questions(QUESTIONS)
    return loaded


@pytest.mark.issue(40)
def test_openi_questions_shape(rows: list[dict[str, str]]) -> None:
    assert [r["id"] for r in rows] == [f"q{i:04d}" for i in range(1, len(rows) + 1)]
    assert len(rows) >= 330
    assert len({r["report_uid"] for r in rows}) >= 110
    assert all(r["question"].strip() and r["answer"].strip() and r["topic"].strip() for r in rows)
    assert {r["type"] for r in rows} == set(bench.OPENI_TYPES)
    assert all(r["answer"] == "unsupported" for r in rows if r["type"] == "unsupported")
    per_report = [(r["report_uid"], r["question"]) for r in rows]
    assert len(per_report) == len(set(per_report)), "a question asked twice of one report"


@pytest.mark.issue(40)
def test_openi_questions_copy_no_report_text(rows: list[dict[str, str]], shared_data: Path) -> None:
    reports = shared_data / "openi" / "indiana_reports_dev.csv"
    if not reports.is_file():
        pytest.skip(f"{reports} not found")
    words = {
        r["uid"]: _content_words(f"{r['findings']} {r['impression']}")
        for r in csv.DictReader(reports.open(encoding="utf-8"))
    }
    n = 5  # five content words in a row: a sentence fragment, not a term like "right upper lobe"
    for r in rows:
        text = words[r["report_uid"]]
        grams = {tuple(text[i : i + n]) for i in range(len(text) - n + 1)}
        for field in ("question", "note"):
            mine = _content_words(r[field])
            copied = [
                mine[i : i + n] for i in range(len(mine) - n + 1) if tuple(mine[i : i + n]) in grams
            ]
            assert not copied, f"{r['id']} {field} copies its report: {copied[0]}"


@pytest.mark.parametrize(
    ("expected", "accept", "got", "right"),
    [
        ("yes", "", {"type": "presence", "answer": "Yes"}, True),
        ("no", "unknown", {"type": "presence", "answer": "unknown"}, True),
        ("possible", "", {"type": "presence", "answer": "uncertain"}, True),
        ("no", "", {"type": "presence", "answer": "uncertain"}, False),
        ("1.2 cm", "", {"type": "size", "answer": 12.0, "unit": "mm"}, True),
        ("1.2 cm", "", {"type": "size", "answer": 13.0, "unit": "mm"}, False),
        ("9 mm", "", {"type": "size", "answer": "0.9 cm"}, True),
        ("2", "", {"type": "count", "answer": 2}, True),
        ("2", "", {"type": "count", "answer": "multiple"}, False),
        ("unchanged", "", {"type": "change", "answer": "stable"}, True),
        ("left", "", {"type": "position", "answer": ["left", "left lower lobe"]}, True),
        ("left", "", {"type": "position", "answer": ["left", "right"]}, False),
        ("bilateral", "", {"type": "position", "answer": ["left", "right"]}, True),
        ("left lung base", "", {"type": "position", "answer": ["left", "basilar"]}, True),
        ("right upper lobe", "", {"type": "position", "answer": ["right"]}, False),
        ("right upper lobe", "", {"type": "position", "answer": ["left upper lobe"]}, False),
        ("T9 and T12", "", {"type": "position", "answer": ["T9", "T12"]}, True),
        ("T9 and T12", "", {"type": "position", "answer": ["T9"]}, False),
        ("unsupported", "", {"type": "unsupported", "answer": None}, True),
        ("unsupported", "", {"type": "presence", "answer": "no"}, False),
        ("no", "", {"type": "unsupported", "answer": None}, False),
    ],
)
def test_openi_right(expected: str, accept: str, got: dict[str, object], right: bool) -> None:
    assert bench.openi_right(expected, accept, got) is right
