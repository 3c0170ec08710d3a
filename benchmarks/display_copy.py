"""What a full-image display copy costs a batch image read: why the worklist's previews are
made from the kept model input (`app/review_images.py`) instead.

Reads one generated 2500x2048 16-bit DICOM through `models.image_pipeline.load_for_model`,
fitted to 512 px (letterbox), without and with a 1024 px display copy, alternating the two
settings; prints the median and the minimum of `--repeat` reads of each, on one core.

    python benchmarks/display_copy.py --repeat 15
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_kit import dx_bytes, say


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    import cv2

    from models.image_pipeline import InputSpec, load_for_model

    cv2.setNumThreads(1)
    rng = np.random.default_rng(0)
    ramp = np.add.outer(np.linspace(0, 3000, 2500), np.linspace(0, 1000, 2048))
    data = dx_bytes((ramp + rng.integers(0, 90, ramp.shape)).astype(np.uint16))
    for size in (None, 1024, None, 1024):
        spec = InputSpec(512, "letterbox", display_size=size)
        load_for_model(data, spec)  # warm
        took = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            load_for_model(data, spec)
            took.append(time.perf_counter() - start)
        say(
            f"display copy {size or 'none'}: median {np.median(took) * 1000:.1f} ms, "
            f"min {min(took) * 1000:.1f} ms"
        )


if __name__ == "__main__":
    main()
