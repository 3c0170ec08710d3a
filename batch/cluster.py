"""Batch jobs and report labeling on Ray Data: the same rows as one machine, on many.

    connect(None)                                    # a local Ray; or "auto", "ray://head:10001"
    for lines in run_on_ray(spec, items, recorded, model=path):   # one list per block
        ...                                          # the caller writes JSONL, Parquet, counts

The pipeline follows Ray Data's batch-inference pattern: the planned items (listing is
done once, on the driver, by the job's source) become a dataset of many small blocks
(about `chunk_size` items each, so every worker has work); a pool of CPU actors reads
and decodes them and labels SRs and CSV reports (one labeler per actor); a second pool
predicts (one model per actor, `num_gpus=1` per actor when the cluster has GPUs); the
driver receives result lines block by block and writes them. Structured reports run
first, alone, and their labels are handed to the image actors, as the single-machine
engine processes SRs first. Each file is caught at its own boundary as in
`BatchProcessor`: a failing file is that file's failure, and the readers decode in a
child process (`batch.processor.decode_pool`), so a file that crashes the decoder is that
file's failure too, not a dead actor. A worker that dies otherwise (the OOM killer, a lost
node) is restarted by Ray and its block retried.

The files must be readable at the same paths on every node (a shared volume); DICOMweb
inputs, DICOM push and the training-set writer run on one machine only.
"""

from __future__ import annotations

import contextlib
import json
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from batch.duplicates import InstanceIndex, Seen, duplicate_fields
from batch.interfaces import BatchInputError, Outcome, Source, SourceItem
from batch.job import FolderInput, JobSpec, ZipInput, build_job
from batch.results import outcome_line, result_line

if TYPE_CHECKING:
    from labeler import ReportLabels
    from labeler.config import LabelerConfig
    from models.image_pipeline import InputSpec, LoadedImage, PreparedImage
    from models.precision import Precision

__all__ = ["connect", "label_reports_on_ray", "run_on_ray"]

Batch = dict[str, np.ndarray]


def connect(address: str | None, *, num_cpus: int | None = None) -> None:
    """Join the Ray cluster at `address`, or start a local Ray (None); no-op if connected.

    Args:
        address: "auto", "ray://HOST:10001" or HOST:6379; None or "" for a local Ray.
        num_cpus: CPUs of a local Ray (None: all); ignored with an address.
    """
    import ray

    if ray.is_initialized():
        return
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(num_cpus=num_cpus, log_to_driver=False, include_dashboard=False)


def _resources() -> dict[str, float]:
    import ray

    return dict(ray.cluster_resources())  # type: ignore[no-untyped-call]


def _cpus() -> int:
    return max(1, int(_resources().get("CPU", 1)))


def _gpus() -> int:
    return int(_resources().get("GPU", 0))


def _dataset(rows: list[dict[str, Any]], block_rows: int) -> Any:
    import ray

    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True  # rows come back in input order
    blocks = max(1, min(len(rows), -(-len(rows) // max(1, block_rows))))
    return ray.data.from_items(rows, override_num_blocks=blocks)


# --- labeling ----------------------------------------------------------------------------


class _LabelActor:
    """One labeler pipeline per actor, built once."""

    def __init__(self, config: LabelerConfig) -> None:
        from batch.labeling import PipelineLabeler

        self.labeler = PipelineLabeler(config)

    def __call__(self, batch: Batch) -> Batch:
        items = [(str(i), str(t)) for i, t in zip(batch["id"], batch["text"], strict=True)]
        results = self.labeler.label_many(items)
        return {"labels": np.array([pickle.dumps(r) for r in results], dtype=object)}


def label_reports_on_ray(
    items: Iterable[tuple[str, str]],
    *,
    config: LabelerConfig,
    batch_size: int = 64,
    actors: int | None = None,
) -> Iterator[ReportLabels]:
    """Label (id, text) pairs on Ray; results come in input order, one per pair.

    Args:
        items: (report id, text) pairs (held on the driver while the job runs).
        config: the labeler configuration (each actor builds its pipeline from it).
        batch_size: reports per block and per call.
        actors: labeler actors (None: one per CPU of the cluster).

    Yields:
        One `ReportLabels` per input, in input order; a bad report has `.error` set.
    """
    import ray

    rows = [{"id": str(i), "text": str(t)} for i, t in items]
    if not rows:
        return
    size = actors or _cpus()
    ds = _dataset(rows, batch_size).map_batches(
        _LabelActor,
        fn_constructor_kwargs={"config": config},
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(min_size=1, max_size=size),
        num_cpus=1,
    )
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        for blob in batch["labels"]:
            yield pickle.loads(blob)  # noqa: S301 - written by our own actors


# --- batch jobs --------------------------------------------------------------------------


def _item_row(item: SourceItem) -> dict[str, Any]:
    return {
        "key": item.key,
        "kind": item.kind,
        "study": item.study_instance_uid or "",
        "accession": item.accession_number or "",
        "note": item.note or "",
    }


def _row_item(batch: Batch, i: int) -> SourceItem:
    return SourceItem(
        str(batch["key"][i]),
        str(batch["kind"][i]),
        study_instance_uid=str(batch["study"][i]) or None,
        accession_number=str(batch["accession"][i]) or None,
        note=str(batch["note"][i]) or None,
    )


def _prepared_bytes(image: LoadedImage) -> bytes:
    """The fitted image for the predict actors (our own actors: pickle is safe here)."""
    return pickle.dumps(image.prepared, protocol=pickle.HIGHEST_PROTOCOL)


class _ReadActor:
    """Reads and decodes files, labels SRs and CSV reports: one labeler per actor."""

    def __init__(
        self,
        spec: JobSpec,
        recorded: list[dict[str, Any]],
        keep_pixels: bool,
        input_spec: InputSpec | None = None,
        registry: Any = None,
    ) -> None:
        from batch.labeling import PipelineLabeler
        from batch.processor import decode_pool

        self.keep_pixels = keep_pixels
        self.job = build_job(spec, labeler=PipelineLabeler(), predictor=None, input_spec=input_spec)
        # Decoding in a child process: a file that crashes the decoder fails alone, once,
        # instead of killing this actor, whose block Ray would then retry without end.
        self.job.processor.decode_pool = decode_pool(workers=1, timeout_s=spec.file_timeout_s)
        for line in recorded:  # SR labels for images of the same study
            self.job.processor.restore(line)
        if registry is not None:  # copies read by other readers are skipped here too
            self.job.processor.instances = _SharedInstances(registry)

    def __call__(self, batch: Batch) -> Batch:
        items = [_row_item(batch, i) for i in range(len(batch["key"]))]
        outcomes = self.job.processor.process(items)
        lines, pixels = [], []
        for outcome in outcomes:
            lines.append(json.dumps(outcome_line(outcome), separators=(",", ":")))
            image = outcome.image
            keep = self.keep_pixels and image is not None
            pixels.append(_prepared_bytes(image) if keep and image is not None else b"")
        return {
            "line": np.array(lines, dtype=object),
            "pixels": np.array(pixels, dtype=object),
        }


class _PredictActor:
    """Predicts decoded images: one model per actor."""

    def __init__(
        self, model: Path, device: str, precision: Precision = "auto", registry: Any = None
    ) -> None:
        from batch.processor import BatchProcessor
        from models.predict import load_predictor

        predictor = load_predictor(model, device=device, precision=precision)
        self.processor = BatchProcessor(_NoSource(), labeler=_NoLabeler(), predictor=predictor)
        if registry is not None:  # a first copy whose prediction fails is no first copy
            self.processor.instances = _SharedInstances(registry)

    def __call__(self, batch: Batch) -> Batch:
        lines = [json.loads(str(text)) for text in batch["line"]]
        loaded: list[Outcome] = []
        for line, blob in zip(lines, batch["pixels"], strict=True):
            if line["state"] == "done" and blob:
                result = {k: v for k, v in line.items() if k not in ("path", "state", "note")}
                result["model"] = self.processor.model_name
                result["demo"] = self.processor.demo
                outcome = Outcome(line["path"], "done", result)
                outcome.image = _Prepared(pickle.loads(bytes(blob)))  # noqa: S301 - our actors
                loaded.append(outcome)
        if loaded:
            self.processor._predict(loaded)
        by_key = {o.key: outcome_line(o) for o in loaded}
        out = [by_key.get(line["path"], line) for line in lines]
        return {"line": np.array([json.dumps(x, separators=(",", ":")) for x in out], dtype=object)}


class _Prepared:
    def __init__(self, prepared: PreparedImage) -> None:
        self.prepared = prepared


class _NoSource(Source):
    def scan(self) -> Iterator[SourceItem]:
        return iter(())

    def local_path(self, item: SourceItem) -> Path:
        raise OSError("the predict stage reads no files")


class _NoLabeler:
    version = "unused"

    def label_many(self, items: Sequence[tuple[str, str]]) -> list[ReportLabels]:
        raise RuntimeError("the predict stage labels no reports")


class _InstanceRegistry:
    """The readers' shared `InstanceIndex` (a Ray actor): the first reader to decode an
    image holds it, and a copy that another reader decodes later is skipped before it
    is predicted. The driver still judges every line as it arrives (`_across_readers`),
    so a registry lost with its node costs only the prediction of a copy."""

    def __init__(self, recorded: list[dict[str, Any]]) -> None:
        self.index = InstanceIndex()
        for line in recorded:
            self.index.restore(line)

    def see(self, uid: str | None, fingerprint: str | None, key: str) -> Seen:
        return self.index.see(uid, fingerprint, key)

    def forget(self, uid: Any, fingerprint: Any, key: str) -> None:
        self.index.forget(uid, fingerprint, key)


class _SharedInstances(InstanceIndex):
    """A reader's `InstanceIndex` that asks the shared registry; if the registry cannot be
    reached, each image counts as a first copy and the driver finds the copies."""

    def __init__(self, registry: Any) -> None:
        super().__init__()
        self.registry = registry

    def see(self, uid: str | None, fingerprint: str | None, key: str) -> Seen:
        import ray

        try:
            seen: Seen = ray.get(self.registry.see.remote(uid, fingerprint, key), timeout=60)
        except (ray.exceptions.RayError, TimeoutError):
            return super().see(uid, fingerprint, key)
        return seen

    def forget(self, uid: Any, fingerprint: Any, key: str) -> None:
        import ray

        super().forget(uid, fingerprint, key)
        # A copy read from now on is predicted; one skipped already is read again by the
        # driver once this line reaches it (`_CopiesAwaitingFirst`).
        with contextlib.suppress(ray.exceptions.RayError, TimeoutError):
            ray.get(self.registry.forget.remote(uid, fingerprint, key), timeout=60)


def _registry(recorded: Sequence[dict[str, Any]]) -> Any:
    """A registry actor holding the images of the recorded lines (only what it needs)."""
    import ray

    fields = ("path", "state", "sop_instance_uid", "pixel_fingerprint", "duplicate_of")
    images = [
        {k: line.get(k) for k in fields}
        for line in recorded
        if isinstance(line.get("pixel_fingerprint"), str)
    ]
    actor = ray.remote(num_cpus=0, max_restarts=0)(_InstanceRegistry)
    return actor.remote(images)


def run_on_ray(
    spec: JobSpec,
    items: Sequence[SourceItem],
    recorded: Sequence[dict[str, Any]],
    *,
    model: Path | None,
    device: str = "cpu",
    precision: Precision = "auto",
    chunk_size: int = 8,
    actors: int | None = None,
    after_block: Callable[[int], None] | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """Process planned items on Ray; yields the result lines of each block, in order.

    Args:
        spec: the job (a folder or an extracted zip, read at the same paths by every node).
        items: what to process (`engine.plan`: recorded items left out, SRs first).
        recorded: the lines of an earlier run (their SR labels reach later images).
        model: the checkpoint each predict actor loads (None: images without prediction).
        device: where a predict actor runs its model ("cuda" on GPU nodes).
        precision: its arithmetic (`models.precision`), resolved on each actor's device.
        chunk_size: items per block and per forward pass.
        actors: actors per pool (None: one per CPU of the cluster).
        after_block: called with the number of blocks received (tests kill a worker here).

    Raises:
        BatchInputError: the spec asks for what runs on one machine only.
    """
    if not isinstance(spec.input, FolderInput | ZipInput):
        raise BatchInputError("--ray reads a folder or a zip (DICOMweb runs on one machine)")
    if spec.dataset is not None or spec.push is not None:
        raise BatchInputError("--dataset and --push run on one machine only, not with --ray")
    if isinstance(spec.input, ZipInput):  # extracted by the driver's scan: read as a folder
        spec = replace(spec, input=FolderInput(spec.input.extract_to))
    known = list(recorded)
    instances = InstanceIndex()
    for line in recorded:
        instances.restore(line)
    srs = [i for i in items if i.kind == "sr"]
    rest = [i for i in items if i.kind != "sr"]
    registry = _registry(recorded) if rest else None
    copies = _CopiesAwaitingFirst(recorded, rest)
    blocks = 0
    for phase in (srs, rest):
        if not phase:
            continue
        phased = _run_phase(
            spec, phase, known, model, device, chunk_size, actors, registry, precision=precision
        )
        for lines in phased:
            if phase is srs:
                known.extend(lines)
            blocks += 1
            yield [_across_readers(line, instances) for line in copies.settle(lines)]
            if after_block is not None:
                after_block(blocks)
    # Copies skipped for a first copy whose prediction then failed: read and predicted now
    # (the registry has forgotten that first copy), as one machine would have done.
    again, unsettled = copies.retry(), copies.unsettled()
    if again:
        for lines in _run_phase(
            spec, again, known, model, device, chunk_size, actors, registry, precision=precision
        ):
            yield [_across_readers(line, instances) for line in lines]
    if unsettled:
        yield [_across_readers(line, instances) for line in unsettled]


class _CopiesAwaitingFirst:
    """Holds a skipped copy's line until its first copy's line arrives: if that copy was
    done, the line goes out; if its prediction failed, the copy is read again (`retry`).

    A reader skips a copy as soon as another reader has decoded the image, before that
    image is predicted; on Ray the lines come back as blocks finish, so the first copy's
    fate is known only later.
    """

    def __init__(self, recorded: Sequence[dict[str, Any]], items: Sequence[SourceItem]) -> None:
        self.state = {str(line.get("path")): str(line.get("state")) for line in recorded}
        self.items = {item.key: item for item in items}
        self.waiting: dict[str, list[dict[str, Any]]] = {}
        self.again: list[SourceItem] = []

    def settle(self, lines: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The lines to record now, in order; held and retried copies left out."""
        out: list[dict[str, Any]] = []
        for line in lines:
            first = line.get("duplicate_of") if line.get("state") == "skipped" else None
            if isinstance(first, str) and str(line.get("path")) in self.items:
                if first not in self.state:
                    self.waiting.setdefault(first, []).append(line)
                    continue
                if self.state[first] == "failed":
                    self.again.append(self.items[str(line.get("path"))])
                    continue
            out.append(line)
            key = str(line.get("path"))
            self.state[key] = str(line.get("state"))
            for held in self.waiting.pop(key, []):
                if self.state[key] == "failed":
                    self.again.append(self.items[str(held.get("path"))])
                else:
                    out.append(held)
        return out

    def retry(self) -> list[SourceItem]:
        """The copies to read again, in source order."""
        order = {key: n for n, key in enumerate(self.items)}
        return sorted(self.again, key=lambda item: order[item.key])

    def unsettled(self) -> list[dict[str, Any]]:
        """Held lines whose first copy's line never came (recorded as they are)."""
        return [line for held in self.waiting.values() for line in held]


def _across_readers(line: dict[str, Any], instances: InstanceIndex) -> dict[str, Any]:
    """The readers skip the copies of an image that the shared registry
    (`_InstanceRegistry`) knows, and the driver judges each line again as it arrives: a
    copy that reached it unskipped (the registry lost with its node) becomes a duplicate
    here, of the copy whose line arrived first (Ray hands blocks back as they finish, not
    always in source order)."""
    uid, fingerprint = line.get("sop_instance_uid"), line.get("pixel_fingerprint")
    key = str(line["path"])
    if line.get("state") == "failed":  # no first copy: a later one is predicted
        instances.forget(uid, fingerprint, key)
    if line.get("state") != "done" or not isinstance(fingerprint, str):
        instances.restore(line)  # a reader's own duplicate names its first copy
        return line
    if not isinstance(uid, str):  # a bitmap: only its pixels can match
        uid = None
    seen = instances.see(uid, fingerprint, key)
    if seen.duplicate_of is None or uid is None:
        if seen.warning and "warning" not in line:
            return {**line, "warning": seen.warning}
        return line
    fields = duplicate_fields(uid, fingerprint, seen.duplicate_of)
    base = {k: line.get(k) for k in ("kind", "study_instance_uid", "accession_number")}
    return result_line(key, "skipped", base | fields, None)


def _input_spec(model: Path) -> InputSpec:
    """The model's input size and resize mode, from its card (the readers fit for it)."""
    from models.checkpoint import load_checkpoint
    from models.image_pipeline import InputSpec
    from models.transforms import resize_mode_of

    card = load_checkpoint(model, map_location="cpu").card
    return InputSpec(int(card.image_size), resize_mode_of(card.preprocessing))


def _run_phase(
    spec: JobSpec,
    items: Sequence[SourceItem],
    recorded: list[dict[str, Any]],
    model: Path | None,
    device: str,
    chunk_size: int,
    actors: int | None,
    registry: Any = None,
    *,
    precision: Precision = "auto",
) -> Iterator[list[dict[str, Any]]]:
    import ray

    size = actors or _cpus()
    srs_recorded = [line for line in recorded if line.get("kind") == "sr"]
    predict = model is not None and any(i.kind != "sr" for i in items)
    ds = _dataset([_item_row(i) for i in items], chunk_size).map_batches(
        _ReadActor,
        fn_constructor_kwargs={
            "spec": spec,
            "recorded": srs_recorded,
            "keep_pixels": predict,
            "input_spec": _input_spec(model) if predict and model is not None else None,
            "registry": registry,
        },
        batch_size=chunk_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(min_size=1, max_size=size),
        num_cpus=1,
    )
    if predict and model is not None:
        gpus = _gpus()
        ds = ds.map_batches(
            _PredictActor,
            fn_constructor_kwargs={
                "model": model,
                "device": "cuda" if gpus else device,
                "precision": precision,
                "registry": registry,
            },
            batch_size=chunk_size,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(min_size=1, max_size=max(1, gpus or size)),
            num_gpus=1 if gpus else 0,
            num_cpus=0 if gpus else 1,
        )
    for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
        yield [json.loads(str(text)) for text in batch["line"]]
