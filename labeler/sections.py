"""Split a report into sections and sentences, as character spans of the original text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

from labeler.vocabulary import SectionSet

__all__ = ["Section", "find_sections", "labelled_spans", "split_sentences"]


@dataclass(frozen=True)
class Section:
    """A section body: `text[start:end]`, its canonical name (None before the first header)."""

    name: str | None
    start: int
    end: int
    header_start: int


_CACHE: dict[str, re.Pattern[str]] = {}


def _header_regex(sections: SectionSet) -> re.Pattern[str]:
    key = sections.name
    if key not in _CACHE:
        variants = sorted(
            {v for vals in sections.headers.values() for v in vals}, key=len, reverse=True
        )
        alt = _alternatives([r"\s+".join(map(re.escape, v.split())) for v in variants])
        # A header is (a) at a line start, followed by a colon or by the end of
        # its line, or (b) after a sentence end or line start, followed by a colon.
        _CACHE[key] = re.compile(
            rf"(?:^|(?<=\n))[ \t]*(?P<h1>{alt})[ \t]*(?::|(?=\r?\n|$))"
            rf"|(?:(?<=[.!?])\s+|^)(?P<h2>{alt})[ \t]*:",
            re.IGNORECASE,
        )
    return _CACHE[key]


def _alternatives(patterns: list[str]) -> str:
    """`"|".join(patterns)` with the patterns grouped by their first character, each group
    in the given order: a sentence start ("There is ...") is tried against the few header
    variants of its letter, not all 58 (a third of the sectioning time).

    The same matches: case ignored, no character matches two ASCII characters, so only the
    patterns of one group can match at a place, in their order. A pattern that starts with
    anything else (an escape, a character that is not ASCII) leaves the list as it is.
    """
    groups: dict[str, list[str]] = {}
    for p in patterns:
        first = p[:1]
        if not first.isascii() or not first.isalnum():
            return "|".join(patterns)
        groups.setdefault(first.lower(), []).append(p[1:])
    return "|".join(f"{first}(?:{'|'.join(rest)})" for first, rest in groups.items())


_LOOKUPS: dict[str, dict[str, str]] = {}


def _lookup(sections: SectionSet) -> dict[str, str]:
    """Each header variant's canonical name."""
    key = sections.name
    if key not in _LOOKUPS:
        _LOOKUPS[key] = {v: name for name, vals in sections.headers.items() for v in vals}
    return _LOOKUPS[key]


# where a header may start: the text's start, or after a line break or a sentence end
_HEADER_STARTS = re.compile(r"[\n.!?]")


def _headers(text: str, header: re.Pattern[str]) -> Iterator[re.Match[str]]:
    """`header.finditer(text)`, trying only where a match may start.

    Each alternative of the header pattern starts at the text's start, after a line
    break or after ".", "!" or "?"; trying those few positions, leftmost first, finds
    the same matches as trying every character (a third of the sectioning time).
    """
    pos = 0  # where the next match may start: after the last one
    for start in chain((0,), (m.end() for m in _HEADER_STARTS.finditer(text))):
        if start < pos:
            continue
        m = header.match(text, start)
        if m is not None:
            yield m
            pos = m.end()


def find_sections(text: str, sections: SectionSet) -> list[Section]:
    """Find the sections of a report.

    Args:
        text: the report.
        sections: header variants (`load_sections()`).

    Returns:
        Sections in text order; text before the first header is a section named None.
    """
    lookup = _lookup(sections)
    out: list[Section] = []
    cursor, name, header_start = 0, None, 0
    for m in _headers(text, _header_regex(sections)):
        header = m.group("h1") or m.group("h2")
        canonical = lookup[" ".join(header.lower().split())]
        if m.start() > cursor or name is not None:
            out.append(Section(name, cursor, m.start(), header_start))
        name, cursor, header_start = canonical, m.end(), m.start()
    out.append(Section(name, cursor, len(text), header_start))
    return [
        part
        for s in out
        for part in _split_trailing_body(text, s, sections)
        if part.name is not None or text[part.start : part.end].strip()
    ]


def _split_trailing_body(text: str, s: Section, sections: SectionSet) -> list[Section]:
    """Let an INDICATION/COMPARISON/... section end with its first line of content.

    Reports without a FINDINGS header often put the body right after a
    one-line "COMPARISON: None." section; that body must not inherit a
    never-labelled section. A header alone on its line keeps the paragraph
    below it (up to a blank line).
    """
    if s.name not in sections.never_label:
        return [s]
    body = text[s.start : s.end]
    content = len(body) - len(body.lstrip())
    if content == len(body):
        return [s]
    same_line = "\n" not in body[:content]
    stop = body.find("\n", content) if same_line else body.find("\n\n", content)
    if stop < 0:
        return [s]
    cut = s.start + stop
    return [Section(s.name, s.start, cut, s.header_start), Section(None, cut, s.end, cut)]


def labelled_spans(text: str, sections: SectionSet, *, use_sections: bool = True) -> list[Section]:
    """The sections to label: FINDINGS and IMPRESSION, else all but INDICATION/HISTORY/...

    Args:
        text: the report.
        sections: header variants.
        use_sections: when False, the whole text is one span.

    Returns:
        The sections whose text is labelled, in text order.
    """
    if not use_sections:
        return [Section(None, 0, len(text), 0)]
    found = find_sections(text, sections)
    chosen = [s for s in found if s.name in sections.label_sections]
    if chosen:
        return chosen
    return [s for s in found if s.name not in sections.never_label]


# A sentence ends at . ! ? followed by whitespace (not "1.5 cm"), at a
# semicolon (a clause boundary: "no effusion; mild atelectasis"), at a blank
# line, and where a list item starts. Typed reports also drop the space after
# a period ("effusion.No", "effusion.2.No pneumothorax"; issue 8), before a
# list marker ("edema.b)Small", "resolved.2-The") or glue an item's number to
# the last word of the item before ("Small effusion2.No pneumothorax").
_BULLETS = "*\u2022\u00b7\u2023\u25e6\u25aa\u25cf"
_MARKER = (
    rf"(?:[-\u2010-\u2015{_BULLETS}>]+"  # bullets and dashes
    r"|\(?\d{1,2}[.):](?!\d)|\(\d{1,2}\)|#\d{1,2}[.):]?"  # 1.  2)  (3)  3:  #4
    r"|\(?[a-hA-H][.)](?![A-Za-z]\.)|\(?(?:i{1,3}|iv|vi{0,3}|ix|I{1,3}|IV|VI{0,3}|IX)[.)]"
    r"|\d{1,2}[ \t]*[-\u2013\u2014][ \t]|\d{1,2}-(?=[A-Za-z]))"  # 1 - item, 1-item
)
# A list marker glued to the sentence end before it, followed by its text.
# Letter markers need a word (2+ letters) before the period: "e.g." and
# "i.e." are not lists. Numbers must not go on with a digit ("4.5", "1.2-cm").
_GLUED_MARKER = (
    r"(?:\(?\d{1,2}[.):-]|\(\d{1,2}\)|\([a-hA-H]\)"
    rf"|(?<=[A-Za-z]{{2}}[.!?;:])[a-hA-H][.)]|[-\u2013\u2014{_BULLETS}])"
    r"(?=[ \t]*[A-Za-z(])"
)
# Words that start a new item after a glued dash ("no pneumothorax-the heart is
# enlarged"); any other word makes a hyphenated word ("right-sided").
_DASH_STARTERS = r"(?i:the|there|no|mild|moderate|small|large|heart|lungs?)\b"
# what follows the dash of a template field ("Edema - none.", "Heart- normal")
_NOT_ANSWER = r"(?!(?i:none|normal|negative|absent|present|clear|unremarkable)\b)"
_SENT_END = re.compile(
    # Every alternative starts at one of these characters: one test per
    # character of plain text before trying them (speed, issue 8). A space or tab
    # starts one only before another, a list marker or a dash (the inline item,
    # the spaced dash, the marker after "Heart:"): the space between two words,
    # a sixth of the characters, fails here instead of in each alternative.
    rf"(?=[.!?;:\n\d(\-\u2013\u2014{_BULLETS}]|[ \t][ \t\d(#\-\u2013\u2014{_BULLETS}])(?:"
    # ("Pneumothorax? No." is one template field: question and answer)
    r"(?:[.!]+|\?+(?![ \t]*(?i:no|yes|none|negative)\b))(?=\s|$)"
    r"|;"
    r"|\n[ \t]*\n"
    # a line that starts a list item or a "Field:" template line
    rf"|\n(?=[ \t]*(?:{_MARKER}|[A-Za-z][A-Za-z /&-]{{0,30}}:))"
    # no space after the period: "effusion.No", "effusion.no pneumothorax", "effusion.2.No"
    rf"|[.!?](?<=[A-Za-z)\]][.!?])(?=[A-Z]|{_GLUED_MARKER})|\.(?<=[a-z]{{2}}\.)(?=[a-z]{{2}})"
    # a list marker right after a colon: "Heart:1.Normal", "Lungs:\u2022 clear"
    # (not a dash: "Heart:- normal" is a field and its answer)
    rf"|(?<=[A-Za-z]:)(?=[ \t]*(?:\(?\d{{1,2}}[.)]|\([a-hA-H]\)|[{_BULLETS}])[ \t]*[A-Za-z])"
    # an inline numbered item: "small effusion (2) no pneumothorax", "effusion 2) no"
    r"|[ \t](?=\(\d{1,2}\)[ \t]*[A-Za-z]|\d{1,2}[.)][ \t]*[A-Za-z]|#\d{1,2}[.):]?[ \t]*[A-Za-z])"
    # an item number glued to the last word of the item before: "effusion2.No",
    # "effusion(b)No" ("effusionb." cannot be told from a word)
    r"|(?=(?:\d{1,2}[.):-]|\(\d{1,2}\)|\([a-hA-H]\))[ \t]*[A-Za-z])(?<=[A-Za-z]{3})"
    # a bullet anywhere ("no pneumothorax \u2022 mild cardiomegaly"; not MIMIC's "[**")
    rf"|(?=[{_BULLETS[1:]}]|(?<![\[*])\*(?![*\]]))"
    # a spaced dash ("no pneumothorax - mild cardiomegaly"), not a template
    # answer ("Edema - none.") nor "1 - item", and a dash glued before a new
    # item's first word ("resolved- The heart", "resolved-the heart")
    rf"|(?<![\d \t])[ \t]+(?=[-\u2013\u2014][ \t]+{_NOT_ANSWER}[A-Za-z(])"
    rf"|(?=-[ \t]+{_NOT_ANSWER}[A-Za-z(]|-{_DASH_STARTERS})(?<=[A-Za-z]{{3}})(?<!non)"
    r")"
)
_LEADING_MARKER = re.compile(rf"(?:{_MARKER}[ \t]*)+")
_LINE_BREAK = re.compile(r"[ \t]*\n[ \t]*(?=([A-Za-z]+))")


def split_sentences(
    text: str,
    start: int,
    end: int,
    wrap_words: frozenset[str] = frozenset(),
    line_starters: frozenset[str] = frozenset(),
    max_chars: int | None = None,
    glued_starters: frozenset[str] = frozenset(),
) -> list[tuple[int, int]]:
    """Split `text[start:end]` into sentences, without their list markers.

    A line break inside a sentence is a hard wrap ("The heart is\nenlarged.")
    unless the line before does not end with one of `wrap_words` ("or", "of",
    "the", ...) and the next line starts with a capital in mixed-case text or
    with one of `line_starters` ("no", "small", "there", ...) in any case:
    then it ends a sentence (one finding per line, without periods).

    Args:
        text: the (cleaned) report.
        start, end: the span to split.
        wrap_words: lower-cased words after which a line always continues.
        line_starters: lower-cased words that start a new finding on a new line.
        glued_starters: capitalised words that start a new sentence right after a
            lower-case word, where the period between them is missing ("granuloma,
            stable The lungs are clear", "clips unchanged Visualized bones").
        max_chars: a longer sentence is cut into pieces of at most this many
            characters, at the last clause boundary (";", ",", ":") or else the
            last space before the limit (None: no limit). Parsing and the
            negation scopes cost more than linear time in a sentence's length,
            and a run-on "sentence" of thousands of words is a list or an attack,
            not prose: the longest of 17,976 OpenI sentences has 262 characters.

    Returns:
        (start, end) character offsets into `text`, stripped of surrounding
        whitespace and of leading numbering or bullets ("1.", "2)", "a.",
        "(3)", "-", "\u2022", "*", "1 -").
    """
    out: list[tuple[int, int]] = []
    pos = start
    for m in _SENT_END.finditer(text, start, end):
        out.append((pos, m.end()))
        pos = m.end()
    out.append((pos, end))
    if glued_starters:
        out = [p for s, e in out for p in _glued_splits(text, s, e, glued_starters)]
    spans: list[tuple[int, int]] = []
    for s, e in out:
        chunk = text[s:e]
        if "\n" in chunk and "\n" in chunk.strip():  # most sentences have no line break
            spans.extend(_split_lines(text, s, e, wrap_words, line_starters))
        else:
            _add(text, s, e, spans)
    if max_chars is not None and any(e - s > max_chars for s, e in spans):
        return [p for s, e in spans for p in _cut(text, s, e, max_chars, line_starters)]
    return spans


_GLUED_START = re.compile(r"(?<=[a-z]{2})[ \t]+([A-Z][a-z]+)\b")


def _glued_splits(
    text: str, s: int, e: int, glued_starters: frozenset[str]
) -> list[tuple[int, int]]:
    """`text[s:e]` cut before each of `glued_starters` that follows a lower-case word."""
    pieces: list[tuple[int, int]] = []
    pos = s
    for m in _GLUED_START.finditer(text, s, e):
        if m.group(1) in glued_starters:
            pieces.append((pos, m.start()))
            pos = m.start(1)
    pieces.append((pos, e))
    return pieces


_CLAUSE_ENDS = (";", ",", ":")


def _cut(
    text: str, s: int, e: int, max_chars: int, line_starters: frozenset[str]
) -> list[tuple[int, int]]:
    """`text[s:e]` in pieces of at most `max_chars` characters.

    Each cut is the last clause end (";", ",", ":") in the second half of the
    window, else the last space before a word that starts a finding ("no",
    "there", ...: never between a negation and what it negates), else the last
    space, else the limit itself.
    """
    pieces: list[tuple[int, int]] = []
    while e - s > max_chars:
        limit = s + max_chars
        floor = s + max_chars // 2  # never a piece shorter than half the limit
        cut = max(text.rfind(mark, floor, limit) for mark in _CLAUSE_ENDS) + 1
        if cut <= floor:
            cut = _before_starter(text, floor, limit, line_starters)
        if cut <= floor:
            cut = text.rfind(" ", floor, limit) + 1
        if cut <= floor:
            cut = limit
        _add(text, s, cut, pieces)
        s = cut
    _add(text, s, e, pieces)
    return pieces


def _before_starter(text: str, floor: int, limit: int, line_starters: frozenset[str]) -> int:
    """The start of the last word in `text[floor:limit]` that starts a finding, or -1."""
    for m in reversed(list(_WORD_AFTER_SPACE.finditer(text, floor, limit))):
        if m.group(1).lower() in line_starters:
            return m.start(1)
    return -1


_WORD_AFTER_SPACE = re.compile(r" ([A-Za-z]+)")


def _split_lines(
    text: str, s: int, e: int, wrap_words: frozenset[str], line_starters: frozenset[str]
) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    pos = s
    for m in _LINE_BREAK.finditer(text, s, e):
        before = text[pos : m.start()]
        words = before.split()
        if not words:
            continue
        last = words[-1].lower()
        if last.endswith(",") or last in wrap_words:
            continue
        first = m.group(1)
        starts = first.lower() in line_starters
        # ALL CAPS text: a capital says nothing; only a starter word ends the line
        capital = first[0].isupper() and not before.isupper()
        if not (starts or capital):
            continue
        _add(text, pos, m.start(), spans)
        pos = m.end()
    _add(text, pos, e, spans)
    return spans


def _add(text: str, s: int, e: int, spans: list[tuple[int, int]]) -> None:
    chunk = text[s:e]
    lead = len(chunk) - len(chunk.lstrip())
    m = _LEADING_MARKER.match(chunk, lead)
    if m is not None:
        if not chunk[m.end() :].strip():
            return  # a bare marker ("2.") holds nothing to label
        lead = m.end()
        lead += len(chunk[lead:]) - len(chunk[lead:].lstrip())
    trail = len(chunk) - len(chunk.rstrip())
    if e - trail > s + lead:
        spans.append((s + lead, e - trail))
