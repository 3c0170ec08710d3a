"""Questions about a study (batch/study_questions.py on models/image_findings.py): fusion
of report and image, and the discrepancy flag. `cxr ask` is tested in
tests/app/test_cli_ask.py, POST /v1/studies/ask in tests/app/test_routes_studies.py and the
discrepancy worklist in tests/app/test_worklist.py."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from batch.labeling import PipelineLabeler
from batch.study_questions import StudyQuestions, discrepancy_of
from labeler.config import LabelerConfig
from models.dicom import ImageMeta
from models.image_findings import ImageFindings, image_findings
from models.position import LungField

REPORT = (
    "FINDINGS: Small left pleural effusion. No pneumothorax. A 2 cm mass in the right upper lobe."
)


@dataclass(frozen=True)
class B:
    label: str
    x: float
    y: float
    width: float
    height: float
    score: float = 0.9


@pytest.fixture(scope="module")
def engine() -> StudyQuestions:
    return StudyQuestions(PipelineLabeler(LabelerConfig()))


def _image(positive: list[str], boxes: list[B], view: str | None = "PA") -> ImageFindings:
    probs = {"Effusion": 0.1, "Pneumothorax": 0.1, "Mass": 0.1, "Nodule": 0.1}
    probs.update(dict.fromkeys(positive, 0.9))
    meta = ImageMeta(rows=300, columns=200, view_position=view)
    return image_findings(
        probs, positive, boxes, None, meta, lung_field=LungField(0, 0, 200, 300, "image")
    )


# image right (x > 100) is the patient's left on a PA view
LEFT_LOW = B("Effusion", 140, 220, 40, 50)
RIGHT_LOW = B("Effusion", 20, 220, 40, 50)


def test_report_and_image_agree(engine: StudyQuestions) -> None:
    report = engine.label_reports([REPORT])[REPORT]
    a = engine.ask(
        "Is the effusion on the left?", report=report, image=_image(["Effusion"], [LEFT_LOW])
    )
    assert (a.type, a.answer, a.source, a.discrepancy) == ("position", "yes", "both", False)
    assert a.evidence["image"]["boxes"][0]["side"] == "left"  # type: ignore[index]
    assert a.evidence["report"][0]["rule"]  # type: ignore[index]


def test_image_only_position_uses_view_position_and_zones(engine: StudyQuestions) -> None:
    img = _image(["Effusion"], [LEFT_LOW])
    assert engine.ask("Which side is the effusion on?", image=img).answer == ["left"]
    assert engine.ask("Where is the effusion?", image=img).answer == ["left", "lower"]
    ap = _image(["Effusion"], [RIGHT_LOW], view="AP")
    a = engine.ask("Is the effusion on the right?", image=ap)
    assert (a.answer, a.source) == ("yes", "image")
    lateral = _image(["Effusion"], [RIGHT_LOW], view="LL")
    assert engine.ask("Which side is the effusion on?", image=lateral).answer == "unknown"


def test_discrepancy_on_side(engine: StudyQuestions) -> None:
    report = engine.label_reports([REPORT])[REPORT]
    a = engine.ask("Is there an effusion?", report=report, image=_image(["Effusion"], [RIGHT_LOW]))
    assert (a.answer, a.discrepancy) == ("yes", True)
    assert "on the left, the image on the right" in str(a.evidence["discrepancy"])


def test_discrepancy_on_presence_both_ways(engine: StudyQuestions) -> None:
    report = engine.label_reports([REPORT])[REPORT]
    missed = engine.ask("Is there an effusion?", report=report, image=_image([], []))
    assert (missed.answer, missed.discrepancy) == ("yes", True)
    extra = engine.ask(
        "Is there a pneumothorax?",
        report=report,
        image=_image(["Pneumothorax"], [B("Pneumothorax", 150, 30, 20, 60)]),
    )
    assert (extra.answer, extra.discrepancy) == ("no", True)
    assert "rules it out" in str(extra.evidence["discrepancy"])


def test_no_discrepancy_for_an_uncertain_report_or_unknown_label(engine: StudyQuestions) -> None:
    img = _image([], [])
    assert discrepancy_of("uncertain", None, img, "Effusion") is None
    assert discrepancy_of("positive", None, img, "Hernia") is None


def test_unsupported_question_is_not_answered(engine: StudyQuestions) -> None:
    a = engine.ask("Why is there an effusion?", report=engine.label_reports([REPORT])[REPORT])
    assert (a.type, a.answer, a.source) == ("unsupported", None, None)
    assert a.message


def test_size_answer_has_a_unit(engine: StudyQuestions) -> None:
    a = engine.ask("How big is the mass?", report=engine.label_reports([REPORT])[REPORT])
    assert a.to_dict()["answer"] == 20.0 and a.to_dict()["unit"] == "mm"


def test_image_cannot_answer_size(engine: StudyQuestions) -> None:
    a = engine.ask("How big is the mass?", image=_image(["Mass"], [B("Mass", 20, 30, 30, 30)]))
    assert (a.answer, a.source) == ("unknown", "image")
    assert "report" in str(a.message)


def test_batch_report_summary_carries_the_findings_sides() -> None:
    from batch.processor import _report_summary
    from labeler.schema import ReportLabels

    labels = ReportLabels(
        id="r", labels={"Mass": "positive"}, no_finding=False,
        findings={"Mass": {"status": "positive", "laterality": "left"}},
    )  # fmt: skip
    summary = _report_summary(labels, "csv", "v")
    assert summary["findings"]["Mass"]["laterality"] == "left"


@pytest.mark.issue(39)
def test_questions_are_parsed_through_the_labelers_lock(engine: StudyQuestions) -> None:
    # The service shares one labeler between report labeling and questions: a question must
    # not run on the pipeline while a report is labelled on another thread.
    import threading

    answered = threading.Event()

    def ask() -> None:
        engine.ask("Is there a pleural effusion?")
        answered.set()

    with engine.labeler.pipeline():
        worker = threading.Thread(target=ask)
        worker.start()
        assert not answered.wait(0.3), "the question was parsed while the pipeline was held"
    worker.join(timeout=30)
    assert answered.is_set()


def _ask(engine: StudyQuestions, question: str, report: str) -> tuple[str, object]:
    answer = engine.ask(question, report=engine.label_reports([report])[report])
    return answer.type, answer.answer


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("question", "report", "expected"),
    [
        # a concept's parent names it: a PICC is a central line
        ("Is there a central line?", "FINDINGS: Right PICC with tip in the SVC.", "yes"),
        ("Is there a pacemaker?", "FINDINGS: Right PICC with tip in the SVC.", "no"),
        ("Is there a pacemaker?", "FINDINGS: No pacemaker or AICD.", "no"),
        ("Is there a rib fracture?", "FINDINGS: Healed left rib fractures.", "yes"),
        ("Are there healed rib fractures?", "FINDINGS: No acute fracture.", "no"),
        # its words in another order or form
        ("Are the lung volumes low?", "FINDINGS: Low lung volumes.", "yes"),
        ("Is the mediastinum widened?", "FINDINGS: The mediastinum is not widened.", "no"),
        ("Is the aorta tortuous?", "FINDINGS: Tortuous thoracic aorta.", "yes"),
        # hedged
        ("Is there a hiatal hernia?", "FINDINGS: Possible small hiatal hernia.", "uncertain"),
    ],
)
def test_presence_of_concepts_outside_the_labels(
    engine: StudyQuestions, question: str, report: str, expected: str
) -> None:
    assert _ask(engine, question, report) == ("presence", expected)


@pytest.mark.issue(40)
def test_a_concepts_side_and_a_longer_concept_over_a_label(engine: StudyQuestions) -> None:
    report = "FINDINGS: Left chest wall pacemaker with leads in the right heart."
    assert _ask(engine, "Which side is the pacemaker on?", report) == ("position", ["left"])
    asked = engine.ask("Is there heart failure?")
    assert asked.label == "concept:heart_failure"  # not the heart's size (Cardiomegaly)


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("question", "report", "expected"),
    [
        ("Is this chest X-ray normal?", "FINDINGS: The lungs are clear. Normal heart size.", "yes"),
        ("Is the study normal?", "FINDINGS: Small left pleural effusion.", "no"),
        ("Is there any abnormality on this film?", "FINDINGS: The lungs are clear.", "no"),
        ("Is there any acute disease?", "IMPRESSION: No acute cardiopulmonary disease.", "no"),
        ("Is there any acute disease?", "FINDINGS: Right lower lobe pneumonia.", "yes"),
        ("Has anything changed since the last study?",
         "FINDINGS: Interval increase in the left pleural effusion.", "yes"),
        ("Has anything changed since the last study?", "FINDINGS: Stable cardiomegaly.", "no"),
    ],
)  # fmt: skip
def test_whole_study_questions(
    engine: StudyQuestions, question: str, report: str, expected: str
) -> None:
    assert _ask(engine, question, report) == ("study", expected)


@pytest.mark.issue(40)
def test_a_whole_study_question_needs_the_report(engine: StudyQuestions) -> None:
    answer = engine.ask("Is this chest X-ray normal?", image=_image([], []))
    assert answer.answer == "unknown" and answer.message and "report" in answer.message


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    "question", ["What is the prognosis?", "What is the heart rate?", "Is the patient male?"]
)
def test_what_a_report_cannot_answer_stays_unsupported(
    engine: StudyQuestions, question: str
) -> None:
    assert engine.ask(question).type == "unsupported"


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("question", "answer", "unit"),
    [
        ("How big is the nodule?", 12.0, "mm"),
        ("How big is the nodule in cm?", 1.2, "cm"),
        ("What is the size of the nodule in centimetres?", 1.2, "cm"),
        ("How large is the nodule in the left lung in millimeters?", 12.0, "mm"),
    ],
)
def test_a_size_comes_in_the_unit_asked(
    engine: StudyQuestions, question: str, answer: float, unit: str
) -> None:
    report = "FINDINGS: 12 mm left lower lobe nodule."
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert (got.answer, got.unit) == (answer, unit)


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Is the effusion small, moderate or large?", "small"),  # the report says "mild"
        ("Is the cardiomegaly slight or severe?", "slight"),
        ("Has the effusion increased or decreased?", "increased"),
        ("How severe is the cardiomegaly?", "mild"),  # no choice offered: the report's word
    ],
)
def test_a_choice_is_answered_with_a_word_it_offered(
    engine: StudyQuestions, question: str, expected: str
) -> None:
    report = "FINDINGS: Mild cardiomegaly. Mild left pleural effusion, increased since the prior."
    assert engine.ask(question, report=engine.label_reports([report])[report]).answer == expected
