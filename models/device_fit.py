"""`StoredPixels.fit` on a CUDA device: the area-averaging shrink as a few gathers per axis.

OpenCV's area resize of a shrinking image gives each output pixel the mean of the source
pixels its footprint covers, with fractional weights at the edges of the footprint, one
axis at a time: each output pixel is a weighted sum of at most ceil(s) + 1 source pixels
along an axis, s the shrink factor (`area_taps`). Applied as that many gathers per axis, in
float64 (`shrink`), a 2500 x 2048 image costs a few hundred MB of memory traffic and no
matrix product. For the service, where one upload is decoded at a time, the shrink was most
of the decode (OpenCV took about 12 ms of the 18 for a 2500 x 2048 image on the H200 host's
cores); here the image crosses the bus as its stored 16-bit codes (10 MB) and comes back
fitted (1.7 MB), as the same uint16 codes `StoredPixels.fit` makes on the host (up to
float rounding: the sums run in float64, OpenCV's in float32).

`fit_stored` fits one image on a CUDA device when it shrinks along both sides, on the host
otherwise (the service, through `models.image_pipeline.fit_read`);
`models.predict.Predictor.stage` calls `fitted_codes` to fit a batch's images straight into
its input on the device (`cxr predict` on a GPU).
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading

import numpy as np
import torch

from models.geometry import Geometry, ResizeMode
from models.stored_pixels import UNIT_CODES, ClampedLine, StoredPixels

__all__ = [
    "area_taps",
    "codes_on_device",
    "fit_on_device",
    "fit_stored",
    "fitted_codes",
    "shrink",
    "side_stream",
]

_streams = threading.local()

_TORCH_DTYPE = {np.dtype(np.uint8).str: torch.uint8, np.dtype(np.int16).str: torch.int16}

Taps = tuple[torch.Tensor, torch.Tensor]
"""`area_taps`: (index, weight), each (target, K)."""


def area_taps(source: int, target: int, device: torch.device | str = "cpu") -> Taps:
    """OpenCV's area resize along one axis, for `target` <= `source`, as (index, weight),
    each (target, K) on `device` (int64, float64): output pixel i is the sum over k of
    weight[i, k] times source pixel index[i, k]. Output pixel i averages
    [i * s, (i + 1) * s), s = source / target, each source pixel weighted by the part of it
    inside, so every row of weights sums to 1; K = ceil(s) + 1 taps cover any footprint,
    those outside it weigh 0.

    Taps, not a dense (target, source) matrix: a dense product did 14 GFLOP of float64 for
    a 2500 x 2048 image, fine on a datacenter GPU but tens of milliseconds on the inference
    cards whose float64 runs at 1/32 or 1/64 of their float32 rate (T4, L4, A10); the taps
    are a few gathers, bound by memory. Made where they are used: no host copy, and no
    boolean indexing (it waits for the device).
    """
    if not 1 <= target <= source:
        raise ValueError(f"an area shrink needs 1 <= target <= source, got {target}, {source}")
    s = source / target
    start = torch.arange(target, dtype=torch.float64, device=device)[:, None] * s
    stop = start + s
    j = torch.floor(start).long() + torch.arange(math.ceil(s) + 1, device=device)[None, :]
    overlap = torch.minimum(stop, j + 1) - torch.maximum(start, j)
    keep = (j < source) & (overlap > 0)
    weight = torch.where(keep, overlap / s, torch.zeros_like(overlap))
    return j.clamp(max=source - 1), weight


def shrink(image: torch.Tensor, rows: Taps, columns: Taps) -> torch.Tensor:
    """A (R, C) float64 image shrunk by `area_taps` along its rows, then its columns."""
    (iy, wy), (ix, wx) = rows, columns
    tall = image[iy[:, 0]] * wy[:, :1]
    for k in range(1, iy.shape[1]):  # two kernels a tap: the gather, then a fused add
        tall.addcmul_(image[iy[:, k]], wy[:, k : k + 1])
    out = tall[:, ix[:, 0]] * wx[:, 0]
    for k in range(1, ix.shape[1]):
        out.addcmul_(tall[:, ix[:, k]], wx[:, k])
    return out


@functools.lru_cache(maxsize=64)  # 64 KB for a 1024 px side, 2,500 px source
def _taps_on(source: int, target: int, device: str) -> Taps:
    return area_taps(source, target, device)


def side_stream(device: torch.device) -> torch.cuda.Stream:
    """This thread's side stream on `device`: a fit does not queue behind a model pass on
    the default stream (another request's, or the batch before in `cxr predict`)."""
    streams: dict[str, torch.cuda.Stream] = getattr(_streams, "by_device", {})
    _streams.by_device = streams
    key = str(device)
    if key not in streams:
        streams[key] = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
    return streams[key]


def fit_stored(
    stored: StoredPixels, size: int, mode: ResizeMode | str, device: torch.device
) -> tuple[np.ndarray, Geometry]:
    """`StoredPixels.fit`, on `device` where it pays: a CUDA device and an image that shrinks
    along both sides (the same weights as OpenCV's area resize, `fit_on_device`); others,
    and every other device, are fitted on the host.

    Returns:
        uint16 (geometry.height, geometry.width) grey in [0, 1] times `UNIT_CODES`, and the
        `Geometry`, as `StoredPixels.fit`.
    """
    if device.type == "cuda":
        geo = Geometry.fit(*stored.shape, size, mode)
        if geo.shrinks_both:
            try:
                return fit_on_device(stored, stored.fit_plan(), geo, device), geo
            except RuntimeError:  # the device's memory is full, say: the host fits it
                pass
    return stored.fit(size, mode)


def fit_on_device(
    stored: StoredPixels, plan: ClampedLine | np.ndarray, geo: Geometry, device: torch.device
) -> np.ndarray:
    """`stored` fitted to `geo` (which shrinks it along both sides) on `device`, by
    `plan` (`StoredPixels.fit_plan`): uint16 (geo.height, geo.width) on the host.

    Any device computes it (the tests compare it with the host fit on the CPU); on CUDA
    it runs on a side stream of the calling thread.
    """
    side = (
        torch.cuda.stream(side_stream(device))
        if device.type == "cuda"
        else contextlib.nullcontext()
    )
    with side:
        code = fitted_codes(stored, plan, geo, device)
        # uint16 by truncation, as NumPy's astype; int16 bits, which the host views back.
        bits = torch.where(code >= 32768, code - 65536, code).to(torch.int16)
        fitted: np.ndarray = bits.cpu().numpy().view(np.uint16)
    return fitted


def fitted_codes(
    stored: StoredPixels, plan: ClampedLine | np.ndarray, geo: Geometry, device: torch.device
) -> torch.Tensor:
    """The uint16 codes `StoredPixels.fit` makes on the host, made on `device` as int32
    (geo.height, geo.width), on its current stream; `geo` shrinks `stored` along both
    sides. The caller picks the stream (`side_stream`) and waits for it."""
    rows, columns = stored.shape
    taps_y = _taps_on(rows, geo.height, str(device))
    taps_x = _taps_on(columns, geo.width, str(device))
    wide = codes_on_device(stored.codes, device)
    if isinstance(plan, ClampedLine):
        image = wide.double()
        if np.isfinite(plan.code_low) or np.isfinite(plan.code_high):
            # float32 bounds, as the host path clips float32 codes
            low = float(np.float32(plan.code_low)) if np.isfinite(plan.code_low) else None
            high = float(np.float32(plan.code_high)) if np.isfinite(plan.code_high) else None
            image = image.clamp(min=low, max=high)
        small = shrink(image, taps_y, taps_x).float()
        out = small * float(np.float32(plan.slope)) + float(np.float32(plan.intercept))
        out = out.clamp(0.0, float(UNIT_CODES))
    else:
        table, through_uint16 = stored.gather_table(plan)
        index = wide & 0xFFFF if through_uint16 else wide
        image = torch.from_numpy(table).to(device)[index.long()].double()
        out = shrink(image, taps_y, taps_x).float() + 0.5
    if device.type == "cuda":
        # The cached taps were made on the stream of the thread that first needed them:
        # marked used here, their memory waits for this stream if the cache drops them.
        stream = torch.cuda.current_stream(device)
        for tap in (*taps_y, *taps_x):
            tap.record_stream(stream)
    return out.to(torch.int32)  # truncation, as NumPy's astype to uint16


def codes_on_device(codes: np.ndarray, device: torch.device) -> torch.Tensor:
    """Integer codes (uint8, uint16 or int16) as int32 on `device`, their values kept.

    On CUDA they cross through pinned memory from torch's caching host allocator (which
    reuses a block only once the copy that read it has run): the copy does not hold up
    the calling thread, and decoders' read-only arrays need no writable copy first.
    16-bit codes travel as int16 bits (torch's CUDA kernels know no uint16).
    """
    bits = np.ascontiguousarray(codes if codes.dtype == np.uint8 else codes.view(np.int16))
    if device.type == "cuda":
        host = torch.empty(bits.shape, dtype=_TORCH_DTYPE[bits.dtype.str], pin_memory=True)
        np.copyto(host.numpy(), bits)
        on = host.to(device, non_blocking=True)
    else:
        on = torch.tensor(bits, device=device)  # a copy: the codes may be read-only
    wide = on.to(torch.int32)
    if codes.dtype == np.uint16:
        wide &= 0xFFFF
    return wide
