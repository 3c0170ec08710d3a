"""Every negation and uncertainty rule of rules.v1: sentences that fire it, ones that must not.

The sentences are written for these tests (no shared report text). Each case
names the label whose mention is checked and the expected (status, rule id).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from spacy.language import Language

from labeler.components import MENTIONS_KEY, DependencyRules
from labeler.schema import Mention
from labeler.vocabulary import load_rules

# rule id -> [(sentence, label, expected status)] where the rule must decide,
# and [(sentence, label, expected status)] where it must NOT be the deciding rule.
FIRES: dict[str, list[tuple[str, str, str]]] = {
    "pseudo.no_change": [
        ("No change in the small left pleural effusion.", "Effusion", "positive"),
        ("Without interval change in the right basilar atelectasis.", "Atelectasis", "positive"),
    ],
    "pseudo.no_change_list": [
        ("No change chronic interstitial fibrosis.", "Fibrosis", "positive"),
    ],
    "pseudo.age_indeterminate": [
        ("Age-indeterminate nodule in the right upper lobe.", "Nodule", "positive"),
        ("Nodule of indeterminate age in the left lung.", "Nodule", "positive"),
    ],
    "unc.cannot_exclude": [
        ("Cannot exclude a small left pneumothorax.", "Pneumothorax", "uncertain"),
        ("Early pneumonia cannot be excluded.", "Pneumonia", "uncertain"),
        ("Mild edema is not excluded.", "Edema", "uncertain"),
        ("It is difficult to exclude a small effusion.", "Effusion", "uncertain"),
        ("It is difficult to completely exclude early pneumonia.", "Pneumonia", "uncertain"),
        # an adverb of certainty inside the cue still leaves the finding open
        ("A small mass cannot be confidently excluded.", "Mass", "uncertain"),
        ("Early pneumonia could not be definitively ruled out.", "Pneumonia", "uncertain"),
        ("We cannot reliably exclude a tiny apical pneumothorax.", "Pneumothorax", "uncertain"),
        (
            "Recommend follow-up until cleared to ensure that there is no underlying mass.",
            "Mass",
            "uncertain",
        ),
    ],
    "unc.cannot_exclude_head": [
        ("Small effusion not excluded.", "Effusion", "uncertain"),
        ("Subtle consolidation not confidently excluded.", "Consolidation", "uncertain"),
    ],
    "unc.phase_alternatives": [
        ("Resolving or developing pneumonia in the left lower lobe.", "Pneumonia", "uncertain"),
        ("This could be developing or resolving pneumonia.", "Pneumonia", "uncertain"),
    ],
    "neg.resolved": [
        ("The left pleural effusion has resolved.", "Effusion", "negative"),
        ("Interval resolution of the right lower lobe pneumonia.", "Pneumonia", "negative"),
    ],
    "neg.resolved_modifier": [
        ("Resolved interstitial edema.", "Edema", "negative"),
    ],
    "neg.negative_modifier": [
        ("Negative acute pneumonia.", "Pneumonia", "negative"),
    ],
    "neg.no_longer": [
        ("The pneumothorax is no longer seen.", "Pneumothorax", "negative"),
    ],
    "tmpl.field_yes": [
        ("Pneumothorax: present.", "Pneumothorax", "positive"),
        ("Pleural effusion? Yes.", "Effusion", "positive"),
    ],
    "tmpl.field_none": [
        ("Pneumothorax? No.", "Pneumothorax", "negative"),
        ("Pneumothorax: none.", "Pneumothorax", "negative"),
        ("Pleural effusion: not seen", "Effusion", "negative"),
        ("EDEMA: ABSENT", "Edema", "negative"),
        ("Pneumothorax: no.", "Pneumothorax", "negative"),
    ],
    "neg.det": [
        ("No pneumothorax.", "Pneumothorax", "negative"),
        ("There is no evidence of pulmonary edema.", "Edema", "negative"),
        ("No pleural effusion or pneumothorax.", "Pneumothorax", "negative"),
        ("No focal opacity to suggest pneumonia.", "Pneumonia", "negative"),
        ("No definite consolidation.", "Consolidation", "negative"),
        # a relative clause with its relative pronoun stays in the negation's reach
        ("No focal opacity which would suggest pneumonia.", "Pneumonia", "negative"),
    ],
    "neg.not": [
        ("The heart is not enlarged.", "Cardiomegaly", "negative"),
        ("Pneumothorax is not seen.", "Pneumothorax", "negative"),
    ],
    "neg.without": [
        ("The lungs are clear without consolidation.", "Consolidation", "negative"),
        ("Hyperinflated lungs without evidence of emphysema.", "Emphysema", "negative"),
    ],
    "neg.free_of": [
        (
            "The lungs are clear of focal consolidation, effusion, or pneumothorax.",
            "Pneumothorax",
            "negative",
        ),
        ("Negative for pneumonia.", "Pneumonia", "negative"),
    ],
    "neg.ruled_out": [
        ("Pneumothorax has been ruled out.", "Pneumothorax", "negative"),
    ],
    "neg.list": [
        (
            "No focal consolidation, suspicious opacity, large pleural effusion, or pneumothorax "
            "is identified.",
            "Effusion",
            "negative",
        ),
    ],
    "neg.absent_predicate": [
        ("Pleural effusion is absent.", "Effusion", "negative"),
    ],
    "unc.hedge_adjective": [
        ("Possible right lower lobe pneumonia.", "Pneumonia", "uncertain"),
        ("Atelectasis versus pneumonia in the left base.", "Atelectasis", "uncertain"),
        ("Questionable small nodule in the right apex.", "Nodule", "uncertain"),
        ("Question mild pulmonary edema.", "Edema", "uncertain"),
    ],
    "unc.hedge_relation": [
        ("Left basilar opacity, concerning for pneumonia.", "Pneumonia", "uncertain"),
        ("Right base opacity suspicious for pneumonia.", "Pneumonia", "uncertain"),
        ("Opacity suggestive of atelectasis.", "Atelectasis", "uncertain"),
        ("Findings suggesting interstitial edema.", "Edema", "uncertain"),
        ("Evaluate for pneumonia.", "Pneumonia", "uncertain"),
        ("The opacity may represent atelectasis.", "Atelectasis", "uncertain"),
    ],
    "unc.differential": [
        ("The differential diagnosis includes pneumonia.", "Pneumonia", "uncertain"),
    ],
    "unc.differential_predicate": [
        ("Pneumonia is in the differential.", "Pneumonia", "uncertain"),
        ("Early pneumonia would be a consideration.", "Pneumonia", "uncertain"),
        ("Edema is a possibility.", "Edema", "uncertain"),
    ],
    "unc.list": [
        (
            "Possible focal consolidation, large pleural effusion, or pneumothorax is identified.",
            "Effusion",
            "uncertain",
        ),
    ],
    "unc.hedge_predicate": [
        ("Small effusion is likely.", "Effusion", "uncertain"),
        ("Pneumonia is probable.", "Pneumonia", "uncertain"),
        ("Right lower lobe atelectasis is most likely.", "Atelectasis", "uncertain"),
        ("Atelectasis is likely present.", "Atelectasis", "uncertain"),
        ("A pneumothorax is unlikely.", "Pneumothorax", "uncertain"),
        ("Edema is doubtful.", "Edema", "uncertain"),
    ],
    "unc.hedge_predicate_verb": [
        ("Edema is suspected.", "Edema", "uncertain"),
        ("Underlying pneumonia is presumed.", "Pneumonia", "uncertain"),
    ],
    "unc.modal": [
        ("This could be early pneumonia.", "Pneumonia", "uncertain"),
        ("A small effusion may be present.", "Effusion", "uncertain"),
    ],
}

# Sentences where the named rule must NOT decide the mention (scope limits).
SPARED: dict[str, list[tuple[str, str, str]]] = {
    "tmpl.field_yes": [("Pneumothorax: not present.", "Pneumothorax", "negative")],
    "tmpl.field_none": [
        ("Pneumothorax: small apical.", "Pneumothorax", "positive"),
        ("Pleura: small left effusion.", "Effusion", "positive"),
    ],
    "pseudo.no_change": [("No effusion.", "Effusion", "negative")],
    # a comma ends the telegraphic form: the item after it is read on its own
    "pseudo.no_change_list": [("No change, small right pleural effusion.", "Effusion", "positive")],
    "pseudo.age_indeterminate": [
        ("Indeterminate nodule in the right upper lobe.", "Nodule", "uncertain")
    ],
    "unc.cannot_exclude": [("Small effusion. Cannot exclude edema.", "Effusion", "positive")],
    "unc.cannot_exclude_head": [("Edema is present.", "Edema", "positive")],
    "unc.phase_alternatives": [
        ("Resolving pneumonia in the left lower lobe.", "Pneumonia", "negative"),
        ("Developing pneumonia in the left lower lobe.", "Pneumonia", "positive"),
    ],
    "neg.resolved": [
        ("The effusion has resolved but atelectasis persists.", "Atelectasis", "positive"),
    ],
    "neg.resolved_modifier": [("Edema, now improved.", "Edema", "positive")],
    "neg.negative_modifier": [
        ("Pneumonia, tested negative for influenza.", "Pneumonia", "positive"),
        (
            "Minimal atelectasis at the left base otherwise negative for pneumonia.",
            "Atelectasis",
            "positive",
        ),
    ],
    "neg.no_longer": [("The pneumothorax is larger.", "Pneumothorax", "positive")],
    "neg.det": [
        ("No pneumothorax. Small left effusion.", "Effusion", "positive"),
        ("No pneumothorax, but there is a small effusion.", "Effusion", "positive"),
        # a sentence run on after the negated noun, its own subject with its own article
        ("There is no pneumothorax the heart is enlarged.", "Cardiomegaly", "positive"),
        ("There is no effusion the right lower lobe is consolidated.", "Consolidation", "positive"),
    ],
    "neg.not": [
        ("The heart is enlarged and the aorta is not tortuous.", "Cardiomegaly", "positive"),
    ],
    "neg.without": [("Atelectasis without effusion.", "Atelectasis", "positive")],
    "neg.free_of": [("Pneumonia, free of effusion.", "Pneumonia", "positive")],
    "neg.ruled_out": [("Pneumothorax is present.", "Pneumothorax", "positive")],
    "neg.list": [
        ("No effusion; mild bibasilar atelectasis.", "Atelectasis", "positive"),
        ("No effusion, mild bibasilar atelectasis.", "Atelectasis", "positive"),
    ],
    "neg.absent_predicate": [("Pleural effusion is present.", "Effusion", "positive")],
    "unc.hedge_adjective": [("Definite right lower lobe pneumonia.", "Pneumonia", "positive")],
    "unc.hedge_relation": [
        ("Dense nodule suggests prior granulomatous infection.", "Nodule", "positive"),
    ],
    "unc.differential": [("Pneumonia is present.", "Pneumonia", "positive")],
    "unc.differential_predicate": [
        ("Pneumonia is in the right lower lobe.", "Pneumonia", "positive"),
        ("Pneumothorax is not a consideration.", "Pneumothorax", "negative"),
    ],
    "unc.list": [("Scar, cyst, or pneumonia.", "Pneumonia", "positive")],
    "unc.hedge_predicate": [
        # attributive or not about the mention: the finding is stated
        ("Likely small effusion is present.", "Effusion", "positive"),
        ("Large effusion. Surgery is likely.", "Effusion", "positive"),
        ("No effusion is likely.", "Effusion", "negative"),
        # OpenI grades "borderline" as a severity (chexpert mode: uncertain)
        ("Heart size is borderline.", "Cardiomegaly", "positive"),
    ],
    "unc.hedge_predicate_verb": [
        ("Edema is present. Pneumonia is suspected.", "Edema", "positive"),
        ("Edema is not suspected.", "Edema", "negative"),
    ],
    "unc.modal": [("The nodule may represent a granuloma.", "Nodule", "positive")],
}


def _cases(table: dict[str, list[tuple[str, str, str]]]) -> list[tuple[str, str, str, str]]:
    return [(rid, *case) for rid, cases in table.items() for case in cases]


def test_rules_every_rule_has_cases() -> None:
    ids = {r.id for r in load_rules().rules}
    assert ids == set(FIRES), f"rules without a firing test: {ids - set(FIRES)}"
    assert ids == set(SPARED), f"rules without a sparing test: {ids - set(SPARED)}"


@pytest.mark.parametrize(("rule_id", "sentence", "label_name", "status"), _cases(FIRES))
def test_rules_fire(
    mention_of: Callable[[str, str], Mention],
    rule_id: str,
    sentence: str,
    label_name: str,
    status: str,
) -> None:
    m = mention_of(sentence, label_name)
    assert (m.status, m.rule) == (status, rule_id)


@pytest.mark.parametrize(("rule_id", "sentence", "label_name", "status"), _cases(SPARED))
def test_rules_spare(
    mention_of: Callable[[str, str], Mention],
    rule_id: str,
    sentence: str,
    label_name: str,
    status: str,
) -> None:
    m = mention_of(sentence, label_name)
    assert m.rule != rule_id
    assert m.status == status


@pytest.mark.parametrize(
    "sentence",
    [
        "The lungs are clear of consolidation, effusion, or pneumothorax.",
        "No consolidation, effusion or pneumothorax.",
        "There is no consolidation, effusion, or pneumothorax.",
        "Without evidence of consolidation, effusion or pneumothorax.",
    ],
)
def test_rules_negation_propagates_through_conjunctions(
    label: Callable[[str], object], sentence: str
) -> None:
    result = label(sentence)
    statuses = {k: v for k, v in result.labels.items() if v != "absent"}  # type: ignore[attr-defined]
    assert statuses == {
        "Consolidation": "negative",
        "Effusion": "negative",
        "Pneumothorax": "negative",
    }


def test_rules_pre_negation_uncertainty_checked_before_negation(
    mention_of: Callable[[str, str], Mention],
) -> None:
    # "not" would negate, but "not be excluded" is uncertainty
    m = mention_of("Pneumothorax can not be excluded.", "Pneumothorax")
    assert m.status == "uncertain"
    assert m.rule is not None and m.rule.startswith("unc.cannot_exclude")


@pytest.mark.parametrize(
    "sentence",
    [
        "No right pneumothorax or left effusion.",
        "Resolution of right pneumothorax and left effusion.",
    ],
)
def test_rules_laterality_left_is_not_a_verb(
    mention_of: Callable[[str, str], Mention], sentence: str
) -> None:
    # the small model tags "left" after "or"/"and" as the verb "leave"
    assert mention_of(sentence, "Effusion").status == "negative"


@pytest.mark.parametrize(
    ("sentence", "label_name"),
    [
        ("No effusion, mild atelectasis.", "Atelectasis"),
        ("No pneumothorax, small left pleural effusion.", "Effusion"),
        ("No focal consolidation, moderate cardiomegaly.", "Cardiomegaly"),
        ("No pneumothorax, new right basilar consolidation.", "Consolidation"),
        ("No effusion, increased interstitial edema.", "Edema"),
        ("Without pneumothorax, persistent left basilar atelectasis.", "Atelectasis"),
        ("Possible pneumonia, trace right effusion.", "Effusion"),
        # issue 8: closed by "and", a severity word still starts findings of their own
        ("No pneumothorax, small effusion and consolidation.", "Effusion"),
        ("No pneumothorax, small effusion and consolidation.", "Consolidation"),
        ("No effusion, mild atelectasis and cardiomegaly.", "Atelectasis"),
        ("No effusion, mild atelectasis and cardiomegaly.", "Cardiomegaly"),
    ],
)
def test_rules_unclosed_list_item_with_own_modifier_is_its_own_finding(
    mention_of: Callable[[str, str], Mention], sentence: str, label_name: str
) -> None:
    # a comma list with no closing "or"/"and"/"nor" whose item carries a
    # severity or course word: the item is a new finding, not in the cue's list
    assert mention_of(sentence, label_name).status == "positive"


@pytest.mark.parametrize(
    ("sentence", "label_name"),
    [
        ("No effusion, pneumothorax, or consolidation.", "Pneumothorax"),
        ("No effusion, pneumothorax, or consolidation.", "Consolidation"),
        ("No pneumothorax, large pleural effusion, or consolidation.", "Effusion"),
        ("No effusion, pneumothorax and consolidation.", "Consolidation"),
        ("Lungs are clear of edema, large effusion, or pneumothorax.", "Effusion"),
        ("No effusion or mild edema.", "Edema"),
        ("No focal consolidation, pleural effusion, pneumothorax.", "Pneumothorax"),
    ],
)
def test_rules_closed_or_bare_list_keeps_negating(
    mention_of: Callable[[str, str], Mention], sentence: str, label_name: str
) -> None:
    # a list closed by a conjunction, or one of bare findings, stays negated
    assert mention_of(sentence, label_name).status == "negative"


def test_rules_cues_for_new_mentions_decide_as_fresh_cues(nlp: Language) -> None:
    """Two readers decide their own mentions of one parsed sentence with one cue match."""
    rules: DependencyRules = nlp.get_pipe("cxr_dep_rules")  # type: ignore[assignment]
    doc = nlp("There is mild cardiomegaly without pleural effusion or pneumothorax.")
    first, second = [doc[5:7], doc[8:9]], [doc[3:4], doc[8:9]]
    doc.spans[MENTIONS_KEY] = first
    cues = rules.cues(doc)
    assert [rules.decide(sp, cues).status for sp in first] == ["negative", "negative"]
    doc.spans[MENTIONS_KEY] = second
    shared = rules.cues_for_new_mentions(cues)
    verdicts = [rules.decide(sp, shared) for sp in second]
    assert verdicts == [rules.decide(sp, rules.cues(doc)) for sp in second]
    assert [v.status for v in verdicts] == ["positive", "negative"]
