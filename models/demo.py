"""The demo model of `cxr serve --demo`: a small ChestNet trained on synthetic phantoms.

The recipe (`models/configs/demo_phantoms.v3.toml`) is data; the weights it gives are shipped
beside it (`demo_phantoms.v3.pt`, float16, about 6 MB), made by `benchmarks/demo_model.py
--install` through the public training API (`models.phantoms.write_phantom_dataset` +
`models.train.train`). Training to the quality bar takes about 15 CPU minutes, too long
for a first start, so the shipped file is used as it is. When it is missing or no longer
loads (the network code changed), the model is built from the recipe on first use and
cached in the storage folder instead. Its model card says demo=true, so every response
flags it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from models.phantoms import Phantom

__all__ = [
    "DEMO_MODEL_NAME",
    "DEMO_RECIPE",
    "DemoModelError",
    "build_demo_model",
    "DemoQuality",
    "demo_model_path",
    "ensure_demo_model",
    "example_phantom",
    "recipe_digest",
    "score_demo_model",
    "shipped_demo_model",
    "shipped_model_file",
]

log = logging.getLogger(__name__)

DEMO_RECIPE = "demo_phantoms.v3"
DEMO_MODEL_NAME = "cxr-demo-phantoms"
_RECIPE_FILE = Path(__file__).with_name("configs") / f"{DEMO_RECIPE}.toml"
_SHIPPED_FILE = _RECIPE_FILE.with_suffix(".pt")

# The quality bar a demo model is held to (the fresh-phantom part of `score_demo_model`).
FRESH_PHANTOM_SEEDS = range(10_000, 10_100)  # never used by the recipe (seed 0) nor the page
FRESH_PHANTOM_SIZE = 320


class DemoModelError(ValueError):
    """The demo model could not be built (reported as one line by `cxr`)."""


def demo_model_path(storage_dir: Path) -> Path:
    """Where the demo checkpoint is cached inside the storage folder."""
    return storage_dir / "models" / f"{DEMO_RECIPE}.pt"


def _load_recipe() -> dict[str, Any]:
    return tomllib.loads(_RECIPE_FILE.read_text(encoding="utf-8"))


def recipe_digest() -> str:
    """SHA-256 of the recipe's settings (the parsed TOML, keys sorted; comments do not count):
    what the shipped model's card and the page's screenshots record, to be checked against."""
    canonical = json.dumps(_load_recipe(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def example_phantom(seed: int, *, size: int = 512, labels: Sequence[str] | None = None) -> Phantom:
    """The page's sample phantom number `seed`: two or three lesions, drawn by the same
    generator as the demo model's training phantoms, with its true boxes.

    Args:
        seed: any integer; the same seed gives the same phantom.
        size: image side in pixels.
        labels: the lesions to draw (default: two or three chosen by the seed).

    Returns:
        `models.phantoms.Phantom` (uint8 image, labels, true boxes in pixels).
    """
    import numpy as np

    from models.phantoms import PHANTOM_LABELS, make_phantom

    rng = np.random.default_rng(seed)
    if labels is None:
        picked = rng.choice(len(PHANTOM_LABELS), size=2 + seed % 2, replace=False)
        labels = [PHANTOM_LABELS[i] for i in sorted(picked)]
    return make_phantom(rng, size=size, labels=labels)


def _is_usable(path: Path) -> bool:
    from models.checkpoint import load_checkpoint
    from models.errors import ModelsError

    if not path.is_file():
        return False
    try:
        card = load_checkpoint(path, map_location="cpu").card
    except (ModelsError, OSError, RuntimeError, ValueError) as exc:
        # Written by another code version (or damaged): rebuild rather than fail.
        log.warning("demo model %s is not usable (%s)", path, exc)
        return False
    return (
        card.demo
        and card.name == DEMO_MODEL_NAME
        and card.version == DEMO_RECIPE
        and card.training.get("recipe_sha256") == recipe_digest()
    )


def shipped_model_file() -> Path:
    """Where the package keeps the shipped demo weights (whether or not they are usable)."""
    return _SHIPPED_FILE


def shipped_demo_model() -> Path | None:
    """The demo checkpoint shipped in the package, or None when it is absent or unusable
    (a network code change it no longer fits, or a recipe edited since it was made)."""
    return _SHIPPED_FILE if _is_usable(_SHIPPED_FILE) else None


def ensure_demo_model(storage_dir: Path) -> Path:
    """Return the shipped demo checkpoint, else the cached one, building it first when needed.

    Args:
        storage_dir: the service's storage folder; a built checkpoint goes to
            `models/demo_phantoms.v3.pt` inside it.

    Returns:
        The checkpoint path (model card `demo=True`, name `cxr-demo-phantoms`).

    Raises:
        DemoModelError: training failed.
    """
    shipped = shipped_demo_model()
    if shipped is not None:
        log.info("demo model: the shipped %s", shipped)
        return shipped
    log.warning(
        "the shipped demo model %s does not load with this code or recipe; using a built one",
        _SHIPPED_FILE,
    )
    path = demo_model_path(storage_dir)
    if _is_usable(path):
        log.info("demo model: using the cached %s", path)
        return path
    return build_demo_model(path)


def _use_all_for_training(data: Path) -> None:
    # The NIH split files: no test split (the quality test draws a fresh phantom set), so
    # every phantom trains or validates; validation is then a seeded 1/8 of the patients.
    names = sorted(p.name for p in (data / "images").iterdir())
    (data / "train_val_list.txt").write_text("\n".join(names) + "\n")
    (data / "test_list.txt").write_text("")


def build_demo_model(path: Path, *, half: bool = False) -> Path:
    """Train the demo model from the recipe and write it to `path` atomically.

    Args:
        path: the checkpoint to write.
        half: store the weights as float16 (the shipped file: half the bytes).

    Raises:
        DemoModelError: training failed.
    """
    from models.checkpoint import load_checkpoint, save_checkpoint
    from models.errors import ModelsError
    from models.phantoms import write_phantom_dataset
    from models.train import load_train_config, train

    recipe = _load_recipe()
    phantoms = recipe["phantoms"]
    path.parent.mkdir(parents=True, exist_ok=True)
    log.warning(
        "building the DEMO model from %d synthetic phantoms (minutes; cached in %s)",
        phantoms["n"],
        path,
    )
    start = time.perf_counter()
    # Work next to the destination, so the final rename stays on one file system.
    work = Path(tempfile.mkdtemp(prefix=".demo-build-", dir=path.parent))
    try:
        data = write_phantom_dataset(work / "phantoms", **phantoms)
        _use_all_for_training(data)
        cfg = load_train_config(
            None,
            **recipe["train"],
            data=str(data),
            out=str(work / "run.pt"),
            training_data=f"{phantoms['n']} synthetic phantoms ({phantoms['size']} px), "
            f"image-level labels only; recipe {DEMO_RECIPE}",
        )
        result = train(cfg)
        best = result.checkpoint.with_name(f"{result.checkpoint.stem}.best.pt")
        chosen = best if best.is_file() else result.checkpoint
        ckpt = load_checkpoint(chosen, map_location="cpu")
        card = ckpt.card
        card.name, card.version, card.demo = DEMO_MODEL_NAME, DEMO_RECIPE, True
        card.training["recipe_sha256"] = recipe_digest()
        # save_checkpoint writes a temp file and renames it: no torn cache file.
        save_checkpoint(path, model=ckpt.model, card=card, half=half)
    except (ModelsError, OSError, KeyError) as exc:
        raise DemoModelError(f"could not build the demo model: {exc}") from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)
    auc = (card.metrics.get("validation") or {}).get("mean_auc")
    log.warning(
        "demo model built in %.0f s (validation mean AUC on phantoms %s): %s",
        time.perf_counter() - start,
        auc,
        path,
    )
    return path


@dataclass(frozen=True)
class DemoQuality:
    """How a demo model does on its phantoms: the bar is every AUC >= 0.95 in validation,
    >= 0.9 on the fresh set, and an IoBB-0.5 hit rate of at least 0.6 for the boxes shown.

    Attributes:
        validation_auc: per-label validation AUC from the model card.
        fresh_auc: per-label ROC AUC on the fresh phantoms.
        hits: per label, lesions hit by a shown box of that label (IoBB >= 0.5).
        lesions: per label, true lesions on the fresh phantoms.
        warnings: the model card's warnings.
    """

    validation_auc: dict[str, float]
    fresh_auc: dict[str, float]
    hits: dict[str, int]
    lesions: dict[str, int]
    warnings: list[str]

    @property
    def hit_rate(self) -> float:
        return sum(self.hits.values()) / max(1, sum(self.lesions.values()))

    def shortfalls(self) -> list[str]:
        """What misses the bar, one line each (empty: the bar is met)."""
        out = [f"validation AUC {k} {v:.3f} < 0.95" for k, v in self.validation_auc.items()
               if v < 0.95]  # fmt: skip
        out += [f"fresh AUC {k} {v:.3f} < 0.9" for k, v in self.fresh_auc.items() if v < 0.9]
        if self.hit_rate < 0.6:
            out.append(f"IoBB-0.5 hit rate {self.hit_rate:.2f} < 0.6")
        return out + [f"card warning: {w}" for w in self.warnings]


def score_demo_model(path: Path) -> DemoQuality:
    """Score a demo checkpoint on fresh phantoms (`FRESH_PHANTOM_SEEDS`, 320 px), each
    lesion drawn with probability 0.3, with the boxes the service shows by default."""
    import numpy as np

    from models.checkpoint import load_checkpoint
    from models.metrics import iobb, roc_auc
    from models.phantoms import PHANTOM_LABELS
    from models.predict import load_predictor

    card = load_checkpoint(path).card
    per_label = card.metrics.get("validation", {}).get("per_label", {})
    predictor = load_predictor(path, device="cpu")
    rng = np.random.default_rng(2022)
    scores: list[list[float]] = []
    truth: list[list[bool]] = []
    hits = dict.fromkeys(PHANTOM_LABELS, 0)
    lesions = dict.fromkeys(PHANTOM_LABELS, 0)
    for seed in FRESH_PHANTOM_SEEDS:
        present = [name for name in PHANTOM_LABELS if rng.random() < 0.3]
        phantom = example_phantom(seed, size=FRESH_PHANTOM_SIZE, labels=present)
        [result] = predictor.predict([phantom.image.astype(np.float32) / 255.0], heatmaps="none")
        scores.append([result.probabilities[name] for name in PHANTOM_LABELS])
        truth.append([name in present for name in PHANTOM_LABELS])
        for label, x, y, w, h in phantom.boxes:
            lesions[label] += 1
            hits[label] += any(
                b.label == label and iobb((b.x, b.y, b.width, b.height), (x, y, w, h)) >= 0.5
                for b in result.boxes
            )
    s, t = np.array(scores), np.array(truth)
    return DemoQuality(
        validation_auc={k: float(v["auc"]) for k, v in per_label.items()},
        fresh_auc={n: float(roc_auc(t[:, c], s[:, c])) for c, n in enumerate(PHANTOM_LABELS)},
        hits=hits,
        lesions=lesions,
        warnings=list(card.warnings),
    )
