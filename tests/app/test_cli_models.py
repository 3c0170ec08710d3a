"""`cxr predict`, `cxr evaluate`, `cxr phantoms`, `cxr train` through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from dicom_factory import CR_STORAGE, build_dataset, write

from app.cli import main


def _dicom(path: Path, rows: int = 80, columns: int = 120) -> Path:
    pixels = np.random.default_rng(0).integers(0, 4096, (rows, columns), np.uint16)
    return write(
        build_dataset(pixels, modality="CR", sop_class=CR_STORAGE, photometric="MONOCHROME1"), path
    )


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from models.checkpoint import build_demo_checkpoint

    path = tmp_path_factory.mktemp("cli") / "demo.pt"
    return build_demo_checkpoint(path, labels=["Effusion", "Mass", "Nodule"], image_size=64)


def test_cli_predict_writes_json_and_overlays(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _dicom(tmp_path / "study.dcm")
    bad = tmp_path / "broken.dcm"
    bad.write_bytes(b"not a dicom" * 50)
    out = tmp_path / "out"
    status = main(["predict", "--model", str(checkpoint), str(good), str(bad), "-o", str(out),
                   "--heatmaps", "all", "--device", "cpu"])  # fmt: skip
    assert status == 1  # one input failed, the other still ran
    doc = json.loads((out / "study.dcm.json").read_text())
    assert set(doc["probabilities"]) == {"Effusion", "Mass", "Nodule"}
    assert doc["image"]["rows"] == 80 and doc["image"]["columns"] == 120
    assert doc["model"]["demo"] is True and doc["model"]["labels"] == ["Effusion", "Mass", "Nodule"]
    assert set(doc["heatmaps"]) == {"Effusion", "Mass", "Nodule"}
    assert all(Path(p).is_file() for p in doc["heatmaps"].values())
    for box in doc["boxes"]:
        assert box["x"] + box["width"] <= 120 + 1e-6
    error = json.loads((out / "broken.dcm.json").read_text())
    assert "error" in error and error["error_type"] == "UnsupportedImageError"
    assert "broken.dcm" in capsys.readouterr().err


def test_cli_predict_fits_on_the_device_when_asked_with_the_same_answer(
    checkpoint: Path, tmp_path: Path
) -> None:
    good = _dicom(tmp_path / "study.dcm", rows=300, columns=200)
    answers = {}
    for fit in ("host", "device"):
        out = tmp_path / fit
        assert main(["predict", "--model", str(checkpoint), str(good), "-o", str(out),
                     "--device", "cpu", "--fit", fit, "--workers", "0"]) == 0  # fmt: skip
        answers[fit] = json.loads((out / "study.dcm.json").read_text())
    host, device = answers["host"], answers["device"]
    assert device["probabilities"] == pytest.approx(host["probabilities"], abs=1e-4)
    assert device["image"] == host["image"]
    with pytest.raises(SystemExit):  # argparse: not a choice
        main(["predict", "--model", str(checkpoint), str(good), "-o", str(tmp_path / "x"),
              "--fit", "gpu"])  # fmt: skip


def test_cli_predict_stderr_is_one_line_per_file_whatever_the_files_hold(
    checkpoint: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import io

    from PIL import Image

    good = _dicom(tmp_path / "study\n\x1b[2Jforged.dcm")
    # a PNG cut short (OpenCV and Pillow complain) and a DICOM cut inside its header
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(1).integers(0, 255, (96, 96), np.uint8)).save(buf, "PNG")
    (tmp_path / "cut.png").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    (tmp_path / "cut.dcm").write_bytes(good.read_bytes()[:300])
    files = [str(good), str(tmp_path / "cut.png"), str(tmp_path / "cut.dcm")]
    out = tmp_path / "out"
    assert main(["predict", "--model", str(checkpoint), *files, "-o", str(out),
                 "--workers", "1", "--device", "cpu"]) == 1  # fmt: skip
    lines = capfd.readouterr().err.splitlines()
    assert len(lines) == 5, lines  # the demo notice, three files and the summary
    assert "study\\n\\x1b[2Jforged.dcm" in lines[1]
    assert "Warning" not in "".join(lines) and "WARN" not in "".join(lines)


@pytest.mark.parametrize(
    "extra", [["--size", "100000"], ["--prevalence", "1.5"], ["--prevalence", "nan"]]
)
def test_cli_phantoms_refuses_sizes_and_prevalences_out_of_range(
    extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["phantoms", str(tmp_path / "p"), "--n", "2", *extra]) == 2
    assert "--prevalence <= 1" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


def test_cli_predict_names_a_folder_model_and_a_file_output(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _dicom(tmp_path / "study.dcm")
    assert main(["predict", "--model", str(tmp_path), str(good), "-o", str(tmp_path / "o")]) == 2
    assert "is a folder, not a checkpoint file" in capsys.readouterr().err
    taken = tmp_path / "taken"
    taken.write_text("")
    assert main(["predict", "--model", str(checkpoint), str(good), "-o", str(taken)]) == 2
    assert "is a file; give a folder" in capsys.readouterr().err


def test_cli_predict_overlays_only_when_asked_and_bounded_size(
    checkpoint: Path, tmp_path: Path
) -> None:
    from models.checkpoint import load_checkpoint, save_checkpoint

    ckpt = load_checkpoint(checkpoint)
    ckpt.card.thresholds = {"Effusion": 0.0, "Mass": 1.0, "Nodule": 1.0}  # one positive
    model_path = save_checkpoint(tmp_path / "one.pt", model=ckpt.model, card=ckpt.card)
    big = _dicom(tmp_path / "big.dcm", rows=900, columns=600)
    out = tmp_path / "out"
    assert main(["predict", "--model", str(model_path), str(big), "-o", str(out), "--overlays",
                 "positive", "--overlay-size", "200", "--device", "cpu"]) == 0  # fmt: skip
    doc = json.loads((out / "big.dcm.json").read_text())
    assert doc["positive"] == ["Effusion"] and set(doc["heatmaps"]) == {"Effusion"}
    from PIL import Image

    with Image.open(doc["heatmaps"]["Effusion"]) as im:
        assert im.size == (133, 200)  # longer side 200, aspect ratio kept
    none = tmp_path / "none"  # the default: boxes in the JSON, no overlay written
    assert main(["predict", "--model", str(model_path), str(big), "-o", str(none),
                 "--device", "cpu"]) == 0  # fmt: skip
    plain = json.loads((none / "big.dcm.json").read_text())
    assert plain["heatmaps"] == {} and plain["boxes"] == doc["boxes"]
    assert sorted(p.name for p in none.iterdir()) == ["big.dcm.json"]


@pytest.mark.issue(19)
def test_cli_predict_says_the_arithmetic_and_runs_bfloat16_when_asked(
    checkpoint: Path, tmp_path: Path
) -> None:
    good = _dicom(tmp_path / "study.dcm", rows=300, columns=200)
    docs = {}
    for precision in ("auto", "bfloat16"):
        out = tmp_path / precision
        args = ["--device", "cpu", "--precision", precision, "--workers", "0"]
        assert main(["predict", "--model", str(checkpoint), str(good), "-o", str(out), *args]) == 0
        docs[precision] = json.loads((out / "study.dcm.json").read_text())
    # On the CPU "auto" is float32: the numbers as before, and the file says so.
    assert docs["auto"]["model"]["inference"] == {"device": "cpu", "precision": "float32"}
    assert docs["bfloat16"]["model"]["inference"] == {"device": "cpu", "precision": "bfloat16"}
    exact, fast = docs["auto"]["probabilities"], docs["bfloat16"]["probabilities"]
    assert fast == pytest.approx(exact, abs=0.05) and fast != exact
    with pytest.raises(SystemExit):  # argparse: not a choice
        main(["predict", "--model", str(checkpoint), str(good), "-o", str(tmp_path / "x"),
              "--precision", "fp16"])  # fmt: skip


def test_cli_phantoms_then_evaluate(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "ph"
    assert main(["phantoms", str(data), "--n", "12", "--size", "64", "--seed", "2"]) == 0
    assert (data / "Data_Entry.csv").is_file() and (data / "BBox_List.csv").is_file()
    report_path = tmp_path / "report.json"
    status = main(["evaluate", "--model", str(checkpoint), "--data", str(data), "--split", "all",
                   "--boxes", str(data / "BBox_List.csv"), "-o", str(report_path),
                   "--device", "cpu"])  # fmt: skip
    assert status == 0
    report = json.loads(report_path.read_text())
    assert report["classification"]["n_images"] == 12
    assert set(report["localization"]["iobb"]) == {"0.1", "0.25", "0.5", "0.75", "0.9"}
    assert set(report["localization"]["iou"]) == {f"0.{i}" for i in range(1, 8)}
    assert "mean AUC" in capsys.readouterr().out
    assert report["model"]["heatmap_method"] == "cam"  # this card predates LayerCAM
    # The same boxes scored from LayerCAM maps instead (issue 9, item 2).
    layer_path = tmp_path / "layer.json"
    assert main(["evaluate", "--model", str(checkpoint), "--data", str(data), "--split", "all",
                 "--boxes", str(data / "BBox_List.csv"), "-o", str(layer_path),
                 "--device", "cpu", "--heatmaps-from", "layercam"]) == 0  # fmt: skip
    layer = json.loads(layer_path.read_text())
    assert report["model"]["inference"] == {"device": "cpu", "precision": "float32"}
    assert layer["model"]["heatmap_method"] == "layercam"
    assert layer["classification"] == report["classification"]
    assert layer["localization"]["n_boxes"] == report["localization"]["n_boxes"]


@pytest.mark.issue(9)
def test_cli_predict_heatmaps_from_overrides_the_card(checkpoint: Path, tmp_path: Path) -> None:
    from models.checkpoint import load_checkpoint, save_checkpoint

    ckpt = load_checkpoint(checkpoint)
    ckpt.card.thresholds = {"Effusion": 0.0, "Mass": 1.0, "Nodule": 1.0}  # one positive
    ckpt.card.heatmap_method = "layercam"
    model_path = save_checkpoint(tmp_path / "layer.pt", model=ckpt.model, card=ckpt.card)
    image = _dicom(tmp_path / "img.dcm", rows=300, columns=200)
    docs = {}
    for method in ("layercam", "cam"):
        out = tmp_path / method
        assert main(["predict", "--model", str(model_path), str(image), "-o", str(out),
                     "--device", "cpu", "--heatmaps-from", method,
                     "--overlays", "positive"]) == 0  # fmt: skip
        docs[method] = json.loads((out / "img.dcm.json").read_text())
    assert docs["cam"]["probabilities"] == docs["layercam"]["probabilities"]
    for doc in docs.values():
        assert doc["positive"] == ["Effusion"] and set(doc["heatmaps"]) == {"Effusion"}
        assert all(b["label"] == "Effusion" for b in doc["boxes"])
    # Random weights: the CAM may hold no positive evidence (no box); LayerCAM follows the
    # score to the features that raised it, so it has some.
    assert docs["layercam"]["boxes"]


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["phantoms", str(tmp_path / "x"), "--size", "16"]) == 2
    assert (
        main(["predict", "--model", str(tmp_path / "none.pt"), "a.png", "-o", str(tmp_path)]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("cxr predict: error:") and "no such checkpoint" in err[-1]
    assert "Traceback" not in "\n".join(err)


@pytest.mark.slow
def test_cli_train_one_step(tmp_path: Path) -> None:
    data = tmp_path / "ph"
    main(["phantoms", str(data), "--n", "16", "--size", "64"])
    out = tmp_path / "m.pt"
    status = main(["train", "--data", str(data), "--out", str(out), "--arch", "resnet18",
                   "--weights", "none", "--image-size", "64", "--labels", "auto", "--epochs", "1",
                   "--batch-size", "4", "--accum", "1", "--max-steps", "1", "--workers", "0",
                   "--no-progress", "--device", "cpu", "--hflip", "0"])  # fmt: skip
    assert status == 0 and out.is_file()
    from models.checkpoint import load_checkpoint

    assert load_checkpoint(out).card.training["hflip"] == 0.0
    bad = ["train", "--data", str(data), "--out", str(tmp_path / "b.pt"), "--hflip", "2"]
    assert main(bad) == 2  # one line: "config hflip must be in [0, 1]"


@pytest.mark.slow
def test_cli_train_under_torchrun_ddp(tmp_path: Path) -> None:
    import subprocess
    import sys

    data = tmp_path / "ph"
    main(["phantoms", str(data), "--n", "16", "--size", "64"])
    out = tmp_path / "ddp.pt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "app.cli", "train", "--data", str(data), "--out", str(out), "--arch",
           "resnet18", "--weights", "none", "--image-size", "64", "--labels", "auto",
           "--epochs", "1", "--batch-size", "2", "--accum", "2", "--workers", "0",
           "--no-progress", "--device", "cpu", "--threads", "1"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    from models.checkpoint import load_checkpoint

    state = load_checkpoint(out).train_state
    assert state is not None and state["config"]["distributed"] is True
