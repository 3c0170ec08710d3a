"""Hostile-text fuzz of the labeler: worst time and memory per 10 KB of report text.

Draws reports from the classes of tests/labeler/hostile_text.py (affix runs, deep
nesting, long finding lists, run-on sentences, mixed scripts, short lines, arbitrary
code points), labels each one alone and prints, per class, the worst CPU seconds per
10 KB and the peak resident memory above the loaded pipeline. Exits 1 when a report
costs more than --max-seconds or --max-mb per 10 KB (issue 18: 1 s and 300 MB), or
when labeling raised anything.

    python benchmarks/fuzz_text.py --examples 200 --max-size 10000 --seed 7
    python benchmarks/fuzz_text.py --examples 20 --min-size 100000 --max-size 100000
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

from bench_kit import say

ROOT = Path(__file__).resolve().parents[1]
# The text classes live beside the property test so both draw from the same strategy.
sys.path.insert(0, str(ROOT / "tests" / "labeler"))


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--min-size", type=int, default=100)
    parser.add_argument("--max-size", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--max-seconds", type=float, default=1.0, help="per 10 KB")
    parser.add_argument("--max-mb", type=float, default=300.0, help="per 10 KB")
    parser.add_argument("--labels", default="chestxray14")
    args = parser.parse_args(argv)

    from hostile_text import hostile_text

    from labeler.config import LabelerConfig
    from labeler.pipeline import build_nlp, label_reports

    config = LabelerConfig(label_set=args.labels, max_chars=max(args.max_size * 2, 100_000))
    nlp = build_nlp(config)
    list(label_reports([("warm", "No pneumothorax.")], nlp=nlp, config=config))
    base_mb = _rss_mb()
    rng = random.Random(args.seed)
    worst_s: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    failures = 0
    largest = 0
    worst_total = (0.0, "")
    for i in range(args.examples):
        size = rng.randint(args.min_size, args.max_size)
        kind, text = hostile_text(rng, size)
        per10k = max(len(text), 1) / 10_000
        start = time.process_time()
        try:
            [result] = label_reports([(str(i), text)], nlp=nlp, config=config, on_error="skip")
        except Exception as exc:  # noqa: BLE001 - the fuzz reports anything that escapes
            failures += 1
            say(f"example {i} ({kind}, {len(text):,} chars) raised {type(exc).__name__}")
            continue
        seconds = (time.process_time() - start) / per10k
        bad_offsets = [m for m in result.mentions if text[m.start : m.end] != m.text]
        if bad_offsets:
            failures += 1
            say(f"example {i} ({kind}): {len(bad_offsets)} mentions with wrong offsets")
        largest = max(largest, len(text))
        worst_s[kind] = max(worst_s[kind], seconds)
        count[kind] += 1
        if seconds > worst_total[0]:
            worst_total = (seconds, f"example {i} ({kind}, {len(text):,} chars)")
    sizes = f"{args.min_size:,}-{args.max_size:,}"
    say(f"{args.examples} reports of {sizes} characters, seed {args.seed}")
    # ru_maxrss is a high-water mark: the run's peak, set against its largest report
    peak_mb = _rss_mb() - base_mb
    mb_per_10k = peak_mb / max(largest / 10_000, 1.0)
    for kind in sorted(worst_s):
        say(f"  {kind:14s} {count[kind]:4d} reports, worst {worst_s[kind]:.3f} CPU s per 10 KB")
    say(f"worst: {worst_total[0]:.3f} CPU s per 10 KB ({worst_total[1]})")
    say(
        f"peak memory above the loaded pipeline: {peak_mb:.1f} MB over the run, "
        f"largest report {largest:,} characters: {mb_per_10k:.1f} MB per 10 KB"
    )
    over = worst_total[0] > args.max_seconds or mb_per_10k > args.max_mb
    if over:
        say(f"OVER the bound of {args.max_seconds} s and {args.max_mb} MB per 10 KB")
    return 1 if failures or over else 0


if __name__ == "__main__":
    sys.exit(main())
