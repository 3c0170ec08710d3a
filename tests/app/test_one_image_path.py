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


@pytest.mark.issue(44)
def test_one_demo_flag_same_boxes_and_scores_on_every_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cxr serve --demo`, `cxr predict --demo` and `cxr ask --demo`: the shipped model, the
    same probabilities, boxes and scores for one phantom."""
    import cv2

    from models.demo import example_phantom, shipped_demo_model

    if shipped_demo_model() is None:
        pytest.skip("the shipped demo model does not load with this code")
    monkeypatch.setenv("CXR_STORAGE_DIR", str(tmp_path / "storage"))
    phantom = example_phantom(3)
    image = tmp_path / "phantom.png"
    cv2.imwrite(str(image), phantom.image)
    assert (
        main(["predict", "--demo", str(image), "-o", str(tmp_path / "out"), "--workers", "0"]) == 0
    )
    cli = json.loads((tmp_path / "out" / "phantom.png.json").read_text())
    assert cli["model"]["demo"] is True
    settings = Settings(
        storage_dir=tmp_path / "storage",
        database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
        model=shipped_demo_model(),
        allowed_hosts=["testserver"],
    )
    with TestClient(create_app(settings)) as client:
        answer = client.post(
            "/v1/images/predict", files={"file": ("phantom.png", image.read_bytes(), "image/png")}
        )
    api = answer.json()
    assert api["probabilities"] == pytest.approx(cli["probabilities"], abs=1e-5)
    key = ("label", "x", "y", "width", "height", "score")
    assert [[b[k] for k in key] for b in api["boxes"]] == [
        [b[k] for k in key] for b in cli["boxes"]
    ]
    capsys.readouterr()
    for label in cli["positive"]:
        question = f"Where is the {label.lower()}?"
        assert main(["ask", "--demo", "--image", str(image), "--question", question, "-q"]) == 0
        found = json.loads(capsys.readouterr().out)
        assert found["label"] == label and found["demo_model"] is True
        assert found["evidence"]["image"]["probability"] == pytest.approx(
            cli["probabilities"][label], abs=1e-5
        )
        scores = {b["score"] for b in cli["boxes"] if b["label"] == label}
        assert {b["score"] for b in found["evidence"]["image"]["boxes"]} <= scores


@pytest.mark.issue(44)
def test_demo_flag_errors_point_to_the_shipped_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nope.pt")
    image = str(tmp_path / "x.png")
    assert main(["predict", "--model", missing, image, "-o", str(tmp_path / "o")]) == 2
    assert "--demo" in capsys.readouterr().err
    assert main(["ask", "--model", missing, "--image", image, "--question", "Mass?"]) == 2
    assert "--demo" in capsys.readouterr().err
    assert main(["ask", "--image", image, "--question", "Is there a mass?"]) == 2
    assert "--demo for the shipped demo model" in capsys.readouterr().err
    with pytest.raises(SystemExit) as both:
        main(["predict", "--model", missing, "--demo", image, "-o", str(tmp_path / "o")])
    assert both.value.code == 2 and "not allowed with" in capsys.readouterr().err
