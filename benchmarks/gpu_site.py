"""Pack the packages the lent GPU machine lacks into one archive that fits one call.

The GPU machine (see `benchmarks/gpu_suite.sh`) has Python 3.12 with torch, numpy, OpenCV
and Pillow, but not pydicom, FastAPI or spaCy, and nothing can be downloaded there. A call
to it carries at most 64 MiB with the working tree, and the wheels of
`benchmarks/gpu_wheels.txt` take about 88 MB. This script downloads them here (cp312,
manylinux), unpacks them, drops what nothing imports (tests, C sources, stubs), strips the
debug information from their compiled extensions (194 MB of the spaCy stack's 270 are
debug sections), and writes `.whl/site.tar.xz` (~25 MB). One call carries it beside the
working tree, and `bash benchmarks/gpu_suite.sh unpack core` unpacks it into `.devsite/`
and runs the suite: the machine goes back 30 s after a call, so nothing may depend on a
second call finding it warm.

    python benchmarks/gpu_site.py [--keep DIR]

Needs pip with access to the package index, `xz` and binutils' `strip`. Prints the
archive's size; fails when it would not fit a call beside the working tree.
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
    # Wheels ship their extensions with debug sections; the symbols the loader needs stay.
    shared = [str(f) for f in site.rglob("*.so*") if f.is_file()]
    if shared:
        subprocess.run(["strip", "--strip-debug", *shared], check=True)


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
    for tool in ("tar", "xz", "strip"):
        if shutil.which(tool) is None:
            raise SystemExit(f"gpu_site: needs {tool}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="gpu-site-"))
    wheels, site = work / "wheels", work / "site"
    wheels.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(site, ignore_errors=True)
    names: set[str] = set()
    for wheel in _download(wheels):
        with zipfile.ZipFile(wheel) as z:
            z.extractall(site)
            names.update(name.split("/")[0] for name in z.namelist())
    _prune(site)
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("site-*.tar.xz"):  # the two halves an earlier version wrote
        old.unlink()
    tree = _tree_bytes()
    size = _pack(site, sorted(names), OUT / "site.tar.xz")
    sys.stdout.write(
        f".whl/site.tar.xz: {size / 1e6:.1f} MB ({len(names)} entries); "
        f"with the working tree {(size + tree) / 2**20:.1f} of 64 MiB\n"
    )
    if size + tree > CALL_LIMIT:
        raise SystemExit("site.tar.xz does not fit one call beside the working tree")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
