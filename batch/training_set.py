"""Write an NIH ChestX-ray14-style training set from a labeled PACS export.

Layout (what `cxr train --data DIR` reads): `DIR/images/<Image Index>` PNGs and
`DIR/Data_Entry.csv` with the NIH columns. As in Wang et al. (2017), images are
resized to 1024x1024 (a plain resize: aspect ratio not kept, original size
recorded so coordinates map back) and labels are the report's mined positives
joined by "|", or "No Finding". Negated and (by default) uncertain findings are
not positive, as in the paper.

Patient IDs are never written: `Patient ID` is a keyed hash (HMAC-SHA256) of
the patient key, so images of one patient stay together (patient-wise splits)
without the ID being recoverable by hashing candidate IDs.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import os
import secrets
from collections import defaultdict
from collections.abc import Container, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from models.data import DATA_ENTRY_COLUMNS

__all__ = ["DatasetImage", "DatasetWriter", "EncodedPng", "encode_png"]

# Threads encoding PNGs (OpenCV releases the interpreter lock while it compresses): one
# 1024 px PNG is 17 ms of a core, so a GPU host writing the set from one thread topped out
# near 60 images/s.
PNG_THREADS = 4


@dataclass(frozen=True)
class EncodedPng:
    """A training-set image resized and encoded already (by a Ray worker, so that the
    driver only names and writes it).

    Attributes:
        data: the PNG file's bytes.
        size: the side of the square PNG.
        shape: (rows, cols) of the image it was made from (the `OriginalImage` columns).
    """

    data: bytes
    size: int
    shape: tuple[int, int]


def encode_png(pixels: np.ndarray, size: int) -> EncodedPng:
    """Resize an image to `size` x `size` (a plain resize, as Wang et al.) and encode it
    as a grey PNG: the bytes `DatasetWriter` writes for it.

    Args:
        pixels: float32 (rows, cols) in [0, 1], or uint8 grey (a display copy).
        size: the side of the square output.

    Raises:
        ValueError: OpenCV could not encode the image.
    """
    import cv2

    rows, cols = pixels.shape
    if pixels.dtype == np.uint8:
        grey = pixels
    else:
        grey = np.clip(np.rint(pixels * 255.0), 0, 255).astype(np.uint8)
    interp = cv2.INTER_AREA if max(rows, cols) > size else cv2.INTER_LINEAR
    resized = cv2.resize(grey, (size, size), interpolation=interp)
    ok, data = cv2.imencode(".png", resized)
    if not ok:
        raise ValueError(f"could not encode a {rows} x {cols} image as a PNG")
    return EncodedPng(data.tobytes(), size, (rows, cols))


@dataclass(frozen=True)
class DatasetImage:
    """One image for the training set.

    Attributes:
        pixels: float32 (rows, cols) in [0, 1], or uint8 grey (a display copy), or the PNG
            made from one already (`encode_png`, at the writer's size).
        labels: label -> status from the report's labels.
        patient_key: identifier grouping a patient's images (hashed before writing).
        view_position: PA/AP/LL when known.
    """

    pixels: np.ndarray | EncodedPng
    labels: dict[str, str]
    patient_key: str
    view_position: str | None = None


class DatasetWriter:
    """Collects images and their mined labels into Data_Entry.csv.

    Rows are appended to Data_Entry.csv as images are written (flushed per row, so
    an interrupted run leaves what it wrote); `close()` rewrites the file sorted by
    Image Index.

    Args:
        out_dir: dataset folder (created); must be empty or new unless `resume`.
        size: side of the square output PNGs (the paper used 1024).
        uncertain_positive: count "uncertain" findings as positive.
        key: HMAC key for patient pseudonyms; random (per run) when None. A resumed
            dataset needs the key of the first run, or returning patients get new IDs.
        resume: continue an existing dataset: its Data_Entry.csv rows are loaded (a
            torn last line is dropped) and new rows are added after them.
        keep: with `resume`, the Image Index values to keep (those the batch output
            recorded); rows and PNGs of other images, written just before an
            interruption, are removed so that a re-run does not duplicate them.

    Raises:
        FileExistsError: `out_dir` already holds a Data_Entry.csv and not `resume`.
    """

    def __init__(
        self,
        out_dir: Path,
        *,
        size: int = 1024,
        uncertain_positive: bool = False,
        key: bytes | None = None,
        resume: bool = False,
        keep: Container[str] | None = None,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / "Data_Entry.csv"
        if self.path.exists() and not resume:
            raise FileExistsError(
                f"{self.path} exists; choose an empty --dataset folder, or use --resume "
                "to continue it"
            )
        (self.out_dir / "images").mkdir(parents=True, exist_ok=True)
        self.size = size
        self.uncertain_positive = uncertain_positive
        self._key = key if key is not None else secrets.token_bytes(32)
        self._follow_up: dict[str, int] = defaultdict(int)
        self._rows: list[dict[str, Any]] = []
        self._pool: ThreadPoolExecutor | None = None
        if resume and self.path.exists():
            self._load(keep)
        self._rewrite(self._rows)  # header (and kept rows), replacing the file atomically
        self._file: IO[str] | None = self.path.open("a", newline="", encoding="utf-8")
        self._writer = csv.DictWriter(self._file, fieldnames=DATA_ENTRY_COLUMNS)

    def _load(self, keep: Container[str] | None) -> None:
        text = self.path.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):
            text = text[: text.rfind("\n") + 1]  # torn last row of an interrupted run
        seen: set[str] = set()
        for row in csv.DictReader(text.splitlines()):
            name = row.get("Image Index") or ""
            if not name or name in seen:
                continue
            if keep is not None and name not in keep:
                (self.out_dir / "images" / name).unlink(missing_ok=True)
                continue
            seen.add(name)
            self._rows.append({c: row.get(c, "") for c in DATA_ENTRY_COLUMNS})
            patient, follow_up = row["Patient ID"], int(row["Follow-up #"])
            self._follow_up[patient] = max(self._follow_up[patient], follow_up + 1)

    def pseudonym(self, patient_key: str) -> str:
        """Stable (per key) 12-hex-digit pseudonym of a patient identifier."""
        return hmac.new(self._key, patient_key.encode("utf-8"), hashlib.sha256).hexdigest()[:12]

    def finding_labels(self, labels: dict[str, str]) -> str:
        """NIH `Finding Labels`: positives joined by "|" (vocabulary order), or No Finding."""
        wanted = {"positive", "uncertain"} if self.uncertain_positive else {"positive"}
        positives = [name for name, status in labels.items() if status in wanted]
        return "|".join(positives) if positives else "No Finding"

    def add(
        self,
        pixels: np.ndarray,
        *,
        labels: dict[str, str],
        patient_key: str,
        view_position: str | None = None,
    ) -> str:
        """Write one image and remember its row (`add_many` of one).

        Returns:
            The `Image Index` (file name) written.
        """
        return self.add_many([DatasetImage(pixels, labels, patient_key, view_position)])[0]

    def add_many(self, images: Sequence[DatasetImage]) -> list[str]:
        """Write images and remember their rows, in order; the PNGs are encoded by a few
        threads at once.

        Returns:
            The `Image Index` (file name) of each image.

        Raises:
            OSError: a PNG could not be written; the rows of the images before it are
                recorded, the others not.
        """
        planned: list[tuple[DatasetImage, str, str, int]] = []
        for image in images:
            patient = self.pseudonym(image.patient_key)
            follow_up = self._follow_up[patient]
            self._follow_up[patient] += 1
            planned.append((image, f"{patient}_{follow_up:03d}.png", patient, follow_up))
        threads = self._threads()
        writes = [threads.submit(self._write_png, p[0].pixels, p[1]) for p in planned]
        for write, (image, name, patient, follow_up) in zip(writes, planned, strict=True):
            write.result()  # its OSError, after the rows of the images before it
            pixels = image.pixels
            rows, cols = pixels.shape
            self._remember(
                {
                    "Image Index": name,
                    "Finding Labels": self.finding_labels(image.labels),
                    "Follow-up #": follow_up,
                    "Patient ID": patient,
                    "Patient Age": "",
                    "Patient Gender": "",
                    "View Position": image.view_position or "",
                    "OriginalImage[Width": cols,
                    "Height]": rows,
                    "OriginalImagePixelSpacing[x": "",
                    "y]": "",
                }
            )
        return [p[1] for p in planned]

    def _threads(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(PNG_THREADS, thread_name_prefix="cxr-dataset-png")
        return self._pool

    def _write_png(self, pixels: np.ndarray | EncodedPng, name: str) -> None:
        if isinstance(pixels, EncodedPng) and pixels.size != self.size:
            raise ValueError(
                f"{name}: an image encoded at {pixels.size} px for a training set of "
                f"{self.size} px; encode it with encode_png(pixels, {self.size})"
            )
        png = pixels if isinstance(pixels, EncodedPng) else encode_png(pixels, self.size)
        path = self.out_dir / "images" / name
        try:
            path.write_bytes(png.data)
        except OSError as exc:
            raise OSError(f"could not write {path}: {exc.strerror or exc}") from exc

    def _remember(self, row: dict[str, Any]) -> None:
        self._rows.append(row)
        if self._file is not None:
            self._writer.writerow(row)
            self._file.flush()

    def __len__(self) -> int:
        return len(self._rows)

    def close(self) -> Path:
        """Rewrite Data_Entry.csv sorted by Image Index (atomically) and return its path."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._file is not None:
            self._file.close()
            self._file = None
        self._rewrite(sorted(self._rows, key=lambda r: r["Image Index"]))
        return self.path

    def _rewrite(self, rows: list[dict[str, Any]]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with tmp.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=DATA_ENTRY_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, self.path)
