"""API keys are kept as hashes and compared in constant time."""

from __future__ import annotations

import pytest

from app.security import ApiKeys, generate_api_key, hash_api_key


def test_security_accepts_clear_and_hashed_keys() -> None:
    key = generate_api_key()
    keys = ApiKeys(["plain-key", hash_api_key(key)])
    assert keys.enabled
    assert keys.check("plain-key") and keys.check(key)
    assert not keys.check("plain-key ") and not keys.check("")
    assert "plain-key" not in repr(vars(keys))  # only hashes are kept


def test_security_no_keys_means_disabled() -> None:
    assert not ApiKeys([]).enabled
    assert not ApiKeys(["", "  "]).enabled


def test_security_rejects_malformed_hash() -> None:
    with pytest.raises(ValueError, match="64 hex digits"):
        ApiKeys(["sha256:1234"])
