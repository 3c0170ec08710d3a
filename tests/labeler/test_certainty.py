"""The certainty scale (issue 20 items 1 and 3): hedges graded as radiologists grade them.

Sentences are written for these tests (no shared report text).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from spacy.language import Language

from labeler.certainty import load_certainty
from labeler.config import LabelerConfig
from labeler.errors import PatternFileError
from labeler.pipeline import build_nlp, label_report
from labeler.schema import ReportLabels

Labeler = Callable[[str], ReportLabels]


def _labeler(nlp: Language, **config: str) -> Labeler:
    cfg = LabelerConfig(**config)  # type: ignore[arg-type]

    def run(text: str) -> ReportLabels:
        return label_report(text, nlp=nlp, config=cfg)

    return run


@pytest.fixture(scope="module")
def chexpert_nlp() -> Language:
    return build_nlp(LabelerConfig(label_set="chexpert"))


@pytest.fixture(scope="module")
def radiologist(chexpert_nlp: Language) -> Labeler:
    return _labeler(chexpert_nlp, label_set="chexpert")  # the chexpert set's default profile


@pytest.fixture(scope="module")
def chexpert_labeler(chexpert_nlp: Language) -> Labeler:
    return _labeler(chexpert_nlp, label_set="chexpert", certainty="chexpert-labeler")


# (sentence, label, status under the radiologist profile, under the CheXpert labeler's)
CASES = [
    ("Probable right lower lobe pneumonia.", "Pneumonia", "positive", "uncertain"),
    ("Pneumonia is suspected.", "Pneumonia", "positive", "uncertain"),
    ("Findings concerning for pneumonia.", "Pneumonia", "positive", "uncertain"),
    ("Patchy opacity suspicious for pneumonia.", "Pneumonia", "positive", "uncertain"),
    ("Possible small left effusion.", "Pleural Effusion", "uncertain", "uncertain"),
    ("Opacity may represent atelectasis.", "Atelectasis", "uncertain", "uncertain"),
    ("Atelectasis versus pneumonia.", "Pneumonia", "uncertain", "uncertain"),
    ("Pneumonia cannot be excluded.", "Pneumonia", "uncertain", "uncertain"),
    ("Pneumothorax is unlikely.", "Pneumothorax", "uncertain", "uncertain"),
    # a hedge whose evidence is negated rules the diagnosis out, also where the parser
    # hangs the hedge's clause off the verb, out of the negation rules' reach
    (
        "There is no focal air space consolidation to suggest a pneumonia.",
        "Pneumonia",
        "negative",
        "uncertain",
    ),
    (
        "No focal airspace opacity is seen to suggest a pneumonia.",
        "Pneumonia",
        "negative",
        "uncertain",
    ),
    ("There are no focal opacities to suggest a pneumonia.", "Pneumonia", "negative", "uncertain"),
    (
        "Clear lungs without consolidation to suggest pneumonia.",
        "Pneumonia",
        "negative",
        "uncertain",
    ),
    ("No findings suggestive of pneumonia.", "Pneumonia", "negative", "negative"),
    # but a qualified finding keeps its hedge
    (
        "Opacity without air bronchograms, concerning for pneumonia.",
        "Pneumonia",
        "positive",
        "uncertain",
    ),
]


@pytest.mark.issue(20)
@pytest.mark.parametrize(("text", "label", "rad", "cxl"), CASES, ids=[c[0] for c in CASES])
def test_hedges_grade_by_profile(
    radiologist: Labeler, chexpert_labeler: Labeler, text: str, label: str, rad: str, cxl: str
) -> None:
    assert radiologist(text).labels[label] == rad
    assert chexpert_labeler(text).labels[label] == cxl


@pytest.mark.issue(20)
def test_a_graded_mention_names_the_rule_and_the_level(radiologist: Labeler) -> None:
    [mention] = [m for m in radiologist("Probable pneumonia.").mentions if m.label == "Pneumonia"]
    assert mention.rule == "unc.hedge_adjective@probable" and mention.cue == "Probable"
    result = radiologist("There are no focal opacities to suggest a pneumonia.")
    [mention] = [m for m in result.mentions if m.label == "Pneumonia"]
    assert mention.status == "negative" and (mention.rule or "").endswith("@negated")


@pytest.mark.issue(20)
@pytest.mark.parametrize(
    "text",
    [
        "Right lower lobe opacity suggestive of pneumonia.",
        "Patchy opacity concerning for pneumonia.",
        "Interstitial opacity suggestive of edema.",
    ],
)
def test_the_finding_a_hedged_diagnosis_rests_on_is_seen(
    radiologist: Labeler, chexpert_labeler: Labeler, text: str
) -> None:
    # uncertainty belongs to the diagnosis after "suggestive of", not to the opacity
    for label in (radiologist, chexpert_labeler):
        assert label(text).labels["Lung Opacity"] == "positive"


@pytest.mark.issue(20)
def test_chestxray14_keeps_negbio_convention(nlp: Language) -> None:
    label = _labeler(nlp)  # chestxray14: the OpenI gold counts hedges as not positive
    assert label("Findings concerning for pneumonia.").labels["Pneumonia"] == "uncertain"
    radiologist = _labeler(nlp, certainty="radiologist")
    assert radiologist("Findings concerning for pneumonia.").labels["Pneumonia"] == "positive"


def test_certainty_levels_and_profiles_load() -> None:
    scale = load_certainty()
    assert scale.level("Likely") == "probable"
    assert scale.level("may  represent") == "possible"
    assert scale.level("a cue nobody listed") == "possible"
    assert scale.grade("negative", "neg.det", "no") == ("negative", "neg.det")
    assert scale.grade("uncertain", "unc.x", "likely") == ("positive", "unc.x@probable")
    assert load_certainty(profile="negbio").grade("uncertain", "unc.x", "likely") == (
        "uncertain",
        "unc.x",
    )
    with pytest.raises(PatternFileError, match="unknown certainty profile"):
        load_certainty(profile="optimist")
    with pytest.raises(PatternFileError, match="unknown certainty profile"):
        LabelerConfig(certainty="optimist")
