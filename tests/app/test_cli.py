"""The `cxr` console script: `app.cli.run`."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from app import cli

ROOT = Path(__file__).resolve().parents[2]


def test_console_script_is_run() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["cxr"] == "app.cli:run"


def test_run_exits_with_the_commands_status_after_freezing_the_heap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli, "main", lambda: calls.append("main") or 3)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    with pytest.raises(SystemExit) as exit_info:
        cli.run()
    assert exit_info.value.code == 3 and calls == ["main", "freeze"]


def test_a_real_process_still_writes_and_flushes_everything(tmp_path: Path) -> None:
    # Frozen objects skip the last collection, not atexit: every row and line arrives.
    reports = tmp_path / "reports.csv"
    reports.write_text("id,report\n1,No pneumothorax.\n2,Small left effusion.\n3,Clear.\n")
    out = tmp_path / "labels.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "label", str(reports), "-o", str(out)],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["1", "2", "3"]
