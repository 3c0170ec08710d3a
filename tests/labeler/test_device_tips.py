"""Where a line, tube or lead ends (`labeler.device_tips`), and the tip on a device finding."""

from __future__ import annotations

from pathlib import Path

import pytest
from spacy.language import Language

from labeler.config import LabelerConfig
from labeler.device_tips import load_tip_finder
from labeler.errors import PatternFileError
from labeler.pipeline import label_report
from labeler.schema import ReportFinding

pytestmark = pytest.mark.issue(40)


@pytest.mark.parametrize(
    ("sentence", "name", "words", "distance"),
    [
        ("Right PICC with tip in the mid SVC.", "superior vena cava", "mid SVC", None),
        ("Catheter tip terminates at the cavo-atrial junction.", "cavoatrial junction",
         "cavo-atrial junction", None),
        ("The tip has moved into the left innominate vein.", "left brachiocephalic vein",
         "left innominate vein", None),
        # "right" is part of the right atrium's name, not a side of another landmark
        ("Line with tip in the right atrium.", "right atrium", "right atrium", None),
        ("ET tube with tip approximately 4.5 cm above the carina.", "carina",
         "approximately 4.5 cm above the carina", 45.0),
        ("ETT tip 12 mm above the carina.", "carina", "12 mm above the carina", 12.0),
        ("Enteric tube courses below the diaphragm.", "below the diaphragm",
         "below the diaphragm", None),
        # a vertebral level where the report names no organ
        ("Stimulator lead with tip over the T11 vertebral body.", "T11", "T11 vertebral body",
         None),
        ("Drain tip at the L2 level.", "L2", "L2 level", None),
    ],
)  # fmt: skip
def test_landmarks_in_the_reports_words(
    sentence: str, name: str, words: str, distance: float | None
) -> None:
    tip = load_tip_finder().find(sentence)
    assert tip is not None
    assert (tip.name, tip.text, tip.distance_mm) == (name, words, distance)
    assert sentence[tip.start : tip.end] == words


@pytest.mark.parametrize(
    ("sentence", "names", "words"),
    [
        ("Leads in the right atrium and right ventricle.", ("right atrium", "right ventricle"),
         "right atrium and right ventricle"),
        # a head word alone takes the side of the landmark before it
        ("Leads in the right atrium and ventricle.", ("right atrium", "right ventricle"),
         "right atrium and ventricle"),
        ("Leads over the right atrium, right ventricle and coronary sinus.",
         ("right atrium", "right ventricle", "coronary sinus"),
         "right atrium, right ventricle and coronary sinus"),
        ("One tip in the right atrium and another lead tip in the right ventricle.",
         ("right atrium", "right ventricle"),
         "right atrium and another lead tip in the right ventricle"),
        # one landmark, or a next clause that names none: no list
        ("PICC tip in the SVC and no pneumothorax.", (), "SVC"),
        ("Lead in the right atrium and stable heart size.", (), "right atrium"),
    ],
)  # fmt: skip
def test_landmarks_joined_in_one_phrase(sentence: str, names: tuple[str, ...], words: str) -> None:
    tip = load_tip_finder().find(sentence)
    assert tip is not None
    assert (tip.names, tip.text) == (names, words)


def test_past_the_ge_junction_is_the_stomach() -> None:
    finder = load_tip_finder()
    for sentence in (
        "Tube tip distal to the gastroesophageal junction.",
        "Tip below the GE junction.",
    ):
        tip = finder.find(sentence)
        assert tip is not None and tip.name == "stomach"
    tip = finder.find("Tube tip at the GE junction.")
    assert tip is not None and tip.name == "esophagus"


def test_no_landmark_no_tip_and_words_inside_other_words_do_not_count() -> None:
    finder = load_tip_finder()
    assert finder.find("Right chest tube in place.") is None
    assert finder.find("Postcarinal lymph nodes; svcs") is None  # not at word boundaries
    assert finder.refers_back("The tip has moved.") and not finder.refers_back("Stable.")


def _devices(nlp: Language, text: str) -> list[ReportFinding]:
    result = label_report(text, nlp=nlp, config=LabelerConfig(findings=True))
    assert result.report_findings is not None
    return [f for f in result.report_findings if f.kind == "device"]


def test_each_device_gets_the_landmark_after_it_and_before_the_next(nlp: Language) -> None:
    picc, tube = _devices(
        nlp, "FINDINGS: Left PICC with tip in the SVC and an NG tube in the stomach."
    )
    assert (picc.concept, picc.attributes["tip"]) == ("picc", "superior vena cava")
    assert (tube.concept, tube.attributes["tip"]) == ("nasogastric_tube", "stomach")
    assert picc.attributes["laterality"] == "left"  # its own side stays
    tip_evidence = [ev for ev in picc.attribute_evidence if ev["attribute"] == "tip"]
    assert tip_evidence and tip_evidence[0]["rule"] == "tip.svc"


def test_the_tips_words_give_the_device_no_side_or_size(nlp: Language) -> None:
    (picc,) = _devices(nlp, "FINDINGS: PICC with tip in the right atrium.")
    assert picc.attributes["tip"] == "right atrium" and "laterality" not in picc.attributes
    (ett,) = _devices(nlp, "FINDINGS: Endotracheal tube with tip 4.5 cm above the carina.")
    assert "size_mm" not in ett.attributes
    assert ett.attributes["tip_distance_mm"] == 45.0


def test_a_distance_given_as_a_range_keeps_both_ends(nlp: Language) -> None:
    (tube,) = _devices(nlp, "FINDINGS: Tracheostomy tube with tip about 5-6 cm above the carina.")
    assert tube.attributes["tip_distance_range_mm"] == [50.0, 60.0]
    assert "tip_distance_mm" not in tube.attributes and "size_mm" not in tube.attributes
    tip = load_tip_finder().find("ET tube tip 3 to 4 centimeters above the carina.")
    assert tip is not None and (tip.distance_mm, tip.distance_range_mm) == (None, (30.0, 40.0))


def test_one_device_named_twice_in_a_row_and_a_tip_in_the_next_sentence(nlp: Language) -> None:
    found = _devices(nlp, "FINDINGS: PICC line catheter tip in the right atrium.")
    assert {f.attributes.get("tip") for f in found} == {"right atrium"}
    (picc,) = _devices(nlp, "FINDINGS: Right PICC. The tip is now in the left innominate vein.")
    assert picc.attributes["tip_text"] == "left innominate vein"


def test_a_tip_in_a_later_sentence_goes_to_the_last_device_named_before_it(nlp: Language) -> None:
    picc, tube = _devices(
        nlp,
        "FINDINGS: The tip is in the SVC. Right PICC. Small left effusion. "
        "The tip is now in the right atrium. NG tube in the stomach.",
    )
    assert (picc.concept, picc.attributes["tip"]) == ("picc", "right atrium")
    assert (tube.concept, tube.attributes["tip"]) == ("nasogastric_tube", "stomach")
    (line,) = _devices(nlp, "FINDINGS: No central line. The tip is in the SVC.")
    assert "tip" not in line.attributes


def test_an_absent_device_has_no_tip(nlp: Language) -> None:
    (line,) = _devices(nlp, "FINDINGS: No central line in the SVC.")
    assert line.status == "negative" and "tip" not in line.attributes


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("version: 1\n", "missing `landmarks:`"),
        ("landmarks:\n  - name: x\n    phrases: [a]\n", "needs a string `id`"),
        ("landmarks:\n  - id: tip.x\n    phrases: [a]\n", "needs a `name`"),
        ("landmarks:\n  - id: tip.x\n    name: x\n    phrases: ['']\n", "empty or non-text"),
        ("landmarks:\n  - id: tip.x\n    name: x\n    phrases: [a]\nsided: 3\n", "`sided`"),
    ],
)
def test_bad_tip_files_are_refused_by_name(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "tips.yaml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(PatternFileError, match=message):
        load_tip_finder(str(path))
