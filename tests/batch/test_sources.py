"""batch.sources: a folder export's symbolic link loop and unreadable folder each fail alone."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import batch.sources
from batch.sources import FolderSource


def _items(root: Path) -> dict[str, tuple[str, str | None]]:
    return {item.key: (item.kind, item.note) for item in FolderSource(root).scan()}


def test_a_symbolic_link_loop_fails_alone(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "loop").symlink_to("loop")
    items = _items(tmp_path)
    assert items["loop"] == ("invalid", "symbolic link loop")
    assert "notes.txt" in items


def test_an_unreadable_folder_is_a_failure_not_a_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    walk = os.walk

    def refusing(top: Any, onerror: Callable[[OSError], None], **kw: Any) -> Iterator[Any]:
        onerror(PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "locked")))
        yield from walk(top, onerror=onerror, **kw)

    monkeypatch.setattr(batch.sources.os, "walk", refusing)
    (tmp_path / "notes.txt").write_text("x")
    items = _items(tmp_path)
    assert items["locked"] == ("invalid", "folder cannot be read (Permission denied)")
