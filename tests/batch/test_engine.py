"""The batch engine on hostile input: every file ends done or failed with its reason,
whatever the decoder raises or however long it takes (issue 7 item 2); `cxr batch` on
poisoned exports and on zips (issue 7 item 6)."""

from __future__ import annotations

import io
import json
import threading
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from folder_runs import run_folder
from service_fixtures import (
    EXPECTED_EXPORT,
    GOOD_BESIDE_POISON,
    POISONED,
    build_export,
    build_poisoned_export,
)

from app.cli import main
from batch.engine import plan, run
from batch.interfaces import SourceItem
from batch.processor import BatchProcessor
from batch.scan import classify_file
from batch.sinks import TallySink
from batch.sources import FolderSource

pytestmark = pytest.mark.issue(7)


def test_batch_poisoned_files_fail_with_reason_and_neighbours_are_done(
    tmp_path: Path, labeler: Any, demo_predictor: Any
) -> None:
    root = build_poisoned_export(tmp_path / "export")
    outcomes = run_folder(root, labeler, predictor=demo_predictor)
    assert sorted(outcomes) == sorted([*POISONED, *GOOD_BESIDE_POISON])
    for key in GOOD_BESIDE_POISON:  # in the same chunk as the poisoned files
        assert outcomes[key].state == "done"
        assert len(outcomes[key].result["prediction"]["probabilities"]) == 14
    for key in POISONED:
        outcome = outcomes[key]
        assert outcome.state == "failed", key
        assert outcome.error and key in outcome.error
        assert str(tmp_path) not in outcome.error  # no server paths in results


@pytest.mark.parametrize(
    "exc",
    [
        zlib.error("Error -3 while decompressing data: invalid block type"),
        TypeError("int() argument must be a string, not 'list'"),
        RuntimeError("decoder state corrupted"),
        NotImplementedError("'0' bits per LUT entry is not supported"),
        MemoryError(),
    ],
    ids=lambda e: type(e).__name__,
)
def test_batch_any_reader_exception_is_one_files_failure(
    tmp_path: Path, labeler: Any, monkeypatch: pytest.MonkeyPatch, exc: Exception
) -> None:
    import models.dicom

    root = build_export(tmp_path / "export")
    real = models.dicom.read_dicom_stored

    def reader(path: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(path).name == "IM000001":
            raise exc
        return real(path, *args, **kwargs)

    monkeypatch.setattr(models.dicom, "read_dicom_stored", reader)
    outcomes = run_folder(root, labeler)
    assert sorted(outcomes) == sorted(EXPECTED_EXPORT)  # every file, once
    bad = outcomes["PAT1/STUDY1/SER1/IM000001"]
    assert bad.state == "failed" and type(exc).__name__ in (bad.error or "")
    assert outcomes["PAT1/STUDY1/SER1/IM000002.dcm"].state == "done"


def test_batch_header_reader_exception_makes_the_file_invalid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import models.dicom

    def header(path: Any) -> Any:
        raise zlib.error("invalid stored block lengths")

    monkeypatch.setattr(models.dicom, "read_dicom_header", header)
    (tmp_path / "IM1").write_bytes(b"x")
    item = classify_file(tmp_path / "IM1", "IM1")
    assert item.kind == "invalid" and "unexpected zlib.error" in (item.note or "")
    assert "invalid stored block lengths" in (item.note or "")
    assert str(tmp_path) not in (item.note or "")


def test_batch_reader_that_never_returns_is_given_up(
    tmp_path: Path, labeler: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import models.dicom

    root = build_export(tmp_path / "export")
    real, release = models.dicom.read_dicom_stored, threading.Event()

    def reader(path: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(path).name == "IM000001":
            release.wait(30)  # a decoder stuck in a loop
        return real(path, *args, **kwargs)

    monkeypatch.setattr(models.dicom, "read_dicom_stored", reader)
    try:
        outcomes = run_folder(root, labeler, file_timeout_s=0.5)
    finally:
        release.set()
    stuck = outcomes["PAT1/STUDY1/SER1/IM000001"]
    assert stuck.state == "failed" and "longer than 0.5 s" in (stuck.error or "")
    assert outcomes["PAT1/STUDY1/SER1/IM000002.dcm"].state == "done"


@pytest.mark.issue(18)
def test_batch_labeling_an_sr_is_under_the_file_limit_too(
    tmp_path: Path, labeler: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a hostile SR's text once cost 38 s to label, outside CXR_BATCH_FILE_TIMEOUT_S
    root = build_export(tmp_path / "export")
    real, release = labeler.label_many, threading.Event()

    def label_many(items: Any) -> Any:
        release.wait(30)  # labeling that takes too long
        return real(items)

    monkeypatch.setattr(labeler, "label_many", label_many)
    try:
        outcomes = run_folder(root, labeler, file_timeout_s=0.5)
    finally:
        release.set()
    sr = outcomes["PAT1/STUDY1/SR/SR000001"]
    assert sr.state == "failed" and "longer than 0.5 s" in (sr.error or "")
    assert outcomes["PAT1/STUDY1/SER1/IM000002.dcm"].state == "done"


def test_batch_processor_stops_between_files_when_cancelled(tmp_path: Path, labeler: Any) -> None:
    root = build_export(tmp_path / "export")
    seen: list[int] = []

    def cancelled() -> bool:
        seen.append(1)
        return len(seen) > 2

    source = FolderSource(root)
    processor = BatchProcessor(source, labeler=labeler, predictor=None, cancelled=cancelled)
    items = plan(source.scan(), [], processor)
    report = run(items, processor, [TallySink()], chunk_size=8)
    assert report.stopped and report.processed == 2


def test_batch_plan_skips_recorded_items_and_puts_reports_first(labeler: Any) -> None:
    processor = BatchProcessor(FolderSource(Path(".")), labeler=labeler, predictor=None)
    items = [SourceItem("a", "image"), SourceItem("b", "sr"), SourceItem("c", "image")]
    recorded = [{"path": "c", "state": "done", "kind": "image"}]
    assert [i.key for i in plan(items, recorded, processor)] == ["b", "a"]


def test_batch_plan_refuses_results_of_another_source(labeler: Any) -> None:
    # Resuming into another export's results kept every stale line and its labels.
    from batch.interfaces import BatchInputError

    processor = BatchProcessor(FolderSource(Path(".")), labeler=labeler, predictor=None)
    items = [SourceItem("a", "image"), SourceItem("b", "image")]
    elsewhere = [{"path": "x/1.dcm", "state": "done", "kind": "image"}]
    with pytest.raises(BatchInputError, match="none of the 1 files already recorded"):
        plan(items, elsewhere, processor)
    partly = [*elsewhere, {"path": "a", "state": "done", "kind": "image"}]
    assert [i.key for i in plan(items, partly, processor)] == ["b"]  # a file gone: fine


def test_batch_plan_refuses_results_recorded_from_other_files_at_the_same_paths(
    labeler: Any,
) -> None:
    # Another export laid out like the first (or the export rewritten in place) shares
    # relative paths: resuming kept the old lines for files that now hold other studies.
    from batch.interfaces import BatchInputError

    processor = BatchProcessor(FolderSource(Path(".")), labeler=labeler, predictor=None)
    items = [SourceItem("a", "image", "1.2.3"), SourceItem("b", "image", None, "ACC2")]
    same = [
        {"path": "a", "state": "done", "kind": "image", "study_instance_uid": "1.2.3"},
        {"path": "b", "state": "failed", "kind": "image", "study_instance_uid": None},
    ]
    assert plan(items, same, processor) == []
    other_study = [{**same[0], "study_instance_uid": "9.9.9"}]
    with pytest.raises(BatchInputError, match=r"1 of the files .*'a'\) now belong to"):
        plan(items, other_study, processor)
    other_accession = [{"path": "b", "state": "done", "accession_number": "ACC1"}]
    with pytest.raises(BatchInputError, match="another study or accession"):
        plan(items, other_accession, processor)


# --- cxr batch ----------------------------------------------------------------------


def test_cli_batch_poisoned_export_records_every_file(
    tmp_path: Path, demo_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = build_poisoned_export(tmp_path / "export")
    out = tmp_path / "out.jsonl"
    status = main(["batch", str(root), "-o", str(out), "--model", str(demo_checkpoint),
                   "--device", "cpu"])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 1 and "Traceback" not in err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["path"] for line in lines) == sorted([*POISONED, *GOOD_BESIDE_POISON])
    by_path = {line["path"]: line for line in lines}
    assert all(
        by_path[k]["state"] == "done" and by_path[k]["prediction"] for k in GOOD_BESIDE_POISON
    )
    rejects = [json.loads(x) for x in (tmp_path / "out.rejects.jsonl").read_text().splitlines()]
    assert sorted(r["path"] for r in rejects) == sorted(POISONED)
    assert all(r["error"] and str(tmp_path) not in r["error"] for r in rejects)
    assert "5 files: 2 done, 0 skipped, 3 failed" in err


def _zip_of(root: Path, path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in sorted(root.rglob("*")):
            if file.is_file():
                zf.write(file, file.relative_to(root).as_posix())
    return path


def test_cli_batch_reads_a_zip_like_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    export = build_export(tmp_path / "export")
    archive = _zip_of(export, tmp_path / "export.zip")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    from_folder, from_zip = tmp_path / "folder.jsonl", tmp_path / "zip.jsonl"
    assert main(["batch", str(export), "-o", str(from_folder)]) == 1
    assert main(["batch", str(archive), "-o", str(from_zip)]) == 1
    assert from_zip.read_text() == from_folder.read_text()
    assert list((tmp_path / "tmp").iterdir()) == []  # extracted files removed
    capsys.readouterr()


@pytest.mark.parametrize(
    ("members", "env", "message"),
    [
        ({f"IM{i:04d}": b"\0" * 2**20 for i in range(40)}, {}, "zip bomb"),
        ({f"IM{i}": b"x" for i in range(6)}, {"CXR_ZIP_MAX_MEMBERS": "5"}, "6 members"),
        ({"../evil.dcm": b"x"}, {}, "'..'"),
    ],
    ids=["many-small-members-bomb", "too-many-members", "traversal"],
)
def test_cli_batch_refuses_unsafe_zip_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    members: dict[str, bytes],
    env: dict[str, str],
    message: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    archive = tmp_path / "x.zip"
    archive.write_bytes(buffer.getvalue())
    assert main(["batch", str(archive), "-o", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


class _ProcessDeath(BaseException):
    """The process dying inside a decoder (a segfault, the OOM killer): nothing catches it."""


def test_cli_batch_resume_gives_up_a_file_that_killed_the_process_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import models.dicom

    root = build_poisoned_export(tmp_path / "export")
    (root / "POISON" / "killer.dcm").write_bytes((root / GOOD_BESIDE_POISON[0]).read_bytes())
    real = models.dicom.read_dicom_stored

    def reader(path: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(path).name == "killer.dcm":
            raise _ProcessDeath
        return real(path, *args, **kwargs)

    monkeypatch.setattr(models.dicom, "read_dicom_stored", reader)
    out = tmp_path / "out.jsonl"
    # Read in this process: in a decoding worker (the default) a crash is that file's
    # failure at once (tests/batch/test_read_ahead.py).
    args = ["batch", str(root), "-o", str(out), "--workers", "0"]
    with pytest.raises(_ProcessDeath):
        main(args)
    inflight = json.loads((tmp_path / "out.jsonl.inflight.json").read_text())
    assert inflight["POISON/killer.dcm"] == 1
    with pytest.raises(_ProcessDeath):  # retried alone: dies again
        main([*args, "--resume"])
    assert main([*args, "--resume"]) == 1  # third run: recorded as failed, unread
    lines = {x["path"]: x for x in map(json.loads, out.read_text().splitlines())}
    assert sorted(lines) == sorted([*POISONED, *GOOD_BESIDE_POISON, "POISON/killer.dcm"])
    assert "stopped 2 times" in lines["POISON/killer.dcm"]["error"]
    assert all(lines[k]["state"] == "done" for k in GOOD_BESIDE_POISON)
    assert not (tmp_path / "out.jsonl.inflight.json").exists()
    capsys.readouterr()


def test_batch_header_read_that_never_returns_makes_the_file_invalid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import models.dicom

    release = threading.Event()

    def header(path: Any) -> Any:
        release.wait(30)
        raise AssertionError("unreachable in this test")

    monkeypatch.setattr(models.dicom, "read_dicom_header", header)
    (tmp_path / "IM1").write_bytes(b"x")
    try:
        item = classify_file(tmp_path / "IM1", "IM1", timeout_s=0.3)
    finally:
        release.set()
    assert item.kind == "invalid" and "longer than 0.3 s" in (item.note or "")


@pytest.mark.issue(18)
@pytest.mark.parametrize("key", ["1.2.3\n", "../1.2.3", "1.2.3/x", "", "1." + "2" * 70])
def test_inbox_refuses_a_key_that_is_not_a_uid(tmp_path: Path, key: str) -> None:
    from batch.inbox_source import InboxSource

    inbox = InboxSource(tmp_path / "inbox")
    assert inbox.path_of("1.2.840.10008.1") == tmp_path / "inbox" / "1.2.840.10008.1.dcm"
    with pytest.raises(ValueError, match="is not a SOP Instance UID"):
        inbox.path_of(key)
