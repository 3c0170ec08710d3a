"""Sloppy, truncated and hostile questions through every question path: each is answered
or refused, never an exception, and an answer has the shape of its type.

The words are drawn (seeded) from the pattern file's own vocabularies (pronouns, study
cues, comparatives, views, readings) mixed with findings, places, numbers, punctuation
and characters from other scripts, so the new paths (pronoun referents, whole-study worse
or better, which side is worse, a normal statement named without its "no", a general
word read as the finding named) are all reached with broken input.
"""

from __future__ import annotations

import random

import pytest

from batch.labeling import PipelineLabeler
from batch.study_questions import StudyQuestions
from labeler.config import LabelerConfig
from labeler.questions import QUESTION_TYPES
from labeler.schema import ReportLabels

pytestmark = pytest.mark.issue(40)

_PLAIN = (
    "is are was were has have it this that these they which what where how many much big "
    "worse better than before prior since changed new stable any anything acute normal "
    "lung lungs side left right both bilateral upper lower lobe base apex tip line PICC "
    "pacemaker effusion pneumothorax nodule mass opacity density lesion pneumonia heart "
    "size enlarged bony findings no not without lateral frontal view views done obtained "
    "could represent be a the of in on mm cm 2 3.5 0 -1 1e9 ? ? , . ; : / or and and/or XXXX "
    # this round's paths: a dating clause, history, what is abnormal, views counted, a
    # measurement, a part and what was done to it, an age
    "after now went drain drains out patient had TB history abnormal seen measure ratio "
    "cardiothoracic granuloma calcified replaced removed shoulder valve recent fresh "
    "effusions multilevel "
    # and the next round's: lines, collapse, a site beside the finding, instead, degenerate
    # levels, over-expanded, higher
    "lines collapse mediastinal aortopulmonary instead alternatively degenerate levels "
    "over-expanded higher hypoinflated streaky "
    # and the round after: a bone, a reading of the finding pointed at, a part said
    # normal, a width or angle, a prior film compared, lobes counted, focal, aeration
    "bone bones clavicle costophrenic angle spine scarring granuloma wide degrees curve "
    "compared with last film lobes focal aeration shadowing aspirated fused neck"
)
# other scripts, a zero-width space, a right-to-left override, a byte-order mark
_ODD = (
    "\u00e9panchement",
    "\u043b\u0435\u0432\u044b\u0439",
    "\u80ba",
    "\u200b",
    "\u202e",
    "\ufeff",
)
_WORDS = (*_PLAIN.split(), *_ODD)

_REPORTS = (
    "FINDINGS: Small left pleural effusion, increased. Minimal scarring or atelectasis at the "
    "right base. IMPRESSION: 6 mm nodular opacity in the right upper lobe, may be a nodule.",
    "FINDINGS: PA and lateral views. Stable cardiomediastinal silhouette. No acute bony "
    "findings. Right PICC with tip in the SVC.",
    "IMPRESSION: Bilateral upper lobe consolidation, right greater than left.",
    "FINDINGS: Calcified left upper lobe 5 mm granuloma. Degenerative changes are present in "
    "the spine. Old fracture, right mid clavicle. Right chest XXXX tip at the cavoatrial "
    "junction. Improved aeration of the lung bases.",
    "FINDINGS: .",
)

_SHAPES = {
    "presence": {"yes", "no", "uncertain", "unknown"},
    "study": None,  # yes/no/uncertain/unknown or a list of places
}


def _question(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(0, 14))]
    text = " ".join(words)
    cut = rng.random()
    if cut < 0.2:
        text = text[: rng.randint(0, len(text))]  # truncated mid-word
    elif cut < 0.3:
        text = text.upper()
    elif cut < 0.35:
        text = text * rng.randint(20, 60)  # over the length limit
    return text + rng.choice(("?", "", "??", " ?", "\n"))


def test_hostile_questions_are_answered_or_refused() -> None:
    engine = StudyQuestions(PipelineLabeler(LabelerConfig()))
    reports = engine.label_reports(list(_REPORTS))
    rng = random.Random(20261205)
    previous: str | None = None
    answered = 0
    for _ in range(1500):
        question = _question(rng)
        report = reports[rng.choice(_REPORTS)]
        got = engine.ask(question, report=report, referent=previous)
        assert got.type in QUESTION_TYPES
        if got.type == "unsupported":
            continue
        answered += 1
        if got.type == "presence":
            assert got.answer in _SHAPES["presence"], (question, got.answer)
        elif got.type in ("position", "study") and isinstance(got.answer, list):
            assert all(isinstance(t, str) and t for t in got.answer), (question, got.answer)
        elif got.type in ("size", "count", "study") and not isinstance(got.answer, str | list):
            assert isinstance(got.answer, int | float) and got.answer >= 0, (question, got)
        previous = got.label if isinstance(got.label, str) else previous
    assert answered > 100  # the paths were reached, not all refused at the door


@pytest.fixture(scope="module")
def engine_and_report() -> tuple[StudyQuestions, ReportLabels]:
    engine = StudyQuestions(PipelineLabeler(LabelerConfig()))
    return engine, engine.label_reports([_REPORTS[0]])[_REPORTS[0]]


@pytest.mark.parametrize(
    "question",
    [
        "Any pneumothorax after the line went in?" * 12,  # over the length limit
        "Any pneumothorax after the line went in " + "after the tube " * 30,
        "Any pneumothorax after the",  # truncated in the clause
        "after the line went in?",  # nothing left but the clause
        "Has the patient had",
        "What is abnormal in",
        "How many views",
        # the next round's: a concept by a question entry, listed with a label; a site of
        # an open question, alone, repeated; "instead" alone
        "Any lines or",
        "Is there an effusion or a pacemaker or any lines or " * 20,
        "Where is the mediastinal?",
        "Where is the " + "mediastinal " * 200 + "opacity?",
        "instead?",
        "How many levels are",
    ],
)
def test_this_rounds_cues_broken_are_answered_or_refused(
    engine_and_report: tuple[StudyQuestions, ReportLabels], question: str
) -> None:
    engine, report = engine_and_report
    got = engine.ask(question, report=report)
    assert got.type in QUESTION_TYPES
    if got.type == "unsupported":
        assert got.answer is None and got.message


def test_a_sloppy_dating_clause_is_read_as_a_tidy_one(
    engine_and_report: tuple[StudyQuestions, ReportLabels],
) -> None:
    engine, report = engine_and_report
    tidy = engine.ask("Any pneumothorax after the line went in?", report=report)
    sloppy = engine.ask("ANY   PNEUMOTHORAX  AFTER THE LINE WENT IN??", report=report)
    assert (tidy.type, tidy.answer) == (sloppy.type, sloppy.answer) == ("presence", "no")
