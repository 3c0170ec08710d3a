"""Mutated DICOMs through `POST /v1/images/predict`, decoded in worker processes and in the
server's threads: the same answer for each, and no 500.

Mutates the real DICOMs of ../shared/data/dicom and the generated radiographs of
tests/models/dicom_mutations.py with its operations (hostile tag values, other transfer
syntaxes, truncations, bit flips), posts each mutated file to the app (in process, a random
demo model) once with CXR_DECODE_IN_WORKERS=false and once with true, and prints the count
of each status and error class per mode. The exit status is 1 when a mode answers 500 or the
two modes answer a file differently (status, error class or probabilities).

    python benchmarks/fuzz_uploads.py --n 300 --seed 11
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_kit import say

ROOT = Path(__file__).resolve().parents[1]
# The mutation operators live beside the unit fuzz test so that both use the same ones;
# after the checkout, whose `labeler` package tests/labeler must not shadow.
sys.path.insert(0, str(ROOT))
sys.path += [str(ROOT / "tests" / "models"), str(ROOT / "tests")]  # + dicom_factory
SHARED_DICOM = ROOT.parent / "shared" / "data" / "dicom"


def mutated_files(n: int, seed: int) -> list[bytes]:
    """`n` mutated files (mutations that leave nothing to post are drawn again)."""
    from dicom_mutations import apply, base_files, random_mutation

    bases = {p.name: p.read_bytes() for p in sorted(SHARED_DICOM.glob("*.dcm"))}
    bases.update(base_files())
    rng = random.Random(seed)
    files: list[bytes] = []
    while len(files) < n:
        name = rng.choice(sorted(bases))
        data = apply(bases[name], random_mutation(rng))
        if data is not None:
            files.append(data)
    return files


def answers(files: list[bytes], *, in_workers: bool, work: Path, predictor: Any) -> list[Any]:
    """(status, error class, probabilities) of each file through the app."""
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    settings = Settings(
        storage_dir=work / f"storage-{in_workers}",
        database_url=f"sqlite:///{work / f'cxr-{in_workers}.db'}",
        allowed_hosts=["testserver"],
        decode_in_workers=in_workers,
    )
    out = []
    with TestClient(create_app(settings, predictor=predictor), raise_server_exceptions=False) as c:
        for data in files:
            response = c.post(
                "/v1/images/predict", content=data, headers={"Content-Type": "application/dicom"}
            )
            body = response.json()
            out.append((response.status_code, body.get("error"), body.get("probabilities")))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100, help="mutated files (default 100)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from models.checkpoint import build_demo_checkpoint
    from models.decode_pool import start_fork_server
    from models.predict import load_predictor

    start_fork_server()
    files = mutated_files(args.n, args.seed)
    with tempfile.TemporaryDirectory(prefix="cxr-fuzz-uploads-") as tmp:
        work = Path(tmp)
        checkpoint = build_demo_checkpoint(work / "demo.pt", image_size=64)
        predictor = load_predictor(checkpoint, device="cpu")
        got = {
            mode: answers(files, in_workers=mode, work=work, predictor=predictor)
            for mode in (False, True)
        }
    failed = False
    for mode, where in ((False, "the server's threads"), (True, "worker processes")):
        counts = collections.Counter((status, error) for status, error, _ in got[mode])
        shown = ", ".join(f"{s} {e or ''}".strip() + f": {k}" for (s, e), k in counts.most_common())
        say(f"decoded in {where}: {shown}")
        failed |= any(status >= 500 for status, _, _ in got[mode])
    differ = [i for i, (a, b) in enumerate(zip(got[False], got[True], strict=True)) if a != b]
    say(f"{args.n} mutated files (seed {args.seed}); answered differently: {len(differ)}")
    return 1 if failed or differ else 0


if __name__ == "__main__":
    sys.exit(main())
