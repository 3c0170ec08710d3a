"""Split a report into sections and sentences, as character spans of the original text."""

from __future__ import annotations

import re
from dataclasses import dataclass

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
        alt = "|".join(r"\s+".join(map(re.escape, v.split())) for v in variants)
        # A header is (a) at a line start, followed by a colon or by the end of
        # its line, or (b) after a sentence end or line start, followed by a colon.
        _CACHE[key] = re.compile(
            rf"(?:^|(?<=\n))[ \t]*(?P<h1>{alt})[ \t]*(?::|(?=\r?\n|$))"
            rf"|(?:(?<=[.!?])\s+|^)(?P<h2>{alt})[ \t]*:",
            re.IGNORECASE,
        )
    return _CACHE[key]


def find_sections(text: str, sections: SectionSet) -> list[Section]:
    """Find the sections of a report.

    Args:
        text: the report.
        sections: header variants (`load_sections()`).

    Returns:
        Sections in text order; text before the first header is a section named None.
    """
    lookup = {v: name for name, vals in sections.headers.items() for v in vals}
    out: list[Section] = []
    cursor, name, header_start = 0, None, 0
    for m in _header_regex(sections).finditer(text):
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
# semicolon (a clause boundary: "no effusion; mild atelectasis"), or at a blank
# line or a line that starts a list item.
_SENT_END = re.compile(r"[.!?]+(?=\s|$)|;|\n\s*\n|\n(?=\s*(?:[-*\u2022]|\d+[.)])\s)")


def split_sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Split `text[start:end]` into sentences.

    Returns:
        (start, end) character offsets into `text`, stripped of surrounding whitespace.
    """
    out: list[tuple[int, int]] = []
    pos = start
    for m in _SENT_END.finditer(text, start, end):
        out.append((pos, m.end()))
        pos = m.end()
    out.append((pos, end))
    spans = []
    for s, e in out:
        chunk = text[s:e]
        lead = len(chunk) - len(chunk.lstrip())
        trail = len(chunk) - len(chunk.rstrip())
        if e - trail > s + lead:
            spans.append((s + lead, e - trail))
    return spans
