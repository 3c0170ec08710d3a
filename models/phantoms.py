"""Synthetic chest-like phantoms with known lesion boxes: a test bed for weak localization.

Each phantom has a body, two lungs with vessel-like texture, ribs, spine and a
heart shadow, plus noise and a random pose/exposure. Five ChestX-ray14 labels are
simulated, each a lesion type with a known place and size:

    Nodule        small round opacity (radius 3.5-5% of the image) inside a lung
    Mass          large lobulated opacity (radius 7-10%) inside a lung
    Effusion      fluid level filling one lung base, with a meniscus
    Cardiomegaly  heart shadow enlarged to > 50% of the thoracic width
    Pneumothorax  dark, texture-free band (8-11% of the image wide) along one lung's
                  lateral wall, with a visible pleural line

`write_phantom_dataset` writes them in the NIH ChestX-ray14 layout (images/*.png,
Data_Entry.csv, BBox_List.csv) so training sees image-level labels only and the
evaluator scores heatmap boxes against the true ones.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from models.data import DATA_ENTRY_COLUMNS, SYNTHETIC_MARKER

__all__ = ["PHANTOM_LABELS", "Phantom", "make_phantom", "write_phantom_dataset"]

PHANTOM_LABELS: tuple[str, ...] = ("Cardiomegaly", "Effusion", "Mass", "Nodule", "Pneumothorax")


@dataclass
class Phantom:
    """A phantom image (uint8, (size, size)) and its truth: boxes are (label, x, y, w, h) pixels."""

    image: np.ndarray
    labels: list[str]
    boxes: list[tuple[str, float, float, float, float]] = field(default_factory=list)


def _ellipse(
    yy: np.ndarray, xx: np.ndarray, cx: float, cy: float, ax: float, ay: float
) -> np.ndarray:
    return ((xx - cx) / ax) ** 2 + ((yy - cy) / ay) ** 2  # < 1 inside


def _smooth_noise(rng: np.random.Generator, size: int, scale: int) -> np.ndarray:
    import cv2

    small = rng.standard_normal((max(2, size // scale), max(2, size // scale))).astype(np.float32)
    return cv2.resize(small, (size, size), interpolation=cv2.INTER_CUBIC)


def _bbox(mask: np.ndarray) -> tuple[float, float, float, float]:
    ys, xs = np.nonzero(mask)
    x0, x1, y0, y1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
    return float(x0), float(y0), float(x1 - x0), float(y1 - y0)


def make_phantom(
    rng: np.random.Generator,
    *,
    size: int = 256,
    labels: Sequence[str] = (),
) -> Phantom:
    """Draw one phantom with the given lesions.

    Args:
        rng: numpy random generator (the only source of randomness).
        size: image side in pixels.
        labels: lesion labels to draw (a subset of `PHANTOM_LABELS`).

    Returns:
        `Phantom` with the uint8 image, its labels and the true boxes.

    Raises:
        ValueError: an unknown label.
    """
    unknown = set(labels) - set(PHANTOM_LABELS)
    if unknown:
        raise ValueError(f"unknown phantom labels {sorted(unknown)}; known: {PHANTOM_LABELS}")
    # A seed must give the same phantom (datasets, tests and the demo model's recipe rely on
    # it): the draws come in this order (pose, texture, heart, the pneumothorax's side, then
    # each lesion in turn); a change of the drawing keeps it.
    img, chest = _draw_chest(rng, size)
    big_heart = "Cardiomegaly" in labels
    heart = _draw_heart(img, chest, rng, big=big_heart)
    boxes: list[tuple[str, float, float, float, float]] = []
    if big_heart:
        boxes.append(("Cardiomegaly", *_bbox(heart)))
    lung_index = int(rng.integers(0, 2))
    if "Effusion" in labels:
        boxes.append(("Effusion", *_bbox(_draw_effusion(img, chest, rng))))
    if "Pneumothorax" in labels:
        band = _draw_pneumothorax(img, chest, rng, chest.lungs[lung_index])
        boxes.append(("Pneumothorax", *_bbox(band)))
    for name, radii in (("Nodule", (0.035, 0.05)), ("Mass", (0.07, 0.1))):
        if name in labels:
            img, blob = _draw_opacity(img, chest, rng, radii, lobes=1 if name == "Nodule" else 3)
            boxes.append((name, *_bbox(blob > 0.05)))
    return Phantom(image=_expose(img, rng), labels=sorted(labels), boxes=boxes)


@dataclass(frozen=True)
class _Chest:
    """Where a phantom's anatomy lies: the pixel grid in [0, 1), the pose and habitus
    (shift `dx`, `dy`, scale `k`), the body and the two lungs (mask, centre x)."""

    yy: np.ndarray
    xx: np.ndarray
    dx: float
    dy: float
    k: float
    body: np.ndarray
    lungs: list[tuple[np.ndarray, float]]


def _draw_chest(rng: np.random.Generator, size: int) -> tuple[np.ndarray, _Chest]:
    """The float image of a normal chest without its heart: body, textured lungs, spine, ribs."""
    s = size
    yy, xx = np.mgrid[0:s, 0:s].astype(np.float32) / s
    # Pose and body habitus.
    dx, dy = rng.uniform(-0.03, 0.03, size=2)
    k = rng.uniform(0.93, 1.07)
    img = np.full((s, s), 0.05, np.float32)
    body = _ellipse(yy, xx, 0.5 + dx, 0.56 + dy, 0.47 * k, 0.55 * k) < 1
    img[body] = 0.45
    lungs = []
    for side in (-1, 1):
        cx = 0.5 + side * 0.18 * k + dx
        lung = _ellipse(yy, xx, cx, 0.45 + dy, 0.135 * k, 0.29 * k) < 1
        lungs.append((lung, cx))
        img[lung] = 0.16
    lung_any = lungs[0][0] | lungs[1][0]
    texture = 0.05 * _smooth_noise(rng, s, 24) + 0.03 * _smooth_noise(rng, s, 8)
    img += np.where(lung_any, texture, 0.0)
    # Spine / mediastinum.
    img[(np.abs(xx - 0.5 - dx) < 0.05 * k) & body] = 0.62
    # Ribs: curved bright arcs.
    for i in range(9):
        y0 = 0.17 + dy + i * 0.065 * k
        arc = np.abs(yy - (y0 + 0.35 * (xx - 0.5 - dx) ** 2)) < 0.011 * k
        img[arc & body] += 0.09
    return img, _Chest(yy=yy, xx=xx, dx=dx, dy=dy, k=k, body=body, lungs=lungs)


def _draw_heart(
    img: np.ndarray, chest: _Chest, rng: np.random.Generator, *, big: bool
) -> np.ndarray:
    """Draw the heart shadow into `img` (patient's left = image right in a PA view); its mask."""
    yy, xx, k = chest.yy, chest.xx, chest.k
    hx, hy = (0.235, 0.15) if big else (0.125, 0.105)
    hx *= k * rng.uniform(0.95, 1.05)
    hy *= k * rng.uniform(0.95, 1.05)
    hcx, hcy = 0.55 + chest.dx + (0.03 if big else 0.0), 0.64 + chest.dy
    heart = _ellipse(yy, xx, hcx, hcy, hx, hy) < 1
    img[heart] = np.maximum(img[heart], 0.66)
    return heart


def _draw_effusion(img: np.ndarray, chest: _Chest, rng: np.random.Generator) -> np.ndarray:
    """Fill one lung's base with fluid in `img`; the fluid's mask."""
    yy, xx, k = chest.yy, chest.xx, chest.k
    s = img.shape[0]
    lung, cx = chest.lungs[int(rng.integers(0, 2))]
    ys = np.nonzero(lung.any(axis=1))[0]
    bottom = ys.max() / s
    level = bottom - rng.uniform(0.13, 0.2) * k
    lateral = cx + np.sign(cx - 0.5) * 0.135 * k
    # Meniscus: fluid climbs the lateral chest wall.
    surface = level - 0.12 * np.clip(1 - np.abs(xx - lateral) / 0.14, 0, 1) ** 2
    fluid: np.ndarray = lung & (yy > surface)
    img[fluid] = np.maximum(img[fluid], 0.6)
    return fluid


def _draw_pneumothorax(
    img: np.ndarray, chest: _Chest, rng: np.random.Generator, side_lung: tuple[np.ndarray, float]
) -> np.ndarray:
    """Darken a band along the lung's lateral wall in `img`, with its pleural line; its mask."""
    yy, xx, k = chest.yy, chest.xx, chest.k
    lung, cx = side_lung
    side = np.sign(cx - 0.5)
    edge = cx + side * (0.135 * k - rng.uniform(0.08, 0.11))
    top = 0.45 + chest.dy - 0.29 * k
    band: np.ndarray = lung & (side * (xx - edge) > 0) & (yy < top + rng.uniform(0.3, 0.4) * k)
    img[band] = 0.04 + 0.01 * rng.standard_normal(int(band.sum())).astype(np.float32)
    pleural = lung & (np.abs(xx - edge) < 0.006) & (yy < top + 0.35 * k)
    img[pleural & ~band] = 0.5
    return band


def _draw_opacity(
    img: np.ndarray,
    chest: _Chest,
    rng: np.random.Generator,
    radii: tuple[float, float],
    *,
    lobes: int,
) -> tuple[np.ndarray, np.ndarray]:
    """A round (nodule) or lobulated (mass) opacity inside a lung: the new image, the blob."""
    yy, xx, k, dy = chest.yy, chest.xx, chest.k, chest.dy
    s = img.shape[0]
    lung, cx = chest.lungs[int(rng.integers(0, 2))]
    r = rng.uniform(*radii) * k
    ys, xs = np.nonzero(lung & (_ellipse(yy, xx, cx, 0.45 + dy, 0.135 * k - r, 0.29 * k - r) < 1))
    j = int(rng.integers(0, len(ys)))
    ccx, ccy = xs[j] / s, ys[j] / s
    blob = np.zeros((s, s), np.float32)
    for lobe in range(lobes):
        ox, oy = (rng.uniform(-0.35, 0.35, size=2) * r) if lobe else (0.0, 0.0)
        d2 = ((xx - ccx - ox) ** 2 + (yy - ccy - oy) ** 2) / (r * (0.8 if lobe else 1)) ** 2
        blob = np.maximum(blob, np.clip(1.3 - d2**2, 0, 1))
    return np.maximum(img, img + 0.42 * blob), blob


def _expose(img: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Exposure, blur and quantum noise; the uint8 image."""
    import cv2

    s = img.shape[0]
    img = np.asarray(cv2.GaussianBlur(img, (0, 0), sigmaX=max(0.6, s / 320)), np.float32)
    img = img * rng.uniform(0.85, 1.15) + rng.uniform(-0.05, 0.05)
    img += rng.normal(0, 0.025, img.shape).astype(np.float32)
    return (np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8)


def write_phantom_dataset(
    out: str | os.PathLike[str],
    *,
    n: int,
    seed: int = 0,
    size: int = 256,
    prevalence: float = 0.2,
    labels: Sequence[str] = PHANTOM_LABELS,
) -> Path:
    """Write `n` phantoms in the NIH ChestX-ray14 layout.

    Layout: `OUT/images/<patient>_<follow-up>.png`, `OUT/Data_Entry.csv` (Data_Entry_2017
    columns, labels joined by "|" or "No Finding"), `OUT/BBox_List.csv` (BBox_List_2017
    format: Image Index, Finding Label, Bbox [x, y, w, h]).

    Args:
        out: output folder (created).
        n: number of images.
        seed: random seed (same seed, same dataset).
        size: image side in pixels.
        prevalence: probability of each lesion, independently.
        labels: which lesion types to draw.

    Returns:
        The output folder.
    """
    from PIL import Image

    root = Path(out)
    (root / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    entries: list[list[str]] = []
    box_rows: list[list[str]] = []
    for i in range(n):
        present = [name for name in labels if rng.random() < prevalence]
        ph = make_phantom(rng, size=size, labels=present)
        # Two images per patient, so the patient-wise split has something to keep together.
        patient, follow_up = i // 2 + 1, i % 2
        name = f"{patient:08d}_{follow_up:03d}.png"
        Image.fromarray(ph.image).save(root / "images" / name, optimize=False, compress_level=1)
        entries.append(
            [
                name,
                "|".join(ph.labels) or "No Finding",
                str(follow_up),
                str(patient),
                str(int(rng.integers(20, 90))),
                "M" if rng.random() < 0.5 else "F",
                "PA",
                str(size),
                str(size),
                "0.143",
                "0.143",
            ]
        )
        for label, x, y, w, h in ph.boxes:
            box_rows.append([name, label, f"{x:.1f}", f"{y:.1f}", f"{w:.1f}", f"{h:.1f}"])
    with (root / "Data_Entry.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(DATA_ENTRY_COLUMNS)
        writer.writerows(entries)
    with (root / "BBox_List.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        # BBox_List_2017.csv's header, including its empty trailing columns.
        writer.writerow(["Image Index", "Finding Label", "Bbox [x", "y", "w", "h]", "", "", ""])
        writer.writerows(row + ["", "", ""] for row in box_rows)
    # Marks the folder as synthetic: a model trained on it is a demo (issue 7, item 9).
    marker = {"synthetic": True, "generator": "cxr phantoms", "n": n, "seed": seed, "size": size}
    (root / SYNTHETIC_MARKER).write_text(json.dumps(marker) + "\n")
    return root
