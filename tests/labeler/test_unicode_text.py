"""Invisible and look-alike characters from Unicode's own tables (issue 42 M3).

Before: a hand list of invisible characters and look-alike letters let Hangul fillers,
Khmer inherent vowels, unassigned default-ignorable code points, small capitals, Lisu
letters and zero-shaped digits through, and 138 of 357 variants of "No pneumothorax"
read as a positive finding (`cxr ask` then answered "yes"); a fullwidth full stop
dropped the finding after it. The characters here come from the generated table
(`labeler/patterns/unicode.v1.yaml`), every one of them at the normalisation level and a
sample through the labeler and the question parser.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from spacy.language import Language

from labeler.normalize import clean_text, is_invisible, normalize_text, parse_text
from labeler.questions import QuestionParser, answer_from_report
from labeler.schema import CHESTXRAY14, ReportLabels

pytestmark = pytest.mark.issue(42)

TABLES = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "labeler/patterns/unicode.v1.yaml").read_text("utf-8")
)
IGNORABLE = [cp for low, high in TABLES["ignorable"] for cp in range(low, high + 1)]
LOOKS_N = sorted(k for k, v in TABLES["letters"].items() if v == "N")
LOOKS_O = sorted(k for k, v in TABLES["letters"].items() if v in "Oo")
ZEROS = TABLES["zero_digits"]


def _read(text: str) -> str:
    return parse_text(clean_text(text)).text


def test_the_tables_are_unicodes() -> None:
    # Default_Ignorable_Code_Point as the `regex` module (its own copy of the UCD) has it.
    regex = pytest.importorskip("regex")
    prop = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    assert [cp for cp in range(0x110000) if prop.match(chr(cp))] == IGNORABLE
    named = {"\u3164", "\uffa0", "\u115f", "\u1160", "\u17b4", "\u17b5", "\u2065", "\U000e0fff"}
    assert named <= {chr(cp) for cp in IGNORABLE}
    assert {"\u0274", "\ua4e0", "\u039d"} <= set(LOOKS_N)  # ɴ, Lisu, Greek
    assert {"\u1d0f", "\u043e", "\u03bf"} <= set(LOOKS_O)  # ᴏ, Cyrillic, Greek
    assert {"0", "\u3007", "\u0966"} <= set(ZEROS)


def test_every_default_ignorable_code_point_is_dropped() -> None:
    for cp in IGNORABLE:
        ch = chr(cp)
        assert is_invisible(ch), f"U+{cp:04X}"
        assert _read(f"N{ch}o pneumo{ch}thorax.") == "No pneumothorax.", f"U+{cp:04X}"


def test_every_look_alike_of_n_and_o_reads_as_no() -> None:
    for n in ["N", *LOOKS_N]:
        for o in ["o", *LOOKS_O, *ZEROS]:
            read = _read(f"{n}{o} pneumothorax.")
            assert read.lower() == "no pneumothorax.", (n, o, unicodedata.name(n, n), read)


def test_the_tables_leave_words_of_other_scripts_and_numbers_alone() -> None:
    assert clean_text("T10 and N0M1, 10 mm, 0.5 cm, 2x0") == "T10 and N0M1, 10 mm, 0.5 cm, 2x0"
    russian = "Пневмоторакса нет. Сердце не увеличено."
    assert clean_text(russian) == russian  # a report in Cyrillic keeps its letters
    assert normalize_text("Is there a pneumothorax?") == "Is there a pneumothorax?"


# Through the labeler: one character of each ignorable range and each kind of look-alike.
_SAMPLE = [chr(low) for low, _ in TABLES["ignorable"]] + [
    chr(high) for _, high in TABLES["ignorable"]
]
_NO = [
    "\u0274o",  # small capital N
    "N\u1d0f",  # small capital O
    "\ua4e0o",  # Lisu NA
    "N0",
    "N\u3007",  # ideographic zero
    "N\u0966",  # Devanagari zero
    "\u0274\u1d0f",
    *(f"N{ch}o" for ch in _SAMPLE),
]


@pytest.mark.parametrize("no", _NO, ids=[f"{ord(c[0]):04X}-{ord(c[-1]):04X}" for c in _NO])
def test_a_hidden_or_disguised_no_still_negates(
    label: Callable[[str], ReportLabels], no: str
) -> None:
    result = label(f"FINDINGS: {no} pneumothorax. Small left effusion.")
    assert result.labels["Pneumothorax"] == "negative"
    assert result.labels["Effusion"] == "positive"


def test_a_fullwidth_full_stop_ends_a_sentence(label: Callable[[str], ReportLabels]) -> None:
    result = label("FINDINGS: No pneumothorax\uff0e Small left effusion\uff0e")
    assert result.labels["Pneumothorax"] == "negative"
    assert result.labels["Effusion"] == "positive"


@pytest.fixture(scope="module")
def parser(nlp: Language) -> QuestionParser:
    return QuestionParser(nlp, [str(label) for label in CHESTXRAY14])


@pytest.mark.parametrize(
    "question",
    [
        "Is there a pneumo\u3164thorax?",  # Hangul filler
        "Is there a pneumothorax?",  # plain
        "Is there a pneum\u043ethorax?",  # Cyrillic o
        "Is there a \u0440neumothorax?",  # Cyrillic er
        "Is there a pneumothor\u0430x\u17b5?",  # Cyrillic a, Khmer vowel
        "\uff29s there a pneumothorax\uff1f",  # fullwidth I and question mark
    ],
)
def test_questions_get_the_same_normalisation(
    parser: QuestionParser, label: Callable[[str], ReportLabels], question: str
) -> None:
    report = label("FINDINGS: N\u3164o pneumothorax.")  # the report hides its "No" too
    parsed = parser.parse(question)
    assert parsed.type != "unsupported", parsed.message
    assert answer_from_report(parsed, report).answer == "no"
