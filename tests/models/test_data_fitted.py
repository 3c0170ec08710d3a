"""The training loader's per-sample work (issue 19): decode to integers, fit on the
integers, serve uint8 through a DataLoader whose workers run one thread each."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset

from models.data import FittedDataset, build_loader, load_records
from models.errors import ImageError, UnsupportedImageError
from models.images import load_image, load_integer_image
from models.transforms import fit_square, fit_square_integer

pytestmark = pytest.mark.issue(19)


def _window(path: Path) -> np.ndarray:
    image = load_integer_image(path)
    span = image.high - image.low
    return (image.pixels.astype(np.float64) - image.low) / span if span else 0 * image.pixels


def test_load_integer_image_is_load_image_before_the_float_conversion(tmp_path: Path) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    grey = rng.integers(20, 230, (40, 50), dtype=np.uint8)
    Image.fromarray(grey).save(tmp_path / "grey.png")
    wide = rng.integers(1000, 60000, (40, 50), dtype=np.uint16)
    Image.fromarray(wide).save(tmp_path / "wide.png")
    # NIH's RGBA files: grey in the colour channels, an opaque alpha.
    rgba = np.dstack([grey, grey, grey, np.full_like(grey, 255)])
    Image.fromarray(rgba, "RGBA").save(tmp_path / "rgba.png")
    Image.fromarray(grey).save(tmp_path / "grey.jpg", quality=95)
    Image.fromarray(np.dstack([grey, grey]), "LA").save(tmp_path / "la.png")
    Image.fromarray(grey).convert("P").save(tmp_path / "palette.png")
    Image.fromarray(grey).save(tmp_path / "grey.tif")
    expected_dtypes = {"grey.png": np.uint8, "wide.png": np.uint16, "rgba.png": np.uint8,
                       "grey.jpg": np.uint8, "la.png": np.uint8, "palette.png": np.uint8,
                       "grey.tif": np.uint8}  # fmt: skip
    for name, dtype in expected_dtypes.items():
        image = load_integer_image(tmp_path / name)
        assert image.pixels.dtype == dtype and image.pixels.shape == (40, 50), name
        np.testing.assert_allclose(
            _window(tmp_path / name), load_image(tmp_path / name).pixels, atol=1e-6 if
            name.endswith(".png") else 2 / 255, err_msg=name,
        )  # fmt: skip
    flat = tmp_path / "flat.png"
    Image.fromarray(np.full((40, 50), 7, np.uint8)).save(flat)
    assert np.all(_window(flat) == 0) and np.all(load_image(flat).pixels == 0)


def test_load_integer_image_falls_back_for_dicom_and_keeps_the_errors(
    make_dicom: Callable[..., Path], tmp_path: Path
) -> None:
    pixels = np.tile(np.arange(0, 4000, 50, dtype=np.uint16), (48, 1))
    path = make_dicom(pixels, bits=16)
    image = load_integer_image(path)
    assert image.pixels.dtype == np.uint16 and (image.low, image.high) == (0.0, 65535.0)
    np.testing.assert_allclose(image.pixels / 65535.0, load_image(path).pixels, atol=1 / 65535)
    (tmp_path / "junk.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
    with pytest.raises(ImageError, match="junk.png"):
        load_integer_image(tmp_path / "junk.png")
    from PIL import Image

    Image.new("L", (8, 8)).save(tmp_path / "tiny.png")
    with pytest.raises(UnsupportedImageError, match="at least"):  # as load_image refuses it
        load_integer_image(tmp_path / "tiny.png")
    with pytest.raises(ImageError, match="cannot read"):
        load_integer_image(tmp_path / "missing.png")


@pytest.mark.parametrize("mode", ["letterbox", "stretch"])
@pytest.mark.parametrize("shape", [(70, 50), (50, 70), (20, 24), (64, 64)])
def test_fit_square_integer_is_fit_square_in_integers(mode: str, shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(1)
    raw = rng.integers(30, 200, shape, dtype=np.uint8)
    low, high = float(raw.min()), float(raw.max())
    want, want_geo = fit_square((raw - low) / (high - low), 32, mode)
    got, geo = fit_square_integer(raw, 32, mode, low=low, high=high)
    assert got.dtype == np.uint8 and got.shape == (32, 32) and geo == want_geo
    # Resized on the integers, then windowed: the float path up to two roundings.
    assert np.abs(got / 255.0 - want).max() <= 1.6 / 255
    if mode == "letterbox" and shape[0] != shape[1]:
        assert np.all(got[want == 0] <= 1)  # the padding is black
    wide, _ = fit_square_integer(raw.astype(np.uint16) * 257, 32, mode, low=low * 257,
                                 high=high * 257, dtype=np.uint16)  # fmt: skip
    assert wide.dtype == np.uint16 and np.abs(wide / 65535.0 - want).max() <= 1e-3
    with pytest.raises(ValueError, match="uint8 or uint16"):
        fit_square_integer(raw.astype(np.float32), 32, mode, low=low, high=high)


def test_fitted_dataset_serves_uint8_and_skips_bad_images_when_asked(
    phantom_dir: Path, tmp_path: Path
) -> None:
    records = load_records(phantom_dir)[:3]
    dataset = FittedDataset(records, ["Mass"], size=32, cache=True)
    x, y, index = dataset[1]
    assert x.dtype == torch.uint8 and x.shape == (1, 32, 32) and y.shape == (1,) and index == 1
    want = fit_square(load_image(records[1].path).pixels, 32)[0]
    assert np.abs(x[0].numpy() / 255.0 - want).max() <= 1.6 / 255
    assert torch.equal(dataset[1][0], x)  # served from the cache
    wide = FittedDataset(records, ["Mass"], size=32, dtype=np.uint16)[1][0]
    assert wide.dtype == torch.uint16 and np.abs(wide[0].numpy() / 65535.0 - want).max() < 3e-3
    (tmp_path / "bad.png").write_bytes(b"not an image")
    bad = [*records[:1], type(records[0])("bad.png", tmp_path / "bad.png", frozenset(), "p")]
    with pytest.raises(ImageError):
        FittedDataset(bad, ["Mass"], size=32)[1]
    black = FittedDataset(bad, ["Mass"], size=32, on_error="skip")[1][0]
    assert black.dtype == torch.uint8 and int(black.max()) == 0


class _ThreadCounts(Dataset[tuple[int, int]]):
    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> tuple[int, int]:
        import cv2

        return torch.get_num_threads(), cv2.getNumThreads()


@pytest.mark.slow
def test_loader_workers_run_one_thread_each() -> None:
    loader = build_loader(_ThreadCounts(), batch_size=2, workers=1, prefetch_factor=2)
    torch_threads, cv2_threads = next(iter(loader))
    assert torch_threads.tolist() == [1, 1]
    assert cv2_threads.tolist() in ([0, 0], [1, 1])  # 0 or 1: OpenCV runs sequentially
    assert loader.prefetch_factor == 2 and loader.persistent_workers


def test_epoch_shuffle_depends_on_seed_and_epoch_only() -> None:
    # torch's shuffling drew from the global generator: validation's loader (and anything
    # else drawing before an epoch) changed the next epoch's order, and a resumed run saw
    # other orders than an uninterrupted one.
    from models.data import EpochShuffle

    sampler = EpochShuffle(50, seed=7)
    sampler.set_epoch(3)
    first = list(sampler)
    torch.rand(100)  # draws from the global generator in between
    assert list(sampler) == first and sorted(first) == list(range(50)) and len(sampler) == 50
    again = EpochShuffle(50, seed=7)
    again.set_epoch(3)
    assert list(again) == first
    sampler.set_epoch(4)
    assert list(sampler) != first
    assert list(EpochShuffle(50, seed=8)) != list(EpochShuffle(50, seed=7))
