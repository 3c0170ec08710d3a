"""Text normalisation before sentence splitting and parsing, offsets kept.

`clean_text` replaces characters one for one, so a cleaned report has the
length of the original and its offsets index the original. `parse_text` may
also collapse runs of whitespace inside a sentence (a spaCy token of its own,
which breaks phrase patterns); it then returns an offset map. Mentions found
on normalised text always index the original report (issue 8, item 1; issue
7, item 8).

- `clean_text` (whole report): control characters, odd Unicode spaces and
  zero-width characters become spaces; CR/LF and lone CR become a newline.
- `parse_text` (one sentence): hard-wrapped line breaks become spaces, runs
  of whitespace one space,
  de-identification tokens (OpenI `XXXX`, MIMIC `[** ... **]`, `___`) become a
  run of `X` of the same length, and a sentence in ALL CAPS or all lower case
  gets the mixed case the parser was trained on.

Numbering and bullets are not rewritten: `labeler.sections.split_sentences`
cuts sentences around them.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["ParseText", "clean_text", "parse_text"]


class ParseText(NamedTuple):
    """A sentence as the parser reads it, and where its characters come from.

    `offsets` is None when `text` has the sentence's length (offsets are the
    same); otherwise `offsets[i]` is the sentence offset of `text[i]`, plus a
    last entry for the end.
    """

    text: str
    offsets: tuple[int, ...] | None = None

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Sentence offsets of the parse-text span [start, end)."""
        if self.offsets is None:
            return start, end
        return self.offsets[start], self.offsets[end - 1] + 1 if end > start else start


# C0/C1 controls (tab included: a tab inside a line is plain whitespace to a
# reader), Unicode spaces, zero-width characters and the BOM -> space. Line
# and paragraph separators -> newline. CR is handled apart (CRLF vs lone CR).
_SPACES = (
    [c for c in range(0x20) if c not in (0x0A, 0x0D)]
    + list(range(0x7F, 0xA1))
    + [0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000]
    + [0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x00AD]
)
_TABLE = {c: " " for c in _SPACES} | {c: "\n" for c in (0x0B, 0x0C, 0x85, 0x2028, 0x2029)}
_TABLE[0x0D] = "\n"
_NEEDS_CLEANING = re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(_TABLE)) + "]")

# de-identification tokens: MIMIC "[** Hospital 3 **]", MIMIC-CXR "___",
# OpenI "XXXX" (any case once a sentence is lower-cased)
_DEID = re.compile(r"\[\*\*.*?\*\*\]|_{2,}|(?<![A-Za-z])[Xx]{3,}(?![A-Za-z])")


def clean_text(text: str) -> str:
    """Replace control characters one for one, so offsets stay valid.

    Args:
        text: a report.

    Returns:
        `text` (the same object when nothing needs cleaning) with control
        characters, Unicode spaces and zero-width characters as spaces, and
        CR/LF as " \\n" (a lone CR as "\\n"). Same length as `text`.
    """
    if not _NEEDS_CLEANING.search(text):
        return text
    return text.replace("\r\n", " \n").translate(_TABLE)


_MULTI_SPACE = re.compile(r"\s{2,}")


def parse_text(sentence: str) -> ParseText:
    """The text the parser sees for one sentence.

    Args:
        sentence: one sentence of a cleaned report (see `clean_text`).

    Returns:
        The sentence with line breaks and runs of whitespace as one space,
        de-identification tokens as `X` runs, and, when it is in ALL CAPS or
        all lower case, lower-cased with a capital first letter (the parser is
        trained on mixed case); with its offset map when whitespace was collapsed.
    """
    text = _cased(sentence.replace("\n", " "))
    if "  " not in text:
        return ParseText(text)
    parts: list[str] = []
    offsets: list[int] = []
    pos = 0
    for m in _MULTI_SPACE.finditer(text):
        parts.append(text[pos : m.start()])
        offsets.extend(range(pos, m.start()))
        parts.append(" ")
        offsets.append(m.start())
        pos = m.end()
    parts.append(text[pos:])
    offsets.extend(range(pos, len(text)))
    offsets.append(len(text))
    return ParseText("".join(parts), tuple(offsets))


def _cased(s: str) -> str:
    if "[**" in s or "__" in s or "XXX" in s or "xxx" in s:
        s = _DEID.sub(lambda m: "X" * len(m.group()), s)
        probe = s.replace("X", "")
    else:
        probe = s
    if probe.isupper():
        s = _same_length(s, s.lower())
        s = _DEID.sub(lambda m: "X" * len(m.group()), s) if "xxx" in s else s
        return _capitalise(s)
    if probe.islower():
        return _capitalise(s)
    return s


def _same_length(original: str, changed: str) -> str:
    # str.lower() can change the length ("İ" -> "i̇"); then keep the original
    return changed if len(changed) == len(original) else original


def _capitalise(s: str) -> str:
    for i, ch in enumerate(s):
        if ch.isalpha():
            up = ch.upper()
            return s[:i] + up + s[i + 1 :] if len(up) == 1 else s
    return s
