"""Which rib or vertebra a bone finding names (`labeler.levels`), on the finding and in
answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from spacy.language import Language

from labeler.config import LabelerConfig
from labeler.errors import PatternFileError
from labeler.levels import load_level_finder
from labeler.pipeline import label_report

pytestmark = pytest.mark.issue(40)


@pytest.mark.parametrize(
    ("text", "levels"),
    [
        ("Fractures of the posterior left 4th, 5th, and 6th ribs.",
         ["4th rib", "5th rib", "6th rib"]),
        ("Fractures of the right 5th through 9th anterior ribs.",
         ["5th rib", "6th rib", "7th rib", "8th rib", "9th rib"]),
        ("Healed left ninth rib fracture.", ["9th rib"]),
        # a side for each level, a compound position word before "rib"
        ("Healed right 8th and left 7th posterolateral rib fractures.", ["8th rib", "7th rib"]),
        ("Old right 3rd, left 4th anterolateral ribs.", ["3rd rib", "4th rib"]),
        ("Left 6th rib and right clavicle.", ["6th rib"]),
        ("A displaced fracture of right rib 4.", ["4th rib"]),
        ("Wedging at the T11 level.", ["T11"]),
        ("Degenerative change at L4-L5 and T12-L1.", ["L4", "L5", "T12", "L1"]),
        # not levels: a 13th rib, T13, sizes, times
        ("A 13th rib. T13. 5 mm nodule at 10 o'clock.", []),
    ],
)  # fmt: skip
def test_levels_in_text(text: str, levels: list[str]) -> None:
    assert load_level_finder().find(text) == levels


def test_each_level_goes_to_the_nearest_bone_finding_and_specialises_it(nlp: Language) -> None:
    result = label_report(
        "FINDINGS: Fractures of the left 4th and 5th ribs. Old rib fractures and T11 "
        "compression deformity.",
        nlp=nlp,
        config=LabelerConfig(findings=True),
    )
    assert result.report_findings is not None
    by_text = {f.text: f for f in result.report_findings}
    ribs = by_text["Fractures"]
    assert ribs.concept == "rib_fracture"  # a fracture of ribs is a rib fracture
    assert ribs.attributes["levels"] == ["4th rib", "5th rib"]
    assert "levels" not in by_text["Old rib fractures"].attributes
    assert by_text["compression deformity"].attributes["levels"] == ["T11"]


@pytest.mark.parametrize(
    ("text", "mention", "concept"),
    [
        # an acute or healed fracture whose levels are ribs is an acute or healed rib fracture
        ("Sharp lucency through the left 9th rib, worrisome for acute fracture.",
         "acute fracture", "acute_rib_fracture"),
        ("Healed fracture of the right 4th rib.", "Healed fracture", "healed_rib_fracture"),
        # no level of its own, but every other bone finding of the sentence is of the ribs
        ("Bilateral rib contour deformities consistent with old fractures.",
         "old fractures", "healed_rib_fracture"),
        ("Deformity of the lateral left 3rd rib, if tender there, suspect acute fracture.",
         "acute fracture", "acute_rib_fracture"),
        # another bone finding that is not of the ribs: the fracture stays general
        ("Old rib deformity and a T9 wedge deformity, which may be an old fracture.",
         "old fracture", "healed_fracture"),
        # alone in its sentence: no site
        ("Old rib deformity. There is an old fracture.", "old fracture", "healed_fracture"),
    ],
)  # fmt: skip
def test_a_fracture_of_the_ribs_is_a_rib_fracture(
    nlp: Language, text: str, mention: str, concept: str
) -> None:
    result = label_report("FINDINGS: " + text, nlp=nlp, config=LabelerConfig(findings=True))
    assert result.report_findings is not None
    by_text = {f.text: f for f in result.report_findings}
    assert by_text[mention].concept == concept


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("ribs: 12\nvertebrae: {T: 12}\n", "`ordinals`"),
        ("ordinals: {first: 1}\nribs: 12\nvertebrae: {TH: 12}\n", "`vertebrae`"),
        ("ordinals: {first: 1}\nribs: 0\nvertebrae: {T: 12}\n", "`ribs`"),
        (
            "ordinals: {first: 1}\nribs: 12\nvertebrae: {T: 12}\nspecific: {fracture: {arm: x}}\n",
            "`specific`",
        ),
    ],
)
def test_bad_level_files_are_refused(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "levels.yaml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(PatternFileError, match=message):
        load_level_finder(str(path))
