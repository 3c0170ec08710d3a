"""Batch sources on local files: an export folder, and an uploaded zip extracted first."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from batch.archive import MemberProblem, ZipLimits, extract_zip, remove_tree
from batch.interfaces import BatchInputError, Source, SourceItem
from batch.scan import classify_file

__all__ = ["FolderSource", "ZipSource"]


class FolderSource(Source):
    """A PACS export folder (nested folders, files with or without .dcm, DICOMDIR, SR).

    Keys are paths relative to the folder, with "/" separators. Symbolic links are not
    followed out of the export: a linked file whose target lies outside `root` is
    `invalid`, linked folders are not entered (each is recorded as skipped: "symbolic
    link: not followed").

    Args:
        root: the export folder.
        exclude: files to leave out (e.g. the reports CSV when it sits in the export).
        file_timeout_s: give up reading one header after this long (None: no limit).
    """

    def __init__(
        self, root: Path, *, exclude: Sequence[Path] = (), file_timeout_s: float | None = None
    ) -> None:
        self.root = Path(root)
        self.exclude = tuple(Path(p) for p in exclude)
        self.file_timeout_s = file_timeout_s

    def scan(self) -> Iterator[SourceItem]:
        """Every file, classified, in sorted path order.

        Raises:
            BatchInputError: `root` is not a folder.
        """
        root = self.root
        if not root.is_dir():
            raise BatchInputError(f"{root}: not a folder (expected a PACS export directory)")
        real_root = root.resolve()
        skip = {p.resolve() for p in self.exclude}
        unreadable: list[OSError] = []
        for dirpath, dirnames, filenames in os.walk(
            root, followlinks=False, onerror=unreadable.append
        ):
            # A folder os.walk could not list is a failure of its own, not a silent gap.
            while unreadable:
                error = unreadable.pop(0)
                where = Path(str(error.filename or dirpath))
                yield SourceItem(
                    where.relative_to(root).as_posix() if where != root else ".",
                    "invalid",
                    note=f"folder cannot be read ({error.strerror or error})",
                )
            dirnames.sort()
            for dirname in [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
                # os.walk lists a linked folder but never enters it: say so, never follow.
                link = Path(dirpath) / dirname
                dirnames.remove(dirname)
                yield SourceItem(
                    link.relative_to(root).as_posix(), "ignored", note="symbolic link: not followed"
                )
            for filename in sorted(filenames):
                full = Path(dirpath) / filename
                key = full.relative_to(root).as_posix()
                try:
                    resolved = full.resolve()
                except (OSError, RuntimeError):  # a symbolic link loop
                    yield SourceItem(key, "invalid", note="symbolic link loop")
                    continue
                if resolved in skip:
                    continue
                if full.is_symlink() and real_root not in resolved.parents:
                    yield SourceItem(
                        key, "invalid", note="symbolic link pointing outside the export"
                    )
                    continue
                if not resolved.is_file():
                    yield SourceItem(key, "ignored", note="not a regular file")
                    continue
                yield classify_file(full, key, timeout_s=self.file_timeout_s)
        for error in unreadable:  # the root itself, or the last folder listed
            yield SourceItem(
                ".", "invalid", note=f"folder cannot be read ({error.strerror or error})"
            )

    def local_path(self, item: SourceItem) -> Path:
        """The file under the export folder."""
        return self.root / item.key


class ZipSource(FolderSource):
    """An uploaded zip, checked and extracted into `extract_dir`, then read as a folder.

    `prepare()` extracts once: a marker file records a finished extraction and the
    members left out of it, so a job resumed after a crash does not extract again (a
    half-finished one is redone). Members that could not be extracted (encrypted, a name
    too long, corrupt, a file named like a folder) are scanned as items of their own,
    failed or skipped with their reason, after the extracted files (issue 18 item 16).

    Args:
        archive: the zip file.
        extract_dir: where to extract (its parent holds the marker).
        limits: member count, total size and compression ratio caps.
        exclude: files to leave out of the scan.
        file_timeout_s: give up reading one header after this long (None: no limit).
    """

    def __init__(
        self,
        archive: Path,
        extract_dir: Path,
        limits: ZipLimits,
        *,
        exclude: Sequence[Path] = (),
        file_timeout_s: float | None = None,
    ) -> None:
        super().__init__(extract_dir, exclude=exclude, file_timeout_s=file_timeout_s)
        self.archive = Path(archive)
        self.limits = limits
        self._marker = self.root.parent / ".extracted"

    def prepare(self) -> list[MemberProblem]:
        """Extract the archive unless a previous run finished doing so.

        Returns:
            The members left out of the extraction, with their reasons.

        Raises:
            UnsafeArchiveError: the archive fails a safety check.
        """
        if self._marker.exists():
            return _read_marker(self._marker)
        remove_tree(self.root)  # a half-finished extraction from before a crash
        problems = extract_zip(self.archive, self.root, self.limits)
        self._marker.write_text(
            json.dumps([[p.key, p.kind, p.reason] for p in problems]), encoding="utf-8"
        )
        return problems

    def scan(self) -> Iterator[SourceItem]:
        """Extract if needed, then scan the extracted tree, then the members left out."""
        problems = self.prepare()
        yield from super().scan()
        for problem in problems:
            yield SourceItem(problem.key, problem.kind, note=problem.reason)


def _read_marker(marker: Path) -> list[MemberProblem]:
    text = marker.read_text(encoding="utf-8").strip()
    if not text:  # written by a version that recorded no problems
        return []
    return [MemberProblem(key, kind, reason) for key, kind, reason in json.loads(text)]
