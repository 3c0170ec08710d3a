"""What two or more `cxr` commands share: options, the DICOMweb client, errors.

The command modules import this module and the libraries, never each other. Only the
standard library is imported at module level, so that `cxr label` and `cxr --help` start
without torch or the web stack (tests/app/test_cli_label.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batch.pacs.dicomweb import DicomwebClient, DicomwebServer

__all__ = [
    "DEMO_HELP",
    "CommandError",
    "add_demo_argument",
    "demo_model_path",
    "model_hint",
    "add_dicomweb_auth_arguments",
    "add_precision_argument",
    "add_ray_argument",
    "dicomweb_client_from_args",
    "dicomweb_server_from_args",
    "fail",
]


class CommandError(ValueError):
    """An expected failure: `cxr` reports it as one line on stderr, exit status 2."""


def fail(command: str, message: str) -> int:
    """Write `cxr COMMAND: error: MESSAGE` to stderr and return exit status 2 (as a raised
    `CommandError` would), for handlers that return their status."""
    sys.stderr.write(f"cxr {command}: error: {message}\n")
    return 2


DEMO_HELP = (
    "use the demo model shipped with cxr (models/configs/demo_phantoms.v3.pt: trained on "
    "synthetic phantoms, not for clinical use); the same model as `cxr serve --demo`"
)


def add_demo_argument(p: argparse._ActionsContainer) -> None:
    """`--demo`: the one spelling of "use the shipped demo model" (serve, predict, ask)."""
    p.add_argument("--demo", action="store_true", help=DEMO_HELP)


def demo_model_path(cache_dir: str | None = None) -> str:
    """The demo checkpoint every command uses: the shipped one, else one built (once) in
    `cache_dir` or the settings' storage folder."""
    from pathlib import Path

    from models.demo import ensure_demo_model

    if cache_dir is None:
        from app.settings import build_settings

        cache_dir = str(build_settings().storage_dir)
    return str(ensure_demo_model(Path(cache_dir)))


def model_hint(path: str) -> str:
    """What to say when a checkpoint given with --model is not there."""
    return (
        f"--model {path}: no such checkpoint file; train one with `cxr train`, or try the "
        "shipped demo model with --demo (not for clinical use)"
    )


def add_precision_argument(p: argparse.ArgumentParser, *, env: bool = False) -> None:
    """`--precision` of the commands that run a model (`models.precision`); with `env`, its
    default is CXR_PRECISION (None here, the settings' value then)."""
    p.add_argument(
        "--precision",
        choices=["auto", "float32", "bfloat16"],
        default=None if env else "auto",
        help=f"arithmetic of the model: auto (default{', or CXR_PRECISION' if env else ''}: "
        "bfloat16 on a GPU that computes it natively, else float32), float32, or bfloat16 "
        "(on CPUs with AMX or AVX512-BF16 several times faster; probabilities move by about "
        "0.01)",
    )


def add_ray_argument(p: argparse.ArgumentParser) -> None:
    """Add `--ray [ADDRESS]` to a command (`cxr label`, `cxr batch`; see `batch.cluster`)."""
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run on Ray: a local Ray without ADDRESS (listening on 127.0.0.1 only), else "
        "the cluster at ADDRESS ('auto', 'ray://HEAD:10001'); see docs/cluster.md",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="with --ray: also show Ray's own logs and its workers' output (default: errors)",
    )


def add_dicomweb_auth_arguments(p: argparse._ActionsContainer) -> None:
    """--user/--password (basic) or --token (bearer) for a DICOMweb server, and --timeout
    (to a parser or to one of its argument groups)."""
    p.add_argument("--user", help="DICOMweb basic-auth user")
    p.add_argument(
        "--password",
        help="DICOMweb basic-auth password (default: CXR_DICOMWEB_PASSWORD; prefer the "
        "variable, a command line is visible to other users)",
    )
    p.add_argument("--token", help="DICOMweb bearer token (default: CXR_DICOMWEB_TOKEN if set)")
    p.add_argument(
        "--timeout",
        type=float,
        help="seconds for a whole DICOMweb request, connection to last byte, not per read "
        "(default CXR_DICOMWEB_TIMEOUT_S, 120)",
    )


def dicomweb_server_from_args(url: str, args: argparse.Namespace) -> DicomwebServer:
    """The DICOMweb server at URL with the auth and limit options of `args`, defaulting to
    the environment (CXR_DICOMWEB_PASSWORD, CXR_DICOMWEB_TOKEN, CXR_DICOMWEB_* bounds); Ray
    workers open their own clients from it.

    Raises:
        SettingsError: a CXR_* variable is refused.
    """
    from app.settings import build_settings
    from batch.pacs.dicomweb import DicomwebLimits, DicomwebServer

    settings = build_settings()
    password = args.password or os.environ.get("CXR_DICOMWEB_PASSWORD") or None
    token = args.token or (None if args.user else os.environ.get("CXR_DICOMWEB_TOKEN")) or None
    instance_mb = getattr(args, "max_instance_mb", None) or settings.dicomweb_max_instance_mb
    return DicomwebServer(
        url,
        user=args.user,
        password=password if args.user else None,
        token=token,
        timeout=args.timeout if args.timeout is not None else settings.dicomweb_timeout_s,
        limits=DicomwebLimits(
            max_instance_bytes=int(instance_mb * 2**20),
            max_json_bytes=int(settings.dicomweb_max_json_mb * 2**20),
            max_results=getattr(args, "max_results", None) or settings.dicomweb_max_results,
        ),
        # UIDs are identifiers (PS3.15 replaces them): logged only when the operator allows
        log_uids=settings.log_patient_data,
    )


def dicomweb_client_from_args(url: str, args: argparse.Namespace) -> DicomwebClient:
    """A `DicomwebClient` for URL with the options of `args` (`dicomweb_server_from_args`).

    Raises:
        SettingsError: a CXR_* variable is refused.
        DicomwebError: a bad URL, auth or bound.
    """
    return dicomweb_server_from_args(url, args).client()
