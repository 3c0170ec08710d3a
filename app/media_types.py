"""The media type of a Content-Type header, parsed one way for every route and middleware.

A route that parsed the header its own way could accept a body that the upload-size
middleware had measured against another limit; one parser keeps them in step.
"""

from __future__ import annotations

__all__ = ["is_json", "media_type"]


def media_type(content_type: str | bytes | None) -> str:
    """The media type of a Content-Type value: lower case, parameters dropped.

    Args:
        content_type: the header's value (bytes as an ASGI scope holds them, read as
            Latin-1), or None when the request has none.

    Returns:
        e.g. "multipart/form-data" for "Multipart/Form-Data; boundary=x"; "" for none.
    """
    if isinstance(content_type, bytes):
        content_type = content_type.decode("latin-1")
    return (content_type or "").split(";")[0].strip().lower()


def is_json(media: str) -> bool:
    """Whether a media type from `media_type` is JSON: application/json or a +json type
    (RFC 6839, e.g. application/merge-patch+json)."""
    return media == "application/json" or media.endswith("+json")
