"""Custom spaCy components of the labeler.

- `cxr_concepts` (`ConceptMatcher`): finds concept mentions on tokens alone
  (no parse needed) and stores them in `doc.spans["cxr_mentions"]`.
- `cxr_dep_rules` (`DependencyRules`): decides each mention's status from the
  dependency parse with the rules of `patterns/rules.v*.yaml`.

Nothing is registered at import; `register()` adds the factories and the span
extensions (idempotent). Matching is kept apart from annotating (`find` /
`decide` vs `__call__`) so `labeler.pipeline` can run the parser only on the
sentences that need it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate
from typing import TypeVar

from spacy.language import Language
from spacy.matcher import Matcher, PhraseMatcher
from spacy.tokenizer import Tokenizer
from spacy.tokens import Doc, Span, Token
from spacy.util import filter_spans, registry

from labeler.required_words import RequiredWords
from labeler.vocabulary import Rule, load_concepts, load_rules, opens_aside

__all__ = [
    "HEDGED",
    "MENTIONS_KEY",
    "MODEL_TOKENIZER",
    "ConceptMatcher",
    "DependencyRules",
    "Verdict",
    "register",
]

#: `doc.spans` key holding the concept mentions.
MENTIONS_KEY = "cxr_mentions"
#: Tokenizer factory of a tokenizer without rules or affix patterns, for a model whose
#: own tokenizer file sets them all on load (`labeler.pipeline.build_nlp`).
MODEL_TOKENIZER = "cxr.model_tokenizer.v1"
#: `kb_id` of a mention found by a hedged phrase: at most uncertain
HEDGED = "hedged"
_EXCLUDE_PREFIX = "!"
_HEDGED_PREFIX = "~"
# Parts of speech of clause heads: a `conj` arc between two of them joins
# clauses, and negation does not cross it ("no A and there is B").
_CLAUSAL_TAGS = ("VB", "MD")
_MAX_PATH = 10
# Tokens that may sit inside a coordinated noun list ("no focal consolidation,
# large pleural effusion, or pneumothorax"): nouns, adjectives, participles used
# as adjectives, commas, slashes, hyphens, "of", conjunctions.
_LIST_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS", "JJ", "JJR", "JJS", "VBN", ",", "HYPH", "CC"})
# "xxxx": the de-identification placeholder of OpenI/MIMIC-style reports
_LIST_WORDS = frozenset({"of", "/", "and", "or", "nor", "xxxx"})
# coordinating conjunctions that close a comma list ("no A, B, or C")
_LIST_CLOSERS = frozenset({"or", "nor", "and"})
_OR_NOR = _LIST_CLOSERS - {"and"}
_ITEM, _OPEN, _CUT = "item", "open", "cut"
# "Pneumothorax: none", "Edema - none", "Pneumothorax? No."
_FIELD_SEPARATORS = frozenset({":", "-", "\u2013", "\u2014", "?"})
_SUBJECTS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"})
_OBJECTS = frozenset({"dobj", "attr", "oprd"})
_T = TypeVar("_T")


@dataclass(frozen=True)
class Verdict:
    """Status of one mention, the id of the rule that decided it (None: plain positive),
    the text of the cue that fired and the cue's root token."""

    status: str
    rule: str | None
    cue: str | None = None
    cue_root: Token | None = field(default=None, compare=False)


#: the verdict of a mention no rule reaches (immutable: one for all)
_PLAIN = Verdict("positive", None)


class ConceptMatcher:
    """Find mentions of the labels' concepts with a PhraseMatcher and a Matcher.

    Args:
        nlp: the pipeline whose vocab and tokenizer build the patterns.
        name: component name.
        concepts: concept set name (`concepts.v1`) or path to a YAML file.
    """

    def __init__(
        self,
        nlp: Language,
        name: str = "cxr_concepts",
        concepts: str = "concepts.v1",
        profile: str | None = None,
    ):
        self.name = name
        self.concepts = concepts
        self.phrases = PhraseMatcher(nlp.vocab, attr="LOWER")
        self.tokens = Matcher(nlp.vocab)
        concept_set = load_concepts(concepts, profile).concepts
        for concept in concept_set:
            if concept.phrases:
                self.phrases.add(concept.label, [nlp.make_doc(p) for p in concept.phrases])
            if concept.hedged:
                self.phrases.add(
                    _HEDGED_PREFIX + concept.label, [nlp.make_doc(p) for p in concept.hedged]
                )
            if concept.exclude:
                self.phrases.add(
                    _EXCLUDE_PREFIX + concept.label, [nlp.make_doc(p) for p in concept.exclude]
                )
            if concept.patterns:
                self.tokens.add(concept.label, [list(p) for p in concept.patterns])
        self._strings = nlp.vocab.strings
        # the token patterns run only on a sentence that may hold a match
        self._token_words = RequiredWords(p for c in concept_set for p in c.patterns)

    def find(self, doc: Doc, words: Sequence[str] | None = None) -> list[Span]:
        """Mentions in `doc`, longest match per label, minus excluded phrases.

        Args:
            doc: a tokenized sentence.
            words: its lower-cased tokens, when the caller has them.

        Returns:
            Spans labelled with the label name (or `Other`), in text order.
        """
        matches = self.phrases(doc)
        if self._token_words.may_match([t.lower_ for t in doc] if words is None else words):
            matches = [*matches, *self.tokens(doc)]
        if not matches:
            return []
        found: dict[str, list[Span]] = {}
        excluded: dict[str, list[tuple[int, int]]] = {}
        for match_id, start, end in matches:
            key = self._strings[match_id]
            if key.startswith(_EXCLUDE_PREFIX):
                excluded.setdefault(key[1:], []).append((start, end))
            elif key.startswith(_HEDGED_PREFIX):
                label = key[1:]
                found.setdefault(label, []).append(Span(doc, start, end, label=label, kb_id=HEDGED))
            else:  # the match id is the label's hash: taken as is, without hashing `key`
                found.setdefault(key, []).append(Span(doc, start, end, label=match_id))
        out: list[Span] = []
        for label, spans in found.items():
            blocked = excluded.get(label, [])
            # one span is its own longest match (most labels of a sentence)
            for span in filter_spans(spans) if len(spans) > 1 else spans:
                if not any(s < span.end and span.start < e for s, e in blocked):
                    out.append(span)
        out.sort(key=lambda s: (s.start, s.end))
        return out

    def __call__(self, doc: Doc) -> Doc:
        doc.spans[MENTIONS_KEY] = self.find(doc)
        return doc


class DependencyRules:
    """Decide positive / negative / uncertain for each mention from the parse.

    Args:
        nlp: the pipeline (its vocab and tokenizer build the cue patterns).
        name: component name.
        rules: rule set name (`rules.v1`) or path to a YAML file.
    """

    def __init__(self, nlp: Language, name: str = "cxr_dep_rules", rules: str = "rules.v1"):
        self.name = name
        self.rule_set = load_rules(rules)
        self.matcher = PhraseMatcher(nlp.vocab, attr="LOWER")
        for i, rule in enumerate(self.rule_set.rules):
            self.matcher.add(str(i), [nlp.make_doc(c) for c in rule.cues])
        self._strings = nlp.vocab.strings
        # (words of a cue, whether it needs a field separator): a `field` rule only
        # fires on "Name: value", so its cues ("seen", "present", "normal") do not
        # send every sentence that holds them to the parser
        self._cue_wordsets = [
            (frozenset(c.split()), r.scope == "field") for r in self.rule_set.rules for c in r.cues
        ]
        # each cue's words filed under one of them: a sentence checks only the cues one of
        # its own words can start, not every cue of every rule
        self._cues_by_word: dict[str, list[tuple[frozenset[str], bool]]] = {}
        for ws, needs in self._cue_wordsets:
            if ws:
                self._cues_by_word.setdefault(min(ws), []).append((ws, needs))
        self._cue_starts = frozenset(self._cues_by_word)
        self._separators = frozenset(_FIELD_SEPARATORS)
        self._relation_preps = self.rule_set.relation_preps

    def may_apply(self, words: Iterable[str]) -> bool:
        """Whether any cue could match a sentence made of these lower-cased words.

        A sentence for which this is False needs no parse: its mentions are positive.
        """
        present = set(words)
        # the words that start a cue, picked out in C: most sentences have none
        starts = present & self._cue_starts
        if not starts:
            return False
        field = not present.isdisjoint(self._separators)
        by_word = self._cues_by_word
        return any(
            ws <= present and (field or not needs) for word in starts for ws, needs in by_word[word]
        )

    def cues(self, doc: Doc, words: Sequence[str] | None = None) -> list[list[Span]]:
        """Cue matches of each rule in `doc` (index = rule order). `doc` must be parsed.

        The result also carries the doc's list index (built on first use), so
        deciding every mention of a long sentence stays linear in its length.

        Args:
            doc: a parsed doc.
            words: its lower-cased tokens, when the caller has them.
        """
        per_rule = _DocCues([] for _ in self.rule_set.rules)
        per_rule.words = words
        for match_id, start, end in self.matcher(doc):
            per_rule[int(self._strings[match_id])].append(doc[start:end])
        return per_rule

    def cues_for_new_mentions(self, cues: list[list[Span]]) -> list[list[Span]]:
        """`cues` of a doc (from `self.cues`) for another set of its mentions, put in
        `doc.spans` since: the cue matches, which do not depend on the mentions, are
        kept, and so are the tables of the list index that do not."""
        return cues.for_other_mentions() if isinstance(cues, _DocCues) else cues

    def decide(self, mention: Span, cues: list[list[Span]] | None = None) -> Verdict:
        """The verdict for one mention of a parsed doc.

        Args:
            mention: a span of a parsed Doc.
            cues: `self.cues(mention.doc)`, passed in when deciding several
                mentions of one doc.

        Returns:
            The first applicable rule's status and id, else positive with rule None.
        """
        if cues is None:
            cues = self.cues(mention.doc)
        # the rules with a cue in the doc, in rule order: most have none
        matched = cues.matched if isinstance(cues, _DocCues) else None
        if matched is None:
            matched = [
                (rule, roots)
                for rule, roots in zip(self.rule_set.rules, cues, strict=True)
                if roots
            ]
            if isinstance(cues, _DocCues):
                cues.matched = matched
        if not matched:
            return _PLAIN  # no cue: no rule applies, nothing to walk
        if isinstance(cues, _DocCues):
            if cues.list_index is None:
                cues.list_index = _ListIndex(
                    mention.doc,
                    self.rule_set.list_breakers,
                    self.rule_set.clause_breakers,
                    self.rule_set.aside_openers,
                    tokens=cues.tokens,
                    words=cues.words,
                )
                cues.tokens = cues.list_index.tokens
            index = cues.list_index
        else:
            index = _ListIndex(
                mention.doc,
                self.rule_set.list_breakers,
                self.rule_set.clause_breakers,
                self.rule_set.aside_openers,
            )
        root = mention.root
        # the dependency walk only reaches the first _MAX_PATH tokens up from
        # the root: a cue whose target is not among them cannot fire by path
        ancestors = {root.i}
        tok = root
        for _ in range(_MAX_PATH - 1):
            if tok.head.i == tok.i:
                break
            tok = tok.head
            ancestors.add(tok.i)
        for rule, roots in matched:
            for cue in roots:
                if self._applies(rule, cue, root, mention, index, ancestors, self._relation_preps):
                    return Verdict(rule.status, rule.id, cue.text, cue.root)
        return _PLAIN

    @staticmethod
    def _applies(
        rule: Rule,
        cue_span: Span,
        root: Token,
        mention: Span,
        index: _ListIndex,
        ancestors: set[int],
        relation_preps: frozenset[str] = frozenset(),
    ) -> bool:
        cue = cue_span.root
        if rule.cue_dep and cue.dep_ not in rule.cue_dep:
            return False
        # A cue inside the mention negates it only through the tree
        # ("heart is not enlarged"); one that holds the mention root does not.
        if cue_span.start <= root.i < cue_span.end:
            return False
        if rule.after_cue and mention.start < cue_span.start:
            return False  # "opacity suggestive of pneumonia": the opacity is seen
        if (
            mention.end <= cue_span.start
            and index.tokens.clause[cue_span.start] > index.tokens.clause[mention.end]
        ):
            # "opacities ..., however other etiologies cannot be excluded": the cue's clause
            # is one of its own, whatever the parse hangs on it
            return False
        if (
            cue_span.end <= mention.start
            and index.tokens.aside[cue_span.end] < index.tokens.aside[mention.start]
        ):
            # "no effusion (blunting may represent small effusions)": the aside is a
            # statement of its own
            return False
        if rule.scope == "list":
            if rule.adjacent and index.has_comma(cue_span.end, mention.start):
                return False
            return index.in_list(cue_span.end - 1, mention) == _ITEM
        if rule.scope == "field":
            return index.is_field_value(cue_span, mention)
        if rule.scope == "cue":
            # any word of a multi-word cue: in "difficult to exclude A" the
            # parser hangs "exclude" off the copula, not off "difficult"
            targets = {t.i for t in cue_span}
        else:
            if cue.head.i == cue.i:
                return False
            targets = {cue.head.i}
        # a hedge after the mention that hangs on a word of it below its root hedges the
        # mention ("air trapping versus inspiratory effort": "versus" on "trapping"); a
        # negation does not ("the lungs are clear without ..."), nor a word before it
        # ("age-indeterminate wedge deformity")
        within = (
            rule.status == "uncertain"
            and cue_span.start >= mention.end
            and any(mention.start <= t < mention.end for t in targets)
        )
        if not within and targets.isdisjoint(ancestors):
            return False
        # the parse joins "no A, mild B" by conj or appos (or hangs "no" on
        # B): an item of its own in an unclosed comma list is out of reach
        if (
            index.has_comma(cue_span.end, mention.start)
            and index.in_list(cue_span.end - 1, mention) == _CUT
        ):
            return False
        if within:
            return True
        tok = root
        for _ in range(_MAX_PATH):
            if tok.i in targets:
                return True
            dep = tok.dep_
            if _is_verb_left(tok.head) and dep == "dobj":
                dep = "amod"  # "and left effusion": see _is_verb_left
            if tok.head.i == tok.i or dep not in rule.via:
                return False
            if dep == "relcl" and _runs_on(tok):
                return False
            if (
                tok.head.i in targets
                and tok.dep_ in _SUBJECTS
                and rule.subject != "yes"
                and (
                    rule.subject == "no"
                    or any(
                        # the cue itself as the object ("A is borderline") does not count
                        (c.dep_ in _OBJECTS and not cue_span.start <= c.i < cue_span.end)
                        # "A may be related to B": B is what the hedge is about
                        or (
                            c.dep_ == "prep"
                            and c.lower_ in relation_preps
                            and any(index.in_mention[t.i] for t in c.subtree)
                        )
                        for c in tok.head.children
                    )
                )
            ):
                return False
            if (
                dep == "conj"
                and not rule.clausal_conj
                and tok.tag_.startswith(_CLAUSAL_TAGS)
                and not _is_verb_left(tok)
                # the finding itself is a noun, whatever its tag ("scarring or infiltrate")
                and tok.i != root.i
            ):
                return False
            tok = tok.head
        return False

    def __call__(self, doc: Doc) -> Doc:
        cues = self.cues(doc)
        for span in doc.spans.get(MENTIONS_KEY, []):
            verdict = self.decide(span, cues)
            span._.cxr_status = verdict.status
            span._.cxr_rule = verdict.rule
        return doc


def _runs_on(clause: Token) -> bool:
    """Whether a clause the parser hangs on a noun as a relative clause is a sentence run on
    after it: its subject is a noun phrase with a determiner of its own, not a relative
    pronoun ("There is no pneumothorax the lungs are hyperinflated": the lungs are).
    """
    return any(
        c.dep_ in _SUBJECTS and c.tag_.startswith("NN") and any(d.dep_ == "det" for d in c.children)
        for c in clause.children
    )


def _is_verb_left(tok: Token) -> bool:
    """ "left" read as the verb "leave" in "no right pneumothorax or left effusion".

    The small English model tags a laterality "left" after a conjunction as a
    past-tense verb with the finding as its object; the rules read it as the
    adjective it is.
    """
    return tok.lower_ == "left" and tok.tag_.startswith("VB")


class _DocCues(list[list[Span]]):
    """Cue matches per rule, plus the doc's `_ListIndex` once built."""

    list_index: _ListIndex | None = None
    #: the list index's tables that hold for any mentions of the doc, once built
    tokens: _TokenTables | None = None
    #: the doc's lower-cased tokens, when the caller gave them
    words: Sequence[str] | None = None
    #: (rule, its cue matches) of the rules with any, in rule order, once listed
    matched: list[tuple[Rule, list[Span]]] | None = None

    def for_other_mentions(self) -> _DocCues:
        """The same cue matches, for another set of mentions of the same doc (set in
        `doc.spans` before deciding them): their list index is built afresh when first
        needed, from the token tables already built."""
        other = _DocCues(self)
        other.tokens = self.tokens
        other.words = self.words
        other.matched = self.matched
        return other


class _TokenTables:
    """The prefix tables of a parsed doc that do not depend on its mentions.

    Built once per doc, however many sets of mentions (readers) are decided on it; each
    table on first use, since most docs' rules ask for a few of them only (a field value's
    tables where a field rule's cue is found, the list tables where a list rule's).
    """

    def __init__(
        self,
        doc: Doc,
        breakers: frozenset[str],
        clause_breakers: frozenset[str] = frozenset(),
        words: Sequence[str] | None = None,
        aside_openers: frozenset[str] = frozenset(),
    ):
        self.n = len(doc)
        self._doc = doc
        # spaCy builds a Token object on every access: the lower-cased words come from
        # the caller where it has them, the rest from a walk where a table needs it
        self._lowers = [t.lower_ for t in doc] if words is None else words
        self._breakers = breakers
        self._clause_breakers = clause_breakers
        self._aside_openers = aside_openers

    @cached_property
    def _tags(self) -> list[str]:
        return [t.tag_ for t in self._doc]

    # prefix counts: p[i] = count over tokens [0, i); the tests mapped in C

    @cached_property
    def item(self) -> list[bool]:
        """List items by their own words; the doc's mentions are items too (`_ListIndex`)."""
        return [
            tag in _LIST_TAGS or w in _LIST_WORDS
            for w, tag in zip(self._lowers, self._tags, strict=True)
        ]

    # The comma and the field separators are read on the lower-cased words: no other
    # string lower-cases to one of them (str.lower never shortens a string, and no other
    # code point lower-cases to one of these characters).

    @cached_property
    def comma(self) -> list[int]:
        return _prefix(map(",".__eq__, self._lowers))

    @cached_property
    def or_nor(self) -> list[int]:
        return _prefix(map(_OR_NOR.__contains__, self._lowers))

    @cached_property
    def and_(self) -> list[int]:
        return _prefix(map("and".__eq__, self._lowers))

    @cached_property
    def breaker(self) -> list[int]:
        return _prefix(map(self._breakers.__contains__, self._lowers))

    @cached_property
    def clause(self) -> list[int]:
        return _prefix(map(self._clause_breakers.__contains__, self._lowers))

    @cached_property
    def aside(self) -> list[int]:
        words, openers = self._lowers, self._aside_openers
        if openers.isdisjoint(words):
            return [0] * (self.n + 1)
        return _prefix(opens_aside(words, i, openers) for i in range(self.n))

    @cached_property
    def next_comma(self) -> list[int]:
        """next_comma[i]: the first comma at or after token i (n if none)."""
        return _next_where(self._lowers, ",".__eq__)

    @cached_property
    def next_sep(self) -> list[int]:
        """next_sep[i]: the first field separator at or after token i (n if none)."""
        return _next_where(self._lowers, _FIELD_SEPARATORS.__contains__)

    @cached_property
    def not_name(self) -> list[int]:
        # field names hold only words, "-" and "/"; field values end the text
        return _prefix(not (t.is_alpha or t.text in "-/") for t in self._doc)

    @cached_property
    def not_punct(self) -> list[int]:
        return _prefix(not (t.is_punct or t.is_space) for t in self._doc)


class _ListIndex:
    """Per-doc prefix tables that answer the list and field questions in O(1).

    Built once per parsed doc and set of mentions (O(tokens + mention tokens)), so
    deciding all mentions of a sentence with a long list ("no A, B, C, ... or Z") stays
    linear instead of re-walking the list from every mention. The tables that do not
    depend on the mentions (`_TokenTables`) are shared with other sets of mentions; like
    them, the tables here are built on first use.
    """

    def __init__(
        self,
        doc: Doc,
        breakers: frozenset[str] = frozenset(),
        clause_breakers: frozenset[str] = frozenset(),
        aside_openers: frozenset[str] = frozenset(),
        *,
        tokens: _TokenTables | None = None,
        words: Sequence[str] | None = None,
    ):
        if tokens is None:
            tokens = _TokenTables(doc, breakers, clause_breakers, words, aside_openers)
        self.tokens = tokens
        self.n = tokens.n
        # the doc's mentions now: a caller that decides another reader's puts a new group
        # in `doc.spans`, which leaves this one as it is
        self._mentions: Iterable[Span] = doc.spans.get(MENTIONS_KEY, ())

    @cached_property
    def in_mention(self) -> list[bool]:
        # other mentions are list items whatever their tag ("infiltrates" is
        # often tagged as a verb)
        in_mentions = [False] * self.n
        for sp in self._mentions:
            for i in range(sp.start, sp.end):
                in_mentions[i] = True
        return in_mentions

    @cached_property
    def _item(self) -> list[bool]:
        return [x or m for x, m in zip(self.tokens.item, self.in_mention, strict=True)]

    @cached_property
    def nonitem(self) -> list[int]:
        return _prefix(map(operator.not_, self._item))

    @cached_property
    def next_nonitem(self) -> list[int]:
        """next_nonitem[i]: first j >= i that is not a list item (n if none)."""
        return _next_where(self._item, operator.not_)

    def has_comma(self, start: int, end: int) -> bool:
        """Whether a comma lies in tokens [start, end)."""
        comma = self.tokens.comma
        return end > start and comma[end] > comma[start]

    def in_list(self, cue: int, mention: Span) -> str | None:
        """How `mention` sits in a noun list that follows the token `cue`.

        None when no list joins them (the mention does not follow the cue, or
        other words lie between). `_ITEM` for one noun phrase ("no focal lung
        infiltrates") or a comma list closed by "or"/"nor"/"and" ("no A, B, or
        C"). In a comma list without one: `_CUT` when the mention's own item
        holds a breaker word ("no A, mild B"), else `_OPEN` ("no A, B").
        """
        start = mention.start
        tokens = self.tokens
        if cue >= start:
            return None
        if self.nonitem[start] != self.nonitem[cue + 1]:
            return None
        if not self.has_comma(cue + 1, start):
            return _ITEM  # one noun phrase: "no focal lung infiltrates"
        end = self.next_nonitem[mention.end] if mention.end < self.n else self.n
        if tokens.or_nor[end] > tokens.or_nor[cue + 1]:
            return _ITEM  # "no A, B, or large C": "or"/"nor" carry the negation to every item
        # "no A, mild B and C": from the first item after a comma that carries a
        # severity or course word on, the items are findings of their own
        first_comma = tokens.next_comma[cue + 1]
        if mention.end > first_comma + 1 and (
            tokens.breaker[mention.end] > tokens.breaker[first_comma + 1]
        ):
            return _CUT
        return _ITEM if tokens.and_[end] > tokens.and_[cue + 1] else _OPEN

    def is_field_value(self, cue: Span, mention: Span) -> bool:
        """Whether `cue` is the whole value of a template field that names `mention`.

        "Pneumothorax: none.", "Pleural effusion: not seen", "Edema - none":
        the mention sits in the field name (only words up to the colon or
        dash), the cue right after it, and nothing but punctuation follows it.
        """
        tokens = self.tokens
        colon = tokens.next_sep[mention.end] if mention.end < self.n else self.n
        if colon >= self.n or cue.start != colon + 1:
            return False
        if tokens.not_name[colon] != tokens.not_name[mention.end]:
            return False
        return tokens.not_punct[self.n] == tokens.not_punct[cue.end]


def _prefix(flags: Iterable[bool]) -> list[int]:
    """Prefix counts of `flags`: out[i] = how many of the first i are true."""
    return list(accumulate(map(int, flags), initial=0))


def _next_where(values: Sequence[_T], test: Callable[[_T], bool]) -> list[int]:
    """out[i]: the first j >= i whose value passes `test` (len(values) if none), for
    i in [0, len(values)]."""
    n = len(values)
    out = [n] * (n + 1)
    for i in range(n - 1, -1, -1):
        out[i] = i if test(values[i]) else out[i + 1]
    return out


def register() -> None:
    """Register the `cxr_concepts` and `cxr_dep_rules` factories, the `MODEL_TOKENIZER`
    tokenizer factory and the span extensions.

    Idempotent; call before `nlp.add_pipe("cxr_concepts")`.
    """
    if not Span.has_extension("cxr_status"):
        Span.set_extension("cxr_status", default=None)
        Span.set_extension("cxr_rule", default=None)
    if "cxr_concepts" not in Language.factories:
        Language.factory(
            "cxr_concepts", default_config={"concepts": "concepts.v1", "profile": None}
        )(_make_concepts)
    if "cxr_dep_rules" not in Language.factories:
        Language.factory("cxr_dep_rules", default_config={"rules": "rules.v1"})(_make_rules)
    if MODEL_TOKENIZER not in registry.tokenizers:
        registry.tokenizers.register(MODEL_TOKENIZER, func=_bare_tokenizer)
    # negspacy registers its "negex" factory when imported.
    import negspacy.negation  # noqa: F401


def _bare_tokenizer() -> Callable[[Language], Tokenizer]:
    def make(nlp: Language) -> Tokenizer:
        return Tokenizer(nlp.vocab)

    return make


def _make_concepts(nlp: Language, name: str, concepts: str, profile: str | None) -> ConceptMatcher:
    return ConceptMatcher(nlp, name, concepts, profile)


def _make_rules(nlp: Language, name: str, rules: str) -> DependencyRules:
    return DependencyRules(nlp, name, rules)
