"""Load the versioned pattern files in `labeler/patterns/` into dataclasses.

A pattern set is named either by its packaged name (`concepts.v1`) or by a path
to a YAML file of the same shape, so users can edit a copy without touching the
package.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from labeler.errors import PatternFileError
from labeler.pattern_cache import load_cached

__all__ = [
    "OTHER_LABEL",
    "ConceptSet",
    "Profile",
    "Rule",
    "RuleSet",
    "SectionSet",
    "Statement",
    "load_concepts",
    "load_profile",
    "load_rules",
    "load_sections",
    "load_statements",
    "opens_aside",
    "packaged_file",
    "plural_phrase",
    "read_pattern_file",
]

#: the bracket that closes each opening one an aside may start with
_CLOSING = {"(": ")", "[": "]"}


def opens_aside(words: Sequence[str], i: int, openers: frozenset[str]) -> bool:
    """Whether lower-cased word `i` opens an aside: one of `openers`, not a bracket round one
    word ("diffuse idiopathic skeletal hyperostosis (DISH)" names the finding again)."""
    if words[i] not in openers:
        return False
    closing = _CLOSING.get(words[i])
    return closing is None or i + 2 >= len(words) or words[i + 2] != closing


#: Label given to mentions of findings outside the 14 (they only decide No Finding).
OTHER_LABEL = "Other"

_SafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PATTERN_DIR = Path(__file__).resolve().parent / "patterns"

Scope = Literal["cue", "head", "list", "field"]


@dataclass(frozen=True)
class Concept:
    """Vocabulary of one label."""

    label: str
    phrases: tuple[str, ...]
    patterns: tuple[tuple[dict[str, Any], ...], ...] = ()
    exclude: tuple[str, ...] = ()
    #: phrases that are at most an uncertain mention ("vascular congestion" for Edema)
    hedged: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConceptSet:
    """All concepts of a vocabulary file: its labels plus `Other`."""

    name: str
    concepts: tuple[Concept, ...]

    @property
    def labels(self) -> frozenset[str]:
        """The label names the file defines (without `Other`)."""
        return frozenset(c.label for c in self.concepts if c.label != OTHER_LABEL)


@dataclass(frozen=True)
class Rule:
    """One negation/uncertainty rule (see the header of rules.v1.yaml)."""

    id: str
    status: Literal["positive", "negative", "uncertain"]
    cues: tuple[str, ...]
    scope: Scope
    via: frozenset[str]
    cue_dep: frozenset[str] = frozenset()
    clausal_conj: bool = False
    subject: Literal["yes", "no", "if_no_object"] = "yes"
    #: only mentions after the cue: a relation hedge governs its object, not its evidence
    after_cue: bool = False
    #: `list` scope: only the list's first comma-free stretch ("No change chronic disease",
    #: not "No change, no pneumothorax")
    adjacent: bool = False


@dataclass(frozen=True)
class RuleSet:
    """Ordered rules: the first that applies decides."""

    name: str
    rules: tuple[Rule, ...]
    #: words that make a comma-list item a finding of its own ("no A, mild B")
    list_breakers: frozenset[str] = frozenset()
    #: words that open a clause of its own ("..., however B cannot be excluded"): a cue after
    #: one does not reach a mention before it
    clause_breakers: frozenset[str] = frozenset()
    #: words that open an aside ("no effusion (blunting may represent small effusions)"): a
    #: cue before one does not reach a mention after it
    aside_openers: frozenset[str] = frozenset()
    #: prepositions by which a predicate relates its subject to another finding ("A may be
    #: related to B", "due to B"): for `subject: if_no_object` they count as an object
    relation_preps: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SectionSet:
    """Section headers: canonical name -> header variants."""

    name: str
    headers: dict[str, tuple[str, ...]]
    label_sections: frozenset[str]
    never_label: frozenset[str] = field(default_factory=frozenset)
    #: words after which a line break is a hard wrap, never a sentence end
    wrap_words: frozenset[str] = field(default_factory=frozenset)
    #: words that, starting a line, start a new sentence whatever their case
    line_starters: frozenset[str] = field(default_factory=frozenset)
    #: capitalised words that start a new sentence after a lower-case word (no period)
    glued_starters: frozenset[str] = field(default_factory=frozenset)


def read_pattern_file(name: str) -> tuple[str, dict[str, Any]]:
    """Read a packaged pattern file by name, or a YAML file by path: (name, mapping).

    A packaged file's parsed data is cached beside it (`labeler.pattern_cache`); a file
    given by path is parsed each time."""
    packaged = packaged_file(name)
    if name.endswith((".yaml", ".yml")):
        path = Path(name)
        if not path.is_file():
            raise PatternFileError(f"pattern file {name!r} does not exist")
        text = path.read_text(encoding="utf-8")
    elif packaged is None:
        raise PatternFileError(
            f"no packaged pattern set {name!r}; expected labeler/patterns/{name}.yaml "
            "or a path to a .yaml file"
        )
    else:
        text = packaged.read_text(encoding="utf-8")
    try:
        data = _parse_yaml(text) if packaged is None else load_cached(packaged, text, _parse_yaml)
    except yaml.YAMLError as exc:
        # one line, with where it broke: PyYAML's own message spans several
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise PatternFileError(
            f"pattern file {name!r} is not valid YAML{where}: {problem}"
        ) from None
    if not isinstance(data, dict):
        raise PatternFileError(f"pattern file {name!r} must hold a mapping at top level")
    return name, data


def packaged_file(name: str) -> Path | None:
    """The packaged pattern file a name (`lexicon.v1`) stands for; None for a path to a YAML
    file, or a name no packaged file has."""
    if name.endswith((".yaml", ".yml")):
        return None
    path = _PATTERN_DIR / f"{name}.yaml"
    return path if path.is_file() else None


def _parse_yaml(text: str) -> Any:
    # libyaml's safe loader when PyYAML was built with it: the pattern files
    # are read at every start, and the pure-Python parser is most of that time
    return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - a safe loader


def plural_phrase(phrase: str) -> str | None:
    """The plural of a lower-cased phrase's last word ("pleural effusion" -> "pleural
    effusions"), or None where it has none or cannot be guessed ("atelectasis")."""
    words = phrase.split()
    last = words[-1]
    if last.isalpha() and last.endswith("ss"):  # "mass" -> "masses", "abscess" -> "abscesses"
        return " ".join([*words[:-1], last + "es"])
    if not last.isalpha() or last.endswith(("s", "ic", "ed", "ing", "ous", "ive", "al", "ar")):
        return None
    if last.endswith("y") and last[-2:-1] not in "aeiou":
        plural = last[:-1] + "ies"
    elif last.endswith(("x", "ch", "sh")):
        plural = last + "es"
    else:
        plural = last + "s"
    return " ".join([*words[:-1], plural])


def _phrases(values: Any, where: str) -> tuple[str, ...]:
    if values is None:
        return ()
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise PatternFileError(f"{where} must be a list of strings")
    out: dict[str, None] = {}
    for v in values:
        p = " ".join(v.lower().split())
        out[p] = None
        plural = plural_phrase(p)
        if plural is not None:
            out[plural] = None
    return tuple(out)


@functools.lru_cache(maxsize=8)
def load_concepts(name: str = "concepts.v1", profile: str | None = None) -> ConceptSet:
    """Load a concept vocabulary, with a site profile's synonyms and abbreviations.

    Args:
        name: packaged set name (`concepts.v1`) or a path to a YAML file.
        profile: path to a site profile (see `load_profile`), or None.

    Returns:
        The concepts of the file's labels and `Other`.

    Raises:
        PatternFileError: the file is missing or malformed, or a profile names
            a label the file lacks.
    """
    name, data = read_pattern_file(name)
    labels = data.get("labels")
    if not isinstance(labels, dict) or not labels:
        raise PatternFileError(f"{name}: missing `labels:` mapping")
    extra = load_profile(profile).synonyms_for(labels) if profile else {}
    concepts = []
    for label, body in [*labels.items(), (OTHER_LABEL, data.get("other") or {})]:
        if not isinstance(body, dict):
            raise PatternFileError(f"{name}: entry {label!r} must be a mapping")
        patterns = body.get("patterns") or []
        if not isinstance(patterns, list) or not all(isinstance(p, list) for p in patterns):
            raise PatternFileError(f"{name}: {label}.patterns must be a list of token patterns")
        phrases = [*(body.get("phrases") or []), *extra.get(label, ())]
        concepts.append(
            Concept(
                label=str(label),
                phrases=_phrases(phrases, f"{name}: {label}.phrases"),
                patterns=tuple(tuple(p) for p in patterns),
                exclude=_phrases(body.get("exclude"), f"{name}: {label}.exclude"),
                hedged=_phrases(body.get("hedged"), f"{name}: {label}.hedged"),
            )
        )
    return ConceptSet(name=name, concepts=tuple(concepts))


@functools.lru_cache(maxsize=8)
def load_rules(name: str = "rules.v1") -> RuleSet:
    """Load a negation/uncertainty rule set.

    Args:
        name: packaged set name (`rules.v1`) or a path to a YAML file.

    Returns:
        The rules in file order.

    Raises:
        PatternFileError: the file is missing or a rule is malformed (the
            message names the rule id and the field).
    """
    name, data = read_pattern_file(name)
    arcs = data.get("arcs") or {}
    raw = data.get("rules")
    if not isinstance(raw, list):
        raise PatternFileError(f"{name}: missing `rules:` list")
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, r in enumerate(raw):
        if not isinstance(r, dict) or not isinstance(r.get("id"), str):
            raise PatternFileError(f"{name}: rule #{i} needs a string `id`")
        rid = r["id"]
        if rid in seen:
            raise PatternFileError(f"{name}: duplicate rule id {rid!r}")
        seen.add(rid)
        status = r.get("status")
        if status not in ("positive", "negative", "uncertain"):
            raise PatternFileError(
                f"{name}: rule {rid!r} has status {status!r}; "
                "expected positive, negative or uncertain"
            )
        scope = r.get("scope")
        if scope not in ("cue", "head", "list", "field"):
            raise PatternFileError(
                f"{name}: rule {rid!r} has scope {scope!r}; expected cue, head, list or field"
            )
        via: set[str] = set()
        for v in r.get("via") or []:
            via.update(arcs.get(v, [v]))
        subject = str(r.get("subject", "yes"))
        if subject not in ("yes", "no", "if_no_object"):
            raise PatternFileError(
                f"{name}: rule {rid!r} has subject {subject!r}; expected yes, no or if_no_object"
            )
        cues = _phrases(r.get("cue"), f"{name}: rule {rid!r} cue")
        if not cues:
            raise PatternFileError(f"{name}: rule {rid!r} has no cue")
        rules.append(
            Rule(
                id=rid,
                status=status,
                # cues are matched as written; no plurals
                cues=tuple(" ".join(str(c).lower().split()) for c in r["cue"]),
                scope=scope,
                via=frozenset(via),
                cue_dep=frozenset(r.get("cue_dep") or ()),
                clausal_conj=bool(r.get("clausal_conj", False)),
                after_cue=bool(r.get("after_cue", False)),
                adjacent=bool(r.get("adjacent", False)),
                subject=subject,  # type: ignore[arg-type]
            )
        )
    breakers = data.get("list_breakers") or []
    if not isinstance(breakers, list) or not all(
        isinstance(b, str) and len(b.split()) == 1 for b in breakers
    ):
        raise PatternFileError(f"{name}: list_breakers must be a list of single words")
    words = {}
    for key in ("clause_breakers", "aside_openers", "relation_preps"):
        raw = data.get(key) or []
        if not isinstance(raw, list) or not all(
            isinstance(b, str) and len(b.split()) == 1 for b in raw
        ):
            raise PatternFileError(f"{name}: {key} must be a list of single words")
        words[key] = frozenset(b.lower() for b in raw)
    return RuleSet(
        name=name,
        rules=tuple(rules),
        list_breakers=frozenset(b.lower() for b in breakers),
        **words,
    )


@functools.lru_cache(maxsize=8)
def load_sections(name: str = "sections.v1", profile: str | None = None) -> SectionSet:
    """Load a section header set, with a site profile's extra headers.

    Args:
        name: packaged set name (`sections.v1`) or a path to a YAML file.
        profile: path to a site profile (see `load_profile`), or None.

    Returns:
        Header variants per canonical section name.

    Raises:
        PatternFileError: the file is missing or malformed.
    """
    name, data = read_pattern_file(name)
    headers = data.get("headers")
    if not isinstance(headers, dict):
        raise PatternFileError(f"{name}: missing `headers:` mapping")
    merged: dict[str, list[Any]] = {str(k).lower(): list(v or []) for k, v in headers.items()}
    if profile:
        for section, extra in load_profile(profile).sections.items():
            if section not in merged:
                raise PatternFileError(
                    f"profile {profile!r}: unknown section {section!r}; "
                    f"expected one of {', '.join(sorted(merged))}"
                )
            merged[section].extend(extra)
    parsed = {
        k: tuple(" ".join(str(v).lower().split()) for v in vals) for k, vals in merged.items()
    }
    label_sections = frozenset(str(s).lower() for s in data.get("label_sections") or ())
    if not label_sections <= set(parsed):
        raise PatternFileError(f"{name}: label_sections must name sections under `headers:`")
    return SectionSet(
        name=name if not profile else f"{name}+{profile}",
        headers=parsed,
        label_sections=label_sections,
        never_label=frozenset(str(s).lower() for s in data.get("never_label") or ()),
        wrap_words=frozenset(str(w).lower() for w in data.get("wrap_words") or ()),
        line_starters=frozenset(str(w).lower() for w in data.get("line_starters") or ()),
        glued_starters=frozenset(str(w) for w in data.get("glued_starters") or ()),
    )


@dataclass(frozen=True)
class Statement:
    """An explicit statement ("heart size is normal") and the labels it decides."""

    id: str
    status: Literal["positive", "negative", "uncertain"]
    labels: tuple[str, ...]
    patterns: tuple[tuple[dict[str, Any], ...], ...]


@functools.lru_cache(maxsize=8)
def load_statements(name: str) -> tuple[Statement, ...]:
    """Load a statement file: normal (or stable, borderline...) statements as data.

    Args:
        name: packaged set name (`statements.v1`) or a path to a YAML file.

    Returns:
        The statements in file order.

    Raises:
        PatternFileError: the file is missing or a statement is malformed.
    """
    name, data = read_pattern_file(name)
    raw = data.get("statements")
    if not isinstance(raw, list):
        raise PatternFileError(f"{name}: missing `statements:` list")
    out: list[Statement] = []
    for i, st in enumerate(raw):
        if not isinstance(st, dict) or not isinstance(st.get("id"), str):
            raise PatternFileError(f"{name}: statement #{i} needs a string `id`")
        sid = st["id"]
        status = st.get("status", "negative")
        if status not in ("positive", "negative", "uncertain"):
            raise PatternFileError(f"{name}: statement {sid!r} has status {status!r}")
        labels = st.get("labels")
        patterns = st.get("patterns")
        if (
            not isinstance(labels, list)
            or not labels
            or not all(isinstance(x, str) for x in labels)
        ):
            raise PatternFileError(f"{name}: statement {sid!r} needs `labels:`, a list of names")
        if not isinstance(patterns, list) or not all(isinstance(p, list) for p in patterns):
            raise PatternFileError(f"{name}: statement {sid!r} needs `patterns:` (token patterns)")
        out.append(Statement(sid, status, tuple(labels), tuple(tuple(p) for p in patterns)))
    return tuple(out)


@dataclass(frozen=True)
class Profile:
    """A site profile: extra section headers, synonyms and abbreviations (data only)."""

    name: str
    sections: dict[str, tuple[str, ...]]
    synonyms: dict[str, tuple[str, ...]]
    abbreviations: dict[str, str]

    def synonyms_for(self, labels: dict[str, Any]) -> dict[str, tuple[str, ...]]:
        """Extra phrases per label of a concept file: synonyms, then abbreviations.

        An abbreviation joins every label whose phrases hold its expansion.

        Raises:
            PatternFileError: a synonym names a label the file lacks, or an
                abbreviation expands to no label's phrase.
        """
        unknown = sorted(set(self.synonyms) - set(labels))
        if unknown:
            raise PatternFileError(
                f"profile {self.name!r}: synonyms for unknown label(s) {unknown}; "
                f"labels are {', '.join(labels)}"
            )
        out = {k: list(v) for k, v in self.synonyms.items()}
        for abbr, expansion in self.abbreviations.items():
            owners = [
                lab
                for lab, body in labels.items()
                if isinstance(body, dict)
                and expansion
                in {" ".join(str(p).lower().split()) for p in body.get("phrases") or []}
            ]
            if not owners:
                raise PatternFileError(
                    f"profile {self.name!r}: abbreviation {abbr!r} expands to {expansion!r}, "
                    "which is no label's phrase; list it under `synonyms:` instead"
                )
            for lab in owners:
                out.setdefault(lab, []).append(abbr)
        return {k: tuple(v) for k, v in out.items()}


@functools.lru_cache(maxsize=8)
def load_profile(path: str) -> Profile:
    """Load a site profile YAML file.

    The file may hold `sections:` ({canonical section: [extra headers]}),
    `synonyms:` ({label: [extra phrases]}) and `abbreviations:`
    ({abbreviation: expansion}, the expansion being a phrase of some label).

    Raises:
        PatternFileError: the file is missing or malformed.
    """
    if not path.endswith((".yaml", ".yml")):
        raise PatternFileError(f"profile {path!r} must be a .yaml file")
    name, data = read_pattern_file(path)

    def mapping_of_lists(key: str) -> dict[str, tuple[str, ...]]:
        value = data.get(key) or {}
        if not isinstance(value, dict) or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in value.values()
        ):
            raise PatternFileError(f"profile {name!r}: `{key}:` must map names to lists of text")
        return {str(k).lower() if key == "sections" else str(k): tuple(v) for k, v in value.items()}

    abbreviations = data.get("abbreviations") or {}
    if not isinstance(abbreviations, dict) or not all(
        isinstance(v, str) for v in abbreviations.values()
    ):
        raise PatternFileError(f"profile {name!r}: `abbreviations:` must map text to text")
    return Profile(
        name=name,
        sections=mapping_of_lists("sections"),
        synonyms=mapping_of_lists("synonyms"),
        abbreviations={
            " ".join(str(k).lower().split()): " ".join(v.lower().split())
            for k, v in abbreviations.items()
        },
    )
