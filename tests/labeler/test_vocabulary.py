"""Concept vocabulary: synonyms, inflections, multi-word forms, exclusions, loader errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from labeler.errors import PatternFileError
from labeler.labelsets import load_label_set
from labeler.schema import Label, ReportLabels
from labeler.vocabulary import load_concepts, load_rules, load_sections, plural_phrase


@pytest.mark.parametrize(
    ("sentence", "label_name"),
    [
        ("Bilateral pleural effusions.", "Effusion"),
        ("Atelectatic changes at the left base.", "Atelectasis"),
        ("Nodular opacities are not nodules but this is a nodular lesion.", "Nodule"),
        ("Enlarged cardiac silhouette.", "Cardiomegaly"),
        ("The heart size is mildly enlarged.", "Cardiomegaly"),
        ("Small hiatal hernia.", "Hernia"),
        ("Small amount of pleural fluid.", "Effusion"),
        ("Right upper lobe mass.", "Mass"),
        ("Interstitial edema.", "Edema"),
        ("Emphysematous changes.", "Emphysema"),
        ("Right apical pneumothorax.", "Pneumothorax"),
        ("Patchy infiltrates.", "Infiltration"),
        ("Left lower lobe consolidation.", "Consolidation"),
        ("Right lower lobe pneumonia.", "Pneumonia"),
        ("Pulmonary fibrosis.", "Fibrosis"),
        ("Apical pleural thickening.", "Pleural_Thickening"),
    ],
)
def test_vocabulary_finds_forms(
    label: Callable[[str], ReportLabels], sentence: str, label_name: str
) -> None:
    assert label(sentence).labels[label_name] == "positive"


@pytest.mark.parametrize(
    ("sentence", "label_name"),
    [
        ("Subcutaneous emphysema in the neck.", "Emphysema"),
        ("Small pericardial effusion.", "Effusion"),
        ("Nodular opacity in the right base.", "Nodule"),
        ("Soft tissue edema of the chest wall.", "Edema"),
        ("No mass effect.", "Mass"),
    ],
)
def test_vocabulary_exclusions(
    label: Callable[[str], ReportLabels], sentence: str, label_name: str
) -> None:
    assert label(sentence).labels[label_name] == "absent"


def test_vocabulary_plurals_are_generated() -> None:
    effusion = next(c for c in load_concepts().concepts if c.label == "Effusion")
    assert "pleural effusions" in effusion.phrases


@pytest.mark.parametrize(
    ("phrase", "plural"),
    [
        ("lung mass", "lung masses"),
        ("abscess", "abscesses"),
        ("nodule", "nodules"),
        ("opacity", "opacities"),
        ("atelectasis", None),
        ("nodules", None),
        ("calcific", None),
    ],
)
def test_a_plural_is_guessed_only_where_it_can_be(phrase: str, plural: str | None) -> None:
    # a word ending in "ss" is singular ("mass"): its plural ("masses") is found too
    assert plural_phrase(phrase) == plural


def test_vocabulary_covers_all_labels() -> None:
    labels = {c.label for c in load_concepts().concepts}
    assert {lab.value for lab in Label} <= labels


def test_vocabulary_missing_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(PatternFileError, match="does not exist"):
        load_concepts(str(tmp_path / "nope.yaml"))
    with pytest.raises(PatternFileError, match="no packaged pattern set"):
        load_rules("rules.v0")


def test_vocabulary_bad_rule_names_the_rule(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n  - id: my.rule\n    status: maybe\n    cue: [no]\n    scope: cue\n")
    with pytest.raises(PatternFileError, match="my.rule.*maybe"):
        load_rules(str(path))


def test_vocabulary_list_breakers_load_and_must_be_words(tmp_path: Path) -> None:
    assert {"mild", "small", "new"} <= load_rules().list_breakers
    path = tmp_path / "rules.yaml"
    rule = "rules:\n  - id: r\n    status: negative\n    cue: [no]\n    scope: head\n"
    path.write_text("list_breakers: [very mild]\n" + rule)
    with pytest.raises(PatternFileError, match="list_breakers"):
        load_rules(str(path))


def test_vocabulary_label_set_needs_every_label_in_its_concepts(tmp_path: Path) -> None:
    concepts = tmp_path / "concepts.yaml"
    concepts.write_text("labels:\n  Atelectasis: {phrases: [atelectasis]}\n")
    labelset = tmp_path / "labels.yaml"
    labelset.write_text(f"labels: [Atelectasis, Edema]\nfiles: {{concepts: {concepts}}}\n")
    with pytest.raises(PatternFileError, match="lacks label"):
        load_label_set(str(labelset))


def test_vocabulary_sections_load() -> None:
    sections = load_sections()
    assert sections.label_sections == {"findings", "impression"}
    assert "indication" in sections.never_label
