"""The certainty scale: a hedge cue's level, and the status a profile gives that level.

The rules find a hedge and the mention it governs; `CertaintyScale.grade` turns the
rule's "uncertain" into the status the chosen profile gives the cue's level
(`patterns/certainty.v1.yaml`): radiologists label "likely pneumonia" positive and
"may represent pneumonia" uncertain, the CheXpert labeler both uncertain.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from labeler.errors import PatternFileError
from labeler.vocabulary import opens_aside, read_pattern_file

if TYPE_CHECKING:  # spaCy is imported by the pipeline, not by the configuration
    from spacy.tokens import Token

__all__ = ["DEFAULT_PROFILE", "STATUSES", "CertaintyScale", "load_certainty"]

DEFAULT_PROFILE = "radiologist"
STATUSES = ("positive", "uncertain", "negative")
#: the level of a cue listed under none
_UNLISTED = "possible"


@dataclass(frozen=True)
class CertaintyScale:
    """Cue phrase -> level, and level -> status under one profile."""

    name: str
    profile: str
    levels: dict[str, str]  # cue (lower-cased, single spaces) -> level
    ids: dict[str, str]  # level -> rule id of the level
    statuses: dict[str, str]  # level -> status under `profile`
    negators: frozenset[str] = frozenset()  # words that negate a hedge's evidence
    #: whether a hedge of any level, not only one reported positive, is negative when its
    #: evidence is negated ("no opacity to suggest pneumonia" under `negbio`)
    negate_every_level: bool = False
    #: words that open an aside: a negator before one does not negate a hedge after it
    asides: frozenset[str] = frozenset()

    def level(self, cue: str) -> str:
        """The level of a cue's text (`possible` when the scale does not list it)."""
        return self.levels.get(" ".join(cue.lower().split()), _UNLISTED)

    def grade(
        self, status: str, rule: str | None, cue: str | None, cue_root: Token | None = None
    ) -> tuple[str, str | None]:
        """The status and rule id of a mention that `rule` decided `status` on `cue`.

        Only hedges are graded: an "uncertain" verdict with its cue. When the profile
        gives the cue's level another status, the rule id says so (`rule@level`); a hedge
        the profile reports positive (under a profile of `negate_every_level`, any hedge)
        whose evidence is negated ("no opacity to suggest pneumonia", see `cue_root`) is
        negative (`rule@negated`).
        """
        if status != "uncertain" or cue is None:
            return status, rule
        level = self.level(cue)
        graded = self.statuses[level]
        suffix = level
        if (
            (graded == "positive" or self.negate_every_level)
            and cue_root is not None
            and self._negated(cue_root)
        ):
            graded, suffix = "negative", "negated"
        if graded == status:
            return status, rule
        return graded, f"{rule}@{suffix}" if rule else self.ids[level]

    def _negated(self, cue: Token) -> bool:
        """Whether the evidence a hedge word rests on is negated on the parse."""
        head = cue.head
        nouns = [cue, head]
        if head.pos_ in ("AUX", "VERB") or head.dep_ == "ROOT":
            # "there is no opacity to suggest A": the hedge hangs off the copula
            nouns += [c for c in head.children if c.dep_ in ("attr", "nsubj", "nsubjpass")]
        for noun in nouns:
            if any(
                c.dep_ in ("det", "neg")
                and c.lower_ in self.negators
                and not self._aside_between(c, cue)
                for c in noun.children
            ):
                return True
            if (
                noun.dep_ == "pobj"
                and noun.head.lower_ in self.negators
                and not self._aside_between(noun.head, cue)
            ):
                return True
        # "clear lungs without consolidation to suggest A": an infinitive hedge after a
        # negated prepositional phrase (not "opacity without bronchograms, concerning for A")
        infinitive = any(c.dep_ == "aux" and c.lower_ == "to" for c in cue.children)
        return infinitive and any(
            c.dep_ == "prep" and c.lower_ in self.negators for c in head.children
        )

    def _aside_between(self, negator: Token, cue: Token) -> bool:
        """Whether an aside opens between a negator and the hedge word after it."""
        if not self.asides or negator.i >= cue.i:
            return False
        words = [t.lower_ for t in negator.doc[negator.i : cue.i + 2]]
        return any(opens_aside(words, i, self.asides) for i in range(1, cue.i - negator.i))


@functools.lru_cache(maxsize=8)
def load_certainty(name: str = "certainty.v1", profile: str = DEFAULT_PROFILE) -> CertaintyScale:
    """Load a certainty scale by packaged name or path, with one of its profiles.

    Raises:
        PatternFileError: malformed file, or a profile the file does not define.
    """
    where, data = read_pattern_file(name)
    levels = data.get("levels")
    profiles = data.get("profiles")
    if not isinstance(levels, dict) or not isinstance(profiles, dict):
        raise PatternFileError(f"{where}: needs `levels:` and `profiles:` mappings")
    if profile not in profiles:
        raise PatternFileError(
            f"unknown certainty profile {profile!r}; expected one of {', '.join(profiles)}"
        )
    if _UNLISTED not in levels:
        raise PatternFileError(f"{where}: needs a `{_UNLISTED}` level")
    by_cue: dict[str, str] = {}
    ids: dict[str, str] = {}
    for level, spec in levels.items():
        if not isinstance(spec, dict) or not isinstance(spec.get("cues"), list):
            raise PatternFileError(f"{where}: level {level!r} needs a `cues:` list")
        ids[str(level)] = str(spec.get("id") or f"certainty.{level}")
        for cue in spec["cues"]:
            key = " ".join(str(cue).lower().split())
            if key in by_cue:
                raise PatternFileError(f"{where}: cue {key!r} is in {by_cue[key]!r} and {level!r}")
            by_cue[key] = str(level)
    statuses = profiles[profile]
    if not isinstance(statuses, dict) or set(statuses) != set(ids):
        raise PatternFileError(f"{where}: profile {profile!r} must give a status to every level")
    bad = {k: v for k, v in statuses.items() if v not in STATUSES}
    if bad:
        raise PatternFileError(f"{where}: profile {profile!r}: statuses must be {STATUSES}: {bad}")
    negators = frozenset(str(w).lower() for w in data.get("evidence_negators") or ())
    every = data.get("negate_every_level") or []
    if not isinstance(every, list) or not set(every) <= set(profiles):
        raise PatternFileError(f"{where}: `negate_every_level` must list profiles of the file")
    return CertaintyScale(
        str(data.get("name") or name),
        profile,
        by_cue,
        ids,
        dict(statuses),
        negators,
        negate_every_level=profile in every,
        asides=frozenset(str(w).lower() for w in data.get("evidence_asides") or ()),
    )
