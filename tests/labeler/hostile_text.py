"""Hostile report text, drawn from a seeded `random.Random` (issue 18 item 1).

Shared by the property test (tests/labeler/test_hostile_text.py, through hypothesis)
and the longer run with a memory figure (benchmarks/fuzz_text.py), so both draw from
the same classes of text:

- runs of affix characters (`)))))`, `"'"'`, `.,.,`): spaCy's tokenizer strips them
  one at a time;
- deep nesting of brackets, with and without spaces;
- long lists of findings and cue words, with and without commas or spaces;
- run-on sentences without a period;
- mixed scripts: Cyrillic, Greek, CJK, Arabic, emoji, combining marks, invisible
  format characters, look-alike letters;
- many short lines, bullets and section headers;
- arbitrary code points.

Every piece is built from words written here: no report text from a data set.
"""

from __future__ import annotations

import random

__all__ = ["CLASSES", "hostile_text"]

_FINDINGS = (
    "effusion",
    "pneumothorax",
    "atelectasis",
    "consolidation",
    "edema",
    "cardiomegaly",
    "nodule",
    "mass",
    "opacity",
    "pneumonia",
    "emphysema",
    "fibrosis",
)
_CUES = ("no", "without", "possible", "may represent", "cannot exclude", "likely", "not", "or")
_AFFIXES = ")(\"'.,;:-*[]{}%$!?/\\<>|~`^#&+="
_SCRIPTS = (
    "пневмоторакс нет",
    "Nо pnеumоthоrах",  # Cyrillic look-alikes
    "Ο ΑΒΓ λόγος",
    "气胸 胸腔积液",
    "استرواح الصدر",
    "🫁💨🩻",
    "e\u0301\u0301\u0301",
    "\u200b\u200d\u2066\u2069\ufe0f\u00ad",
    "Ｎｏ ｅｆｆｕｓｉｏｎ",
    "\U0001d40d\U0001d428 effusion",
)
_HEADERS = ("FINDINGS:", "IMPRESSION:", "HISTORY:", "COMPARISON:", "1.", "-", "\u2022", "*")


def _affix_run(rng: random.Random, size: int) -> str:
    chars = rng.choice([rng.choice(_AFFIXES), "".join(rng.sample(_AFFIXES, 3))])
    return rng.choice(_FINDINGS) + (chars * (size // len(chars) + 1))[:size]


def _nesting(rng: random.Random, size: int) -> str:
    depth = size // 4
    sep = rng.choice(["", " "])
    open_, close = rng.choice(["()", "[]", "{}", "<>", '""'])
    return sep.join([open_] * depth) + sep + rng.choice(_FINDINGS) + sep + sep.join([close] * depth)


def _finding_list(rng: random.Random, size: int) -> str:
    sep = rng.choice([", ", ",", " ", " and ", "; ", "/"])
    words: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(_FINDINGS)
        if rng.random() < 0.3:
            word = rng.choice(_CUES) + " " + word
        words.append(word)
        total += len(word) + len(sep)
    return sep.join(words)


def _run_on(rng: random.Random, size: int) -> str:
    words: list[str] = []
    total = 0
    while total < size:
        word = rng.choice((*_FINDINGS, *_CUES, "the", "is", "of", "in", "left", "right"))
        words.append(word.upper() if rng.random() < 0.1 else word)
        total += len(word) + 1
    return " ".join(words)


def _mixed_scripts(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    total = 0
    while total < size:
        part = rng.choice((*_SCRIPTS, *_FINDINGS, *_CUES, ". "))
        parts.append(part)
        total += len(part) + 1
    return " ".join(parts)


def _lines(rng: random.Random, size: int) -> str:
    lines: list[str] = []
    total = 0
    while total < size:
        line = rng.choice(_HEADERS) + " " + rng.choice(("", *_FINDINGS, "no " + _FINDINGS[0]))
        lines.append(line)
        total += len(line) + 1
    return rng.choice(["\n", "\r\n", "\r", "\n\n", "\u2028"]).join(lines)


def _code_points(rng: random.Random, size: int) -> str:
    out = []
    for _ in range(size):
        cp = rng.choice(
            [
                rng.randrange(0x20, 0x7F),
                rng.randrange(0x80, 0x3000),
                rng.randrange(0x1F000, 0x1FAFF),
            ]
        )
        out.append(chr(cp))
    return "".join(out)


#: The classes of hostile text, by name (each draws about `size` characters).
CLASSES = {
    "affix_run": _affix_run,
    "nesting": _nesting,
    "finding_list": _finding_list,
    "run_on": _run_on,
    "mixed_scripts": _mixed_scripts,
    "lines": _lines,
    "code_points": _code_points,
}


def hostile_text(rng: random.Random, size: int) -> tuple[str, str]:
    """About `size` characters of hostile report text, and its class ("mix": several)."""
    if rng.random() < 0.6:
        kind = rng.choice(sorted(CLASSES))
        return kind, "FINDINGS: " + CLASSES[kind](rng, size)
    parts: list[str] = []
    left = size
    while left > 0:
        chunk = min(left, rng.randrange(50, max(51, size // 2)))
        parts.append(CLASSES[rng.choice(sorted(CLASSES))](rng, chunk))
        left -= chunk
    return "mix", "FINDINGS: " + rng.choice([" ", ". ", "\n"]).join(parts)
