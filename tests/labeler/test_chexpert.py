"""CheXpert label set: every observation positive, negative and uncertain; conventions.

Sentences are written for these tests (no shared report text).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from spacy.language import Language

from labeler.config import LabelerConfig
from labeler.labelsets import load_label_set
from labeler.pipeline import build_nlp, label_report
from labeler.schema import ReportLabels

CODES = {"positive": 1, "negative": 0, "uncertain": -1}


@pytest.fixture(scope="module")
def chexpert_config() -> LabelerConfig:
    return LabelerConfig(label_set="chexpert-labeler")


@pytest.fixture(scope="module")
def chexpert_nlp(chexpert_config: LabelerConfig) -> Language:
    return build_nlp(chexpert_config)


@pytest.fixture(scope="module")
def cx(chexpert_nlp: Language, chexpert_config: LabelerConfig) -> Callable[[str], ReportLabels]:
    def run(text: str) -> ReportLabels:
        return label_report(text, nlp=chexpert_nlp, config=chexpert_config)

    return run


def _codes(result: ReportLabels) -> dict[str, int]:
    return {k: CODES[v] for k, v in result.labels.items() if v != "absent"}


# observation -> (positive, negative, uncertain) sentences
CASES: dict[str, tuple[str, str, str]] = {
    "Enlarged Cardiomediastinum": (
        "The mediastinum is widened.",
        "The mediastinal contours are unremarkable.",
        "Stable cardiomediastinal silhouette.",
    ),
    "Cardiomegaly": (
        "The heart is moderately enlarged.",
        "Heart size is normal.",
        "Borderline heart size.",
    ),
    "Lung Lesion": (
        "A 2 cm nodule in the right upper lobe.",
        "No suspicious pulmonary mass.",
        "Possible nodule at the left apex.",
    ),
    "Lung Opacity": (
        "Patchy opacity at the right base.",
        "No focal airspace opacity.",
        "Questionable opacity in the lingula.",
    ),
    "Edema": (
        "Moderate interstitial pulmonary edema.",
        "No pulmonary edema.",
        "Mild pulmonary vascular congestion.",
    ),
    "Consolidation": (
        "Dense consolidation in the left lower lobe.",
        "No consolidation.",
        "Consolidation cannot be excluded.",
    ),
    "Pneumonia": (
        "Right lower lobe pneumonia.",
        "No evidence of pneumonia.",
        "Findings may represent early pneumonia.",
    ),
    "Atelectasis": (
        "Bibasilar atelectasis.",
        "No atelectasis.",
        "Atelectasis versus scarring at the left base.",
    ),
    "Pneumothorax": (
        "Small right apical pneumothorax.",
        "No pneumothorax.",
        "Possible tiny left apical pneumothorax.",
    ),
    "Pleural Effusion": (
        "Large left pleural effusion.",
        "No pleural effusion.",
        "Small effusion is not excluded.",
    ),
    "Pleural Other": (
        "Right apical pleural thickening.",
        "No pleural thickening.",
        "Possible pleural plaque on the left.",
    ),
    "Fracture": (
        "Acute fracture of the left seventh rib.",
        "No displaced rib fracture.",
        "Questionable fracture of the right clavicle.",
    ),
    "Support Devices": (
        "The endotracheal tube ends 4 cm above the carina.",
        "The right chest tube has been removed.",
        "Possible retained catheter fragment.",
    ),
}


@pytest.mark.issue(8)
@pytest.mark.parametrize("observation", list(CASES))
@pytest.mark.parametrize("status", ["positive", "negative", "uncertain"])
def test_chexpert_observation_statuses(
    cx: Callable[[str], ReportLabels], observation: str, status: str
) -> None:
    sentence = CASES[observation][["positive", "negative", "uncertain"].index(status)]
    assert cx(sentence).labels[observation] == status, cx(sentence).mentions


def test_chexpert_label_set_names_and_csv_order() -> None:
    ls = load_label_set("chexpert")
    assert list(ls.labels) == list(CASES)
    assert [c.split("=")[0] for c in ls.csv_columns][:15] == [
        "Reports", "No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Lesion",
        "Lung Opacity", "Edema", "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax",
        "Pleural Effusion", "Pleural Other", "Fracture", "Support Devices",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "no_finding"),
    [
        ("No acute cardiopulmonary process.", True),
        ("Right PICC line in the SVC. Lungs are clear.", True),  # devices do not count
        ("Mild emphysema.", False),  # a finding outside the 13 counts
        ("No pneumothorax. Possible pneumonia.", False),
        ("Heart size is normal. No effusion.", True),
    ],
)
def test_chexpert_no_finding(
    cx: Callable[[str], ReportLabels], text: str, no_finding: bool
) -> None:
    assert cx(text).no_finding is no_finding


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # CHF (Edema) makes Cardiomegaly uncertain; a positive mention still wins
        ("Findings consistent with CHF.", {"Edema": 1, "Cardiomegaly": -1}),
        ("Cardiomegaly and CHF.", {"Edema": 1, "Cardiomegaly": 1}),
        # pre-negation uncertainty: "no new"
        ("No new consolidation.", {"Consolidation": -1}),
        # post-negation uncertainty: alternatives
        ("Atelectasis or pneumonia at the left base.", {"Atelectasis": -1, "Pneumonia": -1}),
        # negation first: "no A or B"
        ("No effusion or pneumothorax.", {"Pleural Effusion": 0, "Pneumothorax": 0}),
        # aggregation: positive > uncertain > negative
        ("No effusion on the left. Small right effusion.", {"Pleural Effusion": 1}),
        ("No effusion on the left. Possible right effusion.", {"Pleural Effusion": -1}),
        # a pericardial effusion is not a pleural one
        ("Small pericardial effusion.", {}),
        # a calcified nodule is a granuloma, not a lesion
        ("Calcified nodule in the left lower lobe.", {}),
        # normal cardiomediastinal silhouette: both heart and mediastinum negative
        ("Normal cardiomediastinal silhouette.",
         {"Enlarged Cardiomediastinum": 0, "Cardiomegaly": 0}),
        ("Pneumothorax: none.", {"Pneumothorax": 0}),
        ("Heart: Enlarged.", {"Cardiomegaly": 1}),
        ("Interval removal of the right IJ line.", {"Support Devices": 0}),
        ("The cardiac and mediastinal silhouettes are stable.",
         {"Cardiomegaly": -1, "Enlarged Cardiomediastinum": -1}),
        ("Right basilar opacity may reflect atelectasis, though infection cannot be excluded.",
         {"Lung Opacity": 1, "Atelectasis": -1, "Pneumonia": -1}),
        ("Old granulomatous infection.", {}),
        ("Heart size is top normal.", {"Cardiomegaly": 0}),
        ("Stable appearance of the cardiomediastinal silhouette.",
         {"Enlarged Cardiomediastinum": -1}),
        ("The cardiomediastinal and hilar contours are unchanged.",
         {"Enlarged Cardiomediastinum": -1}),
        ("Heart size cannot be assessed.", {"Cardiomegaly": -1}),
        # predicate-position hedges; CheXpert reads "likely" as positive
        ("Small effusion is likely.", {"Pleural Effusion": 1}),
        ("Edema is suspected.", {"Edema": -1}),
        ("A pneumothorax is unlikely.", {"Pneumothorax": -1}),
        ("Pneumonia is probable.", {"Pneumonia": -1}),
        ("Heart size is borderline.", {"Cardiomegaly": -1}),
        ("Cardiomegaly is borderline.", {"Cardiomegaly": -1}),
        ("Edema is not suspected.", {"Edema": 0}),
        # a range from normal to enlarged
        ("The heart size is top normal to mildly enlarged.", {"Cardiomegaly": -1}),
        ("Heart size is upper limits of normal or mildly enlarged.", {"Cardiomegaly": -1}),
        ("The heart is mildly enlarged.", {"Cardiomegaly": 1}),
        # "no new": uncertain in CheXpert mode (its labeler's convention)
        ("No new effusion.", {"Pleural Effusion": -1}),
        ("Heart and mediastinum are unremarkable.",
         {"Cardiomegaly": 0, "Enlarged Cardiomediastinum": 0}),
        ("Left chest tube remains in place, with no pneumothorax.",
         {"Support Devices": 1, "Pneumothorax": 0}),
    ],
)  # fmt: skip
def test_chexpert_conventions(
    cx: Callable[[str], ReportLabels], text: str, expected: dict[str, int]
) -> None:
    assert _codes(cx(text)) == expected


def test_chexpert_result_offsets_index_the_text(cx: Callable[[str], ReportLabels]) -> None:
    text = "IMPRESSION:\n1.No pneumothorax.2.Moderate cardiomegaly with CHF."
    result = cx(text)
    for m in result.mentions:
        assert text[m.start : m.end] == m.text
