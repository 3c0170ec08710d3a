"""The device fit (`models.device_fit`) against the host's OpenCV fit."""

from __future__ import annotations

from collections.abc import Callable

import cv2
import numpy as np
import pytest
import torch

import models.device_fit as device_fit
from models.device_fit import area_taps, fit_on_device, shrink
from models.stored_pixels import StoredPixels

_RNG = np.random.default_rng(7)
_CODES12 = _RNG.integers(0, 4096, (700, 560)).astype(np.uint16)
_SIGNED = _RNG.integers(-1000, 3000, (500, 640)).astype(np.int16)
_BYTES = _RNG.integers(0, 256, (450, 390)).astype(np.uint8)


def _linear(c: np.ndarray) -> np.ndarray:
    return c.astype(np.float64)


CASES: dict[str, Callable[[], StoredPixels]] = {
    "12-bit linear": lambda: StoredPixels.linear(_CODES12, 0, 4095),
    "rescale and window (clamped line)": lambda: StoredPixels.from_codes(
        _CODES12, lambda c: c.astype(np.float64) * 2 - 100
    ).with_window(1000, 6000),
    "MONOCHROME1": lambda: StoredPixels.from_codes(_CODES12, _linear, invert=True),
    "sigmoid VOI LUT (table)": lambda: StoredPixels.from_codes(
        _CODES12, lambda c: 1 / (1 + np.exp(-(c.astype(np.float64) - 2000) / 300))
    ),
    "signed 16-bit": lambda: StoredPixels.from_codes(_SIGNED, _linear),
    "signed 16-bit table": lambda: StoredPixels.from_codes(
        _SIGNED, lambda c: np.tanh(c.astype(np.float64) / 1000)
    ),
    "8-bit": lambda: StoredPixels.linear(_BYTES, 0, 255),
}


@pytest.mark.parametrize(
    "source,target", [(2500, 1024), (2048, 839), (7, 3), (300, 300), (9, 1), (30000, 1024)]
)
def test_area_taps_are_opencvs_area_resize(source: int, target: int) -> None:
    index, weight = area_taps(source, target)
    assert index.shape == weight.shape and index.shape[0] == target
    np.testing.assert_allclose(weight.sum(dim=1).numpy(), 1.0, rtol=1e-12)
    assert int(index.min()) >= 0 and int(index.max()) < source
    image = _RNG.random((source, 5)).astype(np.float32)
    want = cv2.resize(image, (5, target), interpolation=cv2.INTER_AREA)
    # Down the rows only (columns kept: 5 -> 5 is the identity's single tap).
    got = shrink(torch.from_numpy(image).double(), (index, weight), area_taps(5, 5))
    np.testing.assert_allclose(got.numpy(), want, atol=2e-6)


def test_area_taps_refuse_an_enlargement() -> None:
    with pytest.raises(ValueError, match="shrink"):
        area_taps(100, 101)


def test_shrink_is_both_axes_of_opencvs_area_resize() -> None:
    image = _RNG.random((700, 560))
    want = cv2.resize(image.astype(np.float32), (229, 287), interpolation=cv2.INTER_AREA)
    got = shrink(torch.from_numpy(image), area_taps(700, 287), area_taps(560, 229))
    np.testing.assert_allclose(got.numpy(), want, atol=2e-6)


@pytest.mark.parametrize("mode", ["letterbox", "stretch"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_device_fit_gives_the_host_fits_codes(case: str, mode: str) -> None:
    stored = CASES[case]()
    host, geo = stored.fit(256, mode)
    got = fit_on_device(stored, stored.fit_plan(), geo, torch.device("cpu"))
    assert got.dtype == np.uint16 and got.shape == host.shape == (geo.height, geo.width)
    # float64 products against OpenCV's float32 sums: a code apart where they round apart.
    diff = np.abs(got.astype(np.int64) - host.astype(np.int64))
    assert diff.max() <= 1
    assert (diff > 0).mean() < 0.01


def test_fit_goes_to_the_device_only_for_a_cuda_shrink(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []
    real = device_fit.fit_on_device

    def spy(stored: StoredPixels, plan: object, geo: object, device: torch.device) -> np.ndarray:
        calls.append(stored.shape)
        return real(stored, plan, geo, torch.device("cpu"))  # type: ignore[arg-type]

    monkeypatch.setattr(device_fit, "fit_on_device", spy)
    cuda = torch.device("cuda")  # a name only: nothing runs there
    stored = StoredPixels.linear(_CODES12, 0, 4095)
    host, _ = stored.fit(256, "letterbox")
    got, _ = device_fit.fit_stored(stored, 256, "letterbox", cuda)
    assert calls == [stored.shape]
    assert np.abs(got.astype(np.int64) - host.astype(np.int64)).max() <= 1
    small = StoredPixels.linear(_CODES12[:100, :80], 0, 4095)
    enlarged = device_fit.fit_stored(small, 256, "letterbox", cuda)[0]
    np.testing.assert_array_equal(enlarged, small.fit(256, "letterbox")[0])
    device_fit.fit_stored(stored, 256, "letterbox", torch.device("cpu"))
    assert calls == [stored.shape]  # an enlargement and the CPU stay on the host


def test_a_failing_device_fit_falls_back_to_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    def out_of_memory(*_: object) -> np.ndarray:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(device_fit, "fit_on_device", out_of_memory)
    stored = StoredPixels.linear(_CODES12, 0, 4095)
    got, geo = device_fit.fit_stored(stored, 256, "letterbox", torch.device("cuda"))
    want, want_geo = stored.fit(256, "letterbox")
    np.testing.assert_array_equal(got, want)
    assert geo == want_geo


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("case", sorted(CASES))
def test_cuda_fit_gives_the_host_fits_codes(case: str) -> None:
    stored = CASES[case]()
    host, geo = stored.fit(256, "letterbox")
    got, cuda_geo = device_fit.fit_stored(stored, 256, "letterbox", torch.device("cuda"))
    assert cuda_geo == geo and got.dtype == np.uint16
    diff = np.abs(got.astype(np.int64) - host.astype(np.int64))
    assert diff.max() <= 1 and (diff > 0).mean() < 0.01
