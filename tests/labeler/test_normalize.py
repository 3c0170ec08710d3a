"""Text normalisation (issue 8 item 1, issue 7 item 8): every class of text, offsets kept.

All report snippets are written for these tests.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from labeler.normalize import clean_text, parse_text
from labeler.schema import ReportLabels
from labeler.sections import split_sentences
from labeler.vocabulary import load_sections

WRAP = load_sections().wrap_words


def _found(result: ReportLabels) -> dict[str, str]:
    return {k: v for k, v in result.labels.items() if v != "absent"}


def _sentences(text: str) -> list[str]:
    clean = clean_text(text)
    return [text[s:e] for s, e in split_sentences(clean, 0, len(clean), WRAP)]


@pytest.mark.parametrize(
    "text",
    [
        "Small left effusion.\x00",
        "Small\x00left effusion.",
        "Small left\teffusion.\x07",
        "Small left\u00a0effusion.\u200b",
        "\ufeffSmall left effusion.\x1b",
        "Small left effusion.\x7f\x85",
    ],
)
def test_normalize_control_characters_never_hide_a_finding(
    label: Callable[[str], ReportLabels], text: str
) -> None:
    result = label(text)
    assert result.labels["Effusion"] == "positive"
    (m,) = [m for m in result.mentions if m.label == "Effusion"]
    assert text[m.start : m.end] == m.text


def test_normalize_clean_text_keeps_length_and_offsets() -> None:
    text = "A\x00b\r\nc\rd\u2028e\tf\u00a0g"
    clean = clean_text(text)
    assert len(clean) == len(text)
    assert clean == "A b \nc\nd\ne f g"
    assert clean_text("plain text.") == "plain text."


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("NO PNEUMOTHORAX.", "No pneumothorax."),
        ("no pneumothorax.", "No pneumothorax."),
        ("The heart is\nenlarged.", "The heart is enlarged."),
        ("No XXXX pneumothorax.", "No XXXX pneumothorax."),
        ("NO XXXX PNEUMOTHORAX.", "No XXXX pneumothorax."),
        ("Stable [**Hospital 12**] effusion.", "Stable XXXXXXXXXXXXXXXXX effusion."),
        ("Seen by ___ today.", "Seen by XXX today."),
        ("Mixed Case COPD stays.", "Mixed Case COPD stays."),
    ],
)
def test_normalize_parse_text(sentence: str, expected: str) -> None:
    out = parse_text(sentence)
    assert out.text == expected
    assert out.offsets is None


def test_normalize_parse_text_collapses_whitespace_with_an_offset_map() -> None:
    sentence = "The heart is \n  enlarged."
    out = parse_text(sentence)
    assert out.text == "The heart is enlarged."
    start = out.text.index("enlarged")
    s, e = out.span(start, start + len("enlarged"))
    assert sentence[s:e] == "enlarged"
    assert sentence[slice(*out.span(0, 3))] == "The"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.No pneumothorax. 2.Small effusion.", ["No pneumothorax.", "Small effusion."]),
        ("1) No pneumothorax\n2) Small effusion", ["No pneumothorax", "Small effusion"]),
        ("(1) no pneumothorax (2) small effusion", ["no pneumothorax", "small effusion"]),
        ("a. No pneumothorax. b. Small effusion.", ["No pneumothorax.", "Small effusion."]),
        ("a)No pneumothorax\nb)Small effusion", ["No pneumothorax", "Small effusion"]),
        ("- No pneumothorax\n- Small effusion", ["No pneumothorax", "Small effusion"]),
        ("\u2022 No pneumothorax\n\u2022 Small effusion", ["No pneumothorax", "Small effusion"]),
        ("* No pneumothorax\n* Small effusion", ["No pneumothorax", "Small effusion"]),
        ("1 - No pneumothorax\n2 - Small effusion", ["No pneumothorax", "Small effusion"]),
        ("effusion.2.No pneumothorax", ["effusion.", "No pneumothorax"]),
        ("Small effusion.No pneumothorax.", ["Small effusion.", "No pneumothorax."]),
        ("small effusion.no pneumothorax.", ["small effusion.", "no pneumothorax."]),
        ("The heart is\nenlarged.", ["The heart is\nenlarged."]),
        ("No pleural effusion or\npneumothorax.", ["No pleural effusion or\npneumothorax."]),
        ("No pneumothorax\nSmall effusion", ["No pneumothorax", "Small effusion"]),
        ("NO PLEURAL EFFUSION\nOR PNEUMOTHORAX.", ["NO PLEURAL EFFUSION\nOR PNEUMOTHORAX."]),
        ("Heart: Normal\nLungs: Clear", ["Heart: Normal", "Lungs: Clear"]),
        ("A 1.5 cm nodule.\r\nNo effusion.", ["A 1.5 cm nodule.", "No effusion."]),
    ],
)
def test_normalize_sentences_around_numbering_bullets_and_wraps(
    text: str, expected: list[str]
) -> None:
    assert _sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1.No pneumothorax.", {"Pneumothorax": "negative"}),
        ("3.no pleural effusion or pneumothorax",
         {"Effusion": "negative", "Pneumothorax": "negative"}),
        ("1.Pneumothorax has resolved", {"Pneumothorax": "negative"}),
        ("2)No pneumothorax.", {"Pneumothorax": "negative"}),
        ("(3)No pneumothorax.", {"Pneumothorax": "negative"}),
        ("b.No pneumothorax.", {"Pneumothorax": "negative"}),
        ("1 - No pneumothorax.", {"Pneumothorax": "negative"}),
        ("Small effusion.2.No pneumothorax", {"Effusion": "positive", "Pneumothorax": "negative"}),
        ("Small effusion.No pneumothorax.", {"Effusion": "positive", "Pneumothorax": "negative"}),
        ("The heart is\nenlarged.", {"Cardiomegaly": "positive"}),
        ("The heart is\r\nenlarged.", {"Cardiomegaly": "positive"}),
        ("FINDINGS:\r\n1. Small effusion.\r\n2. No pneumothorax.\r\n",
         {"Effusion": "positive", "Pneumothorax": "negative"}),
        ("FINDINGS:\r1. Small effusion.\r2. No pneumothorax.\r",
         {"Effusion": "positive", "Pneumothorax": "negative"}),
        ("FINDINGS: NO PNEUMOTHORAX. THE HEART IS ENLARGED.",
         {"Pneumothorax": "negative", "Cardiomegaly": "positive"}),
        ("findings: no pneumothorax. the heart is enlarged.",
         {"Pneumothorax": "negative", "Cardiomegaly": "positive"}),
        ("No XXXX pneumothorax. Small XXXX effusion.",
         {"Pneumothorax": "negative", "Effusion": "positive"}),
        ("No [**Name**] pneumothorax. Small ___ effusion.",
         {"Pneumothorax": "negative", "Effusion": "positive"}),
        ("- No pneumothorax\n- Small effusion",
         {"Pneumothorax": "negative", "Effusion": "positive"}),
        # one finding per line without periods, any case
        ("no pneumothorax\nsmall effusion", {"Pneumothorax": "negative", "Effusion": "positive"}),
        ("NO PNEUMOTHORAX\nSMALL LEFT EFFUSION",
         {"Pneumothorax": "negative", "Effusion": "positive"}),
        ("NO FOCAL\nCONSOLIDATION", {"Consolidation": "negative"}),
        ("There is no pleural\neffusion.", {"Effusion": "negative"}),
        ("Edema - none.", {"Edema": "negative"}),
        ("#1 No pneumothorax #2 Small effusion",
         {"Pneumothorax": "negative", "Effusion": "positive"}),
    ],
)  # fmt: skip
def test_normalize_report_formats_label_right(
    label: Callable[[str], ReportLabels], text: str, expected: dict[str, str]
) -> None:
    result = label(text)
    assert _found(result) == expected
    for m in result.mentions:
        assert text[m.start : m.end] == m.text
        assert m.text in m.sentence
