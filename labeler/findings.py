"""Every finding a report names: lexicon concepts, and open findings headed by a finding word.

`FindingMatcher` reads a sentence for the concepts of the chest lexicon (`labeler.lexicon`:
findings, devices, post-operative changes, bone and soft-tissue findings, normal statements)
and for open findings, a finding word radiologists use for what they see ("opacity",
"density", "lesion") outside any concept. The engine (`labeler.pipeline`) decides each one's
status with the same negation and certainty rules as the labels' mentions, in a pass of its
own, so the label outputs do not change when findings are read.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

import spacy.about
from spacy.matcher import PhraseMatcher
from spacy.tokens import Doc, Span

from labeler.pattern_cache import cache_path, cached
from labeler.vocabulary import packaged_file

if TYPE_CHECKING:
    from spacy.language import Language

    from labeler.lexicon import Described, Lexicon, Placed

__all__ = [
    "OPEN_PREFIX",
    "FindingMatcher",
    "PhraseIndex",
    "is_abnormal",
    "lexicon_matcher",
    "singular",
]

#: Span label prefix of an open finding: "open:opacity".
OPEN_PREFIX = "open:"
#: A trie node of `PhraseIndex`: word -> next node, and `_END` -> the concept id of the
#: phrase that ends there (Any: a node holds both).
_Node = dict[str, Any]
#: The key of a phrase's concept in its last node: no token is the empty string.
_END = ""
#: A phrase's first word that holds it to the start of its sentence ("^ unchanged .": the
#: sentence "Unchanged.", not "The nodule is unchanged.").
_START = "^"
#: Side words a phrase may hold in its midst without listing them.
_SIDES = frozenset({"right", "left", "bilateral"})
#: Kinds whose positive reading does not make a report abnormal.
_NOT_ABNORMAL = frozenset({"normal", "anatomy", "view"})


class FindingMatcher:
    """Find lexicon concepts and open findings in a tokenized sentence.

    Args:
        nlp: the pipeline whose vocab and tokenizer build the patterns.
        lexicon: the chest lexicon.
    """

    def __init__(self, nlp: Language, lexicon: Lexicon) -> None:
        self.lexicon = lexicon
        self.phrases = PhraseIndex(nlp, lexicon, skip_kinds={"anatomy"})
        self.open_heads = frozenset(lexicon.open_finding_heads)
        # each concept id's hash, which a Span takes as its label without hashing the id
        strings = nlp.vocab.strings
        self._label_ids = {cid: strings.add(cid) for cid in lexicon.concepts}

    def with_heads(self, words: Collection[str]) -> FindingMatcher:
        """This matcher reading `words` as open finding words too (a word a question asks
        about that no concept names: "Where are the phleboliths?")."""
        out = copy.copy(self)
        out.open_heads = self.open_heads | frozenset(words)
        return out

    def find(self, doc: Doc, words: Sequence[str] | None = None) -> list[Span]:
        """Concepts (longest match wins) and open findings, in text order.

        Args:
            doc: a tokenized sentence.
            words: its lower-cased tokens, when the caller has them (spaCy builds a Token
                object on every access).

        Returns:
            Spans labelled with the concept id, or `open:<head word>` for an open finding.
        """
        if words is None:
            words = [t.lower_ for t in doc]
        matched = self.phrases(words)  # in text order, none overlapping
        if self.lexicon.described and len(matched) > 1:
            matched = _described(matched, words, self.lexicon.described)
        placed = self.lexicon.placed
        if placed and any(m[0] in placed for m in matched):
            matched = _placed(matched, words, placed)
        if not self.lexicon.coordinated.isdisjoint(words) and len(matched) > 0:
            matched = _coordinated(matched, words, self.lexicon)
            matched = _shared_subject(matched, words, self.lexicon)
        ids = self._label_ids
        kept = [Span(doc, start, end, label=ids.get(label, label)) for label, start, end in matched]
        heads = self.open_heads
        if heads.isdisjoint(words):
            return kept  # no finding word (most sentences)
        taken = {i for _, start, end in matched for i in range(start, end)}
        for i, word in enumerate(words):
            if word in heads and i not in taken:
                kept.append(Span(doc, i, i + 1, label=OPEN_PREFIX + singular(word)))
        kept.sort(key=lambda s: (s.start, s.end))
        return kept


def _described(
    matched: list[tuple[str, int, int]], words: Sequence[str], rules: Sequence[Described]
) -> list[tuple[str, int, int]]:
    """`matched` with each describing word and the finding it describes, across that
    finding's place and size words, read as one ("calcified left upper lobe 5 mm
    granuloma" is a calcified granuloma, not a calcification and a granuloma)."""
    out: list[tuple[str, int, int]] = []
    for concept, start, end in matched:
        becomes = _becomes(out[-1], concept, start, words, rules) if out else None
        if becomes is None:
            out.append((concept, start, end))
        else:
            out[-1] = (becomes, out[-1][1], end)
    return out


def _placed(
    matched: list[tuple[str, int, int]], words: Sequence[str], rules: Mapping[str, Placed]
) -> list[tuple[str, int, int]]:
    """`matched` with each finding a rule places read with the place named after it, up to
    the place's last word ("degenerative changes are present in the spine" is the
    degenerative spine); a finding matched in between keeps it apart."""
    out = list(matched)
    for i, (concept, start, end) in enumerate(matched):
        rule = rules.get(concept)
        if rule is None:
            continue
        at = end
        while at < len(words) and words[at] in rule.between:
            at += 1
        nxt = matched[i + 1][1] if i + 1 < len(matched) else len(words)
        for size in (3, 2, 1):
            place = " ".join(words[at : at + size])
            if at + size <= nxt and place in rule.places:
                out[i] = (rule.places[place], start, at + size)
                break
    return out


#: the word that joins two describing words of one head ("enlarged and tortuous aorta"); a
#: comma lists them instead ("no displaced, acute rib fractures")
_AND = frozenset({"and"})


def _coordinated(
    matched: list[tuple[str, int, int]], words: Sequence[str], lexicon: Lexicon
) -> list[tuple[str, int, int]]:
    """`matched` with each describing word joined by "and" to the finding after it, or
    right before it, read as that finding's head described by the word: "moderately
    enlarged and tortuous calcified aorta" is also the enlarged aorta, "dilated tortuous
    aorta" the dilated one (a `Lexicon.stacked` word), "mild unfolding and atherosclerotic
    calcification of the aorta" the unfolding of the aorta (`Lexicon.coordinated`). The
    word is the new finding's span, so each keeps its own degree; one after a predicate
    verb says what the finding before is ("the heart is enlarged and ...") and is left
    alone."""
    starts = {start: n for n, (_, start, _) in enumerate(matched)}
    taken = {i for _, start, end in matched for i in range(start, end)}
    added: list[tuple[str, int, int]] = []
    for i, word in enumerate(words[:-1]):
        if word not in lexicon.coordinated or i in taken:
            continue
        # "enlarged and tortuous aorta", or stacked with no "and": "dilated tortuous aorta"
        if words[i + 1] in _AND:
            n = starts.get(i + 2)
        elif word in lexicon.stacked:
            n = starts.get(i + 1)
        else:
            continue
        if n is None:
            continue
        before = i - 1
        if before >= 0 and words[before] in lexicon.predicate_degrees:
            before -= 1
        if before >= 0 and words[before] in lexicon.predicate_verbs:
            continue
        # the finding after "and", with the findings right after it ("tortuous" + "calcified
        # aorta"): the head is at its end
        end = matched[n][2]
        while n + 1 < len(matched) and matched[n + 1][1] == end:
            n += 1
            end = matched[n][2]
        for j in range(matched[n][1] + 1, end):
            ids = lexicon.by_phrase.get(" ".join([word, *words[j:end]]))
            if ids and lexicon.concepts[ids[0]].kind != "anatomy":
                added.append((ids[0], i, i + 1))
                break
    if not added:
        return matched
    return sorted([*matched, *added], key=lambda m: (m[1], m[2]))


def _shared_subject(
    matched: list[tuple[str, int, int]], words: Sequence[str], lexicon: Lexicon
) -> list[tuple[str, int, int]]:
    """`matched` with a predicate adjective joined by "and" to a predicate before it read
    as a predicate of the same subject: "the aorta is tortuous and ectatic" is also the
    ectatic aorta, "lungs are normally inflated and clear" the clear lungs, when the lexicon
    knows "<subject> <verb> <adjective>" as another concept than the first or its ancestors.
    The adjective is the new finding's span, so it keeps its own degree word."""
    taken = {i for _, start, end in matched for i in range(start, end)}
    added: list[tuple[str, int, int]] = []
    for first, start, end in matched:
        if end >= len(words) or words[end] not in _AND:
            continue
        verb = next((v for v in range(start + 1, end) if words[v] in lexicon.predicate_verbs), None)
        k = end + 1
        if k < len(words) and words[k] in lexicon.predicate_degrees:
            k += 1
        if verb is None or k >= len(words) or k in taken or words[k] not in lexicon.coordinated:
            continue
        ids = lexicon.by_phrase.get(" ".join([*words[start : verb + 1], words[k]]))
        if not ids or lexicon.concepts[ids[0]].kind == "anatomy":
            continue
        # "normal and unchanged", "upper limits of normal and stable": the second word only
        # says the first again, or its change
        if ids[0] == first or ids[0] in lexicon.ancestors(first):
            continue
        added.append((ids[0], k, k + 1))
    if not added:
        return matched
    return sorted([*matched, *added], key=lambda m: (m[1], m[2]))


def _becomes(
    before: tuple[str, int, int],
    concept: str,
    start: int,
    words: Sequence[str],
    rules: Sequence[Described],
) -> str | None:
    """The concept `before` and the finding `concept` at `start` make together, if any."""
    describing, b_start, b_end = before
    between = words[b_end:start]
    for rule in rules:
        if (
            describing == rule.by
            and concept in rule.becomes
            and " ".join(words[b_start:b_end]) in rule.words
            and all(w in rule.between or w.replace(".", "", 1).isdigit() for w in between)
        ):
            return rule.becomes[concept]
    return None


class PhraseIndex:
    """The lexicon's phrases as a trie of their words, matched on a sentence's lower-cased
    words: the longest match wins, as spaCy's `PhraseMatcher(attr="LOWER")` followed by
    `filter_spans` gives it, without a Doc per phrase. A side word inside a phrase is read
    through ("degenerative changes of the right shoulder" is "degenerative changes of the
    shoulder"), which a phrase matcher would need every phrase listed with each side for.

    A phrase's words are its tokens where the tokenizer would leave each word whole (no
    special case, prefix, suffix, infix, token or URL match: "pleural effusion"); the
    others ("ground-glass opacity", "hampton's hump") go through the tokenizer. Building
    5,600 phrase Docs for a `PhraseMatcher` made a Lexeme for each new word (0.09 s of
    every `cxr label --findings`); this builds the 26,000 phrases (predicate forms
    included) in about 0.06 s, and keeps the trie of a packaged lexicon beside it
    (`labeler.pattern_cache`, keyed by `_trie_key`), read back in 0.02 s.

    Args:
        nlp: the pipeline whose tokenizer splits the phrases.
        lexicon: the chest lexicon.
        skip_kinds: concept kinds left out.
    """

    def __init__(
        self, nlp: Language, lexicon: Lexicon, *, skip_kinds: Collection[str] = ()
    ) -> None:
        by_concept = lexicon.phrases_by_concept(skip_kinds)
        self.read_through = lexicon.read_through
        packaged = packaged_file(lexicon.name)
        key = _trie_key(nlp, by_concept) if packaged is not None else None
        #: a trie of the phrases' words as nested dicts: word -> the node after it; a
        #: phrase's last node holds its concept id under `_END`. Nested dicts build in half
        #: the time of (state, word) -> state steps, and a step needs no tuple.
        self.root: _Node = (
            _trie(nlp, by_concept)
            if packaged is None or key is None
            else cached(cache_path(packaged, "phrases"), key, lambda: _trie(nlp, by_concept))
        )

    def __call__(self, words: Sequence[str]) -> list[tuple[str, int, int]]:
        """The phrases in `words` as (concept id, start, end) token offsets, in text order:
        of overlapping matches the longest, then the first, is kept.

        Args:
            words: a sentence's tokens, lower-cased.
        """
        found = []
        root = self.root
        through = self.read_through
        n = len(words)
        # the start marker is a key of the index, never a word of the text ("nodule ^
        # unchanged" is no sentence that starts "unchanged"); looked for once a sentence
        stray = _START in words
        for i, word in enumerate(words):
            node = None if stray and word == _START else root.get(word)
            end = i + 1
            while node is not None:
                concept_id = node.get(_END)
                if concept_id is not None:
                    found.append((concept_id, i, end))
                if end == n:
                    break
                step = node.get(words[end])
                if step is None and end + 1 < n and (words[end] in _SIDES or words[end] in through):
                    # a side inside a phrase ("degenerative changes of the right shoulder",
                    # "elevation of the left hemidiaphragm"), or a word the lexicon reads
                    # through ("ectatic appearing ascending aorta"): the phrase without it
                    step = node.get(words[end + 1])
                    end += step is not None
                node = step
                end += 1
        node = root.get(_START)
        if node is not None and n:
            # a phrase held to the sentence's start ("^ no interval change .")
            node = node.get(words[0])
            end = 1
            while node is not None:
                concept_id = node.get(_END)
                if concept_id is not None:
                    found.append((concept_id, 0, end))
                if end == n:
                    break
                node = node.get(words[end])
                end += 1
        if len(found) > 1:
            # spacy.util.filter_spans on (label, start, end): longest, then first, wins
            found.sort(key=lambda m: (m[2] - m[1], -m[1]), reverse=True)
            kept: list[tuple[str, int, int]] = []
            seen: set[int] = set()
            for match in found:
                _, start, end = match
                if start not in seen and end - 1 not in seen:
                    kept.append(match)
                    seen.update(range(start, end))
            found = sorted(kept, key=lambda m: m[1])
        return found


def _trie(nlp: Language, by_concept: dict[str, list[str]]) -> _Node:
    """`PhraseIndex.root` of the phrases of each concept."""
    whole_word = _whole_word_test(nlp)
    # Each distinct word is tested once, and a phrase then checked against the few (about
    # 110 of 2,100) the tokenizer would split, in C: a test per word of each of the 26,000
    # phrases was a third of the build.
    distinct = set(" ".join(chain.from_iterable(by_concept.values())).split(" "))
    split = frozenset(w for w in distinct if not whole_word(w))
    root: _Node = {}
    for concept_id, phrases in by_concept.items():
        for phrase in phrases:
            words = phrase.split(" ")
            if not split.isdisjoint(words):
                words = [t.lower_ for t in nlp.make_doc(phrase)]
            node = root
            for word in words:
                child = node.get(word)
                if child is None:
                    child = node[word] = {}
                node = child
            # two phrases that tokenize alike: the first concept keeps it
            if node is not root:
                node.setdefault(_END, concept_id)
    for word, child in root.items():
        if word != _END:  # a side that starts a phrase is its first word, not read through
            _through_sides(child)
    return root


def _through_sides(node: _Node) -> None:
    """Let a side a phrase spells out be read through as well: after "calcified right",
    which "calcified right hilar lymph xxxx" spells, "hilar lymph node" goes on as after
    "calcified" (`PhraseIndex.__call__` steps over a side only where the phrase has no word
    for it). The phrase with the side spelt out keeps its own words."""
    for word, child in node.items():
        if word == _END:
            continue
        if word in _SIDES:
            _merge_into(child, {w: c for w, c in node.items() if w != _END and w not in _SIDES})
        _through_sides(child)


def _merge_into(dst: _Node, src: _Node) -> None:
    """Add `src`'s phrases to `dst`'s; where both go on with a word, `dst`'s concept wins."""
    for word, child in src.items():
        if word == _END:
            dst.setdefault(_END, child)
        elif word not in dst:
            dst[word] = child
        else:
            mine = dst[word]
            dst[word] = mine = dict(mine)  # a copy: `mine` may be another node's too
            _merge_into(mine, child)


def _trie_key(nlp: Language, by_concept: dict[str, list[str]]) -> str | None:
    """What `_trie` of `by_concept` depends on, hashed (4 ms): the phrases, this module's
    code, spaCy's version and the tokenizer's special cases and patterns; None where the
    tokenizer is not spaCy's, or has a search function that is not a pattern's."""
    tokenizer = nlp.tokenizer
    if not hasattr(tokenizer, "rules") or not hasattr(tokenizer, "prefix_search"):
        return None
    patterns = []
    for name in ("prefix_search", "suffix_search", "infix_finditer", "token_match", "url_match"):
        search = getattr(tokenizer, name, None)
        pattern = getattr(search, "__self__", None)
        if search is not None and not isinstance(pattern, re.Pattern):
            return None  # a function of its own: what it splits cannot be named
        patterns.append((pattern.pattern, pattern.flags) if pattern is not None else None)
    try:
        digest = hashlib.sha256(Path(__file__).read_bytes())
    except OSError:
        return None
    rules = [spacy.about.__version__, getattr(tokenizer, "faster_heuristics", None), patterns]
    digest.update(repr([*rules, tokenizer.rules]).encode("utf-8", "surrogatepass"))
    for concept_id, phrases in by_concept.items():
        digest.update("\x1e".join([concept_id, *phrases, ""]).encode("utf-8", "surrogatepass"))
    return f"phrases:{digest.hexdigest()}"


def lexicon_matcher(
    nlp: Language, lexicon: Lexicon, *, skip_kinds: Collection[str] = (), predicates: bool = True
) -> PhraseMatcher:
    """A matcher of the lexicon's phrases on lower-cased tokens, each match named by the most
    specific concept the phrase belongs to; concepts of `skip_kinds` left out, and the
    predicate forms ("aorta is tortuous") unless `predicates`."""
    matcher = PhraseMatcher(nlp.vocab, attr="LOWER")
    for concept_id, phrases in lexicon.phrases_by_concept(
        skip_kinds, predicates=predicates
    ).items():
        matcher.add(concept_id, [nlp.make_doc(p) for p in phrases])
    return matcher


def _whole_word_test(nlp: Language) -> Callable[[str], bool]:
    """Whether the tokenizer leaves a word (no spaces) as one token of the same text: it
    has no special case and no prefix, suffix, infix, token or URL pattern matches in it.
    Conservative: a word it refuses goes through the tokenizer itself."""
    tokenizer = nlp.tokenizer
    rules = getattr(tokenizer, "rules", None) or {}
    searches = [
        getattr(tokenizer, name, None)
        for name in ("prefix_search", "suffix_search", "token_match", "url_match")
    ]
    infixes = getattr(tokenizer, "infix_finditer", None)
    if not hasattr(tokenizer, "rules") or not hasattr(tokenizer, "prefix_search"):
        return lambda word: False  # not spaCy's tokenizer: tokenize every phrase

    def whole(word: str) -> bool:
        return (
            word.isalpha()
            and word not in rules
            and not any(search is not None and search(word) for search in searches)
            and (infixes is None or next(iter(infixes(word)), None) is None)
        )

    return whole


def is_abnormal(kind: str) -> bool:
    """Whether a positive finding of this kind makes the report not normal."""
    return kind not in _NOT_ABNORMAL


def singular(word: str) -> str:
    """An open finding word's singular: "opacities" -> "opacity", "lesions" -> "lesion",
    and the Greek and Latin plurals of report nouns ("granulomata", "bullae")."""
    if word.endswith(("omata", "ae")) and len(word) > 5:
        return word[:-2] if word.endswith("ata") else word[:-1]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word
