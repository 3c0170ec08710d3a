"""`cxr train`, `cxr prepare`, `cxr evaluate`, `cxr predict`, `cxr phantoms`: the classifier's
commands.

Only the standard library and `app.cli.common` are imported at module level (torch loads
inside handlers), so `cxr label` and `cxr --help` stay fast.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import sys
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.common import (
    CommandError,
    add_demo_argument,
    add_precision_argument,
    demo_model_path,
    model_hint,
)

if TYPE_CHECKING:
    from models.predict import FileResult

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this area's subcommands to `cxr`."""
    _register_train(sub)
    _register_prepare(sub)
    _register_evaluate(sub)
    _register_predict(sub)
    _register_phantoms(sub)


# --- train --------------------------------------------------------------------------------


def _register_train(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "train",
        help="train the weakly-supervised classifier",
        description="Train a ChestNet (ResNet + transition layer + LSE pooling) on an NIH-layout "
        "folder or a labels CSV. Multi-GPU: torchrun --nproc_per_node=N -m app.cli train ...",
    )
    p.add_argument("--data", help="NIH-layout folder (Data_Entry*.csv + images/) or labels CSV")
    p.add_argument("--out", help="checkpoint to write (and to resume from)")
    p.add_argument("--config", help="TOML file of TrainConfig keys (options given here win)")
    _add_network_arguments(p)
    p.add_argument(
        "--labels",
        help="auto (default: the findings the data has; a resumed run keeps its own), "
        "chestxray14, chestxray8, or A,B,C",
    )
    _add_optimization_arguments(p)
    p.add_argument(
        "--workers",
        type=int,
        help="DataLoader worker processes (default: on CUDA the cores less one, on CPU 2)",
    )
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--seed", type=int)
    p.add_argument("--device", help="auto (default), cpu, cuda, cuda:1")
    p.add_argument(
        "--cache-images",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep resized images in RAM (default: when they fit in 1 GiB)",
    )
    p.add_argument(
        "--prepared",
        metavar="DIR",
        help="read the images from a `cxr prepare` cache (same --image-size) instead of the files",
    )
    p.add_argument(
        "--input-bits",
        type=int,
        choices=[8, 16],
        help="pixels through the loader as uint8 (default) or uint16 (16-bit sources)",
    )
    p.add_argument("--prefetch", type=int, help="batches loaded ahead per worker (4)")
    p.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.compile the model (default: on CUDA; falls back to eager with a log "
        "line when it cannot compile)",
    )
    p.add_argument("--resume", action="store_const", const=True, default=None)
    p.add_argument(
        "--demo",
        action="store_const",
        const=True,
        default=None,
        help="mark the model card as a demo (not for clinical use)",
    )
    p.add_argument(
        "--no-progress", dest="progress", action="store_const", const=False, default=None
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also log the classifier's debug lines (under torchrun: the images each rank "
        "trained on, every epoch)",
    )
    p.set_defaults(handler=_train, log_level="info")


def _add_network_arguments(p: argparse.ArgumentParser) -> None:
    """The network's shape: backbone, input size, pooling, transition layer."""
    p.add_argument("--arch", choices=["resnet50", "resnet18"])
    p.add_argument("--image-size", type=int, help="input side (multiple of 32; paper: 1024)")
    p.add_argument("--weights", choices=["imagenet", "none"])
    p.add_argument("--pooling", choices=["lse", "avg", "max"])
    p.add_argument("--lse-r", type=float)
    p.add_argument(
        "--pool-on",
        choices=["cams", "features"],
        help="pool class maps (default) or the transition maps (paper order)",
    )
    p.add_argument("--output-stride", type=int, choices=[16, 32])
    p.add_argument("--body-stages", type=int, choices=[3, 4], help="3: stop after layer3")
    p.add_argument("--transition-channels", type=int)


def _add_optimization_arguments(p: argparse.ArgumentParser) -> None:
    """How long and how it learns: epochs, steps, batches, optimizer, loss, augmentation."""
    p.add_argument(
        "--epochs",
        type=int,
        help="default: 10, or more for small data so the run has at least --min-steps "
        "optimizer steps",
    )
    p.add_argument("--min-steps", type=int, help="fewest optimizer steps of a run (600)")
    p.add_argument("--batch-size", type=int, help="micro-batch per device")
    p.add_argument(
        "--accum",
        type=int,
        help="micro-batches per optimizer step (default: effective batch 80, but at least "
        "50 optimizer steps per epoch)",
    )
    p.add_argument("--optimizer", choices=["sgd", "adamw"])
    p.add_argument(
        "--lr", type=float, help="peak learning rate (default: by optimizer and weights)"
    )
    p.add_argument("--warmup-fraction", type=float, help="warmup share of the run (0.05)")
    p.add_argument("--loss", choices=["weighted", "bce"])
    p.add_argument(
        "--hflip",
        type=float,
        metavar="P",
        help="probability of a horizontal flip per training image (0.5, as CheXNet; 0: never)",
    )
    p.add_argument("--max-steps", type=int, help="stop after N optimizer steps")


def _train(args: argparse.Namespace) -> int:
    from models.train import load_train_config, train

    overrides = {
        key: getattr(args, key)
        for key in (
            "data", "out", "arch", "image_size", "weights", "pooling", "lse_r", "pool_on",
            "output_stride", "body_stages",
            "transition_channels", "labels", "epochs", "min_steps", "batch_size", "accum",
            "optimizer", "lr", "warmup_fraction",
            "loss", "hflip", "max_steps", "workers", "threads", "seed", "device", "cache_images",
            "compile", "resume", "demo", "progress", "prepared", "input_bits", "prefetch",
        )
    }  # fmt: skip
    # torchrun sets these; the library itself never reads the environment.
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        overrides["distributed"] = True
        overrides["local_rank"] = int(os.environ.get("LOCAL_RANK", "0"))
        overrides["local_world"] = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    cfg = load_train_config(args.config, **overrides)
    if args.verbose:
        logging.getLogger("models").setLevel(logging.DEBUG)
    result = train(cfg)
    if os.environ.get("RANK", "0") != "0":
        return 0  # other DDP ranks: rank 0 reports
    val = result.metrics.get("validation", {})
    sys.stderr.write(
        f"wrote {result.checkpoint} after {result.steps} steps; "
        f"validation mean AUC {val.get('mean_auc')}\n"
    )
    for warning in result.warnings:
        # Loud on purpose (issue 9): a model that did not learn must not pass unnoticed.
        sys.stderr.write(f"\n*** WARNING: {warning} ***\n(also in the model card's warnings)\n")
    return 0


# --- prepare ------------------------------------------------------------------------------


def _register_prepare(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "prepare",
        help="write a dataset's images fitted to the training size as uint8 shards on disk",
        description="Decode and fit every image of DATA once, into OUT (memory-mapped .npy "
        "shards + index.json), for `cxr train --prepared OUT` when the images do not fit in "
        "RAM. Rerunning the same command continues after the last complete shard; a cache "
        "of other sources or settings is refused unless --rebuild.",
    )
    p.add_argument("--data", required=True, help="NIH-layout folder or labels CSV")
    p.add_argument("--out", required=True, metavar="OUT", help="cache folder")
    p.add_argument("--image-size", type=int, default=512, help="training input side (512)")
    p.add_argument("--resize", choices=["letterbox", "stretch"], default="letterbox")
    p.add_argument("--bits", type=int, choices=[8, 16], default=8, help="uint8 or uint16 rows")
    p.add_argument("--shard-images", type=int, default=512, help="images per shard file (512)")
    p.add_argument("--workers", type=int, default=2, help="decoding processes (2)")
    p.add_argument("--on-error", choices=["raise", "skip"], default="raise")
    p.add_argument(
        "--rebuild",
        action="store_true",
        help="replace a cache written for other sources or settings",
    )
    p.add_argument("--no-progress", dest="progress", action="store_false")
    p.set_defaults(handler=_prepare, log_level="info")


def _prepare(args: argparse.Namespace) -> int:
    from models.data import load_records
    from models.prepared import prepare_images

    records = load_records(args.data)
    images = prepare_images(
        records,
        args.out,
        size=args.image_size,
        resize=args.resize,
        bits=args.bits,
        shard_images=args.shard_images,
        workers=args.workers,
        rebuild=args.rebuild,
        on_error=args.on_error,
        progress=args.progress,
    )
    sys.stderr.write(
        f"prepared {len(images.sources)} images at {images.size} px in {images.root}"
        + (f"; {len(images.rejects)} unreadable, stored black" if images.rejects else "")
        + "\n"
    )
    return 0


# --- evaluate -----------------------------------------------------------------------------


def _register_evaluate(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "evaluate",
        help="per-label ROC AUC and localization accuracy of a checkpoint",
        description="Score a checkpoint on a patient-wise split: per-label AUC, and with --boxes "
        "the paper's localization accuracy/false positives at T(IoBB) and T(IoU).",
    )
    p.add_argument("--model", required=True, help="checkpoint file")
    p.add_argument("--data", required=True, help="NIH-layout folder or labels CSV")
    p.add_argument("--boxes", help="BBox_List_2017.csv-format file of true boxes")
    p.add_argument("--split", default="test", choices=["train", "val", "test", "all"])
    p.add_argument("--seed", type=int, default=0, help="split seed (as used for training)")
    p.add_argument(
        "-o",
        "--output",
        help="write the JSON report here, and beside it OUTPUT-stem.roc.png and "
        "OUTPUT-stem.reliability.png",
    )
    p.add_argument("--device", default="auto")
    add_precision_argument(p)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument(
        "--workers",
        type=int,
        help="DataLoader worker processes (default: on CUDA the cores less one, on CPU 2)",
    )
    p.add_argument(
        "--heatmaps-from",
        choices=["layercam", "cam"],
        help="where boxes come from: LayerCAM or the paper's CAM (default: the model card's)",
    )
    p.set_defaults(handler=_evaluate, log_level="info")


def _evaluate(args: argparse.Namespace) -> int:
    from models.evaluate import evaluate_checkpoint, format_report

    report = evaluate_checkpoint(
        args.model,
        args.data,
        split=args.split,
        boxes=args.boxes,
        device=args.device,
        batch_size=args.batch_size,
        workers=args.workers,
        seed=args.seed,
        progress=sys.stderr.isatty(),
        plots=Path(args.output).with_suffix("") if args.output else None,
        heatmap_method=args.heatmaps_from,
        precision=args.precision,
    )
    sys.stdout.write(format_report(report) + "\n")
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(report, indent=2) + "\n")
    return 0


# --- predict ------------------------------------------------------------------------------


def _register_predict(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "predict",
        help="probabilities, boxes and heatmap overlays for image files",
        description="Run a checkpoint on DICOM/PNG/JPEG files; writes OUTDIR/<file name>.json "
        "and, with --overlays, OUTDIR/<file name>.<label>.png overlays. Files are decoded in "
        "--workers processes. Unreadable files get a JSON 'error' and "
        "make the exit status 1; the others still run. stderr gets one line per file, a "
        "notice when the checkpoint is a demo model, and a one-line summary.",
    )
    p.add_argument("files", nargs="+", metavar="FILE")
    model = p.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="checkpoint file")
    add_demo_argument(model)
    p.add_argument("-o", "--output", required=True, metavar="OUTDIR")
    p.add_argument(
        "--overlays",
        "--heatmaps",
        dest="overlays",
        default="none",
        choices=["positive", "all", "none"],
        help="labels that get an overlay PNG: positive, all, or none (default: none; boxes "
        "are in the JSON either way)",
    )
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="decoding processes (default: the number of cores; 0: decode in a thread)",
    )
    p.add_argument(
        "--overlay-size",
        type=int,
        default=512,
        metavar="PX",
        help="longer side of overlay PNGs in pixels (default 512)",
    )
    p.add_argument("--device", default="auto")
    add_precision_argument(p)
    p.add_argument(
        "--fit",
        default="auto",
        choices=["auto", "host", "device"],
        help="where images are shrunk to the model's input: host (in the decoding "
        "processes), device (on the model's device; the processes only read), or auto "
        "(default: device on a GPU without overlays, else host)",
    )
    p.add_argument(
        "--heatmaps-from",
        choices=["layercam", "cam"],
        help="override the model card's heatmap method: layercam (finer, aligned) or the "
        "paper's cam (faster)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=16,
        help="images per batch (default 16, as the library's Predictor); large inputs go "
        "through the network a few at a time whatever this is (four at 1024 px)",
    )
    p.set_defaults(handler=_predict, log_level="info")


def _predict(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    if args.workers != 0:
        from models.decode_pool import start_fork_server

        # Its imports run while this process imports torch and loads the model: the first
        # batch is decoded 0.6 s sooner (9 files, 2 cores).
        start_fork_server()
    if args.batch_size < 1 or not 16 <= args.overlay_size <= 8192:
        raise ValueError(
            f"need --batch-size >= 1 and 16 <= --overlay-size <= 8192, got {args.batch_size} "
            f"and {args.overlay_size}"
        )
    if args.model is not None and not Path(args.model).exists():
        raise CommandError(model_hint(args.model))
    with _loading():
        from models.notices import DEMO_NOTICE
        from models.predict import load_predictor, predict_files

        predictor = load_predictor(
            args.model if args.model is not None else demo_model_path(),
            device=args.device,
            batch_size=args.batch_size,
            heatmap_method=args.heatmaps_from,
            precision=args.precision,
        )
    outdir = Path(args.output)
    if outdir.exists() and not outdir.is_dir():
        raise ValueError(f"-o {outdir}: is a file; give a folder for the results")
    outdir.mkdir(parents=True, exist_ok=True)
    card = predictor.run_card
    demo = bool(card.get("demo", False))
    if demo:
        sys.stderr.write(f"cxr predict: {DEMO_NOTICE}\n")
    failures = 0
    used: set[str] = set()
    files = [Path(f) for f in args.files]
    display = None if args.overlays == "none" else args.overlay_size
    results = predict_files(
        predictor,
        files,
        heatmaps=args.overlays,
        display_size=display,
        workers=args.workers,
        fit=args.fit,
    )
    # Overlays and JSON are written by a few threads (PNG encoding releases the GIL), in
    # step with prediction; the per-file lines stay in input order.
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="cxr-predict-write") as writers:
        pending: deque[Future[str]] = deque()
        for result in results:
            stem = _unique_name(result.path.name, used)
            if result.error is not None or result.prediction is None or result.meta is None:
                failures += 1
            pending.append(writers.submit(_write_result, result, stem, outdir, card, args))
            while len(pending) > 64 or (pending and pending[0].done()):
                sys.stderr.write(pending.popleft().result())
        while pending:
            sys.stderr.write(pending.popleft().result())
    done = len(files) - failures
    sys.stderr.write(
        f"cxr predict: {len(files):,} file{'' if len(files) == 1 else 's'}: {done:,} done, "
        f"{failures:,} failed"
        + (" (their JSON holds the error)" if failures else "")
        + ("; DEMO model" if demo else "")
        + f" -> {outdir} in {time.perf_counter() - started:.1f} s\n"
    )
    return 1 if failures else 0


@contextlib.contextmanager
def _loading() -> Iterator[None]:
    """Import torch and the model code, and load a model, without the cyclic collector.

    They create a few hundred thousand objects, none of them garbage, and each automatic
    collection on the way walks them all again: 0.26 s of a 1.9 s import on two cores.
    """
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _write_result(
    result: FileResult,
    stem: str,
    outdir: Path,
    card: dict[str, Any],
    args: argparse.Namespace,
) -> str:
    """Write one file's JSON (and overlays); return its stderr line."""
    from batch.log_text import one_line
    from models.overlay import render_overlay

    path = result.path
    if result.error is not None or result.prediction is None or result.meta is None:
        exc = result.error
        error = {"file": str(path), "error": str(exc), "error_type": type(exc).__name__}
        (outdir / f"{stem}.json").write_text(json.dumps(error, indent=2) + "\n")
        return f"cxr predict: {one_line(str(exc))}\n"
    prediction = result.prediction
    heatmaps = {}
    for label, heat in prediction.heatmaps.items():
        if result.display is None:
            break
        png = outdir / f"{stem}.{label}.png"
        boxes = [b for b in prediction.boxes if b.label == label]
        png.write_bytes(
            render_overlay(
                result.display,
                heat,
                boxes=boxes,
                labels=list(card.get("labels") or prediction.probabilities),
                max_side=args.overlay_size,
            )
        )
        heatmaps[label] = str(png)
    meta = result.meta
    doc = {
        "file": str(path),
        "probabilities": prediction.probabilities,
        "positive": prediction.positive,
        "boxes": [b.to_dict() for b in prediction.boxes],
        "heatmaps": heatmaps,
        "image": {
            "rows": meta.rows,
            "columns": meta.columns,
            "modality": meta.modality,
            "photometric": meta.photometric,
            "view_position": meta.view_position,
            "sop_instance_uid": meta.sop_instance_uid,
        },
        "timings": {**result.timings, **prediction.timings},
        "model": card,
    }
    (outdir / f"{stem}.json").write_text(json.dumps(doc, indent=2) + "\n")
    found = ", ".join(prediction.positive) or "no label over threshold"
    return f"{one_line(str(path))}: {found}\n"


def _unique_name(name: str, used: set[str]) -> str:
    """`a.dcm`, then `a.dcm-2`, ... so same-named inputs from different folders don't collide."""
    candidate, n = name, 1
    while candidate in used:
        n += 1
        candidate = f"{name}-{n}"
    used.add(candidate)
    return candidate


# --- phantoms -----------------------------------------------------------------------------


def _register_phantoms(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "phantoms",
        help="write synthetic chest phantoms with known lesion boxes (NIH layout)",
        description="Generate chest-like phantoms (Cardiomegaly, Effusion, Mass, Nodule, "
        "Pneumothorax) as OUT/images/*.png, OUT/Data_Entry.csv and OUT/BBox_List.csv.",
    )
    p.add_argument("out", metavar="OUT")
    p.add_argument("--n", type=int, default=1000, help="number of images (default 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--size", type=int, default=192, help="image side in pixels (default 192)")
    p.add_argument("--prevalence", type=float, default=0.2, help="per-lesion probability")
    p.set_defaults(handler=_phantoms, log_level="info")


def _phantoms(args: argparse.Namespace) -> int:
    from models.phantoms import write_phantom_dataset

    if args.n < 1 or not 64 <= args.size <= 8192 or not 0.0 <= args.prevalence <= 1.0:
        raise ValueError(
            f"need --n >= 1, 64 <= --size <= 8192 and 0 <= --prevalence <= 1, got {args.n}, "
            f"{args.size} and {args.prevalence}"
        )
    root = write_phantom_dataset(
        args.out, n=args.n, seed=args.seed, size=args.size, prevalence=args.prevalence
    )
    sys.stderr.write(f"wrote {args.n} phantoms to {root}\n")
    return 0
