"""The parsed data of packaged pattern files, and data built from them, cached beside them
(`labeler.pattern_cache`)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from labeler import vocabulary
from labeler.pattern_cache import cache_path, cached, load_cached

pytestmark = pytest.mark.issue(40)

TEXT = "version: 1\nconcepts:\n  - {id: a, phrases: [pleural effusion, 'no']}\n"


def _parse(text: str) -> Any:
    return yaml.safe_load(text)


def _refuse(text: str) -> Any:
    raise AssertionError("parsed although the cache holds this text")


def _file(tmp_path: Path, text: str = TEXT) -> Path:
    path = tmp_path / "set.v1.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_data_is_stored_and_read_back_without_parsing(tmp_path: Path) -> None:
    path = _file(tmp_path)
    first = load_cached(path, TEXT, _parse)
    assert first == _parse(TEXT) and cache_path(path).is_file()
    again = load_cached(path, TEXT, _refuse)
    assert again == first and again is not first  # a fresh object each time


def test_a_changed_file_is_parsed_again_and_replaces_the_copy(tmp_path: Path) -> None:
    path = _file(tmp_path)
    load_cached(path, TEXT, _parse)
    changed = TEXT.replace("pleural effusion", "pneumothorax")
    assert load_cached(path, changed, _parse)["concepts"][0]["phrases"][0] == "pneumothorax"
    assert load_cached(path, changed, _refuse) == _parse(changed)


@pytest.mark.parametrize(
    "stored",
    [b"\x00\xff not json", b'{"key": "1:x:y", "data": {}}', b"[1, 2]", b'{"key": null}', b""],
)
def test_a_corrupt_or_foreign_copy_is_parsed_again(tmp_path: Path, stored: bytes) -> None:
    path = _file(tmp_path)
    cache_path(path).parent.mkdir()
    cache_path(path).write_bytes(stored)
    assert load_cached(path, TEXT, _parse) == _parse(TEXT)
    assert load_cached(path, TEXT, _refuse) == _parse(TEXT)  # and was replaced


def test_an_unwritable_folder_stores_nothing_and_still_reads(tmp_path: Path) -> None:
    path = _file(tmp_path)
    (tmp_path / "__pycache__").write_text("a file where the folder would be")
    assert load_cached(path, TEXT, _parse) == _parse(TEXT)
    assert load_cached(path, TEXT, _parse) == _parse(TEXT)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["__pycache__", "set.v1.yaml"]


def test_data_json_would_change_is_not_stored(tmp_path: Path) -> None:
    text = "when: 2024-01-02\n1: one\n"
    path = _file(tmp_path, text)
    data = load_cached(path, text, _parse)
    assert data == {"when": datetime.date(2024, 1, 2), 1: "one"}
    assert not cache_path(path).exists()


def test_a_parse_error_propagates_and_stores_nothing(tmp_path: Path) -> None:
    path = _file(tmp_path, "a: [unclosed")
    with pytest.raises(yaml.YAMLError):
        load_cached(path, "a: [unclosed", _parse)
    assert not cache_path(path).exists()


def test_packaged_files_use_the_cache_and_paths_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vocabulary, "_PATTERN_DIR", tmp_path)
    _file(tmp_path)
    name, data = vocabulary.read_pattern_file("set.v1")
    assert (name, data) == ("set.v1", _parse(TEXT))
    stored = json.loads(cache_path(tmp_path / "set.v1.yaml").read_text(encoding="utf-8"))
    assert stored["data"] == data
    # a file named by path is the user's: nothing is written beside it
    user = tmp_path / "mine" / "set.yaml"
    user.parent.mkdir()
    user.write_text(TEXT, encoding="utf-8")
    assert vocabulary.read_pattern_file(str(user))[1] == data
    assert sorted(p.name for p in user.parent.iterdir()) == ["set.yaml"]


BUILT = {"a": {"b": {"": "x"}}, "c": {"": "y"}}


def _build() -> Any:
    return json.loads(json.dumps(BUILT))


def _refuse_build() -> Any:
    raise AssertionError("built although the cache holds this key")


def test_built_data_is_stored_beside_the_file_and_read_back(tmp_path: Path) -> None:
    cache = cache_path(tmp_path / "set.v1.yaml", "trie")
    assert cache == tmp_path / "__pycache__" / "set.v1.yaml.trie.json"
    assert cached(cache, "k1", _build) == BUILT and cache.is_file()
    again = cached(cache, "k1", _refuse_build)
    assert again == BUILT and again is not cached(cache, "k1", _refuse_build)


def test_built_data_under_another_key_is_built_again_and_replaces_the_copy(
    tmp_path: Path,
) -> None:
    cache = cache_path(tmp_path / "set.v1.yaml", "trie")
    cached(cache, "k1", _build)
    assert cached(cache, "k2", lambda: {"other": 1}) == {"other": 1}
    assert cached(cache, "k2", _refuse_build) == {"other": 1}
    assert cached(cache, "k1", _build) == BUILT  # the old key's copy is gone


@pytest.mark.parametrize(
    "stored", [b"\x00\xff not json", b'{"key": "1:k1"}', b'{"key": "1:k1", "data"', b""]
)
def test_a_corrupt_copy_of_built_data_is_built_again(tmp_path: Path, stored: bytes) -> None:
    cache = cache_path(tmp_path / "set.v1.yaml", "trie")
    cache.parent.mkdir()
    cache.write_bytes(stored)
    assert cached(cache, "k1", _build) == BUILT
    assert cached(cache, "k1", _refuse_build) == BUILT  # and was replaced


def test_built_data_in_an_unwritable_folder_is_built_each_time(tmp_path: Path) -> None:
    (tmp_path / "__pycache__").write_text("a file where the folder would be")
    cache = cache_path(tmp_path / "set.v1.yaml", "trie")
    calls = []

    def build() -> Any:
        calls.append(1)
        return _build()

    assert cached(cache, "k1", build) == BUILT
    assert cached(cache, "k1", build) == BUILT
    assert len(calls) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["__pycache__"]


def test_a_build_error_propagates_and_stores_nothing(tmp_path: Path) -> None:
    cache = cache_path(tmp_path / "set.v1.yaml", "trie")
    with pytest.raises(ZeroDivisionError):
        cached(cache, "k1", lambda: 1 / 0)
    assert not cache.exists()
