"""Questions about a study (batch/study_questions.py on models/image_findings.py): fusion
of report and image, and the discrepancy flag. `cxr ask` is tested in
tests/app/test_cli_ask.py, POST /v1/studies/ask in tests/app/test_routes_studies.py and the
discrepancy worklist in tests/app/test_worklist.py."""

from __future__ import annotations

import functools

import pytest

from batch.labeling import PipelineLabeler
from batch.study_questions import StudyQuestions, discrepancy_of
from labeler.config import LabelerConfig
from labeler.questions import REPORT_WORD_RULE
from models.boxes import Box
from models.dicom import ImageMeta
from models.image_findings import ImageFindings, image_findings
from models.position import LungField

REPORT = (
    "FINDINGS: Small left pleural effusion. No pneumothorax. A 2 cm mass in the right upper lobe."
)


# a box the model would give (the score plays no part here)
B = functools.partial(Box, score=0.9)


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


_PICC = "FINDINGS: Right PICC with tip in the SVC."
_EFFUSION = "FINDINGS: Mild cardiomegaly. Mild left pleural effusion, increased since the prior."
_NODULE = "FINDINGS: 12 mm left lower lobe nodule."
_ETT = "FINDINGS: Endotracheal tube with tip 4.5 cm above the carina."
_WEDGE = ("FINDINGS: Mild age-indeterminate anterior wedging of a lower thoracic or upper "
          "lumbar vertebra.")  # fmt: skip
_ONE_SIDE_HEDGED = ("FINDINGS: Bilateral small pleural effusions. IMPRESSION: Residual small left "
                    "effusion and questionable small right pleural effusion.")  # fmt: skip
_TWO_VIEWS = "FINDINGS: PA and lateral views of the chest. The lungs are clear. Normal heart size."
_POSSIBLE_NODULE = ("FINDINGS: 6 mm nodular opacity in the right upper lobe. IMPRESSION: "
                    "This may be a true pulmonary nodule.")  # fmt: skip

# (question, report, type, answer): one row per class of question a clinician asks
CLINICIANS = [
    # a concept outside the labels, by its phrase; its parent names it (a PICC is a
    # central line); negated and not mentioned are "no", hedged "uncertain"
    ("Is there a central line?", _PICC, "presence", "yes"),
    ("Is there a pacemaker?", _PICC, "presence", "no"),
    ("Is there a pacemaker?", "FINDINGS: No pacemaker or AICD.", "presence", "no"),
    ("Is there a rib fracture?", "FINDINGS: Healed left rib fractures.", "presence", "yes"),
    ("Are there healed rib fractures?", "FINDINGS: No acute fracture.", "presence", "no"),
    ("Is there a hiatal hernia?", "FINDINGS: Possible small hiatal hernia.", "presence",
     "uncertain"),
    # ... by its words in another order or form
    ("Are the lung volumes low?", "FINDINGS: Low lung volumes.", "presence", "yes"),
    ("Is the mediastinum widened?", "FINDINGS: The mediastinum is not widened.", "presence",
     "no"),
    ("Is the aorta tortuous?", "FINDINGS: Tortuous thoracic aorta.", "presence", "yes"),
    ("Which side is the pacemaker on?", "FINDINGS: Left chest wall pacemaker.", "position",
     ["left"]),
    # the whole study
    ("Is this chest X-ray normal?", "FINDINGS: The lungs are clear. Normal heart size.", "study",
     "yes"),
    ("Is the study normal?", "FINDINGS: Small left pleural effusion.", "study", "no"),
    ("Is there any abnormality on this film?", "FINDINGS: The lungs are clear.", "study", "no"),
    ("Is there any acute disease?", "IMPRESSION: No acute cardiopulmonary disease.", "study",
     "no"),
    ("Is there any acute disease?", "FINDINGS: Right lower lobe pneumonia.", "study", "yes"),
    ("Has anything changed since the last study?", _EFFUSION, "study", "yes"),
    ("Has anything changed since the last study?", "FINDINGS: Stable cardiomegaly.", "study",
     "no"),
    # a choice is answered with a word it offered (the report says "mild")
    ("Is the effusion small, moderate or large?", _EFFUSION, "severity", "small"),
    ("Is the cardiomegaly slight or severe?", _EFFUSION, "severity", "slight"),
    ("Has the effusion increased or decreased?", _EFFUSION, "change", "increased"),
    ("How severe is the cardiomegaly?", _EFFUSION, "severity", "mild"),
    # where a line or tube ends: the report's words, then the landmark's name; a tip
    # spoken of in the next sentence; a distance in the unit asked
    ("Where is the tip of the PICC?", _PICC, "position", ["SVC", "superior vena cava"]),
    ("Where does the central line terminate?", _PICC, "position",
     ["SVC", "superior vena cava"]),
    ("Where is the PICC tip?", "FINDINGS: Right PICC. The tip has moved into the left "
     "innominate vein.", "position", ["left innominate vein", "left brachiocephalic vein"]),
    ("Where is the tip of the catheter?", "FINDINGS: Catheter tip in the right atrium.",
     "position", ["right atrium"]),
    ("How far above the carina is the ET tube tip in cm?", _ETT, "size", 4.5),
    ("Where is the tip of the ET tube?", _ETT, "position",
     ["4.5 cm above the carina", "carina"]),
    ("Where is the tip of the nodule?", _NODULE, "position", ["left", "left lower lobe"]),
    # tips joined in one phrase: each landmark; past the GE junction is the stomach
    ("Where are the lead tips?", "FINDINGS: Two pacer leads, with a tip in the right atrium "
     "and another tip in the right ventricle.", "position",
     ["right atrium", "right ventricle"]),
    ("Where is the tip of the NG tube?", "FINDINGS: NG tube with tip beyond the GE junction.",
     "position", ["beyond the GE junction", "stomach"]),
    ("Where is the tip of the NG tube?", "FINDINGS: NG tube with tip at the GE junction.",
     "position", ["GE junction", "esophagus"]),
    # a device no longer there; a device whose name holds a blocked word
    ("Is the NG tube still in place?", "FINDINGS: Interval removal of the NG tube.",
     "presence", "no"),
    ("Which side is the chest drain on?", "FINDINGS: Left chest drain.", "position", ["left"]),
    # counts: a stated number beats a plural; findings named one by one are counted
    ("How many nodules are there?", "FINDINGS: Two nodules in the right lung. "
     "IMPRESSION: Right lung nodules.", "count", 2),
    ("How many lines and tubes are there?", "FINDINGS: Left PICC. NG tube below the "
     "diaphragm.", "count", 2),
    ("How many nodular opacities are there?", "FINDINGS: A 17 mm nodular opacity on the "
     "left. A 10 mm nodular opacity on the right.", "count", 2),
    # a describing word beside the finding, or not; a concept named by one ("healed rib
    # fractures") found as its parent with the word beside it
    ("Is the nodule calcified?", "FINDINGS: Calcified left upper lobe nodule.", "presence",
     "yes"),
    ("Is the nodule calcified?", "FINDINGS: 8 mm noncalcified nodule. It is new.", "presence",
     "no"),
    ("Is the nodule calcified?", "FINDINGS: The nodule is not calcified.", "presence", "no"),
    ("Is the effusion loculated?", "FINDINGS: Loculated right pleural effusion.", "presence",
     "yes"),
    ("Are there healed rib fractures?", "FINDINGS: Old right rib fractures.", "presence",
     "yes"),
    ("Are there healed rib fractures?", "FINDINGS: Acute right rib fractures.", "presence",
     "no"),
    ("Which hemidiaphragm is elevated?", "FINDINGS: Elevated left hemidiaphragm.", "position",
     ["left"]),
    ("Any focal airspace opacity?", "FINDINGS: No focal airspace opacity.", "presence", "no"),
    # a normal statement asked about when nothing else is named; without a side it holds
    # for both lungs; a whole-study cue stays a study question
    ("Are the lungs clear?", "FINDINGS: The lungs are clear.", "presence", "yes"),
    ("Is the left lung clear?", "FINDINGS: The lungs are clear.", "position", "yes"),
    ("Is the left lung clear?", "FINDINGS: The right lung is clear. Left basilar "
     "atelectasis.", "position", "no"),
    ("Is the right lung clear?", "FINDINGS: The right lung is clear.", "position", "yes"),
    ("Is there any acute disease?", "IMPRESSION: No acute cardiopulmonary disease.", "study",
     "no"),
    # a place: the normalised term, then the report's own words for it
    ("Where is the nodule?", "FINDINGS: 8 mm nodule in the right mid lung zone.", "position",
     ["right", "middle", "mid lung zone"]),
    # a direction: the side a curve or a shift goes to
    ("Which way does the scoliosis curve?", "FINDINGS: Mild dextroscoliosis.", "position",
     ["right"]),
    ("Which way is the mediastinum shifted?", "FINDINGS: The mediastinum is shifted to the "
     "left.", "position", ["left"]),
    # which rib or vertebra, and how many
    ("Which rib is fractured?", "FINDINGS: Healed left 9th rib fracture.", "position",
     ["left", "9th rib"]),
    ("At what level is the fracture?", "FINDINGS: Wedge fracture of T12.", "position",
     ["T12"]),
    ("How many rib fractures are there?", "FINDINGS: Healed right 8th and left 7th "
     "posterolateral rib fracture.", "count", 2),
    ("How many ribs are fractured?", "FINDINGS: Multiple rib fractures, the right 5th "
     "through 9th ribs.", "count", 5),
    # a site the question names: read in the words beside the finding, by any word of
    # that site ("acromioclavicular" is the shoulder's), hyphenated words split
    ("Is there a shoulder fracture?", "FINDINGS: Fracture-dislocation of the left "
     "shoulder.", "presence", "yes"),
    ("Is there a shoulder fracture?", "FINDINGS: Healed right rib fracture.", "presence",
     "no"),
    ("Is there a shoulder fracture?", "FINDINGS: No fracture of the shoulder.", "presence",
     "no"),
    ("Is the aorta calcified?", "FINDINGS: Calcification of the aortic knob.", "presence",
     "yes"),
    ("Is the aorta calcified?", "FINDINGS: Calcified right hilar lymph node.", "presence",
     "no"),
    ("Are there spurs on the spine?", "FINDINGS: T-spine osteophytes.", "presence", "yes"),
    # a site the finding's own concept or a broader one names is the finding's
    ("Is there spondylosis of the spine?", "FINDINGS: Lumbar spondylosis.", "presence",
     "yes"),
    ("Is there spondylosis of the spine?", "FINDINGS: No spondylosis.", "presence", "no"),
    ("Is there spondylosis of the spine?", "FINDINGS: Possible thoracic spondylosis.",
     "presence", "uncertain"),
    ("Is there a shoulder mass?", "FINDINGS: Possible mass projecting over the right "
     "humeral head.", "presence", "uncertain"),
    # a concept named as a finding at a site, read as the broader finding with the site
    # beside it; an ICD is read as a pacemaker (it paces too), not the other way round
    ("Is there arthritis of the shoulder?", "FINDINGS: Bilateral acromioclavicular "
     "degenerative joint disease.", "presence", "yes"),
    ("Is the shoulder dislocated?", "FINDINGS: Dislocation of the right humeral head.",
     "presence", "yes"),
    ("Is the shoulder dislocated?", "FINDINGS: Dislocation of the right elbow.", "presence",
     "no"),
    ("Is there a calcified lymph node?", "FINDINGS: Calcified right hilar lymph node.",
     "presence", "yes"),
    ("Is there a pacemaker?", "FINDINGS: Left chest wall pacemaker/defibrillator.",
     "presence", "yes"),
    ("Is there an AICD?", "FINDINGS: Left chest wall pacemaker.", "presence", "no"),
    # an operation named inside another finding's mention ("CABG clips") was done; a
    # device's is not ("pacer pads" are no pacer)
    ("Any evidence of previous CABG?", "FINDINGS: Sternotomy wires and CABG clips. Clear "
     "lungs.", "presence", "yes"),
    ("Has the patient had bypass surgery?", "FINDINGS: Median sternotomy wires, CABG clips "
     "in the mediastinum.", "presence", "yes"),
    ("Any evidence of previous CABG?", "FINDINGS: No CABG clips. Clear lungs.", "presence",
     "no"),
    ("Any evidence of previous CABG?", "FINDINGS: Surgical clips in the left axilla.",
     "presence", "no"),
    ("Is there a pacemaker?", "FINDINGS: External pacer pads over the chest.", "presence",
     "no"),
    # a device another took the place of is gone: the one after it is the line now
    ("Which side is the new central line on?", "FINDINGS: The right internal jugular "
     "catheter has been exchanged for a left internal jugular catheter.", "position",
     ["left"]),
    ("Which side is the line on?", "FINDINGS: The left subclavian catheter was replaced by a "
     "right subclavian catheter with its tip in the SVC.", "position", ["right"]),
    ("Which side is the central line on?", "FINDINGS: Right internal jugular catheter in "
     "place and a new left internal jugular catheter.", "position", ["bilateral"]),
    ("Are there any graft markers?", "FINDINGS: Sternotomy wires and CABG markers.",
     "presence", "yes"),
    ("Are there skin markers?", "FINDINGS: Sternotomy wires and CABG markers.", "presence",
     "no"),
    # an object said to lie outside the patient, hedged or not; a line in a vein is not
    ("Could the catheter be outside the patient?", "FINDINGS: A catheter over the left "
     "hilum may be outside the patient.", "presence", "uncertain"),
    ("Is the tubing outside the patient?", "FINDINGS: Tubing external to the patient "
     "overlies the right chest.", "presence", "yes"),
    ("Is the catheter outside the patient?", "FINDINGS: Left PICC with tip in the SVC.",
     "presence", "no"),
    # a device's tip at a vertebral level
    ("At what level is the stimulator tip?", "FINDINGS: Spinal cord stimulator with its tip "
     "projecting over the T10 vertebral body.", "position", ["T10 vertebral body", "T10"]),
    # a relative clause after the finding's comma describes it, unless it denies
    ("Are the sternal wires intact?", "FINDINGS: Median sternotomy wires, a few of which are "
     "fractured, and mediastinal clips.", "presence", "no"),
    ("Are the sternal wires intact?", "FINDINGS: Median sternotomy wires, none of which are "
     "broken.", "presence", "unknown"),
    ("Are the nodules calcified?", "FINDINGS: Several bilateral nodules, most of which appear "
     "calcified.", "presence", "yes"),
    # two devices joined by "or" are alternatives, not the one combined device
    ("Is there a pacer or defibrillator?", "FINDINGS: Right chest cardiac generator with "
     "leads in the right atrium and right ventricle.", "presence", "yes"),
    ("Is there a pacemaker or defibrillator?", "FINDINGS: No lines or tubes. Clear lungs.",
     "presence", "no"),
    ("Is there a pacemaker or similar cardiac device?", "FINDINGS: An electronic cardiac "
     "device projects over the left chest.", "presence", "yes"),
    # which side has more: one side's finding, the report's comparison of the sides, or
    # the larger stated size; none of these: unknown
    ("Which effusion is larger?", "FINDINGS: Small bilateral pleural effusions, left "
     "greater than right.", "position", ["left"]),
    ("Which side is the effusion worse on?", "FINDINGS: Bilateral effusions, worse on the "
     "right.", "position", ["right"]),
    ("Which effusion is bigger?", "FINDINGS: Small left pleural effusion.", "position",
     ["left"]),
    # "more <word> on the side", with or without "the"
    ("Which side are the opacities worse on?", "FINDINGS: Patchy opacities in both lung "
     "bases, more pronounced on the left than the right.", "position", ["left"]),
    ("Which side is the effusion worse on?", "FINDINGS: Bilateral effusions, more on right "
     "than left side.", "position", ["right"]),
    ("Which side are the opacities worse on?", "FINDINGS: Patchy opacities in both lung "
     "bases, more evident on the prior study.", "position", "unknown"),
    ("Which nodule is larger?", "FINDINGS: A 17 mm nodule in the left lung. A 10 mm nodule "
     "in the right lung.", "position", ["left"]),
    ("Which effusion is larger?", "FINDINGS: Small bilateral pleural effusions.", "position",
     "unknown"),
    ("Which effusion is larger?", "FINDINGS: No pleural effusion.", "position", "unknown"),
    # the words of a site's phrase that say no more than the site ("joints")
    ("Is there arthritis in the shoulder joints?", "FINDINGS: Degenerative joint disease "
     "of both glenohumeral joints.", "presence", "yes"),
    # acute: yes by a word that says so, no by one that says it is old or stable, else
    # the report does not say
    ("Are the rib fractures acute?", "FINDINGS: Acute left 7th rib fracture.", "presence",
     "yes"),
    ("Are the rib fractures acute?", "FINDINGS: Healing left rib fractures.", "presence",
     "no"),
    ("Is the fracture acute?", "FINDINGS: Stable compression fracture of T12.", "presence",
     "no"),
    ("Are the rib fractures acute?", "FINDINGS: Left rib fractures.", "presence", "unknown"),
    # bones: intact is a normal statement; an injury to bone is a fracture
    ("Are the bones intact?", "FINDINGS: The bones are intact.", "presence", "yes"),
    ("Are the bones intact?", "FINDINGS: Acute fracture of the left 7th rib.", "presence",
     "no"),
    ("Any acute bone injury?", "FINDINGS: No acute osseous abnormality.", "presence", "no"),
    ("Any acute bony injury?", "FINDINGS: Acute left clavicle fracture.", "presence", "yes"),
    # one on each side: "bilateral effusions" are two; leads counted by their number
    ("How many pleural effusions are there?", "FINDINGS: Small bilateral pleural "
     "effusions.", "count", 2),
    ("How many pleural effusions are there?", "FINDINGS: Small left pleural effusion.",
     "count", 1),
    ("How many pacemaker leads are there?", "FINDINGS: Stable position of 2 pacemaker "
     "electrodes.", "count", 2),
    # ... or by the landmarks their tips are joined in, one lead each; a line is not counted so
    ("How many pacemaker leads are there?", "FINDINGS: Left pacer with leads in the right "
     "atrium and ventricle.", "count", 2),
    ("How many pacemaker leads are there?", "FINDINGS: Left pacer with leads in the right "
     "atrium.", "count", "multiple"),
    ("How many leads are there?", "FINDINGS: Pacer leads project over the right atrium, "
     "right ventricle and coronary sinus.", "count", 3),
    ("How many central lines are there?", "FINDINGS: Central lines with tips in the SVC and "
     "right atrium.", "count", "multiple"),
    # what the findings reading adds to a label's finding over the same words
    ("Has the mass grown?", "FINDINGS: Lobulated right middle lobe mass measuring 4.5 x 6.8 "
     "cm, increased in size compared to prior study, most compatible with neoplasm.",
     "change", "yes"),
    # several findings in one presence question: "or" asks whether any is there, "and"
    # whether all are; anything else about several stays unsupported
    ("Is there any pleural effusion or pneumothorax?", "FINDINGS: No pneumothorax or "
     "pleural effusion.", "presence", "no"),
    ("Any effusion, pneumothorax or consolidation?", "FINDINGS: Small right pneumothorax.",
     "presence", "yes"),
    ("Is there effusion or pneumothorax?", "FINDINGS: No effusion. Possible tiny apical "
     "pneumothorax.", "presence", "uncertain"),
    ("Are there effusions and atelectasis?", "FINDINGS: Bilateral effusions. No "
     "atelectasis.", "presence", "no"),
    ("Are there effusions and atelectasis?", "FINDINGS: Bilateral effusions with "
     "atelectasis.", "presence", "yes"),
    ("Where are the effusion and pneumothorax?", _EFFUSION, "unsupported", None),
    ("Is there pneumothorax or effusion on the left?", _EFFUSION, "unsupported", None),
    # where the study's abnormal findings are, or whether there is one on a side
    ("Which side is the abnormality on?", "FINDINGS: Left basilar opacity. Right PICC.",
     "study", ["left"]),
    ("Which lobe is affected?", "FINDINGS: Right upper lobe pneumonia. The lungs are "
     "otherwise clear.", "study", ["right", "right upper lobe"]),
    ("Which side is the abnormality on?", "FINDINGS: The lungs are clear.", "study",
     "unknown"),
    ("Is the left lung affected?", "FINDINGS: Right upper lobe pneumonia.", "study", "no"),
    ("Is the right lung affected?", "FINDINGS: Right upper lobe pneumonia.", "study", "yes"),
    ("Is there anything new in the left lung?", "FINDINGS: New left effusion.",
     "unsupported", None),
    # a few more ways to ask: thickness, what happened, lay words, metastases
    ("How thick is the pneumothorax?", "FINDINGS: Right apical pneumothorax measuring 5 mm "
     "in thickness.", "size", 5.0),
    ("What happened to the pneumothorax?", "FINDINGS: The right pneumothorax has resolved.",
     "change", "resolved"),
    ("Is there air under the skin?", "FINDINGS: Subcutaneous emphysema in the right chest "
     "wall.", "presence", "yes"),
    ("Is there metastatic disease?", "IMPRESSION: Innumerable nodules consistent with "
     "metastatic disease.", "presence", "yes"),
    ("Is there metastatic disease?", "IMPRESSION: No evidence of metastases.", "presence",
     "no"),
    # a finding offered as one of two readings is uncertain; "or" elsewhere changes nothing
    ("Is there a pleural effusion?", "FINDINGS: Left basilar airspace disease and/or "
     "pleural effusion.", "presence", "uncertain"),
    ("Is there atelectasis?", "FINDINGS: Left basilar atelectasis or scar.", "presence",
     "uncertain"),
    ("Is there a pleural effusion?", "FINDINGS: New or increased left pleural effusion.",
     "presence", "yes"),
    ("Is the heart enlarged?", "FINDINGS: The heart size is upper limits normal or mildly "
     "enlarged.", "presence", "uncertain"),
    ("Is the heart enlarged?", "FINDINGS: Normal or mildly enlarged heart.", "presence",
     "uncertain"),
    ("Is the heart enlarged?", "FINDINGS: Mildly enlarged heart.", "presence", "yes"),
    # its side and describing words do not part it from its alternative
    ("Is there a pleural effusion?", "IMPRESSION: Basilar atelectasis and/or small right "
     "pleural effusion.", "presence", "uncertain"),
    ("Is there a pleural effusion?", "IMPRESSION: Pleural thickening and/or some loculated "
     "effusion.", "presence", "uncertain"),
    ("Is there a pleural effusion?", "IMPRESSION: Small right pleural effusion.", "presence",
     "yes"),
    # a reading after a comma has the place of the finding it reads
    ("Is there atelectasis in the right base?", "IMPRESSION: Streaky opacities in the right "
     "base, atelectasis versus infiltrate.", "position", "uncertain"),
    ("Is there atelectasis in the left base?", "IMPRESSION: Streaky opacities in the right "
     "base, atelectasis versus infiltrate.", "position", "no"),
    ("Is there scarring at the apices?", "FINDINGS: There are biapical opacities, scarring.",
     "position", "yes"),
    # ... and so has one after a semicolon that ends the placed finding's statement
    ("Is there atelectasis in the right base?", "IMPRESSION: Streaky opacities in the right "
     "base; probable atelectasis.", "position", "uncertain"),
    ("Is there atelectasis in the left base?", "IMPRESSION: Streaky opacities in the right "
     "base; probable atelectasis.", "position", "no"),
    ("Is there atelectasis in the right base?", "IMPRESSION: Streaky opacities in the right "
     "base; the heart is enlarged, with atelectasis.", "position", "unknown"),
    ("Is there atelectasis in the right base?", "IMPRESSION: Streaky opacities in the right "
     "base. Atelectasis.", "position", "unknown"),
    ("Is there atelectasis in the right base?", "IMPRESSION: Streaky opacities in the right "
     "base, which the overlying clothing may explain as atelectasis.", "position", "unknown"),
    # the words of what a reading question points at describe it, not the reading asked
    ("Could the big pulmonary arteries be from pulmonary hypertension?", "IMPRESSION: "
     "Enlarged pulmonary arteries, possibly pulmonary hypertension.", "presence", "uncertain"),
    ("Could these changes be bronchitis?", "IMPRESSION: Prominent markings, possibly "
     "bronchitic changes.", "presence", "uncertain"),
    ("Could these changes be bronchitis?", "IMPRESSION: No bronchitis.", "presence", "no"),
    ("Could the left opacity be pneumonia?", "IMPRESSION: Right lower lobe pneumonia.",
     "position", "no"),
    # ... even words no entry explains ("band", "distortion"): they say what is pointed at
    ("Could the band opacities be atelectasis?", "FINDINGS: Linear opacities at both bases, "
     "scarring or atelectasis.", "presence", "uncertain"),
    ("Could the band opacities be atelectasis?", "FINDINGS: Bibasilar linear atelectasis.",
     "presence", "yes"),
    ("Could the band opacities be atelectasis?", "FINDINGS: Linear scarring at both bases. No "
     "atelectasis.", "presence", "no"),
    ("Could the wedge shadow represent pneumonia?", "FINDINGS: Lungs clear.", "presence",
     "no"),
    ("Could the wedge shadow represent pneumonia?", "FINDINGS: Wedge-shaped right basilar "
     "opacity, possibly pneumonia.", "presence", "uncertain"),
    # a finding seen only elsewhere and hedged at the place asked is possible there
    ("Is there a nodule in the right upper lobe?", "FINDINGS: 6 mm nodule in the left lower "
     "lobe. Questionable second nodule in the right upper lobe.", "position", "uncertain"),
    ("Is there a nodule in the left lower lobe?", "FINDINGS: 6 mm nodule in the left lower "
     "lobe. Questionable second nodule in the right upper lobe.", "position", "yes"),
    ("Is there a nodule in the right lower lobe?", "FINDINGS: 6 mm nodule in the left lower "
     "lobe. Questionable second nodule in the right upper lobe.", "position", "no"),
    ("Is there a nodule in the right upper lobe?", "FINDINGS: 6 mm nodule in the left lower "
     "lobe. No right upper lobe nodule.", "position", "no"),
    # a word no entry explains just before the reading asked is read beside the finding;
    # where the report does not say it there, it may say it in other words: unknown
    ("Could the shadow be a pericardial mass?", "IMPRESSION: Shadow at the right heart "
     "border, possibly a fat pad or a pericardial mass.", "presence", "uncertain"),
    ("Could the shadow be a pericardial mass?", "IMPRESSION: Pericardial mass at the right "
     "heart border.", "presence", "yes"),
    ("Could the shadow be a pericardial mass?", "IMPRESSION: Shadow at the right heart "
     "border, possibly a fat pad or a pleural mass.", "presence", "unknown"),
    ("Could the shadow be a pericardial mass?", "IMPRESSION: Clear lungs. No mass.",
     "presence", "no"),
    # a reading set against the one asked ("rather than", "instead of") is left out
    ("Could this be an infiltrate rather than collapse?", "IMPRESSION: Streaky basal "
     "opacities, atelectasis versus infiltrate.", "presence", "uncertain"),
    ("Is it atelectasis instead of pneumonia?", "IMPRESSION: Right basilar atelectasis.",
     "presence", "yes"),
    ("Is it pneumonia as opposed to atelectasis?", "IMPRESSION: Right basilar atelectasis.",
     "presence", "no"),
    ("Is the effusion on the left rather than the right?", "FINDINGS: Small left pleural "
     "effusion.", "position", "yes"),
    # "a true nodule" asks whether it truly is one: a doubt anywhere in the report makes it
    # possible; a nodule stated without doubt is yes
    ("Is that a true pulmonary nodule?", "FINDINGS: A 15 mm rounded opacity at the right "
     "base looks more nodular than on the last study. IMPRESSION: This could represent "
     "overlapping vessels or an actual pulmonary nodule.", "presence", "uncertain"),
    ("Is there a pulmonary nodule?", "FINDINGS: A 15 mm rounded opacity at the right base "
     "looks more nodular than on the last study. IMPRESSION: This could represent "
     "overlapping vessels or an actual pulmonary nodule.", "presence", "yes"),
    ("Is this a true nodule?", "FINDINGS: 8 mm nodule in the right upper lobe.", "presence",
     "yes"),
    ("Is this a true nodule?", "FINDINGS: No nodules.", "presence", "no"),
    # the place of what is pointed at is the subject's: a reading the report gives no place
    # of its own is answered as read there
    ("Is the basal opacity atelectasis?", "FINDINGS: A few basilar opacities. These may "
     "represent scarring or atelectasis.", "position", "uncertain"),
    ("Could the left opacity be atelectasis?", "FINDINGS: Patchy left basilar opacity. This "
     "is consistent with atelectasis.", "position", "yes"),
    ("Could the left opacity be atelectasis?", "FINDINGS: Patchy left basilar opacity. No "
     "atelectasis.", "position", "no"),
    ("Is the atelectasis basal?", "FINDINGS: A few basilar opacities. These may represent "
     "scarring or atelectasis.", "position", "unknown"),
    ("Could the effusion be large?", "IMPRESSION: Small right pleural effusion.", "severity",
     "no"),
    ("Is there pneumonia?", "FINDINGS: Right upper or middle lobe pneumonia.", "presence",
     "yes"),
    ("Is there a pneumothorax?", "FINDINGS: No pneumothorax or effusion.", "presence", "no"),
    # a finding given only as the report's likely reading is uncertain; stated, it is yes
    # (the OpenI de-identification masked every "likely": "XXXX representing")
    ("Is there atelectasis?", "IMPRESSION: Probable left basilar atelectasis.", "presence",
     "uncertain"),
    ("Is there pneumonia?", "IMPRESSION: Left lower lobe opacities XXXX representing "
     "pneumonia.", "presence", "uncertain"),
    ("Is there atelectasis?", "FINDINGS: Left basilar opacity XXXX atelectasis.", "presence",
     "uncertain"),
    ("Is there pulmonary edema?", "IMPRESSION: Cardiomegaly with suspected pulmonary edema.",
     "presence", "uncertain"),
    ("Is there pneumonia?", "FINDINGS: Opacity, probably atelectasis. IMPRESSION: Left lower "
     "lobe pneumonia.", "presence", "yes"),
    ("Is there atelectasis?", "FINDINGS: Probably no atelectasis.", "presence", "no"),
    # ... and so is each of a list of readings it offers, the last after "or" or two commas
    ("Is there a pleural effusion?", "IMPRESSION: Hazy lung bases, XXXX mix of atelectasis, "
     "consolidation, effusions.", "presence", "uncertain"),
    ("Is there a pleural effusion?", "IMPRESSION: Hazy bases, probable atelectasis, "
     "consolidation or effusion.", "presence", "uncertain"),
    ("Is there a pleural effusion?", "IMPRESSION: Hazy bases, probable atelectasis, "
     "effusion.", "presence", "yes"),
    ("Is there a pleural effusion?", "IMPRESSION: Hazy bases, probable atelectasis, "
     "consolidation. No effusion.", "presence", "no"),
    # "resolving or developing": one of two phases, not a resolution
    ("Is there pneumonia?", "IMPRESSION: This may represent resolving or developing "
     "pneumonia.", "presence", "uncertain"),
    ("Is there pneumonia?", "IMPRESSION: Resolving pneumonia.", "presence", "no"),
    # of several findings, the one in the place the question names
    ("Has the right midlung opacity improved?", "FINDINGS: Left midlung airspace opacity is "
     "unchanged. There is improved right midlung opacity.", "change", "yes"),
    ("Has the left midlung opacity improved?", "FINDINGS: Left midlung airspace opacity is "
     "unchanged. There is improved right midlung opacity.", "change", "no"),
    ("How large is the left effusion?", "FINDINGS: Small right pleural effusion measuring "
     "1 cm. Left pleural effusion measuring 3 cm.", "size", 30.0),
    ("How large is the right effusion?", "FINDINGS: Small right pleural effusion measuring "
     "1 cm. Left pleural effusion measuring 3 cm.", "size", 10.0),
    # "the largest" refers back to the findings before it
    ("Is the largest nodule over 5 mm?", "FINDINGS: Three nodules in the left lower lobe. "
     "The largest measures 3.5 mm.", "size", "no"),
    # a shift or curve named by its direction
    ("Which way is the mediastinum shifted?", "FINDINGS: Minimal right-to-left "
     "cardiomediastinal shift.", "position", ["left"]),
    ("Is the mediastinum shifted?", "FINDINGS: Minimal right-to-left cardiomediastinal "
     "shift.", "presence", "yes"),
    ("Is the mediastinum shifted?", "FINDINGS: No mediastinal shift.", "presence", "no"),
    ("Which way does the spine curve?", "FINDINGS: Mild spine dextrocurvature.", "position",
     ["right"]),
    ("Is the spine curved?", "FINDINGS: The spine is straight. No scoliosis.", "presence",
     "no"),
    # a qualifier's word that is the concept's own
    ("Are the pulmonary arteries enlarged?", "IMPRESSION: Enlargement of the central "
     "pulmonary arteries.", "presence", "yes"),
    ("Are the pulmonary arteries enlarged?", "FINDINGS: Normal heart size.", "presence", "no"),
    # the OpenI de-identification's "XXXX-A-XXXX" is a Port-A-Cath
    ("Where does the catheter terminate?", "FINDINGS: There is a XXXX-A-XXXX terminating at "
     "the caval atrial junction.", "position", ["caval atrial junction",
     "cavoatrial junction"]),
    # a change question about a label ruled out by a normal statement reads its change
    ("Has the heart size changed?", "FINDINGS: Heart size within normal limits and stable.",
     "change", "unchanged"),
    ("Has the heart size changed?", "FINDINGS: Heart size within normal limits.", "change",
     "unknown"),
    # ... said only by its change word; a change of another finding is not the heart's
    ("Has the heart size changed?", "FINDINGS: Stable heart size. Small left effusion.",
     "change", "unchanged"),
    ("Has the heart changed in size?", "FINDINGS: Heart size and mediastinal contours are "
     "unchanged.", "change", "unchanged"),
    ("Has the heart size changed?", "FINDINGS: No cardiomegaly. Stable left effusion.",
     "change", "unknown"),
    ("Has the heart size changed?", "FINDINGS: Stable left pleural effusion. The heart is "
     "not enlarged.", "change", "unknown"),
    # a heart at the top of normal is the normal heart size, with its change word
    ("Has the heart size changed?", "FINDINGS: The heart size is at the upper limits of "
     "normal but stable since the prior study.", "change", "unchanged"),
    ("Has the heart size changed?", "FINDINGS: Heart size near the upper limits of normal.",
     "change", "unknown"),
    ("Is the heart enlarged?", "FINDINGS: The cardiac silhouette is top normal in size.",
     "presence", "no"),
    ("Is there cardiomegaly?", "FINDINGS: Heart size upper limits of normal. Lungs clear.",
     "presence", "no"),
    ("Is the heart enlarged?", "FINDINGS: Heart at upper limits of normal to borderline "
     "enlarged.", "presence", "uncertain"),
    # ... and a question about a heart at the top of normal is the borderline heart
    ("Is the heart at the top end of normal size?", "FINDINGS: Heart size is at the upper "
     "limits of normal.", "presence", "yes"),
    ("Is the heart at the top end of normal size?", "IMPRESSION: Borderline cardiomegaly.",
     "presence", "yes"),
    ("Is the heart at the top end of normal size?", "FINDINGS: Normal heart size.",
     "presence", "no"),
    # ... asked as borderline with the heart's size named, and the top of normal said
    # without "of"
    ("Is the heart size borderline?", "IMPRESSION: Heart size upper limits normal. Lungs "
     "clear.", "presence", "yes"),
    ("Is the heart size borderline?", "FINDINGS: The heart is at upper limits normal.",
     "presence", "yes"),
    ("Is the heart size borderline?", "FINDINGS: The heart is normal in size.", "presence",
     "no"),
    ("Is the heart size borderline?", "FINDINGS: Heart size is borderline enlarged.",
     "presence", "yes"),
    ("Is there cardiomegaly?", "FINDINGS: Heart size is upper limits normal.", "presence",
     "no"),
    # a hilum's size is its enlargement's: graded where the report grades it, else unknown
    ("How large are the hila?", "FINDINGS: Both hila are prominent. Lungs clear.", "size",
     "unknown"),
    ("What is the size of the hila?", "FINDINGS: Moderately enlarged left hilum.", "size",
     "moderate"),
    ("How big is the hilum?", "FINDINGS: The lungs are clear.", "size", "unknown"),
    # a hedged finding's stated size answers a comparison of the finding pointed at; one
    # that asks whether there is such a finding stays hedged
    ("Is the nodule over a centimetre?", "IMPRESSION: Possible 1.8 cm nodule in the left "
     "lung base.", "size", "yes"),
    ("Is that nodule bigger than 3 cm?", "IMPRESSION: Possible 1.8 cm nodule in the left "
     "lung base.", "size", "no"),
    ("Is there a nodule bigger than 1 cm?", "IMPRESSION: Possible 1.8 cm nodule in the left "
     "lung base.", "size", "uncertain"),
    ("Is the heart size normal?", "FINDINGS: The heart is top normal in size.", "presence",
     "yes"),
    # a nodular opacity is the nodule a clinician asks about, where no nodule is named
    ("How large is the left lung nodule?", "IMPRESSION: 17 mm nodular opacity in the left "
     "lung and 10 mm nodular opacity in the right lung.", "size", 17.0),
    ("Is there a lung nodule?", "FINDINGS: No nodular opacity.", "presence", "no"),
    ("How large is the nodule?", "FINDINGS: 8 mm nodule in the right upper lobe. 17 mm "
     "nodular opacity in the left lung.", "size", 8.0),
    ("Is there pneumonia?", "IMPRESSION: Left base opacity may represent early infection.",
     "presence", "uncertain"),
    ("Is there pneumonia?", "IMPRESSION: No evidence of infection.", "presence", "no"),
    # counted place by place; one finding named twice in other words is one
    ("How many nodules are there?", "FINDINGS: Three nodules are present in the left lower "
     "lobe. Another nodule is present near the right hilum. IMPRESSION: Multiple nodules in "
     "both lungs.", "count", 4),
    ("How many nodules are there?", "FINDINGS: In the left lung base there is a 9 mm nodule. "
     "IMPRESSION: 9 mm left lower lobe pulmonary nodule.", "count", 1),
    ("How many nodules are there?", "FINDINGS: A 2 cm nodule in the left lower lobe. "
     "IMPRESSION: Left lower lobe nodule.", "count", 1),
    ("How many nodules are there?", "FINDINGS: Nodules in the left lower lobe. A nodule in "
     "the right upper lobe.", "count", "multiple"),
    # the OpenI de-identification's "Cardiac XXXX generator" is a pacemaker's
    ("Is there a pacemaker?", "FINDINGS: Cardiac XXXX generator leads over the right atrium "
     "and right ventricle.", "presence", "yes"),
    # a device's general words beside its name are part of it; beside another finding, not
    ("Is there a stimulator device?", "FINDINGS: A spinal stimulator is seen.", "presence",
     "yes"),
    ("Any implanted pacemaker?", "FINDINGS: Left chest wall pacemaker.", "presence", "yes"),
    ("Any implanted pacemaker?", "FINDINGS: Clear lungs.", "presence", "no"),
    ("Is there a nodule device?", "FINDINGS: Left lung nodule.", "unsupported", None),
    ("Is the left lung clear?", "FINDINGS: Clear left lung. Right middle lobe infiltrate.",
     "position", "yes"),
    ("Is the right lung clear?", "FINDINGS: Clear left lung. Right middle lobe infiltrate.",
     "position", "no"),
    # a comparison's "prior" names no concept (not the healed fracture's); "The appearance
    # is similar" refers back
    ("Have the rib fractures changed since the prior film?", "FINDINGS: Several bilateral "
     "rib fractures with callus formation. The appearance is similar to the prior chest "
     "radiograph.", "change", "unchanged"),
    ("Have the rib fractures changed since the prior film?", "FINDINGS: Several bilateral "
     "rib fractures.", "change", "unknown"),
    # "in good position": the report's word for a line well or badly placed, else unknown
    ("Is the PICC in good position?", "FINDINGS: Right PICC with tip in satisfactory "
     "position in the SVC.", "presence", "yes"),
    ("Is the PICC line in good position?", "IMPRESSION: Malpositioned right PICC line tip.",
     "presence", "no"),
    ("Is the ET tube appropriately positioned?", "FINDINGS: Endotracheal tube 4 cm above the "
     "carina.", "presence", "unknown"),
    ("Is the PICC in good position?", "FINDINGS: No lines or tubes.", "presence", "no"),
    # a zone word a concept's name adds is read in the finding's place
    ("Are the basal opacities getting worse?", "FINDINGS: Worsening opacities at both lung "
     "bases.", "change", "yes"),
    ("Are the basal opacities getting worse?", "FINDINGS: Worsening opacities in both upper "
     "lobes.", "change", "no"),
    # a hedge under the reader's own "no acute disease"; a positive finding still counts
    ("Is there acute disease?", "FINDINGS: Bony overlap could obscure a small nodule. "
     "IMPRESSION: No acute cardio pulmonary disease.", "study", "no"),
    ("Is there acute disease?", "FINDINGS: Bony overlap could obscure a small nodule.",
     "study", "uncertain"),
    ("Is there acute disease?", "FINDINGS: Left lower lobe pneumonia. IMPRESSION: No acute "
     "cardiopulmonary disease.", "study", "yes"),
    ("Is there any acute process?", "FINDINGS: Patchy basilar atelectasis. IMPRESSION: Low "
     "volume study without definite acute process.", "study", "no"),
    ("Is there any acute process?", "FINDINGS: Patchy basilar atelectasis.", "study", "yes"),
    # the place a narrower concept's name adds; a describing word is no place
    ("Which part of the spine shows degenerative change?", "FINDINGS: Degenerative changes "
     "of the thoracic spine.", "position", ["thoracic spine"]),
    # the whole part a narrower name adds where no narrower part is said (`place_wholes`)
    ("Where is the degenerative change?", "FINDINGS: Mild degenerative disease of the "
     "spine.", "position", ["spine"]),
    ("Where is the degenerative change?", "FINDINGS: Degenerative changes of the lumbar "
     "spine.", "position", ["lumbar spine"]),
    ("Where is the degenerative change?", "FINDINGS: Possible degenerative changes of the "
     "spine.", "position", ["spine"]),
    ("Where is the degenerative change?", "FINDINGS: No degenerative changes of the "
     "spine.", "position", "unknown"),
    ("Where is the granuloma?", "FINDINGS: Calcified granuloma.", "position", "unknown"),
    # "how many" with a unit asks a size; a size word is no measurement in that unit
    ("How many centimetres is the granuloma?", "FINDINGS: Large calcified granuloma in the "
     "right lower lobe.", "size", "unknown"),
    ("How many cm is the mass?", "FINDINGS: A 3 cm mass in the right upper lobe.", "size",
     3.0),
    ("How big is the granuloma?", "FINDINGS: Large calcified granuloma in the right lower "
     "lobe.", "size", "large"),
    ("How big is the granuloma: small, medium or large?", "FINDINGS: Huge calcified "
     "granuloma in the right lower lobe.", "size", "large"),
    # a general finding word: the report's findings of that word or of a concept it heads
    ("Where is the lesion located?", "FINDINGS: A 2 cm mass in the right upper lobe.",
     "position", ["right", "right upper lobe"]),
    ("How big is the lesion?", "FINDINGS: A 2 cm mass in the right upper lobe.", "size",
     20.0),
    ("Is there a lesion?", "FINDINGS: There is a lesion in the left upper lobe.", "presence",
     "yes"),
    ("Is there a lesion?", "FINDINGS: Small left pleural effusion.", "presence", "no"),
    ("Is there any abnormality?", "FINDINGS: Small left pleural effusion.", "study", "yes"),
    # "intubated": an ET tube; "too low": the other way round from "in good position"
    ("Is this patient intubated?", "FINDINGS: The patient is intubated.", "presence", "yes"),
    ("Is the ET tube too low?", "FINDINGS: Malpositioned endotracheal tube in the right main "
     "bronchus.", "presence", "yes"),
    ("Is the ET tube too low?", "FINDINGS: Endotracheal tube in satisfactory position.",
     "presence", "no"),
    # "a problem with the spine": any finding of that part of the body
    ("Is there a problem with the spine?", "FINDINGS: Minimal retrolisthesis of two lower "
     "thoracic vertebral bodies.", "presence", "yes"),
    ("Is there a problem with the spine?", "FINDINGS: Mild cardiomegaly.", "presence", "no"),
    ("Is something wrong with the heart?", "FINDINGS: Mild cardiomegaly.", "presence", "yes"),
    # a cardiac device's leads end where the device's tip was given
    ("Where do the pacemaker leads end?", "FINDINGS: Electronic cardiac device over the left "
     "chest wall with intact distal leads in the right heart.", "position", ["right heart"]),
    ("Is there a pacemaker?", "FINDINGS: Electronic cardiac device over the left chest wall.",
     "presence", "yes"),
    # "normal size" is the heart's polarity, not a size question; congestion is not edema
    ("Is the heart normal size?", "FINDINGS: The heart is normal in size.", "presence", "yes"),
    ("Is the heart normal size?", "FINDINGS: Moderate cardiomegaly.", "presence", "no"),
    ("How bad is the congestion?", "FINDINGS: Mild central pulmonary vascular congestion.",
     "severity", "mild"),
    ("Is there pulmonary edema?", "FINDINGS: Mild central pulmonary vascular congestion.",
     "presence", "no"),
    # a plural without a number is several
    ("How many rib fractures are there?", "FINDINGS: Chronic left-sided rib fractures.",
     "count", "multiple"),
    # surgery and other devices
    ("Has the patient had bypass surgery?", "FINDINGS: Status post CABG.", "presence", "yes"),
    ("Has the patient had heart surgery?", "FINDINGS: Status post CABG.", "presence", "yes"),
    ("Are there ureteral stents?", "FINDINGS: Ureteral stents are noted on the right.",
     "presence", "yes"),
    ("Is there a drain in the abdomen?", "FINDINGS: Drainage catheter overlying the right "
     "upper quadrant.", "presence", "yes"),
    # where a device ends, yes or no
    ("Is the PICC tip in the SVC?", "FINDINGS: Right PICC with tip in the SVC.", "position",
     "yes"),
    ("Is the catheter tip in the right atrium?", "FINDINGS: Right PICC with tip in the SVC.",
     "position", "no"),
    ("Is the PICC in the superior vena cava?", "FINDINGS: Right PICC.", "position",
     "unknown"),
    ("Is the PICC tip in the SVC?", "FINDINGS: No lines or tubes.", "position", "no"),
    # out of a report's reach
    ("What is the prognosis?", _PICC, "unsupported", None),
    ("What is the heart rate?", _PICC, "unsupported", None),
    # management, though "operation" names post-operative change and "fixation" a device
    ("Is the patient cleared for the operation?", _PICC, "unsupported", None),
    ("Does the effusion need an operation?", _EFFUSION, "unsupported", None),
    ("Does the PICC need to be pulled back?", _PICC, "unsupported", None),
    # ... and a blocker between the scattered words that name a concept is no word of it
    ("Does the rib fracture need surgical fixation?", "FINDINGS: Old right rib fracture.",
     "unsupported", None),
    ("Is there rib fixation hardware?", "FINDINGS: Old right rib fracture.", "presence", "no"),
    # a normal statement named without its "no" asks about the abnormality it rules out;
    # over a report silent on it the answer is unknown
    ("Any acute bony findings?", "FINDINGS: No acute bony findings.", "presence", "no"),
    ("Any acute bony findings?", "FINDINGS: The lungs are clear.", "presence", "unknown"),
    ("Are the lungs clear?", "FINDINGS: The lungs are clear.", "presence", "yes"),
    # a lay word or a spelling for a concept; a describing word of a finding not there
    ("Any broken bones?", "FINDINGS: Displaced fracture of the left clavicle.", "presence",
     "yes"),
    ("Any air space consolidation?", "FINDINGS: No air space consolidation.", "presence", "no"),
    ("Which arm is the PICC in?", "FINDINGS: Right upper extremity PIC catheter, tip in the "
     "SVC.", "position", ["right"]),
    ("Any suspicious lung lesion?", "FINDINGS: The lungs are clear.", "presence", "no"),
    # how much of a finding, in the finding's own adjective
    ("How low are the lung volumes?", "FINDINGS: Mildly low lung volumes.", "severity", "mild"),
    ("How hyperinflated are the lungs?", "FINDINGS: The lungs are markedly hyperinflated.",
     "severity", "severe"),
    # the whole study: acute in lay words; worse or better by the direction of its changes;
    # a measure of the study is refused, not answered yes
    ("Is there anything acute on this X-ray?", "IMPRESSION: No acute cardiopulmonary disease.",
     "study", "no"),
    ("Is the chest worse than before?", _EFFUSION, "study", "yes"),
    ("Is the chest worse than before?", "FINDINGS: Left effusion has decreased.", "study", "no"),
    ("Is the patient getting better?", "FINDINGS: Left effusion has decreased.", "study", "yes"),
    ("Is the chest worse than before?", "FINDINGS: Small left effusion.", "study", "unknown"),
    ("How severe is the abnormality?", "FINDINGS: Right upper lobe pneumonia.",
     "unsupported", None),
    # where a finding with no side or zone is: the place words of its own name or beside it
    ("Where is the spondylosis?", "FINDINGS: Thoracic spondylosis.", "position", ["thoracic"]),
    ("Where are the degenerative changes?", "FINDINGS: There are degenerative changes "
     "throughout the lumbar spine.", "position", ["lumbar spine"]),
    # a nodule named only as a possibility takes the size and place of the nodular opacity
    # the report measures; not one on the other side
    ("How big is the nodule in mm?", _POSSIBLE_NODULE, "size", 6.0),
    ("Is the nodule bigger than 1 cm?", _POSSIBLE_NODULE, "size", "no"),
    ("Which lobe is the nodule in?", _POSSIBLE_NODULE, "position", ["right", "right upper lobe"]),
    ("How big is the nodule in mm?", "FINDINGS: 6 mm nodular opacity in the right upper lobe. "
     "IMPRESSION: Possible left lower lobe nodule.", "size", "unknown"),
    # a finding seen, by its general word, asked to be read as the one named
    ("Could the opacity be pneumonia?", "FINDINGS: Right basilar opacity, possibly pneumonia.",
     "presence", "uncertain"),
    ("Does the opacity represent pneumonia?", "FINDINGS: Right basilar opacity. No pneumonia.",
     "presence", "no"),
    ("Is that density a lung nodule?", "FINDINGS: Round density in the left upper lobe, may "
     "represent a pulmonary nodule.", "presence", "uncertain"),
    # the views taken; they leave a normal study normal
    ("Was a lateral view done?", _TWO_VIEWS, "presence", "yes"),
    ("Were frontal and lateral views obtained?", _TWO_VIEWS, "presence", "yes"),
    ("Was a frontal view done?", _TWO_VIEWS, "presence", "yes"),
    ("Was a lateral view done?", "FINDINGS: Single frontal view. The lungs are clear.",
     "presence", "no"),
    ("Is this a normal chest film?", _TWO_VIEWS, "study", "yes"),
    # the side a device sits on, though its leads end on the other ("chest wall" is a place)
    ("Which side is the pacemaker on?", "FINDINGS: Electronic cardiac device overlying the "
     "left chest wall with leads in the right heart.", "position", ["left"]),
    # which side is worse, no finding named: the report's own comparison, else the one side
    ("Which lung is worse?", "IMPRESSION: Bilateral upper lobe consolidation, right greater "
     "than left.", "study", ["right"]),
    ("Which side is more affected?", "FINDINGS: Left lower lobe pneumonia.", "study", ["left"]),
    ("Which lung is bigger?", "FINDINGS: Left lower lobe pneumonia.", "unsupported", None),
    # the state of a finding with a normal state: normal, its grade, or unknown if unsaid
    ("How big is the heart?", "FINDINGS: The heart is normal in size.", "size", "normal"),
    ("What is the heart size?", "FINDINGS: The heart is not enlarged.", "severity", "normal"),
    ("What is the heart size?", "FINDINGS: Mild cardiomegaly.", "severity", "mild"),
    ("What is the heart size?", "FINDINGS: Small left effusion.", "severity", "unknown"),
    # one side asked: a mention of that side alone decides over a bilateral one
    ("Is there a right pleural effusion?", _ONE_SIDE_HEDGED, "position", "uncertain"),
    ("Is there a left pleural effusion?", _ONE_SIDE_HEDGED, "position", "yes"),
    # the lobes the abnormal findings name
    ("How many lobes are involved?", "FINDINGS: Consolidation in the left lower lobe. Patchy "
     "infiltrate in the right lower lobe.", "study", 2),
    # a reading in lay words; a predicate form; surgery by what it leaves; a hedge "perhaps"
    ("Does this fit with COPD?", "IMPRESSION: COPD.", "presence", "yes"),
    ("Is the aorta tortuous?", "FINDINGS: The thoracic aorta is tortuous.", "presence", "yes"),
    ("Has the gallbladder been taken out?", "FINDINGS: Cholecystectomy clips.", "presence",
     "yes"),
    ("Has the gallbladder been removed?", "FINDINGS: Surgical clips, perhaps from "
     "cholecystectomy.", "presence", "uncertain"),
    # a part of the body, changed or not: its normal statements' change
    # a whole sentence's normal statement whose subject names the part
    ("Any change in the heart or mediastinum?", "FINDINGS: Cardiomediastinal silhouette and "
     "pulmonary vasculature are stable and within normal limits.", "change", "unchanged"),
    ("Has the heart size changed?", "FINDINGS: Heart size and pulmonary vascularity are "
     "unchanged and within normal limits.", "change", "unchanged"),
    ("Has the mediastinum changed?", "FINDINGS: Lungs and pleura are stable and within "
     "normal limits.", "change", "unknown"),
    ("Has the heart size changed?", "FINDINGS: Heart size and pulmonary vascularity are "
     "within normal limits.", "change", "unknown"),
    ("Has the mediastinum changed?", "FINDINGS: Stable cardiomediastinal silhouette.",
     "change", "unchanged"),
    ("Has the mediastinum changed?", "FINDINGS: Normal cardiomediastinal silhouette.",
     "change", "unknown"),
    # an age not known is no hedge on the finding; a vertebra "wedged"; the spine's parts
    # beside it, each a term
    ("Is there a compression deformity?", "FINDINGS: Age-indeterminate compression deformity "
     "of T12.", "presence", "yes"),
    ("Is one of the vertebrae wedged?", _WEDGE, "count", "yes"),
    ("At what level is the wedged vertebra?", _WEDGE, "position",
     ["lower thoracic spine", "lower thoracic"]),
    # "changed in size" asks how it changed; "a centimetre" is one; "one lung or both" asks
    # the side
    ("Has the hiatal hernia changed in size?", "FINDINGS: Large hiatal hernia, unchanged.",
     "change", "unchanged"),
    ("Is the granuloma over a centimetre?", "FINDINGS: 8 mm calcified granuloma in the right "
     "base.", "size", "no"),
    ("Are the interstitial opacities in one lung or both?", "FINDINGS: Bilateral interstitial "
     "opacities.", "position", ["bilateral"]),
    # a normal structure called stable is unchanged
    ("Has anything changed since the prior film?", "FINDINGS: Stable cardiomediastinal "
     "silhouette. No pleural effusion.", "study", "no"),
    # "acute lung problem" is the whole study's acute question
    ("Any acute lung problem on this film?", "FINDINGS: Clear lungs. IMPRESSION: No acute "
     "disease.", "study", "no"),
    ("Any acute lung problem on this film?", "FINDINGS: Right lower lobe pneumonia.",
     "study", "yes"),
    # "multilevel" and a plural beside a single one are several; Latin plurals are plurals
    ("How many levels of the spine are degenerate?", "FINDINGS: Multilevel degenerative "
     "changes of the spine.", "count", "multiple"),
    ("How many granulomas are there?", "FINDINGS: A 4 mm granuloma in the right apex and "
     "left hilar granulomas.", "count", "multiple"),
    ("How many granulomas are there?", "FINDINGS: Calcified granulomata in the left lung.",
     "count", "multiple"),
    ("How many granulomas are there?", "FINDINGS: Calcified granuloma in the left lung.",
     "count", 1),
    # a fracture's age: "fresh" asks whether it is acute; "prior" surgery is surgery
    ("Is the rib fracture a fresh injury?", "FINDINGS: Old left rib fracture.", "presence",
     "no"),
    ("Any evidence of prior coronary bypass surgery?", "FINDINGS: Status post CABG.",
     "presence", "yes"),
    ("Any evidence of prior coronary bypass surgery?", "FINDINGS: Clear lungs.", "presence",
     "no"),
    # plural place cues; a lay word for degenerative change; a word from the concept's own name
    ("Which lobes are affected by the bronchial thickening?", "FINDINGS: Bronchial wall "
     "thickening in both lower lobes.", "position", ["bilateral", "lower", "lower lobes"]),
    ("At what levels are the spine fractures?", "FINDINGS: Compression fractures of T7 and "
     "T11.", "position", ["T7", "T11"]),
    ("Any wear and tear in the spine?", "FINDINGS: Mild degenerative changes of the spine.",
     "presence", "yes"),
    ("Is there an atrial septal closure device?", "FINDINGS: Septal occluder in place.",
     "presence", "yes"),
    # the aorta's calcification is also said as its atherosclerosis; plurals of -ar nouns
    ("Is there calcification of the aorta?", "FINDINGS: Atherosclerotic calcifications of "
     "the aorta.", "presence", "yes"),
    ("Is there calcification of the aorta?", "FINDINGS: Normal aorta.", "presence", "no"),
    ("Is there any scarring in the lungs?", "FINDINGS: Apical scars, unchanged.", "presence",
     "yes"),
    # a borderline heart is hedged; "significantly" grades it
    ("Is the heart enlarged?", "FINDINGS: Borderline enlarged heart.", "presence",
     "uncertain"),
    ("Is the heart enlarged?", "FINDINGS: The heart is enlarged.", "presence", "yes"),
    ("How enlarged is the heart: mild, moderate or severe?", "FINDINGS: The heart is "
     "significantly enlarged.", "severity", "moderate"),
    # a granuloma the report gives as granulomatous disease
    ("Is there a granuloma?", "FINDINGS: Nodule in the left base, suggesting prior "
     "granulomatous disease.", "presence", "uncertain"),
    # a previous granulomatous process is an old one
    ("Is the nodule an old granuloma?", "FINDINGS: Dense left basilar nodule suggests a "
     "previous granulomatous process.", "presence", "uncertain"),
    ("Is the nodule an old granuloma?", "FINDINGS: Dense left basilar nodule suggests a "
     "granulomatous process.", "presence", "no"),
    # a finding called negative before it is ruled out
    ("Is this film normal?", "IMPRESSION: Negative acute cardiopulmonary abnormality.",
     "study", "yes"),
    ("Is this film normal?", "IMPRESSION: Acute cardiopulmonary abnormality.", "study", "no"),
    # ... and the granulomas a report sees are its old granulomatous disease
    ("Any sign of old granulomatous disease?", "FINDINGS: Two calcified granulomas in the "
     "right lung.", "presence", "yes"),
    ("Any sign of old granulomatous disease?", "FINDINGS: No calcified granulomas.",
     "presence", "no"),
    ("Any sign of old granulomatous disease?", "FINDINGS: Right apical nodule, possibly a "
     "granuloma.", "presence", "uncertain"),
    # degenerative joint disease of the spine is its degenerative change
    ("Is there DJD of the thoracic spine?", "FINDINGS: Moderate degenerative changes of the "
     "thoracic spine.", "presence", "yes"),
    ("Is there DJD of the thoracic spine?", "FINDINGS: Clear lungs. Normal heart size.",
     "presence", "no"),
    # lungs said to be poorly inflated or under-expanded have low volumes
    ("Are the lungs poorly inflated?", "IMPRESSION: Low lung volumes, otherwise clear.",
     "presence", "yes"),
    ("Are the lungs under-expanded?", "FINDINGS: The lungs are well expanded and clear.",
     "presence", "no"),
    ("Are the lung volumes low?", "FINDINGS: Underexpanded lungs with basilar atelectasis.",
     "presence", "yes"),
    # one of two readings, a masked word between them or not
    ("Is it atelectasis?", "FINDINGS: Small area of scarring or XXXX atelectasis in the "
     "lingula.", "presence", "uncertain"),
    ("Is it atelectasis?", "FINDINGS: Small area of XXXX atelectasis in the lingula.",
     "presence", "yes"),
    # a reading the report allows, not one it makes
    ("Is there reactive airways disease?", "IMPRESSION: Perihilar opacity. These can be "
     "manifestations of reactive airways disease.", "presence", "uncertain"),
    ("Is there reactive airways disease?", "IMPRESSION: Perihilar opacity from reactive "
     "airways disease.", "presence", "yes"),
    # how many views: as the report names them
    ("How many views were taken?", "FINDINGS: PA and lateral views of the chest. Clear "
     "lungs.", "study", 2),
    ("How many views were taken?", "FINDINGS: Single AP view of the chest. Clear lungs.",
     "study", 1),
    ("How many views were taken?", "FINDINGS: Clear lungs.", "study", "unknown"),
    # a number of views the report states in words
    ("How many images were taken?", "FINDINGS: Three total images. Clear lungs.", "study", 3),
    ("How many views were taken?", "FINDINGS: 3 views of the chest. Clear lungs.", "study", 3),
    # an infiltrate offered as a reading is a possible pneumonia; airspace opacity called
    # atelectasis is not
    ("Is there pneumonia?", "FINDINGS: Streaky right basilar opacity, atelectasis or "
     "infiltrate.", "presence", "uncertain"),
    ("Is there pneumonia?", "FINDINGS: Bibasilar airspace opacities compatible with "
     "atelectasis.", "presence", "no"),
    ("Is there pneumonia?", "FINDINGS: No pneumonia. Streaky right basilar atelectasis or "
     "infiltrate.", "presence", "no"),
    # airspace disease or a lung lesion the report itself hedges is a possible pneumonia or
    # tumour; stated outright, or ruled out, it is not
    ("Could this be pneumonia?", "IMPRESSION: Small right basilar opacity, may represent "
     "subsegmental atelectasis or early airspace disease.", "presence", "uncertain"),
    ("Could this be pneumonia?", "IMPRESSION: Right basilar airspace disease, likely "
     "atelectasis.", "presence", "no"),
    ("Could this be pneumonia?", "FINDINGS: No focal airspace disease.", "presence", "no"),
    ("Could the density be a lung tumour?", "IMPRESSION: Rounded density over the left "
     "second rib. An underlying pulmonary lesion cannot be excluded.", "presence", "uncertain"),
    ("Could the density be a lung tumour?", "IMPRESSION: Rounded density over the left "
     "second rib, likely bony. No pulmonary lesion.", "presence", "no"),
    # a part named with what was done to it ("replaced": its replacement); which valve
    ("Which shoulder has been replaced?", "FINDINGS: Right shoulder replacement.", "position",
     ["right"]),
    ("Which valve has been replaced?", "FINDINGS: Prior mitral valve replacement.",
     "position", ["mitral"]),
    # a lead or line is where it ends, unless the question asks its way in
    ("Where are the pacemaker leads?", "FINDINGS: Pacemaker leads in the right ventricle.",
     "position", ["right ventricle"]),
    ("Where was the central line inserted?", "FINDINGS: Left internal jugular catheter with "
     "its tip in the SVC.", "position", ["left", "internal jugular"]),
    # a question in the past tense asks where a finding the report says is gone was
    ("Which side was the PICC on?", "FINDINGS: The left arm PICC has since been removed.",
     "position", ["left"]),
    ("Which side is the PICC on?", "FINDINGS: The left arm PICC has since been removed.",
     "position", "unknown"),
    ("Which side was the PICC on?", "FINDINGS: No PICC. Clear lungs.", "position", "unknown"),
    # ... or as not seen on this study, named against an earlier one
    ("Where was the nodule?", "FINDINGS: The earlier left upper lobe nodule is not well seen "
     "on today's exam.", "position", ["left", "left upper lobe"]),
    ("Where is the nodule?", "FINDINGS: The earlier left upper lobe nodule is not well seen "
     "on today's exam.", "position", "unknown"),
    ("Where was the nodule?", "FINDINGS: No left upper lobe nodule.", "position", "unknown"),
    # a part called stable in a predicate; lungs "expanded" have not changed
    ("Has the mediastinum changed?", "FINDINGS: The mediastinum is stable. Clear lungs.",
     "change", "unchanged"),
    ("Have the hila changed?", "FINDINGS: Hilar contours are stable.", "change", "unchanged"),
    ("Any interval change?", "FINDINGS: Both lungs are clear and expanded.", "study",
     "unknown"),
    # a size without a measurement: the report's size word, else the grade; a measurement
    # asked for is not a word
    ("How big is the effusion?", "FINDINGS: Small left pleural effusion.", "size", "small"),
    ("How big is the heart?", "FINDINGS: Mild cardiomegaly.", "size", "mild"),
    ("What does the hernia measure?", "FINDINGS: Large hiatal hernia.", "size", "unknown"),
    ("What does the hernia measure?", "FINDINGS: A 6 cm hiatal hernia.", "size", 60.0),
    # predicate forms of a finding: a raised hemidiaphragm, a prominent left ventricle
    ("Which hemidiaphragm is raised?", "FINDINGS: The right hemidiaphragm is mildly "
     "elevated.", "position", ["right"]),
    ("Is the left ventricle prominent?", "FINDINGS: Normal heart size with prominent left "
     "ventricular contour.", "position", "yes"),
    # spondylosis is degenerative disease of the spine
    ("Is there spondylosis?", "FINDINGS: Mild degenerative changes of the thoracic spine.",
     "presence", "yes"),
    # the heart's size is the default reading of "heart", not where a device is named
    ("Which heart valve has been replaced?", "FINDINGS: Aortic valve replacement.",
     "position", ["aortic"]),
    ("Is the heart normal size?", "FINDINGS: Normal heart size.", "presence", "yes"),
    # atherosclerosis is what a radiograph sees as calcification
    ("Is the aorta calcified?", "FINDINGS: Tortuous aorta with atherosclerotic "
     "calcification.", "presence", "yes"),
    ("Is the aorta calcified?", "FINDINGS: Tortuous aorta.", "presence", "no"),
    # a line or lead that moved: how it changed
    ("Have the pacer leads moved?", "FINDINGS: Stable position of the pacemaker leads.",
     "change", "unchanged"),
    ("Has the mediastinum shifted?", "FINDINGS: Mediastinal shift to the left.", "presence",
     "yes"),
    # "compressed" vertebrae are a compression deformity
    ("How many vertebrae are compressed?", "FINDINGS: Compression deformity of T8.", "count",
     1),
    # a describing word names no second finding; a spine finding's place is in the spine
    ("Is the granuloma calcified?", "FINDINGS: 8 mm calcified granuloma in the right base.",
     "presence", "yes"),
    ("Is the granuloma calcified?", "FINDINGS: 8 mm granuloma in the right base.",
     "presence", "no"),
    ("Where in the spine is the wedge deformity?", "FINDINGS: Mild wedge deformity of a "
     "midthoracic vertebral body.", "position", ["mid thoracic spine", "midthoracic"]),
    # "features of" is "evidence of"; "how hyperexpanded" asks how much; a finding named
    # with "post" is still in the list "no evidence of" denies
    ("Any features of tuberculosis?", "IMPRESSION: No evidence of pneumonia or post primary "
     "tuberculosis infection.", "presence", "no"),
    ("How hyperexpanded are the lungs?", "FINDINGS: The lungs are mildly hyperexpanded.",
     "severity", "mild"),
    # "What is abnormal?": the abnormal findings by name (hedged ones as possible), of the
    # place named; "normal" when there are none
    ("What is abnormal in this x-ray?", "FINDINGS: Heart is mildly enlarged. Small left "
     "pleural effusion. Right IJ central venous catheter. Possible right basilar "
     "atelectasis.", "study", ["cardiomegaly", "pleural effusion",
                               "possible basilar atelectasis"]),
    ("What is abnormal on the left?", "FINDINGS: Small left pleural effusion. Right basilar "
     "atelectasis.", "study", ["pleural effusion"]),
    ("What are the findings?", "FINDINGS: The lungs are clear. IMPRESSION: No acute "
     "cardiopulmonary abnormality.", "study", "normal"),
    # an ordinal is no word: "old" still stands beside the fractures
    ("Are the rib fractures acute?", "FINDINGS: Old healed right 5th and 6th rib fractures.",
     "presence", "no"),
    # a heart compared with nothing has not said whether it grew; "recent" asks the age
    ("Has the heart got bigger since last time?", "FINDINGS: Heart is at the upper limits "
     "of normal size.", "change", "unknown"),
    ("Are the rib fractures recent?", "FINDINGS: Old left rib fractures.", "presence", "no"),
    ("Are the rib fractures recent?", "FINDINGS: Acute left rib fracture.", "presence", "yes"),
    # new in the report's other words
    ("Is the nodule new?", "FINDINGS: There is a 9 mm nodule in the right lower lobe, not "
     "seen on prior exams.", "change", "yes"),
    ("Are these nodules new?", "FINDINGS: There has been development of multiple nodules in "
     "both lungs.", "change", "yes"),
    # other names of the same thing
    ("How many calcified granulomas are there?", "FINDINGS: Scattered calcified nodules "
     "compatible with granulomatous disease.", "count", "multiple"),
    # ... a place, size or grade is the named one's own where the report has it
    ("Where is the calcified granuloma?", "FINDINGS: Calcified granuloma in the right upper "
     "lung and a calcified nodule at the left base.", "position", ["right", "upper",
     "upper lung"]),
    ("Where is the calcified granuloma?", "FINDINGS: Calcified nodule at the left base.",
     "position", ["left", "basilar", "base"]),
    # a grade said of the finding again without its place: the placed one's grade
    ("How bad are the opacities at the bases?", "FINDINGS: Streaky opacities at both lung "
     "bases. IMPRESSION: Mild opacities, likely atelectasis.", "severity", "mild"),
    ("How bad are the opacities at the bases?", "FINDINGS: Streaky opacities at both lung "
     "bases. IMPRESSION: Mild left upper lobe opacity.", "severity", "unknown"),
    ("Is there a coronary stent?", "FINDINGS: Coronary vascular stent.", "presence", "yes"),
    ("Is there calcium in the aorta?", "FINDINGS: Aortic calcification.", "presence", "yes"),
    ("Which lungs have nodules?", "FINDINGS: Nodules in both lungs.", "position",
     ["bilateral"]),
    ("Which breast was removed?", "FINDINGS: Left mastectomy.", "position", ["left"]),
    ("Could there be fluid around the heart?", "FINDINGS: Question pericardial effusion.",
     "presence", "uncertain"),
    ("How raised is the right diaphragm?", "FINDINGS: The right hemidiaphragm is mildly "
     "elevated.", "severity", "mild"),
    # a disease's history is not the study's; an operation's is
    ("Has the patient had TB?", "FINDINGS: Calcified granulomas.", "unsupported", None),
    ("Has the patient had a mastectomy?", "FINDINGS: Left mastectomy.", "presence", "yes"),
    # the cardiothoracic ratio is a measurement of the heart a report rarely gives
    ("What is the cardiothoracic ratio?", "FINDINGS: Mild cardiomegaly.", "size", "unknown"),
    # a nodule or mass named twice: once measured, once not, on the same side and place
    ("How big is the hilar mass?", "FINDINGS: A 3.0 cm nodule is seen in the right hilum. "
     "IMPRESSION: Unchanged right hilar mass.", "size", 30.0),
    ("How big is the mass?", "FINDINGS: A 2 cm nodule in the left upper lobe. IMPRESSION: "
     "Left upper lobe mass.", "size", 20.0),
    ("How big is the nodule?", "FINDINGS: A 2 cm mass in the left upper lobe. IMPRESSION: "
     "Left upper lobe nodule.", "size", 20.0),
    ("How big is the hilar mass?", "FINDINGS: A 3.0 cm nodule in the left hilum. "
     "IMPRESSION: Right hilar mass.", "size", "unknown"),
    ("How big is the mass?", "FINDINGS: A 2 cm nodule in the left upper lobe. IMPRESSION: "
     "Left lower lobe mass.", "size", "unknown"),
    ("How big is the mass?", "FINDINGS: A 2 cm nodule in the left upper lobe. IMPRESSION: "
     "Possible left upper lobe mass.", "size", "unknown"),
    # how much height a vertebra lost, how much fluid in mL: a measurement, not the grade
    ("How much height has the vertebra lost?", "FINDINGS: Slight wedge deformity of a "
     "midthoracic vertebral body.", "size", "unknown"),
    ("How much vertebral height is lost?", "FINDINGS: No compression deformity.", "size",
     "unknown"),
    ("Is there vertebral height loss?", "FINDINGS: Mild anterior wedging of a lower thoracic "
     "vertebral body.", "presence", "yes"),
    ("How much fluid is there in mL?", "FINDINGS: Small left pleural effusion.", "size",
     "unknown"),
    ("How much fluid is there?", "FINDINGS: Small left pleural effusion.", "severity", "mild"),
    ("Which arm is broken?", "FINDINGS: Fracture of the left humeral neck.", "position",
     ["left"]),
    # one finding by either of two names: where the report's reading is
    ("Where is the area of atelectasis or infiltrate?", "FINDINGS: Small area of "
     "atelectasis or infiltrate in the right lower lobe.", "position",
     ["right", "right lower lobe"]),
    ("Where are the effusion and the pneumothorax?", "FINDINGS: Small left effusion. Small "
     "right pneumothorax.", "unsupported", None),
    # "early" narrows nothing a report's reading tells apart
    ("Could this be an early pneumonia?", "FINDINGS: Left upper lobe opacity may represent "
     "early infiltrate.", "presence", "uncertain"),
    # a clause that only dates the question by a device; "active"; arthritis of the spine
    ("Is there a pneumothorax now the drains are out?", "FINDINGS: Chest tubes removed. No "
     "pneumothorax.", "presence", "no"),
    ("Any pneumothorax after the line went in?", "FINDINGS: Right PICC. Small right apical "
     "pneumothorax.", "presence", "yes"),
    # ... or by a procedure the film is taken ahead of
    ("Any acute findings before surgery?", "FINDINGS: Lungs are clear. Old granulomas. "
     "IMPRESSION: No acute findings.", "study", "no"),
    ("Any acute findings prior to the procedure?", "FINDINGS: Dense right lower lobe "
     "consolidation.", "study", "yes"),
    ("Is there a pneumothorax ahead of the procedure?", "FINDINGS: Small left apical "
     "pneumothorax.", "presence", "yes"),
    ("Any sign of active TB?", "IMPRESSION: No evidence of active tuberculosis.", "presence",
     "no"),
    ("Any arthritis in the spine?", "FINDINGS: Degenerative changes of the thoracic spine.",
     "presence", "yes"),
    # effusions named in the plural are both; a reader's "no acute or active ... disease"
    ("Are the effusions on one side or both?", "IMPRESSION: Small volume effusions.",
     "position", ["bilateral"]),
    ("Any acute process?", "FINDINGS: Reduced lung volumes with basilar atelectasis. "
     "IMPRESSION: No acute or active cardiac, pulmonary or pleural disease.", "study", "no"),
    # a place of the mediastinum in the finding's own words or beside it
    ("Where are the surgical clips?", "FINDINGS: Mediastinal clips are unchanged.", "position",
     ["mediastinal"]),
    ("Where is the calcified node?", "FINDINGS: Calcified aortopulmonary lymph node.",
     "position", ["aortopulmonary window", "aortopulmonary"]),
    # the higher hemidiaphragm is the elevated one; hypoinflated and over-expanded lungs
    ("Which hemidiaphragm is higher?", "FINDINGS: Elevated right hemidiaphragm.", "position",
     ["right"]),
    ("How hypoinflated are the lungs?", "FINDINGS: The lungs are mildly hypoinflated.",
     "severity", "mild"),
    # the finding's own state word after "how" asks its grade
    ("How poorly inflated are the lungs?", "FINDINGS: The lungs are mildly hypoinflated.",
     "severity", "mild"),
    ("How hyperlucent are the lungs?", "FINDINGS: The lungs are moderately hyperlucent.",
     "severity", "moderate"),
    ("How dense is the haziness?", "FINDINGS: Slight haziness at the right base.",
     "severity", "mild"),
    ("How dense is the haziness?", "FINDINGS: Haziness at the right base.", "severity",
     "unknown"),
    ("How low are the lung volumes?", "FINDINGS: Very low lung volumes.", "severity",
     "severe"),
    ("How dense is the haziness?", "FINDINGS: No haziness. Lungs are clear.", "severity",
     "unknown"),
    ("Are the lungs over-expanded?", "FINDINGS: Mild hyperexpansion.", "presence", "yes"),
    ("Are the lungs over-expanded?", "FINDINGS: Lungs are clear and expanded.", "presence",
     "no"),
    # a side inside the report's phrase; the de-identified "aortic XXXX"; a telegraphic
    # "No change <finding>" keeps the finding
    ("How bad is the shoulder arthritis?", "FINDINGS: Severe degenerative changes of the "
     "left shoulder.", "severity", "severe"),
    ("Is there calcification of the aorta?", "FINDINGS: Calcifications of the aortic XXXX "
     "are noted.", "presence", "yes"),
    ("Is there interstitial lung disease?", "FINDINGS: No change chronic interstitial lung "
     "disease.", "presence", "yes"),
    # "lines" are vascular catheters; a concept listed with a label is asked of too;
    # "collapse" alone is atelectasis
    ("Any pacemaker or lines?", "FINDINGS: Clear lungs. No pneumothorax.", "presence", "no"),
    ("Any pacemaker or lines?", "FINDINGS: Right PICC with tip in the SVC.", "presence",
     "yes"),
    ("Is there an effusion or a pacemaker?", "FINDINGS: Left chest wall pacemaker. No "
     "effusion.", "presence", "yes"),
    ("Is there an effusion or a pacemaker?", "FINDINGS: No effusion.", "presence", "no"),
    ("Any collapse at the bases?", "FINDINGS: Bibasilar atelectasis.", "position", "yes"),
    # an unchanged or stable silhouette and contours say how the part compares
    ("Has the heart outline changed since before?", "FINDINGS: Frontal and lateral views "
     "show an unchanged cardiomediastinal silhouette.", "change", "unchanged"),
    ("Have the mediastinal contours changed?", "FINDINGS: Heart size within normal limits, "
     "stable mediastinal and hilar contours.", "change", "unchanged"),
    # a describing word of the report's own beside the broader finding; a process is not
    # counted, things named in the plural are
    ("Where are the streaky opacities?", "FINDINGS: Streaky perihilar opacities.",
     "position", ["perihilar"]),
    ("How many granulomas are there?", "FINDINGS: Residuals of prior granulomatous "
     "infection.", "count", "unknown"),
    ("How many granulomas are there?", "FINDINGS: Calcified granulomas.", "count",
     "multiple"),
    ("How many views were taken?", "FINDINGS: 2 images. Clear lungs.", "study", 2),
    ("How many levels are degenerate?", "FINDINGS: Degenerative changes of the thoracic "
     "spine.", "count", "unknown"),
    ("Is there disc degeneration?", "FINDINGS: Normal thoracic spine.", "presence", "no"),
    # a site the question names picks the finding there among several
    ("Where is the mediastinal opacity?", "FINDINGS: Bibasilar airspace opacities. Stable "
     "right upper mediastinal opacity.", "position",
     ["right", "upper mediastinum", "upper mediastinal"]),
    # a describing word of an open question picks the finding so described among several;
    # supra- and infrahilar are perihilar places
    ("Where is the calcified nodule?", "FINDINGS: Right upper lobe nodule. Calcified nodule "
     "in the left lower lobe.", "position", ["left", "left lower lobe"]),
    ("Where is the dense nodule?", "FINDINGS: Dense nodule in the left suprahilar lung.",
     "position", ["left", "perihilar", "suprahilar"]),
    # a change the next sentence gives in other words of the prior study
    ("Is the opacity in the right midlung new?", "FINDINGS: There is a focal area of "
     "opacity in the right midlung zone. This was not present on the recent prior study.",
     "change", "yes"),
    # a sentence that says the whole study is as before
    ("Has anything changed since the last film?", "FINDINGS: Heart size normal. "
     "IMPRESSION: Stable chest.", "study", "no"),
    ("Has anything changed since the last film?", "FINDINGS: Heart size normal. "
     "IMPRESSION: Stable left chest wall pacemaker generator. New right effusion.", "study",
     "yes"),
    ("Any change since the last film?", "IMPRESSION: Normal heart size. Lungs clear. "
     "Unchanged.", "study", "no"),
    ("Has anything changed compared with the old CT?", "IMPRESSION: Emphysema. Findings are "
     "grossly unchanged compared with the prior CT.", "study", "no"),
    ("Has anything changed compared with the old CT?", "IMPRESSION: Emphysema.", "study",
     "unknown"),
    # an abnormality denied since the prior study: nothing is new
    ("Anything new since the previous radiograph?", "IMPRESSION: Mild bibasilar "
     "hypoventilation. No new acute abnormalities since the previous chest radiograph.",
     "study", "no"),
    ("Any new acute abnormality since the prior CXR?", "IMPRESSION: Subsegmental atelectasis "
     "at the right base. No acute abnormality since the prior study.", "study", "no"),
    ("Any new acute abnormality since the prior CXR?", "IMPRESSION: New right lower lobe "
     "consolidation. No other acute abnormality.", "study", "yes"),
    ("Anything new since the previous radiograph?", "IMPRESSION: Mild bibasilar "
     "hypoventilation. No acute abnormalities.", "study", "unknown"),
    # a whole-study change cue said of a part: the part's change, else the study's
    ("Has the mediastinum changed since the last film?", "FINDINGS: The mediastinum is "
     "stable. Increased opacities at the right base.", "change", "unchanged"),
    ("Has the mediastinum changed since the last film?", "FINDINGS: Clear lungs and normal "
     "mediastinal contour. Stable chest.", "change", "no"),
    ("Has the mediastinum changed since the last film?", "FINDINGS: Clear lungs and normal "
     "mediastinal contour.", "change", "unknown"),
    # "Was X there before?": any change but new
    ("Was the rib irregularity there before?", "FINDINGS: Irregularity of the right 7th rib.",
     "change", "unknown"),
    ("Was the effusion there before?", "FINDINGS: Small left effusion, increased.", "change",
     "yes"),
    ("Was the nodule present before?", "FINDINGS: New right upper lobe nodule.", "change",
     "no"),
    # a new enlargement asked about by its size has grown
    ("Has the heart size changed since last time?", "IMPRESSION: Interval development of "
     "cardiomegaly.", "change", "increased"),
    ("Has the heart changed since last time?", "IMPRESSION: Interval development of "
     "cardiomegaly.", "change", "new"),
    ("Has the nodule changed in size?", "IMPRESSION: New right upper lobe nodule.", "change",
     "new"),
    # "What has X done since ...?" asks its change
    ("What has the left basal atelectasis done since the prior?", "IMPRESSION: Decrease in "
     "left basilar atelectasis.", "change", "decreased"),
    # a finding with no change of its own in a study called as before is unchanged
    ("Is this density new?", "IMPRESSION: Stable appearing chest. Small nodular density "
     "at the left base, likely a granuloma.", "change", "no"),
    ("Is this density new?", "IMPRESSION: Small nodular density at the left base, likely a "
     "granuloma.", "change", "unknown"),
    ("Is the effusion new?", "IMPRESSION: New right effusion. Otherwise unchanged.", "change",
     "yes"),
    ("Is the density new?", "IMPRESSION: Stable chest. Possible nodular density at the left "
     "base.", "change", "no"),
    # how the abnormal findings of a place compare
    ("Has the right base abnormality changed since the prior?", "FINDINGS: Right basilar "
     "opacity, decreased since the prior. Left lung clear.", "study", "yes"),
    ("Has the left basal finding changed since the last film?", "FINDINGS: Stable left "
     "basilar atelectasis.", "study", "no"),
    ("Has the right base abnormality changed?", "FINDINGS: Small right basilar opacity.",
     "study", "unknown"),
    ("Has the left base abnormality changed?", "FINDINGS: Right basilar opacity, decreased "
     "since the prior.", "study", "unknown"),
    ("Is there an abnormality at the right base?", "FINDINGS: Small right basilar opacity.",
     "study", "yes"),
    # the comparison study named as such
    ("Is the humeral deformity new?", "FINDINGS: Deformity of the left humeral neck. This is "
     "not seen on the comparison.", "change", "yes"),
    ("Is the humeral deformity new?", "FINDINGS: Deformity of the left humeral neck.",
     "change", "unknown"),
    # a change word before or after a whole list is each item's
    ("Any change in the granulomas since last time?", "FINDINGS: Stable calcified hilar "
     "nodes and granulomas.", "change", "unchanged"),
    ("Has the emphysema changed?", "FINDINGS: Emphysema and scarring, unchanged.", "change",
     "unchanged"),
    ("Is the effusion new?", "FINDINGS: Stable small nodule and new effusion.", "change",
     "yes"),
    ("Has the cardiomegaly changed?", "FINDINGS: Cardiomegaly with stable effusion.",
     "change", "unknown"),
    ("Has the granuloma changed?", "FINDINGS: Stable calcified hilar nodes. Granuloma.",
     "change", "unknown"),
    # ... whose items are joined with a word beside the join, or by "with"
    ("Is the hyperinflation any different from before?", "IMPRESSION: Hyperinflation and "
     "changes of emphysema as before.", "change", "unchanged"),
    ("Has the nodule changed?", "FINDINGS: Calcified left lower lobe nodule with a "
     "granuloma is again seen but unchanged.", "change", "unchanged"),
    ("Has the nodule changed?", "FINDINGS: Calcified left lower lobe nodule near a stable "
     "granuloma.", "change", "unknown"),
    ("Has the hyperinflation changed?", "IMPRESSION: Hyperinflation and changes of emphysema "
     "are noted.", "change", "unknown"),
    # a change said of another mention of the same finding, hedged or not
    ("Has the mediastinal prominence changed?", "FINDINGS: There is prominence of the "
     "superior mediastinum. IMPRESSION: Increasing prominence of the superior mediastinum "
     "may be due to a goiter.", "change", "increased"),
    ("Has the mediastinal prominence changed?", "FINDINGS: There is prominence of the "
     "superior mediastinum. IMPRESSION: Prominence of the superior mediastinum may be due "
     "to a goiter.", "change", "unknown"),
    ("Has the mediastinal prominence changed?", "FINDINGS: There is prominence of the "
     "superior mediastinum. IMPRESSION: No increasing prominence of the superior "
     "mediastinum.", "change", "unknown"),
    # places beside the hilum
    ("Has the retrohilar nodule grown?", "IMPRESSION: Stable right retrohilar nodule.",
     "change", "no"),
    ("Is the suprahilar opacity new?", "IMPRESSION: New right suprahilar opacity.", "change",
     "yes"),
    ("Is there a retrohilar nodule?", "IMPRESSION: Right retrohilar nodule.", "position",
     "yes"),
    ("Is there a retrohilar nodule?", "IMPRESSION: Right apical nodule.", "position", "no"),
    # stability given as the report's reason is the finding's change
    ("Has the airspace disease changed?", "IMPRESSION: Right base airspace disease may "
     "represent scar given the stability over time.", "change", "unchanged"),
    ("Has the nodule changed?", "FINDINGS: Right lung nodule. Follow-up CT to assess "
     "stability.", "change", "unknown"),
    # a change ruled out is none, not the change it names
    ("Has the effusion grown?", "FINDINGS: No increase in size of the left effusion.",
     "change", "no"),
    ("Has the effusion changed?", "FINDINGS: No interval increase in the small left effusion.",
     "change", "unchanged"),
    ("Has the nodule changed?", "FINDINGS: Right lung nodule, no interval growth.", "change",
     "unchanged"),
    ("Has the effusion grown?", "FINDINGS: Interval increase in the left effusion.", "change",
     "yes"),
    # "behind the heart" is a place, not the heart's size
    ("Any opacity behind the heart?", "FINDINGS: Subtle left retrocardiac density.",
     "position", "yes"),
    ("Any opacity behind the heart?", "FINDINGS: Right upper lobe opacity.", "position", "no"),
    # "instead" asks the same: is it read so?
    ("Could it be pleural thickening instead?", "IMPRESSION: Small pleural effusion versus "
     "minimal pleural thickening.", "presence", "uncertain"),
    # the bone a bone finding is in; the side of a costophrenic angle
    ("Which bone is fractured?", "FINDINGS: Old fracture, right mid clavicle.", "position",
     ["right", "clavicle", "mid clavicle"]),
    ("Which bone is fractured?", "FINDINGS: No acute fracture.", "position", "unknown"),
    ("Which costophrenic angle is blunted?", "FINDINGS: Blunting of the left costophrenic "
     "angle.", "position", ["left"]),
    ("Where are the surgical clips?", "FINDINGS: Surgical clips in the right upper quadrant.",
     "position", ["right", "right upper quadrant"]),
    ("Where are the surgical clips?", "FINDINGS: Surgical clips in the epigastric region.",
     "position", ["epigastrium", "epigastric region"]),
    ("Are there clips below the diaphragm?", "FINDINGS: Surgical clips in the epigastrium.",
     "position", "yes"),
    # a clinician's "spine changes"
    ("How severe are the spine changes?", "FINDINGS: Mild degenerative changes of the "
     "thoracic spine.", "severity", "mild"),
    # "compared with the last film" dates a change; "compared with the right" still compares
    # two findings, which is not answered
    ("Is the density new compared with the last film?", "FINDINGS: New right basilar "
     "density.", "change", "yes"),
    ("Is the density new compared with the last film?", "FINDINGS: Right basilar density, "
     "unchanged.", "change", "no"),
    ("Is the left effusion larger compared with the right?", "FINDINGS: Bilateral effusions, "
     "left larger than right.", "unsupported", None),
    # how the film was taken is no abnormality of the study
    ("Is this chest X-ray normal?", "FINDINGS: Patient is slightly rotated. Normal heart "
     "size. The lungs are clear.", "study", "yes"),
    ("Is this chest X-ray normal?", "FINDINGS: Patient is slightly rotated. Small left "
     "pleural effusion.", "study", "no"),
    # a reading asked of the finding pointed at, past the words describing it
    ("Could the left-sided opacity be a lung nodule?", "IMPRESSION: 7 mm opacity over the "
     "left lung may represent a lung nodule.", "position", "uncertain"),
    ("Is the nodule a granuloma?", "FINDINGS: Left upper lobe nodule, likely a granuloma.",
     "presence", "uncertain"),
    ("Could the nodule be a granuloma?", "FINDINGS: Left upper lobe nodule, possibly a "
     "granuloma.", "presence", "uncertain"),
    ("Is the nodule a granuloma?", "FINDINGS: Left upper lobe nodule.", "presence", "no"),
    # more of the reports' words: tortuosity, low volume lungs, a portacatheter
    ("Is the aorta tortuous?", "FINDINGS: Mild aortic ectasia/tortuosity.", "presence", "yes"),
    ("Are the lung volumes low?", "IMPRESSION: Low volume lungs.", "presence", "yes"),
    ("Is there a port?", "IMPRESSION: Portacatheter tip in the SVC.", "presence", "yes"),
    # a clinician's words: shadowing, aspirated, fluid overloaded, a fused neck
    ("Is there any shadowing at the right base?", "FINDINGS: Patchy right basilar opacity.",
     "position", "yes"),
    ("Is there any shadowing at the right base?", "FINDINGS: The lungs are clear.",
     "position", "no"),
    ("Is the heart shadow enlarged?", "FINDINGS: The heart is enlarged.", "presence", "yes"),
    ("Could the patient have aspirated?", "IMPRESSION: Right lower lobe opacity concerning "
     "for pneumonia or aspiration.", "presence", "uncertain"),
    ("Does the patient look fluid overloaded?", "FINDINGS: No pulmonary edema.", "presence",
     "no"),
    ("Has the neck been fused?", "FINDINGS: Anterior cervical fusion hardware.", "presence",
     "yes"),
    ("Has the neck been fused?", "FINDINGS: Degenerative changes of the cervical spine.",
     "presence", "no"),
    # "focal" picks the focal one of several in an open question, and asks nothing more of a
    # closed one
    ("Where is the focal airspace disease?", "IMPRESSION: Focal airspace disease in the right "
     "lung base. Minimal airspace disease in the left lung base.", "position",
     ["right", "basilar", "base"]),
    ("Any focal opacity?", "FINDINGS: Right lower lobe opacity.", "presence", "yes"),
    # a grade is a size where it grades an enlargement, not how much of a process there is
    ("How big is the area of airspace disease?", "FINDINGS: Mild airspace disease at the "
     "right base.", "size", "unknown"),
    ("How big is the heart?", "FINDINGS: Mild cardiomegaly.", "size", "mild"),
    ("How big is the effusion?", "FINDINGS: Small left pleural effusion.", "size", "small"),
    # "no residual" effusion has resolved; one side's change is not the other side's
    ("Has the right effusion resolved?", "IMPRESSION: No residual right pleural effusion. "
     "Small left pleural effusion.", "change", "yes"),
    ("Has the right effusion resolved?", "IMPRESSION: Small left pleural effusion.", "change",
     "no"),
    ("Has the left effusion changed?", "IMPRESSION: No residual right pleural effusion. Small "
     "left pleural effusion.", "change", "unknown"),
    ("Has the left effusion changed?", "IMPRESSION: Resolved right pleural effusion. Small "
     "left pleural effusion.", "change", "unknown"),
    ("Has the left effusion changed?", "IMPRESSION: Resolved right pleural effusion. Small "
     "left pleural effusion, increased.", "change", "increased"),
    # the words of a side asked ("in one lung or both", "which clavicle") name no concept
    # ("lung granuloma", "clavicle fixation") that would swallow the question's cue
    ("Are the granulomas in one lung or both?", "FINDINGS: Calcified granulomas in both "
     "lungs.", "position", ["bilateral"]),
    ("Are the granulomas in one lung or both?", "FINDINGS: Calcified granuloma in the left "
     "upper lobe.", "position", ["left"]),
    ("Which clavicle has fixation hardware?", "FINDINGS: Plate and screw fixation of the "
     "right clavicle.", "position", ["right"]),
    # "normal" said of one part of the body asks about that part, not the whole study
    ("Is the spine normal?", "FINDINGS: The lungs are clear. Degenerative changes of the "
     "spine.", "presence", "no"),
    ("Is the spine normal?", "FINDINGS: Right lower lobe pneumonia. The spine is "
     "unremarkable.", "presence", "yes"),
    ("Are the lungs normal?", "FINDINGS: The lungs are clear. Degenerative changes of the "
     "spine.", "presence", "yes"),
    ("Are the lungs normal?", "FINDINGS: Right lower lobe pneumonia.", "presence", "no"),
    # ... but a place or another cue keeps the whole-study reading
    ("Any abnormality in the right lung?", "FINDINGS: Left lower lobe pneumonia.", "study",
     "no"),
    # a describing word six words before ("tortuous and calcified"); a density is an opacity
    ("Is the thoracic aorta calcified?", "FINDINGS: The thoracic aorta is mildly tortuous "
     "and calcified.", "presence", "yes"),
    ("Is the thoracic aorta calcified?", "FINDINGS: The thoracic aorta is mildly tortuous. "
     "Calcified granuloma.", "presence", "no"),
    ("Any density behind the heart?", "FINDINGS: Retrocardiac opacity.", "position", "yes"),
    # words the de-identification masked: a cardiac device, a costophrenic angle
    ("Is there a cardiac device?", "FINDINGS: There is a single cardiac XXXX projecting over "
     "the right ventricle.", "presence", "yes"),
    ("Which costophrenic angle is blunted?", "FINDINGS: There is blunting of the right "
     "costophrenic XXXX.", "position", ["right"]),
    # a reading asked of an open finding pointed at, named by the lexicon
    ("Could the opacities be scarring?", "FINDINGS: Right lower lung opacities representing "
     "atelectasis versus scarring.", "presence", "uncertain"),
    # a width or a curve's angle is a measurement the report may give, not a refusal
    ("How wide is the aorta?", "FINDINGS: The thoracic aorta is ectatic.", "size", "unknown"),
    ("How wide is the aorta in centimetres?", "FINDINGS: The ascending aorta is dilated, "
     "measuring 4.5 cm.", "size", 4.5),
    ("How many degrees is the curve?", "FINDINGS: Mild thoracic levoscoliosis.", "size",
     "unknown"),
    # the lungs' aeration as the report says it changed
    ("Has the aeration changed since the prior film?", "IMPRESSION: Significantly improved "
     "aeration.", "change", "improved"),
    ("Has aeration at the lung bases improved?", "FINDINGS: There is improved aeration of the "
     "lung bases with small residual left basilar effusion.", "change", "yes"),
    # the lobes a finding names, counted; not a finding counted in one lobe
    ("How many lobes show collapse?", "FINDINGS: Large right pleural effusion with collapse "
     "of the right middle lobe and partial collapse of the right lower lobe.", "count", 2),
    ("How many nodules are in the left lower lobe?", "FINDINGS: Three nodules in the left "
     "lower lobe.", "count", 3),
    # places counted, not the finding: lobes (a zone called a lobe, on each side), lungs and
    # bases by side, spinal levels numbered or spread ("multilevel"), unknown where unsaid;
    # a finding in the lung still counted as itself
    ("How many lobes have the opacities?", "FINDINGS: Bilateral lower lobe opacities.",
     "count", 2),
    # ... a base its side's lower lobe, where no lobe of that side is named
    ("How many lobes have airspace disease?", "FINDINGS: Consolidation in the left lower "
     "lobe. IMPRESSION: Bibasilar airspace disease.", "count", 2),
    ("How many lobes show atelectasis?", "FINDINGS: Left basilar atelectasis.", "count", 1),
    ("How many lobes have opacity?", "FINDINGS: Right basilar opacity. IMPRESSION: Right "
     "middle lobe pneumonia.", "count", 1),
    ("How many lobes show atelectasis?", "FINDINGS: Basilar atelectasis.", "count", "unknown"),
    ("How many lobes are involved?", "FINDINGS: Bibasilar atelectasis.", "study", 2),
    ("How many lungs show interstitial opacities?", "FINDINGS: Mild bilateral interstitial "
     "opacities.", "count", 2),
    ("How many lungs show interstitial opacities?", "FINDINGS: Interstitial opacities in the "
     "left lung.", "count", 1),
    ("How many lung bases are involved?", "FINDINGS: Bibasilar atelectasis.", "study", 2),
    ("How many lung bases are involved?", "FINDINGS: Left basilar atelectasis.", "study", 1),
    # a pair in the plural or with a "bi-" word, in the place or the finding's own words,
    # is both; a side named is one, and a zone with no side is not counted
    ("How many apices show scarring?", "FINDINGS: Mild scarring at both lung apices.",
     "count", 2),
    ("How many apices show scarring?", "FINDINGS: Mild scarring at the left lung apex.",
     "count", 1),
    ("How many apices show scarring?", "FINDINGS: Mild apical scarring.", "count", "unknown"),
    ("How many hila are enlarged?", "FINDINGS: Mild bihilar prominence is seen.", "count", 2),
    ("How many hila are enlarged?", "FINDINGS: Mild left hilar prominence is seen.", "count", 1),
    ("How many hemidiaphragms are flattened?", "FINDINGS: Hyperinflated lungs with "
     "flattening of the hemidiaphragms.", "count", 2),
    ("How many hemidiaphragms are flattened?", "FINDINGS: Flattening of the right "
     "hemidiaphragm.", "count", 1),
    # a side left hanging before "and" shares the sided finding's place after it
    ("How many lung bases have atelectasis?", "IMPRESSION: Worse on the right and better on "
     "the left basilar atelectasis.", "count", 2),
    ("How many lung bases have atelectasis?", "IMPRESSION: Small right effusion and left "
     "basilar atelectasis.", "count", 1),
    # a zone joined to the lobe after it shares its noun, on its own side
    ("How many lobes are involved?", "FINDINGS: Patchy right upper and right middle lobe "
     "airspace disease.", "study", 2),
    ("How many lobes have consolidation?", "FINDINGS: Consolidation in the left upper and "
     "lower lobes.", "count", 2),
    ("How many lobes have consolidation?", "FINDINGS: Consolidation in the right middle and "
     "upper abdomen.", "count", "unknown"),
    # a device exchanged for another in its sentence is gone, not counted
    ("How many central lines are in now?", "FINDINGS: The right subclavian catheter has been "
     "exchanged for a left internal jugular central venous catheter.", "count", 1),
    ("How many central lines are there?", "FINDINGS: The right subclavian line was "
     "exchanged over a wire for a left subclavian central venous catheter. A right internal "
     "jugular catheter is also present.", "count", 2),
    ("How many central lines are in now?", "FINDINGS: The old right line has been replaced "
     "by a left subclavian central venous catheter. IMPRESSION: Interval central catheter "
     "exchange.", "count", 1),
    ("How many central lines are there?", "FINDINGS: A right subclavian catheter and a left "
     "internal jugular central venous catheter.", "count", 2),
    # ribs counted by the ribs numbered, by side; a finding counted as itself where none is
    ("How many ribs are abnormal?", "FINDINGS: Irregularity of the 6th anterior left rib "
     "with adjacent pleural thickening. IMPRESSION: Irregular anterior left 6th rib.", "study",
     1),
    ("How many ribs are affected?", "FINDINGS: Healed fractures of the left 4th and 5th "
     "ribs.", "study", 2),
    ("How many ribs are abnormal?", "FINDINGS: Clear lungs.", "study", "unknown"),
    ("How many ribs are fractured?", "FINDINGS: Old right 4th and left 6th rib fractures.",
     "count", 2),
    ("How many ribs are fractured?", "FINDINGS: Several old left rib fractures.", "count",
     "multiple"),
    ("What structures are abnormal?", "FINDINGS: Left basilar atelectasis.", "unsupported",
     None),
    # vertebrae of one part of the spine: its numbered levels, else the words around it
    ("How many lumbar vertebrae are compressed?", "FINDINGS: Compression deformities of "
     "several midthoracic vertebral bodies and one lumbar vertebral body.", "count", 1),
    ("How many thoracic vertebrae are compressed?", "FINDINGS: Compression deformities of "
     "two lower thoracic vertebrae and a single lumbar vertebra.", "count", 2),
    ("How many thoracic vertebrae are compressed?", "FINDINGS: Compression deformities of "
     "lower thoracic vertebral bodies and an upper lumbar vertebral body.", "count",
     "multiple"),
    ("How many thoracic vertebrae are compressed?", "FINDINGS: Compression deformities of "
     "T6, T9 and L2.", "count", 2),
    ("How many vertebrae are compressed?", "FINDINGS: Compression deformities of T6, T9 and "
     "L2.", "count", 3),
    # places of any kind: those named, a zone and the lobe it is in once; unknown where unsaid
    ("In how many places are there surgical clips?", "FINDINGS: There are surgical clips "
     "projecting over the left lung apex, as well as, over the right upper quadrant of the "
     "abdomen.", "count", 2),
    ("How many places show the nodules?", "FINDINGS: Nodules in the left upper lobe. Left "
     "upper lung nodules.", "count", 1),
    ("In how many places are there surgical clips?", "FINDINGS: Surgical clips.", "count",
     "unknown"),
    # ... zones are places (an "area" of a finding is the finding); hila and hemidiaphragms
    # are counted by side
    ("How many lung zones does the opacity involve?", "FINDINGS: Patchy opacity in the "
     "lingula and the right middle lobe.", "count", 2),
    ("How many lung zones show opacity?", "FINDINGS: Patchy opacity in the lingula.",
     "count", 1),
    ("How many lung regions does the scarring involve?", "FINDINGS: Scarring in the left "
     "upper lobe and the right lower lobe.", "count", 2),
    ("How many regions show scarring?", "FINDINGS: Scarring at the left apex.", "count", 1),
    ("How many hila look prominent?", "FINDINGS: Bilateral hilar enlargement.", "count", 2),
    ("How many hila are enlarged?", "FINDINGS: Enlarged right hilum.", "count", 1),
    ("How many hemidiaphragms are elevated?", "FINDINGS: Elevated right hemidiaphragm.",
     "count", 1),
    # paired joints are counted by side too; named in the plural with no side, both of them
    ("How many AC joints show arthritis?", "FINDINGS: Mild degenerative changes of the "
     "acromioclavicular joints.", "count", 2),
    ("How many AC joints show arthritis?", "FINDINGS: Mild degenerative changes of the left "
     "acromioclavicular joint.", "count", 1),
    ("How many shoulders show degenerative change?", "FINDINGS: Degenerative changes of "
     "both shoulders.", "count", 2),
    ("How many AC joints show arthritis?", "FINDINGS: The lungs are clear.", "count", 0),
    ("How many lumbar vertebrae are involved?", "FINDINGS: Compression deformities of L1 "
     "and L3.", "study", 2),
    ("How many levels of the thoracic spine are degenerate?", "FINDINGS: Multilevel "
     "degenerative changes of the thoracic spine.", "count", "multiple"),
    ("How many spinal levels are involved?", "FINDINGS: Degenerative changes of the thoracic "
     "spine.", "study", "unknown"),
    ("How many vertebrae are affected?", "FINDINGS: Compression deformities of T12 and L1.",
     "study", 2),
    ("How many lobes are involved?", "FINDINGS: Right basilar opacity, possibly right lower "
     "lobe pneumonia.", "study", 1),
    ("How many lung nodules are there?", "FINDINGS: Two nodules in the right lung.", "count",
     2),
    # none only where the report rules it out or names neither it nor what may hold it: a
    # device whose parts go unnamed, a broader finding named as such
    ("How many leads are there?", "FINDINGS: Left chest wall pacemaker generator.", "count",
     "unknown"),
    ("How many leads are there?", "FINDINGS: The lungs are clear.", "count", 0),
    # leads named by their chambers, joined before the noun: one for each chamber
    ("How many pacer leads?", "FINDINGS: Pacemaker generator over the left chest with right "
     "atrial and right ventricular leads.", "count", 2),
    ("How many pacer leads?", "FINDINGS: Pacemaker generator over the left chest with right "
     "ventricular leads.", "count", "multiple"),
    ("How many leads are there?", "FINDINGS: Dual chamber pacemaker with right atrial and "
     "right ventricular lead.", "count", 2),
    ("How many vertebral compression deformities are there?", "FINDINGS: Stable bony "
     "deformity.", "count", "unknown"),
    # ... and a deformity placed in the spine is a vertebral one
    ("How many vertebral compression deformities are there?", "FINDINGS: Stable deformity in "
     "the midthoracic spine.", "count", 1),
    # a narrower concept found as its broader one with its place word beside it
    ("How many levels of the thoracic spine are degenerate?", "FINDINGS: Multilevel "
     "degenerative changes noted within the thoracic spine.", "count", "multiple"),
    # a Greek or Latin singular is one; a finding named by its process ("formation") is
    # counted by that word; one named once on both sides is several
    ("How many areas of atelectasis?", "FINDINGS: Mild platelike atelectasis in the lingula.",
     "count", 1),
    ("How many osteophytes?", "FINDINGS: Anterior osteophyte formation in the thoracic spine.",
     "count", "unknown"),
    ("How many osteophytes?", "FINDINGS: Large anterior osteophyte formations in the thoracic "
     "spine.", "count", "multiple"),
    ("How many bullae are there?", "FINDINGS: Left upper and right upper lobe bullous "
     "disease.", "count", "multiple"),
    ("How many bullae are there?", "FINDINGS: Two bullae in the right upper lobe.", "count", 2),
    # a singular finding after places of one side joined by "and": one in each place
    ("How many granulomas?", "IMPRESSION: Left hilar and left basilar granuloma.", "count", 2),
    ("How many granulomas?", "IMPRESSION: Left basilar granuloma.", "count", 1),
    ("How many granulomas?", "IMPRESSION: Left hilar and left basilar granulomas.", "count",
     "multiple"),
    # one statement of the mediastinum and the hila answers for both
    ("Have the hila changed?", "FINDINGS: Normal heart. Stable mediastinal and hilar "
     "contours.", "change", "unchanged"),
    ("Has the mediastinum changed?", "FINDINGS: Stable mediastinal and hilar contours.",
     "change", "unchanged"),
    ("Have the hila changed?", "FINDINGS: Stable mediastinal contours.", "change", "unknown"),
    # a finding said as a noun of what follows "of"
    ("Are the pulmonary arteries dilated?", "FINDINGS: Possible dilatation of the central "
     "pulmonary arteries.", "presence", "uncertain"),
    ("Is the upper mediastinum widened?", "FINDINGS: Unchanged widening of the upper "
     "mediastinum.", "position", "yes"),
    ("Which acromioclavicular joint is widened?", "FINDINGS: Widening of the left "
     "acromioclavicular joint.", "position", ["left"]),
    # a malignancy the report hedges; one it never names is not ruled out; its kind or
    # stage, or a diagnosis of the whole film, is not asked of a report
    ("Could the nodule be cancer?", "IMPRESSION: Left apical nodule; malignancy is not "
     "excluded.", "presence", "uncertain"),
    ("Could the nodule be a metastasis?", "IMPRESSION: Left lower lobe nodule, infection "
     "versus metastatic disease.", "presence", "uncertain"),
    ("Is there cancer?", "FINDINGS: The lungs are clear.", "presence", "unknown"),
    ("Is there cancer?", "IMPRESSION: No evidence of malignancy.", "presence", "no"),
    ("What stage is the cancer?", "IMPRESSION: Large left hilar mass, likely malignancy.",
     "unsupported", None),
    ("Is this cancer?", "IMPRESSION: Large left hilar mass.", "unsupported", None),
    # an operation's or a device's name takes "surgery" after it
    ("Has the patient had spinal fusion surgery?", "FINDINGS: Posterior spinal fusion "
     "hardware.", "presence", "yes"),
    ("Should the patient have surgery?", "FINDINGS: Posterior spinal fusion hardware.",
     "unsupported", None),
    # "Which base": the side and the place
    ("Which base has the scarring?", "FINDINGS: Left basilar scarring.", "position",
     ["left", "basilar"]),
    ("Which side is the scarring on?", "FINDINGS: Left basilar scarring.", "position",
     ["left"]),
    # ... of the findings at the place the cue names, not those elsewhere
    ("Which apex is the opacity in?", "FINDINGS: Small opacity in the left lung apex. Mild "
     "right basilar opacity.", "position", ["left", "apical", "apex"]),
    ("Which base has the opacity?", "FINDINGS: Small opacity in the left lung apex. Mild "
     "right basilar opacity.", "position", ["right", "basilar"]),
    # a finding spread over both lungs with no side or place of its own
    ("Where is the interstitial prominence?", "FINDINGS: Mild diffuse interstitial "
     "prominence.", "position", ["diffuse", "bilateral"]),
    ("Are the interstitial markings on one side or both?", "FINDINGS: Diffuse increased "
     "interstitial markings.", "position", ["bilateral"]),
    ("Where is the interstitial prominence?", "FINDINGS: Interstitial prominence. No diffuse "
     "airspace disease.", "position", "unknown"),
    ("Where is the interstitial prominence?", "FINDINGS: Diffuse interstitial prominence at "
     "the left base.", "position", ["left", "basilar", "base"]),
    # ... or spread "throughout" the chest
    ("Where are the nodules?", "FINDINGS: Several small calcified nodules throughout the "
     "chest.", "position", ["diffuse", "bilateral"]),
    ("Where are the nodules?", "FINDINGS: No nodules throughout the chest.", "position",
     "unknown"),
    # volume loss is its own finding, and a report's atelectasis is volume loss
    ("Is there volume loss?", "FINDINGS: Right-sided volume loss.", "presence", "yes"),
    ("Is there volume loss?", "FINDINGS: Left basilar atelectasis.", "presence", "yes"),
    ("Is there atelectasis?", "FINDINGS: Right-sided volume loss.", "presence", "no"),
    # a hyphenated prefix is part of its word: expanded lungs are not over-expanded ones
    ("Are the lungs expanded?", "FINDINGS: Both lungs are clear and expanded.", "presence",
     "yes"),
    ("Are the lungs over-expanded?", "FINDINGS: Both lungs are clear and expanded.",
     "presence", "no"),
    ("Are the lungs over-expanded?", "FINDINGS: The lungs are hyperexpanded.", "presence",
     "yes"),
    # more of a concept's words: lung vascularity, disc disease, a bypass graft, the T-spine
    ("Is the pulmonary vascularity increased?", "FINDINGS: Mild cardiomegaly and increased "
     "lung vascularity.", "presence", "yes"),
    ("Is the disc disease mild, moderate or severe?", "FINDINGS: Moderate degenerative disc "
     "disease of the thoracic spine.", "severity", "moderate"),
    ("Is there evidence of bypass surgery?", "FINDINGS: Sternotomy and bypass graft "
     "changes.", "presence", "yes"),
    ("Where are the degenerative changes?", "FINDINGS: Mild T-spine degenerative changes.",
     "position", ["thoracic spine", "T-spine"]),
    # a repeat of one finding in the impression, with a size or a narrower place added, is
    # the same finding; findings that differ in place are not
    ("How many nodules are there?", "FINDINGS: Small nodule in the right upper lung is "
     "stable. IMPRESSION: Small right upper lobe nodule, stable.", "count", 1),
    ("How many nodules are there in the left lung?", "FINDINGS: Nodular opacity in the left "
     "upper lung measuring 7 mm. IMPRESSION: Nodular opacity in the left upper lung.",
     "count", 1),
    ("How many nodules are there?", "FINDINGS: Nodule in the right upper lobe. Nodule in the "
     "right lower lobe.", "count", 2),
    # a number before a masked word and a singular noun is its size ("10 XXXX"), not a count
    ("How many nodules are seen?", "FINDINGS: There is a XXXX 10 XXXX nodule in the right "
     "apex.", "count", 1),
    ("How many masses are there?", "FINDINGS: There are 2 XXXX masses in the right chest.",
     "count", 2),
    # "the tube": whichever tube the report names; its distance, in the unit asked
    ("How far from the carina is the tube tip?", "IMPRESSION: Tracheostomy tube tip 4.7 cm "
     "above the carina.", "size", 47.0),
    ("Is the tube tip more than 3 cm above the carina?", "IMPRESSION: Tracheostomy tube tip "
     "4.7 cm above the carina.", "position", "yes"),
    ("Where does the tube end?", "IMPRESSION: Endotracheal tube tip approximately 4.5 cm above "
     "the carina.", "position", ["4.5 cm above the carina", "carina"]),
    ("Where does the tube end?", "IMPRESSION: Right IJ line tip in the SVC.", "position",
     "unknown"),
    # a distance is no finding's size
    ("How big is the heart?", "IMPRESSION: Heart size borderline enlarged, tracheostomy tube "
     "tip 4.7 cm above the carina.", "size", "unknown"),
    # a heart "borderline enlarged" is possibly enlarged; one at the upper limit is normal
    ("Is the heart enlarged?", "IMPRESSION: Heart size borderline enlarged.", "presence",
     "uncertain"),
    ("Is the heart enlarged?", "FINDINGS: Heart size upper limits of normal.", "presence",
     "no"),
    # a general finding word pointed at, and its reading right after it
    ("Is the posterior basal opacity atelectasis?", "FINDINGS: Posterior basilar opacity "
     "representing atelectasis.", "position", "yes"),
    ("Is the opacity pneumonia?", "FINDINGS: Right basilar opacity, likely atelectasis.",
     "presence", "no"),
    # "look like", "suggest" ask whether the report reads it so
    ("Does this look like emphysema?", "IMPRESSION: Hyperinflated lungs consistent with "
     "emphysema.", "presence", "yes"),
    ("Does the film suggest pulmonary hypertension?", "FINDINGS: Prominent central pulmonary "
     "arteries suggesting pulmonary arterial hypertension.", "presence", "uncertain"),
    # what the patient feels is not in a radiograph
    ("Is the patient tender over the fracture?", "FINDINGS: Old left rib fracture.",
     "unsupported", None),
    ("Does the patient have a fever?", "FINDINGS: Right lower lobe pneumonia.", "unsupported",
     None),
    # a shift's direction
    ("Which way is the mediastinum shifted?", "IMPRESSION: Left lung volume loss with "
     "leftward shift of the heart and mediastinum.", "position", ["left"]),
    # a finding the report sees now has not gone away, whatever it was before
    ("Has the mass gone away completely?", "IMPRESSION: Residual right hilar mass.", "change",
     "no"),
    ("Has the mass gone away?", "IMPRESSION: The right hilar mass has resolved.", "change",
     "yes"),
    # a change compared with an earlier study after the finding's own words
    ("Has the left effusion changed?", "IMPRESSION: Moderate left pleural effusion, increased "
     "XXXX compared to prior chest radiograph.", "change", "increased"),
    # a lobe removed is a lobectomy, and its lobe is the lobe named in it
    ("Which lobe was removed?", "FINDINGS: Evidence of left lower lobectomy.", "position",
     ["left", "left lower lobe", "left lower lobectomy"]),
    ("Has a lobe been removed?", "FINDINGS: The lungs are clear.", "presence", "no"),
    # one finding's describing word and its name read together
    ("How severe are the endplate changes?", "FINDINGS: Moderate degenerative endplate "
     "changes of the thoracic spine.", "severity", "moderate"),
    # the masked word after "lymph" is read as "nodes"; a masked word after "sternotomy" as
    # "wires", whole or broken
    ("How many calcified nodes are there?", "FINDINGS: Densely calcified mediastinal and right "
     "hilar lymph XXXX.", "count", "multiple"),
    ("How many sternotomy wires are there?", "FINDINGS: Multiple XXXX sternotomy XXXX are "
     "noted.", "count", "multiple"),
    ("Are the sternotomy wires broken?", "FINDINGS: The uppermost sternotomy XXXX is "
     "fractured.", "presence", "yes"),
    ("Are the sternotomy wires intact?", "FINDINGS: All of the sternotomy XXXX are broken.",
     "presence", "no"),
    ("Are the sternotomy wires intact?", "FINDINGS: Sternotomy wires remain intact.",
     "presence", "yes"),
    # a word that says the wire is broken outweighs one that says it is unchanged; the
    # closure of a sternotomy is its wires
    ("Are the sternal wires intact?", "FINDINGS: Stable interrupted sternal wire.",
     "presence", "no"),
    ("Is the sternotomy closure intact?", "FINDINGS: The lower sternotomy wire is disrupted.",
     "presence", "no"),
    ("Is the sternotomy closure intact?", "FINDINGS: Stable intact sternotomy wires.",
     "presence", "yes"),
    # findings said in other words, and said of a subject already named after "and"
    ("Is the aorta ectatic?", "FINDINGS: The aorta is tortuous and ectatic.", "presence", "yes"),
    ("Is the aorta ectatic?", "FINDINGS: The aorta is tortuous and not ectatic.", "presence",
     "no"),
    ("Are the lungs clear?", "FINDINGS: The lungs are well inflated and clear.", "presence",
     "yes"),
    ("Any AC joint arthritis?", "FINDINGS: Left acromioclavicular joint degenerative change.",
     "presence", "yes"),
    ("Any AC joint arthritis?", "FINDINGS: Possible acromioclavicular joint degenerative "
     "change.", "presence", "uncertain"),
    ("How severe is the gastric distension?", "FINDINGS: Marked gas distending the stomach.",
     "severity", "severe"),
    ("Is the stomach distended?", "FINDINGS: No distension of the stomach.", "presence", "no"),
    ("Any endplate degenerative change?", "FINDINGS: Endplate sclerosis in the thoracic spine.",
     "presence", "yes"),
    ("Are the interstitial markings increased?", "FINDINGS: Chronic interstitial marking "
     "throughout.", "presence", "yes"),
    # the finding's own state word after "how" asks its grade
    ("How ectatic is the aorta?", "FINDINGS: The thoracic aorta is moderately ectatic.",
     "severity", "moderate"),
    ("How unfolded is the aorta?", "FINDINGS: Mild unfolding of the aorta.", "severity", "mild"),
    ("Which shoulder has a prosthesis?", "FINDINGS: Prosthetic left shoulder.", "position",
     ["left"]),
    # "anything" said of a place asks about the abnormal findings there
    ("Anything in the left lung?", "FINDINGS: Right middle lobe infiltrate. Left lung is "
     "clear.", "study", "no"),
    ("Anything in the right lung?", "FINDINGS: Right middle lobe infiltrate. Left lung is "
     "clear.", "study", "yes"),
    # a finding pointed at, and its reading right after it
    ("Are the calcified nodules granulomas?", "FINDINGS: Calcified nodules, likely calcified "
     "granulomas.", "presence", "uncertain"),
    # a device's leads, and its tip given to them
    ("Where do the leads end?", "FINDINGS: Cardiac XXXX with leads terminating in the right "
     "atrium and right ventricle.", "position", ["right atrium", "right ventricle"]),
    ("Where is the tip of the pacemaker?", "FINDINGS: Left chest wall pacemaker generator with "
     "leads in the right atrium and right ventricle.", "position",
     ["right atrium", "right ventricle"]),
    ("Which side is the pacemaker on?", "FINDINGS: Left chest wall pacemaker generator with "
     "leads in the right atrium and right ventricle.", "position", ["left"]),
    # a masked line known by its tip after a comma
    ("Where does the tip of the right chest line sit?", "FINDINGS: There is right-sided chest "
     "XXXX, the distal tip in the upper right atrium.", "position",
     ["upper right atrium", "right atrium"]),
    # an operation of any kind, a lobe resected, the projection, a deformed bone
    ("Which side was the chest operated on?", "IMPRESSION: Left chest wall changes suggest "
     "prior thoracotomy.", "position", ["left"]),
    ("Which lobe has been resected?", "FINDINGS: Postoperative changes of right upper "
     "lobectomy.", "position", ["right", "right upper lobe", "right upper lobectomy"]),
    ("Was this taken AP?", "FINDINGS: Portable AP view of the chest. Lungs clear.", "presence",
     "yes"),
    ("Which vertebra is deformed?", "FINDINGS: Mild deformity of the T11 vertebral body.",
     "position", ["T11"]),
    # what a device is for is not in a radiograph's report
    ("What is the catheter being used for?", "FINDINGS: Right PICC with tip in the SVC.",
     "unsupported", None),
    # a describing word said of two findings asked together
    ("Any suspicious nodule or mass in the lungs?", "FINDINGS: No suspicious pulmonary mass or "
     "nodule is seen.", "presence", "no"),
    ("Any suspicious nodule or mass?", "IMPRESSION: Left upper lobe mass concerning for "
     "malignancy.", "presence", "yes"),
    ("Any noncalcified lung nodules?", "FINDINGS: No noncalcified pulmonary nodules seen.",
     "presence", "no"),
    ("Any noncalcified lung nodules?", "FINDINGS: 8 mm noncalcified nodule in the right lower "
     "lobe.", "presence", "yes"),
    # the part of the spine asked picks its own curve
    ("Which way does the thoracic spine curve?", "FINDINGS: Dextrocurvature of the thoracic "
     "spine. Levocurvature of the lumbar spine.", "position", ["right"]),
    ("Which way does the thoracic spine curve?", "IMPRESSION: Moderate thoracic levoscoliosis "
     "and mild thoracolumbar dextroscoliosis.", "position", ["left"]),
    # a diagnosis still to be ruled out is possible
    ("Could this be tuberculosis?", "FINDINGS: Patchy left upper lobe opacity. Possibility of "
     "tuberculosis should be excluded.", "presence", "uncertain"),
    # a finding said to be old or chronic is not new; one said nothing of is unknown
    ("Are the rib fractures new?", "FINDINGS: Old healed left rib fractures.", "change", "no"),
    ("Is the scarring new?", "FINDINGS: Chronic scarring at the left base.", "change", "no"),
    ("Is the effusion new?", "FINDINGS: Right pleural effusion.", "change", "unknown"),
    ("Is the effusion new?", "FINDINGS: New right pleural effusion.", "change", "yes"),
    # "as before" is unchanged; a heart size said stable; a part's own findings' change
    ("Is the hernia new?", "IMPRESSION: Prominent hiatal hernia as before.", "change", "no"),
    ("Is the heart size different from before?", "IMPRESSION: Cardiac size stable. No "
     "effusion.", "change", "unchanged"),
    ("Has the aorta changed?", "FINDINGS: Normal heart size. Stable tortuous aorta.", "change",
     "unchanged"),
    ("Is there anything active on this X-ray?", "IMPRESSION: No evidence of active disease.",
     "study", "no"),
    # the side with the higher grade where neither gives a size
    ("Which side has the bigger effusion?", "FINDINGS: Moderate sized right pleural effusion. "
     "Small left pleural effusion.", "position", ["right"]),
    ("Which upper lobe is consolidated?", "FINDINGS: Left upper lobe consolidation.",
     "position", ["left", "left upper lobe"]),
    ("Any calcification in the vessels?", "FINDINGS: Vascular calcifications.", "presence",
     "yes"),
    # a line named by its kind right after its own name is one device, not a reading
    ("Is the right IJ line still in?", "IMPRESSION: Right internal jugular central line has "
     "been removed.", "presence", "no"),
    # a finding asked about beside another pointed at
    ("Is there volume loss with the opacity?", "FINDINGS: Complete opacification of the right "
     "middle lobe without significant associated volume loss.", "presence", "no"),
    # "interval enlargement" of a finding is its growth
    ("Has the mass grown?", "IMPRESSION: Interval enlargement of the left upper lobe mass.",
     "change", "yes"),
    # devices and what is worn: jewellery is foreign, not a finding of the chest
    ("Is there a nipple ring?", "FINDINGS: Clear lungs. Left nipple ring.", "presence", "yes"),
    ("Is there a nipple ring?", "FINDINGS: Clear lungs. No effusion.", "presence", "no"),
    ("Is anything foreign projecting over the chest?", "FINDINGS: Clear lungs. Left nipple "
     "piercing.", "presence", "yes"),
    ("Is anything foreign projecting over the chest?", "FINDINGS: Clear lungs.", "presence",
     "no"),
    ("Any foreign body?", "FINDINGS: Possible retained metallic fragment in the left axilla.",
     "presence", "uncertain"),
    ("Is this chest film normal?", "FINDINGS: Clear lungs. No effusion. Right nipple ring "
     "noted.", "study", "yes"),
    ("Does she have breast implants?", "FINDINGS: Clear lungs. Bilateral breast prostheses.",
     "presence", "yes"),
    ("Is there a TIPS?", "IMPRESSION: No acute disease. TIPS shunt in the right upper "
     "quadrant.", "presence", "yes"),
    ("Can you see a TIPS?", "FINDINGS: Pacemaker with lead tips in the right heart.",
     "presence", "no"),
    ("Which side is the chest wall venous device on?", "FINDINGS: Left chest wall venous "
     "access device, tip in the SVC.", "position", ["left"]),
    # broken hardware; a complication is the report's own word: asked of a device, the
    # device is left out
    ("Is any of the fixation hardware broken?", "FINDINGS: Plate and screw fixation of the "
     "left clavicle. The medial screw is fractured.", "presence", "yes"),
    ("Is the hardware broken?", "FINDINGS: Plate and screw fixation of the left clavicle, "
     "intact.", "presence", "no"),
    ("Is the hardware broken?", "FINDINGS: Two broken sternotomy wires.", "presence", "yes"),
    ("Any complication from the device?", "IMPRESSION: Pacemaker in place, without evidence "
     "of complication.", "presence", "no"),
    ("Any complications of the line?", "IMPRESSION: Right PICC. Small apical pneumothorax, a "
     "complication of line placement.", "presence", "yes"),
    ("Are there any complications from the broken wires?", "IMPRESSION: Fractured sternotomy "
     "wire. No complication.", "presence", "no"),
    # the neck's fusion is its own device; a spinal fusion with "cervical" beside it is one
    ("Has this patient had a cervical spine fusion?", "FINDINGS: Prior anterior cervical "
     "fusion. Clear lungs.", "presence", "yes"),
    ("Has the neck been fused?", "FINDINGS: Spinal fusion hardware in the lower cervical "
     "spine.", "presence", "yes"),
    ("Has the neck been fused?", "FINDINGS: Spinal fusion hardware in the lumbar spine.",
     "presence", "no"),
    ("Is there spinal fusion hardware?", "FINDINGS: Prior anterior cervical fusion.",
     "presence", "yes"),
    # the reader's own "normal chest" outweighs a minor finding, not a label
    ("Is the study normal?", "FINDINGS: Clear lungs. Small calcified granuloma in the right "
     "lower lobe. IMPRESSION: Normal chest.", "study", "yes"),
    ("Is the study normal?", "FINDINGS: Small calcified granuloma in the right lower lobe. "
     "IMPRESSION: No acute disease.", "study", "no"),
    ("Is the study normal?", "FINDINGS: Small left pleural effusion. IMPRESSION: Otherwise "
     "normal chest.", "study", "no"),
    ("Is this a normal chest x-ray?", "FINDINGS: The mediastinum is widened. IMPRESSION: "
     "Otherwise normal chest x-ray.", "study", "no"),
    # a measurement of a normal heart is not given: unknown, not "normal"
    ("What is the cardiothoracic ratio?", "FINDINGS: Normal heart size. Clear lungs.", "size",
     "unknown"),
    ("How wide is the heart?", "FINDINGS: Heart size is normal.", "size", "unknown"),
    ("How big is the heart?", "FINDINGS: Heart size is normal.", "size", "normal"),
    # a view the question names is read through
    ("Any effusion on the decubitus view?", "FINDINGS: No layering effusion on the decubitus "
     "view.", "presence", "no"),
    ("Any effusion on the decubitus view?", "FINDINGS: Small left effusion, layering on the "
     "decubitus view.", "presence", "yes"),
    # words that qualify the finding without asking another thing of it
    ("Any superimposed pneumonia?", "FINDINGS: Chronic interstitial changes. No focal "
     "consolidation or pneumonia.", "presence", "no"),
    ("Any superimposed pneumonia?", "IMPRESSION: Emphysema with right lower lobe pneumonia.",
     "presence", "yes"),
    ("Is this a true nodule?", "FINDINGS: Possible left upper lobe nodule.", "presence",
     "uncertain"),
    ("Could it be a solid mass?", "IMPRESSION: Round opacity in the right lung, could be a "
     "mass.", "presence", "uncertain"),
    ("Any concern for pneumothorax?", "FINDINGS: No pneumothorax.", "presence", "no"),
    ("Any sign of tumour recurrence?", "IMPRESSION: Postoperative left lung. No mass.",
     "presence", "no"),
    # how plain a finding is: read as "obvious" is
    ("Any overt pulmonary oedema?", "FINDINGS: No overt edema.", "presence", "no"),
    ("Any overt pulmonary oedema?", "FINDINGS: Mild interstitial edema.", "presence", "yes"),
    ("Any overt pulmonary oedema?", "FINDINGS: Possible mild edema.", "presence", "uncertain"),
    # how long a finding has been there, by the report's word beside it: chronic or
    # longstanding yes, new or acute no, neither unknown
    ("Is there chronic granulomatous disease?", "FINDINGS: Calcified granulomas, evidence of "
     "chronic granulomatous disease.", "presence", "yes"),
    ("Is there chronic granulomatous disease?", "FINDINGS: The lungs are clear.", "presence",
     "no"),
    ("Is there chronic pleural thickening?", "FINDINGS: Longstanding left apical pleural "
     "thickening.", "presence", "yes"),
    ("Is there chronic pleural thickening?", "FINDINGS: New left apical pleural thickening.",
     "presence", "no"),
    ("Is there a chronic effusion?", "FINDINGS: Small left effusion.", "presence", "unknown"),
    # a narrower concept the report does not name, over its broader one hedged: possible;
    # over the broader one stated or absent, as before
    ("Could there be hilar lymphadenopathy?", "FINDINGS: Increased left hilar fullness. "
     "Adenopathy cannot be excluded.", "presence", "uncertain"),
    ("Could there be hilar lymphadenopathy?", "FINDINGS: The lungs are clear.", "presence",
     "no"),
    ("Is there mediastinal lymphadenopathy?", "FINDINGS: No lymphadenopathy.", "presence",
     "no"),
    # too much of something normal, in a clinician's words
    ("Is there excess fat around the heart?", "FINDINGS: Prominent pericardial fat pad.",
     "presence", "yes"),
    ("Is there excess fat around the heart?", "FINDINGS: The lungs are clear.", "presence",
     "no"),
    # a finding the report explains as a mimic named after it is not there; hedged elsewhere,
    # possible; a mimic in a sentence of its own explains nothing away
    ("Is there a lung nodule?", "FINDINGS: Nodular densities over the lower ribs bilaterally "
     "are consistent with nipple shadows.", "presence", "no"),
    ("Is there a lung nodule?", "FINDINGS: Nodular opacity at the left base most likely "
     "represents the nipple, though it may represent a lung nodule.", "presence", "uncertain"),
    ("Is there a lung nodule?", "FINDINGS: Left lower lobe nodule. Bilateral nipple shadows.",
     "presence", "yes"),
    ("Any focus of pneumonia?", "FINDINGS: Focal right basilar pneumonia.", "presence", "yes"),
    ("Any significant change since the last study?", "IMPRESSION: Stable chest.", "study",
     "no"),
    ("Any significant change since the last study?", "IMPRESSION: New right effusion.",
     "study", "yes"),
    # "just" offers the simpler reading; a focus of a finding is the finding
    ("Could the nodular densities just be nipple shadows?", "FINDINGS: Bilateral nodular "
     "densities consistent with nipple shadows.", "presence", "yes"),
    ("Is that opacity a focus of pneumonia?", "FINDINGS: Right midlung opacity may represent "
     "pneumonia.", "presence", "uncertain"),
    # a clinician's short words for a finding
    ("Any pneumo?", "FINDINGS: No pneumothorax or effusion.", "presence", "no"),
    ("Any pneumo?", "FINDINGS: Small apical pneumothorax on the right.", "presence", "yes"),
    ("Where are the streaks?", "FINDINGS: Streaky opacity at the left base.", "position",
     ["left", "basilar", "base"]),
    ("Could the streaks be atelectasis?", "FINDINGS: Streaky opacity at the left base, may "
     "represent atelectasis.", "presence", "uncertain"),
    # one label named by two entries is one item of an "or" list
    ("Does this look like COPD or emphysema?", "IMPRESSION: Hyperinflated lungs with "
     "emphysematous changes.", "presence", "yes"),
    ("Is there emphysema or COPD?", "IMPRESSION: Normal chest.", "presence", "no"),
    # a device asked whether it is where it was: its change, not its place
    ("Are the lines and tubes where they were before?", "IMPRESSION: Lines and tubes in "
     "stable position.", "change", "yes"),
    ("Is the PICC in the same position?", "IMPRESSION: Right PICC, unchanged in position.",
     "change", "yes"),
    ("Is the PICC where it was before?", "IMPRESSION: Right PICC with tip in the SVC.",
     "change", "unknown"),
    ("Where is the PICC?", "IMPRESSION: Right PICC with tip in the SVC.", "position",
     ["SVC", "superior vena cava"]),
    # two findings of one structure offered by "or": either said is yes, neither no
    ("Is the aorta tortuous or ectatic?", "FINDINGS: The aorta is mildly tortuous.",
     "presence", "yes"),
    ("Is the aorta tortuous or calcified?", "FINDINGS: The aorta is mildly tortuous.",
     "presence", "yes"),
    ("Is the aorta tortuous or calcified?", "FINDINGS: Calcified aortic knob.", "presence",
     "yes"),
    ("Is the aorta tortuous or calcified?", "FINDINGS: The lungs are clear.", "presence", "no"),
    ("Is the aorta tortuous or ectatic?", "FINDINGS: The aorta may be mildly tortuous.",
     "presence", "uncertain"),
    # a bare finding question may end on the study it asks of
    ("Low volumes on this film?", "FINDINGS: Low lung volumes.", "presence", "yes"),
    ("Effusion on the image?", "FINDINGS: No pleural effusion.", "presence", "no"),
    ("Pneumothorax on this study?", "FINDINGS: Possible small apical pneumothorax.",
     "presence", "uncertain"),
    # the mask that opens a reading after a comma stands for "likely"
    ("Is the fracture pathologic?", "IMPRESSION: Healing left rib fracture, XXXX pathologic "
     "fracture.", "presence", "uncertain"),
    ("Is the fracture pathologic?", "IMPRESSION: Healing left rib fracture. Pathologic "
     "fracture.", "presence", "yes"),
    # "lung scarring" is the report's scarring, not only the Fibrosis label's words
    ("Is there lung scarring?", "FINDINGS: Mild scarring at the right apex.", "presence", "yes"),
    ("Where is the lung scarring?", "FINDINGS: Mild scarring at the right apex.", "position",
     ["right", "apical", "apex"]),
    ("Is there lung scarring?", "FINDINGS: No focal scarring.", "presence", "no"),
    ("Any scarring of the lung?", "FINDINGS: Chronic pulmonary fibrosis.", "presence", "yes"),
    # a label's own words that also name a lexicon concept the label does not count: the
    # concept answers where the report names the label nowhere
    ("Any lung tumor?", "FINDINGS: Right upper lobe lung tumor.", "presence", "yes"),
    ("Is there a tumour?", "IMPRESSION: Tumour in the left hilum.", "presence", "yes"),
    ("Any lung tumor?", "IMPRESSION: No evidence of lung cancer.", "presence", "no"),
    ("Any lung tumor?", "IMPRESSION: Possible lung neoplasm in the right apex.", "presence",
     "uncertain"),
    ("Any lung tumor?", "FINDINGS: 3 cm right upper lobe mass concerning for malignancy.",
     "presence", "yes"),
    ("Which side is the lung tumor on?", "FINDINGS: Right upper lobe lung tumor.", "position",
     ["right"]),
    # the lexicon's concepts of a label that the report names and its labels missed
    ("Any atelectasis?", "FINDINGS: Collapsed right upper lobe.", "presence", "yes"),
    ("Is there a pleural effusion?", "FINDINGS: Small left hemothorax.", "presence", "yes"),
    ("Which side is the effusion on?", "FINDINGS: Small left hemothorax.", "position",
     ["left"]),
    ("Is there a pleural effusion?", "FINDINGS: Possible small left hemothorax.", "presence",
     "uncertain"),
    ("Is there a pleural effusion?", "FINDINGS: No hemothorax.", "presence", "no"),
    ("Any nodule?", "FINDINGS: Pulmonary hamartoma in the right lower lobe.", "presence", "yes"),
    # whether the study, or the view named, was taken well: no over a limitation stated of
    # it, yes otherwise; an aspect named narrows the limitations to its own
    ("Was this a technically good study?", "IMPRESSION: Technically limited exam. Clear "
     "lungs.", "study", "no"),
    ("Is the study adequate?", "FINDINGS: The patient is rotated. Clear lungs.", "study", "no"),
    ("Is this a diagnostic study?", "FINDINGS: Clear lungs. No effusion.", "study", "yes"),
    ("Was this a good inspiratory film?", "FINDINGS: Shallow inspiration. Clear lungs.",
     "study", "no"),
    ("Was this a good inspiratory film?", "FINDINGS: Low lung volumes. Clear lungs.", "study",
     "no"),
    ("Was this a good inspiratory film?", "FINDINGS: The patient is rotated. Clear lungs.",
     "study", "yes"),
    ("Is this a standard PA film?", "FINDINGS: Apical lordotic frontal view. Clear lungs.",
     "study", "no"),
    ("Is the lateral view adequate?", "FINDINGS: PA and lateral views. The frontal view is "
     "rotated. Clear lungs.", "study", "yes"),
    ("Is the frontal view adequate?", "FINDINGS: PA and lateral views. The frontal view is "
     "rotated. Clear lungs.", "study", "no"),
    ("Is the lateral view adequate?", "FINDINGS: PA and lateral views. Limited study due to "
     "motion. Clear lungs.", "study", "no"),
    ("Is the lateral view adequate?", "FINDINGS: PA and lateral views. The lateral "
     "projection is suboptimal due to the arms. Clear lungs.", "study", "no"),
    ("Is the frontal view adequate?", "FINDINGS: PA and lateral views. The lateral "
     "projection is suboptimal due to the arms. Clear lungs.", "study", "yes"),
    # ... and the other way round: a study called suboptimal is a limited one
    ("Is the film suboptimal?", "FINDINGS: Suboptimal study due to patient motion.",
     "presence", "yes"),
    ("Is the film suboptimal?", "FINDINGS: Clear lungs. No effusion.", "presence", "no"),
    # a part of the chest left off the image, or one view of it
    ("Was part of the chest cut off on the lateral view?", "FINDINGS: Clear lungs. The "
     "posterior sulci are excluded on the lateral view.", "presence", "yes"),
    ("Was part of the chest cut off?", "FINDINGS: Clear lungs. No effusion.", "presence", "no"),
    ("Is the lateral view adequate?", "FINDINGS: Clear lungs. The posterior sulci are "
     "excluded on the lateral view.", "study", "no"),
    # a postposed change word whose period before the next sentence is missing is its
    # finding's; the next sentence's own change word is not
    ("Has the granuloma changed?", "FINDINGS: Left apical granuloma, stable The heart is "
     "normal in size.", "change", "unchanged"),
    ("Is the granuloma new?", "FINDINGS: Left upper lobe granuloma unchanged There is no "
     "effusion.", "change", "no"),
    ("Is the granuloma new?", "FINDINGS: Left apical granuloma, new The heart is normal.",
     "change", "yes"),
    ("Has the granuloma changed?", "FINDINGS: Left upper lobe granuloma The heart is stable.",
     "change", "unknown"),
    # a sentence that refers back: shown on the prior study, so not new
    ("Is the granuloma new?", "FINDINGS: Small granuloma in the left upper lobe. This "
     "was seen on the prior study.", "change", "no"),
    ("Is the granuloma new?", "FINDINGS: Small granuloma in the left upper lobe. This "
     "was not seen on the prior study.", "change", "yes"),
    # the broader finding with the words the question says of the narrower one beside it
    ("Has the vertebral deformity changed?", "FINDINGS: Stable deformity of a lower thoracic "
     "vertebra. Clear lungs.", "change", "unchanged"),
    ("Is there a vertebral deformity?", "FINDINGS: Stable deformity of a lower thoracic "
     "vertebra. Clear lungs.", "presence", "yes"),
    ("Is there a compression deformity?", "FINDINGS: Stable deformity of a lower thoracic "
     "vertebra. Clear lungs.", "presence", "no"),
    ("Is there a vertebral deformity?", "FINDINGS: Old deformity of the left clavicle.",
     "presence", "no"),
    # the heart's shadow is its silhouette; a shadow alone is an opacity
    ("Which side of the heart shadow looks prominent?", "FINDINGS: Clear lungs. Stable "
     "prominence of the right cardiac silhouette.", "position", ["right"]),
    ("Is the heart shadow enlarged?", "FINDINGS: Patchy opacity in the left lower lobe. "
     "Normal heart size.", "presence", "no"),
    ("Is there a shadow in the lungs?", "FINDINGS: Patchy opacity in the left lower lobe. "
     "Normal heart size.", "presence", "yes"),
    # a general word the report says by another of the same sight, where it has none of
    # its own
    ("Which side is the paratracheal fullness on?", "FINDINGS: Clear lungs. Left "
     "paratracheal prominence, likely vascular.", "position", ["left"]),
    ("Which side is the fullness on?", "FINDINGS: Clear lungs. Fullness in the right "
     "paratracheal region. Left paratracheal prominence.", "position", ["right"]),
    ("Which side is the paratracheal fullness on?", "FINDINGS: Clear lungs. Normal heart "
     "size.", "position", "unknown"),
    # a finding with no place of its own that runs into the placed finding it is said of
    ("Where is the prominence?", "FINDINGS: Clear lungs. Prominence of soft tissue density "
     "in the upper mediastinum, unchanged.", "position", ["upper mediastinum"]),
    ("Where is the prominence?", "FINDINGS: Clear lungs. Mild prominence is noted. Soft "
     "tissue density in the upper mediastinum.", "position", "unknown"),
    ("Where is the calcified focus?", "FINDINGS: Clear lungs. Right upper quadrant densely "
     "calcified focus, likely a gallstone.", "position", ["right", "right upper quadrant"]),
    ("Where is the calcified focus?", "FINDINGS: Clear lungs. Calcified focus. Right upper "
     "quadrant surgical clips.", "position", "unknown"),
    # calcifications the same sentence calls granulomatous disease are calcified granulomas
    ("Where are the calcified granulomas?", "FINDINGS: Clear lungs. Scattered calcifications "
     "in the right upper lobe, likely sequelae of prior granulomatous disease.", "position",
     ["right", "right upper lobe"]),
    ("Are there calcified granulomas?", "FINDINGS: Bilateral calcified foci from old "
     "granulomatous infection. Normal heart.", "presence", "yes"),
    ("Are there calcified granulomas?", "FINDINGS: Calcification of the aortic knob. Normal "
     "heart. Clear lungs.", "presence", "no"),
    ("Are there calcified granulomas?", "FINDINGS: Calcification in the right upper lobe. "
     "No evidence of granulomatous disease.", "presence", "no"),
    # where it is: the broader finding at the site the narrower name says, its kind unsaid
    ("Where is the compression deformity?", "FINDINGS: Clear lungs. Wedge deformity of a "
     "lower thoracic vertebral body.", "position",
     ["lower thoracic spine", "lower thoracic vertebral body"]),
    ("Which vertebra has the compression deformity?", "FINDINGS: Clear lungs. Mild T9 "
     "vertebral body deformity.", "position", ["T9"]),
    ("Where is the compression deformity?", "FINDINGS: Old deformity of the left clavicle.",
     "position", "unknown"),
    ("Where is the compression deformity?", "FINDINGS: No deformity of the thoracic spine.",
     "position", "unknown"),
    # the outline of the mediastinum is the mediastinum
    ("Has the cardiomediastinal outline changed?", "FINDINGS: Stable cardiomediastinal "
     "silhouette. Clear lungs.", "change", "unchanged"),
    ("Has the mediastinal outline changed?", "FINDINGS: Clear lungs. No effusion.", "change",
     "unknown"),
    # a label's change given by a finding the lexicon maps to it, not by the label's words
    ("Has the heart got bigger since the last study?", "FINDINGS: Interval increase in size of "
     "the cardiac silhouette. IMPRESSION: Cardiomegaly.", "change", "yes"),
    ("Is the cardiomegaly worse?", "FINDINGS: Interval increase in size of the cardiac "
     "silhouette. IMPRESSION: Cardiomegaly.", "change", "yes"),
    ("Has the heart got bigger since the last study?", "FINDINGS: Cardiomegaly. Clear lungs.",
     "change", "unknown"),
    ("Any post-op changes?", "FINDINGS: Postop changes of the left breast. Clear lungs.",
     "presence", "yes"),
    ("Any post-op changes?", "FINDINGS: Clear lungs. Normal heart size.", "presence", "no"),
    # "the old film" is a prior study, not an old finding
    ("Is the curve worse than on the old film?", "FINDINGS: Interval worsening of the "
     "thoracolumbar scoliosis.", "change", "yes"),
    ("Is the curve worse than on the older films?", "FINDINGS: Stable thoracolumbar "
     "scoliosis.", "change", "no"),
    ("Is the rib fracture old?", "FINDINGS: Old healed right rib fracture.", "presence", "yes"),
    ("Is the left rib fracture old?", "FINDINGS: Acute left rib fracture.", "position", "no"),
    # a finding's age left open: the finding's, not the patient's
    ("Which vertebra has the deformity of uncertain age?", "FINDINGS: Clear lungs. "
     "Age-indeterminate compression deformity of T8. Mild deformity of L1, unchanged.",
     "position", ["T8"]),
    ("Is the fracture of uncertain age?", "FINDINGS: Clear lungs. Left rib fracture of "
     "indeterminate age.", "presence", "yes"),
    ("Is the fracture of uncertain age?", "FINDINGS: Clear lungs. Acute left rib fracture.",
     "presence", "no"),
    ("What is the age of the patient?", "FINDINGS: Clear lungs.", "unsupported", None),
    # an operation the patient had is read off the report's postoperative changes; what
    # should be done stays unanswered
    ("Which side had surgery?", "FINDINGS: Postoperative changes of the left chest. Clear "
     "lungs.", "position", ["left"]),
    ("Does the patient need surgery?", "FINDINGS: Clear lungs.", "unsupported", None),
    # a part of the body asked about as irregular; a broken bone by its name; the axilla by
    # its side
    ("Which rib is irregular?", "FINDINGS: Clear lungs. Irregularity of the left 5th rib.",
     "position", ["left"]),
    ("Which humerus was broken?", "FINDINGS: Clear lungs. Healed fracture of the left "
     "humerus.", "position", ["left"]),
    ("Is the humerus broken?", "FINDINGS: Clear lungs. Mild degenerative change of the right "
     "shoulder.", "presence", "no"),
    ("Which axilla are the clips in?", "FINDINGS: Clear lungs. Right axillary surgical clips.",
     "position", ["right"]),
    # focal or diffuse: one place or both lungs
    ("Is the edema focal or diffuse?", "FINDINGS: Diffuse interstitial pulmonary edema.",
     "position", ["bilateral"]),
    ("Is the opacity focal or diffuse?", "FINDINGS: Focal opacity in the left lower lobe.",
     "position", ["left"]),
    # the reading in a clause on the finding pointed at picks the one read so
    ("Where is the opacity that looks like scar?", "FINDINGS: Hazy opacity at the left base. "
     "Right upper lobe opacity which may represent scarring.", "position",
     ["right", "right upper lobe"]),
    # a part the report could not judge: a finding of it not stated is unknown, not no; a
    # finding stated outright keeps its answer
    ("Is the heart enlarged?", "FINDINGS: The cardiac silhouette is not well evaluated due to "
     "overlying density. Lungs are clear.", "presence", "unknown"),
    ("Is the heart enlarged?", "FINDINGS: Heart size cannot be assessed. Lungs are clear.",
     "presence", "unknown"),
    ("Is the heart enlarged?", "FINDINGS: The cardiac silhouette is not fully evaluated. The "
     "heart is markedly enlarged.", "presence", "yes"),
    ("Is the heart enlarged?", "FINDINGS: Lungs are clear. No pneumothorax.", "presence", "no"),
    ("Is the mediastinum widened?", "IMPRESSION: Limited mediastinal evaluation owing to "
     "patient rotation. Lungs are clear.", "presence", "unknown"),
    ("Is the mediastinum widened?", "IMPRESSION: Limited mediastinal evaluation. The "
     "mediastinum is widened.", "presence", "yes"),
    ("Is the heart enlarged?", "IMPRESSION: Limited mediastinal evaluation. Lungs are clear.",
     "presence", "no"),
    # a study called limited with its reason between the word and the study's noun
    ("Is this a limited study?", "IMPRESSION: Limited supine portable film. No acute disease.",
     "presence", "yes"),
    ("Is this a limited study?", "FINDINGS: Portable supine exam. Lungs are clear.",
     "presence", "no"),
    # a word that only says a finding is still there gives way to the course another
    # mention of it states; a word of stability beside a course does not
    ("Is the pneumothorax getting better or worse?", "FINDINGS: Persistent small left "
     "pneumothorax. IMPRESSION: Decreasing left pneumothorax.", "change", "better"),
    ("Has the effusion changed?", "FINDINGS: Left effusion remains. IMPRESSION: Increasing "
     "left pleural effusion.", "change", "increased"),
    ("Is the effusion stable?", "FINDINGS: Persistent right effusion. IMPRESSION: Decreasing "
     "right pleural effusion.", "change", "no"),
    ("Has the effusion changed?", "FINDINGS: Stable small right effusion. IMPRESSION: "
     "Decreasing right pleural effusion.", "change", "unchanged"),
    ("Has the effusion changed?", "FINDINGS: Persistent small right effusion.", "change",
     "unchanged"),
    # a finding this study does not show, named against an earlier one, is gone
    ("What happened to the nodule seen before?", "FINDINGS: The previously noted left basal "
     "nodule is not well seen on today's exam.", "change", "resolved"),
    ("Has the nodule resolved?", "FINDINGS: The left basal nodule is not visualized on this "
     "study.", "change", "yes"),
    ("Has the nodule resolved?", "FINDINGS: No nodule is seen on this study.", "change",
     "no"),
    # "interval" right before a device or an operation: placed or done since the last study
    ("Is the bypass surgery new?", "FINDINGS: There has been interval CABG. Lungs are "
     "clear.", "change", "yes"),
    ("Is the pacemaker new?", "IMPRESSION: Interval left chest pacemaker. No pneumothorax.",
     "change", "yes"),
    ("Is the pacemaker new?", "IMPRESSION: Left chest pacemaker. No pneumothorax.", "change",
     "unknown"),
    ("Is the opacity new?", "FINDINGS: There has been interval increase in the left basilar "
     "opacity.", "change", "no"),
    ("Is the pacemaker new?", "FINDINGS: Left chest pacemaker, unchanged in the interval.",
     "change", "no"),
    ("Is the nodule new?", "FINDINGS: Right upper lobe nodule, unchanged in the interval.",
     "change", "no"),
]  # fmt: skip


@pytest.mark.issue(40)
@pytest.mark.parametrize(("question", "report", "qtype", "answer"), CLINICIANS)
def test_questions_in_clinicians_words(
    engine: StudyQuestions, question: str, report: str, qtype: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert (got.type, got.answer) == (qtype, answer)


@pytest.mark.issue(40)
def test_a_labels_lexicon_concepts_are_those_of_the_reports_label_set() -> None:
    # an enlarged cardiomediastinal silhouette is ChestX-ray14's Cardiomegaly, CheXpert's
    # Enlarged Cardiomediastinum
    report = "FINDINGS: Enlarged cardiomediastinal silhouette."
    for label_set, answer in (("chestxray14", "yes"), ("chexpert", "no")):
        engine = StudyQuestions(PipelineLabeler(LabelerConfig(label_set=label_set)))
        got = engine.ask("Any cardiomegaly?", report=engine.label_reports([report])[report])
        assert (got.label, got.answer) == ("Cardiomegaly", answer)


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
    got = engine.ask(question, report=engine.label_reports([_NODULE])[_NODULE])
    assert (got.answer, got.unit) == (answer, unit)


#: where a finding is, and how bad, as the report's reading gives them
PLACES_AND_GRADES = [
    # a side the question names: that side's findings, and that side of one on both
    ("Where is the scarring in the left lung?", "FINDINGS: Fibrotic changes in the right "
     "lung. Left apical pleural scarring.", ["left", "apical"]),
    ("Where is the scarring on the right?", "FINDINGS: Bilateral apical scarring.",
     ["right", "apical"]),
    ("Where is the scarring?", "FINDINGS: Bilateral apical scarring.", ["bilateral", "apical"]),
    ("Where is the scarring in the left lung?", "FINDINGS: Right apical scarring.",
     ["right", "apical"]),
    # a label ruled out in general, beside the finding read as it that the report describes
    ("Where is the nodule?", "FINDINGS: 9 mm nodular opacity in the right midlung. No other "
     "nodules.", ["right", "middle", "midlung"]),
    ("How big is the nodule?", "FINDINGS: 9 mm nodular opacity in the right midlung. No other "
     "nodules.", 9.0),
    ("Where is the nodule?", "FINDINGS: No nodules.", "unknown"),
    ("Where is the nodule?", "FINDINGS: Possible nodular opacity in the right midlung. No "
     "nodules.", "unknown"),
    # the part of the aorta, not the word of the concept's own name
    ("Which part of the aorta could be aneurysmal?", "FINDINGS: The aorta is tortuous; "
     "cannot exclude a descending aortic aneurysm.", ["descending"]),
    ("Which part of the aorta could be aneurysmal?", "FINDINGS: Cannot exclude aortic "
     "aneurysm.", "unknown"),
    # a recess of the costophrenic angle is its place, and still a place of the lower zone
    ("Where is the nodular density?", "IMPRESSION: 2 cm nodular density in the anterior "
     "costophrenic sulcus on the lateral view.",
     ["anterior costophrenic", "anterior costophrenic sulcus"]),
    ("Is the effusion at the base?", "FINDINGS: Small left effusion blunting the posterior "
     "costophrenic angle.", "yes"),
    # the parts in the report's order, not the concept name's
    ("Which part of the aorta is tortuous?", "FINDINGS: Mild tortuosity of the descending "
     "thoracic aorta.", ["descending thoracic"]),
    ("Which part of the aorta is tortuous?", "FINDINGS: Tortuous thoracic aorta.", ["thoracic"]),
    # a bare zone with the part it is of after it, in the report's words
    ("Where is the increased density?", "FINDINGS: Stable increased density overlying the "
     "lower mediastinum.", ["lower", "lower mediastinum"]),
    ("Where is the opacity?", "FINDINGS: Opacity in the left lower lung with mediastinal "
     "shift.", ["left", "lower", "lower lung"]),
    # a zone the question names: the findings there; below the diaphragm, the upper abdomen
    ("Where are the granulomas below the diaphragm?", "FINDINGS: Calcified hilar granulomas. "
     "Calcified splenic granulomas.", ["spleen", "splenic"]),
    ("Where are the granulomas?", "FINDINGS: Calcified hilar granulomas. Calcified splenic "
     "granulomas.", ["perihilar", "spleen", "hilar", "splenic"]),
    ("Where is the opacity in the lower lobe?", "FINDINGS: Right upper lobe opacity. Left "
     "lower lobe opacity.", ["left", "left lower lobe"]),
    # "very mild" is graded mild, in the report and in the question
    ("How bad is the wedge deformity?", "FINDINGS: Very mild anterior wedge deformity of a "
     "midthoracic vertebra.", "mild"),
    ("Is the cardiomegaly very mild?", "FINDINGS: Mild cardiomegaly.", "yes"),
    # the vessels' prominence, in the report's words and the question's
    ("How prominent are the pulmonary vessels?", "FINDINGS: Slightly prominent pulmonary "
     "vascularity.", "mild"),
]  # fmt: skip


@pytest.mark.issue(40)
@pytest.mark.parametrize(("question", "report", "answer"), PLACES_AND_GRADES)
def test_places_and_grades_as_the_report_reads_them(
    engine: StudyQuestions, question: str, report: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert got.answer == answer


@pytest.mark.issue(40)
def test_several_findings_are_answered_from_the_report_not_the_image(
    engine: StudyQuestions,
) -> None:
    question = "Is there any effusion or pneumothorax?"
    text = "FINDINGS: No effusion or pneumothorax."
    image = _image(["Effusion"], [LEFT_LOW])
    both = engine.ask(question, report=engine.label_reports([text])[text], image=image)
    assert (both.answer, both.source, both.discrepancy) == ("no", "report", False)
    alone = engine.ask(question, image=image)
    assert alone.answer == "unknown" and alone.message and "report" in alone.message


@pytest.mark.issue(40)
def test_a_longer_concept_wins_over_a_label_and_the_study_needs_its_report(
    engine: StudyQuestions,
) -> None:
    assert engine.ask("Is there heart failure?").label == "concept:heart_failure"
    answer = engine.ask("Is this chest X-ray normal?", image=_image([], []))
    assert answer.answer == "unknown" and answer.message and "report" in answer.message


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("question", "report", "referent", "label", "answer"),
    [
        # the finding of the question before
        ("Has it grown?", "FINDINGS: Nodule in the right upper lobe. Left effusion, increased.",
         "Effusion", "Effusion", "yes"),
        ("How big is it?", "FINDINGS: A 2 cm mass. A 1 cm nodule.", "Nodule", "Nodule", 10.0),
        ("Are they new?", "FINDINGS: New bilateral effusions.", "Effusion", "Effusion", "yes"),
        # the grades it offers, answered in its own words
        ("How marked is it: mild, moderate or severe?", "FINDINGS: Slight streaky opacity "
         "in the right lung.", "concept:linear_opacity", "concept:linear_opacity", "mild"),
        ("How big is it: small, medium or large?", "FINDINGS: Large left pleural effusion.",
         "Effusion", "Effusion", "large"),
        # without one, the report's only abnormal finding
        ("Has it grown?", "FINDINGS: A 2 cm nodule in the right upper lobe, increased from "
         "1.5 cm. Heart size normal.", None, "Nodule", "yes"),
        ("Is this new?", "FINDINGS: New left pleural effusion.", None, "Effusion", "yes"),
        ("Where is it?", "FINDINGS: Left basilar opacity. Opacity at the left base.", None,
         "concept:opacity", ["left", "basilar", "base"]),
        # a question of its asking words alone, the finding left out
        ("Which lobe?", "FINDINGS: Patchy left lower lobe airspace disease. IMPRESSION: "
         "Left lower lobe pneumonia.", "Pneumonia", "Pneumonia", ["left", "left lower lobe"]),
        ("How big?", "FINDINGS: A 2 cm mass. A 1 cm nodule.", "Nodule", "Nodule", 10.0),
        # several, or none: refused, never guessed
        ("Has it grown?", "FINDINGS: A 2 cm mass. Small left effusion.", None, None, None),
        ("Has it grown?", "FINDINGS: Normal chest.", None, None, None),
        # a question that names its finding keeps it
        ("Is there a pneumothorax?", "FINDINGS: Small left effusion.", "Effusion",
         "Pneumothorax", "no"),
    ],
)  # fmt: skip
def test_a_pronoun_stands_for_the_previous_or_the_only_finding(
    engine: StudyQuestions,
    question: str,
    report: str,
    referent: str | None,
    label: str | None,
    answer: object,
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report], referent=referent)
    assert (got.label, got.answer) == (label, answer)
    if label is None:
        assert got.type == "unsupported" and "name the finding" in (got.message or "")


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    "question",
    [
        "Is this chest X-ray normal?",
        "Is there anything that has changed?",
        "What is it?",
        # a word of its own names what it asks about, whether or not the engine knows it
        "Where is the trachea?",
        "What is the patient's sodium?",
    ],
)
def test_a_pronoun_that_is_not_a_finding_is_not_replaced(
    engine: StudyQuestions, question: str
) -> None:
    report = "FINDINGS: A 2 cm nodule in the right upper lobe."
    got = engine.ask(question, report=engine.label_reports([report])[report], referent="Effusion")
    assert "referent" not in str(got.evidence.get("question"))


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("question", "report", "label", "answer"),
    [
        # a part of the body asked about by a general word: its findings, by place or phrase
        ("Which clavicle is abnormal?", "FINDINGS: Old deformity of the distal right clavicle. "
         "Lungs are clear.", "part:clavicle", ["right"]),
        ("Which clavicle is abnormal?", "FINDINGS: Chronic appearing irregularity of the distal "
         "left clavicle and XXXX widening may be postsurgical.", "part:clavicle", ["left"]),
        ("Is the scapula abnormal?", "FINDINGS: Fracture of the left clavicle.", "part:scapula",
         "no"),
        ("Which shoulder is affected?", "FINDINGS: Possible right shoulder calcific tendinitis.",
         "part:shoulder", ["right"]),
        ("Is the shoulder abnormal?", "FINDINGS: Possible right shoulder calcific tendinitis.",
         "part:shoulder", "uncertain"),
        ("How bad are the AC joint changes?", "FINDINGS: Moderate degenerative changes of both "
         "acromioclavicular joints.", "part:acromioclavicular joint", "moderate"),
        ("Is the clavicle change new?", "FINDINGS: Old healed fracture of the left clavicle.",
         "part:clavicle", "no"),
        ("Which hilum is abnormal?", "FINDINGS: Fullness of the left hilum.", "part:hilum",
         ["left"]),
        # a place word is a site of the finding named ("the arm lesion", "in the left humerus")
        ("Is the arm lesion an enchondroma?", "FINDINGS: Stable left proximal humeral "
         "enchondroma versus bone infarct.", "concept:enchondroma", "uncertain"),
        ("Is the lesion in the left humerus?", "FINDINGS: Lucent lesion in the right humeral "
         "head.", "open:lesion", "no"),
        # a part a side cue names picks the finding there, its side the one beside the part
        ("Which shoulder is fractured?", "FINDINGS: Fracture-dislocation of the left shoulder. "
         "Healed right rib fractures.", "concept:fracture", ["left"]),
    ],
)  # fmt: skip
def test_a_part_of_the_body_asked_about_by_a_general_word(
    engine: StudyQuestions, question: str, report: str, label: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert (got.label, got.answer) == (label, answer)


@pytest.mark.parametrize(
    ("question", "report", "answer"),
    [
        # a paired place named in the plural with no side: both of the pair
        ("Which AC joints are degenerative?", "FINDINGS: Moderate degenerative changes are "
         "seen in the acromioclavicular joints. Degenerative changes of the spine.",
         ["bilateral"]),
        # a joint's arthritis is the degenerative change asked about
        ("Which AC joints are degenerative?", "FINDINGS: Osteoarthritis of the acromioclavicular "
         "joints. Degenerative disc disease of the spine.", ["bilateral"]),
        ("Which side has the pleural thickening?", "FINDINGS: Mild pleural thickening at "
         "both lung apices.", ["bilateral"]),
        # a side said is that side; the site named picks its finding among several
        ("Which AC joint is degenerative?", "FINDINGS: Degenerative change of the left "
         "acromioclavicular joint. Degenerative changes of the spine.", ["left"]),
        # one of the pair is no side said
        ("Which side is the nodule on?", "FINDINGS: A small nodule projects over one of the "
         "lung bases.", "unknown"),
        ("Which side is the nodule on?", "FINDINGS: Possible nodule at either of the lung "
         "bases.", "unknown"),
    ],
)  # fmt: skip
def test_a_side_question_over_a_pair_named_in_the_plural(
    engine: StudyQuestions, question: str, report: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert got.answer == answer


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("question", "report", "answer"),
    [
        # a bone finding read with no side: the side word just before its rib
        ("Which rib is fractured?", "FINDINGS: Age-indeterminate fracture of the left lateral "
         "7th rib.", ["left", "7th rib"]),
        ("Which rib is fractured?", "FINDINGS: Possible fracture of the right posterior 5th "
         "rib.", ["right", "5th rib"]),
        # no side word beside the rib: none is given
        ("Which rib is fractured?", "FINDINGS: Age-indeterminate fracture of the lateral 7th "
         "rib.", ["7th rib"]),
        ("Which rib is fractured?", "FINDINGS: No rib fracture.", "unknown"),
    ],
)  # fmt: skip
def test_a_level_question_takes_the_side_beside_the_level(
    engine: StudyQuestions, question: str, report: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert got.answer == answer


@pytest.mark.parametrize(
    ("report", "answer"),
    [
        # a finding at a level of the part is at the part, its own phrase naming no rib
        ("FINDINGS: The left 6th rib shows an old healed fracture.", ["left", "6th rib"]),
        ("FINDINGS: The 9th right rib may be the site of an old healed fracture.", ["9th rib"]),
        ("FINDINGS: The 6th rib is intact. No fracture.", "unknown"),
    ],
)  # fmt: skip
def test_a_part_question_takes_the_findings_at_a_level_of_the_part(
    engine: StudyQuestions, report: str, answer: object
) -> None:
    got = engine.ask("Which rib is abnormal?", report=engine.label_reports([report])[report])
    assert (got.label, got.answer) == ("part:rib", answer)


@pytest.mark.parametrize(
    ("question", "report", "answer"),
    [
        # a place the finding's own words name beside the one read ("hilar"): both
        ("Where are the calcified nodes?", "FINDINGS: Calcified mediastinal and hilar lymph "
         "nodes from old granulomatous disease.", ["perihilar", "mediastinal", "hilar"]),
        ("Where are the calcified nodes?", "FINDINGS: Possible calcified mediastinal and "
         "hilar lymph nodes.", ["perihilar", "mediastinal", "hilar"]),
        ("Where are the calcified nodes?", "FINDINGS: No calcified mediastinal or hilar lymph "
         "nodes.", "unknown"),
        # a place only beside it, another finding's, is not the finding's
        ("Where is the granuloma?", "FINDINGS: Calcified right paratracheal node and a "
         "calcified granuloma in the right upper lobe.", ["right", "right upper lobe"]),
    ],
)  # fmt: skip
def test_a_placed_finding_keeps_the_parts_its_own_words_name(
    engine: StudyQuestions, question: str, report: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert got.answer == answer


@pytest.mark.parametrize(
    ("question", "report", "answer"),
    [
        # a finding read as another concept whose own words are the question's ("calcific
        # density", read as a calcification), over a kin of the density ruled out
        ("Where is the calcified density?", "FINDINGS: No focal airspace opacities. A "
         "calcific density is seen in the left midlung zone.",
         ["left", "middle", "midlung"]),
        ("Where is the calcified density?", "FINDINGS: Possible calcified density in the "
         "right apex.", ["right", "apical", "apex"]),
        ("How many calcified densities?", "FINDINGS: No focal airspace opacity. Multiple "
         "scattered calcific densities of old granulomatous disease.", "multiple"),
        ("Where is the calcified density?", "FINDINGS: No calcific density. No airspace "
         "opacity.", "unknown"),
    ],
)  # fmt: skip
def test_an_open_question_takes_a_finding_worded_as_its_descriptor_and_concept(
    engine: StudyQuestions, question: str, report: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert got.answer == answer


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    "question",
    [
        "Any change in the heart?",  # a change word alone asks whether the part changed
        "Any abnormality in the right lung?",  # a part inside a place says where
        "How many vertebrae are affected?",  # counts places, not findings
        "Which part of the spine shows degenerative change?",  # a finding named keeps it
    ],
)
def test_a_general_word_that_is_no_part_question(engine: StudyQuestions, question: str) -> None:
    report = "FINDINGS: Mild cardiomegaly. Degenerative changes of the thoracic spine."
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert not (got.label or "").startswith("part:")


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("question", "report", "answer"),
    [
        # a site named by the report's other words for it (`site_aliases`)
        ("Any arthritis in the bones?", "FINDINGS: Arthritic changes of the skeletal "
         "structures. Lungs are clear.", "yes"),
        ("Any arthritis in the neck?", "FINDINGS: Mild lower cervical arthritis.", "yes"),
        ("Any arthritis in the spine?", "FINDINGS: Mild lower cervical arthritis.", "yes"),
        ("Any arthritis in the neck?", "FINDINGS: Arthritis of the lumbar spine.", "no"),
        ("Any arthritis in the bones?", "FINDINGS: Lungs are clear. No arthritis.", "no"),
        # a level of the spine is a site the report names by the same word
        ("Is the T9 deformity worse?", "FINDINGS: Deformity of T9 appears worse than on the "
         "prior study.", "yes"),
        ("Is there a deformity at T9?", "FINDINGS: Deformity of T9 is unchanged.", "yes"),
        ("Is there a deformity at L1?", "FINDINGS: Deformity of T9 is unchanged.", "no"),
        # the diaphragm's shapes in a clinician's and a report's other words
        ("Are the hemidiaphragms flat?", "FINDINGS: Hyperinflated lungs with flattened "
         "diaphragms.", "yes"),
        ("Are the hemidiaphragms flat?", "FINDINGS: The hemidiaphragms are flat.", "yes"),
        ("Are the hemidiaphragms flat?", "FINDINGS: Lungs are clear.", "no"),
        ("How flat are the hemidiaphragms?", "FINDINGS: Mildly flattened diaphragms.", "mild"),
        ("Which hemidiaphragm is up?", "FINDINGS: Elevated right hemidiaphragm.", ["right"]),
        ("Which hemidiaphragm is up?", "FINDINGS: Lungs are clear.", "unknown"),
        ("Which hemidiaphragm is eventrated?", "FINDINGS: Eventration of left hemidiaphragm.",
         ["left"]),
        ("Which side is the diaphragmatic hump on?", "FINDINGS: There is a right diaphragmatic "
         "hump.", ["right"]),
        # a hilum that is or looks full is an enlarged one; a distorted one its own finding
        ("Which hilum looks full?", "FINDINGS: Mild fullness of the left hilum.", ["left"]),
        ("Which hilum is full?", "FINDINGS: The right hilum is full.", ["right"]),
        ("Is the right hilum full?", "FINDINGS: Mild fullness of the left hilum.", "no"),
        ("Which hilum looks full?", "FINDINGS: Lungs are clear.", "unknown"),
        ("Which hilum is distorted?", "FINDINGS: Distortion of the right hilum.", ["right"]),
        ("Is the hilum distorted?", "FINDINGS: No hilar distortion.", "no"),
        # air trapping is its own finding: its hedge, not the hyperinflation beside it
        ("Is there air trapping?", "FINDINGS: Hyperinflated lungs, air trapping versus "
         "inspiratory effort.", "uncertain"),
        ("Is there air trapping?", "FINDINGS: Hyperinflated lungs may represent air trapping.",
         "uncertain"),
        ("Is there air trapping?", "FINDINGS: Hyperinflated lungs with air trapping.", "yes"),
        ("Is there air trapping?", "FINDINGS: Lungs are clear.", "no"),
        # a curve's side and grade, said before a curvature of the spine
        ("Which way does the spine curve?", "FINDINGS: Mild dextro curvature of the thoracic "
         "spine.", ["right"]),
        ("Is the spinal curve to the left or the right?", "FINDINGS: Levo curvature of the "
         "spine.", ["left"]),
        ("How severe is the curvature?", "FINDINGS: Mild dextro curvature of the spine.", "mild"),
        # a reversed lordosis
        ("Is the cervical lordosis reversed?", "FINDINGS: There is reversal of the normal "
         "cervical lordosis.", "yes"),
        ("Is the cervical lordosis reversed?", "FINDINGS: Lungs are clear.", "no"),
        ("Any disc degeneration in the thoracic spine?", "FINDINGS: Degenerative disc change "
         "at the thoracic spine.", "yes"),
    ],
)  # fmt: skip
def test_other_words_for_sites_shapes_hila_and_curves(
    engine: StudyQuestions, question: str, report: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert got.answer == answer


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("question", "report", "answer"),
    [
        # a fat pad said with both layers of the pericardium
        ("Is there a prominent epicardial fat pad?", "FINDINGS: There is prominent "
         "epipericardial fat.", "yes"),
        ("Is there a prominent epicardial fat pad?", "FINDINGS: Lungs are clear.", "no"),
        # a curve of the spine said as the spine's curvature, or by the side of its apex
        ("Is there scoliosis?", "FINDINGS: S-shaped spine curvature is present.", "yes"),
        ("Is there scoliosis?", "FINDINGS: No spine curvature.", "no"),
        ("Is there scoliosis?", "FINDINGS: Possible mild spine curvature.", "uncertain"),
        ("Is there a curve in the spine?", "FINDINGS: Mild left apex curvature of the thoracic "
         "spine.", "yes"),
        ("Which way does the spine curve?", "FINDINGS: Mild left apex curvature of the thoracic "
         "spine.", ["left"]),
        ("Where is the spinal curvature?", "FINDINGS: Mild right apex curvature of the lower "
         "thoracic spine.", ["right", "lower thoracic spine"]),
        # shadowing of the airspaces is airspace disease
        ("Any airspace shadowing to suggest pneumonia?", "FINDINGS: The lungs are clear "
         "without focal airspace opacity.", "no"),
        ("Is there airspace shadowing?", "FINDINGS: Patchy air space shadowing at the right "
         "base.", "yes"),
    ],
)  # fmt: skip
def test_findings_said_in_other_words_of_their_family(
    engine: StudyQuestions, question: str, report: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert got.answer == answer


# how the study was taken, the heart's size and the measurements asked in clinicians' words
STUDY_QUALITY_AND_SIZE = [
    ("Is the study technically limited?", "FINDINGS: The study is limited by patient motion.",
     "presence", "yes"),
    ("Is the exam limited?", "IMPRESSION: Exam limited on the lateral view by the arms. No "
     "effusion.", "presence", "yes"),
    ("Is the film limited?", "FINDINGS: Limited film due to rotation.", "presence", "yes"),
    ("Is the exam limited?", "FINDINGS: Clear lungs. No effusion.", "presence", "no"),
    ("Is the film limited?", "FINDINGS: The patient's chin obscures both lung apices.",
     "presence", "yes"),
    # lungs "well-expanded and clear" are well expanded
    ("Are the lungs well expanded?", "IMPRESSION: Well-expanded and clear lungs.", "presence",
     "yes"),
    ("Are the lungs well expanded?", "IMPRESSION: Low lung volumes.", "presence", "no"),
    # "within normal range" is the heart's normal size
    ("Is the heart size within normal range?", "FINDINGS: Heart size is normal.", "presence",
     "yes"),
    ("Is the heart size within normal range?", "FINDINGS: Moderate cardiomegaly.", "presence",
     "no"),
    ("Is the heart size within normal range?", "FINDINGS: Possible cardiomegaly.", "presence",
     "uncertain"),
    # a heart asked about as small is the small heart
    ("Is the heart on the small side?", "FINDINGS: Small sized heart. Clear lungs.",
     "presence", "yes"),
    ("Is the heart small?", "FINDINGS: Heart size is normal.", "presence", "no"),
    ("Is the heart small?", "FINDINGS: Mild cardiomegaly.", "presence", "no"),
    # the projection a size is judged for is read through
    ("Is the heart enlarged for an AP film?", "FINDINGS: Heart size is normal for AP "
     "technique.", "presence", "no"),
    ("Is the heart enlarged for a portable film?", "FINDINGS: Moderate cardiomegaly.",
     "presence", "yes"),
    # a length asked in its unit, a ratio or an angle by its name: a measurement
    ("How many cm across is the heart?", "FINDINGS: Heart size is normal.", "size", "unknown"),
    ("What's the CT ratio?", "FINDINGS: Normal heart size. Clear lungs.", "size", "unknown"),
    ("What's the Cobb angle?", "FINDINGS: Mild thoracic dextroscoliosis.", "size", "unknown"),
    # an aorta wider than normal is a dilated one
    ("Is the thoracic aorta wider than normal?", "FINDINGS: Dilated thoracic aorta.",
     "presence", "yes"),
    ("Is the thoracic aorta wider than normal?", "FINDINGS: Normal mediastinal contours.",
     "presence", "no"),
]  # fmt: skip


COUNTS_SITES_AND_GRADES = [
    # a process beside the things counted is not one more of them
    ("How many granulomas?", "FINDINGS: A calcified granuloma in the right lower lobe. "
     "IMPRESSION: Prior granulomatous disease.", "count", 1),
    ("How many granulomas?", "IMPRESSION: Prior granulomatous disease.", "count", "unknown"),
    # a label's plural inside a longer name is counted by that name's number
    ("How many nodules are there?", "FINDINGS: Two calcified nodules in the left base.",
     "count", 2),
    ("How many nodules are there?", "FINDINGS: A couple of calcified nodules in the left "
     "base.", "count", 2),
    ("How many nodules are there?", "FINDINGS: Calcified nodules in the left base.", "count",
     "multiple"),
    # ... and a process the report reads from things is counted by them
    ("How many granulomas are there?", "FINDINGS: Two calcified nodules consistent with old "
     "granulomatous disease.", "count", 2),
    ("How many granulomas are there?", "FINDINGS: Scattered calcified nodules, likely old "
     "granulomatous disease.", "count", "multiple"),
    ("How many granulomas are there?", "FINDINGS: A calcified nodule in the left lung "
     "consistent with old granulomatous disease.", "count", 1),
    ("How many granulomas are there?", "FINDINGS: Calcified nodules in both lungs. Old "
     "granulomatous disease.", "count", "unknown"),
    # a plural that sums up findings named one by one adds none; one that adds a place does
    ("How many nodules are there?", "FINDINGS: A nodule at the right apex. A 5 mm nodule in "
     "the right lower lobe. IMPRESSION: Right lung nodules.", "count", 2),
    ("How many granulomas are there?", "FINDINGS: A 4 mm granuloma in the right upper lobe. "
     "Left hilar granulomas.", "count", "multiple"),
    # "several vertebral bodies" beside a spine finding: several levels
    ("How many vertebral bodies are wedged?", "FINDINGS: Wedging of several lower thoracic "
     "vertebral bodies.", "count", "multiple"),
    ("How many vertebral bodies are wedged?", "FINDINGS: Wedging of a lower thoracic "
     "vertebral body.", "count", 1),
    # borderline: the mildest grade offered
    ("How enlarged is the heart: mild, moderate or severe?", "FINDINGS: Borderline "
     "cardiomegaly.", "severity", "mild"),
    ("How enlarged is the heart?", "FINDINGS: Borderline cardiomegaly.", "severity",
     "borderline"),
    ("How enlarged is the heart?", "FINDINGS: Moderate cardiomegaly.", "severity", "moderate"),
    # a hedge word the asked concept is named by is no doubt; asked of the heart, it still is
    ("Is there borderline cardiomegaly?", "FINDINGS: Borderline cardiomegaly.", "presence",
     "yes"),
    ("Is the heart size at the upper limits of normal?", "FINDINGS: Heart size is "
     "borderline enlarged.", "presence", "yes"),
    ("Is there borderline cardiomegaly?", "FINDINGS: Probable borderline cardiomegaly.",
     "presence", "uncertain"),
    ("Is there cardiomegaly?", "FINDINGS: Borderline cardiomegaly.", "presence", "uncertain"),
    ("Is there borderline cardiomegaly?", "FINDINGS: Heart size is normal.", "presence", "no"),
    # the broader finding at the body part a narrower one is named after
    ("Is there a sternal fracture?", "FINDINGS: Old fractures of several ribs and the "
     "sternum.", "presence", "yes"),
    ("Is there a sternal fracture?", "FINDINGS: Old fractures of several ribs. Sternotomy "
     "wires.", "presence", "no"),
    ("Is there a clavicle fracture?", "FINDINGS: Old fractures of several ribs and the "
     "sternum.", "presence", "no"),
    # a question's "T-spine" is the thoracic spine
    ("Any bony spurs on the T-spine?", "FINDINGS: Mild T-spine osteophytes.", "presence",
     "yes"),
    ("Any bony spurs on the T-spine?", "FINDINGS: Thoracic spine osteophytes.", "presence",
     "yes"),
    ("Any bony spurs on the T-spine?", "FINDINGS: Lower cervical spine osteophytes.",
     "presence", "no"),
    # a straightened kyphosis is no exaggerated one
    ("Is the thoracic kyphosis exaggerated?", "FINDINGS: Mild straightening of the thoracic "
     "kyphosis.", "presence", "no"),
    ("Is the thoracic kyphosis straightened?", "FINDINGS: Mild straightening of the thoracic "
     "kyphosis.", "presence", "yes"),
    ("Is the thoracic kyphosis exaggerated?", "FINDINGS: Exaggerated thoracic kyphosis.",
     "presence", "yes"),
]  # fmt: skip


VIEWS = [
    # which view a finding is seen on: the view its sentence names
    ("Which view has motion artifact?", "FINDINGS: The lateral view is degraded by patient "
     "motion. Clear lungs.", "position", ["lateral view"]),
    ("Which view has motion artifact?", "FINDINGS: Patient motion limits the study. Clear "
     "lungs.", "position", "unknown"),
    ("Which view has motion artifact?", "FINDINGS: Frontal and lateral views. Clear lungs.",
     "position", "unknown"),
    # a view named beside another finding is where it is seen
    ("Was the frontal view taken in a lordotic projection?", "FINDINGS: Lordotic frontal "
     "view. Normal heart size.", "presence", "yes"),
    ("Was the frontal view taken in a lordotic projection?", "FINDINGS: PA and lateral views. "
     "Normal heart size.", "presence", "no"),
    ("Is there motion artifact on the lateral view?", "FINDINGS: Lateral view limited by "
     "patient motion.", "presence", "yes"),
    # a view asked alone is still the view
    ("Was a frontal view obtained?", "FINDINGS: Single frontal view. Normal heart size.",
     "presence", "yes"),
]  # fmt: skip


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("question", "report", "qtype", "answer"),
    STUDY_QUALITY_AND_SIZE + COUNTS_SITES_AND_GRADES + VIEWS,
)
def test_study_quality_sizes_counts_grades_and_views(
    engine: StudyQuestions, question: str, report: str, qtype: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert (got.type, got.answer) == (qtype, answer)


def test_a_whole_study_statement_is_shown_once_as_evidence(engine: StudyQuestions) -> None:
    # the statement carries its own change and is the study's statement too: one span
    report = "FINDINGS: Heart size normal. IMPRESSION: Stable chest."
    got = engine.ask("Has anything changed?", report=engine.label_reports([report])[report])
    spans = [(e.get("start"), e.get("end")) for e in got.evidence["report"]]
    assert got.answer == "no"
    assert spans and len(spans) == len(set(spans))


REPORT_WORDS = [
    # a word no concept names, read where the report names it
    ("Where are the phleboliths?", "FINDINGS: Several phleboliths over the left upper "
     "quadrant. Lungs are clear.", "position", ["left", "left upper quadrant"]),
    ("Is there a filament?", "FINDINGS: No retained filament. Lungs are clear.", "presence",
     "no"),
    ("Is there a filament?", "FINDINGS: Possible retained filament over the right apex.",
     "presence", "uncertain"),
    ("Has the beading changed?", "FINDINGS: Stable beading of the right hilar contour.",
     "change", "unchanged"),
    ("How big is the beading?", "FINDINGS: Beading of the right hilar contour.", "size",
     "unknown"),
]  # fmt: skip

MEASURES_PARTS_AND_DEVICES = [
    # a measurement asked by its name after "What is the ...": a number, never the grade
    ("What is the aortic diameter?", "FINDINGS: Moderately ectatic thoracic aorta.", "size",
     "unknown"),
    ("What is the CTR?", "FINDINGS: Mild cardiomegaly.", "size", "unknown"),
    ("What is the heart size?", "FINDINGS: Mild cardiomegaly.", "severity", "mild"),
    # the size of a part of the body's findings: measured, or unknown
    ("How big are the lymph nodes?", "FINDINGS: Enlarged right paratracheal lymph nodes.",
     "size", "unknown"),
    ("How big are the lymph nodes?", "FINDINGS: Right hilar lymphadenopathy measuring 2 cm.",
     "size", 20.0),
    ("How big are the pulmonary arteries?", "FINDINGS: Prominent pulmonary arteries.", "size",
     "unknown"),
    ("How big are the lungs?", "FINDINGS: A 2 cm nodule in the right lung.", "unsupported",
     None),
    # where a device is: the abdomen, the gastroesophageal junction, under the clavicle (not
    # where its leads end)
    ("Where are the surgical clips?", "FINDINGS: Surgical clips are present in the abdomen.",
     "position", ["abdomen", "in the abdomen"]),
    ("Where are the surgical clips?", "FINDINGS: Surgical clips near the gastroesophageal "
     "junction.", "position", ["gastroesophageal junction"]),
    ("Where is the pacemaker generator?", "FINDINGS: Left infraclavicular pacemaker "
     "generator with leads in the right atrium.", "position", ["left", "infraclavicular"]),
    ("Where are the surgical clips?", "FINDINGS: Surgical clips are present.", "position",
     "unknown"),
    # a paired vein a line goes in by: its side
    ("Which internal jugular vein was the line placed through?", "FINDINGS: Left IJ catheter "
     "with tip in the mid SVC.", "position", ["left"]),
    ("Which jugular vein is the catheter in?", "FINDINGS: Right internal jugular catheter "
     "with tip in the lower SVC.", "position", ["right"]),
    # a jugular line without "internal", or with its own name masked, is a central line
    ("Which side is the central line on?", "FINDINGS: Right jugular XXXX catheter with tip "
     "in the lower SVC.", "position", ["right"]),
    ("Is there a central line?", "FINDINGS: Left jugular venous catheter in place.",
     "presence", "yes"),
    ("Is there a central line?", "FINDINGS: No jugular venous distension.", "presence", "no"),
    # the chest wall: said by the report, or the device implanted there
    ("Is there an implanted device in the chest wall?", "FINDINGS: Stable electronic device "
     "in the left anterior chest wall.", "presence", "yes"),
    ("Is there a device in the chest wall?", "FINDINGS: Left-sided pacemaker with leads in the "
     "right atrium and right ventricle.", "presence", "yes"),
    ("Is there a device in the chest wall?", "FINDINGS: Right IJ catheter with tip in the SVC.",
     "presence", "no"),
    # a tip the report does not place is not where the line runs
    ("Where's the tip of the line?", "FINDINGS: Tunneled left central venous catheter "
     "interrupted at the level of the clavicle. Normal heart size.", "position", "unknown"),
    ("Where's the tip of the line?", "FINDINGS: Left central venous catheter with tip in the "
     "lower SVC.", "position", ["lower SVC", "superior vena cava"]),
    ("Where is the tip of the granuloma?", "FINDINGS: Calcified granuloma in the left apex.",
     "position", ["left", "apical", "apex"]),
    # a distance given as a range: both ends, in the unit asked
    ("How far above the carina does the trach tube end?", "FINDINGS: Tracheostomy tube with "
     "tip approximately 5-6 cm above the carina.", "size", "50-60 mm"),
    ("How many cm above the carina is the tube tip?", "FINDINGS: ET tube tip 3 to 4 cm above "
     "the carina.", "size", "3-4 cm"),
    ("How far above the carina is the tube tip?", "FINDINGS: ET tube tip 4 cm above the "
     "carina.", "size", 40.0),
    # a heart larger than normal is an enlarged one
    ("Is the heart larger than normal?", "FINDINGS: Mild cardiomegaly.", "presence", "yes"),
    ("Is the heart larger than normal?", "FINDINGS: Heart size is at the upper limits of "
     "normal.", "presence", "no"),
    ("Is the heart larger than normal?", "FINDINGS: Borderline cardiomegaly.", "presence",
     "uncertain"),
    # hardware named by what it does: a fixation, a stabilization
    ("Is there fixation hardware in the humerus?", "FINDINGS: Interval fixation of the right "
     "humeral fracture.", "presence", "yes"),
    ("Is there any spinal fixation hardware?", "FINDINGS: Lumbar vertebral body "
     "stabilization.", "presence", "yes"),
    ("Is there any spinal fixation hardware?", "FINDINGS: Mild lumbar spondylosis.",
     "presence", "no"),
    # "one" after a size word stands for the finding: no count
    ("Is the effusion a large one?", "FINDINGS: Large right pleural effusion.", "severity",
     "yes"),
    ("Is the effusion a large one?", "FINDINGS: Small right pleural effusion.", "severity",
     "no"),
    ("Is there only one effusion?", "FINDINGS: Small right pleural effusion.", "count", "yes"),
    # a finding seen with no grade, ruled out at a grade: not of that grade; another unsaid
    ("Is the effusion a large one?", "FINDINGS: No pneumothorax or large pleural effusion. "
     "IMPRESSION: Right pleural effusion.", "severity", "no"),
    ("Is the effusion small?", "FINDINGS: No pneumothorax or large pleural effusion. "
     "IMPRESSION: Right pleural effusion.", "severity", "unknown"),
    ("Is the effusion large?", "FINDINGS: Pleural effusion.", "severity", "unknown"),
    # ... only where it is seen: a hedged one's grade is still unsaid
    ("Is the effusion large?", "FINDINGS: No large pleural effusion. Possible pleural "
     "effusion.", "severity", "unknown"),
    # words that stress or point without asking more: "actually", "measured"
    ("Is the heart actually normal in size?", "FINDINGS: Normal heart size.", "presence",
     "yes"),
    ("Is the measured nodule over a centimetre?", "FINDINGS: Right upper lobe nodule "
     "measuring 6 mm.", "size", "no"),
]  # fmt: skip


@pytest.mark.issue(40)
@pytest.mark.parametrize(("question", "report", "qtype", "answer"), REPORT_WORDS)
def test_a_word_no_concept_names_is_read_where_the_report_names_it(
    engine: StudyQuestions, question: str, report: str, qtype: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report], report_text=report)
    assert (got.type, got.answer) == (qtype, answer)
    assert REPORT_WORD_RULE in got.evidence["question"]["rules"]  # type: ignore[index]
    spans = [e for e in got.evidence["report"] if e.get("kind") == "finding"]  # type: ignore[attr-defined]
    assert spans and all(report[s["start"] : s["end"]].lower() in question.lower() for s in spans)


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("question", "report"),
    [
        # the word is not in the report: still refused
        ("Where are the phleboliths?", "FINDINGS: Lungs are clear. No effusion."),
        # a question about the patient, not what is seen
        ("Does the patient smoke?", "FINDINGS: Patient smoke exposure. Lungs are clear."),
        # what to do next, and a time, are no thing seen
        ("How many weeks until followup?", "FINDINGS: Lungs are clear. Followup in 6 weeks."),
        (
            "How many weeks ago was the comparison?",
            "FINDINGS: Lungs are clear. Prior film from 6 weeks ago.",
        ),
        # without the report's text the question stays refused
        ("Where are the phleboliths?", None),
        # the de-identification's mask, a name and a verb are no thing seen
        ("Is there XXXX?", "FINDINGS: Right IJ XXXX with tip in the SVC."),
        ("Is the smith present?", "FINDINGS: Lungs are clear. Discussed with Dr. Smith."),
        ("Are the findings discussed?", "FINDINGS: Lungs are clear. Findings discussed."),
    ],
)
def test_a_word_the_report_does_not_read_stays_refused(
    engine: StudyQuestions, question: str, report: str | None
) -> None:
    text = report or "FINDINGS: Pelvic phleboliths."
    got = engine.ask(question, report=engine.label_reports([text])[text], report_text=report)
    assert got.type == "unsupported" and got.answer is None


@pytest.mark.issue(40)
@pytest.mark.parametrize(("question", "report", "qtype", "answer"), MEASURES_PARTS_AND_DEVICES)
def test_measures_parts_and_devices(
    engine: StudyQuestions, question: str, report: str, qtype: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert (got.type, got.answer) == (qtype, answer)


PRESENCE_FORMS = [
    # a change word that makes a graded finding's phrase names it: presence, not change
    ("Is the kyphosis increased?", "FINDINGS: Exaggerated thoracic kyphosis. Clear lungs.",
     "presence", "yes"),
    ("Is the kyphosis increased?", "FINDINGS: Clear lungs. Normal heart size.", "presence",
     "no"),
    ("Are the interstitial markings increased?", "FINDINGS: Coarse interstitial markings, "
     "likely chronic.", "presence", "yes"),
    ("Are the interstitial markings increased?", "FINDINGS: Possible mild interstitial "
     "prominence.", "presence", "uncertain"),
    # ... a prior named keeps the change question; another finding's increase is a change
    ("Are the interstitial markings increased since the prior?", "FINDINGS: Coarse "
     "interstitial markings.", "change", "unknown"),
    ("Is the opacity increased?", "FINDINGS: Right basilar opacity.", "change", "unknown"),
    # a finding asked beside another (`beside_links`): the first is asked, the link's words
    # ask nothing ("top" is no upper zone)
    ("Any focal consolidation on top of the fibrosis?", "FINDINGS: Chronic pulmonary "
     "fibrosis. No focal consolidation.", "presence", "no"),
    ("Any consolidation superimposed on the emphysema?", "FINDINGS: Emphysema. New left "
     "lower lobe consolidation.", "presence", "yes"),
    ("Any consolidation on top of the fibrosis?", "FINDINGS: Fibrosis. Possible right "
     "basilar consolidation.", "presence", "uncertain"),
    # the sign asked, not the reading it suggests
    ("Any airspace opacity to suggest pneumonia?", "FINDINGS: Clear lungs without airspace "
     "opacity.", "presence", "no"),
    ("Any airspace opacity to suggest pneumonia?", "FINDINGS: Left basilar airspace "
     "opacity.", "presence", "yes"),
    # how sharply a finding stands out narrows nothing the reading tells apart
    ("Any discrete lung nodule?", "FINDINGS: No discrete nodules. Clear lungs.", "presence",
     "no"),
    ("Any discrete lung nodule?", "FINDINGS: 8 mm right upper lobe nodule.", "presence",
     "yes"),
    ("Is the nodule discrete?", "FINDINGS: 8 mm right upper lobe nodule.", "unsupported",
     None),
    # "changes" after a finding's word is that finding's noun, joined to the one asked
    ("Any post-op changes from bypass surgery?", "FINDINGS: Sternotomy wires from prior CABG. "
     "Clear lungs.", "presence", "yes"),
    ("Any post-op changes from bypass surgery?", "FINDINGS: Clear lungs. Normal heart size.",
     "presence", "no"),
    ("Any postoperative changes from bypass surgery?", "FINDINGS: Prior CABG. Clear lungs.",
     "presence", "yes"),
    ("Any bone changes of renal osteodystrophy?", "FINDINGS: Diffuse sclerosis compatible "
     "with renal osteodystrophy.", "presence", "yes"),
    ("Any bone changes of renal osteodystrophy?", "FINDINGS: Clear lungs. No acute bony "
     "abnormality.", "presence", "no"),
    # ... a change asked of a finding stays one
    ("Any changes in the effusion?", "FINDINGS: Small left effusion.", "change", "unknown"),
]  # fmt: skip


@pytest.mark.issue(40)
@pytest.mark.parametrize(("question", "report", "qtype", "answer"), PRESENCE_FORMS)
def test_presence_forms(
    engine: StudyQuestions, question: str, report: str, qtype: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert (got.type, got.answer) == (qtype, answer)


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("question", "report", "answer"),
    [
        # the one the report calls the largest or the smaller, in the next sentence
        ("Where is the largest nodule?", "FINDINGS: Several bilateral pulmonary nodules. "
         "These have grown, with the largest in the right base measuring 2 cm.",
         ["right base"]),
        ("Where is the smaller nodule?", "FINDINGS: Two nodules measuring 8 mm and 14 mm. The "
         "smaller one lies within the left upper lobe and the other in the right base.",
         ["left upper lobe"]),
        ("Which side is the biggest mass on?", "FINDINGS: Bilateral lung masses, the biggest "
         "in the left lower lobe.", ["left"]),
        # a word of the other direction, or none, names no one
        ("Where is the smallest nodule?", "FINDINGS: Several bilateral pulmonary nodules. The "
         "largest is in the right base.", ["bilateral"]),
        ("Where is the largest nodule?", "FINDINGS: Several bilateral pulmonary nodules.",
         ["bilateral"]),
    ],
)  # fmt: skip
def test_a_superlative_asks_the_place_of_the_one_the_report_calls_so(
    engine: StudyQuestions, question: str, report: str, answer: object
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report], report_text=report)
    assert (got.type, got.answer) == ("position", answer)


DESCRIBING_CHANGE_WORDS = [
    # "increased" before a finding in a report that compares with no earlier study may only
    # say the finding is denser: whether it changed is not said
    ("Has the opacity changed?", "FINDINGS: Mild increased airspace opacity at the right "
     "base. No effusion.", "unknown"),
    ("Has the airspace opacity increased?", "FINDINGS: Mild increased airspace opacity at the "
     "right base. No effusion.", "unknown"),
    ("Is the chest worse than before?", "FINDINGS: Mild increased airspace opacity at the "
     "right base. No effusion.", "unknown"),
    ("Has anything changed since the last film?", "FINDINGS: Mild increased airspace opacity "
     "at the right base. No effusion.", "unknown"),
    # a report that compares keeps it
    ("Has the opacity changed?", "FINDINGS: Mild increased airspace opacity at the right base "
     "compared to the prior study. No effusion.", "increased"),
    ("Has the airspace opacity increased?", "FINDINGS: Mild increased airspace opacity at the "
     "right base. Stable cardiomegaly.", "yes"),
    ("Is the chest worse than before?", "FINDINGS: Mild increased airspace opacity at the "
     "right base since the last film. No effusion.", "yes"),
    # after the finding, the word says how it changed
    ("Has the effusion increased?", "FINDINGS: Left effusion, increased. No pneumothorax.",
     "yes"),
]  # fmt: skip


@pytest.mark.parametrize(("question", "report", "answer"), DESCRIBING_CHANGE_WORDS)
def test_a_describing_change_word_in_a_report_that_compares_with_nothing(
    engine: StudyQuestions, question: str, report: str, answer: str
) -> None:
    a = engine.ask(question, report=engine.label_reports([report])[report], report_text=report)
    assert a.answer == answer


CHANGE_OF_A_COMPLEMENT = [
    # a change said after the finding another finding is of is the whole phrase's
    ("Has the fracture changed?", "FINDINGS: Fracture of the upper sternotomy wire is "
     "unchanged. Clear lungs.", "change", "unchanged"),
    ("Is the fracture new?", "FINDINGS: There is a fracture of a sternotomy wire, stable. "
     "Clear lungs.", "change", "no"),
    ("Is the fracture new?", "FINDINGS: Fracture of the third sternotomy wire, not seen on "
     "the prior exam.", "change", "yes"),
    # a change word before the second finding is that finding's only
    ("Has the fracture changed?", "FINDINGS: Fracture of a stable sternotomy wire. Clear "
     "lungs.", "change", "unknown"),
    # in another clause, it is not the first finding's
    ("Has the fracture changed?", "FINDINGS: Rib fracture. Sternotomy wires are unchanged.",
     "change", "unknown"),
]  # fmt: skip


LISTS_WITH_AN_ITEMS_OWN_WORDS = [
    # an item's own place words after it, and the de-identification's mask of its noun,
    # still make one list with the next item: the change word before the list is each one's
    ("Any change in the granulomas?", "FINDINGS: Stable calcified right hilar XXXX and "
     "granulomas. Lungs are clear.", "change", "unchanged"),
    ("Are the granulomas new?", "FINDINGS: Stable calcified right hilar XXXX and granulomas. "
     "Lungs are clear.", "change", "no"),
    # another sentence, or another joining word, makes no list
    ("Any change in the granulomas?", "FINDINGS: Stable calcified hilar XXXX. Granulomas. "
     "Lungs are clear.", "change", "unknown"),
    ("Any change in the granulomas?", "FINDINGS: Stable calcified hilar XXXX near "
     "granulomas. Lungs are clear.", "change", "unknown"),
]  # fmt: skip


CHANGE_OF_A_BROADER_NAME_THERE = [
    # a broader or narrower name on the same side and at the same place lends its change
    ("Has the left basal opacity changed?", "FINDINGS: The opacity at the left lung base is "
     "stable. IMPRESSION: Left basilar opacity, likely scarring.", "change", "unchanged"),
    ("Is the left basal opacity new?", "FINDINGS: The opacity at the left lung base is "
     "stable. IMPRESSION: Left basilar opacity, likely scarring.", "change", "no"),
    # another side or another place does not
    ("Has the left basal opacity changed?", "FINDINGS: The opacity at the right lung base is "
     "stable. IMPRESSION: Left basilar opacity, likely scarring.", "change", "unknown"),
    ("Has the left basal opacity changed?", "FINDINGS: The opacity in the left upper lobe is "
     "stable. IMPRESSION: Left basilar opacity, likely scarring.", "change", "unknown"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("question", "report", "qtype", "answer"),
    CHANGE_OF_A_COMPLEMENT + LISTS_WITH_AN_ITEMS_OWN_WORDS + CHANGE_OF_A_BROADER_NAME_THERE,
)
def test_a_change_said_of_another_mention_reaches_the_finding(
    engine: StudyQuestions, question: str, report: str, qtype: str, answer: str
) -> None:
    # after a finding's complement, across a list item's own words, from a broader name there
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert (got.type, got.answer) == (qtype, answer)


@pytest.mark.parametrize(
    ("report", "answer"),
    [
        ("FINDINGS: Small granuloma. No significant interval change compared to prior exam.",
         "no"),
        ("FINDINGS: Possible small nodule at the right apex. Otherwise no significant interval "
         "change compared to prior films.", "no"),
        ("FINDINGS: Small granuloma. No prior study for comparison.", "unknown"),
    ],
)  # fmt: skip
def test_a_no_change_sentence_dated_against_the_prior_calls_the_study_as_before(
    engine: StudyQuestions, report: str, answer: str
) -> None:
    got = engine.ask(
        "Has anything changed since the last film?", report=engine.label_reports([report])[report]
    )
    assert (got.type, got.answer) == ("study", answer)


@pytest.mark.parametrize(
    ("question", "report", "want"),
    [
        # a clinician's short word for a finding: its size unstated is unknown, not refused
        ("How large are the left hilar calcs?", "FINDINGS: Calcified left hilar nodes.", "unknown"),
        ("What is the width of the main PA?", "FINDINGS: Prominent pulmonary arteries.",
         "unknown"),
        ("How thick is the apical pleura?", "FINDINGS: Right apical pleural thickening.",
         "unknown"),
        # the same words asked for presence and place
        ("Are there any calcs?", "FINDINGS: Calcified granuloma in the right lower lobe.", "yes"),
        ("Are there any calcs?", "FINDINGS: Lungs are clear. No calcified nodules.", "no"),
        ("Are there any calcs?", "FINDINGS: Possible calcified granuloma in the right lung.",
         "uncertain"),
        ("Where are the calcs?", "FINDINGS: Calcified granuloma in the right lower lobe.",
         ["right", "right lower lobe"]),
    ],
)  # fmt: skip
def test_a_short_word_for_a_finding_is_read_as_it(
    engine: StudyQuestions, question: str, report: str, want: object
) -> None:
    a = engine.ask(question, report=engine.label_reports([report])[report], report_text=report)
    assert a.answer == want


@pytest.mark.parametrize(
    ("question", "report", "want"),
    [
        # a word the report writes only by its stem is the one concept holding it
        ("Where is the cavity?", "FINDINGS: Thick-walled cavitary nodule in the left upper lobe.",
         ["left", "left upper lobe"]),
        ("How big is the cavity?", "FINDINGS: Thick-walled cavitary nodule in the left upper lobe.",
         "unknown"),
        ("Is there a cavity?", "FINDINGS: No cavitary nodule. Lungs are clear.", "no"),
        ("Is there a cavity?", "FINDINGS: Possible cavitary nodule in the left upper lobe.",
         "uncertain"),
    ],
)  # fmt: skip
def test_a_word_the_report_writes_by_its_stem_is_its_concept(
    engine: StudyQuestions, question: str, report: str, want: object
) -> None:
    a = engine.ask(question, report=engine.label_reports([report])[report], report_text=report)
    assert a.answer == want


def test_a_question_in_the_other_spelling_of_a_phrase_word(engine: StudyQuestions) -> None:
    text = "Heart normal. The reticular pattern may reflect lymphangitic spread of tumor."
    report = engine.label_reports([text])[text]
    for q in ("Could this be lymphangitic spread of tumour?", "Is there lymphangitic spread?"):
        assert engine.ask(q, report=report, report_text=text).answer == "uncertain"
    text = "Heart normal. No lymphangitic spread of tumor."
    report = engine.label_reports([text])[text]
    a = engine.ask("Any lymphangitic spread of tumour?", report=report, report_text=text)
    assert a.answer == "no"


def test_calcified_granulomatous_disease_is_calcified_granulomas(engine: StudyQuestions) -> None:
    # one finding, coded as the disease, that answers the granulomas and the calcification
    text = "Heart normal. Old calcified granulomatous disease in both upper lobes."
    report = engine.label_reports([text])[text]
    for q in (
        "Any calcified granulomas?",
        "Is there granulomatous disease?",
        "Is there calcification?",
    ):
        assert engine.ask(q, report=report, report_text=text).answer == "yes", q
    for text, want in (
        ("Heart normal. Possible calcified granulomatous disease.", "uncertain"),
        ("Heart normal. No calcified granulomatous disease.", "no"),
        ("Heart normal. Granulomatous disease.", "no"),
    ):
        report = engine.label_reports([text])[text]
        a = engine.ask("Are there calcified granulomas?", report=report, report_text=text)
        assert a.answer == want, text


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Lungs clear. The aorta is heavily calcified.", "severe"),
        ("Lungs clear. There is dense calcification of the aortic arch.", "severe"),
        ("Lungs clear. Densely calcified aorta.", "severe"),
        ("Lungs clear. Mild calcification of the aorta.", "mild"),
        ("Lungs clear. Calcified aorta.", "unknown"),
    ],
)
def test_a_heavy_or_dense_calcification_is_severe(
    engine: StudyQuestions, text: str, want: str
) -> None:
    report = engine.label_reports([text])[text]
    assert engine.ask("How calcified is the aorta?", report=report, report_text=text).answer == want


def test_an_appearing_inside_a_finding_phrase(engine: StudyQuestions) -> None:
    text = "Heart normal. Tortuous aorta with a slightly ectatic appearing ascending aorta."
    report = engine.label_reports([text])[text]
    a = engine.ask("Is the ascending aorta dilated?", report=report, report_text=text)
    assert a.answer == "yes"
    text = "Heart normal. Tortuous aorta."
    report = engine.label_reports([text])[text]
    a = engine.ask("Is the ascending aorta dilated?", report=report, report_text=text)
    assert a.answer == "no"


def test_a_stacked_describing_word_of_the_aorta(engine: StudyQuestions) -> None:
    for text, want in (
        ("Heart normal. Dilated tortuous calcified aortic XXXX.", "yes"),
        ("Heart normal. Ectatic tortuous aorta.", "yes"),
        ("Heart normal. Tortuous calcified aortic XXXX.", "no"),
    ):
        report = engine.label_reports([text])[text]
        assert engine.ask("Is the aorta dilated?", report=report, report_text=text).answer == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (
            "Round calcification below the right hemidiaphragm, possibly a calcified hepatic cyst.",
            "uncertain",
        ),
        (
            "Round calcification below the right hemidiaphragm, possibly a calcified liver cyst.",
            "uncertain",
        ),
        # the organ not said: the report may say it in other words
        (
            "Round calcification below the right hemidiaphragm, possibly a calcified cyst.",
            "unknown",
        ),
    ],
)
def test_an_organ_asked_by_its_noun_is_the_reports_adjective(
    engine: StudyQuestions, text: str, want: str
) -> None:
    report = engine.label_reports([text])[text]
    a = engine.ask("Could the calcification be a liver cyst?", report=report, report_text=text)
    assert a.answer == want


@pytest.mark.parametrize(
    ("text", "question", "want"),
    [
        ("Lungs clear. Diminutive left hilar silhouette.", "Is the left hilum small?", "yes"),
        ("Lungs clear. Diminutive left hilar silhouette.", "Is the right hilum small?", "no"),
        ("Lungs clear. Small right hilum.", "Which hilum is small?", ["right"]),
        ("Lungs clear. Normal hila.", "Is the left hilum small?", "no"),
    ],
)
def test_a_small_hilum(engine: StudyQuestions, text: str, question: str, want: object) -> None:
    report = engine.label_reports([text])[text]
    assert engine.ask(question, report=report, report_text=text).answer == want


@pytest.mark.parametrize(
    ("report", "answer"),
    [
        ("FINDINGS: Patchy opacities in both upper lobes, worse than before.", "no"),
        ("FINDINGS: Patchy opacities at both lung bases, worse than before.", "yes"),
        ("FINDINGS: The heart is normal in size. Old rib fracture on the left.", "unknown"),
        ("FINDINGS: The heart is normal in size. No pleural effusion.", "unknown"),
    ],
)
def test_change_of_a_finding_the_report_never_names_is_unknown(
    engine: StudyQuestions, report: str, answer: str
) -> None:
    # a zone-named finding whose broader kind the report places elsewhere is not there
    got = engine.ask(
        "Have the basal opacities increased?", report=engine.label_reports([report])[report]
    )
    assert (got.type, got.answer) == ("change", answer)


@pytest.mark.parametrize(
    ("question", "report", "answer"),
    [
        ("Are the axillary densities new?", "FINDINGS: Small rounded axillary densities, not "
         "seen on the prior study.", "yes"),
        ("Are the axillary densities new?", "FINDINGS: Small rounded axillary densities, "
         "unchanged from the prior study.", "no"),
        # the words not said beside the finding: the report may say them in other words
        ("Is the axillary density new?", "FINDINGS: New opacity in the right lower lobe.",
         "unknown"),
        ("Is the paratracheal fullness worse?", "FINDINGS: Fullness of the right paratracheal "
         "stripe, increased since the prior exam.", "yes"),
        ("Is the paratracheal fullness worse?", "FINDINGS: Prominent paratracheal soft "
         "tissues. Lungs clear.", "unknown"),
    ],
)  # fmt: skip
def test_change_of_a_finding_named_with_words_no_entry_explains(
    engine: StudyQuestions, question: str, report: str, answer: str
) -> None:
    got = engine.ask(question, report=engine.label_reports([report])[report])
    assert (got.type, got.answer) == ("change", answer)


@pytest.mark.parametrize(
    ("report", "answer"),
    [
        ("FINDINGS: Left basilar opacity, increased since the prior study.", "yes"),
        ("FINDINGS: Left basilar opacity, improved since the prior study.", "no"),
        ("FINDINGS: Left basilar opacity, unchanged from the prior study.", "no"),
        # the change said of a finding elsewhere is not the place's
        ("FINDINGS: Left basilar opacity. Right upper lobe opacity, increased since the prior "
         "study.", "unknown"),
        ("FINDINGS: Lungs clear.", "unknown"),
    ],
)  # fmt: skip
def test_a_places_abnormality_asked_worse_reads_the_change_there(
    engine: StudyQuestions, report: str, answer: str
) -> None:
    got = engine.ask(
        "Is the left basal abnormality worse?", report=engine.label_reports([report])[report]
    )
    assert (got.type, got.answer) == ("study", answer)
