"""Zip safety checks for uploaded exports."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pytest

from batch.archive import UnsafeArchiveError, ZipLimits, check_zip, extract_zip

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


@pytest.mark.issue(7)
def test_archive_refuses_many_members_each_under_the_ratio_threshold(tmp_path: Path) -> None:
    # Each member under 1 MiB skips the per-member ratio check; the archive as a whole
    # expands ~1000-fold (issue 7 item 6: 512 such members wrote 514 MB from 578 KB).
    limits = ZipLimits(max_total_bytes=2**30, max_ratio=200, max_members=1000)
    bomb = _zip(tmp_path / "bomb.zip", {f"IM{i:03d}": b"\0" * (2**20 - 1) for i in range(40)})
    with pytest.raises(UnsafeArchiveError, match="zip bomb"):
        check_zip(bomb, limits)
    assert not (tmp_path / "out").exists()


def _lie_about_sizes(path: Path, size: int) -> None:
    """Patch the uncompressed size in the local and central headers to `size`."""
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.find(signature)
        data[at + offset : at + offset + 4] = size.to_bytes(4, "little")
    path.write_bytes(bytes(data))


@pytest.mark.issue(7)
def test_archive_extraction_does_not_trust_declared_sizes(tmp_path: Path) -> None:
    path = _zip(tmp_path / "liar.zip", {"IM1": os.urandom(4096) * 64})  # 256 KiB
    _lie_about_sizes(path, 1000)  # declares 1000 bytes
    assert check_zip(path, LIMITS) == 1000
    # zipfile stops at the declared size and finds a bad CRC: that member's failure
    # (issue 18 item 16), with nothing beyond the declared size written.
    problems = extract_zip(path, tmp_path / "out", LIMITS)
    assert [(p.key, p.kind) for p in problems] == [("IM1", "invalid")]
    written = sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written <= 1000
