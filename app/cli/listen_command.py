"""`cxr listen`: receive images by DICOM C-STORE and predict them (see batch/listen/listener.py).

Only the standard library and `app.cli.common` are imported at module level
(tests/app/test_cli_label.py).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from app.cli.common import (
    add_dicomweb_auth_arguments,
    add_precision_argument,
    dicomweb_client_from_args,
)

if TYPE_CHECKING:
    from app.settings import Settings
    from batch.labeling import PipelineLabeler
    from batch.listen.association_guard import ListenerLimits

T = TypeVar("T")

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `listen` to `cxr`."""
    p = sub.add_parser(
        "listen",
        help="receive images by DICOM C-STORE, predict each, write one JSON line per instance",
        description="Run a DICOM Storage SCP (pynetdicom). Every instance received is kept "
        "in an inbox folder, answered with Success, predicted, and recorded as one line in "
        "OUT (the `cxr batch` line format; path = SOP Instance UID). Non-image objects are "
        "accepted and recorded as skipped with the reason. An instance already in OUT is "
        "not predicted again (a copy with other content is refused, 0x0111); instances "
        "left in the inbox by an interrupted run are processed at start. Senders are "
        "bounded (see 'limits'); a non-loopback --host needs --allow-host or --allow-ae. "
        "With --forward, a TID 1500 SR and a GSPS of each image are "
        "stored to the DICOMweb server by STOW-RS. Stop with Ctrl-C (SIGINT) or SIGTERM.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=11112, help="DICOM port (default 11112)")
    p.add_argument("--ae-title", default="CXR", help="this node's AE title (default CXR)")
    p.add_argument("--model", type=Path, help="checkpoint (default: CXR_MODEL if set)")
    p.add_argument("--device", default="auto")
    add_precision_argument(p, env=True)
    p.add_argument("--out", type=Path, required=True, metavar="OUT.jsonl")
    p.add_argument("--inbox", type=Path, help="received-instance folder (default OUT.inbox)")
    p.add_argument(
        "--allow-ae",
        default="",
        metavar="A,B",
        help="accept associations only from these calling AE titles (default: any)",
    )
    p.add_argument(
        "--allow-host",
        default="",
        metavar="ADDR,NET",
        help="accept connections only from these addresses or networks, e.g. "
        "10.0.0.5,10.0.1.0/24 (default: any)",
    )
    p.add_argument(
        "--allow-any-caller",
        action="store_true",
        help="allow a non-loopback --host without --allow-ae or --allow-host (an open "
        "listener: anyone who reaches the port may send); refused otherwise",
    )
    _add_limit_arguments(p)
    p.add_argument("--forward", metavar="DICOMWEB_URL", help="STOW-RS the SR and GSPS here")
    add_dicomweb_auth_arguments(p)
    p.add_argument("--chunk-size", type=int, default=8, help="images per forward pass")
    p.add_argument(
        "--decode-slots",
        type=_positive,
        default=2,
        help="images decoded at once, each in a process of its own and passed on as it "
        "finishes, so a slow one holds one slot, not the images behind it (default 2)",
    )
    p.add_argument(
        "--max-pixels",
        type=int,
        default=50_000_000,
        help="images with more pixels fail from their header, undecoded (50000000; 0: none)",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    p.set_defaults(handler=_listen, log_style="service")


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= 64:
        raise argparse.ArgumentTypeError(f"{value!r}: a whole number from 1 to 64")
    return number


def _add_limit_arguments(p: argparse.ArgumentParser) -> None:
    """The "limits" group: what one sender can hold; None leaves its CXR_LISTEN_* setting."""
    limits = p.add_argument_group(
        "limits",
        "bounds on what one sender can hold (default: the CXR_LISTEN_* setting of the same "
        "name, else the value shown; see docs/security/listener.md)",
    )
    limits.add_argument(
        "--max-dataset-mb",
        type=float,
        help="abort a C-STORE whose dataset grows beyond this many MiB while it is received "
        "(CXR_LISTEN_MAX_DATASET_MB, 128)",
    )
    limits.add_argument(
        "--max-pdu",
        type=int,
        help="maximum PDU length advertised and enforced, bytes (CXR_LISTEN_MAX_PDU, 131072)",
    )
    limits.add_argument(
        "--max-associations",
        type=int,
        help="associations open at once, all senders (CXR_LISTEN_MAX_ASSOCIATIONS, 32)",
    )
    limits.add_argument(
        "--max-associations-per-host",
        type=int,
        help="connections open at once from one address (CXR_LISTEN_MAX_ASSOCIATIONS_PER_HOST, 4)",
    )
    limits.add_argument(
        "--association-timeout",
        type=float,
        metavar="S",
        help="seconds from connection to a complete A-ASSOCIATE-RQ "
        "(CXR_LISTEN_ASSOCIATION_TIMEOUT_S, 10)",
    )
    limits.add_argument(
        "--idle-timeout",
        type=float,
        metavar="S",
        help="abort an association silent this long (CXR_LISTEN_IDLE_TIMEOUT_S, 60)",
    )
    limits.add_argument(
        "--max-association-duration",
        type=float,
        metavar="S",
        help="abort an association open this long (CXR_LISTEN_MAX_ASSOCIATION_S, 3600)",
    )
    limits.add_argument(
        "--evict-quiet-after",
        type=float,
        metavar="S",
        help="at the association cap, abort the association that has received no instance "
        "for longest, if for at least this long, for a new one (CXR_LISTEN_EVICT_QUIET_S, 10)",
    )
    limits.add_argument(
        "--min-free-mb",
        type=float,
        metavar="MB",
        help="refuse instances (0xA700, the sender retries) while the inbox's file system has "
        "less than this many MiB free (CXR_LISTEN_MIN_FREE_MB, 1024; 0: no reserve)",
    )


def _listen(args: argparse.Namespace) -> int:
    from app.settings import build_settings
    from batch.listen.listener import StoreListener

    if not 0 <= args.port <= 65535 or args.chunk_size < 1:
        raise ValueError("--port must be 0..65535 and --chunk-size >= 1")
    settings = build_settings()
    limits = _listener_limits(args, settings)
    from models.decode_pool import start_fork_server

    # Received images are decoded in a worker process forked from it: started before
    # torch's import, it stays small (a decoder that crashes fails one instance only).
    start_fork_server()
    model_path = args.model if args.model is not None else settings.model
    predictor = None
    if model_path is not None:
        from app.inference import load_model

        predictor = load_model(model_path, args.device, args.precision or settings.precision)
    forward = dicomweb_client_from_args(args.forward, args) if args.forward else None
    listener = StoreListener(
        predictor,
        out=args.out,
        ae_title=args.ae_title,
        inbox=args.inbox,
        allow_ae=[a for a in args.allow_ae.split(",") if a.strip()],
        allow_hosts=[h for h in args.allow_host.split(",") if h.strip()],
        allow_any_caller=args.allow_any_caller,
        forward=forward,
        chunk_size=args.chunk_size,
        decode_slots=args.decode_slots,
        max_pixels=args.max_pixels or None,
        limits=limits,
        log_uids=settings.log_patient_data,
        labeler=_labeler(),
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
        f"{c['duplicate']} duplicates ignored, {c['conflict']} conflicting copies refused, "
        f"{c['disk_full']} refused for disk space, "
        f"{c['refused']} connections refused and {c['aborted']} aborted by a limit; "
        f"wrote {args.out}\n"
    )
    return 0


def _listener_limits(args: argparse.Namespace, settings: Settings) -> ListenerLimits:
    """`ListenerLimits` from the flags, each defaulting to its CXR_LISTEN_* setting."""
    from batch.listen.association_guard import ListenerLimits

    def pick(flag: T | None, setting: T) -> T:
        return setting if flag is None else flag

    return ListenerLimits(
        max_pdu=pick(args.max_pdu, settings.listen_max_pdu),
        max_dataset_bytes=int(
            pick(args.max_dataset_mb, settings.listen_max_dataset_mb) * 1024 * 1024
        ),
        max_associations=pick(args.max_associations, settings.listen_max_associations),
        max_associations_per_host=pick(
            args.max_associations_per_host, settings.listen_max_associations_per_host
        ),
        association_timeout_s=pick(args.association_timeout, settings.listen_association_timeout_s),
        idle_timeout_s=pick(args.idle_timeout, settings.listen_idle_timeout_s),
        max_association_s=pick(args.max_association_duration, settings.listen_max_association_s),
        evict_quiet_s=pick(args.evict_quiet_after, settings.listen_evict_quiet_s),
        min_free_bytes=int(pick(args.min_free_mb, settings.listen_min_free_mb) * 1024 * 1024),
    )


def _labeler() -> PipelineLabeler:
    """The report labeler of received reports, its parser on the process's BLAS
    (`app.blas`); built at its first report."""
    from app.blas import labeler_blas
    from batch.labeling import PipelineLabeler
    from labeler.config import LabelerConfig

    return PipelineLabeler(LabelerConfig(blas=labeler_blas()))
