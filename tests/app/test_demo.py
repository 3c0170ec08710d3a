"""`cxr serve --demo`: the phantom demo model is built once, cached, rebuilt when unusable,
and never used without --demo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import app.demo as demo
from app.cli import main

pytestmark = pytest.mark.issue(11)

TINY_RECIPE = """
[phantoms]
n = 24
size = 64
seed = 0

[train]
arch = "resnet18"
weights = "none"
image_size = 64
output_stride = 16
body_stages = 3
transition_channels = 16
labels = "auto"
epochs = 1
batch_size = 8
accum = 1
optimizer = "adamw"
lr = 1e-3
warmup_steps = 1
workers = 0
cache_images = true
threads = 1
device = "cpu"
progress = false
demo = true
"""


@pytest.fixture
def tiny_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(TINY_RECIPE)
    monkeypatch.setattr(demo, "_RECIPE_FILE", recipe)
    return recipe


def test_demo_recipe_is_valid_train_config() -> None:
    from models.train import load_train_config

    recipe = demo._load_recipe()
    cfg = load_train_config(None, **recipe["train"], data="x")
    assert cfg.demo is True and cfg.weights == "none"
    assert {"n", "size", "seed"} <= set(recipe["phantoms"])


def test_demo_model_built_cached_and_rebuilt(tiny_recipe: Path, tmp_path: Path) -> None:
    from models.checkpoint import load_checkpoint

    storage = tmp_path / "storage"
    path = demo.ensure_demo_model(storage)
    assert path == demo.demo_model_path(storage) and path.parent.parent == storage
    card = load_checkpoint(path).card
    assert card.demo is True
    assert (card.name, card.version) == (demo.DEMO_MODEL_NAME, demo.DEMO_RECIPE)
    assert "DEMONSTRATION" in card.intended_use
    # Nothing but the checkpoint is left behind (the phantoms were a temporary folder).
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]

    stamp = path.stat().st_mtime_ns
    assert demo.ensure_demo_model(storage) == path
    assert path.stat().st_mtime_ns == stamp  # cached: not rebuilt

    path.write_bytes(b"not a checkpoint")  # damaged, or from an incompatible version
    assert demo.ensure_demo_model(storage) == path
    assert load_checkpoint(path).card.demo is True


def test_demo_model_from_other_recipe_is_rebuilt(tiny_recipe: Path, tmp_path: Path) -> None:
    from models.checkpoint import build_demo_checkpoint

    storage = tmp_path / "storage"
    path = demo.demo_model_path(storage)
    path.parent.mkdir(parents=True)
    build_demo_checkpoint(path, image_size=64)  # a demo, but not this recipe's
    demo.ensure_demo_model(storage)
    from models.checkpoint import load_checkpoint

    assert load_checkpoint(path).card.name == demo.DEMO_MODEL_NAME


def test_cli_serve_demo_serves_the_demo_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, demo_checkpoint: Path
) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(demo, "ensure_demo_model", lambda storage: demo_checkpoint)

    def fake_run(app: Any, **kwargs: Any) -> None:
        seen["app"] = app

    import uvicorn

    monkeypatch.setattr(uvicorn, "run", fake_run)
    import app.main

    real_create = app.main.create_app

    def create(settings: Any, **kwargs: Any) -> Any:
        seen["settings"], seen["predictor"] = settings, kwargs.get("predictor")
        return real_create(settings, **kwargs)

    monkeypatch.setattr(app.main, "create_app", create)
    assert main(["serve", "--demo", "--storage-dir", str(tmp_path / "st")]) == 0
    assert seen["settings"].model == demo_checkpoint
    assert seen["predictor"].card["demo"] is True


def test_cli_serve_demo_with_model_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], demo_checkpoint: Path
) -> None:
    assert main(["serve", "--demo", "--model", str(demo_checkpoint)]) == 2
    err = capsys.readouterr().err
    assert "--demo" in err and err.count("\n") == 1


def test_cli_serve_without_demo_never_builds_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("demo model built without --demo")

    seen: dict[str, Any] = {}
    monkeypatch.setattr(demo, "ensure_demo_model", fail)
    import uvicorn

    import app.main

    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: None)
    real_create = app.main.create_app

    def create(settings: Any, **kwargs: Any) -> Any:
        seen["settings"], seen["predictor"] = settings, kwargs.get("predictor")
        return real_create(settings, **kwargs)

    monkeypatch.setattr(app.main, "create_app", create)
    assert main(["serve", "--storage-dir", str(tmp_path / "st")]) == 0
    assert seen["settings"].model is None and seen["predictor"] is None
    assert not demo.demo_model_path(tmp_path / "st").exists()


@pytest.mark.slow
def test_cli_serve_demo_end_to_end(tiny_recipe: Path, tmp_path: Path) -> None:
    """The README's first command, in a real process: the page and an image prediction
    work and are flagged as a demo (the cached model is prebuilt with a tiny recipe)."""
    import os
    import socket
    import subprocess
    import sys
    import time

    import httpx
    from service_fixtures import dx_bytes

    storage = tmp_path / "storage"
    demo.ensure_demo_model(storage)  # cached: the served process reuses it
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CXR_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    cmd = [sys.executable, "-m", "app.cli", "serve", "--demo", "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "--storage-dir", str(storage), "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "cxr serve --demo did not become ready"
            time.sleep(0.25)
        page = httpx.get(url + "/")
        assert page.status_code == 200 and "DEMO MODEL" in page.text
        answer = httpx.post(url + "/v1/images/predict", files={"file": ("a.dcm", dx_bytes())})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["demo"] is True and body["notice"]
        assert body["model"]["name"] == demo.DEMO_MODEL_NAME
        assert answer.headers["x-cxr-demo-model"] == "true"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="session")
def built_demo_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real demo model, built once per session from the shipped recipe."""
    return demo.ensure_demo_model(tmp_path_factory.mktemp("demo-storage"))


@pytest.mark.slow
@pytest.mark.issue(22)
@pytest.mark.xfail(
    strict=True,
    reason="recipe demo_phantoms.v2 learns cardiomegaly, effusion and mass but not yet the "
    "nodule and the pneumothorax (issue 22 item 1 open); strict: passing fails, so the "
    "marker goes when the bar is met",
)
def test_demo_model_learns_its_phantoms(built_demo_model: Path) -> None:
    """The bar of issue 22: validation AUC >= 0.95 on every phantom label, no warning on
    the card, and on a FRESH phantom set (another seed, the page's phantom size) the boxes
    the service shows hit the true lesion (IoBB >= 0.5) for at least 0.6 of the lesions."""
    import numpy as np

    from models.checkpoint import load_checkpoint
    from models.metrics import iobb, roc_auc
    from models.phantoms import PHANTOM_LABELS
    from models.predict import load_predictor

    card = load_checkpoint(built_demo_model).card
    assert sorted(card.labels) == sorted(PHANTOM_LABELS)
    per_label = card.metrics["validation"]["per_label"]
    assert {k: v["auc"] for k, v in per_label.items() if v["auc"] < 0.95} == {}
    assert card.warnings == []

    predictor = load_predictor(built_demo_model, device="cpu")
    rng = np.random.default_rng(2022)
    scores, truth, hits, lesions = [], [], 0, 0
    for seed in range(10_000, 10_100):  # never used by the recipe (seed 0) nor the page
        present = [name for name in PHANTOM_LABELS if rng.random() < 0.3]
        phantom = demo.example_phantom(seed, size=320, labels=present)
        pixels = phantom.image.astype(np.float32) / 255.0
        [result] = predictor.predict([pixels], heatmaps="none")
        scores.append([result.probabilities[name] for name in PHANTOM_LABELS])
        truth.append([name in present for name in PHANTOM_LABELS])
        for label, *xywh in phantom.boxes:
            lesions += 1
            hits += any(
                b.label == label and iobb((b.x, b.y, b.width, b.height), tuple(xywh)) >= 0.5
                for b in result.boxes
            )
    s, t = np.array(scores), np.array(truth)
    fresh = {name: roc_auc(t[:, c], s[:, c]) for c, name in enumerate(PHANTOM_LABELS)}
    assert min(fresh.values()) >= 0.9, fresh
    assert hits / lesions >= 0.6, (hits, lesions)


@pytest.mark.issue(22)
def test_screenshots_show_the_current_demo_recipe() -> None:
    import json

    shots = Path(demo.__file__).with_name("web") / "screenshots"
    sidecar = json.loads((shots / "model.json").read_text())
    assert sidecar["recipe"] == demo.DEMO_RECIPE, "rerun benchmarks/web_screenshots.py"
    assert sidecar["recipe_sha256"] == demo.recipe_digest(), "rerun benchmarks/web_screenshots.py"
    assert {p.name for p in shots.glob("*.png")} >= {"predict.png", "batches.png"}
