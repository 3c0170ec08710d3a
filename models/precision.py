"""The arithmetic inference runs in: float32, or bfloat16 autocast.

"auto" is bfloat16 on a GPU that computes it natively (compute capability 8.0 and up: the
A100, H100, L4, ...), as training there runs; float32 on older GPUs and on the CPU. On the
CPU bfloat16 is a choice: on processors with AMX or AVX512-BF16 (Intel Xeon from Sapphire
Rapids, AMD from Zen 4) oneDNN runs its convolutions several times faster than in float32,
but the probabilities move by about 1e-2 from the float32 ones, so a CPU run gives the same
numbers as before unless asked.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from typing import Any, Literal, cast

import torch

from models.errors import ModelsError

__all__ = [
    "PRECISIONS",
    "Precision",
    "ResolvedPrecision",
    "inference_autocast",
    "inference_record",
    "native_bfloat16",
    "resolve_precision",
]

log = logging.getLogger(__name__)

Precision = Literal["auto", "float32", "bfloat16"]
ResolvedPrecision = Literal["float32", "bfloat16"]
PRECISIONS: tuple[str, ...] = ("auto", "float32", "bfloat16")


def resolve_precision(precision: str, device: torch.device) -> ResolvedPrecision:
    """What `precision` means on `device`: "auto" becomes float32 or bfloat16 (see module).

    An explicit bfloat16 is honoured where the hardware only emulates it, with a warning:
    it then runs slower than float32.

    Raises:
        ModelsError: not one of `PRECISIONS`.
    """
    if precision not in PRECISIONS:
        raise ModelsError(f"unknown precision {precision!r}; expected {', '.join(PRECISIONS)}")
    native = native_bfloat16(device)
    if precision == "auto":
        return "bfloat16" if device.type == "cuda" and native else "float32"
    if precision == "bfloat16" and not native:
        _warn_emulated(str(device))
    return cast(ResolvedPrecision, precision)


@functools.cache  # once per device and process: every model load resolves it again
def _warn_emulated(device: str) -> None:
    log.warning(
        "%s has no native bfloat16 arithmetic (%s): bfloat16 runs slower than float32 here",
        device,
        "compute capability 8.0 or later" if device.startswith("cuda") else "AMX or AVX512-BF16",
    )


def inference_record(device: torch.device, precision: ResolvedPrecision) -> dict[str, str]:
    """What results record of how they were computed: `{"device", "precision"}`."""
    return {"device": str(device), "precision": precision}


def inference_autocast(
    device: torch.device, precision: ResolvedPrecision, *, cache_enabled: bool = True
) -> contextlib.AbstractContextManager[Any]:
    """The autocast context of a resolved precision on `device` (none for float32)."""
    if precision == "bfloat16":
        return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=cache_enabled)
    return contextlib.nullcontext()


def native_bfloat16(device: torch.device) -> bool:
    """Whether `device` computes bfloat16 in hardware (see module); else it is emulated."""
    if device.type == "cuda":
        return _cuda_capability(device) >= (8, 0)
    if device.type == "cpu":
        return _cpu_bfloat16()
    return False


def _cuda_capability(device: torch.device) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device)


@functools.cache
def _cpu_bfloat16() -> bool:
    # AMX or AVX512-BF16. oneDNN also "supports" bfloat16 on plain AVX-512 by emulation,
    # slower than float32. Private helpers of torch.cpu: any failure means no.
    try:
        return bool(torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported())
    except (AttributeError, RuntimeError):
        return False
