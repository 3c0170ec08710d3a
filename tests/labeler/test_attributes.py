"""Finding attributes (issue 12): laterality, location, severity, size, count, change."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from spacy.language import Language

from labeler.attributes import (
    AttributeEvidence,
    AttributeFinder,
    aggregate_findings,
    load_attribute_rules,
    merge_attributes,
)
from labeler.errors import PatternFileError
from labeler.schema import Mention, ReportLabels

pytestmark = pytest.mark.issue(12)

Attrs = Callable[[str, str], dict[str, Any]]


@pytest.fixture(scope="module")
def attrs(label: Callable[[str], ReportLabels]) -> Attrs:
    """The attributes of the one mention of `label_name` in `text`."""

    def run(text: str, label_name: str) -> dict[str, Any]:
        found = [m for m in label(text).mentions if m.label == label_name]
        assert len(found) == 1, f"expected one {label_name} mention in {text!r}: {found}"
        return found[0].attributes

    return run


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("Small left pleural effusion.", "Effusion", "left"),
        ("Right-sided pneumothorax.", "Pneumothorax", "right"),
        ("Bilateral pleural effusions.", "Effusion", "bilateral"),
        ("Effusions in both lungs.", "Effusion", "bilateral"),
        ("Bibasilar atelectasis.", "Atelectasis", "bilateral"),
        ("Opacity in the left lower lobe consistent with pneumonia.", "Pneumonia", "left"),
        ("Consolidation in the right middle lobe.", "Consolidation", "right"),
        ("Atelectasis in the lingula.", "Atelectasis", "left"),
        ("Middle lobe atelectasis.", "Atelectasis", "right"),
        ("Left and right pleural effusions.", "Effusion", "bilateral"),
        ("Effusion is seen at the left base.", "Effusion", "left"),
    ],
)
def test_laterality(attrs: Attrs, text: str, name: str, expected: str | None) -> None:
    assert attrs(text, name).get("laterality") == expected


def test_laterality_of_another_noun_is_not_the_findings(attrs: Attrs) -> None:
    # the chest tube is on the right; the effusion on the left
    assert (
        attrs("There is a large left effusion with a right chest tube in place.", "Effusion")[
            "laterality"
        ]
        == "left"
    )


def test_laterality_stays_with_its_own_list_item(label: Callable[[str], ReportLabels]) -> None:
    result = label("There is a small left pleural effusion and a large right pneumothorax.")
    by_label = {m.label: m.attributes for m in result.mentions}
    assert by_label["Effusion"] == {"laterality": "left", "severity": "mild"}
    assert by_label["Pneumothorax"] == {"laterality": "right", "severity": "severe"}


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("text", "name", "place"),
    [
        # a quantity word after the list's joiner: the items still share the place after it
        ("Consolidation and some atelectasis are present in the right lower lobe.",
         "Consolidation", ["right lower lobe"]),
        ("Consolidation and some atelectasis are present in the right lower lobe.",
         "Atelectasis", ["right lower lobe"]),
        # hedged alike
        ("Consolidation and some atelectasis are possibly present in the left upper lobe.",
         "Consolidation", ["left upper lobe"]),
        # not after a denial, nor after an article: the next item's place only
        ("Consolidation and no atelectasis in the right lower lobe.", "Consolidation", None),
        ("Small effusion and a pleural plaque in the left hemithorax.", "Effusion", None),
    ],
)  # fmt: skip
def test_list_items_share_the_place_past_a_quantity_word(
    attrs: Attrs, text: str, name: str, place: list[str] | None
) -> None:
    assert attrs(text, name).get("location") == place


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("text", "name", "side", "place"),
    [
        # a masked word before the finding: the parse hangs its place on the governing noun
        ("No interval change in the appearance of the XXXX nodules in the right upper lobe.",
         "Nodule", "right", ["right upper lobe"]),
        ("Slight increase in the size of the XXXX nodule in the left lower lobe, possibly "
         "malignant.", "Nodule", "left", ["left lower lobe"]),
        # hedged: the place is still its own
        ("Possible increase in the size of the XXXX nodule in the left lower lobe.", "Nodule",
         "left", ["left lower lobe"]),
        # another finding's place stays with it
        ("No interval change in the appearance of the XXXX atelectasis, with a new effusion in "
         "the right base.", "Atelectasis", None, None),
    ],
)  # fmt: skip
def test_a_place_hung_on_the_governing_noun_is_the_findings(
    attrs: Attrs, text: str, name: str, side: str | None, place: list[str] | None
) -> None:
    got = attrs(text, name)
    assert (got.get("laterality"), got.get("location")) == (side, place)


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("text", "name", "side", "place"),
    [
        # readings offered for one finding share the place said after the last
        ("Mild atelectasis versus scarring in the right lung base.", "Atelectasis", "right",
         ["basilar"]),
        ("Small effusion versus pleural thickening on the left.", "Effusion", "left", None),
        ("Possible pleural effusion or minimal pleural thickening bilaterally.", "Effusion",
         "bilateral", None),
        # not a list of what is not there
        ("No effusion or pneumothorax on the left.", "Pneumothorax", None, None),
    ],
)  # fmt: skip
def test_readings_of_one_finding_share_the_place_after_the_last(
    attrs: Attrs, text: str, name: str, side: str | None, place: list[str] | None
) -> None:
    got = attrs(text, name)
    assert (got.get("laterality"), got.get("location")) == (side, place)


@pytest.mark.parametrize(
    ("text", "name", "side", "place"),
    [
        # a second place joined to the finding's own, whatever the parse makes of its side
        ("There is patchy consolidation in the right lung and left base.", "Consolidation",
         "bilateral", ["basilar"]),
        ("There are infiltrates in the right lung and left base.", "Infiltration",
         "bilateral", ["basilar"]),
        # hedged: still both places
        ("There may be infiltrates in the right lung and left base.", "Infiltration",
         "bilateral", ["basilar"]),
        # a place that runs into the next finding is that finding's
        ("Consolidation in the left lung and right base atelectasis.", "Consolidation",
         "left", None),
    ],
)  # fmt: skip
def test_a_place_joined_to_the_findings_place_is_its_own(
    attrs: Attrs, text: str, name: str, side: str | None, place: list[str] | None
) -> None:
    got = attrs(text, name)
    assert (got.get("laterality"), got.get("location")) == (side, place)


def test_readings_share_the_place_but_not_the_others_severity(attrs: Attrs) -> None:
    got = attrs("Possible pleural effusion or minimal pleural thickening bilaterally.", "Effusion")
    assert got.get("severity") is None


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("Right apical pneumothorax.", "Pneumothorax", ["apical"]),
        ("Mass in the right upper lobe.", "Mass", ["right upper lobe"]),
        ("RUL mass.", "Mass", ["right upper lobe"]),
        ("Nodule in the left lower lobe.", "Nodule", ["left lower lobe"]),
        ("Atelectasis at the lung bases.", "Atelectasis", ["basilar"]),
        ("Bibasilar atelectasis.", "Atelectasis", ["basilar"]),
        ("Perihilar edema.", "Edema", ["perihilar"]),
        ("Retrocardiac consolidation.", "Consolidation", ["retrocardiac"]),
        ("Blunting of the costophrenic angle by a small effusion.", "Effusion", ["costophrenic"]),
        ("Small subpulmonic effusion.", "Effusion", ["subpulmonic"]),
        ("Emphysema in the upper lobes.", "Emphysema", ["upper"]),
        ("Atelectasis in the mid lung zone.", "Atelectasis", ["middle"]),
        ("Effusion in the left costophrenic angle.", "Effusion", ["costophrenic"]),
        ("Lingular atelectasis.", "Atelectasis", ["lingula"]),
        # the only middle lobe is the right one
        ("Middle lobe atelectasis.", "Atelectasis", ["right middle lobe"]),
        ("Atelectasis in the middle lobe.", "Atelectasis", ["right middle lobe"]),
        ("Atelectasis in the mid lung zone.", "Atelectasis", ["middle"]),
        # the thoracic and lumbar spine together, not their junction
        ("Nodule projecting over the thoracolumbar spine.", "Nodule", ["thoracolumbar spine"]),
        ("Nodule projecting over the thoracolumbar junction.", "Nodule",
         ["thoracolumbar junction"]),
        # the organs of the upper abdomen
        ("Calcified nodule in the spleen.", "Nodule", ["spleen"]),
        ("Splenic nodule.", "Nodule", ["spleen"]),
    ],
)  # fmt: skip
def test_location(attrs: Attrs, text: str, name: str, expected: list[str] | None) -> None:
    assert attrs(text, name).get("location") == expected


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("Trace left effusion.", "Effusion", "minimal"),
        ("Tiny right pneumothorax.", "Pneumothorax", "minimal"),
        ("Minimal atelectasis.", "Atelectasis", "minimal"),
        ("Small left effusion.", "Effusion", "mild"),
        ("Mild cardiomegaly.", "Cardiomegaly", "mild"),
        ("Very mild cardiomegaly.", "Cardiomegaly", "mild"),
        ("Very small left effusion.", "Effusion", "minimal"),
        ("Moderate pulmonary edema.", "Edema", "moderate"),
        ("Large right pleural effusion.", "Effusion", "severe"),
        ("Extensive consolidation.", "Consolidation", "severe"),
        ("Massive cardiomegaly.", "Cardiomegaly", "severe"),
        ("Small to moderate left effusion.", "Effusion", "moderate"),
        ("The heart is significantly enlarged.", "Cardiomegaly", "moderate"),
        ("Left pleural effusion.", "Effusion", None),
        # "dense" grades a calcification only: a dense nodule is an opaque one
        ("Dense consolidation in the left base.", "Consolidation", None),
        ("Dense nodule in the right lower lobe.", "Nodule", None),
    ],
)
def test_severity(attrs: Attrs, text: str, name: str, expected: str | None) -> None:
    assert attrs(text, name).get("severity") == expected


@pytest.mark.parametrize(
    ("text", "name", "severity", "change"),
    [
        # a grade joined to a change keeps both, whatever the rest of the sentence
        (
            "Old rib fractures and granulomas with tiny but growing left pneumothorax.",
            "Pneumothorax",
            "minimal",
            "increased",
        ),
        ("Moderate but improving right effusion.", "Effusion", "moderate", "improved"),
        ("Mild and stable left basilar atelectasis.", "Atelectasis", "mild", "unchanged"),
        # a change before the grade is no grade joined to a change
        ("Heart size is stable. Small right effusion.", "Effusion", "mild", None),
        # not joined: the grade belongs to the other finding
        (
            "Mild scarring but increasing left effusion.",
            "Effusion",
            None,
            "increased",
        ),
    ],
)
def test_a_grade_joined_to_a_change_is_the_findings(
    attrs: Attrs, text: str, name: str, severity: str | None, change: str | None
) -> None:
    got = attrs(text, name)
    assert (got.get("severity"), got.get("change")) == (severity, change)


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("A 4.5 x 3.2 cm mass in the right upper lobe.", "Mass", 45.0),
        ("8 mm nodule in the left lung.", "Nodule", 8.0),
        ("Nodule measuring 12 mm.", "Nodule", 12.0),
        ("The nodule measures 1.2 cm.", "Nodule", 12.0),
        ("Stable 1.2-cm nodule in the lingula.", "Nodule", 12.0),
        ("Mass measuring up to 3 cm.", "Mass", 30.0),
        ("Mass measuring 2-3 cm.", "Mass", 30.0),
        ("2 x 3 x 4 cm mass.", "Mass", 40.0),
        ("Left lung nodule.", "Nodule", None),
    ],
)
def test_size_mm_is_the_largest_dimension(
    attrs: Attrs, text: str, name: str, expected: float | None
) -> None:
    assert attrs(text, name).get("size_mm") == expected


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("Two nodules in the left lung.", "Nodule", 2),
        ("3 nodules in the right lung.", "Nodule", 3),
        ("Multiple pulmonary nodules.", "Nodule", "multiple"),
        ("Several nodules.", "Nodule", "multiple"),
        ("Numerous bilateral nodules.", "Nodule", "multiple"),
        ("A few scattered nodules.", "Nodule", "multiple"),
        ("Pulmonary nodules.", "Nodule", "multiple"),
        ("A single nodule in the right lung.", "Nodule", 1),
        ("Solitary pulmonary nodule.", "Nodule", 1),
        ("A nodule measuring 8 mm.", "Nodule", None),  # 8 is a size, not a count
        ("Multilevel mass-like opacities.", "Mass", "multiple"),
        ("Left pleural effusion.", "Effusion", None),
    ],
)
def test_count(attrs: Attrs, text: str, name: str, expected: int | str | None) -> None:
    assert attrs(text, name).get("count") == expected


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("New left pleural effusion.", "Effusion", "new"),
        ("The left effusion has increased in size.", "Effusion", "increased"),
        ("Interval increase in the size of the left pleural effusion.", "Effusion", "increased"),
        ("Enlarging right upper lobe mass.", "Mass", "increased"),
        ("Decreased right pleural effusion.", "Effusion", "decreased"),
        ("The pneumothorax is smaller.", "Pneumothorax", "decreased"),
        ("Stable cardiomegaly.", "Cardiomegaly", "unchanged"),
        ("Left effusion is again seen.", "Effusion", "unchanged"),
        ("Persistent right lower lobe consolidation.", "Consolidation", "unchanged"),
        ("No change in the bibasilar atelectasis.", "Atelectasis", "unchanged"),
        ("Unchanged small left effusion.", "Effusion", "unchanged"),
        ("The right pneumothorax has resolved.", "Pneumothorax", "resolved"),
        ("Improved pulmonary edema.", "Edema", "improved"),
        ("Resolving right lower lobe pneumonia.", "Pneumonia", "improved"),
        ("Worsening bilateral pulmonary edema.", "Edema", "worsened"),
        ("A 9 mm nodule in the right lung, not seen on prior exams.", "Nodule", "new"),
        ("There has been development of multiple nodules.", "Nodule", "new"),
        # not shown by this study, named against an earlier one
        (
            "The earlier right apical nodule is not well seen on today's study.",
            "Nodule",
            "resolved",
        ),
        ("The left basal nodule is not well-seen on the current exam.", "Nodule", "resolved"),
        ("The left basal nodule is not visualized on this study.", "Nodule", "resolved"),
        ("No nodule is seen on this study.", "Nodule", None),
        ("Left pleural effusion.", "Effusion", None),
    ],
)
def test_change(attrs: Attrs, text: str, name: str, expected: str | None) -> None:
    assert attrs(text, name).get("change") == expected


def test_keys_without_a_value_are_left_out(attrs: Attrs) -> None:
    assert attrs("Cardiomegaly.", "Cardiomegaly") == {}


def test_every_attribute_keeps_its_evidence(label: Callable[[str], ReportLabels]) -> None:
    text = "FINDINGS: Stable 1.2-cm nodule in the right upper lobe."
    (mention,) = [m for m in label(text).mentions if m.label == "Nodule"]
    seen = {ev["attribute"]: ev for ev in mention.attribute_evidence}
    assert set(seen) == {"change", "size_mm", "location", "laterality"}
    for ev in mention.attribute_evidence:
        assert ev["rule"], ev
        assert 0 <= ev["start"] < ev["end"] <= len(text)
    assert text[seen["change"]["start"] : seen["change"]["end"]] == "Stable"
    assert text[seen["size_mm"]["start"] : seen["size_mm"]["end"]] == "1.2-cm"
    assert text[seen["location"]["start"] : seen["location"]["end"]] == "right upper lobe"


def test_findings_aggregate_the_mentions_of_a_label(label: Callable[[str], ReportLabels]) -> None:
    text = (
        "FINDINGS: Small left pleural effusion, unchanged. Moderate right pleural effusion. "
        "New 8 mm nodule in the right upper lobe and a 12 mm nodule in the left upper lobe. "
        "IMPRESSION: The right pneumothorax has resolved."
    )
    findings = label(text).findings
    assert findings["Effusion"] == {
        "status": "positive",
        "laterality": "bilateral",
        "severity": "moderate",
        "change": "unchanged",
    }
    nodule = findings["Nodule"]
    assert nodule["status"] == "positive"
    assert nodule["size_mm"] == 12.0
    assert nodule["laterality"] == "bilateral"
    assert set(nodule["location"]) == {"right upper lobe", "left upper lobe"}
    assert findings["Pneumothorax"] == {
        "status": "negative",
        "laterality": "right",
        "change": "resolved",
    }
    assert "Mass" not in findings  # absent labels have no entry


def test_findings_use_only_mentions_with_the_reported_status(
    label: Callable[[str], ReportLabels],
) -> None:
    # the negated right effusion says nothing about the positive left one
    findings = label("FINDINGS: Small left effusion. No right effusion.").findings
    assert findings["Effusion"]["laterality"] == "left"


def test_findings_change_comes_from_the_most_certain_mention() -> None:
    mentions = [
        Mention("Edema", "edema", 0, 5, "", "negative", attributes={"change": "resolved"}),
        Mention("Edema", "edema", 9, 14, "", "positive", attributes={"change": "new"}),
    ]
    found = aggregate_findings(mentions, {"Edema": "positive"}, ("minimal", "mild"))
    assert found == {"Edema": {"status": "positive", "change": "new"}}


def test_output_dict_carries_attributes_and_findings(
    label: Callable[[str], ReportLabels],
) -> None:
    out = label("FINDINGS: Large right pneumothorax.").to_dict()
    assert out["findings"]["Pneumothorax"] == {
        "status": "positive",
        "laterality": "right",
        "severity": "severe",
    }
    (mention,) = out["mentions"]
    assert mention["attributes"] == {"laterality": "right", "severity": "severe"}
    assert {ev["attribute"] for ev in mention["attribute_evidence"]} == {
        "laterality",
        "severity",
    }


def test_merge_left_and_right_is_bilateral() -> None:
    evidence = [
        AttributeEvidence("laterality", "left", "r", 0, 1),
        AttributeEvidence("laterality", "right", "r", 2, 3),
        AttributeEvidence("count", 2, "r", 0, 1),
        AttributeEvidence("count", "multiple", "r", 0, 1),
    ]
    assert merge_attributes(evidence, ("mild",)) == {
        "laterality": "bilateral",
        "count": "multiple",
    }


def test_attribute_file_rejects_unknown_values(tmp_path: Path) -> None:
    bad = tmp_path / "attrs.yaml"
    bad.write_text(
        "severity_order: [mild, severe]\n"
        "terms:\n  - {id: x.y, phrases: [huge], sets: {severity: gigantic}}\n"
        "size: {id: s, units: {mm: 1}}\n",
        encoding="utf-8",
    )
    with pytest.raises(PatternFileError, match="gigantic"):
        load_attribute_rules(str(bad))


def test_attribute_file_rejects_unknown_attribute(tmp_path: Path) -> None:
    bad = tmp_path / "attrs.yaml"
    bad.write_text(
        "severity_order: [mild]\n"
        "terms:\n  - {id: x.y, phrases: [blue], sets: {colour: blue}}\n"
        "size: {id: s, units: {mm: 1}}\n",
        encoding="utf-8",
    )
    with pytest.raises(PatternFileError, match="colour"):
        load_attribute_rules(str(bad))


@pytest.mark.issue(40)
def test_attribute_term_forms_spell_every_combination(tmp_path: Path) -> None:
    good = tmp_path / "attrs.yaml"
    good.write_text(
        "severity_order: [mild]\n"
        "terms:\n  - id: change.new\n    phrases: [new]\n"
        '    forms: [[["not"], ["", well], [seen], ["on"], [prior, previous]]]\n'
        "    sets: {change: new}\n"
        "size: {id: s, units: {mm: 1}}\n",
        encoding="utf-8",
    )
    (term,) = load_attribute_rules(str(good)).terms
    assert term.phrases == (
        "new",
        "not seen on prior",
        "not seen on previous",
        "not well seen on prior",
        "not well seen on previous",
    )


@pytest.mark.issue(40)
def test_attribute_term_forms_refuse_a_word_yaml_reads_as_true(tmp_path: Path) -> None:
    bad = tmp_path / "attrs.yaml"
    bad.write_text(
        "severity_order: [mild]\n"
        "terms:\n  - id: change.new\n    phrases: [new]\n"
        "    forms: [[[not], [seen], [on], [prior]]]\n"
        "    sets: {change: new}\n"
        "size: {id: s, units: {mm: 1}}\n",
        encoding="utf-8",
    )
    with pytest.raises(PatternFileError, match="quote"):
        load_attribute_rules(str(bad))


def test_packaged_attribute_file_loads() -> None:
    rules = load_attribute_rules()
    assert rules.severity_order == ("minimal", "mild", "moderate", "severe")
    ids = [t.id for t in rules.terms]
    assert len(ids) == len(set(ids)), "term ids must be unique"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Bibasilar opacities likely representing atelectasis.",
            {"laterality": "bilateral", "location": ["basilar"]},
        ),
        (
            "Stable left retrocardiac opacity consistent with atelectasis.",
            {"laterality": "left", "location": ["retrocardiac"], "change": "unchanged"},
        ),
        (
            "Right lower lobe opacity, concerning for atelectasis.",
            {"laterality": "right", "location": ["right lower lobe"]},
        ),
    ],
)
def test_a_finding_named_twice_shares_its_attributes(
    attrs: Attrs, text: str, expected: dict[str, Any]
) -> None:
    # "X representing / consistent with / concerning for Y": one finding, two names
    assert attrs(text, "Atelectasis") == expected


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        # a place between a finding and the word that names it again is both names' (a
        # masked word between, a sentence no cue word gets parsed)
        ("Infiltrate in the left lower lobe XXXX represents atelectasis.", "Infiltration",
         {"laterality": "left", "location": ["left lower lobe"]}),
        ("Infiltrate in the left lower lobe XXXX represents atelectasis.", "Atelectasis",
         {"laterality": "left", "location": ["left lower lobe"]}),
        ("Nodule in the right upper lobe likely granuloma.", "Nodule",
         {"laterality": "right", "location": ["right upper lobe"]}),
        # "related to" names it again too
        ("Infiltrate in the left lower lobe XXXX related to atelectasis.", "Infiltration",
         {"laterality": "left", "location": ["left lower lobe"]}),
        ("Infiltrate in the left lower lobe possibly related to atelectasis.", "Atelectasis",
         {"laterality": "left", "location": ["left lower lobe"]}),
        # the mask right after a copula stands for a link word ("likely")
        ("Infiltrate in the right upper lobe is XXXX atelectasis.", "Infiltration",
         {"laterality": "right", "location": ["right upper lobe"]}),
        ("Infiltrate in the right upper lobe is XXXX atelectasis.", "Atelectasis",
         {"laterality": "right", "location": ["right upper lobe"]}),
        # ... not elsewhere, where it may be a noun the place hangs on
        ("Infiltrate XXXX in the right upper lobe atelectasis.", "Infiltration", {}),
        # no such word: the words between go to the finding after them
        ("Infiltrate with left lower lobe atelectasis.", "Infiltration", {}),
    ],
)  # fmt: skip
def test_a_place_before_a_finding_named_again_is_the_first_names_too(
    attrs: Attrs, text: str, name: str, expected: dict[str, Any]
) -> None:
    assert attrs(text, name) == expected


@pytest.mark.parametrize(
    ("text", "name", "key", "expected"),
    [
        # the previous study's size or severity is not the finding's own
        ("Nodule has decreased from 3 cm to 2 cm.", "Nodule", "size_mm", 20.0),
        ("The nodule now measures 9 mm (previously 12 mm).", "Nodule", "size_mm", 9.0),
        ("Nodule measuring 9 mm, previously measured 14 mm.", "Nodule", "size_mm", 9.0),
        ("Mass, 3 cm previously.", "Mass", "size_mm", None),
        ("Small left effusion, previously moderate.", "Effusion", "severity", "mild"),
        ("Moderate effusion, increased from small.", "Effusion", "severity", "moderate"),
        ("Effusion has decreased from large to small.", "Effusion", "severity", "mild"),
        ("Pneumothorax, formerly large, is now tiny.", "Pneumothorax", "severity", "minimal"),
        ("Mass measuring up to 3 cm.", "Mass", "size_mm", 30.0),
        # a degree word that grades the change gives no severity
        ("Atelectasis, slightly worse.", "Atelectasis", "severity", None),
        ("Slightly improved pulmonary edema.", "Edema", "severity", None),
        ("Slight interval increase in the left effusion.", "Effusion", "severity", None),
        ("Markedly decreased right pneumothorax.", "Pneumothorax", "severity", None),
        ("Slightly improved pulmonary edema.", "Edema", "change", "improved"),
        ("Moderate new left effusion.", "Effusion", "severity", "moderate"),
        ("Small new right effusion.", "Effusion", "severity", "mild"),
        ("Markedly enlarged heart.", "Cardiomegaly", "severity", "severe"),
        # a degree word before a size word grades it: "slightly large" is mild
        ("The heart is slightly large.", "Cardiomegaly", "severity", "mild"),
        ("Mildly large left effusion.", "Effusion", "severity", "mild"),
        ("Large left effusion.", "Effusion", "severity", "severe"),
    ],
)
@pytest.mark.issue(12)
def test_prior_values_and_degrees_of_change_are_not_the_findings(
    attrs: Attrs, text: str, name: str, key: str, expected: object
) -> None:
    assert attrs(text, name).get(key) == expected


@pytest.mark.parametrize(
    ("text", "name", "key", "expected"),
    [
        ("Nodule measuring .8 cm.", "Nodule", "size_mm", 8.0),
        ("Nodule measuring 1,2 cm.", "Nodule", "size_mm", 12.0),  # decimal comma
        ("Mass of 2,5 x 1,25 cm.", "Mass", "size_mm", 25.0),
        ("Nodules of 5, 6 and 7 mm.", "Nodule", "size_mm", 7.0),  # a list, not decimals
        ("Bilat effusions.", "Effusion", "laterality", "bilateral"),
    ],
)
@pytest.mark.issue(12)
def test_number_and_abbreviation_forms(
    attrs: Attrs, text: str, name: str, key: str, expected: object
) -> None:
    assert attrs(text, name).get(key) == expected


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        (
            "Right upper and middle lobe pneumonia.",
            "Pneumonia",
            ["right middle lobe", "right upper lobe"],
        ),
        (
            "Consolidation in the left upper and lower lobes.",
            "Consolidation",
            ["left lower lobe", "left upper lobe"],
        ),
        (
            "Atelectasis in the right middle/lower lobes.",
            "Atelectasis",
            ["right lower lobe", "right middle lobe"],
        ),
        ("Left upper and middle lobe atelectasis.", "Atelectasis", ["left upper lobe"]),
    ],
)
@pytest.mark.issue(12)
def test_coordinated_lobes_are_each_a_lobe(
    attrs: Attrs, text: str, name: str, expected: list[str]
) -> None:
    assert sorted(attrs(text, name)["location"]) == expected


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        # a list of places after the finding: each is its place
        ("New consolidation has developed in the left upper lobe and both lower lobes.",
         "Consolidation", {"laterality": "bilateral", "location": ["left upper lobe", "lower"]}),
        ("Nodules in the right apex and both lung bases.", "Nodule",
         {"laterality": "bilateral", "location": ["apical", "basilar"]}),
        # hedged: the places are read the same
        ("Possible consolidation involving both the right middle lobe and lingula.",
         "Consolidation",
         {"laterality": "bilateral", "location": ["right middle lobe", "lingula"]}),
        # another finding in the list keeps its own place
        ("Atelectasis at the left base and a small right effusion.", "Atelectasis",
         {"laterality": "left", "location": ["basilar"]}),
    ],
)  # fmt: skip
def test_listed_places_of_a_finding_are_each_its_place(
    attrs: Attrs, text: str, name: str, expected: dict[str, object]
) -> None:
    found = attrs(text, name)
    assert {k: found.get(k) for k in expected} == expected


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        # parsed with "seen" as the root and "left" as a verb: the run of term
        # words right before the finding is still its own
        ("Newly seen left effusion.", "Effusion", {"change": "new", "laterality": "left"}),
        ("Small left effusion and right pneumothorax.", "Pneumothorax", {"laterality": "right"}),
        # a noun of the lungs' places inside the run ("left" parsed as a verb again)
        ("Moderate left basilar lung consolidation with mild right basilar opacities.",
         "Consolidation", {"severity": "moderate", "laterality": "left"}),
        # any other noun ends it
        ("Increased retrosternal clear space suggesting emphysema.", "Emphysema",
         {"change": None}),
    ],
)  # fmt: skip
@pytest.mark.issue(12)
def test_premodifier_run_belongs_to_the_finding_whatever_the_parse(
    attrs: Attrs, text: str, name: str, expected: dict[str, object]
) -> None:
    found = attrs(text, name)
    assert {k: found.get(k) for k in expected} == expected


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("Left effusion, without significant change.", "Effusion", "unchanged"),
        ("No appreciable change in the left effusion.", "Effusion", "unchanged"),
        ("The effusion is slightly bigger.", "Effusion", "increased"),
        ("Consolidation is less extensive.", "Consolidation", "decreased"),
    ],
)
@pytest.mark.issue(12)
def test_change_phrasings(attrs: Attrs, text: str, name: str, expected: str) -> None:
    found = attrs(text, name)
    assert found.get("change") == expected
    assert "severity" not in found  # "slightly", "extensive" grade the change here


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        # (count, rule of its evidence) per mention
        ([(2, "count.two"), ("multiple", "count.plural")], 2),  # "Two nodules ... the nodules"
        ([(2, "count.two"), (3, "count.three")], 3),
        ([(2, "count.two"), ("multiple", "count.multiple")], "multiple"),  # "numerous"
        ([("multiple", "count.plural")], "multiple"),
        ([(None, None)], None),
    ],
)
def test_stated_count_prefers_a_number_to_a_plural(
    counts: list[tuple[object, str | None]], expected: object
) -> None:
    from labeler.attributes import PLURAL_RULE, stated_count
    from labeler.schema import Mention

    mentions = [
        Mention(
            label="Nodule", text="nodules", start=0, end=7, sentence="nodules",
            status="positive", attributes={} if count is None else {"count": count},
            attribute_evidence=[] if rule is None else [{"attribute": "count", "rule": rule}],
        )
        for count, rule in counts
    ]  # fmt: skip
    assert stated_count(mentions, PLURAL_RULE) == expected


def test_attribute_terms_read_once_serve_every_set_of_mentions(nlp: Language) -> None:
    """`find(terms=...)` with the sentence's terms, read before the parse, is `find()`."""
    finder = AttributeFinder(nlp.make_doc, nlp.vocab, load_attribute_rules())
    text = "Small left effusion and 2 right upper lobe nodules measuring up to 8 mm."
    doc = nlp.make_doc(text)
    terms = finder.terms(doc)
    assert {ev.attribute for _, ev in terms} >= {"severity", "laterality", "count", "size_mm"}
    readers = [[doc[2:3]], [doc[7:8]], [doc[2:3], doc[7:8]]]
    for mentions in readers:
        assert finder.find(doc, mentions, terms=terms) == finder.find(doc, mentions)
    for name in ("tok2vec", "tagger", "parser"):
        doc = nlp.get_pipe(name)(doc)
    for mentions in readers:
        assert finder.find(doc, mentions, terms=terms) == finder.find(doc, mentions)


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        # two readings offered for one finding share the words before the first
        ("Minimal scarring or atelectasis at the left base.", "Atelectasis",
         {"severity": "minimal", "laterality": "left"}),
        ("Improved left basilar atelectasis or infiltrate.", "Infiltration",
         {"change": "improved", "laterality": "left"}),
        # a list of what is not there, and a list joined by "and", share nothing
        ("No consolidation, large pleural effusion or pneumothorax.", "Pneumothorax",
         {"severity": None}),
        ("No large pleural effusion or pneumothorax.", "Pneumothorax", {"severity": None}),
        ("Mild cardiomegaly and pleural effusion.", "Effusion", {"severity": None}),
        # a link names one finding again; each reading it offers is that finding
        ("Streaky opacity in the left lung base compatible with fibrosis or atelectasis.",
         "Atelectasis", {"laterality": "left", "location": ["basilar"]}),
        ("Opacity in the right lower lobe may represent scar versus atelectasis.",
         "Atelectasis", {"laterality": "right", "location": ["right lower lobe"]}),
        # a second finding joined by "and" is not a reading of the first
        ("Opacity in the left lower lobe consistent with pneumonia and pleural effusion.",
         "Effusion", {"laterality": None, "location": None}),
        # no link: readings in a sentence of their own do not take the opacity's place
        ("Opacity in the left upper lobe. Scarring or atelectasis.", "Atelectasis",
         {"laterality": None, "location": None}),
    ],
)  # fmt: skip
def test_readings_offered_for_one_finding_share_its_words_and_place(
    attrs: Attrs, text: str, name: str, expected: dict[str, object]
) -> None:
    found = attrs(text, name)
    assert {k: found.get(k) for k in expected} == expected


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        # the noun a finding's name modifies says its course, hedged or not
        ("Findings may reflect mass progression.", "Mass", {"change": "worsened"}),
        ("Possible nodule growth in the right upper lobe.", "Nodule", {"change": "increased"}),
        # ... not where the course is denied
        ("No evidence of mass progression.", "Mass", {"change": None}),
        ("No nodule growth.", "Nodule", {"change": None}),
    ],
)
def test_a_change_noun_after_the_findings_name_is_its_course(
    attrs: Attrs, text: str, name: str, expected: dict[str, object]
) -> None:
    got = attrs(text, name)
    assert {k: got.get(k) for k in expected} == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the side a finding is measured against is not its own
        ("A nodule at the right apex is larger compared to the left.", "right"),
        ("There is a nodule at the left base, denser compared with the right base.", "left"),
        # a comparison with a prior study leaves the side alone
        ("Compared to the prior study there is a new nodule in the left base.", "left"),
    ],
)
def test_a_side_the_finding_is_compared_with_is_not_its_own(
    attrs: Attrs, text: str, expected: str
) -> None:
    assert attrs(text, "Nodule").get("laterality") == expected
