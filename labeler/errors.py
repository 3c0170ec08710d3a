"""Exceptions raised by the labeler.

Every error is a `LabelerError` (a `ValueError`), so callers catch one class;
the subclasses say which input was wrong.
"""

from __future__ import annotations

__all__ = [
    "EmptyReportError",
    "InputError",
    "LabelerError",
    "NotTextError",
    "PatternFileError",
    "ReportTooLongError",
]


class LabelerError(ValueError):
    """Base class of every labeler error."""


class EmptyReportError(LabelerError):
    """The report text is empty or only whitespace."""


class NotTextError(LabelerError):
    """The report is not a `str` (None, bytes, a number...)."""


class ReportTooLongError(LabelerError):
    """The report is longer than `LabelerConfig.max_chars`."""


class PatternFileError(LabelerError):
    """A pattern file (concepts, rules, sections) is missing or malformed."""


class InputError(LabelerError):
    """An input file cannot be read as a whole (missing file, missing column, bad value)."""
