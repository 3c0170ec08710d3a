"""`cxr label` and `cxr evaluate-labels` end to end (reports written for these tests)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main

REPORTS = [
    ("r1", "FINDINGS: Small left pleural effusion. No pneumothorax.\nIMPRESSION: Left effusion."),
    ("r2", "INDICATION: rule out pneumonia\nFINDINGS: The lungs are clear."),
    ("r3", "IMPRESSION: Possible right lower lobe pneumonia. Mild cardiomegaly."),
]


def _write_csv(
    path: Path, rows: list[tuple[str, str]], header: tuple[str, str] = ("id", "report")
) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def _read_jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_cli_label_csv_to_jsonl(tmp_path: Path) -> None:
    out = tmp_path / "labels.jsonl"
    assert main(["label", str(_write_csv(tmp_path / "r.csv", REPORTS)), "-o", str(out), "-q"]) == 0
    rows = _read_jsonl(out)
    assert [r["id"] for r in rows] == ["r1", "r2", "r3"]
    assert rows[0]["labels"]["Effusion"] == "positive"  # type: ignore[index]
    assert rows[0]["labels"]["Pneumothorax"] == "negative"  # type: ignore[index]
    assert rows[1]["no_finding"] is True
    assert rows[1]["labels"]["Pneumonia"] == "absent"  # type: ignore[index]
    assert rows[2]["labels"]["Pneumonia"] == "uncertain"  # type: ignore[index]


def test_cli_label_csv_format_chexpert(tmp_path: Path) -> None:
    out = tmp_path / "labels.csv"
    src = _write_csv(tmp_path / "r.csv", REPORTS)
    assert main(["label", str(src), "-o", str(out), "-q", "--labels", "chestxray8"]) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert list(rows[0]) == [
        "id", "Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule",
        "Pneumonia", "Pneumothorax", "No Finding", "error",
    ]  # fmt: skip
    assert (rows[0]["Effusion"], rows[0]["Pneumothorax"], rows[0]["Mass"]) == ("1", "0", "")
    assert rows[1]["No Finding"] == "1"
    assert (rows[2]["Pneumonia"], rows[2]["Cardiomegaly"]) == ("-1", "1")


def test_cli_label_custom_columns(tmp_path: Path) -> None:
    src = _write_csv(tmp_path / "r.csv", REPORTS, header=("study", "text"))
    out = tmp_path / "o.jsonl"
    args = [
        "label",
        str(src),
        "-o",
        str(out),
        "-q",
        "--id-column",
        "study",
        "--text-column",
        "text",
    ]
    assert main(args) == 0
    assert [r["id"] for r in _read_jsonl(out)] == ["r1", "r2", "r3"]


def test_cli_label_missing_column_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _write_csv(tmp_path / "r.csv", REPORTS, header=("study", "text"))
    assert main(["label", str(src), "-o", str(tmp_path / "o.jsonl"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "no column 'id'" in err and "--id-column" in err


@pytest.mark.parametrize("flag", ["-o", "--rejects"])
def test_cli_label_refuses_to_write_over_its_input(
    flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _write_csv(tmp_path / "r.csv", REPORTS)
    before = src.read_bytes()
    out = [] if flag == "-o" else ["-o", str(tmp_path / "o.jsonl")]
    assert main(["label", str(src), flag, str(src), *out, "-q"]) == 2
    assert src.read_bytes() == before
    assert "is the input" in capsys.readouterr().err


def test_cli_label_a_bad_input_leaves_an_existing_output_alone(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    out.write_text('{"id": "kept"}\n')
    src = _write_csv(tmp_path / "r.csv", REPORTS, header=("study", "text"))
    assert main(["label", str(src), "-o", str(out), "-q"]) == 2
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert main(["label", str(empty), "-o", str(out), "-q"]) == 2
    assert out.read_text() == '{"id": "kept"}\n'


def test_cli_label_never_echoes_a_report_read_as_a_csv_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "report.txt"
    src.write_text("FINDINGS: Patient Quenford Xaltrim has a small effusion.\n")
    assert main(["label", str(src), "-q"]) == 2
    err = capsys.readouterr().err
    assert "Xaltrim" not in err and "not a CSV header" in err


def test_cli_label_jsonl_with_a_byte_order_mark(tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    lines = "\n".join(json.dumps({"id": i, "report": t}) for i, t in REPORTS)
    src.write_bytes(b"\xef\xbb\xbf" + lines.encode())
    out = tmp_path / "o.jsonl"
    assert main(["label", str(src), "-o", str(out), "-q"]) == 0
    assert [r.get("error") for r in _read_jsonl(out)] == [None, None, None]


@pytest.mark.parametrize("kind", ["csv", "jsonl", "folder"])
def test_cli_label_reads_a_windows_1252_export(kind: str, tmp_path: Path) -> None:
    # "×" and "°" in cp1252 are not UTF-8: read as UTF-8 they became U+FFFD
    text = "FINDINGS: A 2 × 3 cm mass in the right upper lobe. Rotated 10°."
    if kind == "csv":
        src = tmp_path / "r.csv"
        src.write_bytes(f"id,report\nr1,{text}\n".encode("cp1252"))
    elif kind == "jsonl":
        src = tmp_path / "r.jsonl"
        line = json.dumps({"id": "r1", "report": text}, ensure_ascii=False)
        src.write_bytes(line.encode("cp1252"))
    else:
        src = tmp_path / "reports"
        src.mkdir()
        (src / "r1.txt").write_bytes(text.encode("cp1252"))
    out = tmp_path / "o.jsonl"
    assert main(["label", str(src), "-o", str(out), "-q"]) == 0
    [row] = _read_jsonl(out)
    assert row["labels"]["Mass"] == "positive"  # type: ignore[index]
    [mention] = [m for m in row["mentions"] if m["label"] == "Mass"]  # type: ignore[union-attr]
    assert "2 × 3 cm" in mention["sentence"] and "\ufffd" not in json.dumps(row)


def test_cli_label_csv_output_runs_no_formula(tmp_path: Path) -> None:
    src = _write_csv(tmp_path / "r.csv", [('=HYPERLINK("http://x")', "Small effusion.")])
    out = tmp_path / "o.csv"
    assert main(["label", str(src), "-o", str(out), "--labels", "chexpert", "-q"]) == 0
    [row] = list(csv.DictReader(out.open(encoding="utf-8")))
    assert row["id"] == '\'=HYPERLINK("http://x")'
    assert "-1" in row.values() or "1" in row.values()  # label codes stay as they are


def test_cli_label_folder_without_reports_or_not_a_folder_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    _write_csv(folder / "reports.csv", REPORTS)
    assert main(["label", str(folder), "-q"]) == 2
    assert "no .txt report file" in capsys.readouterr().err
    (folder / "R1.TXT").write_text("Small left pleural effusion.")  # a Windows export
    out = tmp_path / "o.jsonl"
    assert main(["label", str(folder), "-o", str(out), "-q"]) == 0
    assert [r["id"] for r in _read_jsonl(out)] == ["R1"]
    csv_file = folder / "reports.csv"
    assert main(["label", str(csv_file), "--input-format", "folder", "-q"]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_cli_label_an_unclosed_quote_is_an_error_not_merged_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "r.csv"
    src.write_text('id,report\n1,"Small effusion.\n2,"No pneumothorax."\n3,"Cardiomegaly."\n')
    out = tmp_path / "o.jsonl"
    assert main(["label", str(src), "-o", str(out), "-q"]) == 2
    assert "line 3: not valid CSV" in capsys.readouterr().err and not out.exists()
    # a quoted report over several lines, and quotes inside an unquoted one, stay valid
    src.write_text('id,report\n1,"Small\neffusion."\n2,He said "no" effusion\n')
    assert main(["label", str(src), "-o", str(out), "-q"]) == 0
    assert [r["id"] for r in _read_jsonl(out)] == ["1", "2"]


@pytest.mark.parametrize(
    ("data", "extra"),
    [
        (b"id,report\nr1,Small effusion.\n", []),
        (b'{"id": "r1", "report": "Small effusion."}\n', []),
        (b"id,report\nr1,Small effusion.\n", ["--input-format", "csv"]),
    ],
)
def test_cli_label_reads_standard_input(
    data: bytes, extra: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    out = tmp_path / "o.jsonl"
    assert main(["label", "-", "-o", str(out), "-q", *extra]) == 0
    [row] = _read_jsonl(out)
    assert row["id"] == "r1" and row["labels"]["Effusion"] == "positive"  # type: ignore[index]


def test_cli_label_jsonl_input(tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    src.write_text(
        "\n".join(json.dumps({"id": i, "report": t}) for i, t in REPORTS) + "\n", encoding="utf-8"
    )
    out = tmp_path / "o.jsonl"
    assert main(["label", str(src), "-o", str(out), "-q"]) == 0
    assert [r["id"] for r in _read_jsonl(out)] == ["r1", "r2", "r3"]


def test_cli_label_folder_of_txt(tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text(REPORTS[0][1], encoding="utf-8")
    (folder / "sub" / "b.txt").write_text(REPORTS[2][1], encoding="utf-8")
    (folder / "ignored.md").write_text("Pneumothorax.", encoding="utf-8")
    out = tmp_path / "o.jsonl"
    assert main(["label", str(folder), "-o", str(out), "-q"]) == 0
    rows = _read_jsonl(out)
    assert [r["id"] for r in rows] == ["a", "sub/b"]
    assert rows[1]["labels"]["Cardiomegaly"] == "positive"  # type: ignore[index]


def test_cli_label_bad_rows_error_without_losing_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "r.jsonl"
    src.write_text(
        json.dumps({"id": "ok1", "report": "Small effusion."}) + "\n"
        + json.dumps({"id": "empty", "report": "   "}) + "\n"
        + json.dumps({"id": "number", "report": 12}) + "\n"
        + "{not json\n"
        + json.dumps({"id": "ok2", "report": "No pneumothorax."}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    out, rejects = tmp_path / "o.jsonl", tmp_path / "rejects.csv"
    status = main(["label", str(src), "-o", str(out), "-q", "--rejects", str(rejects)])
    assert status == 1
    rows = _read_jsonl(out)
    assert [r["id"] for r in rows] == ["ok1", "empty", "number", "line4", "ok2"]
    assert [("error" in r) for r in rows] == [False, True, True, True, False]
    assert "EmptyReportError" in str(rows[1]["error"])
    assert "NotTextError" in str(rows[2]["error"]) and "int" in str(rows[2]["error"])
    assert "not valid JSON" in str(rows[3]["error"])
    assert rows[4]["labels"]["Pneumothorax"] == "negative"  # type: ignore[index]
    rejected = list(csv.DictReader(rejects.open(encoding="utf-8")))
    assert [r["id"] for r in rejected] == ["empty", "number", "line4"]
    assert "2 reports labelled, 3 failed" in capsys.readouterr().err


def test_cli_label_strict_stops_at_first_bad_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _write_csv(tmp_path / "r.csv", [("a", "Effusion."), ("b", "")])
    assert main(["label", str(src), "-o", str(tmp_path / "o.jsonl"), "-q", "--strict"]) == 2
    err = capsys.readouterr().err
    assert "report b: report is empty" in err


def test_cli_label_missing_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["label", str(tmp_path / "nope.csv"), "-q"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_cli_label_bad_pattern_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "rules.yaml"
    bad.write_text("rules: 3\n")
    src = _write_csv(tmp_path / "r.csv", REPORTS)
    assert main(["label", str(src), "-q", "--rules", str(bad)]) == 2
    assert "rules" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_label_workers_keep_order_and_results(tmp_path: Path) -> None:
    rows = [(f"r{i}", REPORTS[i % 3][1]) for i in range(40)] + [("bad", "")]
    src = _write_csv(tmp_path / "r.csv", rows)
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    assert main(["label", str(src), "-o", str(one), "-q", "--batch-size", "4"]) == 1
    args = ["label", str(src), "-o", str(two), "-q", "--workers", "2", "--batch-size", "4"]
    assert main(args) == 1
    assert one.read_text() == two.read_text()


def test_cli_label_does_not_import_torch_or_web_stack(tmp_path: Path) -> None:
    src = _write_csv(tmp_path / "r.csv", REPORTS[:1])
    code = (
        "import sys\n"
        "from app.cli import main\n"
        f"rc = main(['label', {str(src)!r}, '-o', {str(tmp_path / 'o.jsonl')!r}, '-q'])\n"
        "heavy = ['torch', 'torchvision', 'fastapi', 'starlette', 'sqlalchemy',"
        " 'pydantic_settings', 'uvicorn', 'cv2']\n"
        "loaded = [m for m in heavy if m in sys.modules]\n"
        "print(','.join(loaded))\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"cxr label imported: {proc.stdout.strip()}"


# --- evaluate-labels ----------------------------------------------------------------------


def _predictions(tmp_path: Path) -> Path:
    """`cxr label` JSONL of REPORTS."""
    pred = tmp_path / "pred.jsonl"
    assert main(["label", str(_write_csv(tmp_path / "r.csv", REPORTS)), "-o", str(pred), "-q"]) == 0
    return pred


def test_cli_evaluate_labels_jsonl_against_gold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pred = _predictions(tmp_path)
    gold = tmp_path / "gold.csv"
    gold.write_text(
        "id,Effusion,Pneumonia,Cardiomegaly,Hernia,No Finding\n"
        "r1,1,0,0,0,0\n"
        "r2,0,0,0,0,1\n"
        "r3,0,1,1,,0\n",
        encoding="utf-8",
    )
    scores = tmp_path / "scores.json"
    args = ["evaluate-labels", str(pred), str(gold), "--ignore", "Hernia", "-o", str(scores)]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "micro" in table and "Effusion" in table
    data = json.loads(scores.read_text())
    per = {s["label"]: s for s in data["labels"]}
    assert set(per) == {"Effusion", "Pneumonia", "Cardiomegaly"}
    assert (per["Effusion"]["tp"], per["Effusion"]["fp"], per["Effusion"]["fn"]) == (1, 0, 0)
    # uncertain Pneumonia counts as not positive by default
    assert per["Pneumonia"]["fn"] == 1
    assert data["micro"]["tp"] == 2
    assert {s["label"] for s in data["extra"]} == {"Hernia", "No Finding"}
    # issue 20: where it disagrees, and the rules behind the errors
    assert "Confusion per label" in table and "rule ids most often behind an error" in table
    assert data["disagreements"]["confusion"]["Pneumonia"]["positive->negative"] == 1
    assert data["disagreements"]["error_rules"]["unc.hedge_adjective"] == 1

    assert main([*args, "--uncertain", "positive"]) == 0
    per = {s["label"]: s for s in json.loads(scores.read_text())["labels"]}
    assert per["Pneumonia"]["tp"] == 1


def test_cli_evaluate_labels_refuses_repeated_ids_and_disjoint_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pred = _predictions(tmp_path)
    gold = tmp_path / "gold.csv"
    gold.write_text("id,Effusion\nr1,1\nr2,0\nr1,0\n", encoding="utf-8")
    assert main(["evaluate-labels", str(pred), str(gold)]) == 2
    assert "line 4 repeats the id" in capsys.readouterr().err
    gold.write_text("id,Effusion\nx1,1\nx2,0\n", encoding="utf-8")
    assert main(["evaluate-labels", str(pred), str(gold)]) == 2
    assert "no report id of" in capsys.readouterr().err
    gold.write_bytes("id,Effusion\nr\xe9,1\n".encode("latin-1"))
    assert main(["evaluate-labels", str(pred), str(gold)]) == 2
    assert f"cannot read {gold}" in capsys.readouterr().err


def test_cli_evaluate_labels_a_failed_report_is_without_prediction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pred = tmp_path / "pred.jsonl"
    rows = [*REPORTS, ("r4", "")]  # r4 fails: empty report
    assert main(["label", str(_write_csv(tmp_path / "r.csv", rows)), "-o", str(pred), "-q"]) == 1
    gold = tmp_path / "gold.csv"
    gold.write_text("id,Effusion\nr1,1\nr2,0\nr3,0\nr4,0\n", encoding="utf-8")
    assert main(["evaluate-labels", str(pred), str(gold)]) == 0
    assert "4 gold reports, 1 without prediction" in capsys.readouterr().out


def test_cli_evaluate_labels_csv_predictions(tmp_path: Path) -> None:
    pred, gold = tmp_path / "pred.csv", tmp_path / "gold.csv"
    pred.write_text("id,Effusion,Edema\na,1,-1\nb,,0\n", encoding="utf-8")
    gold.write_text("study,Effusion,Edema\na,1,1\nb,1,0\n", encoding="utf-8")
    out = tmp_path / "s.json"
    assert (
        main(["evaluate-labels", str(pred), str(gold), "--id-column", "study", "-o", str(out)]) == 0
    )
    micro = json.loads(out.read_text())["micro"]
    assert (micro["tp"], micro["fp"], micro["fn"]) == (1, 0, 2)


def test_cli_evaluate_labels_bad_value_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pred, gold = tmp_path / "pred.csv", tmp_path / "gold.csv"
    pred.write_text("id,Effusion\na,1\n", encoding="utf-8")
    gold.write_text("id,Effusion\na,yes\n", encoding="utf-8")
    assert main(["evaluate-labels", str(pred), str(gold)]) == 2
    err = capsys.readouterr().err
    assert "'yes'" in err and "Effusion" in err


def test_cli_label_edited_vocabulary(tmp_path: Path) -> None:
    import labeler

    packaged = Path(labeler.__file__).parent / "patterns" / "concepts.v1.yaml"
    edited = tmp_path / "concepts.yaml"
    text = packaged.read_text(encoding="utf-8")
    # treat calcified nodules as granulomas: exclude them from Nodule
    marker = 'exclude: ["nodular opacity",'
    assert marker in text
    edited.write_text(text.replace(marker, 'exclude: ["calcified nodule", "nodular opacity",'))
    src = _write_csv(tmp_path / "r.csv", [("a", "Calcified nodule in the right upper lobe.")])
    default, custom = tmp_path / "default.jsonl", tmp_path / "custom.jsonl"
    assert main(["label", str(src), "-o", str(default), "-q"]) == 0
    assert main(["label", str(src), "-o", str(custom), "-q", "--concepts", str(edited)]) == 0
    assert _read_jsonl(default)[0]["labels"]["Nodule"] == "positive"  # type: ignore[index]
    assert _read_jsonl(custom)[0]["labels"]["Nodule"] == "absent"  # type: ignore[index]


@pytest.mark.issue(40)
def test_cli_label_findings(tmp_path: Path) -> None:
    out = tmp_path / "labels.jsonl"
    src = _write_csv(tmp_path / "r.csv", REPORTS)
    assert main(["label", str(src), "-o", str(out), "-q", "--findings"]) == 0
    rows = _read_jsonl(out)
    effusion = [f for f in rows[0]["report_findings"] if f["concept"] == "pleural_effusion"]  # type: ignore[union-attr]
    assert effusion and effusion[0]["status"] == "positive"
    assert rows[1]["normal"] is True and rows[0]["normal"] is False
    plain = tmp_path / "plain.jsonl"
    assert main(["label", str(src), "-o", str(plain), "-q"]) == 0
    assert [r["labels"] for r in _read_jsonl(plain)] == [r["labels"] for r in rows]


def test_cli_label_findings_refuses_csv_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _write_csv(tmp_path / "r.csv", REPORTS)
    assert main(["label", str(src), "-o", str(tmp_path / "out.csv"), "--findings"]) == 2
    assert "--findings writes JSON Lines" in capsys.readouterr().err
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.issue(40)
def test_cli_label_findings_refuses_a_missing_or_bad_lexicon_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _write_csv(tmp_path / "r.csv", REPORTS)
    out = tmp_path / "out.jsonl"
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nconcepts: [{id: X}]\n")  # sloppy: an id that is not snake_case
    cut = tmp_path / "cut.yaml"
    cut.write_text("version: 1\nconcepts:\n  - id: picc\n    phrases: [pi")  # truncated YAML
    for lexicon in (tmp_path / "missing.yaml", bad, cut):
        argv = ["label", str(src), "-o", str(out), "--findings", "--lexicon", str(lexicon)]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("cxr label: error:") and len(err.splitlines()) == 1
        assert not out.exists()
