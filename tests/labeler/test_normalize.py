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
    ("sentence", "expected", "word"),
    [
        ("2,No pleural effusion.", "2, No pleural effusion.", "No"),
        ("1;no   pneumothorax", "1; No pneumothorax", "pneumothorax"),
        ("Fractures at T11,T12 old.", "Fractures at T11, T12 old.", "T12"),
        ("Nodule 2,5 cm.", "Nodule 2,5 cm.", "cm"),  # a decimal comma stays
        ("Clear,no effusion.", "Clear,no effusion.", "effusion"),  # the tokenizer splits it
    ],
)
def test_normalize_parse_text_splits_a_mark_glued_between_number_and_word(
    sentence: str, expected: str, word: str
) -> None:
    # "2,No pleural effusion" (a list number typed with a comma) was one token "2,No": the
    # negation went unseen and the effusion came out positive.
    out = parse_text(sentence)
    assert out.text == expected
    start = out.text.index(word)
    s, e = out.span(start, start + len(word))
    assert sentence[s:e].lower() == word.lower()


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


# --- list markers in every common form, joined in every common way ---------------------------
# Each report is three items; every label of every item must come out right, whatever the marker,
# the join between items, the space after the marker and the case.

_ITEMS: list[tuple[str, dict[str, str]]] = [
    ("Pneumothorax has resolved", {"Pneumothorax": "negative"}),
    ("The heart is enlarged", {"Cardiomegaly": "positive"}),
    ("Small left pleural effusion", {"Effusion": "positive"}),
    ("No pneumothorax", {"Pneumothorax": "negative"}),
    ("Mild pulmonary edema", {"Edema": "positive"}),
    ("Moderate cardiomegaly", {"Cardiomegaly": "positive"}),
    ("No focal consolidation", {"Consolidation": "negative"}),
]
# three items per report: a negative next to positives, in both orders
_REPORTS = [(0, 1, 2), (2, 3, 1), (4, 2, 3), (3, 5, 4), (6, 2, 5)]
_MARKERS: list[Callable[[int], str]] = [
    lambda i: f"{i}.",
    lambda i: f"{i})",
    lambda i: f"({i})",
    lambda i: f"{i}-",
    lambda i: f"{i}:",
    lambda i: f"{'abc'[i - 1]}.",
    lambda i: f"{'abc'[i - 1]})",
    lambda i: f"({'abc'[i - 1]})",
    lambda i: "-",
    lambda i: "\u2022",
    lambda i: "*",
]
_LETTER_MARKERS = {5, 6}  # "b." / "b)" glued to a word ("effusionb.") cannot be told apart
_JOINS = ["newline", "space", "no space", "no period"]
_CASES: list[Callable[[str], str]] = [str.upper, str.lower, lambda s: s]


def _variant(items: tuple[int, ...], marker: int, join: str, gap: str, case: int) -> str:
    parts = []
    for n, item in enumerate(items, start=1):
        text = _ITEMS[item][0] + ("" if join == "no period" else ".")
        parts.append(_MARKERS[marker](n) + gap + text)
    sep = {"newline": "\n", "space": " ", "no space": "", "no period": ""}[join]
    return _CASES[case](sep.join(parts))


def _expected(items: tuple[int, ...]) -> dict[str, str]:
    want: dict[str, str] = {}
    for item in items:
        for label, value in _ITEMS[item][1].items():
            if want.get(label) != "positive":  # positive beats negative
                want[label] = value
    return want


_VARIANTS = [
    (_variant(items, marker, join, gap, case), _expected(items))
    for items in _REPORTS
    for marker in range(len(_MARKERS))
    for join in _JOINS
    for gap in ("", " ")
    for case in range(len(_CASES))
    if not (join == "no period" and marker in _LETTER_MARKERS)
]


def test_normalize_list_markers_in_every_form_and_join(
    label: Callable[[str], ReportLabels],
) -> None:
    wrong = []
    for text, want in _VARIANTS:
        result = label(text)
        if _found(result) != want:
            wrong.append((text, _found(result)))
        for m in result.mentions:
            assert text[m.start : m.end] == m.text
    assert not wrong, f"{len(wrong)} of {len(_VARIANTS)} variants wrong: {wrong[:5]}"


@pytest.mark.parametrize(
    "text",
    [
        "A 4.5 cm nodule.",
        "A 1.2-cm nodule.",
        "Fracture at T4 and C5-6.",
        "Nodules x 2 since 12/3/2020.",
        "Unchanged since 2.3.2020 study.",
        "Old fracture of the right 2nd rib.",
        "Patient is s/p CABG.",
        "Right-sided effusion is re-demonstrated.",
        "Heart size is mildly-to-moderately enlarged.",
    ],
)
def test_normalize_numbers_dates_and_hyphens_are_not_list_markers(text: str) -> None:
    assert _sentences(text) == [text]
