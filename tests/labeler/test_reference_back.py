"""Sizes stated in the sentence after their finding (`labeler.reference_back`), through the
labeler: the label's finding and the report's findings both take them, with evidence."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from spacy.language import Language

from labeler.config import LabelerConfig
from labeler.pipeline import label_report
from labeler.schema import ReportLabels


@pytest.fixture(scope="module")
def read(nlp: Language) -> Callable[[str], ReportLabels]:
    config = LabelerConfig(findings=True)
    return lambda text: label_report(text, nlp=nlp, config=config)


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("text", "label", "size"),
    [
        ("FINDINGS: A mass is present in the left midlung. This measures approximately "
         "3.2 cm in diameter.", "Mass", 32.0),
        ("FINDINGS: Another nodule is seen near the right hilum. It is about 2 cm.", "Nodule",
         20.0),
        ("FINDINGS: Moderate right pneumothorax. 2. This measures 3 cm at the apex.",
         "Pneumothorax", 30.0),
        # its own size stands; a ruled-out finding takes none; a sentence that names its
        # own finding keeps its size; a sentence that does not refer back gives none
        ("FINDINGS: A 12 mm nodule in the right lung. It measures 14 mm on the lateral view.",
         "Nodule", 12.0),
        ("FINDINGS: No pneumothorax. It measures 2 cm.", "Pneumothorax", None),
        ("FINDINGS: Right lung nodule. It is near a 3 cm mass.", "Nodule", None),
        ("FINDINGS: Right lung nodule. The heart measures 15 cm.", "Nodule", None),
    ],
)  # fmt: skip
def test_a_size_in_the_next_sentence_goes_to_the_finding_before(
    read: Callable[[str], ReportLabels], text: str, label: str, size: float | None
) -> None:
    result = read(text)
    assert result.findings[label].get("size_mm") == size
    found = result.report_findings or []
    assert found[0].attributes.get("size_mm") == size


@pytest.mark.issue(40)
def test_a_referred_size_keeps_its_evidence(read: Callable[[str], ReportLabels]) -> None:
    text = "FINDINGS: A mass is present in the left midlung. This measures 3.2 cm."
    mass = next(m for m in read(text).mentions if m.label == "Mass")
    ev = next(e for e in mass.attribute_evidence if e["attribute"] == "size_mm")
    assert ev["rule"] == "size.refers_back"
    assert text[ev["start"] : ev["end"]] == "3.2 cm"


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("text", "label", "change"),
    [
        ("FINDINGS: Small right pleural effusion. This is new since the prior study.",
         "Effusion", "new"),
        ("IMPRESSION: Bilateral pulmonary nodules. These were not present on the prior study.",
         "Nodule", "new"),
        ("FINDINGS: Small left pleural effusion. This is unchanged as compared to the prior.",
         "Effusion", "unchanged"),
        ("FINDINGS: Moderate cardiomegaly. This shows interval increase in size.",
         "Cardiomegaly", "increased"),
        ("FINDINGS: Right lower lobe nodule. This was seen on the prior study.", "Nodule",
         "unchanged"),
        ("FINDINGS: Small left pleural effusion. This has been present since last year.",
         "Effusion", "unchanged"),
        ("FINDINGS: Small left pleural effusion. This was not seen on the prior study.",
         "Effusion", "new"),
        # negated, its own change, a ruled-out finding, a sentence with a finding of its own
        ("FINDINGS: Small left pleural effusion. This is not new.", "Effusion", None),
        ("FINDINGS: Stable small left pleural effusion. This is new.", "Effusion", "unchanged"),
        ("FINDINGS: No pleural effusion. This is new.", "Effusion", None),
        ("FINDINGS: Small left pleural effusion. It is new atelectasis.", "Effusion", None),
        ("FINDINGS: Small left pleural effusion. The heart is unchanged.", "Effusion", None),
        # what it says before a finding of its own is the one before's, unless it is that
        # finding's own word
        ("IMPRESSION: Bilateral pulmonary nodules. These were not present on the prior "
         "study and may represent infection.", "Nodule", "new"),
        ("FINDINGS: Right basilar atelectasis. This may represent resolving pneumonia.",
         "Atelectasis", None),
    ],
)  # fmt: skip
def test_a_change_in_the_next_sentence_goes_to_the_finding_before(
    read: Callable[[str], ReportLabels], text: str, label: str, change: str | None
) -> None:
    result = read(text)
    assert result.findings.get(label, {}).get("change") == change
    found = [f for f in result.report_findings or [] if f.start < text.index(".")]
    assert found[0].attributes.get("change") == change


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("text", "change"),
    [
        # in the finding's sentence, after it; in the sentence after, referring back
        ("FINDINGS: Right upper lobe nodule, not well seen on prior exam.", "new"),
        ("FINDINGS: There is a left lung opacity, not well appreciated on prior.", "new"),
        ("FINDINGS: Right midlung nodule noted, not visualized on the previous study.", "new"),
        ("FINDINGS: Right midlung nodule. This was not well seen previously.", "new"),
        ("FINDINGS: Right midlung nodule. It was not previously visualized.", "new"),
        # hedged: the finding is new all the same
        ("FINDINGS: Right midlung nodule, not seen on prior CT, may represent a granuloma.",
         "new"),
        # not seen on another view of this study: no change
        ("FINDINGS: Right midlung nodule, not well seen on the lateral view.", None),
        ("FINDINGS: Right midlung nodule. This is not well seen on the lateral view.", None),
    ],
)  # fmt: skip
def test_a_finding_the_prior_did_not_show_is_new(
    read: Callable[[str], ReportLabels], text: str, change: str | None
) -> None:
    nodule = [f for f in read(text).report_findings or [] if f.concept in ("nodule", "opacity")]
    assert nodule[0].attributes.get("change") == change


@pytest.mark.issue(40)
def test_a_referred_change_keeps_its_evidence(read: Callable[[str], ReportLabels]) -> None:
    text = "IMPRESSION: Bilateral pulmonary nodules. These were not present on the prior study."
    nodule = next(m for m in read(text).mentions if m.label == "Nodule")
    ev = next(e for e in nodule.attribute_evidence if e["attribute"] == "change")
    assert ev["rule"] == "change.refers_back"
    assert text[ev["start"] : ev["end"]] == "not present on the prior study"


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("text", "given"),
    [
        ("FINDINGS: There are small bilateral pulmonary nodules measure approximately 5 mm in "
         "size in the right midlung.", 5.0),
        # several findings' sizes: the largest, as a finding's size is
        ("FINDINGS: There are small bilateral pulmonary nodules measure approximately 5 mm and "
         "7 mm in size in the right midlung.", 7.0),
        ("FINDINGS: Two nodules are noted in the right XXXX XXXX measuring 13 mm and one "
         "measuring 16 mm in diameter.", 16.0),
        # two sizes of one finding, a ruled-out finding, two findings: none given by this rule
        ("FINDINGS: There is a pulmonary nodule XXXX 5 mm XXXX 7 mm in size.", None),
        ("FINDINGS: There are no pulmonary nodules measure approximately 5 mm in size.", None),
        ("FINDINGS: There are small nodules and masses measure approximately 5 mm in size.",
         None),
    ],
)  # fmt: skip
def test_a_sentences_one_size_goes_to_its_one_finding(
    read: Callable[[str], ReportLabels], text: str, given: float | None
) -> None:
    result = read(text)
    rules = [ev["rule"] for m in result.mentions for ev in m.attribute_evidence]
    assert ("size.sole_in_sentence" in rules) == (given is not None)
    if given is not None:
        assert result.findings["Nodule"]["size_mm"] == given


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("text", "label", "size"),
    [
        # a describing finding right before the finding it describes: one lesion, both sized
        ("FINDINGS: Several cavitary right pulmonary masses. These have grown, the largest "
         "measuring 4 x 5 cm.", "Mass", 50.0),
        # a finding joined by "and" is another one
        ("FINDINGS: Right lower lobe opacity and left mass. This measures 3 cm.", "Mass", None),
    ],
)  # fmt: skip
def test_a_referred_size_goes_to_the_finding_its_first_finding_describes(
    read: Callable[[str], ReportLabels], text: str, label: str, size: float | None
) -> None:
    assert read(text).findings[label].get("size_mm") == size
