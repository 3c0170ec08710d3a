"""`cxr batch --ray` and `cxr label --ray` on a local Ray (`ray.init(num_cpus=2)`): the same
rows as one machine, each file once after a worker is killed."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_fixtures import build_export

from app.cli import main
from batch.cluster import run_on_ray
from batch.job import FolderInput, JobSpec, build_job
from batch.labeling import PipelineLabeler
from batch.results import outcome_line

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.issue(21), pytest.mark.slow]


@pytest.fixture(scope="module", autouse=True)
def local_ray() -> Iterator[None]:
    """One local Ray for the module (starting one takes seconds): no dashboard, no usage
    statistics, no worker logs on the driver, a small object store."""
    saved = os.environ.get("RAY_USAGE_STATS_ENABLED")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=100 * 1024 * 1024,
    )
    yield
    ray.shutdown()
    if saved is None:
        os.environ.pop("RAY_USAGE_STATS_ENABLED", None)
    else:
        os.environ["RAY_USAGE_STATS_ENABLED"] = saved


def _lines(path: Path) -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    by_path = {str(row["path"]): row for row in rows}
    assert len(by_path) == len(rows), "a file recorded twice"
    return by_path


def _assert_same_rows(got: object, want: object, where: str = "rows") -> None:
    """Equal, except that floats (probabilities, box scores) may differ by their last
    rounded digit: oneDNN's CPU convolutions can round differently for another batch
    size (1e-6 in a logit on an AVX-512 machine), and Ray batches files otherwise than
    one machine does."""
    if isinstance(want, float) and isinstance(got, float):
        assert got == pytest.approx(want, abs=2e-6), where
    elif isinstance(want, dict) and isinstance(got, dict):
        assert got.keys() == want.keys(), where
        for key in want:
            _assert_same_rows(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, list) and isinstance(got, list):
        assert len(got) == len(want), where
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            _assert_same_rows(a, b, f"{where}[{i}]")
    else:
        assert got == want, where


def _zip_of(root: Path, path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for file in sorted(root.rglob("*")):
            if file.is_file():
                zf.write(file, file.relative_to(root).as_posix())
    return path


def test_cluster_batch_rows_match_one_machine(
    tmp_path: Path, demo_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = build_export(tmp_path / "export")  # an SR, a corrupt DICOM, non-DICOM files
    archive = _zip_of(export, tmp_path / "export.zip")
    model = ["--model", str(demo_checkpoint), "--chunk-size", "2"]
    one, zipped = tmp_path / "one.jsonl", tmp_path / "zip.jsonl"
    assert main(["batch", str(export), "-o", str(one), *model]) == 1  # the corrupt file
    # The zip is extracted on the driver and read on Ray as a folder (the folder path's
    # rows are compared with one machine's in the killed-worker test below).
    parquet = tmp_path / "shards"
    assert main(["batch", str(archive), "-o", str(zipped), *model, "--ray", "--parquet",
                 str(parquet)]) == 1  # fmt: skip
    expected = _lines(one)
    _assert_same_rows(_lines(zipped), expected)
    assert expected["PAT2/STUDY2/broken.dcm"]["state"] == "failed"
    assert expected["PAT1/STUDY1/SER1/IM000001"]["report"]["source"] == "sr"
    import pyarrow.parquet as pq

    table = pq.read_table(parquet)
    assert sorted(table.column("path").to_pylist()) == sorted(expected)
    assert "on Ray" in capsys.readouterr().err


def _kill_one_worker() -> int:
    """SIGKILL one Ray Data actor process of this session (as the OOM killer would)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith("ray::FileWorker"):
            os.kill(int(entry.name), signal.SIGKILL)
            return int(entry.name)
    raise AssertionError("no Ray Data worker process found")


def test_cluster_batch_killed_worker_then_rerun_processes_every_file_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from batch.engine import plan

    export = build_export(tmp_path / "export")
    one = tmp_path / "one.jsonl"
    assert main(["batch", str(export), "-o", str(one)]) == 1  # one machine, no model
    capsys.readouterr()
    spec = JobSpec(FolderInput(export))
    job = build_job(spec, labeler=PipelineLabeler(), predictor=None)
    items = plan(list(job.source.scan()), [], job.processor)
    killed: list[int] = []

    def kill_once(blocks: int) -> None:
        if not killed:
            killed.append(_kill_one_worker())

    lines = [
        outcome_line(outcome)
        for block in run_on_ray(
            spec, items, [], model=None, chunk_size=1, block_size=1, after_block=kill_once
        )
        for outcome in block
    ]
    assert killed
    assert sorted(str(x["path"]) for x in lines) == sorted(i.key for i in items)
    assert {str(x["path"]): x for x in lines} == _lines(one)  # the rows of one machine
    # a rerun plans nothing: every file is recorded once
    assert plan(list(job.source.scan()), lines, job.processor) == []


_FINDINGS = [
    "cardiomegaly", "pleural effusion", "pneumothorax", "consolidation", "atelectasis",
    "pulmonary edema", "a nodule in the right upper lobe", "emphysema", "hiatal hernia",
]  # fmt: skip
_TEMPLATES = [
    "There is {f}.", "No {f}.", "No evidence of {f}.", "Possible {f}.", "Mild {f}.",
    "{F} is unchanged.", "Findings consistent with {f}.", "Resolved {f}.",
]  # fmt: skip


def _reports(n: int) -> list[tuple[str, str]]:
    rng = random.Random(21)
    out = []
    for i in range(n):
        sentences = []
        for _ in range(rng.randint(1, 4)):
            f = rng.choice(_FINDINGS)
            sentences.append(rng.choice(_TEMPLATES).format(f=f, F=f.capitalize()))
        if i % 97 == 0:
            sentences = ["   "]  # empty after stripping: the row carries the error
        out.append((f"r{i:05d}", " ".join(sentences)))
    return out


def test_cluster_label_2000_reports_same_rows_as_cxr_label(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "reports.csv"
    with source.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "report"])
        writer.writerows(_reports(2000))
    # JSON Lines written by the actors (the driver writes their text), and a CSV written
    # here from the results: both as one machine writes them, with the same rejects
    for suffix in ("jsonl", "csv"):
        here, there = tmp_path / f"here.{suffix}", tmp_path / f"there.{suffix}"
        rejects = {p: p.with_suffix(".rejects.csv") for p in (here, there)}
        status = main(["label", str(source), "-o", str(here), "-q", "--rejects",
                       str(rejects[here])])  # fmt: skip
        assert status == main(["label", str(source), "-o", str(there), "-q", "--ray",
                               "--rejects", str(rejects[there])])  # fmt: skip
        assert there.read_text() == here.read_text()
        assert rejects[there].read_text() == rejects[here].read_text()
        assert len(rejects[here].read_text().splitlines()) == 1 + len(range(0, 2000, 97))
    assert len((tmp_path / "here.jsonl").read_text().splitlines()) == 2000
    capsys.readouterr()


@pytest.mark.issue(45)
def test_cluster_label_strict_writes_the_lines_before_the_first_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "reports.csv"
    with source.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["id", "report"], ["a", "No effusion."], ["b", "Cardiomegaly."],
                                 ["c", "   "], ["d", "Small effusion."]])  # fmt: skip
    out = tmp_path / "out.jsonl"
    assert main(["label", str(source), "-o", str(out), "-q", "--ray", "--strict"]) != 0
    assert "report c:" in capsys.readouterr().err
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["a", "b"]


def test_cluster_driver_records_a_copy_read_by_another_reader_as_a_duplicate() -> None:
    # Each reader found copies among its own files only: two readers each predicted one.
    from batch.cluster.copies import across_readers as _across_readers
    from batch.duplicates import InstanceIndex

    def image(path: str, fingerprint: str) -> dict[str, Any]:
        return {"path": path, "state": "done", "kind": "image", "study_instance_uid": "1.2",
                "accession_number": "A1", "sop_instance_uid": "1.2.3",
                "pixel_fingerprint": fingerprint, "prediction": {"positive": []}}  # fmt: skip

    instances = InstanceIndex()
    instances.restore({**image("old/1.dcm", "f" * 32), "sop_instance_uid": "9.9"})  # a resume
    first = _across_readers(image("A/1.dcm", "a" * 32), instances)
    assert first == image("A/1.dcm", "a" * 32)
    copy = _across_readers(image("B/1.dcm", "a" * 32), instances)  # another reader's block
    assert copy["state"] == "skipped" and copy["duplicate_of"] == "A/1.dcm"
    assert "prediction" not in copy and copy["study_instance_uid"] == "1.2"
    assert copy["reason"] == "duplicate of A/1.dcm (same SOP Instance UID and pixels)"
    derived = _across_readers(image("C/1.dcm", "c" * 32), instances)
    assert derived["state"] == "done"
    assert derived["warning"] == "SOP Instance UID also used by A/1.dcm with other pixels"
    own = {**image("D/1.dcm", "a" * 32), "state": "skipped", "duplicate_of": "A/1.dcm"}
    assert _across_readers(own, instances) == own  # a reader's own finding passes through
    again = _across_readers({**image("old/2.dcm", "f" * 32), "sop_instance_uid": "9.9"}, instances)
    assert again["duplicate_of"] == "old/1.dcm"  # known from the recorded lines
    renamed = _across_readers({**image("E/1.dcm", "a" * 32), "sop_instance_uid": "7.7"}, instances)
    assert renamed["state"] == "done" and renamed["warning"] == (
        "same pixels as A/1.dcm under another SOP Instance UID (a copy given new UIDs?)"
    )


def _reader(folder: Path, registry: Any) -> Any:
    from batch.cluster.workers import FileWorker, WorkerJob
    from models.image_pipeline import InputSpec

    return FileWorker(WorkerJob(folder=folder), keep_pixels=True,
                      input_spec=InputSpec(64, "letterbox"), registry=registry)  # fmt: skip


def _read(reader: Any, key: str) -> tuple[dict[str, Any], bool]:
    """The reader's line and whether it handed on a fitted image."""
    from batch.interfaces import SourceItem

    out, fitted = reader.read([SourceItem(key, "image")])
    assert out[0].fitted == bool(fitted)
    return out[0].line, out[0].fitted


def test_cluster_readers_skip_a_copy_that_another_reader_decoded_first(tmp_path: Path) -> None:
    # Each reader found copies among its own files only: the copy was decoded, sent to the
    # predict actors and predicted, then recorded as a duplicate by the driver.
    from service_fixtures import dx_bytes

    from batch.cluster.copies import start_registry as _registry

    for name in ("A", "B"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "1.dcm").write_bytes(dx_bytes(SOPInstanceUID="1.2.3.4"))
    registry = _registry([{"path": "old/9.dcm", "state": "done", "sop_instance_uid": "9.9",
                           "pixel_fingerprint": "f" * 32}])  # fmt: skip
    first, first_pixels = _read(_reader(tmp_path, registry), "A/1.dcm")
    assert first["state"] == "done" and first_pixels  # on to the predict actors
    copy, copy_pixels = _read(_reader(tmp_path, registry), "B/1.dcm")  # another actor
    assert copy["state"] == "skipped" and copy["duplicate_of"] == "A/1.dcm"
    assert copy["pixel_fingerprint"] == first["pixel_fingerprint"] and not copy_pixels
    # A block retried after its reader died reads its own files again: not copies.
    again, _ = _read(_reader(tmp_path, registry), "A/1.dcm")
    assert again["state"] == "done"
    # Without the registry (lost with its node) the readers go on; the driver judges.
    ray.kill(registry)
    alone, pixels = _read(_reader(tmp_path, registry), "B/1.dcm")
    assert alone["state"] == "done" and pixels


def _image_line(path: str, state: str = "done", **extra: Any) -> dict[str, Any]:
    return {"path": path, "state": state, "kind": "image", "sop_instance_uid": "1.2.3",
            "pixel_fingerprint": "a" * 32, **extra}  # fmt: skip


def test_cluster_reads_again_a_copy_skipped_for_a_first_copy_that_then_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A reader skipped B/1.dcm as soon as A/1.dcm was decoded; A's prediction then failed.
    # On one machine B would have been predicted; on Ray it stayed skipped, naming A.
    import batch.cluster.job_runner as cluster
    from batch.interfaces import Outcome, SourceItem

    items = [SourceItem(key, "image") for key in ("A/1.dcm", "B/1.dcm", "C/1.dcm", "D/1.dcm")]
    skipped_b = _image_line("B/1.dcm", "skipped", duplicate_of="A/1.dcm")
    skipped_d = {**_image_line("D/1.dcm", "skipped", duplicate_of="old/1.dcm"),
                 "pixel_fingerprint": "d" * 32}  # fmt: skip
    blocks = {  # what the readers and predict actors hand back, block by block
        ("A/1.dcm", "B/1.dcm", "C/1.dcm", "D/1.dcm"): [
            [skipped_b, {**_image_line("C/1.dcm"), "pixel_fingerprint": "c" * 32}],
            [_image_line("A/1.dcm", "failed", error="prediction failed: RuntimeError: x")],
            [skipped_d],
        ],
        ("B/1.dcm",): [[_image_line("B/1.dcm", prediction={"positive": []})]],
    }
    phases: list[tuple[str, ...]] = []

    def run_phase(phase: Any, *args: Any, **kwargs: Any) -> Iterator[list[Outcome]]:
        keys = tuple(item.key for item in phase)
        phases.append(keys)
        for lines in blocks[keys]:
            yield [Outcome(str(x["path"]), str(x["state"]),
                           {k: v for k, v in x.items() if k not in ("path", "state", "error")},
                           x.get("error")) for x in lines]  # fmt: skip

    class NoPool:
        lost = failed_blocks = 0

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def broadcast(self, *args: Any) -> None:
            pass

        def close(self) -> None:
            pass

    monkeypatch.setattr(cluster, "_run_phase", run_phase)
    monkeypatch.setattr(cluster, "start_registry", lambda recorded: None)
    monkeypatch.setattr(cluster, "ActorPool", NoPool)
    recorded = [{**_image_line("old/1.dcm"), "pixel_fingerprint": "d" * 32}]
    spec = JobSpec(input=FolderInput(Path("/nowhere")))
    got = [
        outcome_line(o) for block in run_on_ray(spec, items, recorded, model=None) for o in block
    ]
    assert phases == [("A/1.dcm", "B/1.dcm", "C/1.dcm", "D/1.dcm"), ("B/1.dcm",)]
    by_path = {line["path"]: line for line in got}
    assert len(got) == len(by_path) == 4  # each file once
    assert by_path["A/1.dcm"]["state"] == "failed"
    assert by_path["B/1.dcm"]["state"] == "done" and "duplicate_of" not in by_path["B/1.dcm"]
    assert by_path["C/1.dcm"]["state"] == "done"
    assert by_path["D/1.dcm"] == skipped_d  # its first copy was recorded done: out at once


def test_copies_awaiting_first_hold_release_and_retry() -> None:
    from batch.cluster.copies import CopiesAwaitingFirst as _CopiesAwaitingFirst
    from batch.interfaces import SourceItem

    items = [SourceItem(key, "image") for key in ("A", "B", "C", "D", "E")]
    copies = _CopiesAwaitingFirst([], items)
    b = _image_line("B", "skipped", duplicate_of="A")
    d = _image_line("D", "skipped", duplicate_of="C")
    assert copies.settle([b, d]) == []  # both wait for their first copy
    a = _image_line("A")
    assert copies.settle([a]) == [a, b]  # A done: B is a copy of it
    c = _image_line("C", "failed")
    assert copies.settle([c]) == [c]  # C failed: D is read again
    e = _image_line("E", "skipped", duplicate_of="C")
    assert copies.settle([e]) == []  # C's fate known: E is read again at once
    assert [item.key for item in copies.retry()] == ["D", "E"]
    orphan = _image_line("Z", "skipped", duplicate_of="Y")  # not an item of this run
    assert copies.settle([orphan]) == [orphan]
    assert copies.unsettled() == []


@pytest.mark.issue(45)
def test_cluster_batch_dataset_same_training_set_as_one_machine(
    tmp_path: Path, demo_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The workers encode the PNGs; the driver names and writes them: the same files.
    from service_fixtures import write_reports_csv

    export = build_export(tmp_path / "export")
    reports = write_reports_csv(tmp_path / "reports.csv")
    key = tmp_path / "key"
    key.write_bytes(b"k" * 32)
    common = ["--model", str(demo_checkpoint), "--reports", str(reports), "--pseudonym-key",
              str(key), "--dataset-size", "64"]  # fmt: skip
    runs = {}
    for name, extra in (("one", []), ("ray", ["--ray"])):
        out, dataset = tmp_path / f"{name}.jsonl", tmp_path / f"set-{name}"
        assert main(["batch", str(export), "-o", str(out), "--dataset", str(dataset), *common,
                     *extra]) == 1  # fmt: skip
        entry = (dataset / "Data_Entry.csv").read_text().splitlines()
        pngs = {p.name: p.read_bytes() for p in (dataset / "images").iterdir()}
        runs[name] = (_lines(out), entry, pngs)
    capsys.readouterr()
    _assert_same_rows(runs["ray"][0], runs["one"][0])
    assert runs["ray"][1] == runs["one"][1] and len(runs["one"][1]) > 2  # rows, sorted
    assert runs["ray"][2] == runs["one"][2]  # names and bytes


@pytest.mark.issue(45)
def test_cluster_pool_gives_up_a_block_after_its_attempts_and_redoes_no_finished_block() -> None:
    from batch.cluster.pool import ActorPool, BlockFailure, wait_for

    # Defined here, so that Ray sends the class itself to its workers (they cannot import
    # this test module).
    class _Flaky:
        """A worker that dies (as the OOM killer would kill it) on a block holding "poison"."""

        def __init__(self, label: str) -> None:
            self.label = label

        def ready(self) -> str:
            return str(ray.get_runtime_context().get_node_id())

        def work(self, block: list[str]) -> list[str]:
            if "poison" in block:
                os._exit(1)
            return [f"{self.label}:{item}" for item in block]

    pool = ActorPool(_Flaky, size=2, init={"label": "w"}, options={"num_cpus": 0},
                     max_attempts=2, name="flaky")  # fmt: skip
    blocks = {n: [f"r{n}a", f"r{n}b"] for n in range(6)}
    blocks[3] = ["r3a", "poison"]
    for n, block in blocks.items():
        pool.submit(n, "work", block)
    results: dict[int, object] = {}
    try:
        while pool.busy:
            for finished in wait_for([pool], timeout_s=60):
                assert finished.tag not in results, "a finished block came back twice"
                results[finished.tag] = finished.value
    finally:
        pool.close()
    assert sorted(results) == list(range(6))  # every block once
    failure = results.pop(3)
    assert isinstance(failure, BlockFailure)
    assert failure.reason.startswith("flaky: worker lost 2 times on this block (last: ")
    assert results == {n: [f"w:{x}" for x in blocks[n]] for n in results}
    # two deaths on the poison block; a third when a death was first charged to a block that
    # had ended but whose result Ray had not handed back yet (it then runs alone and passes)
    assert pool.lost in (2, 3) and pool.failed_blocks == 1


@pytest.mark.issue(45)
def test_cluster_pool_block_whose_input_was_lost_fails_alone_and_keeps_its_worker() -> None:
    # A predict block's fitted images are an ObjectRef made by a file worker; if they are
    # lost (their node or owner gone), that block fails with the reason, and the predict
    # worker, which is fine, is neither charged nor replaced.
    from batch.cluster.pool import ActorPool, BlockFailure, wait_for

    class _Holder:
        def hold(self) -> list[Any]:
            return [ray.put(bytes(300_000))]  # in the object store, owned by this actor

    class _Sizer:
        def ready(self) -> str:
            return str(ray.get_runtime_context().get_node_id())

        def size(self, data: bytes) -> int:
            return len(data)

    holder = ray.remote(_Holder).options(num_cpus=0).remote()
    lost = ray.get(holder.hold.remote())[0]
    ray.kill(holder)  # the object's owner gone: the object with it, once Ray has seen it
    for _ in range(300):
        try:
            ray.get(lost, timeout=10)
        except ray.exceptions.ObjectLostError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the object outlived its owner for 30 s")
    pool = ActorPool(_Sizer, size=1, options={"num_cpus": 0}, name="sizers")
    pool.submit("lost", "size", lost)
    pool.submit("fine", "size", b"abc")
    results: dict[str, object] = {}
    try:
        while pool.busy:
            for finished in wait_for([pool], timeout_s=60):
                results[finished.tag] = finished.value
    finally:
        pool.close()
    assert results["fine"] == 3
    failure = results["lost"]
    assert isinstance(failure, BlockFailure)
    assert failure.reason.startswith("sizers: its input was lost (OwnerDiedError: ")
    assert "\n" not in failure.reason
    assert pool.lost == 0 and pool.failed_blocks == 1


@pytest.mark.issue(45)
def test_cluster_pool_hands_a_second_return_on_by_reference() -> None:
    from batch.cluster.pool import ActorPool, wait_for

    class _Two:
        def ready(self) -> str:
            return str(ray.get_runtime_context().get_node_id())

        def make(self, n: int) -> tuple[int, bytes]:
            return n, bytes(n)

        def size(self, data: bytes) -> int:
            return len(data)

    pool = ActorPool(_Two, size=1, options={"num_cpus": 0}, name="two")
    try:
        pool.submit("make", "make", 200_000, returns=2)
        made: list[Any] = []
        while not made:
            made = wait_for([pool], timeout_s=60)
        assert made[0].value == 200_000 and len(made[0].rest) == 1
        assert isinstance(made[0].rest[0], ray.ObjectRef)
        pool.submit("size", "size", made[0].rest[0])  # the bytes go actor to actor
        sized: list[Any] = []
        while not sized:
            sized = wait_for([pool], timeout_s=60)
        assert sized[0].value == 200_000 and sized[0].rest == ()
    finally:
        pool.close()


@pytest.mark.issue(45)
def test_cluster_local_ray_listens_on_loopback_only() -> None:
    # In a process of its own: this module's Ray is running already.
    script = """
import json, subprocess
import ray
from batch.cluster import connect, disconnect
connect(None, num_cpus=1, object_store_bytes=80 * 2**20)
address = ray.nodes()[0]["NodeManagerAddress"]
pids = subprocess.run(["pgrep", "-f", ray._private.worker._global_node.get_session_dir_path()],
                      capture_output=True, text=True).stdout.split()
listening = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout
mine = [line.split()[3] for line in listening.splitlines()
        if any(f"pid={pid}," in line for pid in pids)]
disconnect()
print(json.dumps({"address": address, "listening": mine}))
"""
    import shutil
    import subprocess
    import sys

    if shutil.which("ss") is None or shutil.which("pgrep") is None:
        pytest.skip("needs ss and pgrep")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["address"] == "127.0.0.1"
    assert got["listening"], "no listening socket found for the local Ray"
    assert all(a.rsplit(":", 1)[0] in ("127.0.0.1", "[::ffff:127.0.0.1]") for a in got["listening"])


@pytest.mark.issue(45)
def test_cluster_gpu_path_readers_then_predict_worker_give_one_machines_rows(
    tmp_path: Path, demo_checkpoint: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # What a GPU cluster runs (file workers fit the images, a predict worker predicts them),
    # here in this process on the CPU: the data path, not Ray's scheduling.
    from batch.cluster.job_runner import _input_spec
    from batch.cluster.workers import FileWorker, PredictWorker, WorkerJob
    from batch.engine import plan

    export = build_export(tmp_path / "export")
    one = tmp_path / "one.jsonl"
    assert main(["batch", str(export), "-o", str(one), "--model", str(demo_checkpoint)]) == 1
    capsys.readouterr()
    job = build_job(JobSpec(FolderInput(export)), labeler=PipelineLabeler(), predictor=None)
    items = plan(list(job.source.scan()), [], job.processor)
    srs = [i for i in items if i.kind == "sr"]
    reader = FileWorker(WorkerJob(folder=export), keep_pixels=True,
                        input_spec=_input_spec(demo_checkpoint))  # fmt: skip
    read, fitted = reader.read(srs)
    reader.restore([r.line for r in read])  # the SRs' labels, as the driver broadcasts them
    images, fitted_images = reader.read([i for i in items if i.kind != "sr"])
    assert not fitted and len(fitted_images) == sum(r.fitted for r in images) > 1
    lines = [r.line for r in read]
    lines += [r.line for r in PredictWorker(demo_checkpoint, "cpu").predict(images, fitted_images)]
    _assert_same_rows({str(x["path"]): x for x in lines}, _lines(one))


@pytest.mark.issue(45)
def test_cluster_two_stage_run_hands_fitted_images_to_the_predict_pool_by_reference(
    tmp_path: Path,
    demo_checkpoint: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The GPU cluster's path through Ray, with a predict worker on the CPU: the readers'
    # fitted images reach it as an ObjectRef (`returns=2`), the driver never fetches them,
    # and the rows are one machine's.
    from batch.cluster.job_runner import PredictStage
    from batch.cluster.workers import FittedImage, ItemResult
    from batch.engine import plan

    export = build_export(tmp_path / "export")
    one = tmp_path / "one.jsonl"
    assert main(["batch", str(export), "-o", str(one), "--model", str(demo_checkpoint)]) == 1
    capsys.readouterr()
    job = build_job(JobSpec(FolderInput(export)), labeler=PipelineLabeler(), predictor=None)
    items = plan(list(job.source.scan()), [], job.processor)
    fetched: list[Any] = []  # every value the driver fetches
    real_get = ray.get

    def recording_get(refs: Any, *args: Any, **kwargs: Any) -> Any:
        value = real_get(refs, *args, **kwargs)
        fetched.append(value)
        return value

    monkeypatch.setattr(ray, "get", recording_get)
    stage = PredictStage(1, options=(("num_cpus", 0),), device="cpu")
    outcomes = [o for block in run_on_ray(JobSpec(FolderInput(export)), items, [],
                model=demo_checkpoint, actors=2, block_size=2, predict_stage=stage)
                for o in block]  # fmt: skip
    got = {str(x["path"]): x for x in map(outcome_line, outcomes)}
    _assert_same_rows(got, _lines(one))
    results = [r for v in fetched if isinstance(v, list) for r in v]
    assert any(isinstance(r, ItemResult) and r.fitted for r in results)  # read, then predicted
    assert not any(isinstance(r, FittedImage) for r in results)


@pytest.mark.issue(45)
def test_cluster_block_given_up_is_split_so_a_poison_file_fails_alone() -> None:
    # One machine gives up only the files in flight when its process died; on Ray a block
    # whose worker keeps dying gets one more try per file, alone.
    from batch.cluster.job_runner import ClusterReport, _run_phase
    from batch.cluster.pool import ActorPool
    from batch.cluster.workers import ItemResult
    from batch.interfaces import SourceItem

    class Reader:  # in here, so that Ray sends the class itself to its workers
        def ready(self) -> str:
            return str(ray.get_runtime_context().get_node_id())

        def process(self, rows: list[SourceItem]) -> list[ItemResult]:
            if any(row.key == "poison.dcm" for row in rows):
                os._exit(1)  # as the OOM killer would end it
            return [ItemResult({"path": row.key, "state": "done", "kind": row.kind})
                    for row in rows]  # fmt: skip

    items = [SourceItem(f"{n}.dcm", "image") for n in range(6)]
    items.insert(2, SourceItem("poison.dcm", "image"))
    pool = ActorPool(Reader, size=2, options={"num_cpus": 0}, max_attempts=2, name="readers")
    report = ClusterReport()
    try:
        outcomes = [o for block in _run_phase(items, pool, None, 4, report) for o in block]
    finally:
        pool.close()
    by_key = {o.key: o for o in outcomes}
    assert len(outcomes) == len(by_key) == 7  # each file once
    assert by_key["poison.dcm"].state == "failed"
    assert by_key["poison.dcm"].error is not None
    assert by_key["poison.dcm"].error.startswith("readers: worker lost 2 times on this block")
    others = {key: (o.state, o.error) for key, o in by_key.items() if key != "poison.dcm"}
    assert all(state == "done" for state, _ in others.values()), others
    assert pool.lost == 3  # twice on the block of four, once on the poison alone


@pytest.mark.issue(45)
def test_cluster_refuses_a_c_store_inbox_and_names_what_to_read_instead(tmp_path: Path) -> None:
    # The inbox is `cxr listen`'s live queue on its own disk (docs/cluster.md): the
    # cluster reads the same instances from the archive instead.
    from batch.interfaces import BatchInputError
    from batch.job import InboxInput

    (tmp_path / "inbox").mkdir()
    with pytest.raises(BatchInputError, match=r"processed by the `cxr listen`.*--dicomweb"):
        list(run_on_ray(JobSpec(InboxInput(tmp_path / "inbox")), [], [], model=None))
