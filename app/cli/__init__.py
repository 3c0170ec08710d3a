"""`cxr`: the project's single command-line entry point.

Each command group registers its subcommands from its own module (`report_commands`,
`model_commands`, `service_commands`, `batch_command`, `listen_command`, `ask_command`);
what two of them share is in `common`, and none imports another. They import only the
standard library and `common` at module level, so that `cxr label` starts without torch
or the web stack (see tests/app/test_cli_label.py), and a command imports only the module
that registers it (`build_parser`).
"""

from __future__ import annotations

import argparse
import atexit
import difflib
import gc
import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from app.blas import one_blas_thread

__all__ = ["CxrArgumentParser", "build_parser", "exit_now", "main", "run", "set_up_logging"]


class CxrArgumentParser(argparse.ArgumentParser):
    """argparse with "did you mean" for mistyped options, subcommands and choices.

    Every subcommand's parser is one too (`add_subparsers` builds them with the parent's
    class), so an unknown option is reported by the subcommand that got it, with its own
    usage line (`cxr label: error: ...`), not by `cxr` with the top-level usage. Exit
    status 2, as argparse.
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        # `cxr` takes no unknown arguments anywhere: refuse them here, where the subcommand
        # that received them knows its own options.
        if extras:
            self.error(self._unrecognized(extras))
        return parsed, extras

    def _unrecognized(self, extras: list[str]) -> str:
        options = [e for e in extras if e.startswith("-") and len(e) > 1]
        if not options:
            return f"unrecognized arguments: {' '.join(extras)}"
        typed = options[0].split("=", 1)[0]
        known = [s for a in self._actions for s in a.option_strings]
        close = difflib.get_close_matches(typed, known, n=1)
        hint = f"; did you mean {close[0]}?" if close else f" (see {self.prog} --help)"
        return f"unrecognized argument {typed}{hint}"

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is not None and isinstance(value, str) and value not in choices:
            names = [c for c in choices if isinstance(c, str)]
            close = difflib.get_close_matches(value, names, n=1)
            what = (
                "unknown command"
                if isinstance(action, argparse._SubParsersAction)
                else f"argument {'/'.join(action.option_strings) or action.dest}: invalid choice"
            )
            hint = f"; did you mean {close[0]}?" if close else f" (choose from {', '.join(names)})"
            self.error(f"{what} {value!r}{hint}")
        super()._check_value(action, value)


#: (module of `app.cli`, its function that registers commands, the commands it registers),
#: in the order `cxr --help` lists them.
_REGISTRARS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("report_commands", "register", ("label", "evaluate-labels")),
    ("model_commands", "register", ("train", "prepare", "evaluate", "predict", "phantoms")),
    ("service_commands", "register_serve", ("serve",)),
    ("batch_command", "register", ("batch",)),
    ("service_commands", "register_admin", ("db", "apikey")),
    ("listen_command", "register", ("listen",)),
    ("ask_command", "register", ("ask",)),
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Build the `cxr` argument parser.

    Args:
        command: the command about to run: only the module that registers it is imported
            and registered. Without bytecode kept (PYTHONDONTWRITEBYTECODE) each module is
            compiled on every start: the others cost `cxr label` 15 ms. None, or a name no
            module registers: every command, as `cxr --help` and a mistyped command's
            "did you mean" need them.
    """
    parser = CxrArgumentParser(
        prog="cxr",
        description="Chest X-ray report labeler, weakly-supervised classifier and service.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = [r for r in _REGISTRARS if command in r[2]] or _REGISTRARS
    for module, function, _ in chosen:
        register: Callable[[argparse._SubParsersAction[Any]], None] = getattr(
            importlib.import_module(f"app.cli.{module}"), function
        )
        register(sub)
    return parser


#: Log line formats by the `log_style` a subcommand's parser sets: the long-running ones
#: (serve, batch, listen, db) stamp each line; the others write plain progress lines.
_LOG_FORMATS = {
    "plain": "%(message)s",
    "service": "%(asctime)s %(levelname)s %(name)s: %(message)s",
}
#: Third-party loggers that chatter at INFO. httpx names every request URL, and
#: DICOMweb URLs name studies by UID; highdicom and pynetdicom log per module and per PDU;
#: alembic announces each of its plugins (the migrations themselves still log).
_QUIET_LOGGERS = ("alembic.runtime.plugins", "highdicom", "httpx", "pynetdicom")


def set_up_logging(args: argparse.Namespace) -> None:
    """Send log records to stderr at the subcommand's level, in its style.

    A subcommand's parser may set `log_level` (its --log-level option, or a default) and
    `log_style` ("plain" or "service"); without them, warnings only, plain.
    """
    level = str(getattr(args, "log_level", "warning")).upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.WARNING),
        format=_LOG_FORMATS[getattr(args, "log_style", "plain")],
        stream=sys.stderr,
    )
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `cxr` and return its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    set_up_logging(args)
    try:
        status: int = args.handler(args)
    except KeyboardInterrupt:
        sys.stderr.write("cxr: interrupted\n")
        return 130
    except (ValueError, OSError) as exc:
        # Expected failures (LabelerError, ImageError, ModelsError and CommandError are
        # ValueErrors): one line, no traceback.
        sys.stderr.write(f"cxr {args.command}: error: {exc}\n")
        return 2
    return status


def run() -> NoReturn:
    """The `cxr` console script: `main`, then exit with its status."""
    # numpy's OpenBLAS multiplies only small matrices here (overlay projections, the
    # labeler's parser: `app.blas`), yet after each call its idle threads spin on the cores
    # torch's threads compute on: 0.3 s of CPU in a 7 s `cxr predict` on two cores. One
    # thread unless the caller chose; read when numpy loads, which nothing above has done
    # yet. Child processes inherit it.
    one_blas_thread()
    status = main()
    # The command is done and has closed what it opened. The interpreter's last garbage
    # collection would walk the million objects torch and its dependencies create (0.3 s of
    # a 4 s `cxr predict`); frozen, they are skipped.
    gc.freeze()
    exit_now(status)


def exit_now(status: int) -> NoReturn:
    """End the process once the command is done, without the interpreter's teardown.

    After the atexit handlers (log flushing, temporary directories, multiprocessing's
    children) and a flush of stdout and stderr, nothing left in the process writes
    anything: what remains of a normal exit is freeing every module and torch's C++
    static destructors, which unregister its thousands of operator kernels one by one
    (0.3 s of a 7 s `cxr predict` on two cores). A thread that is not a daemon still
    running, or a standard stream that cannot be flushed (a closed pipe), takes the
    normal exit instead, which waits for the thread or reports the stream as usual.
    """
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if any(t.is_alive() and not t.daemon for t in others):
        sys.exit(status)
    atexit._run_exitfuncs()  # runs each handler once, then forgets them
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        sys.exit(status)
    os._exit(status)
