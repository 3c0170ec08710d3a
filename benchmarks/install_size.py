"""How much disk `pip install -e ".[dev]"` takes: the installed files of every distribution
in cxr[dev]'s dependency closure (pip's RECORD of each), in the environment running this.

    python benchmarks/install_size.py

Prints the total, the CUDA libraries' share (the `nvidia-*` packages and triton that the
default Linux torch wheel brings) and the largest distributions. It counts what pip
recorded, so a virtual environment's own pip and setuptools, and bytecode caches written
later, are not in it (`du -sh .venv` reads a little more).
"""

from __future__ import annotations

import contextlib
import re
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path

from bench_kit import say
from packaging.requirements import Requirement


def closure(name: str, extras: set[str]) -> dict[str, Distribution]:
    """The installed distributions `name[extras]` needs, by normalised name."""
    seen: dict[str, Distribution] = {}
    todo = [(name, extras)]
    while todo:
        current, wanted = todo.pop()
        key = re.sub(r"[-_.]+", "-", current).lower()
        if key in seen:
            continue
        try:
            dist = distribution(current)
        except PackageNotFoundError:
            say(f"not installed: {current}")
            continue
        seen[key] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            needed = req.marker is None or any(
                req.marker.evaluate({"extra": e}) for e in ("", *wanted)
            )
            if needed:
                todo.append((req.name, set(req.extras)))
    return seen


def size_of(dist: Distribution) -> int:
    """Bytes of the files pip recorded for `dist` (those still present)."""
    total = 0
    for f in dist.files or []:
        with contextlib.suppress(OSError):
            total += Path(str(dist.locate_file(f))).stat().st_size
    return total


def main() -> None:
    dists = closure("cxr", {"dev"})
    sizes = sorted(((size_of(d), k) for k, d in dists.items()), reverse=True)
    total = sum(s for s, _ in sizes)
    cuda = sum(s for s, k in sizes if k.startswith("nvidia-") or k == "triton")
    say(f"{len(dists)} distributions: {total / 2**30:.2f} GiB ({total / 1e9:.2f} GB)")
    say(f"CUDA libraries and triton: {cuda / 2**30:.2f} GiB")
    for s, k in sizes[:10]:
        say(f"  {k}: {s / 2**20:,.0f} MiB")


if __name__ == "__main__":
    main()
