"""Section detection and sentence splitting."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeler.sections import _header_regex, _headers, find_sections, labelled_spans, split_sentences
from labeler.vocabulary import load_sections

SECTIONS = load_sections()


def _names(text: str) -> list[str | None]:
    return [s.name for s in find_sections(text, SECTIONS)]


@pytest.mark.parametrize(
    "text",
    [
        "INDICATION: cough\nFINDINGS: clear lungs\nIMPRESSION: normal",
        "indication: cough\nfindings: clear lungs\nimpression: normal",
        "Indication\ncough\n\nFindings\nclear lungs\n\nImpression\nnormal",
        "INDICATION: cough. FINDINGS: clear lungs. IMPRESSION: normal",
    ],
)
def test_sections_headers_any_case_with_or_without_colon(text: str) -> None:
    assert _names(text) == ["indication", "findings", "impression"]


def test_sections_synonyms_map_to_canonical_names() -> None:
    text = "CLINICAL HISTORY: fever\nCOMPARISON: none\nCONCLUSION: pneumonia"
    assert _names(text) == ["history", "comparison", "impression"]


def test_sections_header_word_inside_a_sentence_is_not_a_header() -> None:
    text = "FINDINGS: The impression of the heart is normal. No history of effusion."
    assert _names(text) == ["findings"]


def test_sections_label_only_findings_and_impression() -> None:
    text = "INDICATION: rule out pneumonia\nFINDINGS: clear\nIMPRESSION: normal"
    spans = labelled_spans(text, SECTIONS)
    assert [s.name for s in spans] == ["findings", "impression"]
    assert "pneumonia" not in "".join(text[s.start : s.end] for s in spans)


@pytest.mark.parametrize(
    "text",
    [
        "HISTORY: rule out pneumonia\nThe lungs are clear. No effusion.",
        "Indication\nrule out pneumonia\n\nThe lungs are clear. No effusion.",
        "The lungs are clear.\nCOMPARISON: prior pneumonia\nNo effusion.",
    ],
)
def test_sections_whole_report_when_no_findings_or_impression(text: str) -> None:
    spans = labelled_spans(text, SECTIONS)
    body = "".join(text[s.start : s.end] for s in spans)
    assert "No effusion" in body
    assert "pneumonia" not in body


def test_sections_unsectioned_report_is_labelled_whole() -> None:
    text = "The lungs are clear. No effusion."
    spans = labelled_spans(text, SECTIONS)
    assert [(s.start, s.end) for s in spans] == [(0, len(text))]


def test_sections_use_sections_false_labels_everything() -> None:
    text = "INDICATION: pneumonia\nFINDINGS: clear"
    assert [(s.start, s.end) for s in labelled_spans(text, SECTIONS, use_sections=False)] == [
        (0, len(text))
    ]


def test_split_sentences_keeps_decimals_and_offsets() -> None:
    text = "A 1.5 cm nodule. No effusion; mild atelectasis!\n\nClear"
    spans = split_sentences(text, 0, len(text))
    assert [text[s:e] for s, e in spans] == [
        "A 1.5 cm nodule.",
        "No effusion;",
        "mild atelectasis!",
        "Clear",
    ]


@pytest.mark.issue(40)
def test_split_sentences_before_a_glued_capitalised_starter() -> None:
    starters = SECTIONS.glued_starters
    text = "Hilar nodule, stable The lungs are clear. Rib fracture unchanged Visualized bones"
    spans = split_sentences(text, 0, len(text), glued_starters=starters)
    assert [text[s:e] for s, e in spans] == [
        "Hilar nodule, stable",
        "The lungs are clear.",
        "Rib fracture unchanged",
        "Visualized bones",
    ]
    # not after a capitalised or masked word, nor before a word that is no starter
    for text in ("Heart size normal. XXXX The lungs are clear.", "Left chest wall Mediport seen"):
        spans = split_sentences(text, 0, len(text), glued_starters=starters)
        assert len(spans) == (2 if "." in text[:-1] else 1)


# pieces of which header-like text is made: headers, their separators, sentence ends
_PIECES = ["FINDINGS", "Impression", "comparison", "History", ":", " :", ".", "!", "?", "\n",
           "\r\n", "\n\n", " ", "\t", "1.", "none", "x", "FINDINGS:", "\u2028"]  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=14).map("".join))
def test_headers_are_those_of_trying_every_character(text: str) -> None:
    # only the start, line starts and sentence ends are tried: the same matches
    header = _header_regex(SECTIONS)
    assert [m.span() for m in _headers(text, header)] == [m.span() for m in header.finditer(text)]
