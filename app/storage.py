"""Content-addressed file storage under one folder.

Every object is named by the SHA-256 of its bytes (`<hex><suffix>`), stored as
`<root>/objects/<hex[:2]>/<hex><suffix>`. Keys are validated against a strict
pattern before touching the file system, so a key taken from a URL or from the
database can never point outside the root.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import BinaryIO

__all__ = ["Storage", "StorageKeyError"]

_KEY = re.compile(r"^[0-9a-f]{64}(\.[a-z0-9]{1,8}){0,2}$")


class StorageKeyError(ValueError):
    """A storage key is malformed (never produced by `Storage`) or names no object."""


class Storage:
    """A content-addressed store rooted at `root` (created on first write)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()

    def path(self, key: str) -> Path:
        """The file for `key`.

        Raises:
            StorageKeyError: `key` is not a storage key.
        """
        if not _KEY.match(key):
            raise StorageKeyError(f"not a storage key: {key!r}")
        return self.root / "objects" / key[:2] / key

    def put_bytes(self, data: bytes, suffix: str = "") -> str:
        """Store `data`; return its key. Storing the same bytes twice is a no-op."""
        key = hashlib.sha256(data).hexdigest() + suffix
        target = self.path(key)
        if not target.exists():
            self._atomic_write(target, lambda f: f.write(data))
        return key

    def put_stream(self, stream: BinaryIO, suffix: str = "", chunk_size: int = 1 << 20) -> str:
        """Store a file-like object's bytes (read in chunks, hashed on the way); return its key."""
        self.tmp_dir().mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        fd, tmp = tempfile.mkstemp(dir=self.tmp_dir())
        try:
            with os.fdopen(fd, "wb") as out:
                while chunk := stream.read(chunk_size):
                    digest.update(chunk)
                    out.write(chunk)
            key = digest.hexdigest() + suffix
            target = self.path(key)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return key

    def get_bytes(self, key: str) -> bytes:
        """The bytes stored under `key`.

        Raises:
            StorageKeyError: no such object.
        """
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError:
            raise StorageKeyError(f"no stored object {key!r}") from None

    def exists(self, key: str) -> bool:
        """Whether an object is stored under `key`."""
        return self.path(key).exists()

    def delete(self, key: str) -> None:
        """Remove the object stored under `key` (nothing when there is none). The caller
        makes sure no row references it: the same bytes stored twice are one object.

        Raises:
            StorageKeyError: `key` is not a storage key.
        """
        self.path(key).unlink(missing_ok=True)

    def tmp_dir(self) -> Path:
        """Scratch folder inside the root (same file system, so renames are atomic)."""
        return self.root / "tmp"

    def job_dir(self, job_id: str) -> Path:
        """Working folder of a batch job (its extracted zip)."""
        if not re.fullmatch(r"[0-9a-f-]{36}", job_id):
            raise StorageKeyError(f"not a job id: {job_id!r}")
        return self.root / "jobs" / job_id

    def remove_job_dir(self, job_id: str) -> None:
        """Delete a job's working folder, if any."""
        shutil.rmtree(self.job_dir(job_id), ignore_errors=True)

    def _atomic_write(self, target: Path, write: object) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as out:
                write(out)  # type: ignore[operator]
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
