"""Is a small lesion as visible in the new training input as in the old? (CPU, about 2 minutes)

Old path (the previous release's, kept as the reference): float decode, uint8 cache,
`TrainTransform` per image. New path (what `cxr train` runs): `FittedDataset` (uint8 fitted
on the integers) and `BatchAugment` per batch. On a phantom training set (the benchmark's:
600 phantoms of 192 px, seed 7, input 256 px, the trainer's split), this prints

- the loader check: every image and target of real training batches (2 workers, the
  trainer's `EpochShuffle`) is the dataset's item for the index it comes with;
- the un-augmented inputs of both paths: largest and mean difference;
- per lesion type, the lesion's contrast with its surroundings (mean inside the true box, moved
  by each draw's geometry, less the mean of a band around it), un-augmented and over `--draws`
  augmentations per lesion: mean, spread, 10th percentile, and the two-sample
  Kolmogorov-Smirnov statistic with its alpha = 0.001 bound.

    python benchmarks/lesion_visibility.py [--seed 7] [--draws 10]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np
import torch
from bench_kit import say

REPO = Path(__file__).resolve().parents[1]


class _Recording:
    """A numpy Generator that remembers what `TrainTransform` drew."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng, self.draws = rng, []  # type: ignore[var-annotated]

    def uniform(self, *args: object, **kwargs: object) -> object:
        value = self.rng.uniform(*args, **kwargs)  # type: ignore[arg-type]
        self.draws.append(value)
        return value

    def random(self) -> float:
        value = float(self.rng.random())
        self.draws.append(value)
        return value


class _Scripted:
    """Stands in for a numpy Generator: `TrainTransform` gets the values given."""

    def __init__(self, values: list[object]) -> None:
        self.values = list(values)

    def uniform(self, *args: object, **kwargs: object) -> object:
        return self.values.pop(0)

    def random(self) -> object:
        return self.values.pop(0)


def _contrast(images: np.ndarray, boxes: np.ndarray, rings: np.ndarray) -> np.ndarray:
    inside, around = boxes > 0.5, rings > 0.5
    return (images * inside).sum((1, 2)) / inside.sum((1, 2)) - (images * around).sum(
        (1, 2)
    ) / around.sum((1, 2))


def _ks(a: np.ndarray, b: np.ndarray) -> float:
    grid = np.sort(np.concatenate([a, b]))
    fa = np.searchsorted(np.sort(a), grid, side="right") / len(a)
    fb = np.searchsorted(np.sort(b), grid, side="right") / len(b)
    return float(np.abs(fa - fb).max())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=7, help="phantom data seed")
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--size", type=int, default=192)
    parser.add_argument("--image-size", type=int, default=256)
    parser.add_argument("--draws", type=int, default=10, help="augmentations per lesion")
    parser.add_argument("--work", type=Path, default=REPO / "runs" / "lesion_visibility")
    args = parser.parse_args()

    import cv2

    from models.augment import AugmentParams, BatchAugment
    from models.data import (
        ChestXrayDataset,
        EpochShuffle,
        FittedDataset,
        build_loader,
        load_records,
        resolve_labels,
        split_records,
    )
    from models.geometry import Geometry
    from models.phantoms import write_phantom_dataset
    from models.transforms import EvalTransform, TrainTransform

    torch.set_num_threads(2)
    data = args.work / f"seed{args.seed}"
    if not (data / "Data_Entry.csv").is_file():
        write_phantom_dataset(data, n=args.n, seed=args.seed, size=args.size)
    records = load_records(data)
    train = split_records(records, "train", root=data, seed=0)
    labels = resolve_labels("chestxray14", records)
    s = args.image_size
    old_set = ChestXrayDataset(train, labels, EvalTransform(s), cache_size=s)
    new_set = FittedDataset(train, labels, size=s, cache=True)

    loader = build_loader(
        new_set, batch_size=16, workers=2, sampler=EpochShuffle(len(new_set)), drop_last=True
    )
    wrong = seen = 0
    for b, (x, y, index) in enumerate(loader):
        for k, i in enumerate(index.tolist()):
            seen += 1
            item, target = new_set[i][0], torch.from_numpy(new_set.targets[i])
            wrong += int(not torch.equal(x[k], item) or not torch.equal(y[k], target))
        if b == 5:
            break
    say(f"loader: {wrong} of {seen} items differ from the dataset's item for their index")

    diffs = [
        np.abs(EvalTransform(s)(old_set.pixels(i)[0])[0].numpy() - new_set[i][0][0].numpy() / 255)
        for i in range(len(train))
    ]
    say(
        f"un-augmented input, {len(train)} training images: largest difference "
        f"{max(float(d.max()) for d in diffs) * 255:.2f}/255, mean "
        f"{float(np.mean([d.mean() for d in diffs])) * 255:.3f}/255"
    )

    boxes: dict[str, list[tuple[str, float, float, float, float]]] = {}
    with (data / "BBox_List.csv").open() as f:
        rows = csv.reader(f)
        next(rows)
        for row in rows:
            boxes.setdefault(row[0], []).append((row[1], *map(float, row[2:6])))  # type: ignore[arg-type]
    geo = Geometry.fit(args.size, args.size, s, "letterbox")
    rng, generator = np.random.default_rng(0), torch.Generator().manual_seed(0)
    augment, transform, d = BatchAugment(), TrainTransform(s), args.draws
    say(
        "| lesion | lesions | contrast, un-augmented: old / new | augmented old: mean / sd / p10 "
        "| augmented new: mean / sd / p10 | KS (bound) |"
    )
    say("|---|---|---|---|---|---|")
    for label in ("Nodule", "Pneumothorax", "Mass", "Effusion", "Cardiomegaly"):
        plain: list[np.ndarray] = []
        old: list[float] = []
        new: list[float] = []
        for i, record in enumerate(train):
            for name, bx, by, bw, bh in boxes.get(record.image_index, []):
                if name != label:
                    continue
                (x0, y0), (x1, y1) = geo.to_input(bx, by), geo.to_input(bx + bw, by + bh)
                box = np.zeros((s, s), np.float32)
                box[int(y0) : int(np.ceil(y1)), int(x0) : int(np.ceil(x1))] = 1.0
                ring = cv2.dilate(box, np.ones((17, 17), np.uint8)) - box
                pixels, _ = old_set.pixels(i)
                fitted = new_set[i][0]
                both = np.stack([EvalTransform(s)(pixels)[0].numpy(), fitted[0].numpy() / 255])
                plain.append(_contrast(both, box[None], ring[None]))
                for _ in range(d):
                    recording = _Recording(rng)
                    image = transform(pixels, recording)[0].numpy()  # type: ignore[arg-type]
                    geometry = [*recording.draws[:4], 0.0, 0.0, 0.0]
                    moved = [
                        transform(m, _Scripted(list(geometry)))[0].numpy()  # type: ignore[arg-type]
                        for m in (box, ring)
                    ]
                    old.append(float(_contrast(image[None], moved[0][None], moved[1][None])[0]))
                params = augment.sample(d, generator)
                images = augment.apply(fitted[None].expand(d, 1, s, s), params)[:, 0].numpy()
                one = torch.ones(d, dtype=torch.float64)
                geometric = AugmentParams(
                    params.angle, params.zoom, params.shift_x, params.shift_y, params.flip,
                    one, one, one * 0,
                )  # fmt: skip
                moved_new = [
                    augment.apply(torch.from_numpy(m)[None, None].expand(d, 1, s, s), geometric)
                    for m in (box, ring)
                ]
                new.extend(
                    _contrast(images, moved_new[0][:, 0].numpy(), moved_new[1][:, 0].numpy())
                )
        if not plain:
            continue
        p, o, n = np.stack(plain), np.asarray(old), np.asarray(new)
        bound = 1.95 * np.sqrt((len(o) + len(n)) / (len(o) * len(n)))
        say(
            f"| {label} | {len(p)} | {p[:, 0].mean():.4f} / {p[:, 1].mean():.4f} | "
            f"{o.mean():.4f} / {o.std():.4f} / {np.percentile(o, 10):.4f} | "
            f"{n.mean():.4f} / {n.std():.4f} / {np.percentile(n, 10):.4f} | "
            f"{_ks(o, n):.3f} ({bound:.3f}) |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
