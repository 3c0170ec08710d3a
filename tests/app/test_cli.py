"""The `cxr` console script: `app.cli.run`."""

from __future__ import annotations

import gc
import json
import logging
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


@pytest.mark.parametrize(
    ("argv", "level", "style"),
    [
        (["serve", "--log-level", "debug"], "DEBUG", "service"),
        (["db", "current"], "INFO", "service"),
        (["predict", "scan.dcm", "--model", "m.pt", "-o", "out"], "INFO", "plain"),
        (["label", "reports.csv"], "WARNING", "plain"),
    ],
)
def test_cli_set_up_logging_takes_each_commands_level_and_style(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], level: str, style: str
) -> None:
    calls: list[dict[str, object]] = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kwargs: calls.append(kwargs))
    cli.set_up_logging(cli.build_parser().parse_args(argv))
    (call,) = calls
    assert call["level"] == getattr(logging, level)
    assert call["format"] == cli._LOG_FORMATS[style]
    assert call["stream"] is sys.stderr
