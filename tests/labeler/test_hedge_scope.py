"""Where a hedge stops, differential and work-up phrasing, negated rationales and removed
devices: each class positive, negative and uncertain, in both label sets (sentences written
for these tests)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from spacy.language import Language

from labeler.config import LabelerConfig
from labeler.pipeline import build_nlp, label_report
from labeler.schema import ReportLabels

pytestmark = pytest.mark.issue(41)

Labeler = Callable[[str], dict[str, str]]


@pytest.fixture(scope="module")
def cx14(nlp: Language) -> Labeler:
    def run(text: str) -> dict[str, str]:
        return label_report("FINDINGS: " + text, nlp=nlp, config=LabelerConfig()).labels

    return run


@pytest.fixture(scope="module")
def chexpert_report() -> Callable[[str], ReportLabels]:
    config = LabelerConfig(label_set="chexpert")
    nlp = build_nlp(config)

    def run(text: str) -> ReportLabels:
        return label_report("IMPRESSION: " + text, nlp=nlp, config=config)

    return run


@pytest.fixture(scope="module")
def cxp(chexpert_report: Callable[[str], ReportLabels]) -> Labeler:
    return lambda text: chexpert_report(text).labels


# (sentence, {label: status}) in the chexpert set: the finding a sentence asserts stays as
# it is asserted; the diagnoses a relation hedge governs, and their alternatives, are hedged
CHEXPERT_SCOPE = [
    # a clause after "however" is one of its own
    ("Bibasilar opacities which may represent atelectasis, however other etiologies cannot "
     "be excluded.", {"Lung Opacity": "positive", "Atelectasis": "uncertain"}),
    ("Bibasilar opacities, however pneumonia cannot be excluded.",
     {"Lung Opacity": "positive", "Pneumonia": "uncertain"}),
    ("Pneumothorax cannot be excluded.", {"Pneumothorax": "uncertain"}),
    # "related to", "due to": the subject is described, its explanation hedged
    ("Patchy opacities may be related to atelectasis.",
     {"Lung Opacity": "positive", "Atelectasis": "uncertain"}),
    ("Small effusion may be present.", {"Pleural Effusion": "uncertain"}),  # no relation
    ("Left basilar opacity may represent atelectasis versus consolidation.",
     {"Lung Opacity": "positive", "Atelectasis": "uncertain", "Consolidation": "uncertain"}),
    # an aside in brackets is a statement of its own: a negation before it does not reach
    # in, one inside it still negates
    ("No consolidation or large pleural effusion (blunting of the costophrenic angles may "
     "represent small effusions or pleural thickening).",
     {"Consolidation": "negative", "Pleural Effusion": "uncertain"}),
    ("No consolidation (no pleural effusion or pneumothorax).",
     {"Consolidation": "negative", "Pleural Effusion": "negative", "Pneumothorax": "negative"}),
    # a negated rationale rules its diagnosis out
    ("No focal airspace opacities to suggest pneumonia.",
     {"Lung Opacity": "negative", "Pneumonia": "negative"}),
    # an enlargement the film may make: uncertain, as CheXpert radiologists grade it
    ("Apparent cardiomegaly on this AP film.", {"Cardiomegaly": "uncertain"}),
    ("The heart appears enlarged, likely accentuated by AP technique.",
     {"Cardiomegaly": "uncertain"}),
    ("Apparent enlargement of the cardiac silhouette is likely due to AP technique.",
     {"Cardiomegaly": "uncertain"}),
    ("Heart size is probably enlarged.", {"Cardiomegaly": "positive"}),  # probable: positive
    ("The heart is enlarged.", {"Cardiomegaly": "positive"}),
    ("No apparent pleural effusion.", {"Pleural Effusion": "negative"}),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), CHEXPERT_SCOPE)
def test_chexpert_hedge_scope(cxp: Labeler, text: str, expected: dict[str, str]) -> None:
    got = cxp(text)
    assert {k: got[k] for k in expected} == expected


# (sentence, label, status) in the default chestxray14 set (NegBio's convention: every hedge
# uncertain)
CHESTXRAY14 = [
    # coordinated alternatives after a hedge: all hedged, whatever the tagger makes of them
    ("Findings could represent scarring or infiltrate.", "Infiltration", "uncertain"),
    ("Findings could represent atelectasis or pneumonia.", "Pneumonia", "uncertain"),
    # differential and work-up phrasing
    ("Pneumonia is in the differential.", "Pneumonia", "uncertain"),
    ("Early pneumonia would be a consideration.", "Pneumonia", "uncertain"),
    ("Correlate clinically for pneumonia.", "Pneumonia", "uncertain"),
    ("Clinical correlation for pneumonia is recommended.", "Pneumonia", "uncertain"),
    ("Small effusion is difficult to completely exclude.", "Effusion", "uncertain"),
    ("Differential diagnosis includes pulmonary edema.", "Edema", "uncertain"),
    # ... not when the finding is stated or ruled out
    ("Pneumonia in the right lower lobe.", "Pneumonia", "positive"),
    ("Pneumothorax is not a consideration.", "Pneumothorax", "negative"),
    # a negated rationale, under NegBio's convention too
    ("No focal airspace opacities to suggest pneumonia.", "Pneumonia", "negative"),
    ("There is no consolidation to suggest pneumonia.", "Pneumonia", "negative"),
    ("Patchy opacity suggestive of pneumonia.", "Pneumonia", "uncertain"),
]


@pytest.mark.parametrize(("text", "label", "status"), CHESTXRAY14)
def test_chestxray14_hedges(cx14: Labeler, text: str, label: str, status: str) -> None:
    assert cx14(text)[label] == status


def test_a_removed_device_and_no_finding_in_chexpert(
    chexpert_report: Callable[[str], ReportLabels],
) -> None:
    removed = chexpert_report("Interval removal of the right chest tube. Lungs are clear.")
    assert removed.labels["Support Devices"] == "negative"
    assert removed.no_finding is True  # a device does not block No Finding
    device = chexpert_report("Endotracheal tube 4 cm above the carina. Lungs are clear.")
    assert (device.labels["Support Devices"], device.no_finding) == ("positive", True)
    sick = chexpert_report("Right PICC. Small left pleural effusion.")
    assert sick.no_finding is False


# modifiers: "nodular" describing another finding is that finding (vocabulary data); a
# calcified pleural plaque is not a thickened pleura
MODIFIERS = [
    ("Nodular infiltrate in the left base.", {"Infiltration": "positive", "Nodule": "absent"}),
    ("Nodular consolidation.", {"Consolidation": "positive", "Nodule": "absent"}),
    ("Small nodule in the left base.", {"Nodule": "positive"}),
    # the OpenI coders code these as Nodule and Mass: kept
    ("Nodular interstitial opacities.", {"Nodule": "positive"}),
    ("Masslike opacity in the right base.", {"Mass": "positive"}),
    ("Calcified pleural plaques.", {"Pleural_Thickening": "absent"}),
    ("Left pleural calcification.", {"Pleural_Thickening": "absent"}),
    ("Left apical pleural thickening.", {"Pleural_Thickening": "positive"}),
]


@pytest.mark.parametrize(("text", "expected"), MODIFIERS)
def test_modifiers_and_plaques(cx14: Labeler, text: str, expected: dict[str, str]) -> None:
    got = cx14(text)
    assert {k: got[k] for k in expected} == expected


def test_a_pleural_plaque_is_still_not_a_normal_study(nlp: Language) -> None:
    result = label_report("FINDINGS: Calcified pleural plaques.", nlp=nlp, config=LabelerConfig())
    assert result.no_finding is False
