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
import secrets
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from models.data import DATA_ENTRY_COLUMNS

__all__ = ["DatasetWriter"]



class DatasetWriter:
    """Collects images and their mined labels; `close()` writes Data_Entry.csv.

    Args:
        out_dir: dataset folder (created); must be empty or new.
        size: side of the square output PNGs (the paper used 1024).
        uncertain_positive: count "uncertain" findings as positive.
        key: HMAC key for patient pseudonyms; random (per run) when None.

    Raises:
        FileExistsError: `out_dir` already holds a Data_Entry.csv.
    """

    def __init__(
        self,
        out_dir: Path,
        *,
        size: int = 1024,
        uncertain_positive: bool = False,
        key: bytes | None = None,
    ) -> None:
        self.out_dir = Path(out_dir)
        if (self.out_dir / "Data_Entry.csv").exists():
            raise FileExistsError(
                f"{self.out_dir / 'Data_Entry.csv'} exists; choose an empty --dataset folder"
            )
        (self.out_dir / "images").mkdir(parents=True, exist_ok=True)
        self.size = size
        self.uncertain_positive = uncertain_positive
        self._key = key if key is not None else secrets.token_bytes(32)
        self._follow_up: dict[str, int] = defaultdict(int)
        self._rows: list[dict[str, Any]] = []

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
        """Write one image and remember its row.

        Args:
            pixels: float32 (rows, cols) in [0, 1].
            labels: label -> status from the report's labels.
            patient_key: identifier grouping a patient's images (hashed before writing).
            view_position: PA/AP/LL when known.

        Returns:
            The `Image Index` (file name) written.
        """
        import cv2

        patient = self.pseudonym(patient_key)
        follow_up = self._follow_up[patient]
        self._follow_up[patient] += 1
        name = f"{patient}_{follow_up:03d}.png"
        rows, cols = pixels.shape
        grey = np.clip(np.rint(pixels * 255.0), 0, 255).astype(np.uint8)
        interp = cv2.INTER_AREA if max(rows, cols) > self.size else cv2.INTER_LINEAR
        resized = cv2.resize(grey, (self.size, self.size), interpolation=interp)
        if not cv2.imwrite(str(self.out_dir / "images" / name), resized):
            raise OSError(f"could not write {self.out_dir / 'images' / name}")
        self._rows.append(
            {
                "Image Index": name,
                "Finding Labels": self.finding_labels(labels),
                "Follow-up #": follow_up,
                "Patient ID": patient,
                "Patient Age": "",
                "Patient Gender": "",
                "View Position": view_position or "",
                "OriginalImage[Width": cols,
                "Height]": rows,
                "OriginalImagePixelSpacing[x": "",
                "y]": "",
            }
        )
        return name

    def __len__(self) -> int:
        return len(self._rows)

    def close(self) -> Path:
        """Write Data_Entry.csv (rows sorted by Image Index) and return its path."""
        path = self.out_dir / "Data_Entry.csv"
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=DATA_ENTRY_COLUMNS)
            writer.writeheader()
            writer.writerows(sorted(self._rows, key=lambda r: r["Image Index"]))
        return path
