"""The chexpert label set as radiologists label (issue 20 items 2-6), beside the CheXpert
labeler's own conventions (`chexpert-labeler`).

Sentences are written for these tests (no shared report text).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from spacy.language import Language

from labeler.config import LabelerConfig
from labeler.explain import explain
from labeler.labelsets import load_label_set
from labeler.pipeline import build_nlp, label_report
from labeler.schema import ReportLabels

Labeler = Callable[[str], ReportLabels]
pytestmark = pytest.mark.issue(20)


@pytest.fixture(scope="module")
def chexpert_nlp() -> Language:
    return build_nlp(LabelerConfig(label_set="chexpert"))


def _labeler(nlp: Language, label_set: str) -> Labeler:
    config = LabelerConfig(label_set=label_set)

    def run(text: str) -> ReportLabels:
        return label_report(text, nlp=nlp, config=config)

    return run


@pytest.fixture(scope="module")
def cx(chexpert_nlp: Language) -> Labeler:
    return _labeler(chexpert_nlp, "chexpert")


@pytest.fixture(scope="module")
def old() -> Labeler:
    # its own pipeline: the concept vocabulary is part of it (chexpert.concepts.v1)
    return _labeler(build_nlp(LabelerConfig(label_set="chexpert-labeler")), "chexpert-labeler")


def _set(result: ReportLabels) -> dict[str, str]:
    return {k: v for k, v in result.labels.items() if v != "absent"}


# --- class 2: cardiac versus cardiomediastinal --------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Normal cardiomediastinal silhouette.",
        "The cardiomediastinal silhouette is within normal limits.",
        "Cardiomediastinal contours are unremarkable.",
    ],
)
def test_a_normal_cardiomediastinal_silhouette_decides_the_mediastinum_only(
    cx: Labeler, old: Labeler, text: str
) -> None:
    assert _set(cx(text)) == {"Enlarged Cardiomediastinum": "negative"}
    # the CheXpert labeler read the heart into it too
    assert old(text).labels["Cardiomegaly"] == "negative"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Heart size normal.", {"Cardiomegaly": "negative"}),
        ("The cardiac silhouette is normal.", {"Cardiomegaly": "negative"}),
        (
            "Heart size and mediastinal contours are within normal limits.",
            {"Cardiomegaly": "negative", "Enlarged Cardiomediastinum": "negative"},
        ),
        ("Mediastinal widening.", {"Enlarged Cardiomediastinum": "positive"}),
        ("Prominent mediastinum.", {"Enlarged Cardiomediastinum": "positive"}),
        (
            "Increased size of the cardiomediastinal silhouette.",
            {"Enlarged Cardiomediastinum": "positive"},
        ),
        (
            "No increase in the size of the cardiomediastinal silhouette.",
            {"Enlarged Cardiomediastinum": "negative"},
        ),
        ("Possible mediastinal widening.", {"Enlarged Cardiomediastinum": "uncertain"}),
    ],
)
def test_heart_and_mediastinum(cx: Labeler, text: str, expected: dict[str, str]) -> None:
    assert _set(cx(text)) == expected


# --- class 4: support devices -------------------------------------------------------------


@pytest.mark.parametrize("text", ["Median sternotomy wires.", "Surgical clips in the left axilla."])
def test_post_operative_findings_are_not_support_devices(
    cx: Labeler, old: Labeler, text: str
) -> None:
    result = cx(text)
    assert result.labels["Support Devices"] == "absent"
    assert result.no_finding is False  # a post-operative finding all the same
    if "sternotomy" in text:
        assert old(text).labels["Support Devices"] == "positive"


@pytest.mark.issue(41)
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # radiologists mark a removal as a negative device mention
        ("Interval removal of the endotracheal tube.", "negative"),
        ("The right IJ line has been removed.", "negative"),
        ("Endotracheal tube terminates 4 cm above the carina.", "positive"),
        ("No support devices.", "negative"),
        # a device removed and another still in place: the one in place decides
        ("Interval removal of the chest tube. Right PICC in the SVC.", "positive"),
    ],
)
def test_a_removed_device_is_a_negative_device_mention(
    cx: Labeler, old: Labeler, text: str, expected: str
) -> None:
    assert cx(text).labels["Support Devices"] == expected
    assert old(text).labels["Support Devices"] == expected  # as the CheXpert labeler does


# --- class 5: No Finding ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "no_finding"),
    [
        ("Lungs are clear. Heart size normal.", True),
        # a device does not count, as in the CheXpert labeler: radiologists mark No Finding
        # with a device and nothing else about as often as they leave it blank
        ("Right PICC line in the SVC. Lungs are clear.", True),
        ("Right PICC line in the SVC. Small left effusion.", False),
        ("Normal chest; degenerative changes of the spine.", False),
        ("No acute cardiopulmonary process.", True),
    ],
)
def test_no_finding_is_blank_when_anything_is_described(
    cx: Labeler, text: str, no_finding: bool
) -> None:
    assert cx(text).no_finding is no_finding


def test_explain_names_what_set_no_finding(cx: Labeler) -> None:
    result = cx("Normal chest; degenerative changes of the spine.")
    why = explain(result, load_label_set("chexpert"))["no_finding"]["why"]
    assert why.startswith("false: ")
    assert '"degenerative changes"' in why and "outside the label set" in why
    assert "rule " in why


# --- class 6: attributes stay with their finding ------------------------------------------


@pytest.mark.parametrize(
    "tail",
    ["", ", concerning for malignancy", ", suspicious for lung cancer", ", likely a neoplasm"],
)
def test_a_size_stays_with_its_finding_when_a_hedged_diagnosis_follows(
    cx: Labeler, tail: str
) -> None:
    text = f"There is a 2.3 cm spiculated mass in the right upper lobe{tail}."
    [mass] = [m for m in cx(text).mentions if m.text == "mass"]
    assert mass.attributes["size_mm"] == 23.0
    assert mass.attributes["laterality"] == "right"
    assert mass.attributes["location"] == ["right upper lobe"]
