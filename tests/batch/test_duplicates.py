"""A batch predicts and records each DICOM instance once: a second copy of an image (same
SOP Instance UID, same pixels) is skipped as a duplicate of the first, whatever its folder
or transfer syntax; an image that shares only the UID (a derived MONOCHROME1 copy) is
processed, with a warning; a resumed run still knows the copies recorded before it."""

from __future__ import annotations

import copy
import csv
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from dicom_factory import build_dataset, chest_pixels, to_bytes, write
from folder_runs import run_folder
from pydicom.dataset import Dataset
from pydicom.uid import DeflatedExplicitVRLittleEndian, ImplicitVRLittleEndian, RLELossless

from app.cli import main
from batch.engine import plan, run
from batch.interfaces import Outcome
from batch.processor import BatchProcessor, decode_pool
from batch.results import outcome_line
from batch.sinks import TallySink
from batch.sources import FolderSource

FIRST, SECOND = "A/IM0001.dcm", "B/IM0001.dcm"  # the first copy wins: sorted path order


@pytest.fixture
def original() -> Dataset:
    ds: Dataset = build_dataset(chest_pixels())
    return ds


def _put(root: Path, key: str, data: bytes) -> None:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _assert_duplicate(outcome: Outcome, first: str, uid: str) -> None:
    result = outcome.result
    assert outcome.state == "skipped" and outcome.error is None
    assert result["duplicate_of"] == first
    assert result["reason"] == f"duplicate of {first} (same SOP Instance UID and pixels)"
    assert result["sop_instance_uid"] == uid and result["kind"] == "image"
    assert len(result["pixel_fingerprint"]) == 32
    assert "prediction" not in result and outcome.image is None  # nothing predicted or kept


@pytest.mark.parametrize("pool", [False, True], ids=["in-process", "decode-pool"])
def test_batch_byte_identical_copies_are_predicted_once(
    tmp_path: Path, labeler: Any, demo_predictor: Any, original: Dataset, pool: bool
) -> None:
    data = to_bytes(original)
    for key in (FIRST, SECOND):
        _put(tmp_path / "export", key, data)
    args: dict[str, Any] = {}
    if pool:  # fingerprinted in the worker process, sent back with the image
        args["decode_pool"] = decode_pool(workers=1)
    try:
        outcomes = run_folder(tmp_path / "export", labeler, predictor=demo_predictor, **args)
    finally:
        if pool:
            args["decode_pool"].close()
    first = outcomes[FIRST]
    assert first.state == "done" and len(first.result["prediction"]["probabilities"]) == 14
    assert "warning" not in first.result
    _assert_duplicate(outcomes[SECOND], FIRST, original.SOPInstanceUID)
    assert outcomes[SECOND].result["pixel_fingerprint"] == first.result["pixel_fingerprint"]


@pytest.mark.parametrize(
    "syntax",
    [ImplicitVRLittleEndian, DeflatedExplicitVRLittleEndian, RLELossless],
    ids=lambda s: s.name,
)
def test_batch_copy_in_another_transfer_syntax_is_a_duplicate(
    tmp_path: Path, labeler: Any, original: Dataset, syntax: Any
) -> None:
    again = copy.deepcopy(original)
    if syntax == RLELossless:
        again.compress(RLELossless, generate_instance_uid=False)  # a re-export keeps it
    else:
        again.file_meta.TransferSyntaxUID = syntax
    assert to_bytes(again) != to_bytes(original)
    _put(tmp_path / "export", FIRST, to_bytes(original))
    _put(tmp_path / "export", SECOND, to_bytes(again))
    outcomes = run_folder(tmp_path / "export", labeler)
    assert outcomes[FIRST].state == "done"
    _assert_duplicate(outcomes[SECOND], FIRST, original.SOPInstanceUID)


def test_batch_same_uid_other_pixels_are_both_processed_with_a_warning(
    tmp_path: Path,
    labeler: Any,
    demo_predictor: Any,
    original: Dataset,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A derived copy that kept the UID: the same values shown inverted (MONOCHROME1).
    derived = copy.deepcopy(original)
    derived.PhotometricInterpretation = "MONOCHROME1"
    _put(tmp_path / "export", FIRST, to_bytes(original))
    _put(tmp_path / "export", SECOND, to_bytes(derived))
    with caplog.at_level(logging.INFO, logger="batch"):
        outcomes = run_folder(tmp_path / "export", labeler, predictor=demo_predictor)
    first, second = outcomes[FIRST], outcomes[SECOND]
    assert first.state == second.state == "done"
    assert first.result["prediction"] and second.result["prediction"]
    assert "warning" not in first.result and "duplicate_of" not in second.result
    assert second.result["warning"] == f"SOP Instance UID also used by {FIRST} with other pixels"
    assert first.result["pixel_fingerprint"] != second.result["pixel_fingerprint"]
    assert SECOND in caplog.text  # logged by path...
    assert original.SOPInstanceUID not in caplog.text  # ...never by UID


def test_batch_same_pixels_under_new_uids_are_both_processed_with_a_warning(
    tmp_path: Path, labeler: Any, original: Dataset
) -> None:
    # A copy given new UIDs by a second de-identification pass: nothing but the pixels
    # tells it from another image, and a training set may split the twins apart.
    from pydicom.uid import generate_uid

    renamed = copy.deepcopy(original)
    renamed.SOPInstanceUID = generate_uid()
    renamed.file_meta.MediaStorageSOPInstanceUID = renamed.SOPInstanceUID
    _put(tmp_path / "export", FIRST, to_bytes(original))
    _put(tmp_path / "export", SECOND, to_bytes(renamed))
    outcomes = run_folder(tmp_path / "export", labeler)
    first, second = outcomes[FIRST], outcomes[SECOND]
    assert first.state == second.state == "done" and "warning" not in first.result
    assert second.result["warning"] == (
        f"same pixels as {FIRST} under another SOP Instance UID (a copy given new UIDs?)"
    )
    assert first.result["pixel_fingerprint"] == second.result["pixel_fingerprint"]


def test_batch_real_derived_monochrome1_copy_is_not_a_duplicate(
    shared_data: Path, labeler: Any
) -> None:
    # Fake_MONOHR1.dcm keeps the SOP Instance UID of the SIIM image it was derived from.
    outcomes = run_folder(shared_data / "dicom", labeler)
    images = {k: o for k, o in outcomes.items() if o.result.get("kind") == "image"}
    assert all(o.state == "done" for o in images.values())
    derived = images["Fake_MONOHR1.dcm"].result
    assert derived["warning"].startswith("SOP Instance UID also used by 1.2.276.")


def test_batch_the_same_item_processed_again_is_not_its_own_duplicate(
    tmp_path: Path, labeler: Any, original: Dataset
) -> None:
    # A chunk processed twice by one processor (the listener, a retried block on Ray).
    _put(tmp_path / "export", FIRST, to_bytes(original))
    source = FolderSource(tmp_path / "export")
    processor = BatchProcessor(source, labeler=labeler, predictor=None)
    items = list(source.scan())
    assert [o.state for o in processor.process(items)] == ["done"]
    assert [o.state for o in processor.process(items)] == ["done"]


def test_cli_batch_writes_one_training_image_per_instance(
    tmp_path: Path, original: Dataset, capsys: pytest.CaptureFixture[str]
) -> None:
    export, out, dataset = tmp_path / "export", tmp_path / "out.jsonl", tmp_path / "dataset"
    data = to_bytes(original)
    for key in (FIRST, SECOND, "C/loose-copy.dcm"):
        _put(export, key, data)
    reports = tmp_path / "reports.csv"
    reports.write_text(f'AccessionNumber,Report\n{original.AccessionNumber},"Small effusion."\n')
    args = ["batch", str(export), "-o", str(out), "--reports", str(reports),
            "--dataset", str(dataset), "--dataset-size", "32"]  # fmt: skip
    assert main(args) == 0
    lines = {x["path"]: x for x in map(json.loads, out.read_text().splitlines())}
    assert lines[FIRST]["state"] == "done" and lines[FIRST]["dataset_image"]
    for key in (SECOND, "C/loose-copy.dcm"):
        assert lines[key]["state"] == "skipped" and lines[key]["duplicate_of"] == FIRST
        assert "dataset_image" not in lines[key]
    rows = list(csv.DictReader((dataset / "Data_Entry.csv").open()))
    assert [r["Image Index"] for r in rows] == [lines[FIRST]["dataset_image"]]
    assert len(list((dataset / "images").iterdir())) == 1
    err = capsys.readouterr().err
    assert "3 files: 1 done, 2 skipped (2 duplicates), 0 failed; 1 images" in err


def _interrupt_after(monkeypatch: pytest.MonkeyPatch, chunks: int) -> None:
    """`cxr batch` killed (Ctrl-C) while chunk `chunks` is processed, before its lines."""
    process, calls = BatchProcessor.process, []

    def interrupted(self: BatchProcessor, items: Any) -> Any:
        outcomes = process(self, items)
        calls.append(1)
        if len(calls) == chunks:
            raise KeyboardInterrupt
        return outcomes

    monkeypatch.setattr(BatchProcessor, "process", interrupted)


def test_cli_batch_resume_skips_a_copy_of_an_image_recorded_before(
    tmp_path: Path,
    original: Dataset,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    export, out = tmp_path / "export", tmp_path / "out.jsonl"
    write(original, tmp_path / "IM.dcm")
    for key in (FIRST, SECOND):
        _put(export, key, (tmp_path / "IM.dcm").read_bytes())
    args = ["batch", str(export), "-o", str(out), "--chunk-size", "1"]
    process = BatchProcessor.process
    _interrupt_after(monkeypatch, 2)  # the first copy recorded, the second one not
    assert main(args) == 130
    monkeypatch.setattr(BatchProcessor, "process", process)
    assert [json.loads(x)["path"] for x in out.read_text().splitlines()] == [FIRST]
    assert main([*args, "--resume"]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["path"] for x in lines] == [FIRST, SECOND]
    assert lines[1]["state"] == "skipped" and lines[1]["duplicate_of"] == FIRST
    assert "2 files: 1 done, 1 skipped (1 duplicate), 0 failed" in capsys.readouterr().err


def test_batch_restored_duplicate_line_names_the_first_copy(
    tmp_path: Path, labeler: Any, original: Dataset
) -> None:
    # Three copies, the run stopped after two were recorded (the second as a duplicate):
    # the third is a duplicate of the first, whichever line the resume reads first.
    export = tmp_path / "export"
    for key in (FIRST, SECOND, "C/IM0001.dcm"):
        _put(export, key, to_bytes(original))
    source = FolderSource(export)
    first_run = BatchProcessor(source, labeler=labeler, predictor=None)
    items = list(source.scan())
    recorded = [outcome_line(o) for o in first_run.process(items[:2])]
    assert recorded[1]["duplicate_of"] == FIRST
    for lines in (recorded, recorded[::-1]):
        resumed = BatchProcessor(source, labeler=labeler, predictor=None)
        remaining = plan(items, lines, resumed)
        [third] = resumed.process(remaining)
        assert third.state == "skipped" and third.result["duplicate_of"] == FIRST


def test_batch_resume_from_lines_without_fingerprints(
    tmp_path: Path, labeler: Any, original: Dataset
) -> None:
    # Lines of a run before fingerprints: restored without error; the copy they recorded
    # cannot be recognised, so the other copy is processed (and now fingerprinted).
    export = tmp_path / "export"
    for key in (FIRST, SECOND):
        _put(export, key, to_bytes(original))
    source = FolderSource(export)
    items = list(source.scan())
    old_line = {
        "path": FIRST,
        "state": "done",
        "kind": "image",
        "study_instance_uid": original.StudyInstanceUID,
        "sop_instance_uid": original.SOPInstanceUID,
        "accession_number": original.AccessionNumber,
        "rows": 64,
        "columns": 64,
        "prediction": None,
        "report": None,
    }
    skipped_old = {"path": "C/old", "state": "skipped", "kind": "image", "reason": "other"}
    processor = BatchProcessor(source, labeler=labeler, predictor=None)
    remaining = plan(items, [old_line, skipped_old], processor)
    [second] = processor.process(remaining)
    assert second.key == SECOND and second.state == "done"
    assert len(second.result["pixel_fingerprint"]) == 32


def test_batch_tally_counts_duplicates_among_the_skipped(
    tmp_path: Path, labeler: Any, original: Dataset
) -> None:
    for key in (FIRST, SECOND):
        _put(tmp_path / "export", key, to_bytes(original))
    source = FolderSource(tmp_path / "export")
    processor = BatchProcessor(source, labeler=labeler, predictor=None)
    tally = TallySink()
    run(plan(source.scan(), [], processor), processor, [tally], chunk_size=8)
    assert tally.counts == {"done": 1, "skipped": 1, "failed": 0}
    assert tally.duplicates == 1 and tally.images == 1


def test_batch_hand_edited_result_lines_restore_without_error() -> None:
    # A results file is user data: wrong types in its fields teach nothing, never crash.
    from batch.duplicates import InstanceIndex

    index = InstanceIndex()
    for line in (
        {"path": "a", "state": "done", "sop_instance_uid": ["1.2"], "pixel_fingerprint": "f"},
        {"path": "b", "state": "done", "sop_instance_uid": "1.2", "pixel_fingerprint": 7},
        {"path": None, "state": "done", "sop_instance_uid": "1.2", "pixel_fingerprint": "g"},
        {"path": "c", "state": "skipped", "sop_instance_uid": "1.2", "pixel_fingerprint": "h",
         "duplicate_of": {"x": 1}},
        {"state": "done"},
    ):  # fmt: skip
        index.restore(line)
    assert index.see("1.2", "g", "d").duplicate_of is None
    assert index.see("1.2", "h", "e").duplicate_of is None
    # Only the pixels of the first line were usable (its UID was not): a twin warning.
    assert index.see("9.9", "f", "z").warning == (
        "same pixels as a under another SOP Instance UID (a copy given new UIDs?)"
    )
