"""Prepared image caches: a dataset fitted to the training size, as integer shards on disk.

For data whose fitted images do not fit in RAM (ChestX-ray14 at 1024 px is 117 GB as uint8),
`prepare_images` (`cxr prepare`) decodes and fits every image once; training then reads
rows of memory-mapped shards (`cxr train --prepared DIR`), which costs a copy per image
instead of a PNG decode (issue 19).

    DIR/index.json        format, size, resize mode, dtype, images per shard, and the source
                          list in row order: absolute path, bytes, modification time (ns)
    DIR/progress.json     complete shards, and the images that could not be read
    DIR/shard_00000.npy   (n, S, S) uint8 (or uint16) rows; every shard but the last has
                          `shard_images` rows

Writing is resumable: a shard is written under a temporary name and renamed when full, then
counted in progress.json; a rerun with the same sources and settings continues after the
last complete shard. A cache is stale when its sources (paths, byte sizes, modification
times) or its settings differ from the ones asked for: `prepare_images` refuses it (or
rebuilds it with `rebuild=True`), and `PreparedImages.open`/`rows_for` refuse to train from
it, naming what changed. Sizes and times, not content hashes, are compared (as make and
rsync do): hashing the sources would cost a read of the whole dataset.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from models.data import FittedDataset, LabelledImages, Record, build_loader
from models.errors import ImageError, PreparedCacheError
from models.transforms import RESIZE_MODES

__all__ = [
    "PREPARED_FORMAT",
    "PreparedDataset",
    "PreparedImages",
    "prepare_images",
]

log = logging.getLogger(__name__)
PREPARED_FORMAT = "cxr-prepared.v1"
_INDEX, _PROGRESS = "index.json", "progress.json"


def _shard_name(k: int) -> str:
    return f"shard_{k:05d}.npy"


def _source(path: Path) -> dict[str, Any]:
    try:
        st = path.stat()
    except OSError as exc:
        reason = exc.strerror or exc
        raise PreparedCacheError(f"{path}: cannot read source image ({reason})") from exc
    return {"path": str(path.resolve()), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc) + "\n")
    os.replace(tmp, path)  # a reader never sees half a file


def _read_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PreparedCacheError(f"{path}: unreadable prepared-cache file ({exc})") from exc
    if not isinstance(doc, dict):
        raise PreparedCacheError(f"{path}: expected a JSON object")
    return doc


def _dtype_name(bits: int) -> str:
    if bits not in (8, 16):
        raise PreparedCacheError(f"bits must be 8 or 16, got {bits}")
    return "uint8" if bits == 8 else "uint16"


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between a cache's index and the one asked for, in words."""
    diffs = [
        f"{key} {old.get(key)!r} (asked: {new[key]!r})"
        for key in ("format", "size", "resize", "dtype", "shard_images")
        if old.get(key) != new[key]
    ]
    before, after = old.get("sources", []), new["sources"]
    if len(before) != len(after):
        diffs.append(f"{len(before)} source images (now {len(after)})")
    changed = [(a, b) for a, b in zip(before, after, strict=False) if a != b]
    if changed:
        a, b = changed[0]
        diffs.append(
            f"{len(changed)} source images differ in path, size or modification time "
            f"(first: {a.get('path')}, {a.get('bytes')} bytes, mtime_ns {a.get('mtime_ns')}; "
            f"now {b['path']}, {b['bytes']} bytes, mtime_ns {b['mtime_ns']})"
        )
    return diffs


class _PrepareItems(FittedDataset):
    """Items for writing a cache: (fitted image (S, S), error message or "")."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, str]:  # type: ignore[override]
        # The error travels back as text, whatever `on_error` says: raised in a loader
        # worker, it would reach the caller wrapped in that worker's traceback.
        try:
            return torch.from_numpy(self.fitted(index)), ""
        except ImageError as exc:
            return torch.zeros((self.size, self.size), dtype=_torch_dtype(self.dtype)), str(exc)


def _torch_dtype(dtype: type[np.unsignedinteger[Any]]) -> torch.dtype:
    return torch.uint8 if dtype == np.uint8 else torch.uint16


def prepare_images(
    records: Sequence[Record],
    out: str | os.PathLike[str],
    *,
    size: int,
    resize: str = "letterbox",
    bits: int = 8,
    shard_images: int = 512,
    workers: int = 0,
    rebuild: bool = False,
    on_error: Literal["raise", "skip"] = "raise",
    progress: bool = False,
) -> PreparedImages:
    """Write (or finish) a prepared cache of `records` fitted to `size` in `out`.

    Each image is decoded to integers and fitted as `FittedDataset` does (the same code
    the training loader runs), `workers` processes at a time.

    Args:
        records: the images, in row order (`cxr prepare` takes the whole dataset).
        out: the cache folder (created).
        size: the training input side S.
        resize: "letterbox" or "stretch", as training's `resize`.
        bits: 8 (uint8 rows) or 16 (uint16).
        shard_images: rows per shard file (also the unit of resumption).
        workers: decoding processes (0: in this process).
        rebuild: start over when `out` holds a cache of other sources or settings, instead of
            refusing it.
        on_error: "raise" on an unreadable image, or "skip": store a black image and list
            it in progress.json's rejects.
        progress: show a progress bar (tqdm) on stderr.

    Returns:
        The complete cache, opened.

    Raises:
        PreparedCacheError: `out` holds a different cache (and not `rebuild`), or a folder
            that is not a cache, or a source file is missing.
        ImageError: an unreadable image with on_error="raise" (the complete shards stay;
            a rerun continues after them).
    """
    if size < 1 or shard_images < 1 or resize not in RESIZE_MODES:
        raise PreparedCacheError(
            f"need size >= 1, shard_images >= 1 and resize in {RESIZE_MODES}; "
            f"got {size}, {shard_images}, {resize!r}"
        )
    root = Path(out)
    header = {
        "format": PREPARED_FORMAT,
        "size": size,
        "resize": resize,
        "dtype": _dtype_name(bits),
        "shard_images": shard_images,
        "images": len(records),
        "sources": [_source(r.path) for r in records],
    }
    done, rejects = _resume_point(root, header, rebuild)
    total_shards = -(-len(records) // shard_images)
    dtype: type[np.unsignedinteger[Any]] = np.uint8 if bits == 8 else np.uint16
    if done:
        log.info("%s: resuming after %d of %d complete shards", root, done, total_shards)
    if done < total_shards:
        _write_shards(root, records, done, rejects, size=size, resize=resize, dtype=dtype,
                      shard_images=shard_images, workers=workers, on_error=on_error,
                      progress=progress)  # fmt: skip
    return PreparedImages.open(root, size=size, resize=resize, bits=bits)


def _write_shards(
    root: Path, records: Sequence[Record], done: int, rejects: list[dict[str, Any]], *,
    size: int, resize: str, dtype: type[np.unsignedinteger[Any]], shard_images: int,
    workers: int, on_error: Literal["raise", "skip"], progress: bool,
) -> None:  # fmt: skip
    from tqdm import tqdm

    start = done * shard_images
    total_shards = -(-len(records) // shard_images)
    items = _PrepareItems(
        records[start:], [], size=size, resize=resize, dtype=dtype, on_error=on_error
    )
    batches = iter(build_loader(items, batch_size=16, workers=workers))
    bar = tqdm(total=len(records), initial=start, unit="img", desc=f"prepare {size} px",
               disable=not progress, dynamic_ncols=True)  # fmt: skip
    pending: tuple[torch.Tensor, list[str]] | None = None
    row = start
    try:
        for k in range(done, total_shards):
            n = min(shard_images, len(records) - k * shard_images)
            final = root / _shard_name(k)
            partial = final.with_name(final.name + ".partial")
            shape = (n, size, size)
            shard = np.lib.format.open_memmap(partial, mode="w+", dtype=dtype, shape=shape)
            filled = 0
            while filled < n:
                if pending is None:
                    images, errors = next(batches)
                    pending = (images, list(errors))
                images, errors = pending
                take = min(n - filled, images.shape[0])
                shard[filled : filled + take] = images[:take].numpy()
                for j, error in enumerate(errors[:take]):
                    if error and on_error == "raise":
                        raise ImageError(error)
                    if error:
                        path = records[row + j].path
                        log.warning("unreadable image %s; stored black: %s", path, error)
                        rejects.append({"row": row + j, "path": str(path), "error": error})
                filled += take
                row += take
                bar.update(take)
                pending = (images[take:], errors[take:]) if take < images.shape[0] else None
            shard.flush()
            del shard
            os.replace(partial, final)
            _save_progress(root, k + 1, rejects)
    finally:
        bar.close()


def _resume_point(
    root: Path, header: dict[str, Any], rebuild: bool
) -> tuple[int, list[dict[str, Any]]]:
    """Complete shards to keep and their rejects; writes the index of a new cache."""
    index = root / _INDEX
    if index.is_file():
        diffs = _differences(_read_json(index), header)
        if not diffs:
            progress = _read_json(root / _PROGRESS) if (root / _PROGRESS).is_file() else {}
            done = int(progress.get("complete_shards", 0))
            # Only shards on disk with the right shape count (a rerun redoes the rest).
            for k in range(done):
                if not _shard_ok(root / _shard_name(k), header, k):
                    done = k
                    break
            kept = done * header["shard_images"]
            rejects = [r for r in progress.get("rejects", []) if r["row"] < kept]
            return done, rejects
        if not rebuild:
            raise PreparedCacheError(
                f"{root}: this prepared cache was written for other sources or settings: "
                + "; ".join(diffs)
                + ". Rerun with --rebuild (prepare_images(..., rebuild=True)) to replace it, "
                "or choose another output folder"
            )
        log.warning("%s: rebuilding the prepared cache: %s", root, "; ".join(diffs))
        _remove_cache(root)
    elif root.is_dir() and any(root.iterdir()):
        raise PreparedCacheError(
            f"{root}: folder is not empty and holds no prepared cache ({_INDEX} missing); "
            "choose an empty or new folder"
        )
    root.mkdir(parents=True, exist_ok=True)
    _write_json(index, header)
    _save_progress(root, 0, [])
    return 0, []


def _remove_cache(root: Path) -> None:
    for pattern in ("shard_*.npy", "shard_*.npy.partial", _INDEX, _PROGRESS):
        for path in root.glob(pattern):
            path.unlink()


def _save_progress(root: Path, complete: int, rejects: list[dict[str, Any]]) -> None:
    _write_json(root / _PROGRESS, {"complete_shards": complete, "rejects": rejects})


def _shard_ok(path: Path, header: dict[str, Any], k: int) -> bool:
    n = min(header["shard_images"], header["images"] - k * header["shard_images"])
    try:
        arr = np.load(path, mmap_mode="r")
    except (OSError, ValueError):
        return False
    return bool(arr.shape == (n, header["size"], header["size"]) and arr.dtype == header["dtype"])


class PreparedImages:
    """A complete prepared cache, opened for reading (memory-mapped in each process).

    Use `open`; `rows_for` finds the rows of records and checks that their files have not
    changed since the cache was written.
    """

    def __init__(self, root: Path, header: dict[str, Any], rejects: list[dict[str, Any]]) -> None:
        self.root = root
        self.size: int = int(header["size"])
        self.resize: str = str(header["resize"])
        self.dtype: str = str(header["dtype"])
        self.shard_images: int = int(header["shard_images"])
        self.sources: list[dict[str, Any]] = list(header["sources"])
        self.rejects = rejects
        self._maps: dict[int, np.ndarray] = {}

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        size: int | None = None,
        resize: str | None = None,
        bits: int | None = None,
    ) -> PreparedImages:
        """Open a cache, checking it is complete and (where given) made for these settings.

        Raises:
            PreparedCacheError: no cache there, an incomplete one, or one written for
                another size, resize mode or bit depth.
        """
        root = Path(directory)
        if not (root / _INDEX).is_file():
            raise PreparedCacheError(
                f"{root}: no prepared cache ({_INDEX} missing); write one with "
                "`cxr prepare --data DATA --out DIR --image-size S`"
            )
        header = _read_json(root / _INDEX)
        if header.get("format") != PREPARED_FORMAT:
            raise PreparedCacheError(
                f"{root}: prepared-cache format {header.get('format')!r}; this version reads "
                f"{PREPARED_FORMAT!r}. Rerun `cxr prepare ... --rebuild`"
            )
        progress = _read_json(root / _PROGRESS) if (root / _PROGRESS).is_file() else {}
        total = -(-int(header["images"]) // int(header["shard_images"]))
        complete = int(progress.get("complete_shards", 0))
        if complete < total:
            raise PreparedCacheError(
                f"{root}: prepared cache is incomplete ({complete} of {total} shards); rerun "
                "the same `cxr prepare` command to finish it"
            )
        dtype = None if bits is None else _dtype_name(bits)
        wanted = {"size": size, "resize": resize, "dtype": dtype}
        diffs = [
            f"{key} {header.get(key)!r} (training asks {value!r})"
            for key, value in wanted.items()
            if value is not None and header.get(key) != value
        ]
        if diffs:
            raise PreparedCacheError(
                f"{root}: prepared cache was written with other settings: {'; '.join(diffs)}. "
                "Prepare it again for these settings (`cxr prepare ... --rebuild`, or another "
                "--out), or train with the cache's settings"
            )
        return cls(root, header, list(progress.get("rejects", [])))

    def rows_for(self, records: Sequence[Record]) -> np.ndarray:
        """Cache rows of `records` (int64, in their order).

        Raises:
            PreparedCacheError: a record is not in the cache, or its file changed (size or
                modification time) since the cache was written.
        """
        where = {s["path"]: i for i, s in enumerate(self.sources)}
        rows = np.empty(len(records), np.int64)
        missing: list[str] = []
        changed: list[str] = []
        for i, record in enumerate(records):
            now = _source(record.path)
            row = where.get(now["path"])
            if row is None:
                missing.append(now["path"])
                continue
            if self.sources[row] != now:
                before = self.sources[row]
                changed.append(
                    f"{now['path']} ({before['bytes']} -> {now['bytes']} bytes, mtime_ns "
                    f"{before['mtime_ns']} -> {now['mtime_ns']})"
                )
            rows[i] = row
        problems = []
        if missing:
            problems.append(f"{len(missing)} images are not in it (first: {missing[0]})")
        if changed:
            problems.append(
                f"{len(changed)} images changed since it was written (first: {changed[0]})"
            )
        if problems:
            raise PreparedCacheError(
                f"{self.root}: prepared cache is stale for this data: {'; '.join(problems)}. "
                "Rerun `cxr prepare --data DATA --out DIR ... --rebuild`"
            )
        return rows

    def read(self, row: int) -> np.ndarray:
        """Row `row` as a (S, S) array (a copy, safe to hand to torch)."""
        k, offset = divmod(int(row), self.shard_images)
        shard = self._maps.get(k)
        if shard is None:
            shard = np.load(self.root / _shard_name(k), mmap_mode="r")
            self._maps[k] = shard
        return np.array(shard[offset])

    def __getstate__(self) -> dict[str, Any]:
        # Loader workers open their own maps; a pickled memmap would carry its data.
        state = dict(self.__dict__)
        state["_maps"] = {}
        return state


class PreparedDataset(LabelledImages):
    """`FittedDataset`'s items, read from a prepared cache instead of decoded.

    Items are `(image (1, S, S) uint8 (or uint16), target (C,) float32, index)`.

    Raises:
        PreparedCacheError: (on construction) the cache is stale for `records`.
    """

    def __init__(
        self, images: PreparedImages, records: Sequence[Record], labels: Sequence[str]
    ) -> None:
        super().__init__(records, labels)
        self.images = images
        self.size = images.size
        self.rows = images.rows_for(self.records)
        rejected = {r["row"] for r in images.rejects} & set(self.rows.tolist())
        if rejected:
            log.warning(
                "%s: %d of these %d images were unreadable when prepared and are served black",
                images.root, len(rejected), len(self.records),
            )  # fmt: skip

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        pixels = self.images.read(int(self.rows[index]))
        return torch.from_numpy(pixels)[None], torch.from_numpy(self.targets[index]), index
