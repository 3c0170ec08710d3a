"""The demo model of `cxr serve --demo`: a tiny ChestNet trained on synthetic phantoms.

Built on first use (about a minute on 2 CPU cores) through the public training API
(`models.phantoms.write_phantom_dataset` + `models.train.train`) from the recipe in
`app/configs/demo_phantoms.v1.toml`, then cached in the storage folder. It is rebuilt
only when the cached file is missing, unreadable or made from another recipe version.
Its model card says demo=true, so every response flags it.

Why build rather than ship: a checkpoint in the package would add megabytes of binary
weights to every install and go stale whenever the network code changes; the recipe is
a few lines of data and always matches the installed code.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

__all__ = [
    "DEMO_MODEL_NAME",
    "DEMO_RECIPE",
    "DemoModelError",
    "build_demo_model",
    "demo_model_path",
    "ensure_demo_model",
]

log = logging.getLogger(__name__)

DEMO_RECIPE = "demo_phantoms.v1"
DEMO_MODEL_NAME = "cxr-demo-phantoms"
_RECIPE_FILE = Path(__file__).with_name("configs") / f"{DEMO_RECIPE}.toml"


class DemoModelError(ValueError):
    """The demo model could not be built (reported as one line by `cxr`)."""


def demo_model_path(storage_dir: Path) -> Path:
    """Where the demo checkpoint is cached inside the storage folder."""
    return storage_dir / "models" / f"{DEMO_RECIPE}.pt"


def _load_recipe() -> dict[str, Any]:
    return tomllib.loads(_RECIPE_FILE.read_text(encoding="utf-8"))


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
            `models/demo_phantoms.v1.pt` inside it.

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
        "building the DEMO model from %d synthetic phantoms (about a minute; cached in %s)",
        phantoms["n"],
        path,
    )
    start = time.perf_counter()
    # Work next to the destination, so the final rename stays on one file system.
    work = Path(tempfile.mkdtemp(prefix=".demo-build-", dir=path.parent))
    try:
        data = write_phantom_dataset(
            work / "phantoms", n=phantoms["n"], seed=phantoms["seed"], size=phantoms["size"]
        )
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
