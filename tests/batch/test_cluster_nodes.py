"""`cxr batch` on a real two-node Ray cluster on 127.0.0.1: a head and a second node started
as separate `ray start` processes (one CPU each), work spread over both, the second node
killed mid-run; every file is recorded once, with the rows of one machine.

Skipped when Ray cannot start here. Every process the cluster started is killed by id at
the end (found by the cluster's own folder), never by name. See tests/batch/ray_nodes.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_nodes import ENV, kill_under, start_two_nodes
from service_fixtures import chest_pixels, dx_bytes

from app.cli import main

pytest.importorskip("ray")

pytestmark = [pytest.mark.issue(45), pytest.mark.slow]

HERE = Path(__file__).resolve().parent


@pytest.fixture
def two_nodes() -> Iterator[tuple[str, int]]:
    """(the head's address, the second node's raylet port)."""
    folder = tempfile.mkdtemp(prefix="cxr-ray-", dir="/tmp")  # Ray's socket paths are short
    try:
        try:
            cluster = start_two_nodes(folder)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"ray start failed here: {exc}")
        yield cluster
    finally:
        kill_under(folder)
        shutil.rmtree(folder, ignore_errors=True)


def _export(root: Path, n: int) -> Path:
    for i in range(n):
        path = root / f"P{i % 3}" / f"IM{i:04d}.dcm"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(dx_bytes(accession=f"A{i}", pixels=chest_pixels(seed=i)))
    (root / "broken.dcm").write_bytes(dx_bytes()[:-1000])  # corrupt: fails the same on Ray
    return root


def test_cluster_two_nodes_second_killed_midrun_every_file_once(
    two_nodes: tuple[str, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    address, second_port = two_nodes
    export = _export(tmp_path / "export", 48)
    one = tmp_path / "one.jsonl"
    assert main(["batch", str(export), "-o", str(one), "--workers", "0"]) == 1  # broken.dcm
    want = {line["path"]: line for line in map(json.loads, one.read_text().splitlines())}
    capsys.readouterr()

    out = tmp_path / "driver.json"
    root = str(HERE.parents[1])
    env = {**os.environ, **ENV, "PYTHONPATH": os.pathsep.join([root, str(HERE.parent / "app")])}
    done = subprocess.run(
        [
            sys.executable,
            str(HERE / "ray_nodes.py"),
            address,
            str(export),
            str(second_port),
            str(out),
        ],  # fmt: skip
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(out.read_text())
    assert got["nodes"] == ["127.0.0.1", "127.0.0.1"]  # two nodes, both on the loopback
    assert got["killed"], f"the second node never held a block: {got['blocks_by_node']}"
    assert got["blocks_by_node"]["second"] >= 1 and got["blocks_by_node"]["head"] >= 1
    # its worker, replaced (the replacement waits for a free CPU)
    assert got["lost"] >= 1, f"the kill went unnoticed: {got['at_kill']}"
    paths = [str(line["path"]) for line in got["lines"]]
    assert len(paths) == len(set(paths)) == len(got["items"]) == len(want)  # each file once
    assert {str(line["path"]): line for line in got["lines"]} == want  # one machine's rows
