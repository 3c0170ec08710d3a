"""Safe zip extraction for uploaded PACS exports.

Refused before anything is written: absolute names, drive letters, `..` parts,
control characters in names, two members with one name, symbolic links, too many
members, a declared total beyond the cap, members compressed more than `max_ratio`
times, and archives that as a whole expand more than `max_ratio` times (zip bombs
reach ratios of 1000+; DICOM pixel data rarely compresses beyond 10:1). During
extraction bytes are counted as they are written, since the sizes in a zip's
directory can lie.
"""

from __future__ import annotations

import shutil
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from app.errors import UnsafeArchiveError
from app.settings import Settings

__all__ = ["ZipLimits", "check_zip", "extract_zip", "remove_tree", "zip_limits"]


@dataclass(frozen=True)
class ZipLimits:
    """Caps applied to uploaded archives."""

    max_total_bytes: int
    max_ratio: float
    max_members: int


def zip_limits(settings: Settings) -> ZipLimits:
    """The limits from settings; built once at start-up and kept on the app state."""
    return ZipLimits(
        max_total_bytes=int(settings.zip_max_uncompressed_mb * 2**20),
        max_ratio=settings.zip_max_ratio,
        max_members=settings.zip_max_members,
    )


def _safe_name(name: str) -> PurePosixPath:
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise UnsafeArchiveError(
            f"zip member {name!r} has a control character in its name; refusing the archive"
        )
    cleaned = name.replace("\\", "/")
    path = PurePosixPath(cleaned)
    if cleaned.startswith("/") or (len(cleaned) > 1 and cleaned[1] == ":"):
        raise UnsafeArchiveError(f"zip member {name!r} has an absolute path; refusing the archive")
    if any(part == ".." for part in path.parts):
        raise UnsafeArchiveError(
            f"zip member {name!r} climbs out of the archive with '..'; refusing the archive"
        )
    return path


# Below this much data, compression ratios say little (a small text file compresses
# 50:1) and writing it costs nothing; above it the ratio checks apply.
_RATIO_FLOOR = 1 << 20
_AGGREGATE_RATIO_FLOOR = 16 << 20


def check_zip(path: Path, limits: ZipLimits) -> int:
    """Validate an archive's directory without extracting it.

    Checks, in order: the member count; each member's name (no absolute paths, no `..`,
    no control characters, no two members with the same name) and type (no symbolic
    links); each member's compression ratio; the total uncompressed size; and the
    archive-wide ratio (total uncompressed size over the archive's size). The last one
    catches bombs made of many members each under the per-member threshold (issue 7
    item 6: 512 members of 1 MiB zeros in 578 KB).

    Returns:
        The declared uncompressed size in bytes.

    Raises:
        UnsafeArchiveError: not a zip, or any check above fails.
    """
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except Exception as exc:  # noqa: BLE001 - zipfile raises several kinds on a bad directory
        raise UnsafeArchiveError(
            f"upload is not a readable zip archive ({type(exc).__name__}: {exc})"
        ) from None
    if len(infos) > limits.max_members:
        raise UnsafeArchiveError(
            f"zip has {len(infos)} members; the limit is {limits.max_members} (CXR_ZIP_MAX_MEMBERS)"
        )
    total = 0
    seen: set[PurePosixPath] = set()
    for info in infos:
        name = _safe_name(info.filename)
        if name in seen and not info.is_dir():
            # Extracting both would keep only the last: a file lost without a word.
            raise UnsafeArchiveError(
                f"zip has two members named {info.filename!r}; refusing the archive "
                "(each file must have its own name)"
            )
        seen.add(name)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise UnsafeArchiveError(f"zip member {info.filename!r} is a symbolic link; refusing")
        if info.is_dir():
            continue
        total += info.file_size
        if info.file_size > _RATIO_FLOOR and info.file_size > limits.max_ratio * max(
            info.compress_size, 1
        ):
            ratio = info.file_size / max(info.compress_size, 1)
            raise UnsafeArchiveError(
                f"zip member {info.filename!r} expands {ratio:.0f}-fold (limit "
                f"{limits.max_ratio:g}, CXR_ZIP_MAX_RATIO): refusing a likely zip bomb"
            )
    if total > limits.max_total_bytes:
        raise UnsafeArchiveError(
            f"zip would expand to {total / 2**20:.0f} MiB; the limit is "
            f"{limits.max_total_bytes / 2**20:.0f} MiB (CXR_ZIP_MAX_UNCOMPRESSED_MB)"
        )
    size = max(Path(path).stat().st_size, 1)
    if total > _AGGREGATE_RATIO_FLOOR and total > limits.max_ratio * size:
        raise UnsafeArchiveError(
            f"zip of {size / 2**20:.1f} MiB would expand {total / size:.0f}-fold to "
            f"{total / 2**20:.0f} MiB across {len(infos)} members (limit {limits.max_ratio:g}, "
            "CXR_ZIP_MAX_RATIO): refusing a likely zip bomb"
        )
    return total


def extract_zip(path: Path, dest: Path, limits: ZipLimits) -> None:
    """Check then extract `path` into `dest` (created; must not exist yet).

    The sizes in the directory are not trusted: bytes are counted as they are written,
    and no member may write more than it declared nor the archive more than its checked
    total.

    Raises:
        UnsafeArchiveError: the archive fails a check, expands beyond its declared
            sizes, or a member is corrupt (bad CRC, broken deflate stream).
    """
    declared = check_zip(path, limits)
    budget = min(declared, limits.max_total_bytes)
    dest.mkdir(parents=True)
    root = dest.resolve()
    written = 0
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            rel = _safe_name(info.filename)
            target = (root / rel).resolve()
            if root not in target.parents and target != root:
                raise UnsafeArchiveError(
                    f"zip member {info.filename!r} resolves outside the export"
                )
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            remaining = info.file_size
            try:
                with zf.open(info) as src, target.open("wb") as out:
                    while chunk := src.read(1 << 20):
                        remaining -= len(chunk)
                        written += len(chunk)
                        if remaining < 0 or written > budget:
                            raise UnsafeArchiveError(
                                f"zip member {info.filename!r} expands beyond its declared size"
                            )
                        out.write(chunk)
            except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
                raise UnsafeArchiveError(
                    f"zip member {info.filename!r} is corrupt ({type(exc).__name__}: {exc})"
                ) from None


def remove_tree(path: Path) -> None:
    """Delete an extracted export."""
    shutil.rmtree(path, ignore_errors=True)
