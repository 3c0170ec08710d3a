"""Zip safety checks for uploaded exports."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest

from app.archive import ZipLimits, check_zip, extract_zip
from app.errors import UnsafeArchiveError

LIMITS = ZipLimits(max_total_bytes=10 * 2**20, max_ratio=100, max_members=10)


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def test_archive_extracts_a_clean_tree(tmp_path: Path) -> None:
    path = _zip(tmp_path / "ok.zip", {"a/b/IM1": b"1" * 100, "c.dcm": b"2"})
    extract_zip(path, tmp_path / "out", LIMITS)
    assert (tmp_path / "out/a/b/IM1").read_bytes() == b"1" * 100
    assert (tmp_path / "out/c.dcm").exists()


def test_archive_refuses_symlink_members(tmp_path: Path) -> None:
    path = tmp_path / "link.zip"
    with zipfile.ZipFile(path, "w") as zf:
        info = zipfile.ZipInfo("evil")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(UnsafeArchiveError, match="symbolic link"):
        check_zip(path, LIMITS)


def test_archive_refuses_too_many_members_and_too_much_data(tmp_path: Path) -> None:
    many = _zip(tmp_path / "many.zip", {f"f{i}": b"x" for i in range(11)})
    with pytest.raises(UnsafeArchiveError, match="members"):
        check_zip(many, LIMITS)
    big = _zip(tmp_path / "big.zip", {"a": os.urandom(11 * 2**20)})  # incompressible
    with pytest.raises(UnsafeArchiveError, match="MiB"):
        check_zip(big, LIMITS)


def test_archive_refuses_high_compression_ratio(tmp_path: Path) -> None:
    bomb = _zip(tmp_path / "bomb.zip", {"zeros": b"\0" * (5 * 2**20)})
    with pytest.raises(UnsafeArchiveError, match="zip bomb"):
        check_zip(bomb, LIMITS)


def test_archive_refuses_non_zip(tmp_path: Path) -> None:
    path = tmp_path / "x.zip"
    path.write_bytes(b"not a zip")
    with pytest.raises(UnsafeArchiveError, match="not a readable zip"):
        check_zip(path, LIMITS)
