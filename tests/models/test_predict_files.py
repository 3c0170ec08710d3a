"""`predict_files`: files through decode -> fit -> batched forward, in order, errors kept."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import models.decode_pool
from models.predict import load_predictor, predict_files


def test_predict_files_keeps_order_and_reports_unreadable_files(
    demo_checkpoint: Path, make_dicom: Callable[..., Path], tmp_path: Path
) -> None:
    predictor = load_predictor(demo_checkpoint, device="cpu", batch_size=2)
    predictor.thresholds = dict.fromkeys(predictor.labels, 0.0)
    rng = np.random.default_rng(0)
    good = [make_dicom(rng.integers(0, 4000, (90 + 10 * i, 60)), name=f"{i}.dcm") for i in range(3)]
    bad = tmp_path / "bad.dcm"
    bad.write_bytes(b"junk" * 100)
    paths = [good[0], bad, good[1], good[2]]
    results = list(predict_files(predictor, paths, display_size=40))
    assert [r.path for r in results] == paths
    assert results[1].error is not None and results[1].prediction is None
    for r, rows in zip([results[0], results[2], results[3]], [90, 100, 110], strict=True):
        assert r.error is None and r.prediction is not None and r.meta is not None
        # The model input is not kept once predicted: the display copy is the one image.
        assert [k for k, v in vars(r).items() if isinstance(v, np.ndarray)] == ["display"]
        assert r.meta.rows == rows
        assert r.display is not None and r.display.dtype == np.uint8
        assert max(r.display.shape) == 40
        assert set(r.prediction.heatmaps) == set(predictor.labels)
        assert {"decode", "preprocess"} <= set(r.timings)


def test_predict_files_same_result_with_worker_processes_and_in_thread(
    demo_checkpoint: Path, make_dicom: Callable[..., Path]
) -> None:
    predictor = load_predictor(demo_checkpoint, device="cpu", batch_size=3)
    rng = np.random.default_rng(1)
    paths = [
        make_dicom(rng.integers(0, 4000, (70 + 9 * i, 64)), name=f"w{i}.dcm") for i in range(5)
    ]
    pooled = list(predict_files(predictor, paths, heatmaps="none", workers=2))
    inline = list(predict_files(predictor, paths, heatmaps="none", workers=0))
    assert [r.path for r in pooled] == paths
    for a, b in zip(pooled, inline, strict=True):
        assert a.prediction is not None and b.prediction is not None
        assert a.prediction.probabilities == b.prediction.probabilities
        assert a.prediction.boxes == b.prediction.boxes


def test_overlapped_batches_give_what_predict_gives_one_batch_at_a_time(
    demo_checkpoint: Path, make_dicom: Callable[..., Path], tmp_path: Path
) -> None:
    # A batch's finish runs while the next batch's model pass does: over several batches,
    # with an unreadable file in between, every result is the one `predict` gives.
    from models.image_pipeline import InputSpec, load_for_model

    predictor = load_predictor(demo_checkpoint, device="cpu", batch_size=2)
    predictor.thresholds = dict.fromkeys(predictor.labels, 0.3)
    rng = np.random.default_rng(2)
    paths = [
        make_dicom(rng.integers(0, 4000, (64 + 8 * i, 72)), name=f"o{i}.dcm") for i in range(7)
    ]
    bad = tmp_path / "bad.dcm"
    bad.write_bytes(b"x" * 300)
    paths.insert(3, bad)
    results = list(predict_files(predictor, paths, workers=0))
    assert [r.path for r in results] == paths
    assert results[3].error is not None and results[3].prediction is None
    spec = InputSpec.of(predictor)
    readable = results[:3] + results[4:]
    # The same batches (two readable files each) through `predict`, one after the other.
    expected = predictor.predict([load_for_model(r.path, spec).prepared for r in readable])
    for r, alone in zip(readable, expected, strict=True):
        assert r.prediction is not None
        assert r.prediction.probabilities == alone.probabilities
        assert r.prediction.positive == alone.positive
        assert r.prediction.boxes == alone.boxes
        assert set(r.prediction.heatmaps) == set(alone.heatmaps)
    assert any(r.prediction and r.prediction.boxes for r in results)


def test_a_failing_finish_fails_the_run_not_silently(
    demo_checkpoint: Path, make_dicom: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    predictor = load_predictor(demo_checkpoint, device="cpu", batch_size=1)
    rng = np.random.default_rng(3)
    paths = [make_dicom(rng.integers(0, 4000, (64, 64)), name=f"f{i}.dcm") for i in range(3)]

    def broken(done: object) -> list[object]:
        raise RuntimeError("finish broke")

    monkeypatch.setattr(predictor, "finish", broken)
    with pytest.raises(RuntimeError, match="finish broke"):
        list(predict_files(predictor, paths, workers=0))


@pytest.mark.parametrize("workers", [0, 2])
def test_fitting_on_the_device_gives_what_the_workers_fit_gives(
    demo_checkpoint: Path, make_dicom: Callable[..., Path], tmp_path: Path, workers: int
) -> None:
    # fit="device" (the default on CUDA): the workers only read, the stored codes come
    # back and `Predictor.stage` fits them; run here with the device's code on the CPU.
    from PIL import Image

    predictor = load_predictor(demo_checkpoint, device="cpu", batch_size=3)
    predictor.thresholds = dict.fromkeys(predictor.labels, 0.3)
    rng = np.random.default_rng(4)
    paths = [
        make_dicom(rng.integers(0, 4000, (150 + 20 * i, 120)), name=f"d{i}.dcm") for i in range(4)
    ]
    png = tmp_path / "grey.png"
    Image.fromarray(rng.integers(0, 65535, (90, 200)).astype(np.uint16)).save(png)
    small = make_dicom(rng.integers(0, 4000, (40, 50)), name="small.dcm")  # enlarged to 64
    bad = tmp_path / "bad.dcm"
    bad.write_bytes(b"DICM" * 80)
    # Hostile, truncated and sloppy inputs: junk behind a DICOM name, a DICOM cut off in
    # its pixel data, an empty file.
    truncated = tmp_path / "cut.dcm"
    truncated.write_bytes(paths[0].read_bytes()[: paths[0].stat().st_size // 2])
    empty = tmp_path / "empty.dcm"
    empty.write_bytes(b"")
    paths[2:2] = [png, bad, small, truncated, empty]
    broken = [3, 5, 6]
    host = list(predict_files(predictor, paths, workers=workers, fit="host", display_size=48))
    device = list(predict_files(predictor, paths, workers=workers, fit="device", display_size=48))
    assert [r.path for r in device] == paths
    for i in broken:  # each fails alone, with the host path's error
        assert device[i].error is not None and device[i].prediction is None, paths[i]
        assert str(device[i].error) == str(host[i].error)
    assert [r.path.name for r in device if r.error] == [paths[i].name for i in broken], [
        str(r.error) for r in device
    ]
    for a, b in zip(device, host, strict=True):
        if b.prediction is None:
            continue
        assert a.prediction is not None and a.meta == b.meta
        assert a.prediction.probabilities == pytest.approx(b.prediction.probabilities, abs=1e-4)
        assert a.prediction.positive == b.prediction.positive
        assert a.prediction.geometry == b.prediction.geometry
        assert a.display is not None and b.display is not None
        np.testing.assert_array_equal(a.display, b.display)  # made by the workers either way
        assert "decode" in a.timings
    assert sum(len(r.prediction.boxes) for r in device if r.prediction) > 0


def test_the_fit_goes_to_the_device_on_cuda_without_display_copies_only(
    demo_checkpoint: Path, make_dicom: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    predictor = load_predictor(demo_checkpoint, device="cpu", batch_size=2)
    paths = [make_dicom(np.full((80, 70), 900 + i), name=f"a{i}.dcm") for i in range(2)]
    asked: list[bool | None] = []

    class Staged(Exception):
        pass

    def spy(images: object, *, on_device: bool | None = None) -> object:
        asked.append(on_device)
        raise Staged  # the device is not really there: stop at the first batch

    monkeypatch.setattr(predictor, "stage", spy)
    monkeypatch.setattr(predictor, "capture_graphs", lambda sizes: [])
    for device, display, want in [
        ("cpu", None, False), ("cuda", None, True), ("cuda", 32, False)
    ]:  # fmt: skip
        predictor.device = torch.device(device)  # only where the fit goes reads it here
        asked.clear()
        with pytest.raises(Staged):
            list(predict_files(predictor, paths, workers=0, display_size=display))
        assert asked == [want], (device, display)
    predictor.device = torch.device("cpu")
    with pytest.raises(ValueError, match="fit must be auto, host or device"):
        list(predict_files(predictor, paths, fit="gpu"))  # type: ignore[arg-type]


def test_threads_switch_faster_while_predict_files_runs_and_as_before_after(
    demo_checkpoint: Path, make_dicom: Callable[..., Path]
) -> None:
    import sys

    from models.predict import PREDICT_SWITCH_INTERVAL_S

    predictor = load_predictor(demo_checkpoint, device="cpu", batch_size=2)
    paths = [make_dicom(np.full((70, 60), 800 + i), name=f"s{i}.dcm") for i in range(3)]
    before = sys.getswitchinterval()
    assert before > PREDICT_SWITCH_INTERVAL_S
    seen = {sys.getswitchinterval() for _ in predict_files(predictor, paths, workers=0)}
    assert seen == {PREDICT_SWITCH_INTERVAL_S}
    assert sys.getswitchinterval() == before
    # Stopped early (the consumer breaks off): restored too.
    results = predict_files(predictor, paths, workers=0)
    next(results)
    results.close()
    assert sys.getswitchinterval() == before


@pytest.mark.gpu
def test_predict_files_on_cuda_matches_cpu(
    demo_checkpoint: Path, make_dicom: Callable[..., Path]
) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    rng = np.random.default_rng(2)
    paths = [make_dicom(rng.integers(0, 4000, (300, 240)), name=f"g{i}.dcm") for i in range(4)]
    cpu = load_predictor(demo_checkpoint, device="cpu", batch_size=4)
    gpu = load_predictor(demo_checkpoint, device="cuda", batch_size=4)
    on_cpu = list(predict_files(cpu, paths, heatmaps="none", workers=2))
    on_gpu = list(predict_files(gpu, paths, heatmaps="none", workers=2))  # fitted there
    gpu_host_fit = list(predict_files(gpu, paths, heatmaps="none", workers=2, fit="host"))
    for a, b, c in zip(on_cpu, on_gpu, gpu_host_fit, strict=True):
        assert a.prediction is not None and b.prediction is not None
        assert c.prediction is not None
        for label, p in a.prediction.probabilities.items():
            assert abs(b.prediction.probabilities[label] - p) < 0.02  # bf16 on the GPU
            assert abs(b.prediction.probabilities[label] - c.prediction.probabilities[label]) < 1e-3


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/PID/maps")
def test_decoding_workers_do_not_load_torch(
    demo_checkpoint: Path, make_dicom: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker imports the module of the function it runs: torch there is ~2 s and 200 MB
    # per worker, on every `cxr predict` (it was: 11 s -> 6 s for 9 files on 2 cores).
    pools: list[models.decode_pool.DecodePool[object, object]] = []

    class Recorded(models.decode_pool.DecodePool):  # type: ignore[type-arg]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            pools.append(self)

    monkeypatch.setattr(models.decode_pool, "DecodePool", Recorded)
    predictor = load_predictor(demo_checkpoint, device="cpu", batch_size=1)
    rng = np.random.default_rng(2)
    paths = [make_dicom(rng.integers(0, 4000, (80, 64)), name=f"t{i}.dcm") for i in range(2)]
    results = predict_files(predictor, paths, heatmaps="none", workers=1)
    first = next(results)
    assert first.prediction is not None
    [pool] = pools
    [worker] = pool._workers
    maps = Path(f"/proc/{worker.process.pid}/maps").read_text()
    assert "numpy" in maps  # the worker's own libraries are listed: the map is real
    assert "libtorch" not in maps, "a decoding worker loaded torch"
    assert [r.path for r in results] == paths[1:]
