"""API keys: `X-API-Key` header checked against SHA-256 hashes kept in memory.

Keys may be configured in clear (`CXR_API_KEYS=k1,k2`) or already hashed
(`CXR_API_KEYS=sha256:<hex>`) so the clear key need not sit in a config file;
either way only hashes are kept by the running service.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable

__all__ = ["ApiKeys", "generate_api_key", "hash_api_key"]

_PREFIX = "sha256:"


def hash_api_key(key: str) -> str:
    """The `sha256:<hex>` form of a key, as accepted in `CXR_API_KEYS`."""
    return _PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()


def generate_api_key() -> str:
    """A new random key (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


class ApiKeys:
    """The set of accepted keys, as hashes."""

    def __init__(self, configured: Iterable[str]) -> None:
        hashes: list[str] = []
        for entry in configured:
            entry = entry.strip()
            if not entry:
                continue
            if entry.startswith(_PREFIX):
                digest = entry[len(_PREFIX) :].lower()
                if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                    raise ValueError(
                        f"CXR_API_KEYS entry {entry[:16]}...: expected sha256: followed by "
                        "64 hex digits (make one with `cxr apikey`)"
                    )
                hashes.append(digest)
            else:
                hashes.append(hash_api_key(entry)[len(_PREFIX) :])
        self._hashes = tuple(hashes)

    @property
    def enabled(self) -> bool:
        """Whether any key is configured (otherwise the API is open, on loopback only)."""
        return bool(self._hashes)

    def check(self, presented: str) -> bool:
        """Whether `presented` is one of the keys (constant-time comparison)."""
        digest = hashlib.sha256(presented.encode("utf-8")).hexdigest()
        # Compare against every hash so timing does not reveal which one matched.
        matched = False
        for known in self._hashes:
            matched |= hmac.compare_digest(digest, known)
        return matched
