"""`cxr listen`: what decoding received images in a worker process costs.

Starts a `StoreListener` on loopback (no model) decoding in its thread, then in a worker,
stores --n generated 2500x2048 12-bit DICOMs over one association (pynetdicom SCU) after two
to warm up, and prints the time from the first C-STORE to the last result line, per
instance: receiving, header, decoding and fitting, fingerprint, recording. In the
listener's own thread (`decode_in_worker=False`) a crashing decoder stops the listener; in a
worker process, the default, it fails that instance only.

    python benchmarks/listen_decode.py --n 24 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bench_kit import say

if TYPE_CHECKING:
    from batch.labeling import PipelineLabeler

sys.path.insert(0, str(Path(__file__).resolve().parent))

from predict import synthetic_dicom  # noqa: E402 - a sibling script


def one_run(in_worker: bool, files: list[Path], labeler: PipelineLabeler) -> float:
    """Seconds from the first C-STORE after the warm-up to the last result line."""
    import pydicom
    from pynetdicom import AE

    from batch.listen.listener import StoreListener

    datasets = [pydicom.dcmread(f) for f in files]
    with tempfile.TemporaryDirectory(prefix="cxr-listen-bench-") as tmp:
        out = Path(tmp) / "out.jsonl"
        listener = StoreListener(None, out=out, labeler=labeler, decode_in_worker=in_worker)
        listener.start("127.0.0.1", 0)
        try:
            ae = AE(ae_title="BENCH")
            ae.add_requested_context(
                datasets[0].SOPClassUID, datasets[0].file_meta.TransferSyntaxUID
            )
            assoc = ae.associate("127.0.0.1", listener.port, ae_title="CXR")
            if not assoc.is_established:
                raise SystemExit("the listener refused the association")
            for ds in datasets[:2]:  # warm-up: the worker's start, first imports
                assoc.send_c_store(ds)
            listener.wait_idle(120)
            t0 = time.perf_counter()
            for ds in datasets[2:]:
                assoc.send_c_store(ds)
            listener.wait_idle(600)
            seconds = time.perf_counter() - t0
            assoc.release()
        finally:
            listener.stop()
        lines = [json.loads(line) for line in out.read_text().splitlines()]
    if len(lines) != len(files) or any(line["state"] != "done" for line in lines):
        raise SystemExit(f"decode_in_worker={in_worker}: not every instance was done")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=24, help="instances, 2 of them warm-up")
    parser.add_argument("--repeat", type=int, default=2, help="rounds (median)")
    args = parser.parse_args()
    if args.n < 3:
        raise SystemExit("--n must be at least 3")
    from batch.labeling import PipelineLabeler
    from models.decode_pool import start_fork_server

    start_fork_server()  # as `cxr listen` does
    labeler = PipelineLabeler()
    _ = labeler.nlp  # built before any timing, as the service builds it at start-up
    times: dict[bool, list[float]] = {False: [], True: []}
    where = {False: "in the listener's thread", True: "in a worker process"}
    with tempfile.TemporaryDirectory(prefix="cxr-listen-files-") as tmp:
        files = [synthetic_dicom(Path(tmp) / f"{i}.dcm", seed=i) for i in range(args.n)]
        say(f"{args.n} generated 2500x2048 12-bit DICOMs, no model, one association")
        for round_ in range(args.repeat):
            for in_worker in times:
                seconds = one_run(in_worker, files, labeler)
                times[in_worker].append(seconds)
                per = seconds / (args.n - 2) * 1e3
                say(f"  round {round_ + 1}, decoded {where[in_worker]}: {per:.0f} ms an instance")
    for in_worker, got in times.items():
        per = statistics.median(got) / (args.n - 2) * 1e3
        say(f"decoded {where[in_worker]}: {per:.0f} ms an instance (median of {args.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
