"""Content-addressed storage."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import pytest

from app.storage import Storage, StorageKeyError


def test_storage_names_objects_by_content(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "s")
    key = storage.put_bytes(b"hello", ".png")
    assert key == hashlib.sha256(b"hello").hexdigest() + ".png"
    assert storage.put_bytes(b"hello", ".png") == key  # idempotent
    assert storage.get_bytes(key) == b"hello"
    assert storage.path(key).is_relative_to(storage.root)
    assert storage.put_stream(io.BytesIO(b"hello"), ".png") == key


@pytest.mark.parametrize("key", ["../../etc/passwd", "/etc/passwd", "abc.png", "a" * 64 + "/x"])
def test_storage_refuses_keys_it_never_made(tmp_path: Path, key: str) -> None:
    with pytest.raises(StorageKeyError):
        Storage(tmp_path).path(key)


def test_storage_missing_object_is_storage_key_error(tmp_path: Path) -> None:
    with pytest.raises(StorageKeyError, match="no stored object"):
        Storage(tmp_path).get_bytes("0" * 64)
