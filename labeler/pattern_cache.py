"""The parsed data of each packaged pattern file, and data built from it, kept beside it as
Python keeps bytecode.

Parsing YAML is most of the cost of loading a large pattern file: the chest lexicon's
150 KB take 0.05 s at every `cxr label --findings`, the same data as JSON 1 ms. The data is
stored in the `__pycache__` folder beside the file (`lexicon.v1.yaml.json`), keyed by the
SHA-256 of the file's text and the PyYAML version that parsed it. Data built from a file
(`cached`) is kept the same way under a key of its builder's: the lexicon's phrase trie
(`labeler.findings.PhraseIndex`, 0.05 s to build, 0.015 s to read) beside the lexicon.

It is only a cache. A missing, stale, unreadable or corrupt copy is parsed again from the
YAML (and replaced); where the folder cannot be written (a read-only install) nothing is
stored and the YAML is parsed each time. Unlike bytecode it is written under
PYTHONDONTWRITEBYTECODE too: it is data, and a library reads no environment variables. Data
that JSON would not give back equal (dates, keys that are not strings) is not stored. JSON,
not pickle: a cache file must not be able to run code.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

__all__ = ["cache_path", "cached", "load_cached"]

#: Bumped when what is stored changes.
_FORMAT = 1


def cache_path(path: Path, what: str = "") -> Path:
    """Where the parsed data of the pattern file `path` is kept, or with `what` ("phrases")
    the data of that name built from it."""
    return path.parent / "__pycache__" / f"{path.name}{'.' if what else ''}{what}.json"


def load_cached(path: Path, text: str, parse: Callable[[str], Any]) -> Any:
    """`parse(text)`, from the cache beside `path` when it holds this text's data.

    Args:
        path: the pattern file (its folder holds the cache).
        text: the file's text, as read now.
        parse: the parser (`yaml.load` with a safe loader); its errors propagate and
            nothing is stored.

    Returns:
        The parsed data: a fresh object on every call.
    """
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return cached(cache_path(path), f"{yaml.__version__}:{digest}", lambda: parse(text))


def cached(cache: Path, key: str, build: Callable[[], Any]) -> Any:
    """`build()`, from the JSON file `cache` when it holds the data stored under `key`.

    Args:
        cache: the cache file (`cache_path`).
        key: what the data depends on, hashed, such that another key means other data.
        build: makes the data; its errors propagate and nothing is stored.

    Returns:
        The data: a fresh object on every call.
    """
    key = f"{_FORMAT}:{key}"
    try:
        stored = json.loads(cache.read_text(encoding="utf-8"))
        if isinstance(stored, dict) and stored.get("key") == key and "data" in stored:
            return stored["data"]
    except (OSError, ValueError, RecursionError):
        pass  # none yet, or unreadable: build it
    data = build()
    _store(cache, key, data)
    return data


def _store(cache: Path, key: str, data: Any) -> None:
    tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
    try:
        body = json.dumps({"key": key, "data": data}, ensure_ascii=False, allow_nan=False)
        if json.loads(body)["data"] != data:
            return  # JSON would not give it back as it is
        cache.parent.mkdir(exist_ok=True)
        tmp.write_text(body, encoding="utf-8")
        os.replace(tmp, cache)  # whole or not at all, whoever reads it meanwhile
    except (OSError, TypeError, ValueError, RecursionError):
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
