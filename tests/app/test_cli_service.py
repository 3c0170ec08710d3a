"""`cxr batch`, `cxr serve` (refusals), `cxr db upgrade`, `cxr apikey`."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from service_fixtures import EXPECTED_EXPORT, PATIENT_ID, build_export, write_reports_csv

from app.cli import main
from app.security import hash_api_key


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return build_export(tmp_path / "export")


def test_cli_batch_writes_one_line_per_file_and_fails_on_errors(
    export: Path, tmp_path: Path, demo_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    reports = write_reports_csv(tmp_path / "reports.csv")
    status = main(
        ["batch", str(export), "-o", str(out), "--reports", str(reports),
         "--model", str(demo_checkpoint), "--device", "cpu"]
    )  # fmt: skip
    assert status == 1  # the truncated DICOM and the garbage file failed
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["path"] for line in lines) == sorted(EXPECTED_EXPORT)
    by_path = {line["path"]: line for line in lines}
    for path, (kind, state) in EXPECTED_EXPORT.items():
        assert (by_path[path]["kind"], by_path[path]["state"]) == (kind, state), path
    image = by_path["PAT2/STUDY2/image.dcm"]
    assert image["report"]["positive"] == ["Effusion"]
    assert len(image["prediction"]["probabilities"]) == 14 and image["demo"] is True
    rejects = [json.loads(x) for x in (tmp_path / "out.rejects.jsonl").read_text().splitlines()]
    assert {r["path"] for r in rejects} == {"PAT2/STUDY2/broken.dcm", "PAT2/STUDY2/GARBAGE01"}
    assert all(r["error"] for r in rejects)
    err = capsys.readouterr().err
    assert "10 files: 4 done, 4 skipped, 2 failed" in err
    assert "1 CSV reports matched no image" in err and "DEMO model" in err


@pytest.mark.issue(19)
def test_cli_batch_captures_a_chunks_cuda_graph_before_reading(
    export: Path, tmp_path: Path, demo_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from models.predict import Predictor

    asked: list[list[int]] = []
    real = Predictor.capture_graphs

    def capture(self: Predictor, sizes: Any) -> list[int]:
        asked.append(list(sizes))
        return real(self, sizes)  # nothing off CUDA

    monkeypatch.setattr(Predictor, "capture_graphs", capture)
    args = ["batch", str(export), "-o", str(tmp_path / "out.jsonl"), "--model",
            str(demo_checkpoint), "--device", "cpu", "--chunk-size", "4"]  # fmt: skip
    assert main(args) == 1  # the export's two broken files
    assert [4] in asked


@pytest.mark.issue(19)
@pytest.mark.parametrize(("flag", "env", "expected"), [
    ([], None, "float32"),
    ([], "bfloat16", "bfloat16"),
    (["--precision", "float32"], "bfloat16", "float32"),
])  # fmt: skip
def test_cli_batch_runs_its_model_in_the_precision_asked(
    export: Path,
    tmp_path: Path,
    demo_checkpoint: Path,
    monkeypatch: pytest.MonkeyPatch,
    flag: list[str],
    env: str | None,
    expected: str,
) -> None:
    from models.predict import Predictor

    seen: list[str] = []
    real = Predictor.predict

    def predict(self: Predictor, *args: Any, **kwargs: Any) -> Any:
        seen.append(self.precision)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Predictor, "predict", predict)
    if env is None:
        monkeypatch.delenv("CXR_PRECISION", raising=False)
    else:
        monkeypatch.setenv("CXR_PRECISION", env)
    args = ["batch", str(export), "-o", str(tmp_path / "out.jsonl"), "--model",
            str(demo_checkpoint), "--device", "cpu", "--workers", "0", *flag]  # fmt: skip
    assert main(args) == 1  # the export's two broken files
    assert seen and set(seen) == {expected}


def test_cli_batch_writes_nih_style_training_set(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, dataset = tmp_path / "out.jsonl", tmp_path / "dataset"
    reports = write_reports_csv(tmp_path / "reports.csv")
    status = main(
        ["batch", str(export), "-o", str(out), "--reports", str(reports),
         "--dataset", str(dataset), "--dataset-size", "64"]
    )  # fmt: skip
    assert status == 1
    rows = list(csv.DictReader((dataset / "Data_Entry.csv").open()))
    assert len(rows) == 3  # the three readable images that have a report
    labels = sorted(r["Finding Labels"] for r in rows)
    assert labels == ["Cardiomegaly", "Cardiomegaly", "Effusion"]
    assert all(PATIENT_ID not in r["Patient ID"] and len(r["Patient ID"]) == 12 for r in rows)
    # One patient across studies: one pseudonym, so patient-wise splits keep them together.
    assert len({r["Patient ID"] for r in rows}) == 1
    assert {r["OriginalImage[Width"] for r in rows} == {"64"}
    for row in rows:
        assert (dataset / "images" / row["Image Index"]).is_file()
    assert "no model" in capsys.readouterr().err

    from models.data import load_records

    records = load_records(dataset)  # what `cxr train --data` reads
    assert len(records) == 3


def test_cli_batch_on_error_raise_stops_at_first_failure(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    status = main(
        ["batch", str(export), "-o", str(out), "--on-error", "raise", "--chunk-size", "1"]
    )
    assert status == 1
    assert len(out.read_text().splitlines()) < len(EXPECTED_EXPORT)
    assert "stopped at the first failure" in capsys.readouterr().err


def _batch_args(export: Path, out: Path, tmp_path: Path, *extra: str) -> list[str]:
    reports = write_reports_csv(tmp_path / "reports.csv")
    key = tmp_path / "pseudonym.key"
    if not key.exists():
        key.write_bytes(b"test-key-0123456789")
    return ["batch", str(export), "-o", str(out), "--reports", str(reports),
            "--dataset", str(out.with_suffix(".dataset")), "--dataset-size", "32",
            "--pseudonym-key", str(key), "--chunk-size", "2", *extra]  # fmt: skip


@pytest.mark.parametrize("interrupt_after", [1, 2, 5])
def test_cli_batch_resume_accounts_for_every_file_once(
    export: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    interrupt_after: int,
) -> None:
    from batch.processor import BatchProcessor

    reference = tmp_path / "reference.jsonl"
    assert main(_batch_args(export, reference, tmp_path)) == 1
    capsys.readouterr()

    # Interrupted run: the kill lands after chunk N was processed (its PNGs and
    # Data_Entry rows written) but before its lines reached OUT; plus a torn line.
    out = tmp_path / "out.jsonl"
    process, calls = BatchProcessor.process, []

    def interrupted(self: BatchProcessor, files: Any) -> Any:
        outcomes = process(self, files)
        calls.append(len(files))
        if len(calls) == interrupt_after:
            raise KeyboardInterrupt
        return outcomes

    monkeypatch.setattr(BatchProcessor, "process", interrupted)
    assert main(_batch_args(export, out, tmp_path)) == 130
    monkeypatch.setattr(BatchProcessor, "process", process)
    written = out.read_text().splitlines()
    assert len(written) == 2 * (interrupt_after - 1)
    with out.open("a") as f:
        f.write('{"path":"PAT2/STU')  # the line being written when the run died
    capsys.readouterr()

    assert main(_batch_args(export, out, tmp_path, "--resume")) == 1
    err = capsys.readouterr().err
    assert "10 files: 4 done, 4 skipped, 2 failed; 3 images (3 with a report)" in err
    assert "1 CSV reports matched no image" in err
    assert f"resumed after {len(written)} files already in OUT (1 incomplete line dropped)" in err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["path"] for line in lines) == sorted(EXPECTED_EXPORT)  # each once
    assert lines[: len(written)] == [json.loads(line) for line in written]  # kept, appended
    # Same results as an uninterrupted run (SR labels remembered for the study's images).
    expected = {line["path"]: line for line in map(json.loads, reference.open())}
    assert {line["path"]: line for line in lines} == expected
    rejects = [json.loads(x) for x in out.with_suffix(".rejects.jsonl").read_text().splitlines()]
    assert sorted(r["path"] for r in rejects) == ["PAT2/STUDY2/GARBAGE01", "PAT2/STUDY2/broken.dcm"]

    dataset = out.with_suffix(".dataset")
    rows = list(csv.DictReader((dataset / "Data_Entry.csv").open()))
    assert rows == list(
        csv.DictReader((reference.with_suffix(".dataset") / "Data_Entry.csv").open())
    )
    names = [r["Image Index"] for r in rows]
    assert len(names) == len(set(names)) == 3  # none lost, none duplicated
    assert sorted(names) == sorted(
        line["dataset_image"] for line in lines if "dataset_image" in line
    )
    assert sorted(p.name for p in (dataset / "images").iterdir()) == sorted(names)
    assert not out.with_name("out.jsonl.inflight.json").exists()  # Ctrl-C blames no file


def test_cli_batch_resume_of_finished_run_adds_nothing(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    assert main(_batch_args(export, out, tmp_path)) == 1
    before = out.read_text()
    entry = (out.with_suffix(".dataset") / "Data_Entry.csv").read_text()
    capsys.readouterr()
    assert main(_batch_args(export, out, tmp_path, "--resume")) == 1
    assert "10 files: 4 done, 4 skipped, 2 failed" in capsys.readouterr().err
    assert out.read_text() == before
    assert (out.with_suffix(".dataset") / "Data_Entry.csv").read_text() == entry


def test_cli_batch_dataset_refusals_name_resume_and_key(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, dataset = tmp_path / "out.jsonl", tmp_path / "dataset"
    args = ["batch", str(export), "-o", str(out), "--dataset", str(dataset),
            "--dataset-size", "32"]  # fmt: skip
    assert main(args) == 1
    capsys.readouterr()
    assert main(args) == 2  # an existing training set is not overwritten
    assert "--resume" in capsys.readouterr().err
    assert main([*args, "--resume"]) == 2  # a new random key would re-pseudonymize
    assert "--pseudonym-key" in capsys.readouterr().err


def test_cli_batch_missing_folder_is_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["batch", str(tmp_path / "nope"), "-o", str(tmp_path / "o.jsonl")])
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a folder" in err[0]


def test_cli_batch_will_not_resume_into_another_exports_results(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["batch", str(export), "-o", str(out)]) == 1  # its broken files fail
    before = out.read_bytes()
    other = tmp_path / "other"
    (other / "elsewhere").mkdir(parents=True)
    (other / "elsewhere" / "NOTDICOM").write_bytes(b"not an image")
    capsys.readouterr()
    assert main(["batch", str(other), "-o", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "another export's results" in err[0]
    assert out.read_bytes() == before


def test_cli_batch_will_not_resume_when_a_recorded_file_now_holds_another_study(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same layout with other studies (the next month's export written to the same
    # folder): resuming kept the old lines for the new files and never read them.
    from dicom_factory import dx_bytes

    out = tmp_path / "out.jsonl"
    assert main(["batch", str(export), "-o", str(out)]) == 1  # its broken files fail
    before = out.read_bytes()
    (export / "PAT2" / "STUDY2" / "image.dcm").write_bytes(
        dx_bytes(study_uid="1.2.826.0.1.3680043.8.498.77", accession="B9")
    )
    capsys.readouterr()
    assert main(["batch", str(export), "-o", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "PAT2/STUDY2/image.dcm" in err[0]
    assert "another study or accession" in err[0]
    assert out.read_bytes() == before


def test_cli_batch_never_writes_into_its_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # -o naming one of the export's files overwrote that instance.
    export = tmp_path / "export"
    (export / "study").mkdir(parents=True)
    instance = export / "study" / "1.dcm"
    instance.write_bytes(b"DICM instance")
    for flag, target in (
        ("-o", instance),
        ("-o", export / "out.jsonl"),
        ("--dataset", export / "ds"),
    ):
        args = ["batch", str(export), "-o", str(tmp_path / "o.jsonl")]
        args += [flag, str(target)] if flag == "--dataset" else []
        if flag == "-o":
            args = ["batch", str(export), "-o", str(target)]
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "inside the export" in err[0]
    assert instance.read_bytes() == b"DICM instance"
    assert not (export / "out.jsonl").exists() and not (export / "ds").exists()


def test_cli_batch_refuses_a_negative_pixel_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # -1 passed as a limit that refused every image ("more pixels than -1").
    (tmp_path / "export").mkdir()
    args = ["batch", str(tmp_path / "export"), "-o", str(tmp_path / "o.jsonl")]
    args += ["--max-pixels", "-1"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max-pixels must be >= 0" in err[0]
    assert not (tmp_path / "o.jsonl").exists()


def test_cli_serve_refuses_public_host_without_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err
    assert "without API keys" in err and "CXR_API_KEYS" in err and "Traceback" not in err


def test_cli_serve_missing_model_is_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--model", str(tmp_path / "missing.pt")]) == 2
    assert "no such checkpoint file" in capsys.readouterr().err


def test_cli_db_upgrade_and_current(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert main(["db", "upgrade", "--database-url", url]) == 0
    assert "revision 0003" in capsys.readouterr().err
    assert main(["db", "current", "--database-url", url]) == 0
    assert capsys.readouterr().out.strip() == "0003"


def test_cli_db_upgrade_unreachable_database_is_one_line_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2"
    assert main(["db", "upgrade", "--database-url", url]) == 2
    err = capsys.readouterr().err
    assert "cannot migrate the database" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["upgrade", "current"])
def test_cli_db_an_unusable_url_is_one_line_error(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", command, "--database-url", "garbage://x"]) == 2
    err = capsys.readouterr().err
    assert "cannot use the database URL" in err and err.count("\n") == 1


def test_cli_apikey_prints_key_and_its_hash(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["apikey"]) == 0
    out = capsys.readouterr().out.splitlines()
    key = out[0].split()[-1]
    assert out[1] == f"CXR_API_KEYS={hash_api_key(key)}"


def test_cli_service_module_imports_only_stdlib() -> None:
    code = (
        "import sys, app.cli.service_commands, app.cli.batch_command; "
        "print(sorted(m for m in ('torch', 'fastapi', 'spacy', 'sqlalchemy') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
