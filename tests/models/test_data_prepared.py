"""Prepared image caches (issue 19): written, resumed after an interruption, refused when
stale, and read as the training loader's items."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest
import torch

import models.prepared as prepared
from app.cli import main
from models.data import FittedDataset, load_records
from models.errors import ImageError, PreparedCacheError
from models.prepared import PreparedDataset, PreparedImages, prepare_images

pytestmark = pytest.mark.issue(19)


@pytest.fixture
def data(tmp_path: Path, phantom_dir: Path) -> Path:
    """A private copy of the 40 phantoms (tests here change files)."""
    import shutil

    return Path(shutil.copytree(phantom_dir, tmp_path / "data"))


def test_prepare_writes_shards_that_read_as_the_fitted_items(data: Path, tmp_path: Path) -> None:
    records = load_records(data)
    out = tmp_path / "prep"
    images = prepare_images(records, out, size=32, shard_images=16)
    shards = sorted(p.name for p in out.glob("shard_*.npy"))
    assert shards == ["shard_00000.npy", "shard_00001.npy", "shard_00002.npy"]
    assert np.load(out / shards[-1], mmap_mode="r").shape == (8, 32, 32)  # 40 = 16 + 16 + 8
    index = json.loads((out / "index.json").read_text())
    assert index["size"] == 32 and index["dtype"] == "uint8" and len(index["sources"]) == 40
    assert {"path", "bytes", "mtime_ns"} == set(index["sources"][0])
    labels = ["Mass", "Nodule"]
    subset = records[::3]  # any records, in any order
    from_cache = PreparedDataset(images, subset, labels)
    from_files = FittedDataset(subset, labels, size=32)
    for i in range(len(subset)):
        (a, ya, ia), (b, yb, ib) = from_cache[i], from_files[i]
        assert a.dtype == torch.uint8 and torch.equal(a, b) and torch.equal(ya, yb) and ia == ib
    assert from_cache.describe() == from_files.describe()
    # Opening it again for the same settings works; a finished cache is not rewritten.
    before = (out / shards[0]).stat().st_mtime_ns
    prepare_images(records, out, size=32, shard_images=16)
    assert (out / shards[0]).stat().st_mtime_ns == before


def test_prepare_resumes_after_an_interruption(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    records = load_records(data)
    out = tmp_path / "prep"
    real = prepared._save_progress

    def interrupted(root: Path, complete: int, rejects: list[dict[str, object]]) -> None:
        real(root, complete, rejects)
        if complete == 2:
            # Killed while the third shard was being written: it is left half done.
            (root / "shard_00002.npy.partial").write_bytes(b"half a shard")
            raise KeyboardInterrupt

    monkeypatch.setattr(prepared, "_save_progress", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prepare_images(records, out, size=32, shard_images=12)
    monkeypatch.setattr(prepared, "_save_progress", real)
    with pytest.raises(PreparedCacheError, match="incomplete .2 of 4 shards.*rerun"):
        PreparedImages.open(out)
    kept = {k: (out / f"shard_0000{k}.npy").stat().st_mtime_ns for k in (0, 1)}
    with caplog.at_level(logging.INFO, logger="models.prepared"):
        images = prepare_images(records, out, size=32, shard_images=12)
    assert any("resuming after 2 of 4" in r.getMessage() for r in caplog.records)
    assert {k: (out / f"shard_0000{k}.npy").stat().st_mtime_ns for k in (0, 1)} == kept
    assert not list(out.glob("*.partial"))
    fresh = prepare_images(records, tmp_path / "fresh", size=32, shard_images=12)
    for row in range(len(records)):
        assert np.array_equal(images.read(row), fresh.read(row))


def test_stale_cache_is_refused_then_rebuilt(data: Path, tmp_path: Path) -> None:
    records = load_records(data)
    out = tmp_path / "prep"
    images = prepare_images(records, out, size=32, shard_images=16)
    # Other settings: refused for training and for preparing.
    with pytest.raises(PreparedCacheError, match="size 32 .training asks 64"):
        PreparedImages.open(out, size=64)
    with pytest.raises(PreparedCacheError, match="size 32 .asked: 64.*--rebuild"):
        prepare_images(records, out, size=64, shard_images=16)
    # A source image changed on disk: named, for training and for preparing.
    changed = records[5].path
    changed.write_bytes(changed.read_bytes() + b"\0")
    with pytest.raises(PreparedCacheError, match=f"1 images changed.*{changed.name}"):
        PreparedDataset(images, records, ["Mass"])
    with pytest.raises(PreparedCacheError, match="1 source images differ"):
        prepare_images(records, out, size=32, shard_images=16)
    # Records the cache never saw.
    with pytest.raises(PreparedCacheError, match="not in it"):
        PreparedDataset(images, load_records(data)[:1] + [records[0].__class__(
            "x.png", tmp_path / "prep" / "index.json", frozenset(), "p")], ["Mass"])  # fmt: skip
    rebuilt = prepare_images(records, out, size=32, shard_images=16, rebuild=True)
    assert len(PreparedDataset(rebuilt, records, ["Mass"])) == 40
    # A folder that holds something else is never overwritten.
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(PreparedCacheError, match="not empty"):
        prepare_images(records, other, size=32)
    with pytest.raises(PreparedCacheError, match="no prepared cache"):
        PreparedImages.open(other)


def test_prepare_skips_unreadable_images_when_asked(data: Path, tmp_path: Path) -> None:
    records = load_records(data)[:5]
    records[2].path.write_bytes(b"not a png")
    with pytest.raises(ImageError):
        prepare_images(records, tmp_path / "a", size=32)
    # from a loader worker too, as its own message, not wrapped in the worker's traceback
    with pytest.raises(ImageError) as raised:
        prepare_images(records, tmp_path / "w", size=32, workers=1)
    assert "Traceback" not in str(raised.value) and records[2].path.name in str(raised.value)
    images = prepare_images(records, tmp_path / "b", size=32, on_error="skip")
    assert [r["row"] for r in images.rejects] == [2] and images.read(2).max() == 0
    progress = json.loads((tmp_path / "b" / "progress.json").read_text())
    assert progress["rejects"][0]["path"].endswith(records[2].path.name)


def test_prepared_images_pickle_without_their_maps(data: Path, tmp_path: Path) -> None:
    import pickle

    images = prepare_images(load_records(data)[:4], tmp_path / "p", size=32)
    images.read(0)
    clone = pickle.loads(pickle.dumps(images))
    assert clone._maps == {} and np.array_equal(clone.read(3), images.read(3))


@pytest.mark.slow
def test_cli_prepare_then_train_from_it(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "prep"
    assert main(["prepare", "--data", str(data), "--out", str(out), "--image-size", "64",
                 "--workers", "0", "--no-progress"]) == 0  # fmt: skip
    assert "prepared 40 images at 64 px" in capsys.readouterr().err
    run = tmp_path / "m.pt"
    common = ["train", "--data", str(data), "--out", str(run), "--arch", "resnet18",
              "--weights", "none", "--labels", "auto", "--epochs", "1", "--batch-size", "4",
              "--accum", "1", "--max-steps", "2", "--workers", "0", "--threads", "1",
              "--transition-channels", "8", "--no-progress", "--prepared", str(out)]  # fmt: skip
    assert main([*common, "--image-size", "64"]) == 0
    from models.checkpoint import load_checkpoint

    training = load_checkpoint(run).card.training
    assert training["input"]["source"] == f"prepared cache {out}"
    assert training["input"]["dtype"] == "uint8"
    assert main([*common, "--image-size", "96"]) == 2  # another size: one line, refused
    assert "training asks 96" in capsys.readouterr().err
    os.utime(load_records(data)[0].path, ns=(1, 1))
    assert main([*common, "--image-size", "64"]) == 2
    assert "stale" in capsys.readouterr().err
