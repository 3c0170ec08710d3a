"""Text normalisation before sentence splitting and parsing, offsets kept.

`clean_text` replaces characters one for one, so a cleaned report has the
length of the original and its offsets index the original. `parse_text` may
also collapse runs of whitespace inside a sentence (a spaCy token of its own,
which breaks phrase patterns); it then returns an offset map. Mentions found
on normalised text always index the original report (issue 8, item 1; issue
7, item 8).

- `clean_text` (whole report): control characters and odd Unicode spaces
  become spaces; CR/LF and lone CR become a newline. Compatibility forms
  (fullwidth "Ｎｏ", mathematical bold) become their ASCII letter, and look-alike
  letters of other scripts inside Latin words (a Cyrillic "о" in "No") their
  Latin twin (`patterns/confusables.v1.yaml`). Inside a run of more than
  `MAX_WORD_CHARS` characters without whitespace, punctuation becomes spaces:
  no report word is that long, and spaCy's tokenizer strips affixes one at a
  time, in time quadratic in the run's length (`")" * 20000` took 63 s).
- `parse_text` (one sentence): invisible format characters (soft hyphen,
  zero-width space and joiners, bidirectional marks and isolates, variation
  selectors) are removed, so a word split by one is whole again; hard-wrapped
  line breaks become spaces, runs of whitespace one space, a comma or
  semicolon glued between a number and a word ("2,No") is followed by a space,
  de-identification tokens (OpenI `XXXX`, MIMIC `[** ... **]`, `___`) become a
  run of `X` of the same length, and a sentence in ALL CAPS or all lower case
  gets the mixed case the parser was trained on.

Numbering and bullets are not rewritten: `labeler.sections.split_sentences`
cuts sentences around them.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import yaml

from labeler.errors import PatternFileError

__all__ = ["MAX_WORD_CHARS", "ParseText", "clean_text", "is_invisible", "parse_text"]

#: Longest run without whitespace kept as it is (the longest word in 3,080 OpenI reports
#: has 34 characters); longer runs have their punctuation turned into spaces.
MAX_WORD_CHARS = 64


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
# reader) and Unicode spaces -> space. Line and paragraph separators -> newline.
# CR is handled apart (CRLF vs lone CR). Zero-width and other invisible
# characters are kept here and removed by `parse_text`: as spaces they split the
# word they sit in ("pneu\u00admothorax").
_SPACES = (
    [c for c in range(0x20) if c not in (0x0A, 0x0D)]
    + list(range(0x7F, 0xA0))
    + [0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000]
)
_TABLE = {c: " " for c in _SPACES} | {c: "\n" for c in (0x0B, 0x0C, 0x85, 0x2028, 0x2029)}
_TABLE[0x0D] = "\n"
_NEEDS_CLEANING = re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(_TABLE)) + "]")

# de-identification tokens: MIMIC "[** Hospital 3 **]", MIMIC-CXR "___",
# OpenI "XXXX" (any case once a sentence is lower-cased)
_DEID = re.compile(r"\[\*\*.*?\*\*\]|_{2,}|(?<![A-Za-z])[Xx]{3,}(?![A-Za-z])")


_LONG_RUN = re.compile(rf"\S{{{MAX_WORD_CHARS + 1},}}")
_PUNCTUATION = re.compile(r"[^\w]|_")


def clean_text(text: str) -> str:
    """Replace characters one for one, so offsets stay valid.

    Args:
        text: a report.

    Returns:
        `text` (the same object when nothing needs cleaning) with control
        characters and Unicode spaces as spaces, CR/LF as " \\n" (a lone CR as
        "\\n"), compatibility and look-alike letters as ASCII letters, and the
        punctuation of runs longer than `MAX_WORD_CHARS` without whitespace as
        spaces. Same length as `text`.
    """
    if _NEEDS_CLEANING.search(text):
        text = text.replace("\r\n", " \n").translate(_TABLE)
    if not text.isascii():
        text = _latin_letters(text)
    if _LONG_RUN.search(text):
        text = _LONG_RUN.sub(lambda m: _PUNCTUATION.sub(" ", m.group()), text)
    return text


# --- letters that read as ASCII ------------------------------------------------------

_CONFUSABLES_FILE = Path(__file__).resolve().parent / "patterns" / "confusables.v1.yaml"
# Cf: soft hyphen, zero-width space/joiners, word joiner, bidi marks, embeddings and
# isolates, BOM; plus the variation selectors and the combining grapheme joiner, which
# are marks (Mn) but render as nothing after a letter.
_INVISIBLE_MARKS = frozenset(
    [0x034F, 0x180B, 0x180C, 0x180D, 0x180F, *range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)]
)


@functools.lru_cache(maxsize=8192)
def is_invisible(ch: str) -> bool:
    """True for a character that renders as nothing (format characters, variation selectors)."""
    return unicodedata.category(ch) == "Cf" or ord(ch) in _INVISIBLE_MARKS


@functools.lru_cache(maxsize=1)
def _confusables() -> dict[str, str]:
    try:
        data = yaml.safe_load(_CONFUSABLES_FILE.read_text(encoding="utf-8"))
        letters = {str(k): str(v) for k, v in data["letters"].items()}
    except (OSError, yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
        raise PatternFileError(f"{_CONFUSABLES_FILE.name}: {exc}") from None
    bad = [k for k, v in letters.items() if len(k) != 1 or len(v) != 1 or not v.isascii()]
    if bad:
        raise PatternFileError(
            f"{_CONFUSABLES_FILE.name}: not one letter to one ASCII letter: {bad}"
        )
    return letters


@functools.lru_cache(maxsize=8192)
def _compatibility_ascii(ch: str) -> str:
    """The ASCII letter or digit NFKC makes of `ch` ("Ｎ", "𝐍" -> "N"), else `ch`."""
    folded = unicodedata.normalize("NFKC", ch)
    return folded if len(folded) == 1 and folded.isascii() and folded.isalnum() else ch


_NON_ASCII_WORD = re.compile(r"\w*[^\x00-\x7f]\w*")


def _latin_letters(text: str) -> str:
    """Compatibility forms and, inside Latin words, look-alike letters as ASCII."""
    out = "".join(c if c.isascii() else _compatibility_ascii(c) for c in text)
    look_alike = _confusables()
    if not any(c in look_alike for c in out):
        return out
    letters = [c for c in out if c.isalpha()]
    latin = sum(c.isascii() for c in letters)
    if latin * 2 < len(letters):
        return out  # a report mostly in another script: its letters are its own

    def fix(m: re.Match[str]) -> str:
        word = m.group()
        if all(c.isascii() or c in look_alike or not c.isalpha() for c in word):
            return "".join(look_alike.get(c, c) for c in word)
        return word

    return _NON_ASCII_WORD.sub(fix, out)


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
    text = sentence.replace("\n", " ")
    offsets: list[int] | None = None  # offsets[i]: the sentence offset of text[i]
    if not text.isascii() and any(is_invisible(c) for c in text):
        offsets = [i for i, c in enumerate(text) if not is_invisible(c)]
        text = "".join(text[i] for i in offsets)
    if _GLUED.search(text):
        text, offsets = _rewrite(text, offsets, _GLUED, lambda m: m.group() + " ")
    text = _cased(text)
    if "  " in text:
        text, offsets = _rewrite(text, offsets, _MULTI_SPACE, lambda m: " ")
    if offsets is None:
        return ParseText(text)
    return ParseText(text, (*offsets, len(sentence)))


# A comma or semicolon glued between a number and a word: list numbers typed with a comma
# ("2,No pleural effusion") or a missing space ("T11,T12"). The tokenizer keeps "2,No" one
# token, and the negation cue inside it goes unseen; a space after the mark splits them.
_GLUED = re.compile(r"(?<=\d)[,;](?=[A-Za-z])")


def _rewrite(
    text: str,
    offsets: list[int] | None,
    pattern: re.Pattern[str],
    replace: Callable[[re.Match[str]], str],
) -> tuple[str, list[int]]:
    """`pattern.sub(replace, text)` and the offset map carried through it: the characters
    of a replacement map to the matched characters, in order (the last one repeated)."""
    before = offsets if offsets is not None else list(range(len(text)))
    parts: list[str] = []
    after: list[int] = []
    pos = 0
    for m in pattern.finditer(text):
        parts.append(text[pos : m.start()])
        after.extend(before[pos : m.start()])
        new = replace(m)
        parts.append(new)
        last = max(m.start(), m.end() - 1)
        after.extend(before[min(m.start() + k, last)] for k in range(len(new)))
        pos = m.end()
    parts.append(text[pos:])
    after.extend(before[pos:])
    return "".join(parts), after


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
