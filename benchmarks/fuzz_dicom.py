"""Mutation fuzz of the DICOM reader for N minutes; prints counts by outcome.

Mutates real DICOM files (../shared/data/dicom, or --data; generated radiographs when
there are none) with the operations of tests/models/dicom_mutations.py: hostile tag
values (Rows, Columns, Bits*, Pixel Representation, Photometric Interpretation,
Samples per Pixel, Number of Frames, Rescale, Window, LUTs), other transfer syntaxes
(re-encoded or only relabelled: deflate, JPEG, RLE, big endian, unknown), truncations,
bit flips and byte cuts. Each mutated file goes through `load_image` and through
`read_dicom_header` (the batch scan's reader). Outcomes: ok, each `ImageError`
subclass, and any escaped exception type with an example mutation; the exit status is
1 when anything escaped.

    nice -n 10 env PYTHONPATH=. python benchmarks/fuzz_dicom.py --minutes 3 --seed 7
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

from bench_kit import say

ROOT = Path(__file__).resolve().parents[1]
# The mutation operators live beside the unit fuzz test so both use the same strategy.
sys.path.insert(0, str(ROOT / "tests" / "models"))
sys.path.insert(0, str(ROOT / "tests"))  # dicom_factory, which the mutations build on
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "dicom"
SLOW_SECONDS = 5.0


def _bases(data_dir: Path) -> dict[str, bytes]:
    from dicom_mutations import base_files

    files = sorted(data_dir.glob("*.dcm")) if data_dir.is_dir() else []
    if files:
        return {p.name: p.read_bytes() for p in files}
    say(f"no DICOM files in {data_dir}: fuzzing generated radiographs instead")
    return base_files()


def _outcome(fn: object, data: bytes, max_pixels: int) -> str:
    from models.dicom import read_dicom_header
    from models.errors import ImageError
    from models.images import load_image

    try:
        if fn == "load_image":
            image = load_image(data, filename="fuzz.dcm", max_pixels=max_pixels)
            import numpy as np

            px = image.pixels
            if px.shape != (image.meta.rows, image.meta.columns) or not np.isfinite(px).all():
                return "ESCAPED bad-array"
        else:
            read_dicom_header(data)
    except ImageError as exc:
        return type(exc).__name__
    except BaseException as exc:  # noqa: BLE001 - an escape is what this script counts
        if isinstance(exc, KeyboardInterrupt):
            raise
        return f"ESCAPED {type(exc).__module__}.{type(exc).__name__}"
    return "ok"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--max-pixels", type=int, default=50_000_000)
    args = parser.parse_args(argv)

    from dicom_mutations import apply, describe, random_mutation

    warnings.simplefilter("ignore")
    bases = _bases(args.data)
    say(f"bases: {', '.join(sorted(bases))}; seed {args.seed}; {args.minutes:g} min")
    rng = random.Random(args.seed)
    counts: dict[str, Counter[str]] = {"load_image": Counter(), "read_dicom_header": Counter()}
    examples: dict[str, str] = {}
    tried = skipped = slow = 0
    slowest = (0.0, "")
    end = time.monotonic() + args.minutes * 60
    while time.monotonic() < end:
        base = rng.choice(sorted(bases))
        mutation = random_mutation(rng)
        data = apply(bases[base], mutation)
        if data is None:
            skipped += 1
            continue
        tried += 1
        for fn, counter in counts.items():
            start = time.monotonic()
            outcome = _outcome(fn, data, args.max_pixels)
            took = time.monotonic() - start
            if took > slowest[0]:
                slowest = (took, f"{fn} on {describe(base, mutation)}")
            if took > SLOW_SECONDS:
                slow += 1
            counter[outcome] += 1
            if outcome.startswith("ESCAPED"):
                examples.setdefault(f"{fn}: {outcome}", describe(base, mutation))
    say(f"mutations tried: {tried} (plus {skipped} pydicom could not write)")
    for fn, counter in counts.items():
        say(f"{fn}:")
        for outcome, n in counter.most_common():
            say(f"  {outcome:32s} {n:7d}  ({100 * n / max(tried, 1):.1f}%)")
    say(f"slowest call: {slowest[0]:.2f} s ({slowest[1]}); over {SLOW_SECONDS:g} s: {slow}")
    escaped = sum(n for c in counts.values() for o, n in c.items() if o.startswith("ESCAPED"))
    say(f"escaped exceptions: {escaped}")
    for key, example in examples.items():
        say(f"  {key}: e.g. {example}")
    return 1 if escaped else 0


if __name__ == "__main__":
    sys.exit(main())
