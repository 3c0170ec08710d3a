"""`cxr`: the project's single command-line entry point.

Each area registers its subcommands from its own module; those modules import
only argparse at module level so that `cxr label` starts without torch or the
web stack (see tests/app/test_cli_imports.py).
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from typing import NoReturn

from app import cli_labeler, cli_models, cli_pacs, cli_service

__all__ = ["build_parser", "main", "run"]


def build_parser() -> argparse.ArgumentParser:
    """Build the `cxr` argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="cxr",
        description="Chest X-ray report labeler, weakly-supervised classifier and service.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    cli_labeler.register(sub)
    cli_models.register(sub)
    cli_service.register(sub)
    cli_pacs.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run `cxr` and return its exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
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
    status = main()
    # The command is done and has closed what it opened. The interpreter's last garbage
    # collection would walk the million objects torch and its dependencies create (0.3 s of
    # a 4 s `cxr predict`); frozen, they are skipped. atexit handlers (log flushing,
    # temporary directories) still run.
    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":  # pragma: no cover
    run()
