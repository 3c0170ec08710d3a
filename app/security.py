"""API keys: `X-API-Key` header checked against SHA-256 hashes kept in memory.

`CXR_API_KEYS` holds one entry per comma. An entry `sha256:<64 hex digits>` (what
`cxr apikey` prints) is the SHA-256 of a key, so the clear key need not sit in a
config file; any other entry is a key in clear. Either way only hashes are kept by
the running service, and a presented key is compared against every hash in
constant time.

Entries that are almost certainly mistakes stop start-up instead of silently
opening or closing the API (issue 7 item 1: `sha256:<hex>` was once split on `:`
into two accepted "keys", `sha256` and the hex): an empty entry, a key shorter than
16 characters, a bare algorithm name, another algorithm's prefix, a malformed
digest, a bare 64-hex digest without its `sha256:` prefix, a digest inside other
characters ('"sha256:<hex>"' with its quotes, 'sha256 :<hex>'), or a key holding
whitespace or quotes.

An entry may carry a name, `NAME=sha256:<64 hex digits>` (`cxr apikey --name NAME`), which
the service records as who reviewed a worklist row; an unnamed key is known by the first
8 hex digits of its hash (`key-1a2b3c4d`), never by the key itself.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable

__all__ = [
    "MIN_KEY_CHARS",
    "ApiKeys",
    "InvalidApiKeyConfig",
    "generate_api_key",
    "hash_api_key",
    "parse_api_key_entry",
    "parse_named_entry",
    "split_api_keys",
]

MIN_KEY_CHARS = 16
_PREFIX = "sha256:"
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_QUOTES = frozenset("\"'`")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.@-]{0,63}")
# Names a hash could be written with by mistake (`sha512:...`, a bare `sha256`);
# hashlib's spelling and the variants people type (sha-256, sha3-512, sha3512).
_ALGORITHMS = frozenset(
    variant
    for name in hashlib.algorithms_available | {"sha1", "sha224", "sha384", "sha512", "md5"}
    for base in (name.lower(), name.lower().replace("_", "-"), name.lower().replace("_", ""))
    for variant in (base, re.sub(r"^([a-z]+)(\d)", r"\1-\2", base))
) | {"bcrypt", "scrypt", "argon2", "argon2id", "pbkdf2"}


class InvalidApiKeyConfig(ValueError):
    """A `CXR_API_KEYS` entry that cannot be a usable key; the message never echoes it."""


def hash_api_key(key: str) -> str:
    """The `sha256:<hex>` form of a key, as accepted in `CXR_API_KEYS`."""
    return _PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()


def generate_api_key() -> str:
    """A new random key (256 bits, URL-safe, 43 characters)."""
    return secrets.token_urlsafe(32)


def split_api_keys(value: str) -> list[str]:
    """Split a `CXR_API_KEYS` value into entries: one per comma, never on `:`.

    A value that is empty or only blanks means "no keys"; entries are stripped, and an
    empty entry inside a list (`k1,,k2`, a trailing comma) is kept so that
    `parse_api_key_entry` refuses it.
    """
    if not value.strip():
        return []
    return [part.strip() for part in value.split(",")]


def parse_api_key_entry(entry: str, position: int = 1) -> str:
    """The SHA-256 hex digest an entry stands for.

    Args:
        entry: one `CXR_API_KEYS` entry: `sha256:<64 hex>` or a key in clear.
        position: its 1-based position, named in error messages (the entry itself is not).

    Returns:
        64 lowercase hex digits.

    Raises:
        InvalidApiKeyConfig: empty, shorter than 16 characters, a bare algorithm name,
            another algorithm's prefix, a malformed digest, a bare 64-hex digest, a
            digest inside other characters, or whitespace or quotes in a key.
    """
    where = f"CXR_API_KEYS entry {position}"
    remedy = "make a key and its hash with `cxr apikey`"
    entry = entry.strip()
    if not entry:
        raise InvalidApiKeyConfig(f"{where} is empty (a stray comma?); {remedy}")
    head, sep, tail = entry.partition(":")
    if entry.lower() in _ALGORITHMS or (sep and not tail and head.lower() in _ALGORITHMS):
        raise InvalidApiKeyConfig(
            f"{where} is the bare algorithm name {head.lower()!r}, not a key or a hash; write "
            f"sha256:<64 hex digits> as one entry; {remedy}"
        )
    if sep and head.lower() == "sha256":
        if not _HEX64.fullmatch(tail):
            raise InvalidApiKeyConfig(
                f"{where}: a sha256: entry must be followed by exactly 64 hex digits "
                f"(got {len(tail)} characters); {remedy}"
            )
        return tail.lower()
    if sep and head.lower() in _ALGORITHMS:
        raise InvalidApiKeyConfig(
            f"{where} uses the {head.lower()!r} hash; only sha256:<64 hex digits> is "
            f"supported; {remedy}"
        )
    if _HEX64.search(entry) and not _HEX64.fullmatch(entry):
        # '"sha256:<hex>"' kept its quotes from an env file, 'sha256 :<hex>' or
        # 'sha256=<hex>' mistyped the prefix: as a clear key it would refuse the
        # real key and let in whoever reads the config.
        raise InvalidApiKeyConfig(
            f"{where} holds a 64-hex digest inside other characters (quotes, spaces or a "
            f"mistyped prefix?); write it exactly as sha256:<64 hex digits>; {remedy}"
        )
    if any(c.isspace() or c in _QUOTES for c in entry):
        raise InvalidApiKeyConfig(
            f"{where} contains whitespace or quote characters, which a client cannot send "
            f"reliably in X-API-Key (quotes kept from an env file?); {remedy}"
        )
    if _HEX64.fullmatch(entry):
        # Most likely a hash that lost its prefix; as a clear key it would let the
        # hash itself in. A key in clear of this shape must be given hashed.
        raise InvalidApiKeyConfig(
            f"{where} is 64 hex digits without the sha256: prefix: if it is a hash, write "
            "sha256:<hex>; if it is a key in clear, give its hash instead "
            "(sha256:$(printf %s KEY | sha256sum | cut -d' ' -f1))"
        )
    if len(entry) < MIN_KEY_CHARS:
        raise InvalidApiKeyConfig(
            f"{where} is {len(entry)} characters long; a key in clear needs at least "
            f"{MIN_KEY_CHARS}; {remedy}"
        )
    return hashlib.sha256(entry.encode("utf-8")).hexdigest()


def parse_named_entry(entry: str, position: int = 1) -> tuple[str, str]:
    """The name and SHA-256 hex digest of an entry, `NAME=sha256:<hex>` or unnamed.

    Only a hashed entry takes a name: a key in clear may itself hold `=` (base64 padding),
    so splitting it would change which key it is.

    Returns:
        (name, 64 lowercase hex digits); an unnamed entry's name is `key-<8 hex>`.

    Raises:
        InvalidApiKeyConfig: as `parse_api_key_entry`, or a name that is not a letter
            followed by at most 63 letters, digits or `_.@-`.
    """
    head, sep, tail = entry.strip().partition("=")
    # `CXR_API_KEYS=sha256:...` pasted whole is a mistake, not a key named CXR_API_KEYS
    if sep and tail.strip().lower().startswith(_PREFIX) and not head.upper().startswith("CXR_"):
        if not _NAME.fullmatch(head.strip()):
            raise InvalidApiKeyConfig(
                f"CXR_API_KEYS entry {position}: the name before '=' must be a letter followed "
                "by at most 63 letters, digits or _.@- (e.g. dr-smith=sha256:<64 hex digits>)"
            )
        return head.strip(), parse_api_key_entry(tail, position)
    digest = parse_api_key_entry(entry, position)
    return f"key-{digest[:8]}", digest


class ApiKeys:
    """The set of accepted keys, as SHA-256 digests, each with its name."""

    def __init__(self, configured: Iterable[str]) -> None:
        """Parse the configured entries.

        Raises:
            InvalidApiKeyConfig: on the first unusable entry (see `parse_named_entry`).
        """
        named = [parse_named_entry(entry, i) for i, entry in enumerate(configured, start=1)]
        self._hashes = tuple(bytes.fromhex(digest) for _, digest in named)
        self._names = tuple(name for name, _ in named)

    @property
    def enabled(self) -> bool:
        """Whether any key is configured (otherwise the API is open, on loopback only)."""
        return bool(self._hashes)

    def __len__(self) -> int:
        return len(self._hashes)

    def check(self, presented: str) -> bool:
        """Whether `presented` is one of the keys (constant-time comparison)."""
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        # Compare against every hash so timing does not reveal which one matched.
        matched = False
        for known in self._hashes:
            matched |= hmac.compare_digest(digest, known)
        return matched

    def name_of(self, presented: str) -> str | None:
        """The name of the key `presented` (constant time over the keys), None if unknown."""
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        found: str | None = None
        for known, name in zip(self._hashes, self._names, strict=True):
            if hmac.compare_digest(digest, known):
                found = name
        return found
