"""`cxr ask` (app/cli/ask_command.py): one question, a questions CSV, and the errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from app.cli import main

REPORT = (
    "FINDINGS: Small left pleural effusion. No pneumothorax. A 2 cm mass in the right upper lobe."
)


def test_cxr_ask_one_question(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["ask", "--report", REPORT, "--question", "Is there a pneumothorax?", "-q"])
    out = json.loads(capsys.readouterr().out)
    assert status == 0
    assert {k: out[k] for k in ("type", "label", "answer", "source")} == {
        "type": "presence",
        "label": "Pneumothorax",
        "answer": "no",
        "source": "report",
    }


def test_cxr_ask_reads_a_word_no_concept_names_in_the_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = "FINDINGS: Several phleboliths over the left upper quadrant. Lungs are clear."
    status = main(["ask", "--report", report, "--question", "Where are the phleboliths?", "-q"])
    out = json.loads(capsys.readouterr().out)
    assert status == 0
    assert (out["label"], out["answer"]) == ("open:phlebolith", ["left", "left upper quadrant"])
    assert "open.report_word" in out["evidence"]["question"]["rules"]


def test_cxr_ask_questions_csv(tmp_path: Path) -> None:
    src = tmp_path / "q.csv"
    with src.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "report", "image", "question"])
        w.writerow(["a", REPORT, "", "Where is the mass?"])
        w.writerow(["b", REPORT, "", "Is the mass larger than 3 cm?"])
        w.writerow(["c", "Possible pleural effusion.", "", "Is there an effusion?"])
        w.writerow(["d", REPORT, "", "What is the diagnosis?"])
    out = tmp_path / "answers.jsonl"
    assert main(["ask", "--questions", str(src), "-o", str(out), "-q"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "b", "c", "d"]
    assert rows[0]["answer"] == ["right", "right upper lobe"]
    assert rows[1]["answer"] == "no"
    assert rows[2]["answer"] == "uncertain"
    assert rows[3]["type"] == "unsupported"


@pytest.mark.parametrize("name", ["report_2023_0417.txt", "notes/r1", "."])
def test_cxr_ask_a_report_path_that_is_not_a_file_is_an_error_not_a_no(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["ask", "--report", name, "--question", "Is there a pneumothorax?"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"--report {name}:" in captured.err


@pytest.mark.parametrize("text", ["", "   "])
def test_cxr_ask_an_empty_report_is_an_error_not_a_folder(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ask", "--report", text, "--question", "Is there a pneumothorax?"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "the report is empty" in captured.err


def test_cxr_ask_reads_a_report_file_and_takes_a_one_word_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "r.txt").write_text("Small left pleural effusion.")
    ask = ["--question", "Is there an effusion?", "-q"]
    assert main(["ask", "--report", str(tmp_path / "r.txt"), *ask]) == 0
    assert json.loads(capsys.readouterr().out)["answer"] == "yes"
    assert main(["ask", "--report", "Normal.", *ask]) == 0
    assert json.loads(capsys.readouterr().out)["answer"] == "no"


def test_cxr_ask_an_empty_or_too_long_report_fails_its_row(tmp_path: Path) -> None:
    src = tmp_path / "q.csv"
    with src.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "report", "question"])
        w.writerow(["blank", "   ", "Is there an effusion?"])
        w.writerow(["long", "No effusion. " * 10_000, "Is there an effusion?"])
        w.writerow(["good", "Small effusion.", "Is there an effusion?"])
    out = tmp_path / "answers.jsonl"
    assert main(["ask", "--questions", str(src), "-o", str(out), "-q"]) == 1
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows["blank"]["message"] == "the report is empty"
    assert rows["long"]["message"].startswith("the report cannot be read: ReportTooLongError")
    assert rows["blank"]["answer"] == rows["long"]["answer"] == "unknown"
    assert rows["good"]["answer"] == "yes" and "message" not in rows["good"]


def test_cxr_ask_refuses_an_unknown_view(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["ask", "--report", REPORT, "--question", "Is there a mass?", "--view", "XX"])
    assert stop.value.code == 2 and "unknown view 'XX'" in capsys.readouterr().err


def test_cxr_ask_image_needs_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "--image", str(tmp_path / "x.png"), "--question", "Is there a mass?"]) == 2
    assert "need a model" in capsys.readouterr().err


@pytest.mark.issue(40)
def test_cxr_ask_flags_every_answer_the_demo_model_read(
    tmp_path: Path, demo_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np
    from PIL import Image

    image = tmp_path / "chest.png"
    Image.fromarray(np.full((96, 80), 128, np.uint8)).save(image)
    argv = ["ask", "--image", str(image), "--model", str(demo_checkpoint), "-q"]
    assert main([*argv, "--question", "Is there an effusion?"]) == 0
    captured = capsys.readouterr()
    answer = json.loads(captured.out)
    assert answer["demo_model"] is True
    assert "DEMO MODEL" in captured.err  # on the terminal too, even with -q
    assert main(["ask", "--report", "No effusion.", "--question", "Is there an effusion?"]) == 0
    assert "demo_model" not in json.loads(capsys.readouterr().out)


@pytest.mark.issue(42)
def test_cxr_ask_questions_checks_image_paths_as_cxr_batch_does(
    tmp_path: Path, demo_checkpoint: Path
) -> None:
    # Before: /dev/zero was read until memory ran out, a FIFO blocked for ever, and any
    # file the user could read was read.
    import os

    folder = tmp_path / "study"
    folder.mkdir()
    fifo = folder / "pipe.dcm"
    os.mkfifo(fifo)
    outside = tmp_path / "secret.png"
    outside.write_bytes(b"not an image")
    (folder / "link.png").symlink_to(outside)
    src = folder / "q.csv"
    with src.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "report", "image", "question"])
        w.writerow(["zero", "", "/dev/zero", "Is there a mass?"])
        w.writerow(["fifo", "", "pipe.dcm", "Is there a mass?"])
        w.writerow(["outside", "", str(outside), "Is there a mass?"])
        w.writerow(["link", "", "link.png", "Is there a mass?"])
        w.writerow(["ok", REPORT, "", "Is there a mass?"])
    out = tmp_path / "answers.jsonl"
    argv = ["ask", "--questions", str(src), "--model", str(demo_checkpoint), "-o", str(out), "-q"]
    assert main(argv) == 1
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert "outside the folder" in rows["zero"]["message"]
    assert "not a regular file" in rows["fifo"]["message"]
    assert "outside the folder" in rows["outside"]["message"]
    assert "outside the folder" in rows["link"]["message"]
    assert rows["ok"]["answer"] == "yes"


@pytest.mark.issue(42)
def test_cxr_ask_questions_one_bad_row_fails_alone(tmp_path: Path) -> None:
    # Before: one cell over csv's 128 KiB limit, or one byte that is not UTF-8, ended the
    # whole run with nothing answered.
    src = tmp_path / "q.csv"
    good = f"a,{REPORT},,Is there a mass?\r\n".encode()
    src.write_bytes(
        b"id,report,image,question\r\n"
        + good
        + b"long," + b"x" * 200_000 + b",,Is there a mass?\r\n"
        + b"latin1,No pneumothorax \xe9,,Is there a pneumothorax?\r\n"
        + good.replace(b"a,", b"b,", 1)
    )  # fmt: skip
    out = tmp_path / "answers.jsonl"
    assert main(["ask", "--questions", str(src), "-o", str(out), "-q"]) == 1
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "long", "latin1", "b"]
    assert rows[0]["answer"] == rows[3]["answer"] == "yes"
    assert "200,000 characters" in rows[1]["message"]
    assert "not valid UTF-8" in rows[2]["message"]


@pytest.mark.issue(40)
def test_cxr_ask_it_is_the_finding_of_the_row_before_about_the_same_study(
    tmp_path: Path,
) -> None:
    src = tmp_path / "q.csv"
    grown = "FINDINGS: A 2 cm nodule in the right upper lobe. Small left effusion, increased."
    with src.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "report", "image", "question"])
        w.writerow(["a", grown, "", "How big is the effusion?"])
        w.writerow(["b", grown, "", "Has it grown?"])  # the effusion, not the nodule
        w.writerow(["c", REPORT, "", "Has it grown?"])  # another study: no referent
    out = tmp_path / "answers.jsonl"
    assert main(["ask", "--questions", str(src), "-o", str(out), "-q"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert (rows[1]["label"], rows[1]["answer"]) == ("Effusion", "yes")
    assert "referent" in rows[1]["evidence"]["question"]["rules"]
    assert rows[2]["type"] == "unsupported"
    assert "several" in rows[2]["message"]  # the mass and the effusion: which one?
