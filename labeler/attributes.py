"""Finding attributes: where, how big, how many, and whether it changed.

For each mention, attribute terms (`patterns/attributes.v1.yaml`) and size
expressions are found in its sentence, then kept when they sit in the
mention's *scope* on the dependency parse:

- its own modifiers and prepositional phrases ("small left effusion",
  "mass in the right upper lobe", "nodule measuring 4.5 x 3.2 cm"),
  but not those of other list items or of other mentions;
- its predicate, when it is the subject or object of a clause
  ("effusion has increased", "mass is again seen in the left base"); list
  items share the predicate of the list ("A and B are unchanged");
- a governing noun it is the object of ("no change in A", "interval
  increase in the size of A").

Counts come only from the mention's own pre-modifiers ("two nodules"), so a
"2" in "measuring 2 cm" or a date is never a count. On a sentence that was not
parsed, terms go to the nearest mention in their stretch of the sentence.

Every value keeps its evidence: the rule id and the character offsets of the
words that gave it.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spacy.matcher import PhraseMatcher
from spacy.tokens import Doc, Span, Token
from spacy.util import filter_spans

from labeler.errors import PatternFileError
from labeler.schema import ATTRIBUTE_KEYS
from labeler.vocabulary import read_pattern_file

__all__ = [
    "ATTRIBUTE_KEYS",
    "PLURAL_RULE",
    "AttributeEvidence",
    "AttributeFinder",
    "AttributeRules",
    "AttributeTerm",
    "aggregate_findings",
    "conflicting",
    "has_digit",
    "load_attribute_rules",
    "looks_plural",
    "merge_attributes",
    "stated_count",
]

#: the rule id of a count read from a plural noun, unless the attribute file names another
PLURAL_RULE = "count.plural"
#: endings of singular nouns in -s ("mass", "metastasis", "hilus")
_SINGULAR_S = ("ss", "is", "us")
#: change values a finding's own name may hold ("increased markings", "decreased volumes")
_NAMING_CHANGES = frozenset({"increased", "decreased"})
_LATERALITIES = frozenset({"left", "right", "bilateral"})
#: the de-identification's mask of a word (OpenI "XXXX"), lower-cased
_MASK = "xxxx"
_CHANGES = frozenset(
    {"new", "increased", "decreased", "unchanged", "resolved", "improved", "worsened"}
)
_PLACES = frozenset({"laterality", "location"})
_SETTABLE = frozenset({"laterality", "location", "severity", "count", "change"})
_STATUS_RANK = {"positive": 3, "uncertain": 2, "negative": 1}

# arcs that leave a mention's own phrase: other list items, other clauses
_NOT_OWN = frozenset({"conj", "cc", "parataxis", "ccomp", "advcl", "preconj"})
# arcs from a mention to the predicate that describes it
_ARGUMENT = frozenset({"nsubj", "nsubjpass", "attr", "dobj", "oprd", "csubj", "expl"})
# children of a predicate that describe its subject or object
_PREDICATE_PARTS = frozenset(
    {
        "advmod",
        "acomp",
        "prep",
        "npadvmod",
        "aux",
        "auxpass",
        "neg",
        "xcomp",
        "oprd",
        "agent",
        "prt",
        "dobj",
        "attr",
        "acl",
    }
)
# pre-modifiers of a noun that may hold its count
_COUNT_DEPS = frozenset({"nummod", "amod", "det", "quantmod", "compound", "advmod", "predet"})
_MAX_UP = 4
_MAX_PATH = 12
# what stands between the items of a bare list ("A and B", "A, B or C")
_LIST_JOINERS = frozenset({"and", "or", ",", "&", "and/or", "/"})
#: the words between two readings offered for one finding ("scarring or atelectasis",
#: "effusion versus thickening")
_READINGS_JOINED = (["or"], ["and/or"], ["and", "/", "or"], ["/"], ["versus"], ["vs"], ["vs", "."])
#: a vertebra or rib level ("T12", "L1", "9th")
_LEVEL = re.compile(r"(?:[TLC]\d{1,2}|\d{1,2}(?:st|nd|rd|th))$", re.IGNORECASE)
#: what ends the stretch of words a mention may take without a parse
_BREAKS = frozenset({"and", "or", "with", "but"})

# "4.5", ".8" and a decimal comma ("1,2 cm", as many European sites write it)
_NUMBER = r"(?:\d+(?:\.\d+|,\d{1,2}(?![\d,]))?|\.\d+)"
_SEPARATOR = r"\s*(?:x|×|\*|by|-|–|to)\s*"
# "right upper and middle lobes", "left upper and lower lobe", "right middle/lower lobes"
_COORDINATED_LOBES = re.compile(
    r"\b(right|left)\s+((?:upper|middle|mid|lower)(?:\s*(?:,|and|&|/|or)\s*"
    r"(?:upper|middle|mid|lower))+)\s+lobes?\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class AttributeTerm:
    """One attribute term: phrases and the values they set."""

    id: str
    phrases: tuple[str, ...]
    sets: tuple[tuple[str, str | int], ...]


@dataclass(frozen=True)
class AttributeRules:
    """The attribute vocabulary of one pattern file."""

    name: str
    terms: tuple[AttributeTerm, ...]
    severity_order: tuple[str, ...]
    size_rule: str
    units: Mapping[str, float]
    plural_rule: str
    plural_labels: frozenset[str]
    place_nouns: frozenset[str] = frozenset()
    #: nouns of the lungs' places a run of pre-modifiers passes over ("moderate left basilar
    #: lung consolidation")
    run_place_nouns: frozenset[str] = frozenset()
    #: words joining a grade to a change inside a run of pre-modifiers ("small but
    #: increasing right effusion")
    grade_change_joiners: frozenset[str] = frozenset()
    #: nouns a finding is counted in after "of" ("retrolisthesis of two vertebral bodies")
    counted_nouns: frozenset[str] = frozenset()
    #: verbs of a clause of the finding's predicate that place it ("atelectasis suggested
    #: on the lateral view, probably involving the right middle lobe")
    place_verbs: frozenset[str] = frozenset()
    links: frozenset[str] = frozenset()
    #: words after which the de-identification's mask stands for a link word ("opacities
    #: ... are XXXX atelectatic")
    masked_link_after: frozenset[str] = frozenset()
    #: words before "X or Y" that make it a list of what is not there, not two readings
    #: of one finding ("no consolidation, large effusion or pneumothorax")
    denials: frozenset[str] = frozenset()
    #: words that may stand after the joiner of a bare list, before its next item
    #: ("consolidation and some atelectasis in the left lower lobe": both in that lobe)
    list_determiners: frozenset[str] = frozenset()
    prior_cues: frozenset[str] = frozenset()
    prior_skip: frozenset[str] = frozenset()
    degree_words: frozenset[str] = frozenset()
    #: a sentence that starts with one of these words and names no finding gives its size
    #: to the previous sentence's finding ("This measures 3.2 cm"), under this rule id
    refer_back_starts: tuple[str, ...] = ()
    refer_back_rule: str = ""
    #: the same for a change ("These were not present on the prior study"): every change
    #: term's phrases and the extra ones of `change_refers_back`, each to its value
    change_phrases: Mapping[str, str] = field(default_factory=dict)
    change_refer_back_rule: str = ""
    #: a sentence's one size to its one finding when the parse gave it to none (rule id)
    sole_size_rule: str = ""
    #: words of a comparison with an earlier study ("prior", "since"): a change no
    #: mention's scope holds, followed by one, is the change of the mention before it
    comparison_words: frozenset[str] = frozenset()
    #: words that make a side after them the one a finding is measured against
    reference_side_words: frozenset[str] = frozenset()
    #: words after a length that make it a distance, not a size ("4.7 cm above the carina")
    distance_words: frozenset[str] = frozenset()
    #: lexicon kinds whose mentions name how the film was taken, not a finding ("seen on
    #: the lateral view"): they hold no attribute, and the sentence's words are its findings'
    unattributed_kinds: frozenset[str] = frozenset()

    def is_distance(self, text: str, end: int) -> bool:
        """Whether the length that ends at `end` of `text` is a distance, its next word one of
        `distance_words` ("tip 4.7 cm above the carina"), not a size."""
        after = _NEXT_WORD.match(text, end)
        return after is not None and after.group(1).lower() in self.distance_words

    def size_mm(self, match: re.Match[str]) -> float:
        """The largest dimension of a `size_pattern` match, in millimetres."""
        unit = self.units[match.group(2).lower()]
        numbers = [float(x.replace(",", ".")) for x in re.findall(_NUMBER, match.group(1))]
        return round(max(numbers) * unit, 1)

    @functools.cached_property
    def change_pattern(self) -> re.Pattern[str]:
        """Any of `change_phrases` as whole words, the longest first: a trie of their
        characters, which compiles and searches in a fraction of the time of an alternation
        of 1,500 phrases (the spelled `forms`)."""
        body = _trie_pattern(self.change_phrases) or "(?!)"
        return re.compile(rf"(?<![\w-])(?:{body})(?![\w-])", re.IGNORECASE)

    @functools.cached_property
    def size_pattern(self) -> re.Pattern[str]:
        """Sizes such as "4.5 x 3.2 cm", "8 mm", "1.2-cm", "2-3 cm"."""
        units = "|".join(sorted((re.escape(u) for u in self.units), key=len, reverse=True))
        return re.compile(
            rf"(?<![\w.,])({_NUMBER}(?:{_SEPARATOR}{_NUMBER}){{0,2}})\s*-?\s*({units})(?![a-z])",
            re.IGNORECASE,
        )


def _trie_pattern(phrases: Iterable[str]) -> str:
    """A regular expression that matches any of `phrases` and, where several match at a
    position, tries the longest first (as an alternation sorted longest first does)."""
    root: dict[str, Any] = {}
    for phrase in phrases:
        node = root
        for char in phrase:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: dict[str, Any]) -> str:
        alts = [re.escape(char) + pattern(child) for char, child in node.items() if char]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else f"(?:{'|'.join(alts)})"
        return f"(?:{body})?" if "" in node else body

    return pattern(root)


@dataclass(frozen=True)
class AttributeEvidence:
    """Why a mention has an attribute value: the rule and the words (offsets in the text)."""

    attribute: str
    value: str | int | float
    rule: str
    start: int
    end: int


@functools.lru_cache(maxsize=8)
def load_attribute_rules(name: str = "attributes.v1") -> AttributeRules:
    """Load an attribute pattern file by packaged name or path.

    Raises:
        PatternFileError: the file is missing, or a term is malformed or sets an
            unknown attribute or value.
    """
    name, data = read_pattern_file(name)
    order = tuple(str(s) for s in data.get("severity_order", ()))
    if not order:
        raise PatternFileError(f"{name}: severity_order must list the severities, mildest first")
    terms: list[AttributeTerm] = []
    for i, raw in enumerate(data.get("terms") or ()):
        where = f"{name}: terms[{i}]"
        if not isinstance(raw, dict) or not raw.get("id") or not raw.get("phrases"):
            raise PatternFileError(f"{where} needs an id, phrases and sets")
        sets = raw.get("sets")
        if not isinstance(sets, dict) or not sets:
            raise PatternFileError(f"{where} ({raw['id']}) needs a non-empty `sets` mapping")
        for key, value in sets.items():
            _check_value(where, str(raw["id"]), key, value, order)
        phrases = tuple(str(p).lower() for p in raw["phrases"]) + _forms(
            raw.get("forms"), f"{where} ({raw['id']})"
        )
        terms.append(AttributeTerm(str(raw["id"]), phrases, tuple(sets.items())))
    size = data.get("size") or {}
    units = size.get("units") or {}
    if not size.get("id") or not units:
        raise PatternFileError(f"{name}: size needs an id and units (unit: millimetres)")
    plural = data.get("plural_means_multiple") or {}
    prior = data.get("prior_state") or {}
    refer = size.get("refers_back") or {}
    change_back = data.get("change_refers_back") or {}
    change_phrases = {
        p: str(v) for t in terms for k, v in t.sets if k == "change" for p in t.phrases
    }
    for value, phrases in (change_back.get("phrases") or {}).items():
        _check_value(f"{name}: change_refers_back", "phrases", "change", value, order)
        change_phrases.update({str(p).lower(): str(value) for p in phrases})
    return AttributeRules(
        name=name,
        terms=tuple(terms),
        severity_order=order,
        size_rule=str(size["id"]),
        units={str(k).lower(): float(v) for k, v in units.items()},
        plural_rule=str(plural.get("id", PLURAL_RULE)),
        plural_labels=frozenset(str(x) for x in plural.get("labels") or ()),
        place_nouns=frozenset(str(x).lower() for x in data.get("place_nouns") or ()),
        run_place_nouns=frozenset(str(x).lower() for x in data.get("run_place_nouns") or ()),
        grade_change_joiners=frozenset(
            str(x).lower() for x in data.get("grade_change_joiners") or ()
        ),
        counted_nouns=frozenset(str(x).lower() for x in data.get("counted_nouns") or ()),
        place_verbs=frozenset(str(x).lower() for x in data.get("place_verbs") or ()),
        links=frozenset(str(x).lower() for x in data.get("same_finding_links") or ()),
        masked_link_after=frozenset(str(x).lower() for x in data.get("masked_link_after") or ()),
        denials=frozenset(str(x).lower() for x in data.get("readings_denied_by") or ()),
        list_determiners=frozenset(str(x).lower() for x in data.get("list_determiners") or ()),
        prior_cues=frozenset(str(x).lower() for x in prior.get("cues") or ()),
        prior_skip=frozenset(str(x).lower() for x in prior.get("skip") or ()),
        degree_words=frozenset(str(x).lower() for x in data.get("degree_of_change") or ()),
        refer_back_starts=tuple(str(x).lower() for x in refer.get("starts") or ()),
        refer_back_rule=str(refer.get("id") or ""),
        change_phrases=change_phrases,
        change_refer_back_rule=str(change_back.get("id") or ""),
        sole_size_rule=str((size.get("sole_in_sentence") or {}).get("id") or ""),
        comparison_words=frozenset(str(x).lower() for x in data.get("comparison_words") or ()),
        reference_side_words=frozenset(
            str(x).lower() for x in data.get("reference_side_words") or ()
        ),
        distance_words=frozenset(str(x).lower() for x in size.get("distance_before") or ()),
        unattributed_kinds=frozenset(str(x) for x in data.get("unattributed_kinds") or ()),
    )


def _forms(value: Any, where: str) -> tuple[str, ...]:
    """The phrases a term's `forms` spell: each form a list of slots, each slot the words
    that may fill it ("" leaves it out); every combination is a phrase ("not well seen on
    the prior exam", "not visualized on prior")."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(form, list)
        and form
        and all(
            isinstance(slot, list) and slot and all(isinstance(w, str) for w in slot)
            for slot in form
        )
        for form in value
    ):
        raise PatternFileError(
            f"{where}: forms must be a list of forms, each a list of slots of words "
            '(quote "on", "no", "yes": YAML reads them as true or false)'
        )
    out: list[str] = []
    for form in value:
        for words in itertools.product(*form):
            phrase = " ".join(w.lower() for w in words if w)
            if not phrase:
                raise PatternFileError(f"{where}: a form spells an empty phrase")
            out.append(phrase)
    return tuple(dict.fromkeys(out))


def _check_value(where: str, term: str, key: str, value: Any, order: Sequence[str]) -> None:
    ok = {
        "laterality": value in _LATERALITIES,
        "severity": value in order,
        "change": value in _CHANGES,
        "count": value == "multiple" or (isinstance(value, int) and value > 0),
        "location": isinstance(value, str) and bool(value),
    }
    if key not in _SETTABLE:
        raise PatternFileError(
            f"{where} ({term}) sets unknown attribute {key!r}; expected one of "
            f"{', '.join(sorted(_SETTABLE))}"
        )
    if not ok[key]:
        raise PatternFileError(f"{where} ({term}) sets {key} to invalid value {value!r}")


class AttributeFinder:
    """Find the attributes of mentions in one sentence Doc.

    Args:
        vocab_doc: any function making a Doc from text with the pipeline's
            tokenizer (`nlp.make_doc`), used to build the phrase patterns.
        vocab: the pipeline's vocab.
        rules: the attribute vocabulary.
        bare_labels: the labels of mentions that hold no attribute (the lexicon's
            concepts of `rules.unattributed_kinds`): the other mentions read the
            sentence as if they were not there.
    """

    def __init__(
        self,
        nlp_make_doc: Any,
        vocab: Any,
        rules: AttributeRules,
        bare_labels: frozenset[str] = frozenset(),
    ) -> None:
        self.rules = rules
        self.bare_labels = bare_labels
        self.matcher = PhraseMatcher(vocab, attr="LOWER")
        self._terms: dict[str, AttributeTerm] = {}
        for term in rules.terms:
            self._terms[term.id] = term
            self.matcher.add(term.id, [nlp_make_doc(p) for p in term.phrases])
        #: each term by its id's hash: the label of the spans its matches make
        self._term_of = {vocab.strings.add(t.id): t for t in self._terms.values()}
        #: the ids of the terms that say a change, and of those that give a severity
        self._changing = frozenset(
            t.id for t in self._terms.values() if any(key == "change" for key, _ in t.sets)
        )
        self._grading = frozenset(
            t.id for t in self._terms.values() if any(key == "severity" for key, _ in t.sets)
        )
        self._lobe_terms = {p: t for t in rules.terms for p in t.phrases if p.endswith(" lobe")}
        #: degree word -> its severity term ("mildly": severity.mild)
        self._degrees = {
            p: t
            for t in rules.terms
            for p in t.phrases
            if p in rules.degree_words and any(key == "severity" for key, _ in t.sets)
        }
        self.trigger_words = frozenset(
            w for t in rules.terms for p in t.phrases for w in p.split()
        ) | frozenset(rules.units)

    def may_apply(self, words: Sequence[str]) -> bool:
        """Whether a sentence of these lower-cased words can hold any attribute."""
        # the term words in one C call; the numbers (sizes, counts) then word by word
        return not self.trigger_words.isdisjoint(words) or any(w[:1].isdigit() for w in words)

    def terms(
        self, doc: Doc, words: Sequence[str] | None = None, text: str | None = None
    ) -> list[tuple[Span, AttributeEvidence]]:
        """The attribute terms and sizes of a sentence, before they go to its mentions.

        They depend on the words alone, not on the parse nor on the mentions: `find`
        takes them back (`terms=`) for each set of mentions of the same doc, parsed since
        or not.

        Args:
            doc: a sentence; parsed or only tokenized.
            words: the lower-cased words of `doc`, when the caller has them.
            text: `doc.text`, when the caller has it (spaCy rebuilds it from the
                tokens on every access, the slowest step here).

        Returns:
            (token span, evidence) pairs; sizes win over counts in the same words.
        """
        if words is None:
            words = [t.lower_ for t in doc]
        if not self.may_apply(words):
            return []
        return self._terms_in(doc, doc.text if text is None else text)

    def find(
        self,
        doc: Doc,
        mentions: Sequence[Span],
        words: Sequence[str] | None = None,
        text: str | None = None,
        *,
        terms: list[tuple[Span, AttributeEvidence]] | None = None,
    ) -> list[tuple[dict[str, Any], tuple[AttributeEvidence, ...]]]:
        """Attributes of each mention of `doc` (offsets relative to `doc.text`).

        Args:
            doc: a sentence; parsed or only tokenized.
            mentions: its mention spans, in text order.
            words: the lower-cased words of `doc`, when the caller has them.
            text: `doc.text`, when the caller has it (spaCy rebuilds it from the
                tokens on every access, the slowest step here).
            terms: `self.terms(doc)`, when the caller has them (several sets of
                mentions of one sentence).

        Returns:
            Per mention, in order: the attribute values (keys with no value
            left out) and their evidence.
        """
        evidence = self.evidence(doc, mentions, words, text, terms=terms)
        return [self.values(m, ev) for m, ev in zip(mentions, evidence, strict=True)]

    def values(
        self, mention: Span, evidence: Sequence[AttributeEvidence]
    ) -> tuple[dict[str, Any], tuple[AttributeEvidence, ...]]:
        """A mention's attribute values and their evidence (`find`), from what `evidence`
        found for it: with the count its label reads in a plural ("nodules")."""
        return _values(evidence, self.rules.severity_order, self._plural(mention))

    def evidence(
        self,
        doc: Doc,
        mentions: Sequence[Span],
        words: Sequence[str] | None = None,
        text: str | None = None,
        *,
        terms: list[tuple[Span, AttributeEvidence]] | None = None,
    ) -> list[list[AttributeEvidence]]:
        """The attribute evidence of each mention of `doc` (`find`), before `values` adds
        its label's count. It depends on the mentions' token offsets, not on their labels:
        it serves any set of mentions at the same offsets of the same doc.

        Arguments as for `find`.
        """
        if not mentions:
            return []
        found = self.terms(doc, words, text) if terms is None else terms
        if not found:
            return [[] for _ in mentions]
        if self.bare_labels and any(m.label_ in self.bare_labels for m in mentions):
            # "granuloma seen on the lateral view is stable": the view holds nothing, and
            # the words after it are the granuloma's
            kept = [i for i, m in enumerate(mentions) if m.label_ not in self.bare_labels]
            out: list[list[AttributeEvidence]] = [[] for _ in mentions]
            if kept:
                sub = self.evidence(doc, [mentions[i] for i in kept], words, text, terms=found)
                for i, held in zip(kept, sub, strict=True):
                    out[i] = held
            return out
        parsed = doc.has_annotation("DEP")
        roots = {m.root.i for m in mentions} if parsed else set()
        term_tokens = {i for span, _ in found for i in range(span.start, span.end)}
        out = []
        previous: set[int] = set()
        # whether the mention before took the words of the finding its link names
        linked_before = False
        # a grade joined to a change after it ("small but increasing right effusion")
        grade_then_change = (
            {span.end for span, ev in found if ev.attribute == "severity"},
            {span.start for span, ev in found if ev.attribute == "change"},
        )
        # Each mention's own pre-modifier terms, whatever the parse: a size written before
        # "spiculated mass" stays the mass's when a hedged diagnosis follows ("..., concerning
        # for malignancy") and the parse hangs the size on a word of its own.
        owned = [
            _premodifier_terms(
                doc,
                m,
                term_tokens,
                self.rules.run_place_nouns,
                self.rules.links,
                self.rules.grade_change_joiners,
                grade_then_change,
            )
            for m in mentions
        ]
        # a list's governing noun lends only a change: sought where the sentence has one
        changes = any(ev.attribute == "change" for _, ev in found)
        joined = frozenset() if parsed else _places_joined(doc, mentions, found)
        for idx, mention in enumerate(mentions):
            anchors = set(range(mention.start, mention.end))
            governing: set[int] = set()
            if parsed:
                scope, np_left, anchors = _scope(
                    mention,
                    roots,
                    self.rules.links,
                    self.rules.denials,
                    self.rules.run_place_nouns,
                    self.rules.place_verbs,
                )
                tail, readings = _readings_tail(doc, mentions, idx, roots, self.rules.denials)
                anchors |= readings
                scope |= _place_joined_after(
                    doc, mention, scope, found, roots, self.rules.run_place_nouns
                )
            else:
                tail = set()
                links = self.rules.links
                after = self.rules.masked_link_after
                determiners = self.rules.list_determiners
                scope, np_left = _window(
                    doc, mentions, idx, self.rules.denials, links, after, joined, determiners
                )
                if changes and idx:
                    governing = _governing_words(doc, mentions, idx)
                # "opacities consistent with atelectasis": one finding, two names
                linked = idx > 0 and any(
                    _is_link(doc, i, links, after)
                    for i in range(mentions[idx - 1].end, mention.start)
                )
                # "opacities consistent with scarring or atelectasis": the second reading
                # offered names the same finding as the first
                offered = (
                    idx > 0
                    and linked_before
                    and [t.lower_ for t in doc[mentions[idx - 1].end : mention.start]]
                    in _READINGS_JOINED
                )
                if linked or offered:
                    scope = scope | previous
                linked_before = bool(linked or offered)
                previous = scope
            # The unbroken run of term words right before the mention is its own
            # pre-modifiers whatever the parse says ("Newly seen left effusion" is
            # parsed with "seen" as the root and "left" as a verb).
            before = owned[idx]
            mine: list[AttributeEvidence] = []
            for span, ev in found:
                tokens = range(span.start, span.end)
                if ev.attribute == "laterality" and any(
                    t.lower_ in self.rules.reference_side_words
                    for t in doc[max(span.start - _REFERENCE_WITHIN, 0) : span.start]
                ):
                    continue  # "compared to the left": the side measured against
                if not parsed and ev.attribute == "change" and all(i in governing for i in tokens):
                    mine.append(ev)
                    continue
                if (
                    ev.attribute == "change"
                    and ev.value in _NAMING_CHANGES
                    and mention.start <= span.start < span.end <= mention.end
                    and span[0].lower_.endswith("ed")
                    # "lung volumes are decreased from the prior": compared, so a change
                    and not self._compared_after(doc, mention.end)
                ):
                    # an adjective of the finding's own name ("increased interstitial
                    # markings", "decreased lung volumes") says what it is, not how it changed;
                    # "stable" in "stable cardiomediastinal silhouette" and a noun ("increase
                    # in heart size") still say so. A degree word before it grades the
                    # finding ("mildly diminished lung volumes" are mildly low)
                    graded = self._graded(doc, span.start - 1)
                    if graded is not None:
                        mine.append(graded)
                    continue
                if before and all(i in before for i in tokens):
                    mine.append(ev)
                    continue
                if ev.attribute == "count":
                    if not all(i in np_left for i in tokens) and not self._counted_in(
                        mention, span
                    ):
                        continue
                elif not any(i in scope for i in tokens) and not (
                    ev.attribute in _PLACES and any(i in tail for i in tokens)
                ):
                    continue
                if parsed and not self._hangs_on_places(span, anchors, term_tokens):
                    continue
                mine.append(ev)
            out.append(mine)
        if self.rules.comparison_words:
            _orphan_changes(doc, mentions, found, out, self.rules.comparison_words)
        return out

    def _compared_after(self, doc: Doc, end: int) -> bool:
        """Whether a comparison with an earlier study follows right after a mention ("from
        the prior", "compared to")."""
        after = [t.lower_ for t in doc[end : end + 2]]
        return bool(after) and (
            after[0] == "from" or any(w in self.rules.comparison_words for w in after)
        )

    def _graded(self, doc: Doc, i: int) -> AttributeEvidence | None:
        """The severity a degree word at token `i` gives, if it is one."""
        term = self._degrees.get(doc[i].lower_) if i >= 0 else None
        if term is None:
            return None
        value = next(v for key, v in term.sets if key == "severity")
        tok = doc[i]
        return AttributeEvidence("severity", value, term.id, tok.idx, tok.idx + len(tok.text))

    def _counted_in(self, mention: Span, span: Span) -> bool:
        """Whether a count after the finding says how many of a counted noun it takes:
        "of" right after it, then the count, then a counted noun before any other noun
        ("wedge deformities of 2 midthoracic vertebral bodies", "of the two lower ribs")."""
        doc = mention.doc
        between = [t.lower_ for t in doc[mention.end : span.start]]
        if between not in (["of"], ["of", "the"]):
            return False
        for tok in doc[span.end : span.end + 4]:
            if tok.lower_ in self.rules.counted_nouns:
                return True
            if tok.is_punct or tok.tag_.startswith("NN"):
                return False
        return False

    def _hangs_on_places(self, span: Span, anchors: set[int], term_tokens: set[int]) -> bool:
        """Whether the nouns between a term and the mention are places or sizes.

        Walks up from the term; a noun that is neither a place noun, another
        term word nor part of the mention means the term describes something
        else ("effusion with a right-sided chest tube").
        """
        tok = span.root
        inside = anchors
        for _ in range(_MAX_PATH):
            if tok.i in inside or tok.head.i == tok.i:
                return True
            tok = tok.head
            if tok.i in inside:
                return True
            if (
                tok.tag_.startswith("NN")
                and tok.i not in term_tokens
                and tok.lower_ not in self.rules.place_nouns
                and not tok.lower_.isdigit()
            ):
                return False
        return True

    def _plural(self, mention: Span) -> AttributeEvidence | None:
        if mention.label_ not in self.rules.plural_labels:
            return None
        # without a parse every token is its own head: take the last word
        root = mention.root if mention.doc.has_annotation("DEP") else mention[-1]
        text = root.lower_
        plural = root.tag_ in ("NNS", "NNPS") if root.tag_ else text.endswith("s")
        if not plural or text.endswith(_SINGULAR_S):
            return None
        return AttributeEvidence(
            "count", "multiple", self.rules.plural_rule, root.idx, root.idx + len(root.text)
        )

    def _prior_state(self, span: Span) -> bool:
        """Whether a size or severity describes the previous study, not this one.

        "previously 12 mm", "increased from 2 cm", "decreased from moderate to
        small", "(prior: 9 mm)", "3 cm previously": the finding's current size and
        severity are the other values of the sentence.
        """
        doc = span.doc
        i = span.start - 1
        while i >= 0 and doc[i].lower_ in self.rules.prior_skip:
            i -= 1
        if i >= 0 and doc[i].lower_ in self.rules.prior_cues:
            return True
        after = span.end
        return (
            after < len(doc)
            and doc[after].lower_ in self.rules.prior_cues
            and doc[after].lower_ != "from"
            and (after + 1 == len(doc) or doc[after + 1].is_punct)
        )

    def _degree_of_change(self, span: Span, text: str, change_starts: set[int]) -> bool:
        """Whether a severity word (`span`, whose words are `text`) grades a change
        ("slightly worse", "mildly improved").

        "Slight interval increase in the effusion" says how much it grew, not how
        big it is; "small new effusion" keeps its severity (only degree words count).
        """
        if text.lower() not in self.rules.degree_words:
            return False
        i = span.end
        doc = span.doc
        while i not in change_starts and i < len(doc) and doc[i].lower_ == "interval":
            i += 1
        return i in change_starts

    def _coordinated_lobes(
        self, doc: Doc, text: str, out: list[tuple[Span, AttributeEvidence]]
    ) -> set[int]:
        """Lobes named together: "right upper and middle lobes", "left upper and lower lobe".

        Each lobe is looked up among the terms ("right middle lobe" → its term's
        id and values) and appended to `out`; returns the covered token indices.
        """
        covered: set[int] = set()
        if "lobe" not in text.lower():
            return covered
        for m in _COORDINATED_LOBES.finditer(text):
            span = doc.char_span(m.start(), m.end(), alignment_mode="expand")
            if span is None:
                continue
            side = m.group(1).lower()
            for zone in re.findall(r"upper|middle|mid|lower", m.group(2), re.IGNORECASE):
                term = self._lobe_terms.get(f"{side} {zone.lower()} lobe")
                if term is None:
                    continue  # no left middle lobe
                for key, value in term.sets:
                    out.append((span, AttributeEvidence(key, value, term.id, m.start(), m.end())))
            covered.update(range(span.start, span.end))
        return covered

    def _terms_in(self, doc: Doc, text: str) -> list[tuple[Span, AttributeEvidence]]:
        """Term and size matches: (token span, evidence), sizes winning over counts."""
        out: list[tuple[Span, AttributeEvidence]] = []
        size_tokens: set[int] = set()
        # a size holds a digit: most sentences have none, and the size regex tries each
        # character (its look-behind gives it no first character to skip ahead to)
        sizes = self.rules.size_pattern.finditer(text) if has_digit(text) else ()
        for m in sizes:
            span = doc.char_span(m.start(), m.end(), alignment_mode="expand")
            if span is None:
                continue
            size = self.rules.size_mm(m)
            size_tokens.update(range(span.start, span.end))
            if size <= 0 or self._prior_state(span):
                continue
            if self.rules.is_distance(text, m.end()):
                continue  # "tip 4.7 cm above the carina": how far, not how big
            out.append(
                (span, AttributeEvidence("size_mm", size, self.rules.size_rule, m.start(), m.end()))
            )
        coordinated = self._coordinated_lobes(doc, text, out)
        # the match id is the label's hash: a Span takes it as is, without hashing the name
        spans = [Span(doc, s, e, label=mid) for mid, s, e in self.matcher(doc)]
        kept = filter_spans(spans) if len(spans) > 1 else spans  # one: its own longest
        # each term span with its term (by the label's hash) and its words, cut from the
        # sentence (spaCy builds `span.text` from a Token per word)
        term_of = self._term_of
        found = [
            (span, term_of[span.label], text[span.start_char : span.end_char]) for span in kept
        ]
        change_starts = {span.start for span, term, _ in found if term.id in self._changing}
        # "slightly large": the degree word grades the size word, which gives no severity
        graded = {
            span.end
            for span, term, words in found
            if words.lower() in self.rules.degree_words and term.id in self._grading
        }
        for span, term, words in found:
            if any(i in size_tokens for i in range(span.start, span.end)):
                continue  # "8" in "8 mm" is a size, not a count
            if _masked_unit(doc, span, words):
                continue  # "10 XXXX nodule": the masked word after the number is its unit
            for key, value in term.sets:
                if key == "location" and span.start in coordinated:
                    continue  # "upper" of "right upper and middle lobes": a lobe, given above
                if key == "severity" and (
                    span.start in graded
                    or self._prior_state(span)
                    or self._degree_of_change(span, words, change_starts)
                ):
                    continue
                out.append(
                    (span, AttributeEvidence(key, value, term.id, span.start_char, span.end_char))
                )
        return out


def _masked_unit(doc: Doc, span: Span, text: str) -> bool:
    """Whether a number (`span`, whose words are `text`) is followed by a masked word and
    then a singular noun ("10 XXXX nodule": the de-identification hid "mm"), so it is no
    count; "2 XXXX masses" is one."""
    if not text.isdigit() or span.end + 1 >= len(doc) or doc[span.end].lower_ != "xxxx":
        return False
    noun = doc[span.end + 1]
    return noun.is_alpha and not looks_plural(noun.lower_)


#: part-of-speech tags of the words a pre-modifier run may pass over ("2.3 cm spiculated
#: mass", "small well-defined nodule"): adjectives and participles that are not terms
_PASSABLE_TAGS = frozenset({"JJ", "JJR", "JJS", "VBN", "VBG", "VBD", "HYPH"})
#: words joining two describing words inside a run of pre-modifiers ("left upper and right
#: upper lobe")
_PLACES_JOINED = frozenset({"and", "or"})
#: the tags of the describing words it joins: adjectives and adverbs, not a noun of another
#: finding ("levoscoliosis and mild dextroscoliosis", "left shoulder and ... right shoulder")
_JOINED_TAGS = frozenset({"JJ", "RB"})


def _premodifier_terms(
    doc: Doc,
    mention: Span,
    term_tokens: set[int],
    place_nouns: frozenset[str] = frozenset(),
    links: frozenset[str] = frozenset(),
    joiners: frozenset[str] = frozenset(),
    grade_then_change: tuple[set[int], set[int]] = (set(), set()),
) -> set[int]:
    """The term tokens in the unbroken run of modifiers right before `mention`.

    Term words may be separated by adjectives and participles that are not terms
    themselves, and by the place nouns a place word hangs on ("moderate left basilar lung
    consolidation"), and starts before a word written onto the mention with a slash ("mild
    ectasia/tortuosity"); a grade joined by one of `joiners` to a change after it is in the
    run too (`grade_then_change`: the ends of grade terms, the starts of change terms); the run
    ends at any other word, and at a word that links two
    findings (`links`: "slightly accentuated suggesting underlying emphysema" is no mild
    emphysema). On an unparsed doc (no tags), only term words make the run.
    """
    run: set[int] = set()
    i = mention.start - 1
    if i >= 1 and doc[i].text == "/" and not doc[i].whitespace_ and not doc[i - 1].whitespace_:
        # the other reading written onto it ("mild ectasia/tortuosity"): the run before both
        i -= 2
    while i >= 0:
        if i in term_tokens:
            run.add(i)
        elif (
            doc[i].lower_ in _PLACES_JOINED
            and i - 1 in term_tokens
            and i + 1 in run
            and doc[i - 1].tag_ in _JOINED_TAGS
            and doc[i + 1].tag_ in _JOINED_TAGS
        ):
            pass  # "stable appearing left upper and right upper lobe bullae": places joined
        elif (
            doc[i].lower_ in joiners
            and i in grade_then_change[0]
            and i + 1 in grade_then_change[1]
            and i + 1 in run
        ):
            pass  # a grade joined to a change: "small but increasing right effusion"
        elif doc[i].lower_ in links or (
            doc[i].tag_ not in _PASSABLE_TAGS and doc[i].lower_ not in place_nouns
        ):
            break
        i -= 1
    return run


def _readings_joined(doc: Doc, a: Span, b: Span) -> bool:
    """Whether only a word offering readings, then `b`'s own pre-modifiers, come between two
    mentions ("effusion versus minimal pleural thickening")."""
    between = doc[a.end : b.start]
    words = [t.lower_ for t in between]
    for n in range(len(words), 0, -1):
        if words[:n] in _READINGS_JOINED:
            return all(
                t.head.i in range(b.start, b.end) and t.dep_ in _COUNT_DEPS for t in between[n:]
            )
    return False


def _readings_tail(
    doc: Doc, mentions: Sequence[Span], idx: int, roots: set[int], denials: frozenset[str]
) -> tuple[set[int], set[int]]:
    """The words after the last of the readings offered for one finding that hang on any of
    them, and the readings' own words: "pleural effusion versus pleural thickening
    bilaterally" places both (not a list of what is not there: "no effusion or pneumothorax
    on the left")."""
    first = last = idx
    while first > 0 and _readings_joined(doc, mentions[first - 1], mentions[first]):
        first -= 1
    while last + 1 < len(mentions) and _readings_joined(doc, mentions[last], mentions[last + 1]):
        last += 1
    if first == last or any(t.lower_ in denials for t in doc[: mentions[first].start]):
        return set(), set()
    end = mentions[last].end
    tail: set[int] = set()
    for m in mentions[first : last + 1]:
        tail |= {i for i in _own_phrase(m.root, roots - {m.root.i}) if i >= end}
    readings = {i for m in mentions[first : last + 1] for i in range(m.start, m.end)}
    return tail, readings


def _own_phrase(
    root: Token, other_roots: set[int], places: frozenset[str] = frozenset()
) -> set[int]:
    """Token indices of the phrase headed by `root`, minus other items and mentions. A
    place noun's list of places (`places`) is its own: "consolidation in the right upper
    lobe and left lower lobe" is in both lobes, as are "nodules in the right apex and both
    lung bases" where the parse hangs the second place on the finding."""
    keep: set[int] = set()
    stack = [root]
    while stack:
        tok = stack.pop()
        keep.add(tok.i)
        for child in tok.children:
            if child.i in other_roots:
                continue
            if child.dep_ in _NOT_OWN and not (
                child.dep_ == "conj"
                and child.lower_ in places
                and (tok.lower_ in places or tok.i == root.i)
            ):
                continue
            stack.append(child)
    return keep


#: the dependencies of the words before a list's first item that describe its other items
#: too, when the list offers readings ("X or Y")
_SHARED_PREMODIFIERS = frozenset({"amod", "advmod", "nummod"})


def _scope(
    mention: Span,
    mention_roots: set[int],
    links: frozenset[str] = frozenset(),
    denials: frozenset[str] = frozenset(),
    places: frozenset[str] = frozenset(),
    place_verbs: frozenset[str] = frozenset(),
) -> tuple[set[int], set[int], set[int]]:
    """Tokens that may describe `mention` on the parse, its own pre-modifiers, and anchors.

    Anchors are the tokens that stand for the finding itself: the mention, its
    predicate, a governing noun, the other name of an apposition.
    """
    root = mention.root
    anchors = set(range(mention.start, mention.end))
    others = mention_roots - {root.i}
    scope = _own_phrase(root, others, places) | set(range(mention.start, mention.end))
    np_left = {
        i
        for i in scope
        if i < root.i and (i >= mention.start or _left_modifier(mention.doc[i], root))
    }
    # list items share the predicate of the list's first item
    head = root
    while head.dep_ == "conj" and head.head.i != head.i:
        head = head.head
    doc = mention.doc
    if (
        head.i != root.i
        and mention.start >= 2
        and doc[mention.start - 1].lower_ == "or"
        and mention.start - 2 == head.i  # "X or Y", not a list ("A, B, or C")
        and not any(t.lower_ in denials for t in doc[: head.i])
    ):
        # "minimal scarring or atelectasis": two readings of one finding share the first's
        # describing words
        shared = {c.i for c in head.children if c.i < head.i and c.dep_ in _SHARED_PREMODIFIERS}
        scope |= shared
        np_left |= shared
        anchors.add(head.i)
    for _ in range(_MAX_UP):
        parent = head.head
        if parent.i == head.i:
            break
        if head.dep_ == "appos":
            # "opacity in the left lower lobe, likely atelectasis": one finding, two
            # names (the parser may hang the apposition on "lobe")
            named = parent
            for _ in range(_MAX_UP):
                if named.i in others:
                    scope |= _own_phrase(named, others - {named.i}, places)
                    anchors.add(named.i)
                    break
                if named.head.i == named.i:
                    break
                named = named.head
            break
        if head.dep_ in _ARGUMENT:
            scope.add(parent.i)
            anchors.add(parent.i)
            for child in parent.children:
                if child.i == head.i or child.i in others:
                    continue
                if child.dep_ in _PREDICATE_PARTS or (
                    child.dep_ == "advcl" and child.lower_ in place_verbs
                ):
                    scope |= _own_phrase(child, others, places)
            break
        if head.dep_ == "pobj" and parent.dep_ == "prep":
            # "no change in A", "increase in the size of A": the governing noun
            noun = parent.head
            if noun.i == parent.i or noun.i in others:
                break
            scope.update((parent.i, noun.i))
            anchors.update((parent.i, noun.i))
            scope.update(c.i for c in noun.children if c.dep_ in ("det", "amod", "compound", "neg"))
            # "the appearance of the XXXX opacities in the bilateral lower lobes": the
            # parse may hang the finding's place on the governing noun, after the finding
            for c in noun.children:
                if c.dep_ == "prep" and c.i >= mention.end and c.i != parent.i:
                    scope |= _own_phrase(c, others, places)
            head = noun
            continue
        break
    linked = _linked_noun(root, links)
    if linked is not None:
        scope |= _own_phrase(linked, others - {linked.i})
        anchors.add(linked.i)
    if (
        # the parser tags a noun before a noun "amod" at times ("mass progression")
        root.dep_ in ("compound", "amod")
        and root.head.tag_.startswith("NN")
        and root.head.i == mention.end
        and root.head.i not in others
        and not any(t.lower_ in denials for t in doc[mention.sent.start : mention.start])
    ):
        # "possible tumor progression": the noun the finding's name modifies says its course
        # (not where it is denied: "no tumor progression" is no change, not a worse tumor)
        scope.add(root.head.i)
        anchors.add(root.head.i)
    return scope, np_left, anchors


#: how many words before a side a word that makes it the reference may come ("compared to
#: the left", "than on the left")
_REFERENCE_WITHIN = 3


#: how many words after a change term its comparison may come ("increased in size compared
#: to prior study", "unchanged from prior")
_COMPARED_WITHIN = 4


def _orphan_changes(
    doc: Doc,
    mentions: Sequence[Span],
    found: Sequence[tuple[Span, AttributeEvidence]],
    out: list[list[AttributeEvidence]],
    comparison_words: frozenset[str],
) -> None:
    """A change no mention's scope holds, compared with an earlier study, goes to the
    nearest mention before it that has none: "mass measuring 6.8 cm, increased in size
    compared to prior study, most compatible with neoplasm" (unparsed, the stretch of each
    mention stops at a comma; a parse makes "increased" the sentence's root). With one
    mention, its stretch is the whole sentence and the change is its own anyway; one with
    no comparison ("to document resolution", "increased AP diameter") is no finding's."""
    given = {id(ev) for mine in out for ev in mine}
    for span, ev in found:
        if ev.attribute != "change" or id(ev) in given:
            continue
        if any(m.start < span.end and span.start < m.end for m in mentions):
            continue  # a word of a finding's own name ("increased markings")
        compared = doc[span.start : span.end + _COMPARED_WITHIN]  # "not present on the prior"
        if not any(t.lower_ in comparison_words for t in compared):
            continue
        before = [i for i, m in enumerate(mentions) if m.end <= span.start]
        if before and not any(e.attribute == "change" for e in out[before[-1]]):
            out[before[-1]].append(ev)


#: the prepositions after a governing noun ("unchanged appearance of", "no change in")
_GOVERNING_PREPOSITIONS = frozenset({"of", "in"})
#: how many words may join two items of such a list ("and scattered calcified")
_LIST_GAP = 4


def _governing_words(doc: Doc, mentions: Sequence[Span], idx: int) -> set[int]:
    """Without a parse: the words of the noun that governs a list, before its preposition,
    when mention `idx` is a later item of the list ("Grossly unchanged appearance of A and
    scattered B": B takes the change of "unchanged appearance" as A does)."""
    first = idx
    while first > 0:
        between = doc[mentions[first - 1].end : mentions[first].start]
        if (
            not len(between)
            or between[0].lower_ not in _LIST_JOINERS
            or len(between) > _LIST_GAP
            or any(t.lower_ not in _LIST_JOINERS and _is_break(t) for t in between[1:])
        ):
            break
        first -= 1
    if first == idx:
        return set()
    floor = mentions[first - 1].end if first > 0 else 0
    stretch = _unbroken(doc, range(mentions[first].start - 1, floor - 1, -1))
    for k, i in enumerate(stretch):
        if doc[i].lower_ in _GOVERNING_PREPOSITIONS:
            return set(stretch[k + 1 :])
    return set()


def _linked_noun(root: Token, links: frozenset[str]) -> Token | None:
    """The noun that a link word says is the same finding as `root`, if any.

    "opacities likely representing atelectasis": the subject of the link verb;
    "opacity consistent with atelectasis", "angle which may represent an
    effusion": the noun the link hangs on.
    """
    tok = root
    for _ in range(_MAX_UP):
        link = tok.head
        if link.i == tok.i:
            return None
        if link.lower_ in links:
            for child in link.children:
                if child.dep_ in ("nsubj", "nsubjpass") and child.tag_.startswith("NN"):
                    return child
            up = link
            for _ in range(3):
                if up.head.i == up.i:
                    return None
                up = up.head
                if up.tag_.startswith("NN"):
                    return up
            return None
        tok = link
    return None


def _left_modifier(tok: Token, root: Token) -> bool:
    """Whether `tok` is a pre-modifier chain of `root` (not inside a prepositional phrase)."""
    while tok.i != root.i:
        if tok.dep_ not in _COUNT_DEPS or tok.head.i == tok.i:
            return False
        tok = tok.head
    return True


def _is_break(token: Token) -> bool:
    return token.is_punct or token.lower_ in _BREAKS


def _joins_levels(doc: Doc, i: int, mention: Span) -> bool:
    """Whether the word at `i` joins two levels just before the mention ("stable T9 and T12
    XXXX fractures": the levels are the finding's, and so is the word before them)."""
    return (
        doc[i].lower_ in ("and", "or")
        and i > 0
        and mention.start - i <= 3
        and _LEVEL.match(doc[i - 1].text) is not None
        and _LEVEL.match(doc[i + 1].text) is not None
    )


def _is_link(doc: Doc, i: int, links: frozenset[str], masked_after: frozenset[str]) -> bool:
    """Whether the word at `i` says two names are one finding: a link word, or the
    de-identification's mask where one stood, right after a copula ("opacities in the left
    upper lobe are XXXX atelectatic")."""
    word = doc[i].lower_
    return word in links or (word == _MASK and i > 0 and doc[i - 1].lower_ in masked_after)


def _unbroken(doc: Doc, indices: Iterable[int]) -> list[int]:
    """The indices taken in order up to the first break."""
    return list(itertools.takewhile(lambda i: not _is_break(doc[i]), indices))


def _place_joined_after(
    doc: Doc,
    mention: Span,
    scope: set[int],
    found: Sequence[tuple[Span, AttributeEvidence]],
    roots: set[int],
    place_nouns: frozenset[str],
) -> set[int]:
    """The place terms joined by "and"/"or" to a place of the finding after it, whatever the
    parse ("haziness in the right lung and left base", where "left" may be read as a verb);
    not a place that runs into the next finding as its own pre-modifier ("in the right base
    and left lower lobe opacity")."""
    places = {span.start: span.end for span, ev in found if ev.attribute in _PLACES}
    out: set[int] = set()
    for start, end in sorted(places.items()):
        j = start - 1
        if (
            j <= mention.end
            or doc[j].lower_ not in _PLACES_JOINED
            or j - 1 not in scope
            or j - 1 in out
        ):
            continue
        before = doc[j - 1].lower_
        if before not in place_nouns and not any(e == j for e in places.values()):
            continue
        # the place's own nouns after it ("left lung base"), then no finding of its own
        k = end
        while k < len(doc) and doc[k].lower_ in place_nouns:
            k += 1
        if k < len(doc) and (k in roots or doc[k].tag_.startswith("NN")):
            continue
        out.update(range(start, k))
    return out


def _places_joined(
    doc: Doc, mentions: Sequence[Span], found: Sequence[tuple[Span, AttributeEvidence]]
) -> frozenset[int]:
    """The "and"/"or" words that join two place terms of one place after a finding ("in the
    right mid and upper lung zone with clips"), not a place that runs into the next finding
    as its own pre-modifier ("in the right base and left lower lobe opacity")."""
    ends = {span.end for span, ev in found if ev.attribute in _PLACES}
    after = {span.start: span.end for span, ev in found if ev.attribute in _PLACES}
    starts = {m.start for m in mentions}
    return frozenset(
        i
        for i in ends
        if i < len(doc)
        and doc[i].lower_ in _PLACES_JOINED
        and after.get(i + 1) is not None
        and after[i + 1] not in starts
    )


def _window(
    doc: Doc,
    mentions: Sequence[Span],
    idx: int,
    denials: frozenset[str] = frozenset(),
    links: frozenset[str] = frozenset(),
    masked_after: frozenset[str] = frozenset(),
    places_joined: frozenset[int] = frozenset(),
    determiners: frozenset[str] = frozenset(),
) -> tuple[set[int], set[int]]:
    """Without a parse: the stretch between the neighbouring mentions, split at punctuation.

    The words between two mentions go to the following one, unless a word that says they
    are one finding comes between them ("opacity in the left lower lobe XXXX represents
    atelectasis"): the words before it are the first one's too. A word of `places_joined`
    ("and" between two place words of one place) does not split it."""
    mention = mentions[idx]
    lo = mentions[idx - 1].end if idx > 0 else 0
    hi = mentions[idx + 1].start if idx + 1 < len(mentions) else len(doc)
    if idx > 0:  # words between two mentions go to the following one up to a break
        for i in range(mention.start - 1, lo - 1, -1):
            if _is_break(doc[i]) and not _joins_levels(doc, i, mention):
                lo = i + 1
                break
    if idx + 1 < len(mentions):
        for i in range(mention.end, hi):
            if i in places_joined:
                continue  # "scarring in the right mid and upper lung zone with clips"
            if _is_break(doc[i]) or _is_link(doc, i, links, masked_after):
                hi = i
                break
        else:
            hi = mention.end
    scope = set(range(lo, hi))
    # "consolidation and atelectasis have developed in the right lower lobe": the items of
    # a bare list share what follows its last item, a determiner after its joiner too
    # ("consolidation and some atelectasis")
    last = idx
    while last + 1 < len(mentions) and all(
        doc[i].lower_ in _LIST_JOINERS or (i > mentions[last].end and doc[i].lower_ in determiners)
        for i in range(mentions[last].end, mentions[last + 1].start)
    ):
        last += 1
    if last > idx:
        tail_end = mentions[last + 1].start if last + 1 < len(mentions) else len(doc)
        scope.update(_unbroken(doc, range(mentions[last].end, tail_end)))
    # "minimal scarring or atelectasis": readings offered for one finding share the words
    # before the first
    first = idx
    while (
        first > 0
        and [doc[i].lower_ for i in range(mentions[first - 1].end, mentions[first].start)]
        in _READINGS_JOINED
    ):
        first -= 1
    # ... not "no consolidation, large effusion or pneumothorax", a list of what is not there
    if first < idx and not any(t.lower_ in denials for t in doc[: mentions[first].start]):
        floor = mentions[first - 1].end if first > 0 else 0
        scope.update(_unbroken(doc, range(mentions[first].start - 1, floor - 1, -1)))
    np_left = set()
    for i in range(mention.start - 1, lo - 1, -1):
        if doc[i].is_punct or doc[i].lower_ in ("of", "in", "with", "and", "or", "is", "are"):
            break
        np_left.add(i)
    np_left |= set(range(mention.start, mention.end))
    return scope, np_left


def _values(
    evidence: Sequence[AttributeEvidence],
    severity_order: Sequence[str],
    plural: AttributeEvidence | None,
) -> tuple[dict[str, Any], tuple[AttributeEvidence, ...]]:
    if plural is not None and not any(e.attribute == "count" for e in evidence):
        evidence = [*evidence, plural]
    if not evidence:
        return {}, ()  # most mentions: nothing to merge
    # a new list: `evidence` may serve other mentions at the same offsets
    ordered = sorted(evidence, key=lambda e: (e.start, e.end))
    return merge_attributes(ordered, severity_order), tuple(ordered)


def conflicting(evidence: Iterable[AttributeEvidence]) -> bool:
    """Whether evidence gives one attribute two different values (left and right...).

    On a sentence that was not parsed, such a mention is worth a parse: the
    second value may describe another noun ("left effusion, right chest tube").
    """
    seen: dict[str, str | int | float] = {}
    for ev in evidence:
        if ev.attribute == "location":
            continue
        if seen.setdefault(ev.attribute, ev.value) != ev.value:
            return True
    return False


def merge_attributes(
    evidence: Iterable[AttributeEvidence], severity_order: Sequence[str]
) -> dict[str, Any]:
    """Combine evidence into one value per attribute.

    Left plus right is bilateral; locations are a list in order of appearance;
    the highest severity and the largest size win; "multiple" wins over a
    number, and a larger number over a smaller one; the last change word wins
    ("new ..., since improved").
    """
    values: dict[str, Any] = {}
    for ev in evidence:
        key, value = ev.attribute, ev.value
        old = values.get(key)
        if key == "location":
            values.setdefault(key, [])
            if value not in values[key]:
                values[key].append(value)
        elif old is None:
            values[key] = value
        elif key == "laterality":
            if old != value:
                values[key] = "bilateral"
        elif key == "severity":
            values[key] = max(old, value, key=severity_order.index)
        elif key == "size_mm":
            values[key] = max(old, value)
        elif key == "count":
            values[key] = _larger_count(old, value if isinstance(value, str) else int(value))
        else:
            values[key] = value
    return {k: values[k] for k in ATTRIBUTE_KEYS if k in values}


def _larger_count(a: str | int, b: str | int) -> str | int:
    if a == "multiple" or b == "multiple":
        return "multiple"
    return max(int(a), int(b))


def has_digit(text: str) -> bool:
    """Whether any character of `text` is a digit (`str.isdigit`, which `\\d` is not: "²"),
    which a size or a count needs: in ASCII text the digits are 0-9, searched for at a
    third of the time of mapping `str.isdigit` over the characters in C."""
    if text.isascii():
        return _ASCII_DIGIT.search(text) is not None
    return any(map(str.isdigit, text))


_ASCII_DIGIT = re.compile(r"[0-9]")
#: the word right after a position, past spaces only ("4.7 cm above": "above")
_NEXT_WORD = re.compile(r"\s+([A-Za-z]+)")


def looks_plural(word: str) -> bool:
    """Whether a lower-cased word reads as a plural by its ending alone ("nodules", not
    "mass" or "metastasis")."""
    return word.endswith("s") and not word.endswith(_SINGULAR_S)


def stated_count(mentions: Iterable[Any], plural_rule: str) -> str | int | None:
    """How many of a finding several mentions of it state: the largest number a mention
    gives ("Two nodules ... 2 right lung nodules": 2), else "multiple" when one says so or
    is plural, else None. A plural's "multiple" ("the nodules") yields to a number, since it
    only says there is more than one; a word that says "multiple" ("numerous") does not.
    """
    numbers, plural, multiple = [], False, False
    for m in mentions:
        count = m.attributes.get("count")
        if isinstance(count, int):
            numbers.append(count)
        elif count == "multiple":
            evidence = getattr(m, "attribute_evidence", ())
            rules = {ev.get("rule") for ev in evidence if ev.get("attribute") == "count"}
            if rules and rules <= {plural_rule}:
                plural = True
            else:
                multiple = True
    if multiple:
        return "multiple"
    if numbers:
        return max(numbers)
    return "multiple" if plural else None


def aggregate_findings(
    mentions: Iterable[Any],
    labels: Mapping[str, str],
    severity_order: Sequence[str],
    plural_rule: str = PLURAL_RULE,
) -> dict[str, dict[str, Any]]:
    """Per-label findings of a report from its mentions' attributes.

    Each label with a status other than absent gets `status` plus the
    attributes of the mentions that share that status: left plus right gives
    bilateral, the largest size, the highest severity, the union of locations,
    the count they state (`stated_count`). `change` is that of the most certain
    mention that has one (positive, then uncertain, then negative).

    Args:
        mentions: objects with `label`, `status`, `attributes` (and
            `attribute_evidence`, whose rule ids tell a plural's count).
        labels: the report's status per label.
        severity_order: the severities, mildest first.
        plural_rule: the rule id of a count read from a plural noun.

    Returns:
        {label: {"status", "laterality", "location", ...}}, keys without a value left out.
    """
    by_label: dict[str, list[Any]] = {}
    for m in mentions:
        if labels.get(m.label, "absent") != "absent":
            by_label.setdefault(m.label, []).append(m)
    out: dict[str, dict[str, Any]] = {}
    for label, status in labels.items():
        if status == "absent":
            continue
        ms = [m for m in by_label.get(label, ()) if m.attributes]
        if not ms:  # the common case: nothing to merge
            out[label] = {"status": status}
            continue
        merged = merge_attributes(
            (
                ev
                for m in ms
                if m.status == status
                for ev in _as_evidence(m.attributes)
                if ev.attribute not in ("change", "count")
            ),
            severity_order,
        )
        count = stated_count((m for m in ms if m.status == status), plural_rule)
        if count is not None:
            merged["count"] = count
        changed = [m for m in ms if m.attributes.get("change")]
        if changed:
            best = max(changed, key=lambda m: _STATUS_RANK.get(m.status, 0))
            merged["change"] = best.attributes["change"]
        out[label] = {"status": status, **{k: merged[k] for k in ATTRIBUTE_KEYS if k in merged}}
    return out


def _as_evidence(values: Mapping[str, Any]) -> list[AttributeEvidence]:
    out = []
    for key, value in values.items():
        for v in value if key == "location" else (value,):
            out.append(AttributeEvidence(key, v, "", 0, 0))
    return out
