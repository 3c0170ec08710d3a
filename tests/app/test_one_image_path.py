"""One image path: the upload route, `cxr predict`, a batch job and `cxr evaluate`'s boxes
give the same result for the same file (all read it through `models.image_pipeline`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from dicom_factory import build_dataset, write
from fastapi.testclient import TestClient

from app.cli import main
from app.main import create_app
from app.settings import Settings

LABELS = ["Effusion", "Mass", "Nodule"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from models.checkpoint import build_demo_checkpoint, load_checkpoint, save_checkpoint

    folder = tmp_path_factory.mktemp("one-path")
    path = build_demo_checkpoint(folder / "demo.pt", labels=LABELS, image_size=96)
    ckpt = load_checkpoint(path)
    ckpt.card.thresholds = dict.fromkeys(LABELS, 0.0)  # every label positive: every box drawn
    return save_checkpoint(folder / "all.pt", model=ckpt.model, card=ckpt.card)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    smooth = np.add.outer(np.linspace(0, 2500, 260), np.linspace(0, 1200, 200))
    pixels = (smooth + rng.integers(0, 400, smooth.shape)).astype(np.uint16)
    folder = tmp_path_factory.mktemp("export")
    # A window that clips: the per-code grey map is not affine.
    return write(build_dataset(pixels, WindowCenter=1700, WindowWidth=1800), folder / "IM1.dcm")


def _summary(probabilities: dict[str, float], boxes: list[dict[str, Any]]) -> tuple[Any, ...]:
    return (
        {k: round(v, 4) for k, v in sorted(probabilities.items())},
        sorted((b["label"], b["x"], b["y"], b["width"], b["height"]) for b in boxes),
    )


def test_route_cli_batch_and_evaluate_agree(
    checkpoint: Path,
    study: Path,
    tmp_path: Path,
    make_settings: Callable[..., Settings],
) -> None:
    from models.data import Record
    from models.evaluate import localize_dataset
    from models.metrics import GroundTruthBox
    from models.predict import load_predictor

    # cxr predict
    assert main(["predict", "--model", str(checkpoint), str(study), "-o", str(tmp_path / "cli"),
                 "--device", "cpu", "--workers", "1"]) == 0  # fmt: skip
    cli = json.loads((tmp_path / "cli" / "IM1.dcm.json").read_text())
    expected = _summary(cli["probabilities"], cli["boxes"])
    assert expected[1], "the test needs boxes to compare"

    # a batch job over the export folder
    out = tmp_path / "batch.jsonl"
    main(["batch", str(study.parent), "-o", str(out), "--model", str(checkpoint),
          "--device", "cpu"])  # fmt: skip
    (line,) = [json.loads(x) for x in out.read_text().splitlines() if '"IM1.dcm"' in x]
    batch = line["prediction"]
    assert _summary(batch["probabilities"], batch["boxes"]) == expected

    # the upload route
    app = create_app(make_settings(), predictor=load_predictor(checkpoint, device="cpu"))
    with TestClient(app) as client:
        response = client.post(
            "/v1/images/predict",
            files={"file": ("IM1.dcm", study.read_bytes(), "application/dicom")},
        )
    assert response.status_code == 200, response.text
    body = response.json()
    assert _summary(body["probabilities"], body["boxes"]) == expected

    # cxr evaluate's localization: the boxes of the ground truth's labels
    predictor = load_predictor(checkpoint, device="cpu")
    record = Record("IM1.dcm", study, frozenset(LABELS), "1")
    truth = [GroundTruthBox("IM1.dcm", name, 0, 0, 10, 10) for name in LABELS]
    boxes = localize_dataset(predictor, [record], truth)
    found = [b.to_dict() for name in LABELS for b in boxes[("IM1.dcm", name)]]
    assert _summary(cli["probabilities"], found) == expected
