"""Where a line, tube or lead ends: the landmark a device finding's tip is placed at.

`TipFinder` reads a sentence's text after a device finding for a landmark of the tip rules
(`patterns/tips.v1.yaml`): "PICC with tip in the mid SVC", "endotracheal tube with tip
4.5 cm above the carina". The engine (`labeler.pipeline`) asks it for every device finding
read with findings and stores the answer in the finding's attributes as `tip` (the
landmark's name) and `tip_text` (the report's words), with the evidence span.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from labeler.errors import PatternFileError
from labeler.vocabulary import read_pattern_file

__all__ = ["APPROXIMATELY", "Tip", "TipFinder", "load_tip_finder"]

# "4.5 cm above the", "2 cm below", "3 cm proximal to the": a distance from the landmark
#: the words a distance may be given with ("approximately 4.5 cm above the carina")
APPROXIMATELY = r"(?:approximately|about|roughly|~)"
_DISTANCE = (
    # a range ("5-6 cm above the carina", "5 to 6 cm"): both ends
    rf"(?:{APPROXIMATELY}\s+)?(?:(?P<low>\d+(?:\.\d+)?)\s*(?:-|\u2013|to)\s*)?"
    r"(?P<value>\d+(?:\.\d+)?)\s*"
    r"(?P<unit>cm|mm|centimeters?|millimeters?)"
    r"\s+(?:above|below|proximal\s+to|distal\s+to|from|beyond|short\s+of)\s+(?:the\s+)?"
)


@dataclass(frozen=True)
class Tip:
    """A device tip's landmark in a sentence: offsets into the text searched."""

    rule: str
    name: str
    text: str
    start: int
    end: int
    #: the distance from the landmark the report gives ("4.5 cm above the carina"), in mm
    distance_mm: float | None = None
    #: every landmark where the words join several ("leads in the right atrium and right
    #: ventricle"), the first one first; empty where they name one
    names: tuple[str, ...] = ()
    #: a distance given as a range ("5-6 cm above the carina"): its ends, in mm (then
    #: `distance_mm` is None)
    distance_range_mm: tuple[float, float] | None = None


class TipFinder:
    """Find the landmark a device's tip is placed at (`patterns/tips.v1.yaml`).

    Args:
        name: the rule file's name (for messages).
        landmarks: (rule id, landmark name, phrases) in file order.
        sided: names of the landmarks a side word before belongs to.
        back_references: words that make a device-less sentence about the last tip.
    """

    def __init__(
        self,
        name: str,
        landmarks: list[tuple[str, str, tuple[str, ...]]],
        sided: frozenset[str],
        back_references: tuple[str, ...],
    ) -> None:
        self.name = name
        self._by_phrase: dict[str, tuple[str, str]] = {}
        for rule, landmark, phrases in landmarks:
            for phrase in phrases:
                self._by_phrase.setdefault(phrase.lower(), (rule, landmark))
        alternatives = "|".join(
            re.escape(p) for p in sorted(self._by_phrase, key=len, reverse=True)
        )
        side = r"(?:(?P<side>left|right)(?:[\s-]+sided)?\s+)?"
        level = r"(?:(?:upper|mid|middle|lower|high|low|distal|proximal)\s+)?"
        self._pattern = re.compile(
            rf"(?<![\w-])(?P<distance>{_DISTANCE})?{side}{level}"
            rf"(?P<landmark>{alternatives})(?![\w-])",
            re.IGNORECASE,
        )
        self._sided = frozenset(p.lower() for p in sided)
        # "... and (the) right ventricle", "... and another lead tip in the right ventricle":
        # a further landmark joined to the first
        self._joined = re.compile(
            r"\s*(?:,\s*(?:and\s+)?|and\s+)(?:(?:another|the\s+other|a\s+second|one)\s+"
            r"(?:[\w-]+\s+){0,3}?tips?\s+(?:in|at|within|over|overlying|near|projecting\s+over)"
            r"\s+)?(?:the\s+)?",
            re.IGNORECASE,
        )
        # "right atrium and ventricle": a landmark's head word alone, its side the one before
        self._heads = {
            phrase.split(maxsplit=1)[1]: phrase
            for phrase in self._by_phrase
            if phrase.split(maxsplit=1)[0] in ("right", "left") and " " in phrase
        }
        self._head = re.compile(
            r"(?P<head>"
            + "|".join(re.escape(h) for h in sorted(self._heads, key=len, reverse=True))
            + r")(?P<plural>s)?(?![\w-])",
            re.IGNORECASE,
        )
        self._back = re.compile(
            r"(?<![\w-])(?:"
            + "|".join(re.escape(w) for w in sorted(back_references, key=len, reverse=True))
            + r")(?![\w-])",
            re.IGNORECASE,
        )

    def find(self, text: str, start: int = 0, end: int | None = None) -> Tip | None:
        """The first landmark in `text[start:end]`, or None.

        Returns:
            The landmark's rule and name and the report's words for it, with a distance
            ("4.5 cm above the carina") and a side ("left innominate vein") when given.
        """
        m = self._pattern.search(text, start, len(text) if end is None else end)
        if m is None:
            return None
        phrase = m["landmark"].lower()
        rule, landmark = self._by_phrase[phrase]
        first = m.start()
        side = m["side"]
        if side and landmark not in self._sided:
            # only a paired vein or bronchus has a side; "right" before "svc" is not one
            first = m.start("landmark") if not m["distance"] else first
            side = None
        name = f"{side.lower()} {landmark}" if side else landmark
        distance = None
        span = None
        if m["distance"]:
            per = 1.0 if m["unit"].lower().startswith("m") else 10.0
            if m["low"]:
                span = (float(m["low"]) * per, float(m["value"]) * per)
            else:
                distance = float(m["value"]) * per
        names, last = self._more(text, m.end(), len(text) if end is None else end, phrase, name)
        return Tip(rule, name, text[first:last], first, last, distance, names, span)

    def _more(
        self, text: str, at: int, end: int, phrase: str, name: str
    ) -> tuple[tuple[str, ...], int]:
        """The landmarks joined to the one that ends at `at` ("right atrium and right
        ventricle", "right atrium and ventricle"), with where the last ends; no names where
        none is joined."""
        names, last = [name], at
        while True:
            joint = self._joined.match(text, last, end)
            if joint is None:
                break
            m = self._pattern.match(text, joint.end(), end)
            if m is not None and not m["distance"]:
                rule, landmark = self._by_phrase[m["landmark"].lower()]
                side = m["side"] if m["side"] and landmark in self._sided else None
                names.append(f"{side.lower()} {landmark}" if side else landmark)
                phrase, last = m["landmark"].lower(), m.end()
                continue
            head = self._head.match(text, joint.end(), end)
            side = phrase.split(maxsplit=1)[0]
            if head is None or side not in ("right", "left"):
                break
            whole = self._heads[head["head"].lower()]
            if not whole.startswith(side):
                break
            names.append(self._by_phrase[whole][1])
            last = head.end()
        names = list(dict.fromkeys(names))
        return (tuple(names) if len(names) > 1 else ()), last

    def refers_back(self, text: str) -> bool:
        """Whether a sentence that names no device speaks of a tip ("The tip has moved")."""
        return self._back.search(text) is not None


@functools.lru_cache(maxsize=8)
def load_tip_finder(name: str = "tips.v1") -> TipFinder:
    """Load the tip rules: packaged name (`tips.v1`) or a path to a YAML file.

    Raises:
        PatternFileError: the file is missing or malformed (the message names the entry).
    """
    where, data = read_pattern_file(name)
    raw = data.get("landmarks")
    if not isinstance(raw, list) or not raw:
        raise PatternFileError(f"{where}: missing `landmarks:` list")
    landmarks = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise PatternFileError(f"{where}: landmark #{i} needs a string `id`")
        rule, landmark, phrases = entry["id"], entry.get("name"), entry.get("phrases")
        if not isinstance(landmark, str) or not landmark.strip():
            raise PatternFileError(f"{where}: landmark {rule!r} needs a `name`")
        if not isinstance(phrases, list) or not phrases:
            raise PatternFileError(f"{where}: landmark {rule!r} needs a list of `phrases`")
        if not all(isinstance(p, str) and p.strip() for p in phrases):
            raise PatternFileError(f"{where}: landmark {rule!r} has an empty or non-text phrase")
        landmarks.append((rule, landmark, tuple(p.strip() for p in phrases)))
    return TipFinder(
        where,
        landmarks,
        frozenset(_words(data.get("sided"), "sided", where)),
        tuple(_words(data.get("back_references"), "back_references", where)),
    )


def _words(raw: object, key: str, where: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(w, str) and w.strip() for w in raw):
        raise PatternFileError(f"{where}: `{key}` must be a list of phrases")
    return [w.strip() for w in raw]
