"""The demo model of `cxr serve --demo`: a tiny ChestNet trained on synthetic phantoms.

Built on first use (about two minutes on 2 idle CPU cores) through the public training API
(`models.phantoms.write_phantom_dataset` + `models.train.train`) from the recipe in
`app/configs/demo_phantoms.v2.toml`, then cached in the storage folder. It is rebuilt
only when the cached file is missing, unreadable or made from another recipe version.
Its model card says demo=true, so every response flags it.

Why build rather than ship: a checkpoint in the package would add megabytes of binary
weights to every install and go stale whenever the network code changes; the recipe is
a few lines of data and always matches the installed code.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import tempfile
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from models.phantoms import Phantom

__all__ = [
    "DEMO_MODEL_NAME",
    "DEMO_RECIPE",
    "DemoModelError",
    "build_demo_model",
    "demo_model_path",
    "ensure_demo_model",
    "example_phantom",
    "recipe_digest",
]

log = logging.getLogger(__name__)

DEMO_RECIPE = "demo_phantoms.v2"
DEMO_MODEL_NAME = "cxr-demo-phantoms"
_RECIPE_FILE = Path(__file__).with_name("configs") / f"{DEMO_RECIPE}.toml"


class DemoModelError(ValueError):
    """The demo model could not be built (reported as one line by `cxr`)."""


def demo_model_path(storage_dir: Path) -> Path:
    """Where the demo checkpoint is cached inside the storage folder."""
    return storage_dir / "models" / f"{DEMO_RECIPE}.pt"


def _load_recipe() -> dict[str, Any]:
    return tomllib.loads(_RECIPE_FILE.read_text(encoding="utf-8"))


def recipe_digest() -> str:
    """SHA-256 of the recipe file: what the page's screenshots record to be checked against."""
    return hashlib.sha256(_RECIPE_FILE.read_bytes()).hexdigest()


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


def _cached_is_usable(path: Path) -> bool:
    from models.checkpoint import load_checkpoint
    from models.errors import ModelsError

    if not path.is_file():
        return False
    try:
        card = load_checkpoint(path, map_location="cpu").card
    except (ModelsError, OSError, RuntimeError, ValueError) as exc:
        # Written by another code version (or damaged): rebuild rather than fail.
        log.warning("cached demo model %s is not usable (%s); rebuilding it", path, exc)
        return False
    return card.demo and card.name == DEMO_MODEL_NAME and card.version == DEMO_RECIPE


def ensure_demo_model(storage_dir: Path) -> Path:
    """Return the cached demo checkpoint, building it first when needed.

    Args:
        storage_dir: the service's storage folder; the checkpoint goes to
            `models/demo_phantoms.v2.pt` inside it.

    Returns:
        The checkpoint path (model card `demo=True`, name `cxr-demo-phantoms`).

    Raises:
        DemoModelError: training failed.
    """
    path = demo_model_path(storage_dir)
    if _cached_is_usable(path):
        log.info("demo model: using the cached %s", path)
        return path
    return build_demo_model(path)


def _use_all_for_training(data: Path) -> None:
    # The NIH split files: no test split (the quality test draws a fresh phantom set), so
    # every phantom trains or validates; validation is then a seeded 1/8 of the patients.
    names = sorted(p.name for p in (data / "images").iterdir())
    (data / "train_val_list.txt").write_text("\n".join(names) + "\n")
    (data / "test_list.txt").write_text("")


def build_demo_model(path: Path) -> Path:
    """Train the demo model from the recipe and write it to `path` atomically.

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
        # save_checkpoint writes a temp file and renames it: no torn cache file.
        save_checkpoint(path, model=ckpt.model, card=card)
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
