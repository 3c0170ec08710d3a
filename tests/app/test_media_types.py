"""One Content-Type parser for every route and middleware (app/media_types.py)."""

from __future__ import annotations

import pytest

from app.media_types import is_json, media_type

pytestmark = pytest.mark.issue(39)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("application/dicom", "application/dicom"),
        ("Multipart/Form-Data; boundary=abc", "multipart/form-data"),
        (b" application/json ; charset=utf-8", "application/json"),  # as an ASGI scope holds it
        ("", ""),
        (None, ""),
    ],
)
def test_media_type_is_the_lower_case_type_without_parameters(
    header: str | bytes | None, expected: str
) -> None:
    assert media_type(header) == expected


def test_is_json_takes_json_and_its_suffixed_types() -> None:
    assert is_json("application/json") and is_json("application/merge-patch+json")
    assert not is_json("text/plain") and not is_json("")
