"""Datasets: the NIH ChestX-ray14 layout, and a labels CSV from a PACS export.

Accepted DATA:
  - an NIH-layout folder: `Data_Entry*.csv[.gz]`, images under `images/` (or the
    release's `images_001/images/...`), optional `train_val_list.txt`/`test_list.txt`
    (the official patient-wise split; otherwise a seeded patient-wise 70/10/20 split);
  - a CSV file with NIH-style columns `Image Index, Finding Labels[, Patient ID]`
    (what `cxr batch --dataset` writes; image paths relative to the CSV's folder or
    its `images/` subfolder), or with a `path` column plus one 0/1 column per label.
"""

from __future__ import annotations

import csv
import gzip
import io
import logging
import os
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch.utils.data import Dataset

from models.errors import DatasetError, ImageError
from models.images import load_image, load_integer_image
from models.transforms import fit_long_side, fit_square_integer

__all__ = [
    "DATA_ENTRY_COLUMNS",
    "LABEL_ALIASES",
    "SYNTHETIC_MARKER",
    "ChestXrayDataset",
    "EpochShuffle",
    "FittedDataset",
    "LabelledImages",
    "Record",
    "Split",
    "build_loader",
    "canonical_label",
    "init_loader_worker",
    "loader_workers",
    "is_synthetic",
    "label_coverage",
    "load_records",
    "resolve_labels",
    "split_records",
]

DATA_ENTRY_COLUMNS: tuple[str, ...] = (
    "Image Index",
    "Finding Labels",
    "Follow-up #",
    "Patient ID",
    "Patient Age",
    "Patient Gender",
    "View Position",
    "OriginalImage[Width",
    "Height]",
    "OriginalImagePixelSpacing[x",
    "y]",
)
"""Columns of the NIH `Data_Entry_2017.csv`, which phantoms and exported training sets write."""

log = logging.getLogger(__name__)
Split = Literal["train", "val", "test", "all"]
LABEL_ALIASES: dict[str, str] = {
    "Infiltrate": "Infiltration",
    "Pleural Thickening": "Pleural_Thickening",
}
"""Spellings seen in NIH files (e.g. BBox_List_2017.csv) that mean a vocabulary label; the
one alias table, used for labels and for boxes."""
SYNTHETIC_MARKER = "cxr-synthetic.json"
"""File that `cxr phantoms` writes into a dataset folder: its images are synthetic, so a
model trained on them is a demo (model card `demo: true`)."""
_IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".dcm", ".tif", ".tiff", ""}


@dataclass(frozen=True)
class Record:
    """One image: where it is, its labels (names), its patient."""

    image_index: str
    path: Path
    findings: frozenset[str]
    patient_id: str


def _read_csv(path: Path) -> list[dict[str, str]]:
    raw = b""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        return list(csv.DictReader(io.StringIO(raw.decode("utf-8-sig"))))
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DatasetError(
            f"{path}: not UTF-8 text (line {line}, byte {exc.start}); save the CSV as UTF-8"
        ) from None
    except (OSError, EOFError, zlib.error, csv.Error) as exc:
        raise DatasetError(f"{path}: cannot read the CSV ({exc})") from None


def _find_images(root: Path) -> dict[str, Path]:
    index: dict[str, Path] = {}
    for folder in [root / "images", *sorted(root.glob("images_*/images")), root]:
        if folder.is_dir():
            with os.scandir(folder) as it:
                for entry in it:
                    if entry.is_file() and Path(entry.name).suffix.lower() in _IMAGE_SUFFIXES:
                        index.setdefault(entry.name, Path(entry.path))
    return index


def _findings(text: str) -> frozenset[str]:
    parts = [p.strip() for p in (text or "").split("|")]
    return frozenset(canonical_label(p) for p in parts if p and p != "No Finding")


# Cells of a labels CSV's 0/1 columns (CheXpert-style files write 1.0, 0.0, -1.0 and blanks).
_POSITIVE_CELLS = frozenset({"1", "1.0", "true", "yes"})
_NEGATIVE_CELLS = frozenset({"", "0", "0.0", "false", "no"})
_UNCERTAIN_CELLS = frozenset({"-1", "-1.0"})


def canonical_label(name: str) -> str:
    """The vocabulary spelling of a label name (`Infiltrate` -> `Infiltration`)."""
    return LABEL_ALIASES.get(name, name)


def is_synthetic(data: str | os.PathLike[str]) -> bool:
    """Whether a dataset (folder, or a CSV's folder) carries the synthetic-data marker."""
    path = Path(data)
    folder = path if path.is_dir() else path.parent
    return (folder / SYNTHETIC_MARKER).is_file()


def load_records(data: str | os.PathLike[str]) -> list[Record]:
    """Read the image list of a dataset (NIH folder or labels CSV); rows whose image
    file is missing are skipped with one warning.

    Raises:
        DatasetError: no metadata CSV, missing columns, or no image found at all.
    """
    data = Path(data)
    if data.is_dir():
        csvs = sorted(data.glob("Data_Entry*.csv")) + sorted(data.glob("Data_Entry*.csv.gz"))
        if not csvs:
            raise DatasetError(
                f"{data}: no Data_Entry*.csv found; expected the NIH ChestX-ray14 layout "
                "(Data_Entry_2017.csv + images/) or pass a labels CSV"
            )
        rows, base = _read_csv(csvs[0]), data
    elif data.is_file():
        rows, base = _read_csv(data), data.parent
    else:
        raise DatasetError(f"{data}: no such dataset folder or CSV file")
    if not rows:
        raise DatasetError(f"{data}: the metadata CSV has no rows")
    columns = set(rows[0])
    images = _find_images(base)
    records: list[Record] = []
    missing = uncertain = 0
    if {"Image Index", "Finding Labels"} <= columns:
        for row in rows:
            name = row["Image Index"].strip()
            path = images.get(name)
            if path is None and not _indexed_name(name):
                path = _relative(base, name)
            if path is None:
                missing += 1
                continue
            pid = (row.get("Patient ID") or "").strip() or name
            records.append(Record(name, path, _findings(row["Finding Labels"]), pid))
    elif "path" in columns:
        label_cols = [c for c in rows[0] if c not in {"path", "Patient ID", "patient_id", "id"}]
        for line, row in enumerate(rows, start=2):
            path = _relative(base, row["path"].strip())
            if path is None:
                missing += 1
                continue
            positive = []
            for c in label_cols:
                value = (row.get(c) or "").strip().lower()
                if value in _POSITIVE_CELLS:
                    positive.append(c)
                elif value in _UNCERTAIN_CELLS:
                    uncertain += 1
                elif value not in _NEGATIVE_CELLS:
                    raise DatasetError(
                        f"{data}: line {line}, column {c!r}: {value[:40]!r} is not a label "
                        "value (1 positive; 0 or blank negative; -1 uncertain, read as negative)"
                    )
            found = frozenset(canonical_label(c) for c in positive)
            pid = (row.get("Patient ID") or row.get("patient_id") or "").strip() or row["path"]
            records.append(Record(path.name, path, found, pid))
    else:
        raise DatasetError(
            f"{data}: CSV columns {sorted(columns)} are neither NIH-style ('Image Index', "
            "'Finding Labels'[, 'Patient ID']) nor 'path' + one 0/1 column per label"
        )
    if uncertain:
        log.warning("%s: %d uncertain (-1) label cells read as negative", data, uncertain)
    if missing:
        log.warning("%s: %d of %d listed images not found; skipped", data, missing, len(rows))
    if not records:
        raise DatasetError(f"{data}: none of the {len(rows)} listed images was found under {base}")
    return records


def _indexed_name(name: str) -> bool:
    """Whether `_find_images` would have indexed `name` had it been there: a bare image file
    name. Such a name need not be looked up again (a subset of ChestX-ray14 lists some
    110,000 absent files, three `stat` calls each: 3 s)."""
    return os.sep not in name and "/" not in name and Path(name).suffix.lower() in _IMAGE_SUFFIXES


def _relative(base: Path, name: str) -> Path | None:
    for candidate in (Path(name), base / name, base / "images" / name):
        if candidate.is_file():
            return candidate
    return None


def resolve_labels(spec: str | Sequence[str], records: Sequence[Record]) -> list[str]:
    """Turn a label-set spec into label names.

    Args:
        spec: "chestxray14" / "chestxray8", "auto" (labels present in `records`, in
            ChestX-ray14 order, others appended sorted), a comma list, or a sequence.
        records: the dataset (for "auto").

    Raises:
        DatasetError: empty result or unknown set name.
    """
    from labeler.schema import CHESTXRAY14, LABEL_SETS

    if isinstance(spec, str):
        if spec.lower() in LABEL_SETS:
            return [label.value for label in LABEL_SETS[spec.lower()]]
        if spec == "auto":
            present = set().union(*(r.findings for r in records)) if records else set()
            order = [label.value for label in CHESTXRAY14]
            names = [n for n in order if n in present] + sorted(present - set(order))
        else:
            names = [n.strip() for n in spec.split(",") if n.strip()]
    else:
        names = [str(getattr(n, "value", n)) for n in spec]
    if not names:
        raise DatasetError(f"label set {spec!r} is empty (no findings in the data?)")
    return names


def label_coverage(
    spec: str | Sequence[str], labels: Sequence[str], records: Sequence[Record]
) -> list[str]:
    """Check the labels against the data's findings; returns warnings for a model card.

    A label no image is positive for trains on negatives only, and a finding no label
    takes is dropped: both usually mean a misspelt name. Named label sets ("chestxray14")
    may lack findings a small dataset never shows (warned); labels named one by one must
    each occur.

    Raises:
        DatasetError: a label named in a list that no image is positive for (with the
            nearest finding of the data, when one is close).
    """
    import difflib

    from labeler.schema import LABEL_SETS

    counts: dict[str, int] = {}
    for r in records:
        for name in r.findings:
            counts[name] = counts.get(name, 0) + 1
    absent = [name for name in labels if name not in counts]
    untrained = {name: n for name, n in sorted(counts.items()) if name not in set(labels)}
    named_set = isinstance(spec, str) and (spec.lower() in LABEL_SETS or spec == "auto")
    if absent and not named_set:
        hints = []
        for name in absent:
            close = difflib.get_close_matches(name, list(counts), n=1, cutoff=0.6)
            hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise DatasetError(
            f"no image is positive for the label(s) {', '.join(hints)}; the data's findings: "
            f"{', '.join(sorted(counts)) or 'none'}"
        )
    warnings = []
    if absent:
        warnings.append(
            f"no image in the data is positive for {', '.join(absent)}: these labels learned "
            "negatives only; do not trust their probabilities"
        )
    if untrained:
        shown = ", ".join(f"{name} ({n})" for name, n in list(untrained.items())[:10])
        more = f" and {len(untrained) - 10} more" if len(untrained) > 10 else ""
        warnings.append(
            f"findings in the data that no label trains (images): {shown}{more}; check "
            "their spelling, or name the labels to train with --labels"
        )
    return warnings


def split_records(
    records: Sequence[Record],
    split: Split,
    *,
    root: str | os.PathLike[str] | None = None,
    seed: int = 0,
    fractions: tuple[float, float, float] = (0.7, 0.1, 0.2),
) -> list[Record]:
    """Select a patient-wise split.

    Uses `root/train_val_list.txt` + `root/test_list.txt` when both exist (validation is
    then a seeded 1/8 of the train_val patients); otherwise a seeded patient-wise split
    with `fractions` (train, val, test). No patient appears in two splits.
    """
    if split == "all":
        return list(records)
    rng = np.random.default_rng(seed)
    official = Path(root) if root is not None else None
    if official and (official / "test_list.txt").is_file():
        test_names = set((official / "test_list.txt").read_text().split())
        if split == "test":
            return [r for r in records if r.image_index in test_names]
        pool = [r for r in records if r.image_index not in test_names]
        patients = sorted({r.patient_id for r in pool})
        rng.shuffle(patients)
        val_patients = set(patients[: max(1, len(patients) // 8)]) if len(patients) > 1 else set()
        want_val = split == "val"
        return [r for r in pool if (r.patient_id in val_patients) == want_val]
    patients = sorted({r.patient_id for r in records})
    rng.shuffle(patients)
    n = len(patients)
    n_train = round(n * fractions[0])
    n_val = round(n * fractions[1])
    parts = {
        "train": set(patients[:n_train]),
        "val": set(patients[n_train : n_train + n_val]),
        "test": set(patients[n_train + n_val :]),
    }
    return [r for r in records if r.patient_id in parts[split]]


class LabelledImages(Dataset[tuple[torch.Tensor, torch.Tensor, int]]):
    """What every dataset here shares: records, label names and the multi-hot targets.

    Items are `(image (1, S, S), target (C,) float32, index)`; subclasses say how the image
    is made.
    """

    def __init__(self, records: Sequence[Record], labels: Sequence[str]) -> None:
        self.records = list(records)
        self.labels = list(labels)
        col = {name: i for i, name in enumerate(self.labels)}
        self.targets = np.zeros((len(self.records), len(self.labels)), np.float32)
        for i, r in enumerate(self.records):
            for f in r.findings:
                if f in col:
                    self.targets[i, col[f]] = 1.0

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """Counts for the model card: images, patients, positives per label."""
        return {
            "images": len(self.records),
            "patients": len({r.patient_id for r in self.records}),
            "positives": {n: int(self.targets[:, i].sum()) for i, n in enumerate(self.labels)},
        }


class ChestXrayDataset(LabelledImages):
    """Images and multi-hot targets.

    Items are `(image (1, S, S) float32 in [0, 1], target (C,) float32, index)`.

    Args:
        records: images to serve.
        labels: label names, defining the target order.
        transform: pixels (rows, columns) -> (1, S, S) tensor (e.g. `EvalTransform`).
        cache_size: if set, keep each image in memory as uint8 resized to this side
            after its first load (for small sets, e.g. phantoms; a big win on CPU).
        on_error: "raise" on an unreadable image, or "skip" (serve a black image and
            log it; the record still counts).
    """

    def __init__(
        self,
        records: Sequence[Record],
        labels: Sequence[str],
        transform: Callable[[np.ndarray], torch.Tensor],
        *,
        cache_size: int | None = None,
        on_error: Literal["raise", "skip"] = "raise",
    ) -> None:
        super().__init__(records, labels)
        self.transform = transform
        self.cache_size = cache_size
        self.on_error = on_error
        self._cache: dict[int, tuple[np.ndarray, tuple[int, int]]] = {}

    def pixels(self, index: int) -> tuple[np.ndarray, tuple[int, int]]:
        """The grey image (maybe cached, downsized) and its ORIGINAL (rows, columns)."""
        hit = self._cache.get(index)
        if hit is not None:
            return hit[0].astype(np.float32) / 255.0, hit[1]
        record = self.records[index]
        try:
            px = load_image(record.path).pixels
        except ImageError:
            if self.on_error == "raise":
                raise
            log.warning("unreadable image %s; serving a blank image", record.path)
            px = np.zeros((256, 256), np.float32)
        shape = (int(px.shape[0]), int(px.shape[1]))
        if self.cache_size is not None:
            # Aspect ratio kept: the transform then letterboxes (or stretches) it as it
            # would the original.
            small = (fit_long_side(px, self.cache_size) * 255 + 0.5).astype(np.uint8)
            self._cache[index] = (small, shape)
            return small.astype(np.float32) / 255.0, shape
        return px, shape

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        px, _ = self.pixels(index)
        return self.transform(px), torch.from_numpy(self.targets[index]), index


class FittedDataset(LabelledImages):
    """Images fitted to the input side as integers: the training loader's dataset (issue 19).

    Items are `(image (1, S, S) uint8 (or uint16), target (C,) float32, index)`. The work per
    item is a decode to integers (`load_integer_image`) and one area resize of those integers
    (`fit_square_integer`); no full-size float image is made, and the float conversion and
    augmentation run per batch on the training device (`models.augment`).

    Args:
        records: images to serve.
        labels: label names, defining the target order.
        size: the input side S.
        resize: "letterbox" (pad with 0) or "stretch".
        dtype: np.uint8, or np.uint16 to keep more than 8 bits of a 16-bit source.
        cache: keep each fitted image in memory after its first load (small sets; each
            loader worker keeps its own copy).
        on_error: "raise" on an unreadable image, or "skip" (serve a black image and log it;
            the record still counts).
    """

    def __init__(
        self,
        records: Sequence[Record],
        labels: Sequence[str],
        *,
        size: int,
        resize: str = "letterbox",
        dtype: type[np.unsignedinteger[Any]] = np.uint8,
        cache: bool = False,
        on_error: Literal["raise", "skip"] = "raise",
    ) -> None:
        super().__init__(records, labels)
        self.size = size
        self.resize = resize
        self.dtype = dtype
        self.cache = cache
        self.on_error = on_error
        self._cache: dict[int, np.ndarray] = {}

    def fitted(self, index: int) -> np.ndarray:
        """The (S, S) integer image of record `index`, decoded and fitted.

        Raises:
            ImageError: the file is unreadable (whatever `on_error` says).
        """
        hit = self._cache.get(index)
        if hit is not None:
            return hit
        image = load_integer_image(self.records[index].path)
        out, _ = fit_square_integer(
            image.pixels, self.size, self.resize, low=image.low, high=image.high, dtype=self.dtype
        )
        if self.cache:
            self._cache[index] = out
        return out

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        try:
            pixels = self.fitted(index)
        except ImageError:
            if self.on_error == "raise":
                raise
            log.warning("unreadable image %s; serving a blank image", self.records[index].path)
            pixels = np.zeros((self.size, self.size), self.dtype)
        return torch.from_numpy(pixels)[None], torch.from_numpy(self.targets[index]), index


class EpochShuffle(torch.utils.data.Sampler[int]):
    """A new order of `n` images each epoch, drawn from (seed, epoch) alone.

    torch's own shuffling draws from the global generator when an epoch's iteration starts,
    so the order depended on what else had drawn from it before (every DataLoader iteration
    does, validation's included) and a resumed run saw other orders than an uninterrupted
    one. `set_epoch` as `DistributedSampler`, which does the same across ranks.
    """

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n = n
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next iteration gives."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return iter(torch.randperm(self.n, generator=generator).tolist())

    def __len__(self) -> int:
        return self.n


def init_loader_worker(worker_id: int) -> None:
    """`worker_init_fn` of the training loaders: one thread per worker process.

    Each worker decodes whole images; torch's and OpenCV's own thread pools inside every
    worker would only oversubscribe the cores the workers already fill.
    """
    import cv2

    torch.set_num_threads(1)
    cv2.setNumThreads(0)
    # Errors only: an unreadable image reaches the caller as its ImageError, named.
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_ERROR)


def build_loader(
    dataset: Dataset[Any],
    *,
    batch_size: int,
    workers: int,
    shuffle: bool = False,
    sampler: Any = None,
    drop_last: bool = False,
    pin_memory: bool = False,
    prefetch_factor: int = 4,
) -> torch.utils.data.DataLoader[Any]:
    """The DataLoader that training and `cxr prepare` use (one thread per worker, see
    `init_loader_worker`; workers kept across epochs; `prefetch_factor` batches in flight
    per worker, so a GPU step never waits on a worker that is between two images).

    Args:
        dataset: e.g. a `FittedDataset`.
        batch_size: images per batch.
        workers: worker processes (0: load in the calling process).
        shuffle, sampler, drop_last: as `torch.utils.data.DataLoader`.
        pin_memory: page-locked batches, for asynchronous copies to a CUDA device.
        prefetch_factor: batches loaded ahead per worker (ignored without workers).
    """
    return torch.utils.data.DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        sampler=sampler,
        num_workers=workers,
        pin_memory=pin_memory,
        drop_last=drop_last,
        persistent_workers=workers > 0,
        worker_init_fn=init_loader_worker if workers > 0 else None,
        prefetch_factor=prefetch_factor if workers > 0 else None,
    )


def loader_workers(requested: int | None, device: torch.device, local_world: int = 1) -> int:
    """DataLoader processes: `requested` when given; on CUDA, the cores this process may
    use, shared among the `local_world` training processes on the machine, less one for
    the training loop (at least 2); on CPU 2, since the model's own threads need the cores.

    A GPU step at 1024 px takes ~6 ms per image, and a worker decodes and fits one 1024 px
    PNG in ~14 ms (one H200 machine's cores): two workers held `cxr train` to 82% of the
    step rate, 64% with `torch.compile`.
    """
    if requested is not None:
        return requested
    if device.type != "cuda":
        return 2
    from models.decode_pool import default_workers

    return max(2, default_workers() // max(1, local_world) - 1)
