"""The `cxr` console script: `app.cli.run`."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import subprocess
import sys
import textwrap
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

    def main() -> int:
        calls.append("main")
        return 3

    def exit_now(status: int) -> None:
        calls.append(f"exit {status}")
        raise SystemExit(status)

    monkeypatch.setattr(cli, "main", main)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    monkeypatch.setattr(cli, "exit_now", exit_now)
    with pytest.raises(SystemExit) as exit_info:
        cli.run()
    assert exit_info.value.code == 3 and calls == ["main", "freeze", "exit 3"]


@pytest.mark.parametrize(("given", "seen"), [(None, "1"), ("4", "4")])
def test_run_gives_numpys_blas_one_thread_unless_the_caller_chose(
    given: str | None, seen: str
) -> None:
    code = (
        "import os, sys\n"
        "import app.cli\n"
        "assert 'numpy' not in sys.modules  # else the setting would come too late\n"
        "app.cli.main = lambda: print(os.environ['OPENBLAS_NUM_THREADS']) or 0\n"
        "app.cli.run()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == seen


def _exit_now_in_a_process(body: str, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    """Run `body` (Python, sees `tmp`, `exit_now`) in a fresh interpreter."""
    script = tmp_path / "script.py"
    script.write_text(
        "import atexit, sys, threading, time\n"
        "from pathlib import Path\n"
        "from app.cli import exit_now\n"
        f"tmp = Path({str(tmp_path)!r})\n" + textwrap.dedent(body)
    )
    return subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, timeout=120, check=False
    )


def test_exit_now_runs_atexit_handlers_flushes_the_streams_and_keeps_the_status(
    tmp_path: Path,
) -> None:
    done = _exit_now_in_a_process(
        """
        atexit.register(lambda: (tmp / "atexit").write_text("ran"))
        sys.stdout.write("x" * 1_000_000)  # far more than a pipe and a stdio buffer hold
        sys.stderr.write("last line, no newline")
        exit_now(3)
        """,
        tmp_path,
    )
    assert done.returncode == 3, done.stderr
    assert done.stdout == b"x" * 1_000_000
    assert done.stderr == b"last line, no newline"
    assert (tmp_path / "atexit").read_text() == "ran"


def test_exit_now_waits_for_a_thread_that_is_not_a_daemon(tmp_path: Path) -> None:
    done = _exit_now_in_a_process(
        """
        def late() -> None:
            time.sleep(0.5)
            (tmp / "thread").write_text("done")

        threading.Thread(target=late).start()
        exit_now(0)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "thread").read_text() == "done"


def test_exit_now_with_its_reader_gone_fails_as_a_normal_exit_does() -> None:
    # `cxr ... | head`: the reader has gone. The flush fails; the normal exit then reports
    # the broken pipe with a failing status, as it would without `exit_now`.
    def status(ending: str) -> tuple[int, bytes]:
        code = f"import sys, time; time.sleep(0.5); sys.stdout.write('x' * 100); {ending}"
        proc = subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        err = proc.stderr.read()
        return proc.wait(timeout=120), err.strip().splitlines()[-1]

    fast = status("from app.cli import exit_now; exit_now(0)")
    assert fast == status("sys.exit(0)")
    assert fast[0] != 0 and b"BrokenPipeError" in fast[1]


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


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


def test_a_command_builds_the_parser_of_its_own_module_only() -> None:
    every = _commands(cli.build_parser())
    # the table of who registers what is the truth: each module registers just its names
    assert every == [name for _, _, names in cli._REGISTRARS for name in names]
    for _, _, names in cli._REGISTRARS:
        for name in names:
            assert _commands(cli.build_parser(name)) == list(names)
    # --help and a mistyped command see every command
    assert _commands(cli.build_parser("--help")) == every
    assert _commands(cli.build_parser("lable")) == every


def test_cxr_label_imports_no_other_commands_module() -> None:
    code = (
        "import sys\n"
        "from app import cli\n"
        "cli.build_parser('label').parse_args(['label', 'reports.csv'])\n"
        "print(*sorted(m for m in sys.modules if m.startswith('app.cli.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["app.cli.common", "app.cli.report_commands"]
