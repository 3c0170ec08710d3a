"""`cxr listen`: receive images by DICOM C-STORE and predict them (see app/pacs/listener.py).

Only the standard library is imported at module level (tests/app/test_cli_imports.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["add_dicomweb_auth_arguments", "dicomweb_client_from_args", "register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `listen` to `cxr`."""
    p = sub.add_parser(
        "listen",
        help="receive images by DICOM C-STORE, predict each, write one JSON line per instance",
        description="Run a DICOM Storage SCP (pynetdicom). Every instance received is kept "
        "in an inbox folder, answered with Success, predicted, and recorded as one line in "
        "OUT (the `cxr batch` line format; path = SOP Instance UID). Non-image objects are "
        "accepted and recorded as skipped with the reason. An instance already in OUT is "
        "not predicted again; instances left in the inbox by an interrupted run are "
        "processed at start. With --forward, a TID 1500 SR and a GSPS of each image are "
        "stored to the DICOMweb server by STOW-RS. Stop with Ctrl-C (SIGINT) or SIGTERM.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=11112, help="DICOM port (default 11112)")
    p.add_argument("--ae-title", default="CXR", help="this node's AE title (default CXR)")
    p.add_argument("--model", type=Path, help="checkpoint (default: CXR_MODEL if set)")
    p.add_argument("--device", default="auto")
    p.add_argument("--out", type=Path, required=True, metavar="OUT.jsonl")
    p.add_argument("--inbox", type=Path, help="received-instance folder (default OUT.inbox)")
    p.add_argument(
        "--allow-ae",
        default="",
        metavar="A,B",
        help="accept associations only from these calling AE titles (default: any)",
    )
    p.add_argument("--forward", metavar="DICOMWEB_URL", help="STOW-RS the SR and GSPS here")
    add_dicomweb_auth_arguments(p)
    p.add_argument("--chunk-size", type=int, default=8, help="images per forward pass")
    p.add_argument(
        "--max-pixels",
        type=int,
        default=50_000_000,
        help="images with more pixels fail from their header, undecoded (50000000; 0: none)",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    p.set_defaults(handler=_listen)


def add_dicomweb_auth_arguments(p: argparse.ArgumentParser) -> None:
    """--user/--password (basic) or --token (bearer) for a DICOMweb server."""
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


def dicomweb_client_from_args(url: str, args: argparse.Namespace) -> Any:
    """A `DicomwebClient` for URL with the auth and limit options of `args`, defaulting to
    the environment (CXR_DICOMWEB_PASSWORD, CXR_DICOMWEB_TOKEN, CXR_DICOMWEB_* bounds).

    Raises:
        SettingsError: a CXR_* variable is refused.
        DicomwebError: a bad URL, auth or bound.
    """
    from app.pacs.dicomweb import DicomwebClient, DicomwebLimits
    from app.settings import build_settings

    settings = build_settings()
    password = args.password or os.environ.get("CXR_DICOMWEB_PASSWORD") or None
    token = args.token or (None if args.user else os.environ.get("CXR_DICOMWEB_TOKEN")) or None
    instance_mb = getattr(args, "max_instance_mb", None) or settings.dicomweb_max_instance_mb
    return DicomwebClient(
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
    )


def _listen(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("highdicom", "pynetdicom", "httpx"):  # per-PDU / per-module chatter
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from app.pacs.listener import StoreListener

    if not 0 <= args.port <= 65535 or args.chunk_size < 1:
        raise ValueError("--port must be 0..65535 and --chunk-size >= 1")
    model_path = args.model
    if model_path is None:
        from app.settings import Settings

        model_path = Settings().model
    predictor = None
    if model_path is not None:
        from app.inference import load_model

        predictor = load_model(model_path, args.device)
    forward = dicomweb_client_from_args(args.forward, args) if args.forward else None
    listener = StoreListener(
        predictor,
        out=args.out,
        ae_title=args.ae_title,
        inbox=args.inbox,
        allow_ae=[a for a in args.allow_ae.split(",") if a.strip()],
        forward=forward,
        chunk_size=args.chunk_size,
        max_pixels=args.max_pixels or None,
    )
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    listener.start(args.host, args.port)
    sys.stderr.write(
        f"cxr listen: {args.ae_title} on {args.host}:{listener.port}"
        f"{' (DEMO model)' if predictor is not None and predictor.card.get('demo') else ''}"
        f"{'' if predictor is not None else ' (no model: images reported without prediction)'}"
        f"; results to {args.out}\n"
    )
    sys.stderr.flush()
    try:
        stop.wait()
    finally:
        listener.stop()
        if forward is not None:
            forward.close()
    c = listener.counts
    sys.stderr.write(
        f"cxr listen: {c['done']} done, {c['skipped']} skipped, {c['failed']} failed, "
        f"{c['duplicate']} duplicates ignored; wrote {args.out}\n"
    )
    return 0
