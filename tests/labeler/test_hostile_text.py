"""Hostile and sloppy report text (issue 18 items 1, 8 and 15).

- Bounded work: affix runs, deep nesting, long lists and run-on sentences cost time
  and memory linear in the text (spaCy's tokenizer and the negation scopes were
  quadratic: ")" * 20000 took 63 s, a 460 KB list 22 GB).
- Invisible and look-alike characters read as what a radiologist sees: "No" with a
  variation selector, a bidi isolate or a Cyrillic "о" still negates; a soft hyphen
  or zero-width joiner inside a word keeps the word.
- One report that breaks a third-party component fails alone; a 1 MB report is
  labelled, not the end of the run.

The CPU bounds here are generous (3 s per 10 KB against the measured worst of about
0.5 s): they catch a superlinear class, they are not a benchmark. The benchmark with
the issue's bound (1 s and 300 MB per 10 KB) is benchmarks/fuzz_text.py, run below
on a small budget in a subprocess of its own, so that its peak memory is its own.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hostile_text import CLASSES, hostile_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spacy.language import Language

from labeler.config import LabelerConfig
from labeler.normalize import clean_text, parse_text
from labeler.pipeline import label_reports
from labeler.schema import ReportLabels

ROOT = Path(__file__).resolve().parents[2]
_SECONDS_PER_10K = 3.0


def _timed(label: Callable[[str], ReportLabels], text: str) -> tuple[ReportLabels, float]:
    start = time.process_time()
    result = label(text)
    return result, time.process_time() - start


def _assert_offsets(text: str, result: ReportLabels) -> None:
    for m in result.mentions:
        assert text[m.start : m.end] == m.text
        assert m.sentence in text


def _bound(text: str) -> float:
    return _SECONDS_PER_10K * max(1.0, len(text) / 10_000)


# --- item 1: bounded work ---------------------------------------------------------------


@pytest.mark.issue(18)
@pytest.mark.parametrize(
    "text",
    [
        pytest.param("FINDINGS: effusion" + ")" * 20_000, id="affix-run-20k"),
        pytest.param("FINDINGS: " + "(" * 30_000 + "effusion" + ")" * 30_000, id="nested-60k"),
        pytest.param("FINDINGS: " + "( " * 15_000 + "effusion" + " )" * 15_000, id="spaced-60k"),
        pytest.param("FINDINGS: " + "effusion," * 11_000, id="no-space-list-99k"),
        pytest.param("FINDINGS: " + " ".join(["effusion and edema"] * 3_000), id="run-on-57k"),
    ],
)
def test_pathological_text_costs_linear_time(
    label: Callable[[str], ReportLabels], text: str
) -> None:
    result, seconds = _timed(label, text)
    assert seconds < _bound(text)
    assert result.labels["Effusion"] == "positive"
    _assert_offsets(text, result)


@pytest.mark.issue(18)
def test_a_100_kb_list_of_findings_is_labelled_in_bounded_time(nlp: Language) -> None:
    # the issue's 460 KB list peaked at 22 GB (benchmarks/fuzz_text.py measures that size);
    # 100 KB is the API's largest report. The sentence cache is off: nothing is cheap twice.
    config = LabelerConfig(cache_size=0)
    rng = random.Random(3)
    words = ["effusion", "atelectasis", "no pneumothorax", "possible edema", "mass", "nodule"]
    text = "FINDINGS: " + ", ".join(rng.choice(words) for _ in range(10_000))
    text = text[:100_000]
    start = time.process_time()
    [result] = label_reports([("big", text)], nlp=nlp, config=config, on_error="raise")
    assert time.process_time() - start < _bound(text)
    assert result.error is None
    assert result.labels["Effusion"] == "positive"
    # every mention found; the first hundred kept as evidence (LabelerConfig.max_mentions)
    assert len(result.mentions) == config.max_mentions
    assert len(result.mentions) + result.mentions_omitted > 8_000
    assert max(len(m.sentence) for m in result.mentions) <= config.max_sentence_chars


@pytest.mark.issue(18)
@settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(rng=st.randoms(use_true_random=False), size=st.integers(min_value=50, max_value=10_000))
def test_hostile_text_fuzz_is_bounded_and_keeps_offsets(
    label: Callable[[str], ReportLabels], rng: random.Random, size: int
) -> None:
    kind, text = hostile_text(rng, size)
    result, seconds = _timed(label, text)
    assert seconds < _bound(text), kind
    assert result.error is None, kind
    _assert_offsets(text, result)


def test_every_hostile_class_is_drawn() -> None:
    rng = random.Random(1)
    kinds = {hostile_text(rng, 200)[0] for _ in range(200)}
    assert kinds == {*CLASSES, "mix"}


@pytest.mark.issue(18)
@pytest.mark.slow
def test_fuzz_benchmark_stays_within_the_memory_bound() -> None:
    # its own process: ru_maxrss is a high-water mark for the whole process
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "fuzz_text.py"),
            "--examples",
            "20",
            "--seed",
            "11",
            "--max-seconds",
            str(_SECONDS_PER_10K),
            "--max-mb",
            "300",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "MB per 10 KB" in run.stdout


# --- item 8: invisible and look-alike characters -----------------------------------------

_NEGATED = {
    "variation selector": "No\ufe0f pneumothorax.",
    "bidi isolates": "\u2066No\u2069 pneumothorax.",
    "bidi embedding": "\u202aNo\u202c pneumothorax.",
    "right-to-left mark": "No\u200f pneumothorax.",
    "Cyrillic o": "N\u043e pneumothorax.",
    "Greek Nu and omicron": "\u039d\u03bf pneumothorax.",
    "mathematical bold": "\U0001d40d\U0001d428 pneumothorax.",
    "fullwidth": "\uff2e\uff4f pneumothorax.",
    "fullwidth finding": "No " + "".join(chr(ord(c) + 0xFEE0) for c in "pneumothorax") + ".",
    "Cyrillic in the finding": "No pneum\u043ethor\u0430x.",
    "zero-width space in No": "N\u200bo pneumothorax.",
    "BOM first": "\ufeffNo pneumothorax.",
}


@pytest.mark.issue(18)
@pytest.mark.parametrize("text", list(_NEGATED.values()), ids=list(_NEGATED))
def test_invisible_and_look_alike_characters_keep_a_negation(
    label: Callable[[str], ReportLabels], text: str
) -> None:
    result = label("FINDINGS: " + text)
    assert result.labels["Pneumothorax"] == "negative"
    _assert_offsets("FINDINGS: " + text, result)


_INSIDE_WORD = {
    "soft hyphen": "pneu\u00admothorax",
    "zero-width space": "pneumo\u200bthorax",
    "zero-width joiner": "pneumot\u200dhorax",
    "zero-width non-joiner": "pneumoth\u200corax",
    "word joiner": "pneumotho\u2060rax",
    "left-to-right mark": "pneumothor\u200eax",
    "right-to-left mark": "p\u200fneumothorax",
    "combining grapheme joiner": "pneumothora\u034fx",
}


@pytest.mark.issue(18)
@pytest.mark.parametrize("word", list(_INSIDE_WORD.values()), ids=list(_INSIDE_WORD))
def test_an_invisible_character_inside_a_word_keeps_the_finding(
    label: Callable[[str], ReportLabels], word: str
) -> None:
    text = f"FINDINGS: Small right {word}. No effusion."
    result = label(text)
    assert result.labels["Pneumothorax"] == "positive"
    assert result.labels["Effusion"] == "negative"
    [mention] = [m for m in result.mentions if m.label == "Pneumothorax"]
    assert mention.text == word  # the evidence is the original text, invisible and all
    _assert_offsets(text, result)


def test_text_in_another_script_is_left_as_it_is() -> None:
    russian = "Пневмоторакс не выявлен. Нет выпота."
    assert clean_text(russian) == russian
    # a Latin report quoting a Greek word keeps the Greek word
    quoted = "Mild opacity (\u03bb\u03bf\u03b3\u03bf\u03c2) at the base."
    assert "\u03bb\u03bf\u03b3\u03bf\u03c2" in clean_text(quoted)


def test_clean_and_parse_text_keep_offsets_into_the_original() -> None:
    text = "N\u043e\u200b pneu\u00admothorax \u2066here\u2069" + ")" * 100
    clean = clean_text(text)
    assert len(clean) == len(text)
    parsed = parse_text(clean)
    assert parsed.text.startswith("No pneumothorax here")
    start = parsed.text.index("pneumothorax")
    a, b = parsed.span(start, start + len("pneumothorax"))
    assert text[a:b] == "pneu\u00admothorax"


# --- item 15: one report, one failure -------------------------------------------------------


@pytest.mark.issue(18)
def test_a_third_party_exception_fails_one_report_and_not_the_batch(
    nlp: Language, config: LabelerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    from labeler.components import ConceptMatcher

    original = ConceptMatcher.find

    def find(self: ConceptMatcher, doc: object, words: object = None) -> object:
        if "explode" in str(doc):
            raise ValueError("[E088] a third-party failure")
        return original(self, doc, words)  # type: ignore[arg-type]

    monkeypatch.setattr(ConceptMatcher, "find", find)
    reports = [
        ("a", "FINDINGS: Small effusion."),
        ("b", "FINDINGS: This will explode the parser."),
        ("c", "FINDINGS: No pneumothorax, a cousin of the first report."),
    ]
    fresh = LabelerConfig(cache_size=0)
    results = list(label_reports(reports, nlp=nlp, config=fresh, on_error="skip"))
    assert [r.id for r in results] == ["a", "b", "c"]
    assert results[0].labels["Effusion"] == "positive"
    assert results[1].error == "LabelerError: the report could not be parsed (ValueError)"
    assert "explode" not in results[1].error  # the report text is not echoed
    assert results[2].labels["Pneumothorax"] == "negative"
    with pytest.raises(ValueError, match="E088"):
        list(label_reports(reports[1:2], nlp=nlp, config=fresh, on_error="raise"))


@pytest.mark.issue(18)
@pytest.mark.slow
def test_cxr_label_with_a_1_mb_report_writes_every_line(tmp_path: Path) -> None:
    from app.cli import main

    reports = tmp_path / "reports.jsonl"
    big = "FINDINGS: " + "Small effusion, no pneumothorax and mild edema; " * 21_000
    rows = [
        {"id": "before", "report": "FINDINGS: Small effusion."},
        {"id": "big", "report": big},
        {"id": "after", "report": "IMPRESSION: No pneumothorax."},
    ]
    reports.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "labels.jsonl"
    assert len(big) > 1_000_000  # over spaCy's nlp.max_length (E088) as one text
    code = main(["label", str(reports), "-o", str(out), "-q", "--max-chars", "2000000"])
    assert code == 0
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [line["id"] for line in lines] == ["before", "big", "after"]
    assert lines[1]["labels"]["Effusion"] == "positive"
    assert lines[2]["labels"]["Pneumothorax"] == "negative"
