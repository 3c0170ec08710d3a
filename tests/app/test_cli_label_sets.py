"""`cxr label --labels chexpert / --profile / --explain` and CheXpert metrics, end to end.

Reports written for these tests.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from app.cli import main

REPORTS = [
    ("a", "FINDINGS: Heart size is normal. Small left effusion.\nIMPRESSION: ET tube in place."),
    ("b", "IMPRESSION: Possible pneumonia, no edema."),
    ("c", "IMPRESSION: No acute cardiopulmonary process."),
]


def _write_csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "report"])
        w.writerows(rows)
    return path


@pytest.mark.issue(8)
def test_cli_label_chexpert_csv_is_a_drop_in(tmp_path: Path) -> None:
    out = tmp_path / "labels.csv"
    src = _write_csv(tmp_path / "r.csv", REPORTS)
    assert main(["label", str(src), "--labels", "chexpert", "-o", str(out), "-q"]) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    header = next(csv.reader(out.open(encoding="utf-8")))
    assert header[:15] == [
        "Reports", "No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Lesion",
        "Lung Opacity", "Edema", "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax",
        "Pleural Effusion", "Pleural Other", "Fracture", "Support Devices",
    ]  # fmt: skip
    a, b, c = rows
    assert a["Reports"] == REPORTS[0][1]
    assert (a["Cardiomegaly"], a["Pleural Effusion"], a["Support Devices"]) == ("0", "1", "1")
    assert (b["Pneumonia"], b["Edema"], b["No Finding"]) == ("-1", "0", "")
    assert c["No Finding"] == "1" and c["Pneumothorax"] == ""


@pytest.mark.issue(8)
def test_cli_evaluate_labels_chexpert_metrics(tmp_path: Path) -> None:
    src = _write_csv(tmp_path / "r.csv", REPORTS)
    pred = tmp_path / "pred.jsonl"
    assert main(["label", str(src), "--labels", "chexpert", "-o", str(pred), "-q"]) == 0
    gold = tmp_path / "gold.csv"
    gold.write_text(
        "id,No Finding,Cardiomegaly,Pleural Effusion,Pneumonia,Edema,Support Devices\n"
        "a,,0,1,,,1\nb,,,,-1,,\nc,1,,,,,\n"
    )
    scores = tmp_path / "scores.json"
    code = main(
        ["evaluate-labels", str(pred), str(gold), "--labels", "chexpert", "-o", str(scores)]
    )
    assert code == 0
    cx = json.loads(scores.read_text())["chexpert"]
    assert cx["per_label"]["Cardiomegaly"]["negation"]["f1"] == 1.0
    assert cx["per_label"]["Pneumonia"]["uncertainty"]["f1"] == 1.0
    # "no edema" is a negative mention the gold left blank: a mention false positive
    assert cx["per_label"]["Edema"]["mention"]["fp"] == 1
    assert set(cx["macro"]) == {"mention", "negation", "uncertainty", "positive"}


def test_cli_label_explain_jsonl(tmp_path: Path) -> None:
    src = _write_csv(tmp_path / "r.csv", REPORTS[:1])
    out = tmp_path / "labels.jsonl"
    assert main(["label", str(src), "--explain", "-o", str(out), "-q"]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    explanation = row["explanation"]
    assert {m["rule"] for m in explanation["mentions"]} >= {"normal.heart"}
    assert explanation["labels"]["Cardiomegaly"]["status"] == "negative"
    assert explanation["no_finding"]["value"] is False


REPORT_P = "WHY REQUESTED: pneumonia?\nRADIOGRAPHIC OBSERVATIONS: Right pleural collection. No PTX."


def test_cli_label_profile_adds_headers_synonyms_and_abbreviations(tmp_path: Path) -> None:
    profile = tmp_path / "site.yaml"
    profile.write_text(
        "sections:\n  findings: ['radiographic observations']\n"
        "  indication: ['why requested']\n"
        "synonyms:\n  Effusion: ['pleural collection']\n"
        "abbreviations:\n  ptx: pneumothorax\n  ple: pleural effusion\n"
    )
    src = _write_csv(
        tmp_path / "r.csv",
        [
            (
                "p",
                REPORT_P,
            )
        ],
    )
    out = tmp_path / "labels.jsonl"
    assert main(["label", str(src), "--profile", str(profile), "-o", str(out), "-q"]) == 0
    labels = json.loads(out.read_text())["labels"]
    assert labels["Effusion"] == "positive"
    assert labels["Pneumothorax"] == "negative"
    assert labels["Pneumonia"] == "absent"  # the site's indication header is not labelled


def test_cli_label_bad_profile_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "site.yaml"
    profile.write_text("abbreviations:\n  zz: not a phrase of any label\n")
    src = _write_csv(tmp_path / "r.csv", REPORTS[:1])
    assert main(["label", str(src), "--profile", str(profile), "-q"]) == 2
    err = capsys.readouterr().err
    assert "abbreviation 'zz'" in err and err.count("\n") == 1


def test_cli_label_unknown_label_set_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _write_csv(tmp_path / "r.csv", REPORTS[:1])
    assert main(["label", str(src), "--labels", "chexpertt", "-q"]) == 2
    assert "unknown label set 'chexpertt'" in capsys.readouterr().err
