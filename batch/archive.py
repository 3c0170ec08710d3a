"""Safe zip extraction for uploaded PACS exports.

Refused before anything is written (the whole archive, 422 at upload): absolute names,
drive letters, `..` parts, control characters in names, two files with one name,
symbolic links, too many members, a declared total beyond the cap, members compressed
more than `max_ratio` times, archives that as a whole expand more than `max_ratio` times
(zip bombs reach ratios of 1000+; DICOM pixel data rarely compresses beyond 10:1), and
archives of which no file can be read. During extraction bytes are counted as they are
written, since the sizes in a zip's directory can lie.

One member's problem is that member's failure, never the whole job's (issue 18 item 16):
an encrypted member, a name too long for the file system, a file that shares its name
with a folder of the archive, or a corrupt member (bad CRC, broken deflate stream, a
compression method Python cannot read) is not extracted; `extract_zip` returns it as a
`MemberProblem` and the job records it with its reason, while the other members are
processed.
"""

from __future__ import annotations

import contextlib
import errno
import shutil
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from batch.interfaces import BatchInputError

__all__ = [
    "MAX_MEMBER_PATH_BYTES",
    "MAX_NAME_PART_BYTES",
    "MemberProblem",
    "ZipLimits",
    "check_zip",
    "extract_zip",
    "UnsafeArchiveError",
    "remove_tree",
]

# NAME_MAX of Linux, macOS and Windows file systems: one file or folder name, in bytes.
MAX_NAME_PART_BYTES = 255
# A whole member path, in bytes: well under PATH_MAX (4096) once under the storage folder.
MAX_MEMBER_PATH_BYTES = 1024


class UnsafeArchiveError(BatchInputError):
    """A zip with path traversal, links or suspicious compression (a zip bomb), or of which
    no file can be read; the service answers 422."""


@dataclass(frozen=True)
class ZipLimits:
    """Caps applied to uploaded archives."""

    max_total_bytes: int
    max_ratio: float
    max_members: int


@dataclass(frozen=True)
class MemberProblem:
    """A zip member that was not extracted, and why.

    Attributes:
        key: the member's path in the archive ("/" separators), as the job records it.
        kind: "invalid" (recorded as failed: encrypted, name too long, corrupt) or
            "ignored" (recorded as skipped: a file that shares its name with a folder).
        reason: one sentence for the job's result, naming the remedy.
    """

    key: str
    kind: str
    reason: str


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


def _short_name(name: str, limit: int = 80) -> str:
    return name if len(name) <= limit else name[: limit - 3] + "..."


def _member_problem(
    info: zipfile.ZipInfo, rel: PurePosixPath, folders: set[PurePosixPath]
) -> MemberProblem | None:
    """Why this file member cannot be extracted on its own, or None."""
    key = rel.as_posix()
    if not rel.parts:
        return MemberProblem(key or ".", "invalid", "zip member has an empty name: not extracted")
    longest = max(len(part.encode("utf-8", "surrogateescape")) for part in rel.parts)
    if longest > MAX_NAME_PART_BYTES:
        return MemberProblem(
            key,
            "invalid",
            f"zip member name has a part of {longest} bytes; the limit is "
            f"{MAX_NAME_PART_BYTES} bytes per file or folder name: not extracted. Rename it "
            "and upload it again",
        )
    total = len(key.encode("utf-8", "surrogateescape"))
    if total > MAX_MEMBER_PATH_BYTES:
        return MemberProblem(
            key,
            "invalid",
            f"zip member path is {total} bytes long; the limit is {MAX_MEMBER_PATH_BYTES}: "
            "not extracted. Move it to a shorter path and upload it again",
        )
    if info.flag_bits & 0x1:
        return MemberProblem(
            key,
            "invalid",
            "zip member is encrypted (password-protected): not read. Export the archive "
            "without a password",
        )
    if rel in folders:
        return MemberProblem(
            key,
            "ignored",
            "a folder of the same name is in the archive, and a file and a folder cannot "
            "share a name once extracted: this file is skipped",
        )
    return None


# Below this much data, compression ratios say little (a small text file compresses
# 50:1) and writing it costs nothing; above it the ratio checks apply.
_RATIO_FLOOR = 1 << 20
_AGGREGATE_RATIO_FLOOR = 16 << 20


@dataclass(frozen=True)
class _Plan:
    total: int  # declared uncompressed bytes of the members to extract
    problems: dict[str, MemberProblem]  # by ZipInfo.filename: members left out


def _plan(path: Path, infos: list[zipfile.ZipInfo], limits: ZipLimits) -> _Plan:
    if len(infos) > limits.max_members:
        raise UnsafeArchiveError(
            f"zip has {len(infos)} members; the limit is {limits.max_members} (CXR_ZIP_MAX_MEMBERS)"
        )
    names = [_safe_name(info.filename) for info in infos]
    # Every folder the archive makes: its explicit folder entries and every member's parents.
    folders: set[PurePosixPath] = set()
    for info, rel in zip(infos, names, strict=True):
        if info.is_dir() and rel.parts:
            folders.add(rel)
        folders.update(p for p in rel.parents if p.parts)
    total = 0
    files: set[PurePosixPath] = set()
    problems: dict[str, MemberProblem] = {}
    for info, rel in zip(infos, names, strict=True):
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise UnsafeArchiveError(f"zip member {info.filename!r} is a symbolic link; refusing")
        if info.is_dir():
            continue
        if rel in files:
            # Extracting both would keep only the last: a file lost without a word.
            raise UnsafeArchiveError(
                f"zip has two members named {info.filename!r}; refusing the archive "
                "(each file must have its own name)"
            )
        files.add(rel)
        if info.file_size > _RATIO_FLOOR and info.file_size > limits.max_ratio * max(
            info.compress_size, 1
        ):
            ratio = info.file_size / max(info.compress_size, 1)
            raise UnsafeArchiveError(
                f"zip member {info.filename!r} expands {ratio:.0f}-fold (limit "
                f"{limits.max_ratio:g}, CXR_ZIP_MAX_RATIO): refusing a likely zip bomb"
            )
        problem = _member_problem(info, rel, folders)
        if problem is not None:
            problems[info.filename] = problem
            continue
        total += info.file_size
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
    if files and len(problems) == len(files):
        first = next(iter(problems.values()))
        raise UnsafeArchiveError(
            f"none of the zip's {len(files)} files can be read, e.g. "
            f"{_short_name(first.key)!r}: {first.reason}"
        )
    return _Plan(total, problems)


def _read_directory(path: Path) -> list[zipfile.ZipInfo]:
    try:
        with zipfile.ZipFile(path) as zf:
            return zf.infolist()
    except Exception as exc:  # noqa: BLE001 - zipfile raises several kinds on a bad directory
        raise UnsafeArchiveError(
            f"upload is not a readable zip archive ({type(exc).__name__}: {exc})"
        ) from None


def check_zip(path: Path, limits: ZipLimits) -> int:
    """Validate an archive's directory without extracting it.

    Checks, in order: the member count; each member's name (no absolute paths, no `..`,
    no control characters, no two files with the same name) and type (no symbolic
    links); each member's compression ratio; the total uncompressed size; the
    archive-wide ratio (total uncompressed size over the archive's size), which catches
    bombs made of many members each under the per-member threshold (issue 7 item 6: 512
    members of 1 MiB zeros in 578 KB); and that at least one file can be extracted.
    Members that cannot be extracted on their own (encrypted, a name too long, a file
    named like a folder) do not refuse the archive: `extract_zip` leaves them out.

    Returns:
        The declared uncompressed size in bytes of the members to extract.

    Raises:
        UnsafeArchiveError: not a zip, or any check above fails.
    """
    return _plan(path, _read_directory(path), limits).total


def extract_zip(path: Path, dest: Path, limits: ZipLimits) -> list[MemberProblem]:
    """Check then extract `path` into `dest` (created; must not exist yet).

    The sizes in the directory are not trusted: bytes are counted as they are written,
    and no member may write more than it declared nor the archive more than its checked
    total.

    Returns:
        The members left out, each with its reason: encrypted, a name too long for the
        file system, a file named like a folder (see `check_zip`), or corrupt (bad CRC,
        broken deflate stream, unsupported compression method; its partial file removed).

    Raises:
        UnsafeArchiveError: the archive fails a check or expands beyond its declared sizes.
        OSError: the disk is full (or over quota); other file-system errors on one member
            are that member's problem.
    """
    infos = _read_directory(path)
    plan = _plan(path, infos, limits)
    budget = min(plan.total, limits.max_total_bytes)
    dest.mkdir(parents=True)
    root = dest.resolve()
    written = 0
    problems = list(plan.problems.values())
    with zipfile.ZipFile(path) as zf:
        for info in infos:
            if info.filename in plan.problems:
                continue
            rel = _safe_name(info.filename)
            target = (root / rel).resolve()
            if root not in target.parents and target != root:
                raise UnsafeArchiveError(
                    f"zip member {info.filename!r} resolves outside the export"
                )
            if info.is_dir():
                try:
                    target.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    _reraise_disk_full(exc)  # a folder's files fail one by one below
                continue
            remaining = info.file_size
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, target.open("wb") as out:
                    while chunk := src.read(1 << 20):
                        remaining -= len(chunk)
                        written += len(chunk)
                        if remaining < 0 or written > budget:
                            raise UnsafeArchiveError(
                                f"zip member {info.filename!r} expands beyond its declared size"
                            )
                        out.write(chunk)
            except (
                zipfile.BadZipFile,
                zlib.error,
                EOFError,
                NotImplementedError,
                RuntimeError,  # zipfile: "File ... is encrypted" (a flag bit we did not see)
            ) as exc:
                _remove_partial(target)
                problems.append(
                    MemberProblem(
                        rel.as_posix(),
                        "invalid",
                        f"zip member is corrupt or uses an unsupported compression "
                        f"({type(exc).__name__}: {exc}): not extracted. Re-create the archive",
                    )
                )
            except OSError as exc:
                _reraise_disk_full(exc)
                _remove_partial(target)
                problems.append(
                    MemberProblem(
                        rel.as_posix(),
                        "invalid",
                        f"zip member cannot be written ({exc.strerror or type(exc).__name__}): "
                        "not extracted. Rename it and upload it again",
                    )
                )
    return sorted(problems, key=lambda p: p.key)


def _remove_partial(target: Path) -> None:
    with contextlib.suppress(OSError):
        target.unlink(missing_ok=True)


def _reraise_disk_full(exc: OSError) -> None:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        raise exc


def remove_tree(path: Path) -> None:
    """Delete an extracted export."""
    shutil.rmtree(path, ignore_errors=True)
