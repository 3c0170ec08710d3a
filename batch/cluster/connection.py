"""Joining a Ray cluster, or starting a local Ray bound to the loopback interface.

    with ray_session(None, verbose=False):      # a local Ray for the command, stopped after
        ...
    with ray_session("auto"):                   # the cluster this machine belongs to
        ...

A local Ray is started with the node address 127.0.0.1, so every one of its servers (GCS,
raylet, object manager, workers) listens on the loopback interface only: the command's
Ray is not reachable from the network. Ray resolves "127.0.0.1" given as a node address to
the machine's outward address on Linux, unless Ray clusters are switched off, as they are on
macOS and Windows; `_loopback_node` switches them off while the local Ray starts.

Ray's own messages (its start-up lines, the token-auth notice, the workers' output) stay
below the command's progress bar and summary: at ERROR unless `verbose`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["cluster_cpus", "cluster_gpus", "connect", "disconnect", "ray_session"]


@contextlib.contextmanager
def _loopback_node() -> Iterator[None]:
    from ray._private import ray_constants

    saved = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False  # node address: 127.0.0.1, not the outward one
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved


def _is_loopback(address: str) -> bool:
    host = address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")


def connect(
    address: str | None,
    *,
    num_cpus: int | None = None,
    object_store_bytes: int | None = None,
    verbose: bool = False,
) -> bool:
    """Join the Ray cluster at `address`, or start a local Ray on 127.0.0.1 (None or "").

    Args:
        address: "auto", "ray://HOST:10001" or HOST:6379; None or "" for a local Ray.
        num_cpus: CPUs of a local Ray (None: all); ignored with an address.
        object_store_bytes: a local Ray's object store (None: Ray's default, 30% of memory).
        verbose: Ray's INFO logs and the workers' output on stderr (else errors only).

    Returns:
        Whether this call connected (False: this process was connected already).
    """
    import ray

    if ray.is_initialized():
        return False
    level = logging.INFO if verbose else logging.ERROR
    if address:
        # The driver only: nothing is started on this machine (`ray start` did that). A
        # cluster on 127.0.0.1 is reached there, not at the machine's outward address.
        loopback = _loopback_node() if _is_loopback(address) else contextlib.nullcontext()
        with loopback:
            ray.init(address=address, log_to_driver=verbose, logging_level=level)
        return True
    with _loopback_node():
        ray.init(
            num_cpus=num_cpus,
            object_store_memory=object_store_bytes,
            include_dashboard=False,
            log_to_driver=verbose,
            logging_level=level,
        )
    return True


def disconnect() -> None:
    """Leave the cluster (a local Ray started by `connect` stops)."""
    import ray

    ray.shutdown()


@contextlib.contextmanager
def ray_session(
    address: str | None, *, num_cpus: int | None = None, verbose: bool = False
) -> Iterator[None]:
    """`connect` for the duration of the block, then `disconnect` if this call connected."""
    joined = connect(address, num_cpus=num_cpus, verbose=verbose)
    try:
        yield
    finally:
        if joined:
            disconnect()


def _resources() -> dict[str, float]:
    import ray

    return dict(ray.cluster_resources())  # type: ignore[no-untyped-call]


def cluster_cpus() -> int:
    """CPUs of the cluster (at least 1)."""
    return max(1, int(_resources().get("CPU", 1)))


def cluster_gpus() -> int:
    """GPUs of the cluster."""
    return int(_resources().get("GPU", 0))
