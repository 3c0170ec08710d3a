"""Untrusted text made safe for one line of a log or of a command's output."""

from __future__ import annotations

__all__ = ["one_line"]


def one_line(text: str, limit: int | None = None) -> str:
    """`text` for one line of a log or of output: control characters escaped, so a newline
    or a terminal escape in a file name or a peer's value can neither split nor forge
    lines; cut to `limit` characters (the full length noted) when given."""
    cut = text if limit is None else text[:limit]
    out = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in cut)
    if limit is not None and len(text) > limit:
        out += f"... ({len(text):,} characters)"
    return out
