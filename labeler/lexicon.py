"""The chest radiology lexicon: concepts, their synonyms, hierarchy, labels and MeSH headings.

A lexicon file (`patterns/lexicon.v1.yaml`, or a path to a YAML file of the same shape)
names each concept of chest radiograph reports once: its kind (finding, device, post-operative
change, bone, soft tissue, anatomy, normal statement or technique), its phrases, the concept it
specialises, the labels it maps to in each label set, and the OpenI coders' MeSH heading. The
file is checked on load; the labeling pipeline does not use it yet.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

from labeler.errors import PatternFileError
from labeler.labelsets import PACKAGED, load_label_set
from labeler.vocabulary import plural_phrase, read_pattern_file

__all__ = ["KINDS", "Kind", "Lexicon", "LexiconConcept", "Mesh", "load_lexicon"]

Kind = Literal[
    "finding", "device", "postop", "bone", "soft_tissue", "anatomy", "normal", "technique", "view"
]
#: The kinds a concept may have.
KINDS: tuple[Kind, ...] = get_args(Kind)

_ID = re.compile(r"[a-z][a-z0-9_]*")
_RADLEX = re.compile(r"RID\d+")
_FIELDS = frozenset({"id", "name", "kind", "phrases", "parent", "labels", "mesh", "radlex", "note"})
# clashes named in one error message; the rest are counted
_CLASHES_SHOWN = 20


@dataclass(frozen=True)
class Mesh:
    """A MeSH heading as the OpenI coders write it, with the qualifiers that belong to the
    concept ("Thoracic Vertebrae" + "degenerative")."""

    heading: str
    qualifiers: tuple[str, ...] = ()


@dataclass(frozen=True)
class LexiconConcept:
    """One concept of the lexicon, as its file gives it (phrases normalised)."""

    id: str
    name: str
    kind: Kind
    #: lower-cased, whitespace collapsed, with the plural of each last word added
    phrases: tuple[str, ...]
    parent: str | None = None
    #: its own mapping per label set; `Lexicon.labels_for` adds the inherited ones
    labels: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    mesh: Mesh | None = None
    radlex: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Described:
    """A describing word before its finding across the finding's own place and size words
    ("calcified left upper lobe 5 mm granuloma"): the described concept (`described:`)."""

    #: the words a describing finding's whole text may be ("calcified")
    words: frozenset[str]
    #: the describing concept ("calcification") and, per finding described, the concept it
    #: becomes ("granuloma" -> "calcified_granuloma")
    by: str
    becomes: Mapping[str, str]
    #: the words that may stand between them besides numbers
    between: frozenset[str]


@dataclass(frozen=True)
class Placed:
    """A finding said to be in a place named after it ("degenerative changes are present in
    the spine"): the concept of that place (`placed:`)."""

    concept: str
    #: the words that may stand between the finding and its place
    between: frozenset[str]
    #: place words -> the concept the finding there is ("thoracic spine" ->
    #: "degenerative_thoracic_spine")
    places: Mapping[str, str]


@dataclass(frozen=True)
class Lexicon:
    """The concepts of a lexicon file by id, with phrase look-up and the hierarchy."""

    name: str
    version: int
    concepts: Mapping[str, LexiconConcept]
    #: lower-cased phrase (plurals included) -> ids of the concepts that list it
    by_phrase: Mapping[str, tuple[str, ...]]
    #: generic head nouns of open findings ("opacity", "opacities", "density"), as listed
    open_finding_heads: frozenset[str]
    #: the phrases `by_phrase` holds as the predicate form of a listed one ("aorta is
    #: tortuous" of "tortuous aorta"): a report's words, never a question's
    predicate_phrases: frozenset[str] = frozenset()
    #: describing words read with the finding they describe (`Described`)
    described: tuple[Described, ...] = ()
    #: findings read with the place named after them (`Placed`), by concept id
    placed: Mapping[str, Placed] = field(default_factory=lambda: MappingProxyType({}))
    #: describing words that share the head of the finding after "and" ("mild unfolding and
    #: atherosclerotic calcification of the aorta" is also the unfolding of the aorta): the
    #: predicate adjectives and nominals; and the verbs and degree words of the predicates,
    #: which make the word a predicate of what comes before ("the heart is enlarged and ...")
    coordinated: frozenset[str] = frozenset()
    #: the describing words of `coordinated` that share the head with no "and" between
    #: ("dilated tortuous aorta" is also the dilated aorta)
    stacked: frozenset[str] = frozenset()
    #: words a phrase is read through where it has no word of its own there ("ectatic
    #: appearing ascending aorta" is the ectatic ascending aorta), as a side word is
    read_through: frozenset[str] = frozenset()
    predicate_verbs: frozenset[str] = frozenset()
    predicate_degrees: frozenset[str] = frozenset()

    def _get(self, concept_id: str) -> LexiconConcept:
        try:
            return self.concepts[concept_id]
        except KeyError:
            raise KeyError(
                f"{self.name}: no concept {concept_id!r}; ids are lower-case snake_case "
                "(see `Lexicon.concepts`, or look a phrase up in `by_phrase`)"
            ) from None

    def _lineage(self, concept_id: str) -> Iterator[LexiconConcept]:
        """The concept, then its parent, grandparent... (the loader refused cycles)."""
        concept: LexiconConcept | None = self._get(concept_id)
        while concept is not None:
            yield concept
            concept = self.concepts[concept.parent] if concept.parent else None

    def ancestors(self, concept_id: str) -> tuple[str, ...]:
        """The ids of a concept's parent, grandparent and so on, nearest first.

        Raises:
            KeyError: no concept has this id.
        """
        return tuple(c.id for c in self._lineage(concept_id))[1:]

    def descendants(self, concept_id: str) -> tuple[str, ...]:
        """The ids of every concept below this one, in file order.

        Raises:
            KeyError: no concept has this id.
        """
        self._get(concept_id)
        return self._below.get(concept_id, ())

    def depth(self, concept_id: str) -> int:
        """How many ancestors a concept has (0 for a root): the more, the more specific.

        Raises:
            KeyError: no concept has this id.
        """
        return len(self.ancestors(concept_id))

    @functools.cached_property
    def _below(self) -> dict[str, tuple[str, ...]]:
        # every concept's descendants, once: questions ask for them on every answer
        below: dict[str, list[str]] = {}
        for cid in self.concepts:
            for ancestor in self.ancestors(cid):
                below.setdefault(ancestor, []).append(cid)
        return {k: tuple(v) for k, v in below.items()}

    def phrases_by_concept(
        self, skip_kinds: Collection[str] = (), *, predicates: bool = True
    ) -> dict[str, list[str]]:
        """Every phrase under the most specific concept that names it (a phrase a concept
        shares with its ancestor names the descendant), concepts of `skip_kinds` left out
        (and the predicate forms unless `predicates`): what a matcher of the lexicon adds,
        concept by concept."""
        out: dict[str, list[str]] = {}
        for phrase, ids in self.by_phrase.items():
            if not predicates and phrase in self.predicate_phrases:
                continue
            named = ids[0] if len(ids) == 1 else max(ids, key=self.depth)
            if self.concepts[named].kind not in skip_kinds:
                out.setdefault(named, []).append(phrase)
        return out

    def labels_for(self, concept_id: str, label_set: str) -> tuple[str, ...]:
        """The labels a concept maps to in a label set: its own mapping, else its nearest
        ancestor's, else () (an empty mapping of its own also gives ()).

        Args:
            concept_id: a concept id (`picc`).
            label_set: a packaged label set name (`chestxray14`, `chexpert`).

        Raises:
            KeyError: no concept has this id, or the label set is not a packaged one.
        """
        if label_set not in PACKAGED:
            raise KeyError(
                f"unknown label set {label_set!r}; expected one of {', '.join(PACKAGED)}"
            )
        for concept in self._lineage(concept_id):
            if label_set in concept.labels:
                return concept.labels[label_set]
        return ()

    def mesh_of(self, concept_id: str) -> Mesh | None:
        """A concept's MeSH heading, else its nearest ancestor's; None when none has one.

        Raises:
            KeyError: no concept has this id.
        """
        return next((c.mesh for c in self._lineage(concept_id) if c.mesh is not None), None)


@functools.lru_cache(maxsize=8)
def load_lexicon(name: str = "lexicon.v1") -> Lexicon:
    """Load and check a lexicon file.

    Args:
        name: packaged lexicon name (`lexicon.v1`) or a path to a YAML file.

    Returns:
        The lexicon, concepts in file order.

    Raises:
        PatternFileError: the file is missing or malformed. The message names the concept
            and the bad value: a repeated id, an unknown parent or kind, a parent cycle, a
            label its label set lacks, an empty phrase, or phrases claimed by two concepts
            of which neither is an ancestor of the other (every clash counted).
    """
    where, data = read_pattern_file(name)
    raw = data.get("concepts")
    if not isinstance(raw, list) or not raw:
        raise PatternFileError(f"{where}: missing `concepts:` list")
    spellings = _spellings(data.get("spellings"), where)
    concepts: dict[str, LexiconConcept] = {}
    for i, entry in enumerate(raw):
        concept = _parse_concept(entry, i, where, spellings)
        if concept.id in concepts:
            raise PatternFileError(
                f"{where}: concept id {concept.id!r} appears twice; ids must be unique"
            )
        concepts[concept.id] = concept
    _check_parents(concepts, where)
    listed: dict[str, list[str]] = {}
    for concept in concepts.values():
        for phrase in concept.phrases:
            listed.setdefault(phrase, []).append(concept.id)
    by_phrase = {p: tuple(ids) for p, ids in listed.items()}
    words = _predicate_words(data.get("predicates"), where)
    predicates = _predicate_phrases(concepts, words)
    predicate_phrases: set[str] = set()
    # 26,000 predicate forms, most of them new phrases: one look-up each
    for phrase, cid in predicates.items():
        ids = by_phrase.get(phrase)
        if ids is None:
            by_phrase[phrase] = (cid,)
            predicate_phrases.add(phrase)
        elif ids == (cid,):  # a listed phrase keeps its own concept
            predicate_phrases.add(phrase)
    lexicon = Lexicon(
        name=where,
        version=int(data.get("version") or 1),
        concepts=MappingProxyType(concepts),
        by_phrase=MappingProxyType(by_phrase),
        open_finding_heads=_heads(data.get("open_finding_heads"), where),
        predicate_phrases=frozenset(predicate_phrases),
        described=_described(concepts, data.get("described"), where),
        placed=_placed(concepts, data.get("placed"), where),
        read_through=_heads(data.get("read_through"), where, "read_through"),
        **_coordination(words),
    )
    _check_clashes(lexicon, where)
    return lexicon


def _placed(concepts: Mapping[str, LexiconConcept], value: Any, where: str) -> Mapping[str, Placed]:
    out: dict[str, Placed] = {}
    for at, entry in _rule_entries(value, "placed", ("concept", "between", "places"), where):
        places = _concept_map(entry["places"], "places", at)
        _check_known(concepts, [str(entry["concept"]), *places.values()], at)
        out[str(entry["concept"])] = Placed(
            concept=str(entry["concept"]),
            between=frozenset(str(w).lower() for w in entry["between"]),
            places=MappingProxyType({k.lower(): v for k, v in places.items()}),
        )
    return MappingProxyType(out)


def _described(
    concepts: Mapping[str, LexiconConcept], value: Any, where: str
) -> tuple[Described, ...]:
    out = []
    for at, entry in _rule_entries(
        value, "described", ("words", "by", "becomes", "between"), where
    ):
        becomes = _concept_map(entry["becomes"], "becomes", at)
        _check_known(concepts, [str(entry["by"]), *becomes, *becomes.values()], at)
        out.append(
            Described(
                words=frozenset(str(w).lower() for w in entry["words"]),
                by=str(entry["by"]),
                becomes=MappingProxyType(becomes),
                between=frozenset(str(w).lower() for w in entry["between"]),
            )
        )
    return tuple(out)


def _rule_entries(
    value: Any, section: str, needs: tuple[str, ...], where: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where it is, entry) of each entry of a top-level rule section (`described`,
    `placed`): a list of mappings that each hold `needs`."""
    if value is None:
        return
    if not isinstance(value, list):
        raise PatternFileError(f"{where}: `{section}` must be a list")
    for i, entry in enumerate(value):
        at = f"{where}: {section}[{i}]"
        if not isinstance(entry, dict) or not set(needs) <= entry.keys():
            raise PatternFileError(f"{at} needs {', '.join(needs[:-1])} and {needs[-1]}")
        yield at, entry


def _concept_map(value: Any, key: str, at: str) -> dict[str, str]:
    """A rule entry's mapping to concept ids, as text."""
    if not isinstance(value, dict):
        raise PatternFileError(f"{at}: {key} must map words or a concept to a concept")
    return {str(k): str(v) for k, v in value.items()}


def _check_known(concepts: Mapping[str, LexiconConcept], ids: Iterable[str], at: str) -> None:
    unknown = [c for c in ids if c not in concepts]
    if unknown:
        raise PatternFileError(f"{at}: unknown concept {unknown[0]!r}")


@dataclass(frozen=True)
class _PredicateWords:
    """`predicates` of the lexicon file, checked and lower-cased."""

    adjectives: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    degrees: tuple[str, ...] = ()
    nominals: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: the adjectives said after their noun with no verb too ("Heart size normal.")
    verbless: frozenset[str] = frozenset()
    #: the adjectives that describe the head also when stacked before another describing
    #: word with no "and" ("dilated tortuous aorta")
    stacked: frozenset[str] = frozenset()


def _predicate_words(value: Any, where: str) -> _PredicateWords:
    """`predicates`: its adjectives, verbs, degree words and nominals, checked."""
    if value is None:
        return _PredicateWords()
    lists = {}
    for key in ("adjectives", "verbs", "degrees"):
        words = value.get(key) if isinstance(value, dict) else None
        if not isinstance(words, list) or not all(isinstance(w, str) and w.strip() for w in words):
            raise PatternFileError(f"{where}: `predicates.{key}` must be a list of words")
        lists[key] = tuple(" ".join(w.lower().split()) for w in words)
    verbless = value.get("verbless") or []
    if not isinstance(verbless, list) or not all(isinstance(w, str) for w in verbless):
        raise PatternFileError(f"{where}: `predicates.verbless` must list some of its adjectives")
    verbless = [" ".join(w.lower().split()) for w in verbless]
    if not set(verbless) <= set(lists["adjectives"]):
        raise PatternFileError(f"{where}: `predicates.verbless` must list some of its adjectives")
    stacked = [" ".join(w.lower().split()) for w in value.get("stacked") or []]
    if not set(stacked) <= set(lists["adjectives"]):
        raise PatternFileError(f"{where}: `predicates.stacked` must list some of its adjectives")
    return _PredicateWords(
        lists["adjectives"],
        lists["verbs"],
        lists["degrees"],
        _nominals(value.get("nominals"), f"{where}: `predicates.nominals`"),
        frozenset(verbless),
        frozenset(stacked),
    )


def _predicate_phrases(
    concepts: Mapping[str, LexiconConcept], words: _PredicateWords
) -> dict[str, str]:
    """The predicate forms of the phrases that start with one of `predicates.adjectives`:
    "tortuous aorta" -> "aorta is tortuous", "aorta remains mildly tortuous" (each verb,
    with and without each degree word), to the concept that lists the phrase."""
    adjectives = set(words.adjectives)
    nominals = words.nominals
    # " is ", " is mildly ", " remains ", ...: each verb, without and with each degree word
    links = [
        f" {verb} {degree} " if degree else f" {verb} "
        for verb in words.verbs
        for degree in ("", *words.degrees)
    ]
    # "Cardiomediastinal silhouette stable.": the report's shorthand drops the verb
    verbless_links = links + [f" {degree} " if degree else " " for degree in ("", *words.degrees)]
    out: dict[str, str] = {}
    for concept in concepts.values():
        for phrase in concept.phrases:
            first, _, rest = phrase.partition(" ")
            if first in adjectives and rest:
                for link in verbless_links if first in words.verbless else links:
                    out.setdefault(f"{rest}{link}{first}", concept.id)
            for noun in nominals.get(first, ()) if rest else ():
                out.setdefault(f"{noun} of the {rest}", concept.id)
                out.setdefault(f"{noun} of {rest}", concept.id)
    return out


def _coordination(words: _PredicateWords) -> dict[str, frozenset[str]]:
    """`Lexicon.coordinated` and the words that stop it: the predicate adjectives and
    nominals, and the predicates' verbs and degree words."""
    return {
        "coordinated": frozenset(
            {*words.adjectives, *(n for ns in words.nominals.values() for n in ns)}
        ),
        "stacked": words.stacked,
        "predicate_verbs": frozenset(words.verbs),
        "predicate_degrees": frozenset(words.degrees),
    }


def _nominals(value: Any, at: str) -> dict[str, tuple[str, ...]]:
    """`predicates.nominals`: adjective -> the nouns that say it of what follows "of"
    ("enlarged": [enlargement] reads "enlargement of the pulmonary arteries")."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PatternFileError(f"{at} must map an adjective to a list of nouns")
    out = {}
    for adjective, nouns in value.items():
        if not isinstance(nouns, list) or not all(isinstance(n, str) and n.strip() for n in nouns):
            raise PatternFileError(f"{at}.{adjective} must be a list of nouns")
        out[" ".join(str(adjective).lower().split())] = tuple(
            " ".join(n.lower().split()) for n in nouns
        )
    return out


def _parse_concept(
    entry: Any, index: int, where: str, spellings: Mapping[str, tuple[str, ...]]
) -> LexiconConcept:
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        raise PatternFileError(f"{where}: concept #{index} needs a string `id`")
    cid = entry["id"]
    at = f"{where}: concept {cid!r}"
    if not _ID.fullmatch(cid):
        raise PatternFileError(f"{at}: an id is lower-case snake_case (`pleural_effusion`)")
    unknown = sorted(set(entry) - _FIELDS)
    if unknown:
        raise PatternFileError(
            f"{at}: unknown field(s) {unknown}; expected {', '.join(sorted(_FIELDS))}"
        )
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise PatternFileError(f"{at}: needs a `name`, the preferred term")
    kind = entry.get("kind")
    if kind not in KINDS:
        raise PatternFileError(f"{at}: kind {kind!r} is not one of {', '.join(KINDS)}")
    parent = entry.get("parent")
    if parent is not None and not isinstance(parent, str):
        raise PatternFileError(f"{at}: `parent` must be a concept id")
    radlex = entry.get("radlex")
    if radlex is not None and not (isinstance(radlex, str) and _RADLEX.fullmatch(radlex)):
        raise PatternFileError(f"{at}: radlex {radlex!r} is not a RadLex id (RID and digits)")
    note = entry.get("note")
    if note is not None and not isinstance(note, str):
        raise PatternFileError(f"{at}: `note` must be a string")
    return LexiconConcept(
        id=cid,
        name=name.strip(),
        kind=kind,
        phrases=_phrases(entry.get("phrases"), at, spellings),
        parent=parent,
        labels=_labels(entry.get("labels"), at),
        mesh=_mesh(entry.get("mesh"), at),
        radlex=radlex,
        note=note,
    )


def _phrases(
    values: Any, at: str, spellings: Mapping[str, tuple[str, ...]] = MappingProxyType({})
) -> tuple[str, ...]:
    if not isinstance(values, list) or not values:
        raise PatternFileError(f"{at}: `phrases` must be a non-empty list of strings")
    out: dict[str, None] = {}
    for value in values:
        phrase = " ".join(value.lower().split()) if isinstance(value, str) else ""
        if not phrase:
            raise PatternFileError(f"{at}: phrase {value!r} is empty or not a string")
        for form in _spelled(phrase, spellings):
            out[form] = None
            plural = plural_phrase(form)
            if plural is not None:
                out[plural] = None
    return tuple(out)


def _spelled(phrase: str, spellings: Mapping[str, tuple[str, ...]]) -> list[str]:
    # every other spelling of each word ("lymphangitic spread of tumor" is also "... of
    # tumour"): a phrase lists one spelling, a question or report may use the other
    forms = [""]
    for word in phrase.split():
        options = (word, *spellings.get(word, ()))
        forms = [f"{f} {o}".strip() for f in forms for o in options]
    return forms


def _spellings(value: Any, where: str) -> Mapping[str, tuple[str, ...]]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(w, str) for w in v)
        for k, v in value.items()
    ):
        raise PatternFileError(f"{where}: `spellings` must map a word to a list of its spellings")
    # both ways: a phrase may be listed in either spelling
    out: dict[str, list[str]] = {}
    for word, others in value.items():
        group = [word.lower(), *(w.lower() for w in others)]
        for w in group:
            out.setdefault(w, []).extend(o for o in group if o != w and o not in out[w])
    return MappingProxyType({w: tuple(o) for w, o in out.items()})


def _labels(value: Any, at: str) -> Mapping[str, tuple[str, ...]]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, dict):
        raise PatternFileError(f"{at}: `labels` must map a label set to a list of label names")
    out: dict[str, tuple[str, ...]] = {}
    for label_set, names in value.items():
        if label_set not in PACKAGED:
            raise PatternFileError(
                f"{at}: unknown label set {label_set!r}; expected one of {', '.join(PACKAGED)}"
            )
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise PatternFileError(f"{at}: labels.{label_set} must be a list of label names")
        known = load_label_set(label_set).labels
        missing = [n for n in names if n not in known]
        if missing:
            raise PatternFileError(
                f"{at}: label(s) {missing} are not in label set {label_set!r}; "
                f"its labels are {', '.join(known)}"
            )
        out[label_set] = tuple(names)
    return MappingProxyType(out)


def _mesh(value: Any, at: str) -> Mesh | None:
    if value is None:
        return None
    fields = {"heading": value} if isinstance(value, str) else value
    heading = fields.get("heading") if isinstance(fields, dict) else None
    qualifiers = (fields.get("qualifiers") or []) if isinstance(fields, dict) else None
    if (
        not isinstance(heading, str)
        or not heading.strip()
        or not isinstance(qualifiers, list)
        or not all(isinstance(q, str) and q.strip() for q in qualifiers)
        or set(fields) - {"heading", "qualifiers"}
    ):
        raise PatternFileError(
            f"{at}: `mesh` must be a heading, or {{heading: ..., qualifiers: [...]}}, "
            f"of non-empty strings; got {value!r}"
        )
    return Mesh(heading.strip(), tuple(q.strip() for q in qualifiers))


def _heads(value: Any, where: str, key: str = "open_finding_heads") -> frozenset[str]:
    if value is None:
        return frozenset()
    if not isinstance(value, list) or not all(
        isinstance(v, str) and len(v.split()) == 1 for v in value
    ):
        raise PatternFileError(f"{where}: `{key}` must be a list of single words")
    # each form listed: a head noun's plural is too often irregular (focus, foci)
    return frozenset(v.lower() for v in value)


def _check_parents(concepts: Mapping[str, LexiconConcept], where: str) -> None:
    for concept in concepts.values():
        if concept.parent is not None and concept.parent not in concepts:
            raise PatternFileError(
                f"{where}: concept {concept.id!r} has unknown parent {concept.parent!r}"
            )
    for concept in concepts.values():
        chain = [concept.id]
        parent = concept.parent
        while parent is not None:
            if parent in chain:
                cycle = " -> ".join([*chain[chain.index(parent) :], parent])
                raise PatternFileError(
                    f"{where}: concept {concept.id!r} is its own ancestor ({cycle}); "
                    "parents must form a tree"
                )
            chain.append(parent)
            parent = concepts[parent].parent


def _check_clashes(lexicon: Lexicon, where: str) -> None:
    clashes = []
    for phrase, ids in lexicon.by_phrase.items():
        if len(ids) == 1:
            continue  # most phrases: one concept claims them
        for i, first in enumerate(ids):
            for second in ids[i + 1 :]:
                if first not in lexicon.ancestors(second) and second not in lexicon.ancestors(
                    first
                ):
                    clashes.append(f"{phrase!r}: {first}, {second}")
    if clashes:
        more = len(clashes) - _CLASHES_SHOWN
        shown = "; ".join(clashes[:_CLASHES_SHOWN]) + (f"; and {more} more" if more > 0 else "")
        raise PatternFileError(
            f"{where}: {len(clashes)} phrase(s) claimed by two unrelated concepts ({shown}). "
            "A phrase may belong to two concepts only when one is an ancestor of the other: "
            "remove it from one, or make one the other's parent"
        )
