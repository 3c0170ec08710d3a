"""Images kept for the worklist: what a batch read of an image whose report disagrees.

A batch job's files may be gone once it ends (an uploaded export is deleted), yet the
radiologist reviewing a worklist row must see the image with its heatmap and boxes. While
the job runs, `ReviewImageSink` keeps, for each image with at least one disagreement, its
model input (the fitted pixels and their geometry, a few hundred KiB) and an 8-bit preview
made from it: the image as the model saw it, at the model's input size. (A display copy
made from the full image would cost about 11 ms more per 2500x2048 DICOM read, 13.0-13.6
-> 24.1-24.4 ms in `benchmarks/display_copy.py`, for every image of the job, before anyone
knows which will disagree.) Their
storage keys go into the item's result (`app.worklist.REVIEW_KEY`). Opening a row predicts
that same model input again, with heatmaps, so the page shows the batch's own probabilities
and boxes.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence

import numpy as np

from app.inference import PREVIEW_SIDE, encode_preview
from app.storage import Storage
from app.worklist import REVIEW_KEY, discrepancies_in_result
from batch.interfaces import Outcome, Sink
from models.image_pipeline import LoadedImage, PreparedImage
from models.stored_pixels import UNIT_CODES
from models.transforms import Geometry

__all__ = [
    "PREVIEW_SIDE",
    "ReviewImageSink",
    "decode_model_input",
    "encode_model_input",
    "preview_of",
]

log = logging.getLogger(__name__)


def encode_model_input(prepared: PreparedImage) -> bytes:
    """The model input as a small .npz (its pixels as they are, and its geometry)."""
    g = prepared.geometry
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        pixels=prepared.pixels,
        geometry=np.array(
            [g.rows, g.columns, g.size, g.top, g.left, g.height, g.width], dtype=np.int64
        ),
    )
    return buffer.getvalue()


def decode_model_input(data: bytes) -> PreparedImage:
    """A `PreparedImage` from `encode_model_input` output.

    Raises:
        ValueError: not such a file.
    """
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            rows, columns, size, top, left, height, width = (int(v) for v in npz["geometry"])
            pixels = np.asarray(npz["pixels"])
    except (OSError, KeyError, ValueError) as exc:
        raise ValueError(f"stored model input is unreadable: {exc}") from None
    return PreparedImage(pixels, Geometry(rows, columns, size, top, left, height, width))


def preview_of(prepared: PreparedImage) -> np.ndarray:
    """The model input as an 8-bit grey image (its own size: the image part, no padding)."""
    pixels = prepared.pixels
    if pixels.dtype == np.uint16:
        scaled = (pixels.astype(np.uint32) * 255 + UNIT_CODES // 2) // UNIT_CODES
        return np.asarray(np.clip(scaled, 0, 255), np.uint8)
    return np.asarray(np.clip(np.asarray(pixels, np.float32), 0, 1) * 255 + 0.5, np.uint8)


class ReviewImageSink(Sink):
    """Keeps preview and model input of each image that the worklist will list.

    Runs before the database sink, so the keys it adds to a result are stored with it.
    A failure to keep them is logged and leaves the row without an image: it never
    fails the item.
    """

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def write(self, outcomes: Sequence[Outcome]) -> None:
        for outcome in outcomes:
            image = outcome.image
            if outcome.state != "done" or not isinstance(image, LoadedImage):
                continue
            if not discrepancies_in_result(outcome.result):
                continue
            # a display copy when the job made one (a training set's), else the model input
            shown = image.display if image.display is not None else preview_of(image.prepared)
            try:
                outcome.result[REVIEW_KEY] = {
                    "preview": self.storage.put_bytes(encode_preview(shown), ".png"),
                    "input": self.storage.put_bytes(encode_model_input(image.prepared), ".npz"),
                }
            except (OSError, RuntimeError, ValueError):
                log.warning("could not keep the review image of %s", outcome.key, exc_info=True)
