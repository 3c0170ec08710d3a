"""What `cxr` tells the terminal: the summary line, the DEMO notice, "did you mean"."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from service_fixtures import dx_bytes

from app.cli import main
from models.notices import DEMO_NOTICE

REPORTS = [
    ("r1", "FINDINGS: Small left pleural effusion. No pneumothorax."),
    ("r2", "FINDINGS: The lungs are clear."),
    ("r3", ""),  # an empty report fails
]


def _write_csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "report"])
        writer.writerows(rows)
    return path


def _png(path: Path) -> Path:
    y, x = np.mgrid[0:96, 0:80]
    Image.fromarray(((x + y) % 256).astype(np.uint8)).save(path)
    return path


# --- the summary line ---------------------------------------------------------------------


def test_cli_label_summary_counts_failures_output_and_seconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, out = _write_csv(tmp_path / "r.csv", REPORTS), tmp_path / "labels.jsonl"
    rejects = tmp_path / "rejects.csv"
    args = ["label", str(src), "-o", str(out), "--rejects", str(rejects), "-q", "--workers", "1"]
    assert main(args) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    # -q silences the progress bar, not the summary: it is stderr's only line.
    assert re.fullmatch(
        rf"cxr label: 2 reports labelled, 1 failed \(their rows carry the error; also in "
        rf"{re.escape(str(rejects))}\) -> {re.escape(str(out))} in \d+\.\d s\n",
        captured.err,
    ), captured.err


def test_cli_label_to_stdout_keeps_stdout_for_the_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _write_csv(tmp_path / "r.csv", REPORTS[:1])
    assert main(["label", str(src), "-q", "--workers", "1"]) == 0
    captured = capsys.readouterr()
    assert [json.loads(line)["id"] for line in captured.out.splitlines()] == ["r1"]
    assert re.fullmatch(r"cxr label: 1 report labelled -> stdout in \d+\.\d s\n", captured.err)


def test_cli_label_help_says_quiet_keeps_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["label", "--help"])
    assert "one-line summary still" in " ".join(capsys.readouterr().out.split())


def test_cli_predict_prints_demo_notice_and_summary(
    demo_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    image = _png(tmp_path / "chest.png")
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image" * 20)
    out = tmp_path / "out"
    args = ["predict", "--model", str(demo_checkpoint), str(image), str(broken), "-o", str(out),
            "--overlays", "none", "--device", "cpu"]  # fmt: skip
    assert main(args) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.splitlines()
    assert err[0] == f"cxr predict: {DEMO_NOTICE}"
    assert any(line.startswith(f"{image}: ") for line in err)
    assert re.fullmatch(
        r"cxr predict: 2 files: 1 done, 1 failed \(their JSON holds the error\); DEMO model "
        rf"-> {re.escape(str(out))} in \d+\.\d s",
        err[-1],
    ), err[-1]


def test_cli_predict_without_demo_model_prints_no_notice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from models.checkpoint import build_demo_checkpoint

    model = build_demo_checkpoint(
        tmp_path / "plain.pt", labels=["Effusion", "Mass"], image_size=64, demo=False
    )
    out = tmp_path / "out"
    args = ["predict", "--model", str(model), str(_png(tmp_path / "a.png")), "-o", str(out),
            "--overlays", "none", "--device", "cpu"]  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "DEMO" not in err
    assert re.fullmatch(
        rf"cxr predict: 1 file: 1 done, 0 failed -> {re.escape(str(out))} in \d+\.\d s",
        err.splitlines()[-1],
    )


def test_cli_batch_prints_demo_notice_and_timed_summary(
    demo_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / "export"
    export.mkdir()
    (export / "IM0001").write_bytes(dx_bytes())
    out = tmp_path / "out.jsonl"
    args = ["batch", str(export), "-o", str(out), "--model", str(demo_checkpoint),
            "--device", "cpu"]  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err.splitlines()
    assert f"cxr batch: {DEMO_NOTICE}" in err
    summary = err[-1]
    assert summary.startswith("cxr batch: 1 file: 1 done, 0 skipped, 0 failed; 1 images")
    assert "; DEMO model;" in summary and f"; wrote {out};" in summary
    assert re.search(r"; \d+\.\d s$", summary), summary


# --- "did you mean" -----------------------------------------------------------------------


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2  # as argparse
    return capsys.readouterr().err.splitlines()


def test_mistyped_option_suggests_the_subcommands_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _usage_error(["label", "x.csv", "--lables", "chexpert"], capsys)
    assert err[0].startswith("usage: cxr label ")  # the subcommand's usage, not cxr's
    assert err[-1] == "cxr label: error: unrecognized argument --lables; did you mean --labels?"
    err = _usage_error(["predict", "a.png", "--model", "m.pt", "-o", "o", "--modle=x"], capsys)
    assert err[-1] == "cxr predict: error: unrecognized argument --modle; did you mean --model?"


def test_unknown_option_without_a_close_match_points_to_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _usage_error(["batch", "dir", "-o", "o.jsonl", "--zzzz"], capsys)
    assert err[-1] == "cxr batch: error: unrecognized argument --zzzz (see cxr batch --help)"
    err = _usage_error(["label", "x.csv", "surplus"], capsys)
    assert err[-1] == "cxr label: error: unrecognized arguments: surplus"


def test_mistyped_subcommand_and_choice_are_suggested(capsys: pytest.CaptureFixture[str]) -> None:
    assert _usage_error(["lable"], capsys)[-1] == (
        "cxr: error: unknown command 'lable'; did you mean label?"
    )
    assert _usage_error(["db", "upgrad"], capsys)[-1] == (
        "cxr db: error: unknown command 'upgrad'; did you mean upgrade?"
    )
    assert _usage_error(["label", "x.csv", "--format", "jsnl"], capsys)[-1] == (
        "cxr label: error: argument --format: invalid choice 'jsnl'; did you mean jsonl?"
    )
    err = _usage_error(["xyzzy"], capsys)[-1]
    assert err.startswith("cxr: error: unknown command 'xyzzy' (choose from label, ")
