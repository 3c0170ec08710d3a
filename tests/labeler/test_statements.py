"""Explicit statements, predicate and template forms (issue 8 item 2), label sets as data.

Sentences are written for these tests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from labeler.config import LabelerConfig
from labeler.errors import PatternFileError
from labeler.explain import explain
from labeler.labelsets import load_label_set
from labeler.pipeline import build_nlp, label_report
from labeler.schema import Mention, ReportLabels
from labeler.vocabulary import load_concepts, load_profile, load_statements


@pytest.mark.issue(8)
@pytest.mark.parametrize(
    "sentence",
    [
        "Heart size is normal.",
        "The heart is normal in size.",
        "Normal cardiac silhouette.",
        "Normal heart size.",
        "Normal-sized heart.",
        "The cardiac silhouette is within normal limits.",
        "Heart size is at the upper limits of normal.",
        "Cardiomediastinal silhouette is unremarkable.",
        "The heart size and mediastinal contours are normal.",
        "Heart: Normal.",
        "HEART SIZE IS NORMAL.",
        "heart size normal",
    ],
)
def test_statement_normal_heart_is_a_negative_mention(
    mention_of: Callable[[str, str], Mention], sentence: str
) -> None:
    m = mention_of(sentence, "Cardiomegaly")
    assert (m.status, m.rule) == ("negative", "normal.heart")


@pytest.mark.parametrize(
    "sentence",
    [
        "Heart size is not normal.",
        "The heart is enlarged and the lungs are normal.",
        "Normal lungs.",
    ],
)
def test_statement_normal_heart_spares(label: Callable[[str], ReportLabels], sentence: str) -> None:
    assert all(m.rule != "normal.heart" for m in label(sentence).mentions)


@pytest.mark.issue(8)
@pytest.mark.parametrize(
    ("sentence", "label_name", "status"),
    [
        ("The heart is enlarged.", "Cardiomegaly", "positive"),
        ("Heart: Enlarged.", "Cardiomegaly", "positive"),
        ("Heart: Not enlarged.", "Cardiomegaly", "negative"),
        ("A small effusion is seen on the left.", "Effusion", "positive"),
        ("Pneumothorax is not seen.", "Pneumothorax", "negative"),
        ("Pneumothorax is not identified.", "Pneumothorax", "negative"),
        ("No pneumothorax is identified.", "Pneumothorax", "negative"),
        ("Pneumothorax: none.", "Pneumothorax", "negative"),
        ("Pleura: No effusion or pneumothorax.", "Effusion", "negative"),
        ("Pleura: No effusion or pneumothorax.", "Pneumothorax", "negative"),
        ("Effusion: small, left.", "Effusion", "positive"),
    ],
)
def test_predicate_and_template_forms(
    label: Callable[[str], ReportLabels], sentence: str, label_name: str, status: str
) -> None:
    assert label(sentence).labels[label_name] == status


def test_statements_which_labels_a_statement_refutes_is_data(tmp_path: Path) -> None:
    path = tmp_path / "statements.yaml"
    path.write_text(
        "statements:\n"
        "  - id: normal.lungs\n    status: negative\n    labels: [Edema, Infiltration]\n"
        "    patterns: [[{LOWER: lungs}, {LOWER: are}, {LOWER: normal}]]\n"
    )
    config = LabelerConfig(statements=str(path))
    result = label_report("The lungs are normal.", nlp=build_nlp(config), config=config)
    assert result.labels["Edema"] == result.labels["Infiltration"] == "negative"
    assert {m.rule for m in result.mentions} == {"normal.lungs"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("statements: {}\n", "statements"),
        ("statements:\n  - id: x\n    labels: []\n    patterns: []\n", "labels"),
        ("statements:\n  - id: x\n    status: maybe\n    labels: [Edema]\n", "status"),
    ],
)
def test_statements_file_errors_name_the_problem(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(body)
    with pytest.raises(PatternFileError, match=message):
        load_statements(str(path))


def test_label_sets_are_data() -> None:
    cx14 = load_label_set("chestxray14")
    assert len(cx14.labels) == 14 and cx14.concepts == "concepts.v1"
    assert load_label_set("chestxray8").labels == cx14.labels[:8]
    labeler = load_label_set("chexpert-labeler")  # the CheXpert labeler's own conventions
    assert labeler.no_finding_ignores == {"Support Devices"}
    assert labeler.rules == "chexpert.rules.v1"
    assert labeler.certainty_profile == "chexpert-labeler"
    cxp = load_label_set("chexpert")  # what radiologists label: devices leave No Finding alone
    assert cxp.no_finding_ignores == {"Support Devices"} and cxp.certainty_profile == "radiologist"
    assert not cxp.absent_when  # a removed device is a negative mention
    with pytest.raises(PatternFileError, match="unknown label set"):
        load_label_set("nih")


def test_config_takes_files_from_the_label_set() -> None:
    config = LabelerConfig(label_set="chexpert-labeler")
    assert (config.concepts, config.statements) == (
        "chexpert.concepts.v1",
        "chexpert.statements.v1",
    )
    config = LabelerConfig(label_set="chexpert")
    assert (config.concepts, config.statements, config.certainty) == (
        "chexpert.concepts.v2",
        "chexpert.statements.v2",
        "radiologist",
    )
    assert LabelerConfig(label_set="chexpert", rules="rules.v1").rules == "rules.v1"


def test_profile_loads_and_rejects_unknown_labels(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("synonyms:\n  Effusions: [fluid]\n")
    with pytest.raises(PatternFileError, match="unknown label"):
        load_concepts("concepts.v1", str(path))
    path2 = tmp_path / "p2.yaml"
    path2.write_text("sections:\n  findings: [observations]\nabbreviations:\n  PTX: Pneumothorax\n")
    assert load_profile(str(path2)).abbreviations == {"ptx": "pneumothorax"}


def test_explain_says_why_each_label(label: Callable[[str], ReportLabels]) -> None:
    result = label("No effusion. Small effusion on the right. Possible pneumonia.")
    out = explain(result, load_label_set("chestxray14"))
    effusion = out["labels"]["Effusion"]
    assert effusion["status"] == "positive"
    assert "1 positive" in effusion["why"] and "1 negative" in effusion["why"]
    assert [out["mentions"][i]["label"] for i in effusion["mentions"]] == ["Effusion"] * 2
    assert any("neg.det" in m["why"] for m in out["mentions"])
    assert out["no_finding"]["value"] is False
