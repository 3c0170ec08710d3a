"""`batch.read_ahead`: a run's images decoded in worker processes ahead of the model, in
order, each file's trouble its own; the same outcomes as reading them one at a time."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
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
    dx_bytes,
)
from troubled_decoder import troubled_load

import models.image_pipeline
from app.cli import main
from batch.engine import plan, run
from batch.interfaces import Outcome, Sink, SourceItem
from batch.processor import BatchProcessor
from batch.read_ahead import ReadAhead, ReadCancelled
from batch.sources import FolderSource
from models.image_pipeline import InputSpec, LoadedImage

pytestmark = [pytest.mark.issue(19), pytest.mark.slow]

SPEC = InputSpec(64, "letterbox", fingerprint=True)


class CountingSource(FolderSource):
    """A folder whose fetches and releases are counted (a download source's lifecycle);
    `local_path` fails for names starting with 'unfetchable'."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.fetched: list[str] = []
        self.released: list[str] = []

    def local_path(self, item: SourceItem) -> Path:
        if item.key.startswith("unfetchable"):
            raise OSError(f"{item.key}: the PACS answered 404")
        self.fetched.append(item.key)
        return super().local_path(item)

    def release(self, item: SourceItem) -> None:
        self.released.append(item.key)


def _images(root: Path, names: Sequence[str]) -> list[SourceItem]:
    for name in names:
        (root / name).write_bytes(dx_bytes(accession=name))
    return [SourceItem(name, "image") for name in names]


def test_read_ahead_keeps_order_and_fails_a_crash_a_hang_a_raise_and_a_fetch_alone(
    tmp_path: Path,
) -> None:
    names = ["a.dcm", "crash.dcm", "b.dcm", "hang.dcm", "raise.dcm", "unfetchable.dcm", "c.dcm"]
    items = _images(tmp_path, names)
    source = CountingSource(tmp_path)
    ahead = ReadAhead(source, items, SPEC, workers=2, timeout_s=2.0, depth=4, fn=troubled_load)
    try:
        got = [ahead.take(item) for item in items]
    finally:
        ahead.close()
    assert [g.item.key for g in got] == names
    by_name = {g.item.key: g for g in got}
    for good in ("a.dcm", "b.dcm", "c.dcm"):
        image = by_name[good].image
        assert isinstance(image, LoadedImage) and image.meta.accession_number == good
        assert by_name[good].path == tmp_path / good
    assert "crashed" in str(by_name["crash.dcm"].image)
    assert "longer than 2 s" in str(by_name["hang.dcm"].image)
    assert str(tmp_path / "hang.dcm") in str(by_name["hang.dcm"].image)  # named by its file
    assert isinstance(by_name["raise.dcm"].image, RuntimeError)
    fetch = by_name["unfetchable.dcm"]
    assert fetch.path is None and "404" in str(fetch.image)
    assert source.released == []  # taken items are the caller's to release


def test_read_ahead_refuses_an_out_of_step_take_and_no_workers(tmp_path: Path) -> None:
    items = _images(tmp_path, ["a.dcm", "b.dcm"])
    with pytest.raises(ValueError, match="at least one worker"):
        ReadAhead(FolderSource(tmp_path), items, SPEC, workers=0, timeout_s=None, depth=2)
    ahead = ReadAhead(FolderSource(tmp_path), items, SPEC, workers=1, timeout_s=None, depth=2)
    try:
        with pytest.raises(RuntimeError, match="out of step"):
            ahead.take(items[1])
    finally:
        ahead.close()


def test_read_ahead_closed_early_releases_what_it_fetched_and_was_not_taken(
    tmp_path: Path,
) -> None:
    items = _images(tmp_path, [f"{i}.dcm" for i in range(12)])
    source = CountingSource(tmp_path)
    ahead = ReadAhead(source, items, SPEC, workers=2, timeout_s=None, depth=4)
    first = ahead.take(items[0])
    deadline = time.monotonic() + 10
    while len(source.fetched) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)  # the thread runs ahead of the caller
    ahead.close()
    assert first.item.key not in source.released
    assert sorted(source.released) == sorted(set(source.fetched) - {first.item.key})
    assert len(source.fetched) <= 1 + 4 + 4  # bounded by the depth, not the 12 files
    assert not any(t.name == "cxr-batch-read" for t in threading.enumerate())


def test_read_ahead_waiting_on_a_hung_file_gives_way_to_a_cancel(tmp_path: Path) -> None:
    items = _images(tmp_path, ["hang.dcm", "b.dcm"])
    stop = threading.Event()
    ahead = ReadAhead(
        FolderSource(tmp_path), items, SPEC, workers=1, timeout_s=60, depth=2, fn=troubled_load
    )
    threading.Timer(0.3, stop.set).start()
    began = time.monotonic()
    try:
        with pytest.raises(ReadCancelled, match="hang.dcm"):
            ahead.take(items[0], cancelled=stop.is_set)
        waited = time.monotonic() - began
    finally:
        ahead.close()
    assert waited < 5  # not the 60 s file limit
    assert time.monotonic() - began < 5  # the pool's wait on the hung worker was cut


def _outcomes(root: Path, labeler: Any, **processor_args: Any) -> dict[str, Outcome]:
    outcomes = run_folder(root, labeler, **processor_args)
    for outcome in outcomes.values():
        outcome.image = None
    return outcomes


def test_run_with_read_workers_gives_the_outcomes_of_reading_in_the_run(
    tmp_path: Path, labeler: Any, demo_predictor: Any
) -> None:
    root = build_export(tmp_path / "export")
    build_poisoned_export(root)
    (root / "POISON" / "zcopy.dcm").write_bytes((root / GOOD_BESIDE_POISON[0]).read_bytes())
    alone = _outcomes(root, labeler, predictor=demo_predictor, read_workers=0)
    ahead = _outcomes(root, labeler, predictor=demo_predictor, read_workers=2)
    expected = {*EXPECTED_EXPORT, *POISONED, *GOOD_BESIDE_POISON, "POISON/zcopy.dcm"}
    assert set(alone) == set(ahead) == expected
    for key in expected:
        a, b = alone[key], ahead[key]
        assert (a.state, a.error) == (b.state, b.error), key
        assert a.result == b.result, key
    # The SR of study 1, processed first, labels its images read ahead of it.
    assert ahead["PAT1/STUDY1/SER1/IM000001"].result["report"]["source"] == "sr"
    assert ahead["POISON/zcopy.dcm"].state == "skipped"  # a duplicate, found in order
    assert ahead["PAT1/STUDY1/SER1/IM000002.dcm"].result["prediction"]["boxes"]


def test_run_with_read_workers_stopped_midway_leaves_the_rest_pending_and_released(
    tmp_path: Path, labeler: Any
) -> None:
    items = _images(tmp_path, [f"{i:02d}.dcm" for i in range(20)])
    source = CountingSource(tmp_path)
    calls: list[int] = []

    def cancelled() -> bool:
        calls.append(1)
        return len(calls) > 5

    processor = BatchProcessor(
        source, labeler=labeler, predictor=None, cancelled=cancelled, read_workers=2
    )
    written: list[str] = []

    class Keep(Sink):
        def write(self, outcomes: Sequence[Outcome]) -> None:
            written.extend(o.key for o in outcomes)

    report = run(plan(items, [], processor), processor, [Keep()], chunk_size=4)
    assert report.stopped and written == [f"{i:02d}.dcm" for i in range(len(written))]
    assert 0 < len(written) < 20
    assert sorted(source.released) == sorted(source.fetched)  # nothing downloaded is left


def test_cli_batch_workers_fail_a_crashing_file_alone_in_one_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = build_poisoned_export(tmp_path / "export")
    (root / "POISON" / "crash.dcm").write_bytes(dx_bytes(accession="K1"))
    (root / "POISON" / "hang.dcm").write_bytes(dx_bytes(accession="K2"))
    monkeypatch.setattr(models.image_pipeline, "load_task", troubled_load)
    monkeypatch.setenv("CXR_BATCH_FILE_TIMEOUT_S", "3")
    out = tmp_path / "out.jsonl"
    assert main(["batch", str(root), "-o", str(out), "--workers", "2"]) == 1
    lines = {x["path"]: x for x in map(json.loads, out.read_text().splitlines())}
    assert sorted(lines) == sorted(
        [*POISONED, *GOOD_BESIDE_POISON, "POISON/crash.dcm", "POISON/hang.dcm"]
    )
    assert lines["POISON/crash.dcm"]["error"].startswith("POISON/crash.dcm: ")
    assert "crashed" in lines["POISON/crash.dcm"]["error"]
    assert "longer than 3 s" in lines["POISON/hang.dcm"]["error"]
    assert str(tmp_path) not in out.read_text()  # no server paths in results
    assert all(lines[k]["state"] == "done" for k in GOOD_BESIDE_POISON)
    assert not (tmp_path / "out.jsonl.inflight.json").exists()
    capsys.readouterr()


def test_cli_batch_refuses_negative_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_export(tmp_path / "export")
    code = main(
        ["batch", str(tmp_path / "export"), "-o", str(tmp_path / "o.jsonl"), "--workers", "-1"]
    )
    assert code == 2 and "--workers must be >= 0" in capsys.readouterr().err
