"""Questions about a report: parse a plain-English question, answer it from a labelled report.

A question is read on the labeler's own spaCy pipeline (its tokenizer and its concept
matcher) with the cue words of `patterns/questions.v1.yaml`: which finding it asks about,
its type (presence, position, size, count, change, severity) and, for a closed question,
what it asks to be true ("on the left", "larger than 3 cm", "small"). A question that
cannot be read this way is `unsupported`, with a message; it is never guessed. Every
decision names the ids of the entries that made it.

`answer_from_report` answers a parsed question from a `ReportLabels`: status, laterality,
location, severity, size, count and change of the finding, with the report spans and
rule ids used.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Literal

from spacy.language import Language
from spacy.matcher import PhraseMatcher
from spacy.tokens import Doc, Token

from labeler.aggregate import deciding_first
from labeler.attributes import PLURAL_RULE, load_attribute_rules, stated_count
from labeler.components import ConceptMatcher
from labeler.device_tips import APPROXIMATELY, load_tip_finder
from labeler.errors import PatternFileError
from labeler.findings import OPEN_PREFIX, is_abnormal, lexicon_matcher, singular
from labeler.levels import LevelFinder, load_level_finder
from labeler.lexicon import KINDS
from labeler.normalize import normalize_text
from labeler.schema import Mention, ReportFinding, ReportLabels
from labeler.vocabulary import read_pattern_file

if TYPE_CHECKING:
    from labeler.lexicon import Lexicon

__all__ = [
    "QUESTION_TYPES",
    "CONCEPT_PREFIX",
    "PART_PREFIX",
    "REPORT_WORD_RULE",
    "AnswerValue",
    "Qualifier",
    "QuestionParser",
    "QuestionPatterns",
    "QuestionType",
    "ParsedQuestion",
    "ReportAnswer",
    "abnormal_findings_named",
    "answer_from_report",
    "answer_study",
    "superlative_place",
    "compare",
    "load_question_patterns",
]

QuestionType = Literal[
    "presence", "position", "size", "count", "change", "severity", "study", "unsupported"
]
QUESTION_TYPES: tuple[str, ...] = (
    "presence",
    "position",
    "size",
    "count",
    "change",
    "severity",
    "study",
    "unsupported",
)
#: an answer: yes/no/uncertain/unknown, a term, a list of position terms, a size in mm, a count
AnswerValue = str | int | float | list[str]
#: `ParsedQuestion.label` of a question about a lexicon concept: "concept:picc"
CONCEPT_PREFIX = "concept:"
#: the rule of a word no entry explains, just before the reading a question asks ("Could the
#: density be a pericardial mass?"): read beside the finding, and unknown where not there
_READ_WORD_RULE = "reading.word"
#: `ParsedQuestion.label` of a question about a part of the body by a general word ("Which
#: clavicle is abnormal?"): "part:clavicle" (a place of the attribute file) or "part:hilum"
#: (an anatomy concept of the lexicon)
PART_PREFIX = "part:"
#: the rule of a question about a word no concept names, read where the report names it
#: ("Where are the phleboliths?" over "pelvic phleboliths"): `QuestionParser.report_words`
REPORT_WORD_RULE = "open.report_word"
#: the message of a question that names no finding (the start of it)
_NO_FINDING = "no finding of the label set is named in the question"
#: the rule of a normal statement named without its denial ("Any acute bony findings?"):
#: the question asks the other way round
DENIED_NORMAL_RULE = "normal.denied"

_QUALIFIER_KINDS = ("lobe", "side", "zone", "severity", "change", "count", "descriptor")
# which qualifier decides the question's type, first wins
_TYPE_OF_KIND: dict[str, QuestionType] = {
    "size": "size",
    "change": "change",
    "count": "count",
    "severity": "severity",
    "lobe": "position",
    "side": "position",
    "zone": "position",
    "descriptor": "presence",
    "site": "presence",
}
# the qualifiers that say where a finding is: of several, they name the one asked about
_PLACE_KINDS = ("side", "zone", "lobe")
#: the attributes that place a mention
_PLACE_ATTRS = ("laterality", "location", "lobe")
#: the keys of a pattern entry kept beside its phrases (`_Entry.get`)
_ENTRY_KEYS = ("type", "asks", "side", "zone", "label", "op", "weak", "narrows_only", "narrows")
_KIND_ORDER = ("size", "change", "count", "severity", "lobe", "side", "zone", "descriptor", "site")


@dataclass(frozen=True)
class _Entry:
    id: str
    phrases: tuple[str, ...]
    value: str | int = ""
    accepts: tuple[str, ...] = ()
    extra: tuple[tuple[str, str], ...] = ()
    rejects: tuple[str, ...] = ()
    # a blocker's phrase followed by one of these words is no blocker ("compared with the
    # last film" dates a change; "compared with the right side" compares two findings)
    not_before: tuple[str, ...] = ()
    # ... and a cue right after one of these words is a finding's noun, no cue ("bone
    # changes", "post-op changes" name findings; they ask no change)
    not_after: tuple[str, ...] = ()

    def get(self, key: str) -> str:
        return dict(self.extra).get(key, "")


@dataclass(frozen=True)
class QuestionPatterns:
    """The question vocabulary of one pattern file (see `patterns/questions.v1.yaml`)."""

    name: str
    findings: tuple[_Entry, ...]
    fallback_findings: tuple[_Entry, ...]
    blockers: tuple[_Entry, ...]
    open: tuple[_Entry, ...]
    qualifiers: Mapping[str, tuple[_Entry, ...]]
    comparisons: tuple[_Entry, ...]
    trailing: tuple[_Entry, ...]
    units: Mapping[str, float]
    number_words: Mapping[str, float]
    prior_words: frozenset[str]
    presence: tuple[_Entry, ...]
    negations: tuple[_Entry, ...]
    question_words: frozenset[str]
    study: tuple[_Entry, ...] = ()
    acute_labels: frozenset[str] = frozenset()
    #: the change values that make a study worse ("Is the chest worse than before?")
    worse_changes: frozenset[str] = frozenset()
    #: words that count lobes ("How many lobes are involved?")
    lobe_words: frozenset[str] = frozenset()
    #: "How many lungs show opacities?": the words after "how many" (a tuple) -> the places
    #: counted (lobes, lungs, bases, levels), not the finding
    place_units: Mapping[tuple[str, ...], str] = field(default_factory=dict)
    #: words beside a finding that spread it over several levels ("multilevel")
    multiple_places_words: tuple[tuple[str, ...], ...] = ()
    spine_parts: Mapping[str, str] = dataclasses.field(default_factory=dict)
    exchange_words: frozenset[str] = frozenset()
    exchange_nouns: frozenset[str] = frozenset()
    place_study_words: frozenset[str] = frozenset()
    single_words: frozenset[str] = frozenset()
    #: a paired structure's plural where a finding is placed ("of the acromioclavicular
    #: joints"): both of the pair where no side is said
    paired_plurals: frozenset[str] = frozenset()
    one_of_pair: frozenset[str] = frozenset()
    place_wholes: frozenset[str] = frozenset()
    #: words beside a finding that spread it over both lungs ("diffuse interstitial
    #: prominence"): where it is when the report names no side or place
    spread_words: frozenset[str] = frozenset()
    #: words beside a finding that grade it at the edge of normal ("borderline cardiomegaly")
    borderline_words: frozenset[str] = frozenset()
    #: words of a place on the spine ("midthoracic vertebral body")
    spine_place_words: frozenset[str] = frozenset()
    #: "How many views were taken?": view concepts and the number of views each says, in
    #: the order they are looked for
    view_counts: Mapping[str, int] = field(default_factory=dict)
    #: "Is the lateral view adequate?": the lexicon concept whose narrower concepts limit a
    #: study, those that do not, the words that name each view in a report's sentence, and
    #: the concepts an aspect of the question's words narrows to ("inspiratory")
    quality_limitation: str = ""
    quality_not_limiting: frozenset[str] = frozenset()
    quality_limiting_words: frozenset[str] = frozenset()
    quality_view_words: Mapping[str, frozenset[str]] = field(default_factory=dict)
    quality_aspects: Mapping[str, frozenset[str]] = field(default_factory=dict)
    yes_no_starts: frozenset[str] = frozenset()
    context_words: frozenset[str] = frozenset()
    qualifier_before: frozenset[str] = frozenset()
    #: words that ask whether a finding is truly what it is called ("Is this a true
    #: nodule?"): a report that doubts it anywhere makes it possible, not yes
    verity_words: frozenset[str] = frozenset()
    qualifier_links: frozenset[str] = frozenset()
    #: the words between two findings that make the first the one asked, the second where
    #: it is looked for ("Is there volume loss with the opacity?")
    beside_links: tuple[tuple[str, ...], ...] = ()
    #: the words that join a general finding to a narrower one of its kind it is asked of
    #: ("post-operative changes from bypass surgery")
    narrowing_links: tuple[tuple[str, ...], ...] = ()
    qualifier_after: frozenset[str] = frozenset()
    #: general words for a device beside a device's name ("stimulator device", "implanted
    #: pacemaker"): part of the name, not a qualifier
    device_words: frozenset[str] = frozenset()
    zone_includes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    absorbed: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: words of the lexicon's anatomy phrases too general to name a site ("joint")
    site_generic_words: frozenset[str] = frozenset()
    #: "Which effusion is larger?": how such a question starts, its comparatives, and the
    #: report's words for the side with more
    dominance_starts: tuple[str, ...] = ()
    dominance_comparatives: frozenset[str] = frozenset()
    dominance_patterns: tuple[re.Pattern[str], ...] = ()
    #: ... and those that ask it of the whole study ("Which lung is worse?")
    dominance_study_comparatives: frozenset[str] = frozenset()
    #: findings of which there is one on each side at most (a pleural effusion)
    one_per_side: frozenset[str] = frozenset()
    #: devices that end once each: as many as the landmarks their tips are joined in
    counted_by_tips: frozenset[str] = frozenset()
    #: lexicon concepts that are a process, not things to count ("granulomatous disease")
    uncounted: frozenset[str] = frozenset()
    #: lexicon concepts that are a normal structure's degree ("increased kyphosis"): a change
    #: word that makes one of their phrases names them ("Is the kyphosis increased?")
    graded_findings: frozenset[str] = frozenset()
    #: words that name a finding by the process that makes it ("osteophyte formation")
    process_heads: frozenset[str] = frozenset()
    #: lexicon concepts a report's silence does not rule out: "Is there cancer?" over a
    #: report that names none is unknown, not no
    unruled_by_silence: frozenset[str] = frozenset()
    #: words that offer a finding as one of two readings ("X or Y", "X and/or Y")
    alternatives: frozenset[str] = frozenset()
    #: label -> the lexicon's normal statement that rules it out ("heart size within normal
    #: limits"): a change question about the label reads the statement's change
    stated_normal: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: the normal statements of a whole sentence ("A and B are within normal limits"), and
    #: per label or part the words of a subject that make such a statement that part's
    #: ("Cardiomediastinal silhouette and pulmonary vasculature are stable and within
    #: normal limits" is the heart's and the mediastinum's)
    sentence_normals: frozenset[str] = frozenset()
    normal_subjects: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: anatomy concept -> the normal statements that say how it compares ("Has the
    #: mediastinum changed?" over "stable cardiomediastinal silhouette")
    anatomy_normals: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: a yes/no question about a device asks where its tip is when it holds one of these
    #: words, or when the device is (under) one of `tip_devices` ("Is the PICC in the SVC?")
    tip_words: frozenset[str] = frozenset()
    #: the report's words for a size ("small", "large"): a size question without a
    #: measurement is answered with one, in the report's word
    size_words: frozenset[str] = frozenset()
    #: findings whose grade is their size ("mild cardiomegaly": "How big is the heart?")
    sized_by_grade: frozenset[str] = frozenset()
    #: words of a change question that ask about the size of such a finding ("Has the heart
    #: size changed?"): where it is new, it grew
    size_change_words: frozenset[str] = frozenset()
    #: "Where was the line inserted?" asks where it goes in, not where it ends
    insertion_words: frozenset[str] = frozenset()
    #: "Which side was the PICC on?": a question in the past tense asks where a finding the
    #: report says is gone (`gone_rules`, the rule ids that read it so) was
    past_words: frozenset[str] = frozenset()
    #: "Where is the largest nodule?": each direction -> the words that ask it and that a
    #: report names the one so by ("the largest in the left base")
    superlatives: Mapping[str, frozenset[str]] = field(default_factory=dict)
    gone_rules: frozenset[str] = frozenset()
    #: ... or the changes that say it is gone (a finding not seen on this study)
    gone_changes: frozenset[str] = frozenset()
    #: concept -> other concepts (and those below them) that answer a question about it
    #: ("heart surgery" by a CABG, which the lexicon places under the sternotomy)
    answered_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: concept -> a concept whose finding answers it where a finding of one of the others
    #: stands in the same sentence ("calcifications ... of old granulomatous disease" are
    #: calcified granulomas)
    read_together: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: open word -> open words of the same sight, read where the report has none of its own
    #: ("paratracheal fullness" over "paratracheal prominence")
    open_alike: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: words that may join a finding to the finding it is said of ("prominence of soft
    #: tissue density"), which places it
    joining_words: frozenset[str] = frozenset()
    #: words beside a finding that say it is not new ("chronic", "old", "healed")
    not_new_words: frozenset[str] = frozenset()
    #: words that join a finding to another finding it is of ("fracture of the wire")
    complement_joins: frozenset[str] = frozenset()
    #: change words before a finding that may only describe it ("increased opacity": denser)
    #: and the words of a report that compares with an earlier study; a report without any
    #: of the latter says nothing of a change by the former
    uncompared_change_words: frozenset[str] = frozenset()
    comparison_words: frozenset[str] = frozenset()
    #: change words that only say a finding is still there ("persistent") and the changes
    #: of a course that another mention of it states over them ("decreasing")
    persistence_words: frozenset[str] = frozenset()
    course_changes: frozenset[str] = frozenset()
    #: a word right before a device or an operation (lexicon kinds `interval_new_kinds`)
    #: that says it is new ("interval CABG")
    interval_new_words: frozenset[str] = frozenset()
    interval_new_kinds: frozenset[str] = frozenset()
    #: lexicon kinds (an operation) named by a word inside another finding's
    #: mention ("CABG clips" says a CABG was done), where the report names none of its own
    named_within_kinds: frozenset[str] = frozenset()
    #: words that open a clause after a comma describing the finding before it ("wires,
    #: several of which are interrupted"), and the words that keep it off ("none of which")
    relative_words: frozenset[str] = frozenset()
    relative_denying: frozenset[str] = frozenset()
    #: words after a device that say another took its place ("the right IJ line has been
    #: exchanged for a left IJ catheter": the right one is gone)
    replaced_words: tuple[str, ...] = ()
    #: device -> the concepts of its parts whose tip is the device's tip (its leads)
    tips_of: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: parts of the body a whole-study "normal" cue may be said of ("Is the spine normal?")
    part_normal_parts: frozenset[str] = frozenset()
    tip_devices: frozenset[str] = frozenset()
    #: words that ask whether something is wrong with a part of the body ("problem with")
    problem_cues: tuple[str, ...] = ()
    #: "Has the patient had TB?": the patient's history, which a radiograph shows only for
    #: concepts of `history_kinds` (an operation, a device)
    history_cues: tuple[str, ...] = ()
    history_kinds: frozenset[str] = frozenset()
    #: words of a narrower concept's name that say where it is ("thoracic")
    place_parts: frozenset[str] = frozenset()
    #: acute labels a report's own "no acute disease" outweighs (minor or often chronic)
    minor_acute_labels: frozenset[str] = frozenset()
    #: normal statements that say the study shows no acute disease (concept ids)
    no_acute_statements: frozenset[str] = frozenset()
    #: what the reader calls the whole study ("Normal chest exam."): a normal statement's
    #: words that make it normal whatever minor finding is read beside it
    study_normal_statements: tuple[str, ...] = ()
    study_normal_not_after: frozenset[str] = frozenset()
    #: lexicon concepts that say the whole study is as before ("Stable chest.")
    unchanged_statements: frozenset[str] = frozenset()
    #: concepts whose denial ("No new acute abnormalities since the previous radiograph"), or
    #: whose normal statement, dated against a prior by a phrase of `unchanged_denial_dates`
    #: says the whole study is as before
    unchanged_denials: frozenset[str] = frozenset()
    unchanged_denial_dates: tuple[str, ...] = ()
    #: what joins the items of a list that share a change word before or after it ("A and
    #: B", "A, B", "A with B"), and the words that may stand beside such a join ("A and
    #: changes of B as before", "A with a B ... unchanged")
    change_list_joins: frozenset[str] = frozenset()
    change_list_fillers: frozenset[str] = frozenset()
    #: label -> lexicon concepts read as it where the report names the label nowhere
    #: ("17 mm nodular opacity" is the nodule a clinician asks about)
    read_as_label: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: label or `concept:<id>` -> lexicon concepts of its family whose measured finding on
    #: the same side and place is it, named twice ("3 cm nodule in the right hilum ...
    #: right hilar mass"): a size question about it takes that size
    measured_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: label -> lexicon concepts that only suggest it: read where the report names the label
    #: nowhere, as possible at most ("Is there pneumonia?" over "atelectasis or infiltrate")
    suggested_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: label -> lexicon concepts that suggest it only where the report itself hedges them:
    #: read where the report names the label nowhere, as possible ("Could this be
    #: pneumonia?" over "may represent atelectasis or airspace disease")
    suggested_when_hedged: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: label -> the concepts of mimics that explain its finding away, named after it in its
    #: sentence ("nodular densities ... consistent with nipple shadows")
    explained_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: label -> the concepts that say its part could not be judged ("heart size cannot be
    #: assessed"): a presence or size question the report does not answer is unknown
    unassessed_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: label -> the words that call the study so before its noun with its reason between
    #: ("Limited low lung volume exam"); `study_nouns`: the study's nouns
    called_limited: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    study_nouns: frozenset[str] = frozenset()
    #: what the words before a finding in its clause match when they give it as the
    #: report's probable reading only ("probable atelectasis", "XXXX representing")
    probable_readings: tuple[re.Pattern[str], ...] = ()
    #: ... and the words inside a mention that do ("heart size borderline enlarged")
    probable_within: tuple[re.Pattern[str], ...] = ()
    #: "Any pneumothorax after the line went in?": a clause that only dates the question,
    #: left out before it is read
    dating_clauses: tuple[re.Pattern[str], ...] = ()
    #: "Could this be an infiltrate rather than collapse?": the reading set against the one
    #: asked, left out before the question is read (the question asks about the first)
    contrast_clauses: tuple[re.Pattern[str], ...] = ()
    #: words a question refers back with ("Has it grown?"; "Is this new?")
    pronouns: frozenset[str] = frozenset()
    demonstratives: frozenset[str] = frozenset()
    #: the words after "this" that show it stands alone ("Is this new?"), not before its
    #: noun ("Is this chest X-ray normal?"); and before it: a question's own words, not a
    #: noun it would relate to ("anything that")
    after_pronoun: frozenset[str] = frozenset()
    before_pronoun: frozenset[str] = frozenset()
    #: the lexicon's open finding heads too general to ask about ("disease")
    not_open_heads: frozenset[str] = frozenset()
    #: words of a question that never name what it asks about, read in a report
    #: (`QuestionParser.report_words`): "patient", "side"
    not_report_words: frozenset[str] = frozenset()
    #: words that make a question one about the patient, never read in a report that way
    #: ("Does the patient smoke?")
    not_report_questions: frozenset[str] = frozenset()
    #: degree words, which do not part a finding from its alternative ("normal or mildly
    #: enlarged heart")
    degree_words: frozenset[str] = frozenset()
    #: words a bare finding question may hold besides the finding ("Any effusion?")
    bare_fillers: frozenset[str] = frozenset()
    #: the study a bare finding question may end on ("Effusion on this film?"), as words
    bare_studies: tuple[tuple[str, ...], ...] = ()
    #: words that deny the word after them ("not calcified")
    denying_words: frozenset[str] = frozenset()
    #: verbs that ask for a finding's reading ("Does the opacity represent pneumonia?")
    reading_words: frozenset[str] = frozenset()
    #: words between a finding pointed at and a reading asked of it ("Is the nodule a
    #: granuloma?", "Could the nodule be a granuloma?")
    reading_links: frozenset[str] = frozenset()
    #: general words a question asks about a part of the body by ("Which clavicle is
    #: abnormal?"), and those of them that ask about a change themselves ("Any change in
    #: the heart?": a part question only where something else is asked of them)
    part_general_words: frozenset[str] = frozenset()
    part_change_words: frozenset[str] = frozenset()
    #: anatomy concepts a size question may name for their findings ("How big are the lymph
    #: nodes?": the nodes' findings, measured or not)
    sized_parts: frozenset[str] = frozenset()
    #: places of the attribute file's `location` a question may name as a part of the body
    #: ("clavicle", "AC joint"), and other words for them ("arm": humerus)
    part_places: frozenset[str] = frozenset()
    part_aliases: Mapping[str, str] = field(default_factory=dict)
    #: a question's word for a site -> more words a report names that site by ("Any
    #: arthritis in the bones?" over "arthritic changes of the skeletal structures")
    site_aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: a word that names one level of the spine ("T9", "L1"): a site the report names by
    #: the same word
    site_level: re.Pattern[str] | None = None


def _entries(name: str, data: object, key: str, *, values: bool = False) -> tuple[_Entry, ...]:
    if data is not None and not isinstance(data, list):
        raise PatternFileError(f"{name}: {key} must be a list")
    out = []
    for i, raw in enumerate(data or ()):
        where = f"{name}: {key}[{i}]"
        if not isinstance(raw, dict) or not raw.get("id") or not raw.get("phrases"):
            raise PatternFileError(f"{where} needs an id and phrases")
        if values and "value" not in raw and "label" not in raw and "op" not in raw:
            raise PatternFileError(f"{where} ({raw['id']}) needs a value")
        value = raw.get("value", raw.get("label", raw.get("op", "")))
        extra = tuple(
            (str(k), str(v)) for k, v in raw.items() if k in _ENTRY_KEYS and v is not None
        )
        bad = [
            ph
            for ph in raw["phrases"]
            if not isinstance(ph, str | int | float) or isinstance(ph, bool)
        ]
        if bad:
            raise PatternFileError(
                f"{where} ({raw['id']}): phrase {bad[0]!r} is not text; quote yes/no/on/off"
            )
        accepts = raw.get("accepts") or raw.get("includes") or ()
        out.append(
            _Entry(
                id=str(raw["id"]),
                phrases=tuple(str(p).lower() for p in raw["phrases"]),
                value=value if isinstance(value, int) else str(value),
                accepts=tuple(str(a) for a in accepts),
                extra=extra,
                rejects=tuple(str(a) for a in raw.get("rejects") or ()),
                not_before=tuple(str(a).lower() for a in raw.get("not_before") or ()),
                not_after=tuple(str(a).lower() for a in raw.get("not_after") or ()),
            )
        )
    return tuple(out)


@functools.lru_cache(maxsize=4)
def load_question_patterns(name: str = "questions.v1") -> QuestionPatterns:
    """Load a question pattern file by packaged name (`questions.v1`) or path.

    Raises:
        PatternFileError: the file is missing, or an entry has no id, phrases or value.
    """
    name, data = read_pattern_file(name)
    qualifiers = {
        "side": _entries(name, data.get("sides"), "sides", values=True),
        "zone": _entries(name, data.get("zones"), "zones", values=True),
        "lobe": _entries(name, data.get("lobes"), "lobes", values=True),
        "severity": _entries(name, data.get("severities"), "severities", values=True),
        "change": _entries(name, data.get("changes"), "changes", values=True),
        "count": _entries(name, data.get("counts"), "counts", values=True),
        "descriptor": _entries(name, data.get("descriptors"), "descriptors", values=True),
    }
    opens = _entries(name, data.get("open"), "open")
    quality = data.get("quality") or {}
    if not isinstance(quality, dict):
        raise PatternFileError(f"{name}: `quality` must be a mapping")
    for e in opens:
        if e.get("type") not in QUESTION_TYPES:
            raise PatternFileError(
                f"{name}: open entry {e.id} has an unknown type {e.get('type')!r}"
            )
    units = {str(k).lower(): float(v) for k, v in (data.get("units") or {}).items()}
    if not units:
        raise PatternFileError(f"{name}: `units` must map unit words to millimetres")
    dominance = _dominance(name, data.get("dominance") or {})
    return QuestionPatterns(
        name=name,
        findings=_entries(name, data.get("findings"), "findings", values=True),
        fallback_findings=_entries(
            name, data.get("fallback_findings"), "fallback_findings", values=True
        ),
        blockers=_entries(name, data.get("blockers"), "blockers"),
        open=opens,
        qualifiers=qualifiers,
        comparisons=_entries(name, data.get("comparisons"), "comparisons", values=True),
        trailing=_entries(
            name, data.get("trailing_comparisons"), "trailing_comparisons", values=True
        ),
        units=units,
        number_words={
            str(k).lower(): float(v) for k, v in (data.get("number_words") or {}).items()
        },
        prior_words=_words(data, "comparison_prior_words"),
        presence=_entries(name, data.get("presence"), "presence"),
        negations=_entries(name, data.get("negations"), "negations"),
        question_words=_words(data, "question_words"),
        study=_entries(name, data.get("study"), "study"),
        acute_labels=frozenset(str(w) for w in data.get("acute_labels") or ()),
        worse_changes=_words(data, "worse_changes"),
        lobe_words=_words(data, "lobe_words"),
        place_units={
            tuple(str(p).lower().split()): str(unit)
            for unit, phrases in _lists(data, "place_units").items()
            for p in phrases
        },
        spread_words=_words(data, "spread_words"),
        borderline_words=_words(data, "borderline_words"),
        paired_plurals=_words(data, "paired_plurals"),
        one_of_pair=_words(data, "one_of_pair"),
        place_wholes=_words(data, "place_wholes"),
        spine_parts={str(k).lower(): str(v) for k, v in (data.get("spine_parts") or {}).items()},
        single_words=_words(data, "single_words"),
        exchange_words=_words(data, "exchange_words"),
        exchange_nouns=_words(data, "exchange_nouns"),
        place_study_words=_words(data, "place_study_words"),
        multiple_places_words=tuple(
            tuple(str(p).lower().split()) for p in data.get("multiple_places_words") or ()
        ),
        spine_place_words=_words(data, "spine_place_words"),
        view_counts={str(k): int(v) for k, v in (data.get("view_counts") or {}).items()},
        quality_limitation=str(quality.get("limitation") or ""),
        quality_not_limiting=_words(quality, "not_limiting"),
        quality_limiting_words=_words(quality, "limiting_words"),
        quality_view_words={k: frozenset(v) for k, v in _lists(quality, "view_words").items()},
        quality_aspects={k: frozenset(v) for k, v in _lists(quality, "aspects").items()},
        yes_no_starts=_words(data, "yes_no_starts"),
        context_words=_words(data, "context_words"),
        qualifier_before=_words(data, "qualifier_before"),
        verity_words=_words(data, "verity_words"),
        qualifier_links=_words(data, "qualifier_links"),
        beside_links=tuple(tuple(str(p).split()) for p in data.get("beside_links") or ()),
        narrowing_links=tuple(tuple(str(p).split()) for p in data.get("narrowing_links") or ()),
        qualifier_after=_words(data, "qualifier_after"),
        device_words=_words(data, "device_words"),
        zone_includes={str(e.value): frozenset(e.accepts) for e in qualifiers["zone"]},
        absorbed={
            str(k): frozenset(str(i) for i in v) for k, v in (data.get("absorbed") or {}).items()
        },
        site_generic_words=_words(data, "site_generic_words"),
        dominance_starts=dominance[0],
        dominance_comparatives=dominance[1],
        dominance_patterns=dominance[2],
        dominance_study_comparatives=_words(data.get("dominance") or {}, "study_comparatives"),
        one_per_side=frozenset(str(w) for w in data.get("one_per_side") or ()),
        counted_by_tips=frozenset(str(w) for w in data.get("counted_by_tips") or ()),
        uncounted=frozenset(str(w) for w in data.get("uncounted") or ()),
        graded_findings=frozenset(str(w) for w in data.get("graded_findings") or ()),
        process_heads=_words(data, "process_heads"),
        unruled_by_silence=frozenset(str(w) for w in data.get("unruled_by_silence") or ()),
        alternatives=_words(data, "alternatives"),
        probable_readings=_compiled(name, "probable_readings", data.get("probable_readings")),
        probable_within=_compiled(name, "probable_within", data.get("probable_within")),
        dating_clauses=_compiled(name, "dating_clauses", data.get("dating_clauses")),
        contrast_clauses=_compiled(name, "contrast_clauses", data.get("contrast_clauses")),
        stated_normal=_lists(data, "stated_normal"),
        sentence_normals=frozenset(str(c) for c in data.get("sentence_normals") or ()),
        normal_subjects=_lists(data, "normal_subjects"),
        anatomy_normals=_lists(data, "anatomy_normals"),
        no_acute_statements=frozenset(str(c) for c in data.get("no_acute_statements") or ()),
        study_normal_not_after=_words(data, "study_normal_not_after"),
        study_normal_statements=tuple(
            " ".join(str(c).lower().split()) for c in data.get("study_normal_statements") or ()
        ),
        unchanged_statements=frozenset(str(c) for c in data.get("unchanged_statements") or ()),
        unchanged_denials=frozenset(str(c) for c in data.get("unchanged_denials") or ()),
        unchanged_denial_dates=tuple(
            f" {' '.join(str(c).lower().split())} "
            for c in data.get("unchanged_denial_dates") or ()
        ),
        change_list_joins=_words(data, "change_list_joins"),
        change_list_fillers=_words(data, "change_list_fillers"),
        minor_acute_labels=frozenset(str(c) for c in data.get("minor_acute_labels") or ()),
        place_parts=_words(data, "place_parts"),
        problem_cues=tuple(str(w).lower() for w in data.get("problem_cues") or ()),
        history_cues=tuple(str(w).lower() for w in data.get("history_cues") or ()),
        history_kinds=_words(data, "history_kinds"),
        tip_words=_words(data, "tip_words"),
        insertion_words=_words(data, "insertion_words"),
        past_words=_words(data, "past_words"),
        superlatives={
            str(k): frozenset(str(w).lower() for w in v or ())
            for k, v in (data.get("superlatives") or {}).items()
        },
        gone_rules=frozenset(str(w) for w in data.get("gone_rules") or ()),
        gone_changes=_words(data, "gone_changes"),
        size_words=_words(data, "size_words"),
        sized_by_grade=frozenset(str(w) for w in data.get("sized_by_grade") or ()),
        size_change_words=_words(data, "size_change_words"),
        answered_by=_lists(data, "answered_by"),
        read_together=_lists(data, "read_together"),
        open_alike=_lists(data, "open_alike"),
        joining_words=_words(data, "joining_words"),
        tips_of=_lists(data, "tips_of"),
        not_new_words=_words(data, "not_new_words"),
        complement_joins=_words(data, "complement_joins"),
        uncompared_change_words=_words(data, "uncompared_change_words"),
        comparison_words=_words(data, "comparison_words"),
        persistence_words=_words(data, "persistence_words"),
        course_changes=_words(data, "course_changes"),
        interval_new_words=_words(data, "interval_new_words"),
        interval_new_kinds=_words(data, "interval_new_kinds"),
        named_within_kinds=_words(data, "named_within_kinds"),
        relative_words=_words(data, "relative_words"),
        relative_denying=_words(data, "relative_denying"),
        replaced_words=tuple(_words(data, "replaced_words")),
        part_normal_parts=_words(data, "part_normal_parts"),
        part_general_words=_words(data, "part_general_words"),
        part_change_words=_words(data, "part_change_words"),
        sized_parts=_words(data, "sized_parts"),
        part_places=_words(data, "part_places"),
        part_aliases={
            str(k).lower(): str(v).lower() for k, v in (data.get("part_aliases") or {}).items()
        },
        site_aliases={
            str(k).lower(): tuple(w.lower() for w in v)
            for k, v in _lists(data, "site_aliases").items()
        },
        site_level=re.compile(str(data["site_level"])) if data.get("site_level") else None,
        tip_devices=frozenset(str(w) for w in data.get("tip_devices") or ()),
        read_as_label=_lists(data, "read_as_label"),
        measured_by=_lists(data, "measured_by"),
        suggested_by=_lists(data, "suggested_by"),
        suggested_when_hedged=_lists(data, "suggested_when_hedged"),
        explained_by=_lists(data, "explained_by"),
        unassessed_by=_lists(data, "unassessed_by"),
        called_limited=_lists(data, "called_limited"),
        study_nouns=_words(data, "study_nouns"),
        pronouns=_words(data, "pronouns"),
        demonstratives=_words(data, "demonstratives"),
        after_pronoun=_words(data, "after_pronoun"),
        before_pronoun=_words(data, "before_pronoun"),
        not_open_heads=_words(data, "not_open_heads"),
        not_report_words=_words(data, "not_report_words"),
        not_report_questions=_words(data, "not_report_questions"),
        degree_words=_words(data, "degree_words"),
        bare_fillers=_words(data, "bare_fillers"),
        bare_studies=tuple(
            tuple(w for w in p.split() if w not in _words(data, "bare_fillers"))
            for p in sorted(_words(data, "bare_studies"))
        ),
        denying_words=_words(data, "denying_words"),
        reading_words=_words(data, "reading_words"),
        reading_links=_words(data, "reading_words") | _words(data, "reading_links"),
    )


def _lists(data: Mapping[str, object], key: str) -> dict[str, tuple[str, ...]]:
    """A mapping of the pattern file from a name to a list of names."""
    raw = data.get(key) or {}
    if not isinstance(raw, dict):
        raise PatternFileError(f"`{key}` must map names to lists")
    return {str(k): tuple(str(c) for c in v or ()) for k, v in raw.items()}


def _words(data: Mapping[str, object], key: str) -> frozenset[str]:
    """A list of words of the pattern file, lower-cased."""
    raw = data.get(key) or ()
    return frozenset(str(w).lower() for w in raw) if isinstance(raw, list | tuple) else frozenset()


def _compiled(
    name: str, key: str, data: object, *, flags: int = re.IGNORECASE, group: str | None = None
) -> tuple[re.Pattern[str], ...]:
    """A list of regular expressions, compiled; each must have the named `group`, if any."""
    if data is None:
        return ()
    if not isinstance(data, list):
        raise PatternFileError(f"{name}: {key} must be a list")
    out = []
    for raw in data:
        try:
            pattern = re.compile(str(raw), flags)
        except re.error as exc:
            raise PatternFileError(f"{name}: {key} pattern {raw!r}: {exc}") from None
        if group is not None and group not in pattern.groupindex:
            raise PatternFileError(f"{name}: {key} pattern {raw!r} has no group `{group}`")
        out.append(pattern)
    return tuple(out)


def _dominance(
    name: str, data: object
) -> tuple[tuple[str, ...], frozenset[str], tuple[re.Pattern[str], ...]]:
    """The `dominance` section: starts, comparatives and compiled report patterns."""
    if not isinstance(data, dict):
        raise PatternFileError(f"{name}: `dominance` must be a mapping")
    patterns = _compiled(name, "dominance", data.get("report_patterns"), flags=0, group="side")
    return (
        tuple(str(w).lower() for w in data.get("starts") or ()),
        _words(data, "comparatives"),
        patterns,
    )


@dataclass(frozen=True)
class Qualifier:
    """What a closed question asks to be true of the finding.

    Attributes:
        kind: side, zone, lobe, severity, change, count or size.
        value: the asked value (`left`, `upper`, `small`, `increased`, 2, 30.0 mm ...).
        accepts: report values that satisfy it (side, zone, severity, change).
        op: for size and count: gt, ge, lt, le or eq.
        rule: the id of the pattern entry that matched.
        start, end: character offsets in the question.
    """

    kind: str
    value: str | int | float
    accepts: tuple[str, ...] = ()
    op: str = "eq"
    rule: str = ""
    start: int = 0
    end: int = 0
    #: words that say the describing word does not hold ("old" for "acute"); with none
    #: of either beside the finding, the answer is unknown
    rejects: tuple[str, ...] = ()


@dataclass(frozen=True)
class ParsedQuestion:
    """A question as understood: its type, finding, what it asks, and why.

    Attributes:
        text: the question.
        type: presence, position, size, count, change, severity or unsupported.
        label: the finding: a label of the label set, `concept:<id>` for a concept of
            the chest lexicon outside the labels (devices, granulomas, fractures...), or
            `open:<word>` for a general finding word ("lesion"); None when unsupported.
        open: True for an open question ("Where ...?"), False for yes/no.
        asks: for open position questions, `side`, `place`, `tip`, `level` or `dominant`;
            `state` for "What is the heart size?"; for study questions, what they ask;
            `or_study` for a part's change asked by a whole-study cue ("Has the mediastinum
            changed since the last film?": the part's change, else the whole study's).
        qualifiers: what a closed question asks to be true; all must hold.
        negated: a presence question asked the other way round ("Is the heart normal?").
        unit: for an open size question, the unit it asks the answer in ("cm" for "How
            large is the mass in centimetres?"); None: millimetres.
        also, joined: the other findings of a presence question about several, and "or"
            (yes when any is) or "and" (yes when all are).
        where: for an open question, the place it names the finding by ("How large is the
            left effusion?"): of several findings, the one there is asked about.
        rules: ids of the pattern entries that decided the parse.
        message: why the question is unsupported.
    """

    text: str
    type: QuestionType
    label: str | None = None
    open: bool = False
    asks: str | None = None
    qualifiers: tuple[Qualifier, ...] = ()
    negated: bool = False
    rules: tuple[str, ...] = ()
    message: str | None = None
    unit: str | None = None
    #: a presence question about several findings ("Any effusion or pneumothorax?"): the
    #: findings after `label`, and how they are joined ("or": any; "and": all)
    also: tuple[str, ...] = ()
    joined: str | None = None
    where: tuple[Qualifier, ...] = ()
    #: the lexicon concept the words that name `label` also name ("lung tumor": Mass, and
    #: the lexicon's lung cancer): it answers where the report names the label nowhere
    kin: str | None = None


#: unit words a size question may ask its answer in -> the short unit name
_UNIT_NAMES = {1.0: "mm", 10.0: "cm", 1000.0: "m", 25.4: "in"}
_MM_PER_UNIT = {name: per for per, name in _UNIT_NAMES.items()}
# unit words that are also plain words ("in the lung", "m" as an initial)
_AMBIGUOUS_UNITS = frozenset({"in", "m", '"'})


@dataclass(frozen=True)
class _Hit:
    group: str  # finding, fallback, blocker, open, comparison, <qualifier kind>, presence, negation
    entry: _Entry
    start: int  # tokens
    end: int


@dataclass
class _Reading:
    """A question being parsed, once its one finding is known: what the later steps share."""

    text: str
    doc: Doc
    words: list[str]  # the tokens, lower case
    label: str
    rules: list[str]  # the finding's rule
    found: list[tuple[str, str, int, int]]  # (label, rule id, start, end) of the findings
    all_hits: list[_Hit]
    hits: list[_Hit]  # less the qualifiers the finding's own name absorbs
    taken: list[tuple[int, int]]  # token spans explained so far

    def free(self, h: _Hit) -> bool:
        """Whether `h` overlaps no span taken so far."""
        return not any(s < h.end and h.start < e for s, e in self.taken)

    def free_at(self, i: int) -> bool:
        """Whether token `i` lies in no span taken so far."""
        return not any(s <= i < e for s, e in self.taken)


class QuestionParser:
    """Parse questions with the labeler's pipeline and a question pattern file.

    Args:
        nlp: a pipeline from `labeler.pipeline.build_nlp` (its tokenizer and the
            `cxr_concepts` component are used).
        labels: the label set's labels; findings outside it are not answered.
        patterns: question pattern file name or path.
        cache_size: parsed questions remembered (questions repeat in batches).
        lexicon: the chest lexicon: a question that names none of the labels may name one
            of its concepts (answered from `ReportLabels.report_findings`); None: labels only.
    """

    def __init__(
        self,
        nlp: Language,
        labels: Sequence[str],
        patterns: str = "questions.v1",
        *,
        cache_size: int = 50_000,
        lexicon: Lexicon | None = None,
    ) -> None:
        self.nlp = nlp
        self.lexicon = lexicon
        self._lexicon_matcher = (
            lexicon_matcher(nlp, lexicon, skip_kinds={"anatomy", "normal"}, predicates=False)
            if lexicon
            else None
        )
        self._concept_words = _concept_words(nlp, lexicon) if lexicon else []
        self._anatomy_matcher = (
            lexicon_matcher(nlp, lexicon, skip_kinds=set(KINDS) - {"anatomy"}) if lexicon else None
        )
        self._tips = load_tip_finder()
        self.patterns = load_question_patterns(patterns)
        # general finding words a question may name a finding by, less those that name the
        # whole study or say nothing of what is seen
        self._open_heads = (
            frozenset(lexicon.open_finding_heads) - self.patterns.not_open_heads
            if lexicon
            else frozenset()
        )
        self._pointing = self.patterns.demonstratives | {"the"}
        self._stop_words = frozenset(nlp.Defaults.stop_words)
        # "Are the lungs clear?": a normal statement, asked about when nothing else is named
        # "Any acute bony findings?" names "no acute bony findings" without its "no": it asks
        # about the abnormality that statement rules out
        deny = self.patterns.denying_words
        self._normal_words, self._denied_normal_words = (
            (
                _concept_words(nlp, lexicon, normal=True, denying=deny, denied=False),
                _concept_words(nlp, lexicon, normal=True, denying=deny, denied=True),
            )
            if lexicon
            else ([], [])
        )
        # each list's concepts by their phrase's word set, with their place in the list
        self._by_stems = {
            id(words): _by_stems(words)
            for words in (self._concept_words, self._normal_words, self._denied_normal_words)
        }
        # the words of each concept's phrases: a blocker inside the span of a concept named
        # by scattered words is the concept's only when it is one of them
        self._phrase_stems: dict[str, frozenset[str]] = {}
        for concept, stems in self._concept_words:
            key = CONCEPT_PREFIX + concept
            self._phrase_stems[key] = self._phrase_stems.get(key, frozenset()) | stems
        self._by_least_stem = {
            id(words): _by_least_stem(words)
            for words in (self._concept_words, self._normal_words, self._denied_normal_words)
        }
        self.labels = frozenset(labels)
        self._sites = site_words(lexicon, self.patterns.site_generic_words) if lexicon else {}
        # the attribute file's body places ("clavicle", "AC joint") name sites too
        places = place_parts(self.patterns)
        if lexicon:
            sites = {w: set(v) for w, v in self._sites.items()}
            for _, words in places.values():
                for w in words:
                    sites.setdefault(w, set()).update(words)
            for w, more in self.patterns.site_aliases.items():
                sites.setdefault(w, {w}).update(more)
            self._sites = {w: frozenset(v) for w, v in sites.items()}
        self._part_words = frozenset(w for _, words in places.values() for w in words)
        self._part_matcher = PhraseMatcher(nlp.vocab, attr="LOWER")
        for value, (phrases, _) in places.items():
            aliases = [a for a, v in self.patterns.part_aliases.items() if v == value]
            self._part_matcher.add(value, [nlp.make_doc(ph) for ph in (*phrases, *aliases)])
        self.cache_size = cache_size
        self._cache: dict[str, ParsedQuestion] = {}
        try:
            concepts = nlp.get_pipe("cxr_concepts")
        except KeyError:
            raise PatternFileError(
                "nlp lacks the labeler's cxr_concepts component; build it with "
                "labeler.pipeline.build_nlp(config)"
            ) from None
        if not isinstance(concepts, ConceptMatcher):
            raise PatternFileError("the cxr_concepts component is not the labeler's ConceptMatcher")
        self._concepts = concepts
        self._matcher = PhraseMatcher(nlp.vocab, attr="LOWER")
        self._entries: dict[str, tuple[str, _Entry]] = {}
        p = self.patterns
        groups: list[tuple[str, Iterable[_Entry]]] = [
            ("finding", p.findings),
            ("fallback", p.fallback_findings),
            ("blocker", p.blockers),
            ("open", p.open),
            ("comparison", p.comparisons),
            ("trailing", p.trailing),
            ("presence", p.presence),
            ("negation", p.negations),
            ("study", p.study),
            *((kind, p.qualifiers[kind]) for kind in _QUALIFIER_KINDS),
        ]
        for group, entries in groups:
            for e in entries:
                key = f"{group}|{e.id}"
                self._entries[key] = (group, e)
                self._matcher.add(key, [nlp.make_doc(ph) for ph in e.phrases])
        self._strings = nlp.vocab.strings

    def parse_many(self, texts: Iterable[str]) -> list[ParsedQuestion]:
        """Parse questions in order (repeated questions come from a cache)."""
        return [self.parse(t) for t in texts]

    def parse(self, text: str, *, referent: str | None = None) -> ParsedQuestion:
        """Parse one question.

        Args:
            text: the question, in plain English.
            referent: the finding (a label, or `concept:<id>`) that a pronoun of a
                question naming none stands for ("Has it grown?" after a question about
                the nodule); ignored when the question names its finding.

        Returns:
            The parse; `type == "unsupported"` with a `message` when it cannot be read.
        """
        parsed = self._parse_cached(text)
        if referent is None or parsed.label is not None or parsed.type != "unsupported":
            return parsed
        return self._with_referent(text, parsed, referent)

    def report_words(self, text: str) -> tuple[str, ...]:
        """The words a question that names no finding may name what it asks about by, in
        its order: the last of each run of words that are none of the question's own
        pattern words, stop words, sites or `not_report_words` ("Where are the
        phleboliths?": phleboliths; "the paratracheal soft tissues": tissues); none for any
        other question, or one with a word of `not_report_questions` ("Does the patient
        ...?"). A report that names one is read for it (`parse_report_word`)."""
        parsed = self._parse_cached(text)
        if parsed.label is not None or not (parsed.message or "").startswith(_NO_FINDING):
            return ()
        doc = self.nlp.make_doc(normalize_text(text))
        if not self.patterns.not_report_questions.isdisjoint(t.lower_ for t in doc):
            return ()  # "Does the patient smoke?": about the patient, not what is seen
        taken = {i for h in self._hits(doc) for i in range(h.start, h.end)}
        skip = self.patterns.not_report_words | self._stop_words
        kept = [
            t.i
            for t in doc
            if t.i not in taken
            and t.is_alpha
            and len(t) > 2
            and t.lower_ not in skip
            and not self._is_site(t)
        ]
        # the last of each run of such words, its head ("the paratracheal soft tissues")
        heads = [i for i in kept if i + 1 not in kept]
        return tuple(dict.fromkeys(doc[i].lower_ for i in heads))

    def parse_report_word(self, text: str, word: str) -> ParsedQuestion:
        """The question read with `word` (one of its `report_words`) as a general finding
        word, `open:<singular>`, with the rule `REPORT_WORD_RULE`; not cached."""
        heads = self._open_heads
        self._open_heads = heads | {word}
        try:
            parsed = self._parse(normalize_text(text))
        finally:
            self._open_heads = heads
        rules = tuple(REPORT_WORD_RULE if r == "open.head" else r for r in parsed.rules)
        return dataclasses.replace(parsed, rules=rules)

    def refers_back(self, text: str) -> bool:
        """Whether the question stands a pronoun where its finding would be ("Has it
        grown?", "Is this new?")."""
        return _pronoun_at(self.nlp.make_doc(text), self.patterns) is not None

    def _elliptic(self, text: str, parsed: ParsedQuestion, name: str) -> ParsedQuestion:
        """A question of the engine's own words alone, its finding left out ("Which lobe?",
        "How big?" after a question about the pneumonia), read as asked of the referent:
        the finding put after it; only an open question of where, how big or how bad."""
        if not (parsed.message or "").startswith(_NO_FINDING):
            return parsed
        doc = self.nlp.make_doc(normalize_text(text))
        taken = {i for h in self._hits(doc) for i in range(h.start, h.end)}
        if any(t.is_alpha and t.i not in taken and t.lower_ not in self._stop_words for t in doc):
            return parsed  # a word of its own ("Where is the trachea?") names what it asks
        again = self._parse_cached(f"{text.rstrip(' ?.')} is the {name}?")
        # not a change: "Is there anything that has changed?" asks it of the whole study
        if not again.open or again.type not in _ELLIPTIC or again.label is None:
            return parsed
        return dataclasses.replace(again, text=text, rules=(*again.rules, "referent.elliptic"))

    def _with_referent(self, text: str, parsed: ParsedQuestion, referent: str) -> ParsedQuestion:
        """The question read with its pronoun replaced by the referent's name, when that
        reading is supported; else `parsed`."""
        doc = self.nlp.make_doc(text)
        at = _pronoun_at(doc, self.patterns)
        name = self._finding_name(referent)
        if name is None:
            return parsed
        if at is None:
            return self._elliptic(text, parsed, name)
        token = doc[at]
        named = f"{text[: token.idx]}the {name}{text[token.idx + len(token) :]}"
        again = self._parse_cached(named)
        # "What is it?" asks what a thing is, not the state of the finding before
        if again.type == "unsupported" or again.label is None or again.asks == "state":
            return parsed
        # the qualifiers' offsets back in the question's own words ("How marked is it:
        # mild, moderate or severe?" answers in the grade it offered); one inside the
        # name put in stands on the pronoun
        pronoun, put = (token.idx, token.idx + len(token)), len(named) - len(text)

        def back(q: Qualifier) -> Qualifier:
            if q.start >= pronoun[1] + put:
                return dataclasses.replace(q, start=q.start - put, end=q.end - put)
            if q.end > pronoun[0]:
                return dataclasses.replace(q, start=pronoun[0], end=pronoun[1])
            return q

        return dataclasses.replace(
            again,
            text=text,
            rules=(*again.rules, "referent"),
            qualifiers=tuple(map(back, again.qualifiers)),
            where=tuple(map(back, again.where)),
        )

    def _finding_name(self, label: str) -> str | None:
        """The words a question names a label or a lexicon concept by."""
        if label.startswith(CONCEPT_PREFIX):
            entry = (
                self.lexicon.concepts.get(label[len(CONCEPT_PREFIX) :]) if self.lexicon else None
            )
            return entry.name if entry is not None else None
        return label.replace("_", " ").lower() if label in self.labels else None

    def _parse_cached(self, text: str) -> ParsedQuestion:
        hit = self._cache.get(text)
        if hit is None:
            # Read as a report's sentence is (invisible and look-alike characters); the
            # parse's offsets index the normalised text, which it carries.
            hit = self._with_kin(self._parse(normalize_text(text)))
            if self.cache_size:
                if len(self._cache) >= self.cache_size:
                    del self._cache[next(iter(self._cache))]
                self._cache[text] = hit
        return hit

    def _with_kin(self, parsed: ParsedQuestion) -> ParsedQuestion:
        """The parse with the lexicon concept named by the very words that name its label
        ("Any lung tumor?": the lexicon's lung cancer), if one is."""
        if parsed.label not in self.labels or self._lexicon_matcher is None:
            return parsed
        clean = parsed.text.strip()
        for clause in (*self.patterns.dating_clauses, *self.patterns.contrast_clauses):
            clean = clause.sub("", clean)
        doc = self.nlp.make_doc(clean)
        named = {
            (h.start, h.end)
            for h in self._hits(doc)
            if h.group == "finding" and h.entry.value == parsed.label
        }
        # the longest words that name both ("lung tumor", not its "tumor")
        kin = sorted(
            (start - end, self._strings[match_id])
            for match_id, start, end in self._lexicon_matcher(doc)
            if (start, end) in named
        )
        if not kin or (len(kin) > 1 and kin[1][0] == kin[0][0]):
            return parsed
        return dataclasses.replace(parsed, kin=kin[0][1])

    # --- parsing ---------------------------------------------------------------------

    def _hits(self, doc: Doc) -> list[_Hit]:
        out = []
        for match_id, start, end in self._matcher(doc):
            group, entry = self._entries[self._strings[match_id]]
            if (
                group == "count"
                and end - start == 1
                and doc[start].lower_ == "one"
                and start > 0
                and doc[start - 1].lower_ in self.patterns.size_words
            ):
                continue  # "Is the effusion a large one?": "one" stands for the finding
            if start > 0 and doc[start - 1].lower_ in entry.not_after:
                continue  # "Any bone changes of renal osteodystrophy?": a finding's noun
            if group != "blocker" and end < len(doc) and doc[end].lower_ in entry.not_before:
                continue  # "worse than on the old film": a prior study, no old finding
            out.append(_Hit(group, entry, start, end))
        return out

    def _parse(self, text: str) -> ParsedQuestion:
        clean = text.strip()
        if not clean:
            return ParsedQuestion(text, "unsupported", message="the question is empty")
        if len(clean) > 500:
            return ParsedQuestion(
                text, "unsupported", message="the question is longer than 500 characters"
            )
        for clause in (*self.patterns.dating_clauses, *self.patterns.contrast_clauses):
            clean = clause.sub("", clean)
        doc = self.nlp.make_doc(clean)
        words = [t.lower_ for t in doc]
        hits = self._hits(doc)
        found = self._findings(doc, hits)
        # a blocker's word inside a finding's name is the finding's ("chest drain"), and one
        # right after an operation's or a device's is its name too ("spinal fusion surgery")
        blockers = [
            h
            for h in hits
            if h.group == "blocker"
            and not any(
                s <= h.start
                and h.end <= e
                and (
                    rule != "lexicon.words"
                    or all(
                        _stem(t.lower_) in self._phrase_stems.get(label, frozenset())
                        for t in doc[h.start : h.end]
                    )
                )
                for label, rule, s, e in found
            )
            and not any(
                e == h.start and self._kind(label) in ("postop", "device")
                for label, _, _, e in found
            )
            and not (h.end < len(doc) and doc[h.end].lower_ in h.entry.not_before)
            # ... and one inside a longer qualifier's phrase is the qualifier's ("of uncertain
            # age": the finding's age, not the patient's)
            and not any(
                q.group in _QUALIFIER_KINDS
                and q.start <= h.start
                and h.end <= q.end
                and q.end - q.start > h.end - h.start
                for q in hits
            )
        ]
        if blockers:
            b = blockers[0]
            return ParsedQuestion(
                text,
                "unsupported",
                rules=(b.entry.id,),
                message=f"questions about {doc[b.start : b.end].text!r} are not answered; "
                "supported: presence, position, size, count, change and severity of a finding",
            )
        organ = self._organ_problem(doc)
        fallback = {e.id for e in self.patterns.fallback_findings}
        if organ is not None and all(rule in fallback for _, rule, *_ in found):
            # "Is there a problem with the spine?", "Is something wrong with the heart?": any
            # finding of that part of the body (its own word is no finding here)
            return ParsedQuestion(text, "presence", label=organ, rules=("organ.problem",))
        labels = list(dict.fromkeys(lab for lab, *_ in found))
        study = [h for h in hits if h.group == "study"]
        said_of = self._part_normal(doc, hits) if not labels else None
        asked_part = self._part_asked(doc, hits, found) if said_of is None else None
        if asked_part is None and said_of is None and not labels:
            asked_part = self._part_sized(doc, hits)
        if asked_part is not None:
            # "Which clavicle is abnormal?", "How bad are the AC joint changes?": the findings
            # at that part of the body, asked about as one finding
            found, labels = asked_part, [asked_part[0][0]]
        if said_of is not None:
            # "Is the spine normal?": whether a finding of the spine is read, the other way
            # round; not the whole study
            cue, concept = said_of
            return ParsedQuestion(
                text, "presence", label=concept, negated=cue.entry.get("asks") == "normal",
                rules=("organ.normal", cue.entry.id),
            )  # fmt: skip
        quality = [h for h in study if h.entry.get("asks") == "quality"]
        views = [lab for lab in labels if self._kind(lab) == "view"]
        if quality and len(views) == len(labels) <= 1:
            # "Is the lateral view adequate?", "Was this a technically good study?": whether
            # the study, or the view named, was taken well
            return ParsedQuestion(
                text, "study", label=views[0] if views else None, asks="quality",
                rules=(quality[0].entry.id,),
            )  # fmt: skip
        unit = _place_unit(text, self.patterns)
        counting = [h for h in hits if h.group == "open" and h.entry.get("type") == "count"]
        if (
            not labels
            and not study
            and unit is not None
            and counting
            and self.patterns.place_study_words & set(words)
        ):
            # "How many ribs are abnormal?": the places the abnormal findings name
            return ParsedQuestion(
                text, "study", open=True, asks=unit, rules=(counting[0].entry.id,)
            )  # fmt: skip
        if not labels and study:
            # "Is this chest X-ray normal?": about the whole study; the longest cue wins
            cue = max(study, key=lambda h: h.end - h.start)
            where = [h for h in hits if h.group == "open" and h.entry.get("type") == "position"]
            if where and cue.entry.get("asks") == "abnormal":
                # "Which side is the abnormality on?", "Which lobe is affected?": where the
                # report's abnormal findings are
                side = any(h.entry.get("asks") == "side" for h in where)
                more = self._asks_study_dominant(words)
                return ParsedQuestion(
                    text, "study", open=True,
                    asks=("dominant" if more else "side") if side else "place",
                    rules=(cue.entry.id, where[0].entry.id),
                )  # fmt: skip
            asks = cue.entry.get("asks")
            # "Has the right base abnormality changed?": how the findings there compare
            # ("Is there anything new in the left lung?" asks no such thing)
            changed = any(
                h.group == "open" and h.entry.id == "open.change" and words[h.start] == "changed"
                for h in hits
            )
            if asks == "abnormal" and changed:
                asks = "change"
            # "Is the left basal abnormality worse?": whether the findings there changed so
            told = [h for h in hits if h.group == "change"]
            placed = any(h.group in ("side", "zone", "lobe") for h in hits)
            told_there = asks == "abnormal" and bool(told) and placed
            if told_there:
                asks, changed = "change", True
            part = self._part_changed(doc, hits) if asks == "change" else None
            if part is not None:
                # "Has the mediastinum changed since the last film?": that part's change, not
                # the whole study's
                return ParsedQuestion(
                    text, "change", label=part, open=True, asks="or_study",
                    rules=("part.change", cue.entry.id),
                )  # fmt: skip
            if asks in ("views", "list"):
                # "How many views were taken?", "What is abnormal in the left lung?": read off
                # the report (the abnormal findings of the place it names)
                places = tuple(
                    _qualifier(doc, h) for h in hits if h.group in ("side", "zone", "lobe")
                )
                return ParsedQuestion(
                    text, "study", open=True, asks=asks, qualifiers=places,
                    rules=(cue.entry.id, *(q.rule for q in places)),
                )  # fmt: skip
            measured = [
                h for h in hits
                if h.group == "open" and h.entry.get("type") in ("size", "count", "severity")
            ]  # fmt: skip
            unit = _place_unit(text, self.patterns)
            if (
                measured
                and measured[0].entry.get("type") == "count"
                and (unit or any(w in self.patterns.lobe_words for w in words))
            ):
                # "How many lobes are involved?", "How many lung bases are involved?": the
                # places the abnormal findings name
                return ParsedQuestion(
                    text, "study", open=True, asks=unit or "lobes",
                    rules=(cue.entry.id, measured[0].entry.id),
                )  # fmt: skip
            if measured:
                # "How big is the abnormality?": another measure of the whole study is not read
                return ParsedQuestion(
                    text, "unsupported", rules=(cue.entry.id, measured[0].entry.id),
                    message="a size, count or severity is asked only of a finding",
                )  # fmt: skip
            kinds = ("side", "zone", "lobe", *(("change",) if told_there else ()))
            places = tuple(_qualifier(doc, h) for h in hits if h.group in kinds)
            if places and asks not in ("normal", "abnormal") and not (asks == "change" and changed):
                return ParsedQuestion(
                    text, "unsupported",
                    message="a place is asked about only for the study's normal or abnormal "
                    "findings",
                )  # fmt: skip
            return ParsedQuestion(
                text, "study", asks=asks, qualifiers=places,
                rules=(cue.entry.id, *(q.rule for q in places)),
            )  # fmt: skip
        if not labels and self._asks_study_dominant(words):
            # "Which lung is worse?": the side the report's abnormal findings are more of
            side_cues = [h for h in hits if h.group == "open" and h.entry.get("asks") == "side"]
            if side_cues:
                return ParsedQuestion(
                    text, "study", open=True, asks="dominant", rules=(side_cues[0].entry.id,)
                )
        part = self._part_changed(doc, hits) if not labels else None
        if part is not None:
            # "Has the mediastinum changed?": what the report says of that part's change
            return ParsedQuestion(text, "change", label=part, open=True, rules=("part.change",))
        if not labels:
            return ParsedQuestion(
                text,
                "unsupported",
                message=f"{_NO_FINDING} (known: {', '.join(sorted(self.labels))})",
            )
        several = ParsedQuestion(
            text,
            "unsupported",
            message=f"the question names more than one finding ({', '.join(labels)}); "
            "ask about one at a time, or ask whether any of them is present",
        )
        joined = self._joined(doc, found) if len(labels) > 1 else None
        if len(labels) > 1 and joined is None:
            return several
        label = labels[0]
        lowered = " ".join(words)
        if self._kind(label) not in self.patterns.history_kinds and any(
            f" {cue} " in f" {lowered} " for cue in self.patterns.history_cues
        ):
            return ParsedQuestion(
                text, "unsupported", label=label, rules=("history",),
                message="the patient's history of a disease is not in a radiograph's report; "
                "ask whether the study shows it",
            )  # fmt: skip
        absorbed = self.patterns.absorbed.get(label, frozenset())
        r = _Reading(
            text=text,
            doc=doc,
            words=words,
            label=label,
            rules=[rid for _, rid, _, _ in found[:1]],
            found=found,
            all_hits=hits,
            hits=[
                h
                for h in hits
                if not (
                    h.group in _QUALIFIER_KINDS
                    and (
                        doc[h.start : h.end].text.lower() in absorbed
                        # "in one lung or both": the count word is the open cue's
                        or any(
                            o.group == "open"
                            and o.start <= h.start
                            and h.end <= o.end
                            and o.end - o.start > h.end - h.start
                            and o.entry.get("asks") == "side"
                            for o in hits
                        )
                    )
                )
            ],
            taken=[(s, e) for _, _, s, e in found]
            + self._subject_of_reading(doc, found, hits)
            + self._beside_spans(doc, found),
        )
        if self._asks_dominant(r.words):
            # "Which effusion is larger?": the side with more of it
            return ParsedQuestion(
                text, "position", label=label, open=True, asks="dominant",
                rules=(*r.rules, "position.dominant"),
            )  # fmt: skip
        tip = self._tip_asked(r)
        if tip is not None and not joined:
            # "Is the PICC tip in the SVC?": where the device ends, yes or no
            return ParsedQuestion(
                text, "position", label=label, qualifiers=(tip,), rules=(*r.rules, tip.rule)
            )
        comparison = self._comparison(doc, r.hits, r.words, r.free)
        opened = self._open_question(r, comparison)
        if opened is not None and joined == "or" and opened.type in _OF_EITHER:
            # "Where is the atelectasis or infiltrate?": the report's reading, either name
            return dataclasses.replace(opened, also=tuple(labels[1:]), joined=joined)
        if opened is not None:
            return several if joined else opened
        quals, kind_values = self._qualifiers(r, comparison)
        parsed = self._closed_question(r, quals, kind_values)
        if joined:
            # "Is there any pleural effusion or pneumothorax?": presence of each
            # ("Any suspicious nodule or mass?": a describing word said of them all)
            if (
                parsed.type != "presence"
                or any(q.kind != "descriptor" for q in parsed.qualifiers)
                or parsed.negated
            ):
                return several
            return dataclasses.replace(parsed, also=tuple(labels[1:]), joined=joined)
        return parsed

    def _asks_study_dominant(self, words: list[str]) -> bool:
        """Whether the question asks which side of the whole study is worse ("Which lung is
        worse?")."""
        return self._asks_dominant(words) and any(
            w in self.patterns.dominance_study_comparatives for w in words
        )

    def _part_asked(
        self, doc: Doc, hits: list[_Hit], found: list[tuple[str, str, int, int]]
    ) -> list[tuple[str, str, int, int]] | None:
        """The spans of a part of the body and of the general word a question asks about it
        by ("Which clavicle is abnormal?": `part:clavicle`), as findings; else None.

        The part is a place of the attribute file (`part_places`, the narrower: "AC joint"
        rather than the shoulder) or, where none is named, an anatomy concept of the
        lexicon; the general word one of `part_general_words`. A finding the question names
        keeps the question (a lesion of the clavicle is asked about as a lesion there); so
        does a part named inside a place ("in the right lung") and a count ("How many
        vertebrae are affected?" counts places). A change word that is the question's only
        cue asks whether the part changed (`_part_changed`).
        """
        if self._anatomy_matcher is None or found:
            return None
        p = self.patterns
        general = [t.i for t in doc if t.lower_ in p.part_general_words]
        if not general or any(h.group == "open" and h.entry.get("type") == "count" for h in hits):
            return None  # "How many vertebrae are affected?" counts places, not findings
        # a part inside a place ("in the right lung") says where, it is not asked about
        places_named = [h for h in hits if h.group in _PLACE_KINDS]
        by_matcher = [
            [
                (str(self._strings[m]), s, e)
                for m, s, e in matcher(doc)
                if not any(h.start <= s and e <= h.end for h in places_named)
            ]
            for matcher in (self._part_matcher, self._anatomy_matcher)
        ]
        named = by_matcher[0] or by_matcher[1]
        if len({key for key, _, _ in named}) != 1:
            return None
        key = named[0][0]
        spans = [(s, e) for _, s, e in named]
        asking = [
            h for h in hits
            if (h.group == "open" or h.group in _QUALIFIER_KINDS)
            and not any(h.start <= i < h.end for i in general)
        ]  # fmt: skip
        if all(doc[i].lower_ in p.part_change_words for i in general) and not asking:
            return None  # "Any change in the heart?": whether the part changed
        label = PART_PREFIX + key
        return [(label, f"part.{key}", s, e) for s, e in spans] + [
            (label, f"part.{key}", i, i + 1) for i in general
        ]

    def _part_sized(self, doc: Doc, hits: list[_Hit]) -> list[tuple[str, str, int, int]] | None:
        """The spans of a part of the body (`sized_parts`) an open size question names and
        no finding ("How big are the lymph nodes?": `concept:lymph_node`), as findings; else
        None."""
        if self._anatomy_matcher is None or not any(
            h.group == "open" and h.entry.get("type") == "size" for h in hits
        ):
            return None
        named = [(str(self._strings[m]), s, e) for m, s, e in self._anatomy_matcher(doc)]
        if len({key for key, _, _ in named}) != 1 or named[0][0] not in self.patterns.sized_parts:
            return None
        label = CONCEPT_PREFIX + named[0][0]
        return [(label, f"part.{named[0][0]}", s, e) for _, s, e in named]

    def _part_changed(self, doc: Doc, hits: list[_Hit]) -> str | None:
        """`concept:<anatomy>` for a change question about a part of the body whose normal
        statements say how it compares (`anatomy_normals`), else None."""
        if self._anatomy_matcher is None or not any(
            h.group == "change" or (h.group == "open" and h.entry.get("type") == "change")
            for h in hits
        ):
            return None
        found = {self._strings[m] for m, _, _ in self._anatomy_matcher(doc)}
        if len(found) != 1:
            return None
        part = found.pop()
        # "Has the aorta changed?": the findings of that part ("stable tortuous aorta"),
        # else its normal statements (`anatomy_normals`); "Which lung is bigger?" compares
        # the lungs, it asks no change
        asked_change = any(h.group == "open" and h.entry.get("type") == "change" for h in hits)
        if part not in self.patterns.anatomy_normals and not asked_change:
            return None
        return CONCEPT_PREFIX + part

    def _organ_problem(self, doc: Doc) -> str | None:
        """`concept:<anatomy>` for a question that asks whether something is wrong with a
        part of the body the lexicon names ("a problem with the spine"), else None."""
        if self._anatomy_matcher is None:
            return None
        text = " ".join(t.lower_ for t in doc)
        if not any(f" {cue} " in f" {text} " for cue in self.patterns.problem_cues):
            return None
        found = [self._strings[m] for m, _, _ in self._anatomy_matcher(doc)]
        return CONCEPT_PREFIX + found[0] if len(set(found)) == 1 else None

    def _part_normal(self, doc: Doc, hits: list[_Hit]) -> tuple[_Hit, str] | None:
        """The "normal"/"abnormal" cue and `concept:<anatomy>` of a yes/no question that says
        it of one part of the body and nothing more ("Are the lungs normal?"), else None: a
        place, another cue or an open question ("Any abnormality in the right lung?", "How
        many vertebrae are affected?") keeps the whole-study reading."""
        study = [h for h in hits if h.group == "study"]
        cues = [h for h in study if h.entry.get("asks") in ("normal", "abnormal")]
        if (
            len(cues) != 1
            or len(study) != 1
            or self._anatomy_matcher is None
            or any(h.group in _QUALIFIER_KINDS or h.group == "open" for h in hits)
            # "wider than normal" compares with the normal
            or (cues[0].start > 0 and doc[cues[0].start - 1].lower_ == "than")
        ):
            return None
        found = {self._strings[m] for m, _, _ in self._anatomy_matcher(doc)}
        if len(found) != 1 or not found <= self.patterns.part_normal_parts:
            return None
        return cues[0], CONCEPT_PREFIX + found.pop()

    def _tip_asked(self, r: _Reading) -> Qualifier | None:
        """The landmark a yes/no question about a device asks its tip to be at, if any."""
        if self.lexicon is None or not r.words or r.words[0] not in self.patterns.yes_no_starts:
            return None
        concept = _concept_id(r.label)
        entry = self.lexicon.concepts.get(concept)
        if entry is None or entry.kind != "device":
            return None
        tip_word = any(w in self.patterns.tip_words for w in r.words)
        lines = self.patterns.tip_devices
        if not tip_word and not ({concept, *self.lexicon.ancestors(concept)} & lines):
            return None  # "Is there a drain in the abdomen?" asks where it is, not its tip
        tip = self._tips.find(r.text)
        if tip is None:
            return None
        return Qualifier(
            kind="tip", value=tip.name, accepts=(tip.name,), rule=tip.rule,
            start=tip.start, end=tip.end,
        )  # fmt: skip

    def _joined(self, doc: Doc, found: list[tuple[str, str, int, int]]) -> str | None:
        """ "or" / "and" when the findings named stand in a plain list ("effusion,
        pneumothorax or consolidation"), else None."""
        # one label named by two entries ("emphysema": the question's and the concepts') is
        # one item of the list ("COPD or emphysema")
        spans = sorted({(s, e) for _, _, s, e in found})
        joins: set[str] = set()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            between = [t.lower_ for t in doc[end:start]]
            words = [w for w in between if w not in (",", "any", "a", "an", "the", "of")]
            if words not in (["or"], ["and"], ["and", "/", "or"], []) or not between:
                return None
            joins.update(w for w in words if w in ("or", "and"))
        if not joins:
            return None
        return "or" if "or" in joins else "and"

    def _read_as(
        self,
        doc: Doc,
        spans: list[tuple[str, str, int, int]],
        readings: list[tuple[str, str, int, int]],
        hits: list[_Hit],
    ) -> bool:
        """Whether the one finding of `spans` is pointed at ("the nodule", "the opacities")
        and asked to be read as the concepts named after it ("... a granuloma", "... be
        scarring"), not listed with them."""
        if len({(s, e) for _, _, s, e in spans}) != 1:
            return False
        _, _, start, end = spans[0]
        first = min(r[2] for r in readings)
        asked = {i for h in hits if h.group in _QUALIFIER_KINDS for i in range(h.start, h.end)}
        pointer = start - 1
        while pointer in asked or (
            pointer >= 0 and doc[pointer].lower_ in self.patterns.context_words
        ):
            pointer -= 1  # "the posterior basal opacity": the place asked stands between
        if pointer < 0 or doc[pointer].lower_ not in self._pointing or first < end:
            return False
        between = [t.lower_ for t in doc[end:first] if t.i not in asked]
        links = self.patterns.reading_links
        if not between:
            # "Is the basal opacity atelectasis?", "Are the calcified nodules granulomas?": a
            # finding pointed at, then its reading right after it; not one name of it ("the
            # right IJ line": a line is what an IJ catheter is)
            reading = min(readings, key=lambda r: r[2])[0]
            return first == end and not self._same_kind(spans[0][0], reading)
        return all(w in links for w in between)

    def _subject_of_reading(
        self, doc: Doc, found: list[tuple[str, str, int, int]], hits: list[_Hit]
    ) -> list[tuple[int, int]]:
        """The words of what a question points at and asks to be read as the finding named
        after "be" or a reading verb ("Could the big pulmonary arteries be from pulmonary
        hypertension?", "Could these changes be bronchitis?"): the spans of the cues among them
        describe the thing pointed at, not the finding asked (no size or change asked); []
        for another question."""
        p = self.patterns
        if len(doc) < 4 or doc[0].lower_ not in p.yes_no_starts:
            return []
        if doc[1].lower_ not in self._pointing or not found:
            return []
        link = next((t.i for t in doc[2:] if t.lower_ == "be" or t.lower_ in p.reading_words), None)
        # the finding asked ends after the link ("Could the effusion be larger?" asks a size)
        if link is None or any(e <= link + 1 for _, _, _, e in found):
            return []
        # its place stays asked ("Could the left opacity be pneumonia?": on the left)
        return [
            (h.start, h.end)
            for h in hits
            if h.start >= 1 and h.end <= link and h.group not in _PLACE_KINDS
        ]

    def _pointed_words(self, doc: Doc, found: list[tuple[str, str, int, int]]) -> range:
        """The words between the pointing word and "be" (or a reading verb) of a question
        that asks the thing pointed at to be read as a finding named after them ("Could the
        band opacities be atelectasis?", "Could the hilar distortion be from a tumour?"):
        they say what is pointed at, which the report's reading of the finding answers."""
        link = self._reading_link(doc, found)
        return range(0) if link is None else range(2, link)

    def _reading_link(self, doc: Doc, found: list[tuple[str, str, int, int]]) -> int | None:
        """The index of "be" (or a reading verb) in a question that asks what it points at
        to be read as the findings named after it ("Could this be a pericardial mass?");
        None for another question."""
        p = self.patterns
        if len(doc) < 4 or doc[0].lower_ not in p.yes_no_starts or not found:
            return None
        if doc[1].lower_ not in self._pointing:
            return None
        link = next((t.i for t in doc[2:] if t.lower_ == "be" or t.lower_ in p.reading_words), None)
        if link is None or any(s <= link for _, _, s, _ in found):
            return None
        return link

    def _same_kind(self, a: str, b: str) -> bool:
        """Whether one of two lexicon concepts is the other or below it."""
        lexicon = self.lexicon
        ca, cb = _concept_id(a), _concept_id(b)
        if lexicon is None or ca not in lexicon.concepts or cb not in lexicon.concepts:
            return False
        return ca == cb or cb in lexicon.ancestors(ca) or ca in lexicon.ancestors(cb)

    def _asks_dominant(self, words: list[str]) -> bool:
        """Whether the question asks which side has more ("Which effusion is larger?")."""
        p = self.patterns
        start = " ".join(words[:3])
        return any(start == s or start.startswith(s + " ") for s in p.dominance_starts) and any(
            w in p.dominance_comparatives for w in words
        )

    def _open_question(self, r: _Reading, comparison: Qualifier | None) -> ParsedQuestion | None:
        """The open question ("Where is the effusion?") a cue makes of it, if any."""
        hits, words, free = r.hits, r.words, r.free
        # open cues: the first in file order wins; a numeric comparison makes a size or
        # count question closed; a weak cue yields to any closed qualifier
        free_kinds = {h.group for h in hits if h.group in _QUALIFIER_KINDS and free(h)}
        has_qualifier = bool(free_kinds)
        # "Is the effusion located on the right?": a yes/no question with a qualifier of
        # the open cue's own type is closed ("Is there any change in the left effusion?"
        # stays an open change question)
        closed_types = (
            {_TYPE_OF_KIND[k] for k in free_kinds}
            | ({"size"} if "severity" in free_kinds else set())
            if words[0] in self.patterns.yes_no_starts
            else set()
        )
        opens = [
            h
            for h in hits
            if h.group == "open"
            # "Which hemidiaphragm is elevated?": a cue may end inside the finding's name
            and (free(h) or r.free_at(h.start))
            and not (comparison is not None and h.entry.get("type") in ("size", "count"))
            and not (h.entry.get("weak") and has_qualifier)
            # "Is the heart normal in size?": the size word belongs to the polarity
            and not (
                h.entry.get("weak")
                and any(
                    n.group == "negation" and n.start <= h.start and h.end <= n.end for n in hits
                )
            )
            and h.entry.get("type") not in closed_types
            # "Are the lines where they were before?": a cue inside a longer qualifier's
            # words is the qualifier's (a device unchanged), in a yes/no question
            and not (
                words[0] in self.patterns.yes_no_starts
                and any(
                    q.group in _QUALIFIER_KINDS
                    and q.start <= h.start
                    and h.end <= q.end
                    and q.end - q.start > h.end - h.start
                    for q in hits
                )
            )
        ]
        if not opens:
            return None
        order = {e.id: i for i, e in enumerate(self.patterns.open)}
        best = min(opens, key=lambda h: order[h.entry.id])
        r.taken.extend((h.start, h.end) for h in opens)
        qtype = best.entry.get("type")
        units = self.patterns.units
        unit = next(
            (
                _UNIT_NAMES.get(units[w])
                for w in r.words
                if w in units and w not in _AMBIGUOUS_UNITS
            ),
            None,
        )
        if qtype == "count" and unit is not None:
            qtype = "size"  # "How many centimetres is the granuloma?"
        where = (
            # "Where is the scarring in the left lung?", "Where are the granulomas below the
            # diaphragm?": of the findings there
            tuple(
                _qualifier(r.doc, h)
                for h in hits
                if h.group in _PLACE_KINDS
                and (
                    free(h)
                    # "Which apex is the opacity in?": of the findings at an apex
                    or (best.entry.get("narrows") and best.start <= h.start and h.end <= best.end)
                )
            )
            + self._sites_named(r)
            + tuple(
                # "Where is the calcified nodule?": the one the report calls so
                _qualifier(r.doc, h)
                for h in hits
                if h.group == "descriptor" and free(h)
            )
        )
        # "How big is it: small, medium or large?": the grades offered, to answer in
        choices = tuple(
            _qualifier(r.doc, h)
            for h in hits
            if h.group == "severity" and free(h) and qtype in ("size", "severity")
        )
        return ParsedQuestion(
            r.text,
            qtype,  # type: ignore[arg-type]
            label=r.label,
            open=True,
            asks=best.entry.get("asks") or None,
            qualifiers=choices if len(choices) > 1 else (),
            rules=(*r.rules, best.entry.id, *(q.rule for q in where)),
            unit=unit if qtype == "size" else None,
            where=where,
        )

    def _is_site(self, t: Token) -> bool:
        """Whether a word of a question names a site: one of an anatomy phrase or an
        alias, or a level of the spine ("T9")."""
        level = self.patterns.site_level
        return t.lower_ in self._sites or (level is not None and bool(level.fullmatch(t.lower_)))

    def _site(self, t: Token) -> Qualifier:
        """The site qualifier of a site word: every word that names the same site."""
        return Qualifier(
            kind="site",
            value=t.lower_,
            accepts=tuple(sorted(self._sites.get(t.lower_, {t.lower_}))),
            rule=f"site.{t.lower_}",
            start=t.idx,
            end=t.idx + len(t),
        )

    def _sites_named(self, r: _Reading) -> tuple[Qualifier, ...]:
        """The sites an open question names beside its finding ("Where is the mediastinal
        opacity?"): they pick the findings there among several (`_narrowed_to_place`)."""
        inside = {i for s, e in r.taken for i in range(s, e)}
        # "Which shoulder is fractured?": a part of the body an open cue names
        cued = {
            i
            for h in r.all_hits
            if h.group == "open"
            for i in range(h.start, h.end)
            if r.doc[i].lower_ in self._part_words
        } - {i for *_, s, e in r.found for i in range(s, e)}
        return tuple(
            self._site(t)
            for t in r.doc
            if self._is_site(t)
            and t.lower_ not in self.patterns.site_generic_words
            and (
                t.i in cued
                or (t.i not in inside and not any(h.start <= t.i < h.end for h in r.all_hits))
            )
        )

    def _qualifiers(
        self, r: _Reading, comparison: Qualifier | None
    ) -> tuple[list[Qualifier], dict[str, set[str | int]]]:
        """The closed question's qualifiers in order, and the values named of each kind;
        their tokens are taken."""
        doc = r.doc
        quals: list[Qualifier] = []
        if comparison is not None:
            quals.append(comparison)
            r.taken.append((_tok(doc, comparison.start), _tok(doc, comparison.end - 1) + 1))
        kind_values: dict[str, set[str | int]] = {}
        for h in sorted(r.hits, key=lambda h: (h.start, -(h.end - h.start))):
            if h.group not in _QUALIFIER_KINDS or not r.free(h):
                continue
            r.taken.append((h.start, h.end))
            e = h.entry
            if e.get("narrows_only"):
                # "Any focal opacity?" is asked of any opacity: the word only picks one of
                # several in an open question ("Where is the focal airspace disease?")
                continue
            kind_values.setdefault(h.group, set()).add(e.value)
            quals.append(_qualifier(doc, h))
        return quals, kind_values

    def _closed_question(
        self, r: _Reading, quals: list[Qualifier], kind_values: dict[str, set[str | int]]
    ) -> ParsedQuestion:
        """A question with these qualifiers (or none: presence), or why it is not answered."""
        text, doc, words, label, rules = r.text, r.doc, r.words, r.label, r.rules
        # "left or right", "mild or severe": two values of one kind joined by "or"
        if "or" in words:
            for kind in _KIND_ORDER:
                if len(kind_values.get(kind, ())) > 1:
                    qtype = _TYPE_OF_KIND[kind]
                    return ParsedQuestion(
                        text,
                        qtype,
                        label=label,
                        open=True,
                        asks="side"
                        if kind == "side"
                        else ("place" if qtype == "position" else None),
                        # the choices offered: the answer is one of them when one fits
                        qualifiers=tuple(q for q in quals if q.kind == kind),
                        rules=(*rules, *(q.rule for q in quals if q.kind == kind)),
                    )
        unknown = self._unknown_words(doc, r.all_hits, r.found)
        if any(w in self._sites for w in words):
            # "in the shoulder joints": a site named, its general words say no more
            unknown = [t for t in unknown if t.lower_ not in self.patterns.site_generic_words]
        link = self._reading_link(doc, r.found)
        starts = {s for _, _, s, _ in r.found}
        if (
            unknown
            and link is not None
            and all(t.i > link for t in unknown)
            and {t.i + 1 for t in unknown} <= {t.i for t in unknown} | starts
        ):
            # "Could the density be a pericardial mass?": the words just before the reading
            # asked name the kind asked, read beside the finding ("pericardial mass"); not
            # said there, the report may say it in other words (`_READ_WORD_RULE`); a site
            # word too ("Could the calcification be a liver cyst?" over "calcified cyst")
            quals = [
                *quals,
                *(dataclasses.replace(self._site(t), rule=_READ_WORD_RULE) for t in unknown),
            ]
            unknown = []
        if unknown and all(self._is_site(t) for t in unknown):
            # "Is there a shoulder fracture?": the site is read in the words beside the
            # finding ("fracture-dislocation of the right shoulder")
            quals = [*quals, *(self._site(t) for t in unknown)]
            unknown = []
        if (
            unknown
            and "change" in kind_values
            and {t.i + 1 for t in unknown} <= {t.i for t in unknown} | starts
        ):
            # "Are the axillary densities new?": words just before the finding whose change
            # is asked name which one, read beside it ("bilateral axillary densities"); not
            # said there, the report may say it in other words (`_READ_WORD_RULE`)
            quals = [
                *quals,
                *(dataclasses.replace(self._site(t), rule=_READ_WORD_RULE) for t in unknown),
            ]
            unknown = []
        if unknown:
            return ParsedQuestion(
                text,
                "unsupported",
                label=label,
                message=f"the question asks about {label} with words that are not understood "
                f"({', '.join(repr(t.text) for t in unknown[:3])}); supported: presence, position, "
                "size, count, change, severity",
            )
        negs = [h for h in r.hits if h.group == "negation" and r.free(h)]
        if quals and negs:
            return ParsedQuestion(
                text,
                "unsupported",
                label=label,
                rules=(*rules, negs[0].entry.id),
                message=f"a question about {label} asked in the negative "
                f"({doc[negs[0].start : negs[0].end].text!r}) is answered only for presence; "
                "ask it the positive way",
            )
        if quals:
            kinds = {q.kind for q in quals}
            first = next(k for k in _KIND_ORDER if k in kinds)
            return ParsedQuestion(
                text,
                _TYPE_OF_KIND[first],
                label=label,
                qualifiers=tuple(quals),
                rules=(*rules, *(q.rule for q in quals)),
                asks="reading" if self._place_of_subject(r, quals) else None,
            )
        frames = [h for h in r.hits if h.group == "presence" and r.free(h)]
        starts_open = words[0] in self.patterns.question_words
        if starts_open or not (frames or _is_bare(doc, r.taken, self.patterns)):
            return ParsedQuestion(
                text,
                "unsupported",
                label=label,
                message=f"the question names {label} but what it asks about it is not "
                "understood; supported: presence, position, size, count, change, severity",
            )
        return ParsedQuestion(
            text,
            "presence",
            label=label,
            negated=bool(negs) != (DENIED_NORMAL_RULE in rules),
            rules=(
                *rules,
                *(h.entry.id for h in frames[:1]),
                *(h.entry.id for h in negs[:1]),
            ),
        )

    def _place_of_subject(self, r: _Reading, quals: list[Qualifier]) -> bool:
        """Whether the places asked are those of the finding pointed at, before the reading
        asked of it ("Is the basal opacity atelectasis?", "Could the left opacity be
        pneumonia?"): a word of the subject stands between them and the reading."""
        doc = r.doc
        if len(doc) < 4 or doc[0].lower_ not in self.patterns.yes_no_starts:
            return False
        if doc[1].lower_ not in self._pointing or len(r.found) != 1:
            return False
        if not all(q.kind in _PLACE_KINDS for q in quals):
            return False
        start = r.found[0][2]
        spans = [(_tok(doc, q.start), _tok(doc, q.end - 1) + 1) for q in quals]
        last = max(e for _, e in spans)
        return last < start and any(_content_word(t) for t in doc[last:start])

    def _unknown_words(
        self, doc: Doc, hits: list[_Hit], found: list[tuple[str, str, int, int]]
    ) -> list[Token]:
        """Content words of a yes/no question that no entry explains ("Is the nodule
        calcified?"): answering it as a presence question would be a guess."""
        covered = {i for h in hits for i in range(h.start, h.end)}
        covered.update(i for _, _, s, e in found for i in range(s, e))
        covered.update(i for s, e in self._beside_spans(doc, found) for i in range(s, e))
        covered.update(self._general_noun(doc, found))
        p = self.patterns
        # "Could the opacity be pneumonia?", "Is that density a nodule?": the finding the
        # report may have seen, by its general word, asked to be read as the one named
        pointing = self._pointing
        # "Is the nodule a granuloma?": the finding pointed at is the reading's subject
        read = [
            sp for sp in self._concepts.find(doc) if not set(range(sp.start, sp.end)) <= covered
        ]

        def pointed(t: Token) -> bool:
            # "the opacity", and past words the question's hits explain ("the left-sided
            # opacity", "that calcified density")
            i = t.i - 1
            while (
                i >= 0
                and (
                    i in covered
                    or doc[i].is_punct
                    or doc[i].lower_ in p.context_words
                    # "the arm lesion": a site word before it
                    or doc[i].lower_ in self._sites
                )
                and doc[i].lower_ not in pointing
            ):
                i -= 1
            return i >= 0 and doc[i].lower_ in pointing

        covered.update(
            t.i
            for t in doc
            if (t.lower_ in self._open_heads and pointed(t)) or t.lower_ in p.reading_words
        )
        if len(found) == 1 and found[0][1] == "lexicon":
            covered.update(i for sp in read if pointed(sp[0]) for i in range(sp.start, sp.end))
        covered.update(self._pointed_words(doc, found))
        # a qualifier beside the finding's words ("Any superimposed pneumonia?", "Any concern
        # for dissection?", "Any sign of tumour recurrence?")
        starts = {s for _, _, s, _ in found}
        ends = {e for _, _, _, e in found}
        for t in doc:
            if t.lower_ in p.qualifier_before:
                i = t.i + 1
                while i < len(doc) and (
                    doc[i].lower_ in p.qualifier_before or doc[i].lower_ in p.qualifier_links
                ):
                    i += 1
                if i in starts:
                    covered.update(range(t.i, i))
            elif t.lower_ in p.qualifier_after and t.i in ends:
                covered.add(t.i)
        # "Is there a stimulator device?", "Any implanted pacemaker?": a device's general
        # words just before or after a device's name
        device_ends = {e for label, _, _, e in found if self._kind(label) == "device"}
        device_starts = {s for label, _, s, _ in found if self._kind(label) == "device"}
        for t in doc:
            if t.lower_ in p.device_words and (t.i in device_ends or t.i + 1 in device_starts):
                covered.add(t.i)
        context = p.context_words | p.units.keys() | p.number_words.keys() | {"than", "a"}
        return [
            t
            for t in doc
            if t.i not in covered
            and not (t.is_punct or t.is_space or t.is_stop or t.like_num)
            and t.lower_ not in context
            and t.lower_.rstrip(".") not in context
        ]

    def _findings(self, doc: Doc, hits: list[_Hit]) -> list[tuple[str, str, int, int]]:
        """(label, rule id, start, end) of the findings named, longest first where they overlap."""
        spans: list[tuple[str, str, int, int]] = [
            (str(h.entry.value), h.entry.id, h.start, h.end) for h in hits if h.group == "finding"
        ]
        spans.extend(
            (sp.label_, f"concept.{sp.label_}", sp.start, sp.end) for sp in self._concepts.find(doc)
        )
        # an entry may name a lexicon concept ("lines": concept:vascular_catheter): it counts
        # with the lexicon's own
        known = self.lexicon.concepts if self.lexicon is not None else {}
        named = [s for s in spans if s[0] not in self.labels and _concept_id(s[0]) in known]
        spans = [s for s in spans if s[0] in self.labels]
        fallback = not spans
        if fallback:
            # not a word of a place ("Any opacity behind the heart?")
            placed = {i for h in hits if h.group in _PLACE_KINDS for i in range(h.start, h.end)}
            spans = [
                (str(h.entry.value), h.entry.id, h.start, h.end)
                for h in hits
                if h.group == "fallback"
                and str(h.entry.value) in self.labels
                and placed.isdisjoint(range(h.start, h.end))
            ]
        if self._lexicon_matcher is not None:
            # a concept of the lexicon ("Is there a central line?"), by one of its phrases
            # or by its words in another order or form ("Are the lung volumes low?"), where
            # no label is named or the concept's words hold the label's ("Is there heart
            # failure?" is not about the heart's size)
            # the words of what is asked, and of a comparison ("since the prior film"), name
            # no concept ("prior" is not the healed fracture's)
            asked = {
                i
                for h in hits
                if h.group in _QUALIFIER_KINDS
                # nor those of a change or a side asked ("in one lung or both")
                or (h.group == "open" and h.entry.get("type") == "change")
                or (h.group == "open" and h.entry.get("asks") == "side")
                for i in range(h.start, h.end)
            }
            concepts = self._concepts_named(doc, asked) + named
            if not concepts and not spans and asked:
                # "Are the pulmonary arteries enlarged?": a qualifier's word that is the
                # concept's own ("enlarged pulmonary artery") belongs to its name
                concepts = self._concepts_named(doc, set())
            elif concepts and not spans and asked:
                concepts = self._change_word_named(doc, hits, concepts)
            if concepts and (
                not spans
                # "Which heart valve has been replaced?": the heart's size only by default,
                # not where the question names a device or an operation
                or (fallback and self._kind(concepts[0][0]) in ("device", "postop"))
                # ... or an entry's longer words hold the default's ("Is the heart on the
                # small side?" is the small heart, not the heart's size)
                or all((c[1] == "lexicon" or (fallback and c in named))
                       and c[2] <= s[2] and s[3] <= c[3]
                       and c[3] - c[2] > s[3] - s[2] for s in spans for c in concepts[:1])
            ):  # fmt: skip
                spans = concepts
            elif named and all(n[2] <= s[2] and s[3] <= n[3] for s in spans for n in named[:1]):
                # an entry's words that hold all of a label's ("Is the heart size
                # borderline?") are what is asked: the label's concept counts the same words
                # under it only as the labeler codes them
                spans = named[:1]
            elif concepts:
                # "Is there an effusion or a pacemaker?": a concept listed with the labels
                # named is a finding of its own (not "Is that density a nodule?")
                apart = [c for c in concepts if not any(c[2] < s[3] and s[2] < c[3] for s in spans)]
                # (the longest of those nested: "airspace opacity", not its "opacity")
                outer = [
                    c for c in apart
                    if not any(o[2] <= c[2] and c[3] <= o[3] and o[3] - o[2] > c[3] - c[2]
                               for o in apart)
                ]  # fmt: skip
                if len(outer) == 1 == len({s[0] for s in spans}) and self._beside(
                    doc, outer[0], min(spans, key=lambda s: s[2])
                ):
                    # "Any opacity to suggest pneumonia?": the sign asked, not the reading
                    spans = outer
                elif apart and self._joined(doc, spans + apart) is not None:
                    spans += apart
                elif apart and self._read_as(doc, spans, apart, hits):
                    # "Is the nodule a granuloma?": the finding named after the one pointed
                    # at is the reading asked about
                    spans = apart
        # longest span first; drop those inside a kept one
        spans.sort(key=lambda s: (-(s[3] - s[2]), s[2]))
        kept: list[tuple[str, str, int, int]] = []
        for s in spans:
            if not any(k[2] < s[3] and s[2] < k[3] for k in kept):
                kept.append(s)
        if not kept and self._normal_words and not any(h.group == "study" for h in hits):
            # the qualifier's words count here: "the left lung" names the lung asked about
            kept = self._concept_by_words(doc, set(), self._normal_words)
            denied = self._concept_by_words(doc, set(), self._denied_normal_words)
            if denied and (not kept or denied[0][3] - denied[0][2] > kept[0][3] - kept[0][2]):
                kept = [(denied[0][0], DENIED_NORMAL_RULE, denied[0][2], denied[0][3])]
        if not kept and self.lexicon is not None and not any(h.group == "study" for h in hits):
            # a general finding word ("Where is the lesion?", "Is there a density?")
            heads = self._open_heads
            kept = [
                (OPEN_PREFIX + singular(t.lower_), "open.head", t.i, t.i + 1)
                for t in doc
                if t.lower_ in heads
            ][:1]
        if len(kept) == 2:
            first, then = sorted(kept, key=lambda s: s[2])
            if self._read_as(doc, [first], [then], hits):
                # "Could the opacities be scarring?": the reading asked of the one pointed at
                kept = [then]
            elif self._narrowed_by(doc, first, then):
                # "Any post-operative changes from bypass surgery?": the narrower one of the
                # kind the first names in general
                kept = [then]
            elif self._beside(doc, first, then):
                # "Is there volume loss with the opacity?": the first is asked, beside the
                # finding pointed at
                kept = [first]
        if self.lexicon is not None and len(kept) > 1:
            # "the chest port catheter": a concept beside one of its own kinds is that one
            lexicon = self.lexicon
            kept = [
                s
                for s in kept
                if not any(
                    (k[2] == s[3] or s[2] == k[3])
                    and _concept_id(s[0]) in lexicon.concepts
                    and _concept_id(k[0]) in lexicon.descendants(_concept_id(s[0]))
                    for k in kept
                )
            ]
        if len(kept) > 1 and any(self._kind(k[0]) != "view" for k in kept):
            # "Was the frontal view taken in a lordotic projection?", "Is there motion on the
            # lateral view?": the view named beside another finding is where it is seen
            kept = [k for k in kept if self._kind(k[0]) != "view"]
        return kept

    def _kind(self, label: str) -> str | None:
        """The lexicon kind of a `concept:<id>` label (None for another label)."""
        concept = self.lexicon.concepts.get(_concept_id(label)) if self.lexicon else None
        return concept.kind if concept is not None else None

    def _narrowed_by(
        self, doc: Doc, first: tuple[str, str, int, int], then: tuple[str, str, int, int]
    ) -> bool:
        """Whether the first of two lexicon concepts is a more general one of the second's
        kind, joined to it by `narrowing_links` ("post-operative changes from bypass
        surgery", "changes of CABG")."""
        lexicon = self.lexicon
        a, b = _concept_id(first[0]), _concept_id(then[0])
        if lexicon is None or a not in lexicon.concepts or b not in lexicon.concepts:
            return False
        between = tuple(t.lower_ for t in doc[first[3] : then[2]])
        return (
            between in self.patterns.narrowing_links
            and lexicon.concepts[a].kind == lexicon.concepts[b].kind
            and lexicon.depth(a) < lexicon.depth(b)
        )

    def _general_noun(self, doc: Doc, found: list[tuple[str, str, int, int]]) -> set[int]:
        """The words of a general finding noun ("bone changes", "post-op changes": a cue's
        word after one of its `not_after` words) joined by `narrowing_links` to the finding
        asked ("Any bone changes of renal osteodystrophy?"): they name that finding."""
        if not found:
            return set()
        start = found[0][2]
        words = [t.lower_ for t in doc]
        for link in self.patterns.narrowing_links:
            k = start - len(link)
            if k < 2 or tuple(words[k:start]) != link:
                continue
            before = {w for _, e in self._entries.values() if words[k - 1] in e.phrases
                      for w in e.not_after}  # fmt: skip
            i = k - 1
            while i > 0 and (words[i - 1] in before or doc[i - 1].is_punct):
                i -= 1
            if i < k - 1:
                return set(range(i, k))
        return set()

    def _beside(
        self, doc: Doc, first: tuple[str, str, int, int], then: tuple[str, str, int, int]
    ) -> bool:
        """Whether the words between two findings make the first the one asked
        (`beside_links`: "Is there volume loss with the opacity?")."""
        return tuple(t.lower_ for t in doc[first[3] : then[2]]) in self.patterns.beside_links

    def _beside_spans(
        self, doc: Doc, found: list[tuple[str, str, int, int]]
    ) -> list[tuple[int, int]]:
        """The words of a `beside_links` link right after a finding asked and before another
        finding word ("on top of the" in "Any consolidation on top of the fibrosis?"): they
        ask nothing of their own."""
        words = [t.lower_ for t in doc]
        spans: list[tuple[int, int]] = []
        for _, _, _, end in found[:1]:
            for link in self.patterns.beside_links:
                stop = end + len(link)
                if tuple(words[end:stop]) == link and stop < len(words) and doc[stop].is_alpha:
                    spans.append((end, stop))
        return spans[-1:] if spans else []

    def _change_word_named(
        self, doc: Doc, hits: list[_Hit], concepts: list[tuple[str, str, int, int]]
    ) -> list[tuple[str, str, int, int]]:
        """`concepts`, the first named by a change word too where that word and its name are
        one of its own phrases and it is a normal structure's degree (`graded_findings`: "Is the
        kyphosis increased?" is increased kyphosis): the word says what the finding is, not
        how it compares, unless the question names a prior ("since the last film")."""
        if any(t.lower_ in self.patterns.prior_words for t in doc):
            return concepts
        if _concept_id(concepts[0][0]) not in self.patterns.graded_findings:
            return concepts
        whole = self._concepts_named(doc, set())
        if not whole or whole[0][0] != concepts[0][0]:
            return concepts
        _, _, start, end = whole[0]
        change = [h for h in hits if h.group == "change"]
        if not change or not all(start <= h.start and h.end <= end for h in change):
            return concepts
        return [whole[0], *concepts[1:]]

    def _concepts_named(self, doc: Doc, asked: set[int]) -> list[tuple[str, str, int, int]]:
        """The lexicon concepts a question names, the longest first: by a phrase as
        written, or by the words of a longer one in another order or form, not counting
        the words of what the question asks ("in the left lung": a qualifier's)."""
        assert self._lexicon_matcher is not None
        found = [
            (CONCEPT_PREFIX + self._strings[match_id], "lexicon", start, end)
            for match_id, start, end in self._lexicon_matcher(doc)
        ]
        if any(not set(range(s, e)) <= asked for _, _, s, e in found):
            # "Is the granuloma calcified?": a describing word asked about names no concept
            # of its own beside the one it describes
            found = [c for c in found if not set(range(c[2], c[3])) <= asked]
        by_words = self._concept_by_words(doc, asked)
        inside = sorted(
            (c for c in found if by_words and by_words[0][2] <= c[2] <= c[3] <= by_words[0][3]),
            key=lambda c: c[2],
        )
        if len(inside) == 2 and self._read_as(doc, inside[:1], inside[1:], []):
            # a reading asked of the finding pointed at ("Could the nodule be a metastasis?")
            # names two concepts, not one whose words they share ("metastatic nodules")
            by_words = []
        if by_words and (not found or by_words[0][3] - by_words[0][2] > max(
            e - s for _, _, s, e in found
        )):  # fmt: skip
            # the words of a phrase it overlaps are its own too ("spine ... degenerative
            # change" names degenerative spine; "change" is not asked)
            concept, rule, start, end = by_words[0]
            for _, _, s, e in found:
                if s < end and start < e:
                    start, end = min(start, s), max(end, e)
            found = [(concept, rule, start, end), *by_words[1:]]
        found.sort(key=lambda c: -(c[3] - c[2]))
        return found

    def _concept_by_words(
        self,
        doc: Doc,
        asked: set[int],
        concept_words: list[tuple[str, frozenset[str]]] | None = None,
    ) -> list[tuple[str, str, int, int]]:
        """The concept whose phrase's content words all stand in the question, in any order
        and form (`_stem`): the longest phrase wins, then the most specific concept."""
        at: dict[str, list[int]] = {}
        for t in doc:
            if _content_word(t) and t.i not in asked:
                at.setdefault(_stem(t.lower_), []).append(t.i)
        best: tuple[int, int, str, frozenset[str]] | None = None
        words = self._concept_words if concept_words is None else concept_words
        index = self._by_least_stem.get(id(words)) or _by_least_stem(words)
        # a phrase can stand only where its least stem does: look at those phrases alone,
        # in the list's order (thousands of phrases, a question's few words)
        candidates = sorted(entry for stem in at if stem in index for entry in index[stem])
        for _, concept, stems in candidates:
            if stems <= at.keys() and not _across_or(doc, {i for st in stems for i in at[st]}):
                depth = self.lexicon.depth(concept) if self.lexicon else 0
                if best is None or (len(stems), depth) > best[:2]:
                    best = (len(stems), depth, concept, stems)
        if best is None:
            return []
        tokens = [i for st in best[3] for i in at[st]]
        named = [(CONCEPT_PREFIX + best[2], "lexicon.words", min(tokens), max(tokens) + 1)]
        # the other word may be one a qualifier took ("calcified" describes, alone)
        every: dict[str, list[int]] = {}
        for t in doc:
            if _content_word(t):
                every.setdefault(_stem(t.lower_), []).append(t.i)
        return named + self._by_other_word(doc, every, best[2], best[3], concept_words)

    def _by_other_word(
        self,
        doc: Doc,
        at: dict[str, list[int]],
        concept: str,
        stems: frozenset[str],
        concept_words: list[tuple[str, frozenset[str]]] | None,
    ) -> list[tuple[str, str, int, int]]:
        """The other concepts a question offers by a word joined by "or" / "and" to one of
        the best phrase's words, the rest of that phrase shared ("Is the aorta tortuous or
        ectatic?": the ectatic aorta beside the tortuous one), each at its own word."""
        words = self._concept_words if concept_words is None else concept_words
        index = self._by_stems.get(id(words)) or _by_stems(words)
        # a phrase that differs by one word: one of the phrase's swapped for one asked
        swapped = sorted(
            (place, c, new, old)
            for new in at.keys() - stems
            for old in stems
            for place, c in index.get((stems - {old}) | {new}, ())
        )
        other: list[tuple[str, str, int, int]] = []
        for _, c, new, old in swapped:
            label = CONCEPT_PREFIX + c
            if c == concept or any(o[0] == label for o in other):
                continue
            if len(at[new]) != 1 or len(at[old]) != 1:
                continue
            i, j = at[old][0], at[new][0]
            if j - i == 2 and doc[i + 1].lower_ in ("or", "and"):
                other.append((label, "lexicon.words", j, j + 1))
        return other

    def _comparison(
        self, doc: Doc, hits: list[_Hit], words: list[str], free: Callable[[_Hit], bool]
    ) -> Qualifier | None:
        """A numeric comparison: comparator, number, optional unit ("larger than 3 cm")."""
        p = self.patterns
        cmps = sorted(
            (h for h in hits if h.group == "comparison" and free(h)),
            key=lambda h: (h.start, -(h.end - h.start)),
        )
        candidates = [(h.end, h.entry.id, str(h.entry.value), h.start) for h in cmps]
        # a bare number with a unit ("Is the nodule 8 mm?") compares for equality
        for i, w in enumerate(words):
            if (
                _number(w, p.number_words) is not None
                and i + 1 < len(words)
                and words[i + 1] in p.units
                and not any(c[0] <= i <= c[0] + 1 for c in candidates)
            ):
                candidates.append((i, "cmp.number", "eq", i))
        for after, rule, op, begin in candidates:
            i = after
            if i < len(words) and words[i] == "than":
                i += 1
            if (
                i < len(words)
                and words[i] in ("a", "an")
                and i + 1 < len(words)
                and words[i + 1] == "half"
            ):
                i += 1
            if i >= len(words):
                continue
            # "over a centimetre": one of the unit
            one = words[i] in ("a", "an") and i + 1 < len(words) and words[i + 1] in p.units
            value = 1.0 if one else _number(words[i], p.number_words)
            if value is None:
                continue
            j = i + 1
            if j < len(words) and words[j] in ("-", "and") and j + 1 < len(words):
                # "3-cm", "1 and a half cm" (the half is ignored: rare)
                j += 1 if words[j] == "-" else 0
            unit = words[j] if j < len(words) and words[j] in p.units else None
            end_tok = j + 1 if unit else i + 1
            trail = [h for h in hits if h.group == "trailing" and h.start == end_tok]
            if trail:
                op, rule = str(trail[0].entry.value), f"{rule}+{trail[0].entry.id}"
                end_tok = trail[0].end
            if any(w in p.prior_words for w in words[end_tok : end_tok + 4]) and unit is None:
                continue
            start_char = doc[begin].idx
            end_char = doc[end_tok - 1].idx + len(doc[end_tok - 1])
            if unit is not None:
                mm = round(value * p.units[unit], 3)
                return Qualifier("size", mm, op=op, rule=rule, start=start_char, end=end_char)
            return Qualifier(
                "count",
                int(value) if value == int(value) else value,
                op=op,
                rule=rule,
                start=start_char,
                end=end_char,
            )
        return None


_SIDE_WORDS = frozenset({"left", "right", "bilateral"})


def abnormal_findings_named(report: ReportLabels, lexicon: Lexicon) -> list[str]:
    """The findings a question's "it" may stand for: the report's abnormal findings not
    ruled out, as `concept:<id>`, each once, a concept under another one named counting as
    that one ("basilar opacity" beside "opacity")."""
    named = {
        f.label
        for f in report.report_findings or ()
        if f.status != "negative" and is_abnormal(f.kind) and f.label in lexicon.concepts
    }
    kept = sorted(c for c in named if not any(a in named for a in lexicon.ancestors(c)))
    return [CONCEPT_PREFIX + c for c in kept]


def _pronoun_at(doc: Doc, patterns: QuestionPatterns) -> int | None:
    """The index of the first token that stands for a finding the question does not name."""
    for t in doc:
        word = t.lower_
        if word in patterns.pronouns:
            return t.i
        if word in patterns.demonstratives and (
            t.i == 0 or doc[t.i - 1].lower_ in patterns.before_pronoun
        ):
            after = doc[t.i + 1] if t.i + 1 < len(doc) else None
            if after is None or after.is_punct or after.lower_ in patterns.after_pronoun:
                return t.i
    return None


def _by_stems(
    words: list[tuple[str, frozenset[str]]],
) -> dict[frozenset[str], list[tuple[int, str]]]:
    """Concepts by their phrase's word set, each with its place in `words`."""
    index: dict[frozenset[str], list[tuple[int, str]]] = {}
    for place, (concept, stems) in enumerate(words):
        index.setdefault(stems, []).append((place, concept))
    return index


def _by_least_stem(
    words: list[tuple[str, frozenset[str]]],
) -> dict[str, list[tuple[int, str, frozenset[str]]]]:
    """Each phrase under its least stem, with its place in `words`."""
    index: dict[str, list[tuple[int, str, frozenset[str]]]] = {}
    for place, (concept, stems) in enumerate(words):
        if stems:
            index.setdefault(min(stems), []).append((place, concept, stems))
    return index


def _concept_words(
    nlp: Language,
    lexicon: Lexicon,
    *,
    normal: bool = False,
    denying: frozenset[str] = frozenset(),
    denied: bool = False,
) -> list[tuple[str, frozenset[str]]]:
    """(concept, the stems of a phrase's content words) for every phrase of two or more;
    with `normal`, of the normal statements only, those with a word of `denying` ("no
    acute bony findings") when `denied`, else the others."""
    out = []
    skip = set(KINDS) - {"normal"} if normal else {"anatomy", "normal"}
    for concept_id, phrases in lexicon.phrases_by_concept(skip, predicates=False).items():
        for phrase in phrases:
            if normal and denied != bool(set(phrase.split()) & denying):
                continue
            # a side in a phrase ("clear left lung") is the question's qualifier to ask
            words = [
                w for w in nlp.make_doc(phrase) if _content_word(w) and w.lower_ not in _SIDE_WORDS
            ]
            if len(words) >= 2:
                out.append((concept_id, frozenset(_stem(w.lower_) for w in words)))
    return out


_APPROXIMATELY = re.compile(rf"^{APPROXIMATELY}\s*", re.IGNORECASE)


def _across_or(doc: Doc, tokens: Collection[int]) -> bool:
    """Whether two of a phrase's words stand just either side of an "or": offered as
    alternatives ("a pacer or defibrillator" asks about either device, not the combined
    one; "a pacemaker or similar cardiac device" is still one phrase)."""
    return any(
        doc[i].lower_ == "or" and i - 1 in tokens and i + 1 in tokens
        for i in range(min(tokens), max(tokens))
    )


def _content_word(t: Token) -> bool:
    """Whether a word says what a phrase names: not a stop word, unless it is a prefix
    joined by a hyphen ("over-expanded" is not "expanded")."""
    if t.is_punct or t.is_space:
        return False
    if not t.is_stop:
        return True
    after = t.nbor(1) if t.i + 1 < len(t.doc) else None
    return after is not None and after.text == "-" and not t.whitespace_


_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ed", "es", "al",
             "um", "ic", "s", "y", "e")  # fmt: skip


def _qualifier(doc: Doc, h: _Hit) -> Qualifier:
    """The qualifier a pattern hit names: a lobe accepts its side and zone, any other kind
    its entry's report values."""
    e = h.entry
    return Qualifier(
        kind=h.group,
        value=e.value,
        accepts=(e.get("side"), e.get("zone")) if h.group == "lobe" else e.accepts,
        op="eq",
        rule=e.id,
        start=doc[h.start].idx,
        end=doc[h.end - 1].idx + len(doc[h.end - 1]),
        rejects=e.rejects,
    )


def site_words(lexicon: Lexicon, generic: Collection[str] = ()) -> dict[str, frozenset[str]]:
    """Each word of the lexicon's anatomy phrases ("aortic", "shoulder") -> every word that
    names the same site; words of `generic` ("joint", "contour") name none by themselves.
    Built once per lexicon and generic words (answers ask for it per question)."""
    key = (id(lexicon), frozenset(generic))
    cached = _SITE_WORDS.get(key)
    if cached is not None and cached[0] is lexicon:
        return cached[1]
    words = _site_words(lexicon, key[1])
    if len(_SITE_WORDS) >= 8:
        _SITE_WORDS.clear()
    _SITE_WORDS[key] = (lexicon, words)
    return words


_SITE_WORDS: dict[tuple[int, frozenset[str]], tuple[Lexicon, dict[str, frozenset[str]]]] = {}


def _site_words(lexicon: Lexicon, generic: frozenset[str]) -> dict[str, frozenset[str]]:
    out: dict[str, set[str]] = {}
    for c in lexicon.concepts.values():
        if c.kind != "anatomy":
            continue
        words = {w for phrase in c.phrases for w in phrase.split() if w not in generic}
        for w in words:
            out.setdefault(w, set()).update(words)
    return {w: frozenset(v) for w, v in out.items()}


def place_parts(patterns: QuestionPatterns) -> dict[str, tuple[tuple[str, ...], frozenset[str]]]:
    """Each body place of the attribute file a question may name (`part_places`) -> its
    phrases, and the single words of them a report names it by ("clavicle", "clavicular");
    built once per pattern file."""
    cached = _PLACE_PARTS.get(id(patterns))
    if cached is not None and cached[0] is patterns:
        return cached[1]
    phrases: dict[str, list[str]] = {}
    for term in load_attribute_rules().terms:
        for key, value in term.sets:
            if key == "location" and str(value) in patterns.part_places:
                phrases.setdefault(str(value), []).extend(term.phrases)
    out = {
        value: (
            tuple(dict.fromkeys(found)),
            frozenset(w for ph in found if " " not in ph for w in [ph])
            | frozenset(a for a, v in patterns.part_aliases.items() if v == value),
        )
        for value, found in phrases.items()
    }
    if len(_PLACE_PARTS) >= 8:
        _PLACE_PARTS.clear()
    _PLACE_PARTS[id(patterns)] = (patterns, out)
    return out


_PlaceParts = dict[str, tuple[tuple[str, ...], frozenset[str]]]
_PLACE_PARTS: dict[int, tuple[QuestionPatterns, _PlaceParts]] = {}


def _concept_id(label: str) -> str:
    return label[len(CONCEPT_PREFIX) :] if label.startswith(CONCEPT_PREFIX) else ""


def _stem(word: str) -> str:
    """A crude stem that puts a word's forms together ("mediastinum", "mediastinal";
    "widened", "widening"; "volumes", "volume") and keeps apart words that only begin
    alike ("pneumothorax", "pneumonectomy"): one suffix off, then seven letters."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]  # "replacement" and "replaced", "enlargement" and "enlarged"
    return word[:7]


def _tok(doc: Doc, char: int) -> int:
    for t in doc:
        if t.idx <= char < t.idx + len(t):
            return t.i
    return len(doc) - 1


_NUMBER_RE = re.compile(r"^\d+(?:[.,]\d+)?$|^\.\d+$")


def _number(word: str, words: Mapping[str, float]) -> float | None:
    if _NUMBER_RE.match(word):
        return float(word.replace(",", "."))
    return words.get(word)


def _is_bare(doc: Doc, taken: list[tuple[int, int]], patterns: QuestionPatterns) -> bool:
    """A question that is just a finding ("Pleural effusion?", "Effusion present"), maybe
    on the study ("Low volumes on this film?")."""
    rest = [
        t.lower_
        for t in doc
        if not any(s <= t.i < e for s, e in taken)
        and not t.is_punct
        and t.lower_ not in patterns.bare_fillers
    ]
    return not rest or any(tuple(rest) == study for study in patterns.bare_studies)


# --- answering from a report ---------------------------------------------------------------


@dataclass(frozen=True)
class ReportAnswer:
    """What the report says to a question.

    Attributes:
        answer: yes/no/uncertain/unknown, a term, position terms, a size (mm) or a count.
        known: False when the report does not say (answer "unknown").
        status: the finding's report status (positive/negative/uncertain/absent).
        laterality: the finding's side in the report, if any.
        evidence: report spans: {"text", "start", "end", "status", "rule"} per mention,
            and the attribute evidence used ({"attribute", "value", "rule", "start", "end"}).
    """

    answer: AnswerValue
    known: bool
    status: str
    laterality: str | None = None
    evidence: list[dict[str, object]] = field(default_factory=list)


def compare(value: float, op: str, target: float) -> bool:
    """`value op target` for op gt, ge, lt, le, eq (eq within 10% or 1 unit)."""
    if op == "gt":
        return value > target
    if op == "ge":
        return value >= target
    if op == "lt":
        return value < target
    if op == "le":
        return value <= target
    return abs(value - target) <= max(1.0, 0.1 * target)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _check(q: Qualifier, finding: Mapping[str, object], zones: Mapping[str, frozenset[str]]) -> str:
    """yes / no / unknown for one qualifier against the report's attributes of the finding."""
    side = finding.get("laterality")
    places = [str(p) for p in finding.get("location") or ()]  # type: ignore[attr-defined]
    if q.kind == "side":
        return _yes(side in q.accepts) if side else "unknown"
    if q.kind == "zone":
        inside = zones.get(str(q.value), frozenset())
        if not places:
            return "unknown"
        return _yes(any(p in inside for p in places))
    if q.kind == "lobe":
        if str(q.value) in places:
            return "yes"
        lobe_side, lobe_zone = q.accepts[:2] if len(q.accepts) >= 2 else ("", "")
        if side and side not in (lobe_side, "bilateral"):
            return "no"
        if places:
            return (
                _yes(any(p in zones.get(lobe_zone, frozenset()) for p in places))
                if side
                else "unknown"
            )
        return "unknown"
    if q.kind == "severity":
        sev = finding.get("severity")
        denied = finding.get("denied_severity") or ()
        if not sev and any(str(d) in q.accepts for d in denied):  # type: ignore[attr-defined]
            return "no"  # "no large effusion ... pleural effusion": a smaller one
        return _yes(sev in q.accepts) if sev else "unknown"
    if q.kind == "change":
        change = finding.get("change")
        return _yes(change in q.accepts) if change else "unknown"
    if q.kind == "count":
        count = finding.get("count")
        if count is None:
            count = 1  # a positive finding without a number is one
        if q.value == "multiple":
            return _yes(count == "multiple" or (isinstance(count, int) and count > 1))
        if count == "multiple":
            target = float(q.value)
            if q.op in ("gt", "ge") and target <= 1:
                return "yes"
            if q.op in ("lt", "le", "eq") and target <= 1:
                return "no"
            return "unknown"
        if q.op == "eq":
            return _yes(float(count) == float(q.value))  # type: ignore[arg-type]
        return _yes(compare(float(count), q.op, float(q.value)))  # type: ignore[arg-type]
    if q.kind == "tip":
        # a device's landmark, with its side where it has one ("left brachiocephalic vein")
        tip = finding.get("tip")
        return _yes(str(tip) in q.accepts) if tip else "unknown"
    if q.kind in ("descriptor", "site"):
        # "Is the nodule calcified?", "Is there a shoulder fracture?": a word of the report
        # that says so, next to the finding
        near = finding.get("near_words")
        if not isinstance(near, frozenset):
            return "no"
        if q.kind == "descriptor" and any(w in near for w in q.rejects):
            # "stable sternotomy wires, several of which are interrupted": the word that
            # says it does not hold outweighs one that only says it has not changed
            return "no"
        if any(w in near for w in q.accepts):
            return "yes"
        kin = finding.get("kin_words")
        if q.kind == "site" and isinstance(kin, frozenset) and any(w in kin for w in q.accepts):
            # "Is there spondylosis of the spine?" over "thoracic spondylosis": a kind of
            # degenerative spine is the spine's
            return "yes"
        if not q.rejects:
            return "no"
        # "Is the fracture acute?": no where a word beside it says it is old; where none
        # speaks of its age, the report does not say
        return "no" if any(w in near for w in q.rejects) else "unknown"
    if q.kind == "size":
        size = finding.get("size_mm")
        if size is None:
            return "unknown"
        return _yes(compare(float(size), q.op, float(q.value)))  # type: ignore[arg-type]
    return "unknown"


def _mention_evidence(m: Mention, keys: Iterable[str] = ()) -> list[dict[str, object]]:
    out: list[dict[str, object]] = [
        {
            "kind": "mention",
            "text": m.text,
            "start": m.start,
            "end": m.end,
            "status": m.status,
            "rule": m.rule or "positive.plain",
            "sentence": m.context(),
        }
    ]
    wanted = set(keys)
    out.extend(
        {"kind": "attribute", **ev} for ev in m.attribute_evidence if ev.get("attribute") in wanted
    )
    return out


# Mentions shown as one answer's report evidence: the deciding one first (real reports
# mention a finding a few times; a text that repeats it thousands of times must not make
# every answer repeat them all).
_MAX_SHOWN = 10
#: most words between a finding and the finding it is of ("fracture of the superior sternotomy
#: wire")
_COMPLEMENT_GAP = 4

_ATTRS_OF: dict[str, tuple[str, ...]] = {
    "presence": (),
    "position": ("laterality", "location"),
    "size": ("size_mm", "severity"),
    "count": ("count",),
    "change": ("change",),
    "severity": ("severity",),
}


@dataclass
class _Target:
    """What the report says of the finding a question asks about."""

    status: str  # positive, uncertain, negative or absent
    finding: Mapping[str, object]  # its attributes (laterality, location, size_mm, ...)
    evidence: list[dict[str, object]]
    #: the mentions of the deciding status: the words beside them, read when a question
    #: asks for them (a describing word, the report's own words for a place)
    deciding: Sequence[Mention] = ()
    #: an absent finding whose broader kind the report places outside the zone its name
    #: says ("basal opacities" over "opacities in both upper lobes")
    elsewhere: bool = False


def answer_from_report(
    question: ParsedQuestion,
    report: ReportLabels,
    patterns: QuestionPatterns | None = None,
    lexicon: Lexicon | None = None,
) -> ReportAnswer:
    """Answer a parsed question from a labelled report.

    Presence: positive is yes, uncertain is uncertain, negative or not mentioned is no.
    Attribute questions read the finding's aggregated attributes (`report.findings`);
    a closed question is yes only when every qualifier holds; an attribute the report
    does not state is `unknown`. A question about a lexicon concept (`concept:<id>`) is
    answered from `report.report_findings`: the concept's findings and those of every
    concept below it ("a central line" is answered by a PICC).

    Args:
        question: from `QuestionParser.parse` (not unsupported).
        report: from `label_report` / `label_reports` (with `findings` for a concept).
        patterns: the question patterns (zones); default `questions.v1`.
        lexicon: the lexicon the question's concept comes from; default `lexicon.v1`.

    Returns:
        The answer with the report spans and rule ids it rests on.
    """
    patterns = patterns or load_question_patterns()
    if question.also:
        return _answer_several(question, report, patterns, lexicon)
    if question.type == "change" and question.asks == "or_study":
        # "Has the mediastinum changed since the last film?" (a whole-study cue said of a
        # part): the part's own change, else the whole study's
        own = answer_from_report(
            dataclasses.replace(question, asks=None), report, patterns, lexicon
        )
        if own.known:
            return own
        study = dataclasses.replace(question, type="study", label=None, open=False, asks="change")
        return answer_study(study, report, patterns)
    label = question.label or ""
    keys = _ATTRS_OF.get(question.type, ())
    from_findings = label.startswith((CONCEPT_PREFIX, OPEN_PREFIX, PART_PREFIX))
    if from_findings and report.report_findings is None:
        why = "the report was labelled without its findings (LabelerConfig(findings=True))"
        return ReportAnswer("unknown", False, "absent", None, [{"kind": "absent", "text": why}])
    if from_findings and lexicon is None:
        from labeler.lexicon import load_lexicon

        lexicon = load_lexicon()
    if label.startswith(CONCEPT_PREFIX):
        assert lexicon is not None
        concept = label[len(CONCEPT_PREFIX) :]
        # a place, size, grade or change is the asked finding's own, where the report has it
        # ... unless the question names the site of one that answers it ("Which AC joints
        # are degenerative?" over arthritis of the AC joints and degenerative spine)
        own_first = (
            question.open
            and question.type in _OF_EITHER
            and not any(q.kind == "site" for q in question.where)
        )
        target = _concept_target(concept, report, lexicon, patterns, own_first=own_first)
        if target.status == "absent":
            at_site = _broader_at_site(concept, report, lexicon, patterns)
            if at_site:
                # "Is there a sternal fracture?" over "old fractures of several ribs and the
                # sternum": the broader finding at the site the name names
                target = _findings_target(at_site, "")
        if target.status == "absent":
            # "Has the vertebral deformity changed?" over "deformity of a midthoracic
            # vertebra": the question's own words of the name, not all of them, decide
            said = _described_parent(
                concept,
                report,
                lexicon,
                patterns,
                said=frozenset(_WORD.findall(question.text.lower())),
            )
            if said:
                target = _findings_target(said, "")
            elif _placed_elsewhere(concept, report, lexicon, patterns):
                target = dataclasses.replace(target, elsewhere=True)
        if target.status == "absent" and concept in patterns.read_together:
            together = _read_together(concept, report, lexicon, patterns)
            if together:
                target = _findings_target(together, "")
        if target.status in ("absent", "negative") and question.open:
            worded = _worded_with_descriptor(concept, question, report, lexicon)
            if worded:
                # "Where is the calcified density?" over "a calcific density in the left
                # midlung", read as a calcification (and "no airspace opacities" of the
                # density's kin ruled out): the finding its words name so
                target = _findings_target(worded, "")
        if target.status == "absent" and question.type == "position":
            # "Where is the compression deformity?" over "deformity of an upper lumbar
            # vertebral body": the broader finding at the name's site places it
            at = _described_parent(concept, report, lexicon, patterns, by_site=True)
            if at:
                target = _findings_target(at, "")
        if question.type == "change" and target.status in ("negative", "absent"):
            normals = patterns.anatomy_normals.get(concept, ())
            findings = report.report_findings or ()
            target = _normal_change(target, normals, findings, patterns, concept)
        parent = lexicon.concepts[concept].parent
        if (
            target.status == "absent"
            and question.asks == "tip"
            and parent is not None
            and lexicon.concepts[parent].kind == "device"
            # not every device: "the tube" is no line
            and lexicon.concepts[parent].parent is not None
        ):
            # "Where do the pacemaker leads end?" over "cardiac device ... leads in the right
            # heart": the tip the device they belong to was given
            target = _concept_target(parent, report, lexicon, patterns)
        if question.asks == "tip" and not target.finding.get("tip"):
            target = _tip_of_parts(target, concept, report, lexicon, patterns)
        if question.type == "size" and label in patterns.measured_by:
            target = _measured_by(target, label, report, lexicon, patterns)
        if question.type == "count" and question.open and target.status == "absent":
            holders = _holders_named(concept, report, lexicon, patterns)
            if holders:
                # "How many leads?" over a pacemaker whose leads the report does not name,
                # "How many vertebral deformities?" over "deformity in the midthoracic
                # spine": how many is not said; 0 only where both are absent
                shown = [_finding_evidence(f) for f in holders[:_MAX_SHOWN]]
                return ReportAnswer("unknown", False, "absent", None, shown)
        if question.type == "presence" and target.status == "absent" and parent is not None:
            broader = [
                f for f in _holders_named(concept, report, lexicon, patterns) if f.concept == parent
            ]
            if broader and all(f.status == "uncertain" for f in broader):
                # "Could there be hilar lymphadenopathy?" over "hilar fullness, adenopathy
                # cannot be excluded": the broader finding hedged, the narrower one possible
                target = _findings_target(broader, "")
        if question.type == "presence" and target.status == "absent":
            target = _called_limited(target, label, report, patterns)
        if any(q.kind == "site" for q in question.qualifiers):
            target = _with_kin_words(target, lexicon)
    elif label.startswith(OPEN_PREFIX):
        assert lexicon is not None
        target = _open_target(label[len(OPEN_PREFIX) :], report, lexicon, patterns)
    elif label.startswith(PART_PREFIX):
        assert lexicon is not None
        target = _part_target(label[len(PART_PREFIX) :], report, lexicon, patterns)
    else:
        target = _label_target(label, report, keys)
        if question.type in ("size", "severity") and target.status in ("negative", "absent"):
            target = _stated_normal(target, label, report.report_findings or (), patterns)
        target = _side_named_alone(question, target, label, report)
        if report.report_findings:
            if target.status == "absent":
                target = _label_from_findings(question, target, label, report, lexicon, patterns)
            target = _with_findings_attributes(target, report.report_findings)
            if question.type == "change" and target.status in ("negative", "absent"):
                normals = patterns.stated_normal.get(label, ())
                target = _normal_change(target, normals, report.report_findings, patterns, label)
            elif question.type == "change" and not target.finding.get("change"):
                target = _change_of_label_findings(target, label, report, lexicon)
            if target.status == "absent" and label in patterns.read_as_label:
                target = _read_as_label(target, label, report, lexicon, patterns)
            elif question.type in _LENT and label in patterns.read_as_label:
                target = _measured_as_label(question, target, report, lexicon, patterns)
            if question.type == "size" and label in patterns.measured_by:
                target = _measured_by(target, label, report, lexicon, patterns)
            if target.status == "absent" and label in patterns.suggested_by:
                suggested = _read_as_label(
                    target, label, report, lexicon, patterns, patterns.suggested_by
                )
                if suggested.status in ("positive", "uncertain"):
                    target = dataclasses.replace(suggested, status="uncertain")
            if target.status == "absent" and label in patterns.suggested_when_hedged:
                hinted = _read_as_label(
                    target, label, report, lexicon, patterns, patterns.suggested_when_hedged
                )
                if hinted.status == "uncertain":
                    target = hinted
    target = _place_of_sentence(question, target, report, patterns)
    target = _narrowed_to_place(question, target, patterns)
    target = _hedged_at_place(question, target, report, patterns)
    if question.open and question.type == "position":
        # "Which shoulder is fractured?": the side beside the site asked about
        site = {str(w) for q in question.where if q.kind == "site" for w in q.accepts}
        if question.asks == "level" and not site:
            # "Which rib is fractured?" over "fracture of the right lateral 9th rib": the
            # side beside the rib or vertebra named
            levels = target.finding.get("levels") or ()
            site = {w for lv in levels for w in str(lv).lower().split()}  # type: ignore[attr-defined]
        target = _side_before_site(target, site, patterns)
    target = _narrowed_to_part(question, target, patterns)
    if target.status == "positive" and any(q.kind == "severity" for q in question.qualifiers):
        target = _denied_grades(target, label, report)
    if (
        target.status == "positive"
        and target.deciding
        and all(_one_of_alternatives(m, patterns) for m in target.deciding)
    ):
        # "airspace disease and/or pleural effusion", "atelectasis or scar": the report
        # offers it as one of two readings (the labels count it, as the coders do)
        target = dataclasses.replace(target, status="uncertain")
    if (
        target.status == "positive"
        and target.deciding
        # a hedge word the asked concept is named by is no doubt ("borderline heart size")
        and all(
            _probable_reading(m, patterns, not _hedge_named(question, lexicon, patterns))
            for m in target.deciding
        )
    ):
        # "probable left basilar atelectasis", "opacities XXXX representing pneumonia": the
        # report's likely reading, not a finding it states (the labels count it positive)
        target = dataclasses.replace(target, status="uncertain")
    if question.type == "change":
        compared: Sequence[ReportFinding] = report.report_findings or ()
        if not _compares(report, patterns):
            # "mild increased airspace opacity" in a report that compares with nothing: a
            # denser opacity; whether it changed is not said
            if any(_descriptive_change(m, patterns) for m in target.deciding) and not any(
                m.attributes.get("change") and not _descriptive_change(m, patterns)
                for m in target.deciding
            ):
                kept = {k: v for k, v in target.finding.items() if k != "change"}
                target = dataclasses.replace(target, finding=kept)
            compared = [f for f in compared if not _descriptive_change(f, patterns)]
        target = _course_over_persistence(target, patterns)
        target = _placed_in_interval(target, patterns, lexicon)
        target = _change_said_elsewhere(target, compared, patterns, lexicon)
    if (
        question.type == "presence"
        and target.status == "positive"
        and patterns.verity_words & set(_ALT_WORD.findall(question.text.lower()))
        and any(e.get("status") == "uncertain" for e in target.evidence)
    ):
        # "Is that a true pulmonary nodule?" over "nodular density ... could represent
        # overlapping shadows or actual pulmonary nodule": whether it truly is one is what
        # the report doubts
        target = dataclasses.replace(target, status="uncertain")
    mimics = patterns.explained_by.get(label, ())
    if (
        mimics
        and question.type == "presence"
        and target.status == "positive"
        and target.deciding
        and all(_explained_away(m, mimics, report) for m in target.deciding)
    ):
        # "Is there a lung nodule?" over "nodular densities ... are consistent with nipple
        # shadows": what the report says the finding is, not the finding; a mention hedged
        # elsewhere keeps it possible
        hedged = any(e.get("status") == "uncertain" for e in target.evidence)
        target = dataclasses.replace(target, status="uncertain" if hedged else "negative")
    if question.asks == "view":
        return _view_answer(target, report, lexicon)
    unjudged = patterns.unassessed_by.get(label, ())
    if unjudged and question.type in ("presence", "size") and target.status == "absent":
        # "Is the heart enlarged?" over "the cardiac silhouette is not fully evaluated": the
        # part the report could not judge, not a finding it rules out
        said = [f for f in report.report_findings or () if f.concept in unjudged]
        if said:
            shown = [_finding_evidence(f) for f in said[:_MAX_SHOWN]]
            return ReportAnswer("unknown", False, "absent", None, shown)
    if question.type == "count" and question.open:
        target = _counted_by_readings(target, report.report_findings or (), patterns)
        target = _counted_by_longer_name(target, report.report_findings or ())
    asked = lexicon.concepts.get(_concept_id(label)) if lexicon is not None else None
    return _answer(question, target, patterns, device=asked is not None and asked.kind == "device")


def _counted_by_longer_name(target: _Target, findings: Sequence[ReportFinding]) -> _Target:
    """A label's plural ("nodules": `multiple`, read from the plural alone) counted by the
    number of the longer name it is part of ("two calcified nodules": the finding
    "calcified nodules", counted two); the target as it is where none gives a number."""
    if target.finding.get("count") != "multiple" or not target.deciding:
        return target
    numbers: list[int] = []
    for m in target.deciding:
        rules = {ev.get("rule") for ev in m.attribute_evidence if ev.get("attribute") == "count"}
        if rules != {PLURAL_RULE}:
            return target  # "multiple nodules": a word that says several
        longer = [
            f.attributes["count"]
            for f in findings
            if f.status == m.status
            and f.start <= m.start
            and m.end <= f.end
            and (f.start, f.end) != (m.start, m.end)
            and isinstance(f.attributes.get("count"), int)
        ]
        if not longer:
            return target
        numbers.append(max(longer))
    return dataclasses.replace(target, finding={**target.finding, "count": max(numbers)})


def _counted_by_readings(
    target: _Target, findings: Sequence[ReportFinding], patterns: QuestionPatterns
) -> _Target:
    """A process counted (`uncounted`: "How many granulomas?" over "old granulomatous
    disease") by the things the report reads it from, joined to it by a word of
    `same_finding_links` in its sentence ("two calcified nodules consistent with old
    granulomatous disease": two); the target as it is where none is."""
    if target.status not in ("positive", "uncertain") or not target.deciding:
        return target
    if any(m.label not in patterns.uncounted for m in target.deciding):
        return target
    links = load_attribute_rules().links
    things: list[ReportFinding] = []
    for process in target.deciding:
        for f in findings:
            if (
                f.kind != "finding"
                or f.status != process.status
                or f.label in patterns.uncounted
                or process.sentence_start is None
                or f.sentence_start != process.sentence_start
                or f.end > process.start
            ):
                continue
            at = process.sentence_start or 0
            between = set(_WORD.findall(process.sentence[f.end - at : process.start - at].lower()))
            if links & between and f not in things:
                things.append(f)
    if not things:
        return target
    count = stated_count(things, PLURAL_RULE)
    if count is None and any(_plural(f.text) for f in things):
        count = "multiple"  # "calcified nodules consistent with granulomatous disease"
    shown = [_finding_evidence(f) for f in things[:_MAX_SHOWN]]
    return dataclasses.replace(
        target,
        finding={**target.finding, "count": 1 if count is None else count},
        evidence=[*target.evidence, *shown],
        deciding=things,
    )


_CALLED_GAP = 4  # the words a study's reason may take between "limited" and "exam"


def _called_limited(
    target: _Target, label: str, report: ReportLabels, patterns: QuestionPatterns
) -> _Target:
    """The study the report calls limited with its reason between the word and the study's
    noun ("Limited low lung volume exam", "Limited portable study"): positive, with the
    findings of that sentence as evidence; else `target` as it is."""
    words = patterns.called_limited.get(label)
    if not words:
        return target
    seen: set[str] = set()
    for f in report.report_findings or ():
        if f.sentence in seen:
            continue
        seen.add(f.sentence)
        tokens = _WORD.findall(f.sentence.lower())
        for i, token in enumerate(tokens):
            if token in words and patterns.study_nouns & set(tokens[i + 2 : i + 2 + _CALLED_GAP]):
                said = [g for g in report.report_findings or () if g.sentence == f.sentence]
                return _Target("positive", {}, [_finding_evidence(g) for g in said[:_MAX_SHOWN]])
    return target


def _denied_grades(target: _Target, label: str, report: ReportLabels) -> _Target:
    """A finding the report sees with no grade, where it rules out the same finding at a
    grade ("no large pleural effusion ... pleural effusion"): those grades, as
    `denied_severity`, which a closed question asks of it ("Is the effusion a large one?":
    no, the one seen is smaller); else `target` as it is."""
    if target.finding.get("severity"):
        return target
    if label.startswith(CONCEPT_PREFIX):
        concept = label[len(CONCEPT_PREFIX) :]
        same: Sequence[Mention] = [f for f in report.report_findings or () if f.concept == concept]
    else:
        same = [m for m in report.mentions if m.label == label]
    denied = {
        str(m.attributes["severity"])
        for m in same
        if m.status == "negative" and m.attributes.get("severity")
    }
    if not denied:
        return target
    return dataclasses.replace(
        target, finding={**target.finding, "denied_severity": sorted(denied)}
    )


@functools.lru_cache(maxsize=8)
def _limitations(limitation: str, not_limiting: frozenset[str]) -> frozenset[str]:
    """The concepts of the lexicon that say a study was taken badly: `limitation` and those
    under it, but those of `not_limiting` and theirs."""
    from labeler.lexicon import load_lexicon

    lexicon = load_lexicon()
    if limitation not in lexicon.concepts:
        return frozenset()
    out = {limitation, *lexicon.descendants(limitation)}
    for c in not_limiting & out:
        out -= {c, *lexicon.descendants(c)}
    return frozenset(out)


def _limiting(
    question: ParsedQuestion, findings: Sequence[ReportFinding], patterns: QuestionPatterns
) -> list[ReportFinding]:
    """The report's stated limitations of how the study (or the view the question names)
    was taken; only those of an aspect the question names ("a good inspiratory film")."""
    concepts = _limitations(patterns.quality_limitation, patterns.quality_not_limiting)
    words = set(re.findall(r"[a-z]+", question.text.lower()))
    aspects = [patterns.quality_aspects[w] for w in words if w in patterns.quality_aspects]
    if aspects:
        concepts = frozenset().union(*aspects)
    view = _concept_id(question.label) if question.label else None
    own = patterns.quality_view_words.get(view or "", frozenset())
    others = (
        frozenset().union(*(v for k, v in patterns.quality_view_words.items() if k != view)) - own
    )
    out = []
    for f in findings:
        if own and not aspects and f.kind == "view" and f.status == "positive":
            # the view called limited in its own sentence ("The lateral projection is
            # suboptimal")
            said = set(re.findall(r"[a-z-]+", f.sentence.lower()))
            if said & own and said & patterns.quality_limiting_words:
                out.append(f)
            continue
        if f.status != "positive" or f.concept not in concepts:
            continue
        if own:
            # a limitation of another view only ("The frontal view is rotated") is not this one's
            said = set(re.findall(r"[a-z]+", f.sentence.lower()))
            if not said & own and said & others:
                continue
        out.append(f)
    return out


def _view_answer(target: _Target, report: ReportLabels, lexicon: Lexicon | None) -> ReportAnswer:
    """Which view a finding is seen on ("Which view has motion artifact?" over "The lateral
    view is degraded by patient motion"): the views its sentences name; unknown where they
    name none or the finding is not there."""
    if lexicon is None:
        from labeler.lexicon import load_lexicon

        lexicon = load_lexicon()
    status = target.status
    starts = {m.sentence_start for m in target.deciding if m.sentence_start is not None}
    views = [
        f
        for f in report.report_findings or ()
        if f.kind == "view" and f.status == "positive" and f.sentence_start in starts
    ]
    if status not in ("positive", "uncertain") or not views:
        return ReportAnswer("unknown", False, status, None, target.evidence)
    names = [lexicon.concepts[f.concept].name for f in views if f.concept in lexicon.concepts]
    shown = [*target.evidence, *(_finding_evidence(f) for f in views[:_MAX_SHOWN])]
    return ReportAnswer(list(dict.fromkeys(names)), True, status, None, shown)


def _explained_away(m: Mention, mimics: Sequence[str], report: ReportLabels) -> bool:
    """Whether a positive finding of a mimic concept is named after `m` in its sentence."""
    return any(
        f.concept in mimics
        and f.status == "positive"
        and f.sentence == m.sentence
        and f.start >= m.end
        for f in report.report_findings or ()
    )


def _label_from_findings(
    question: ParsedQuestion,
    target: _Target,
    label: str,
    report: ReportLabels,
    lexicon: Lexicon | None,
    patterns: QuestionPatterns,
) -> _Target:
    """A label the report names nowhere, from the findings of the lexicon concept the
    question's words for it also name ("Any lung tumor?" over "right upper lobe lung tumor":
    lung cancer), else of the concepts the lexicon maps to the label ("Any atelectasis?"
    over "collapsed right upper lobe"), which the label's own reading did not count."""
    if lexicon is None:
        from labeler.lexicon import load_lexicon

        lexicon = load_lexicon()
    if question.kin is not None and question.kin in lexicon.concepts:
        kin = _concept_target(question.kin, report, lexicon, patterns)
        if kin.status != "absent":
            return kin
    mapped = _label_concepts(label, report, lexicon)
    found = [f for f in report.report_findings or () if f.concept in mapped]
    return _findings_target(found, "") if found else target


def _label_concepts(label: str, report: ReportLabels, lexicon: Lexicon) -> frozenset[str]:
    """The lexicon concepts that map to `label` in the label set the report was labelled
    with (the first packaged one that has its labels)."""
    names = set(report.labels)
    of_set = next((of for known, of in _concepts_of_labels(lexicon) if names <= known), {})
    return of_set.get(label, frozenset())


def _change_of_label_findings(
    target: _Target, label: str, report: ReportLabels, lexicon: Lexicon | None
) -> _Target:
    """A label's finding with no change of its own where a finding of a concept the lexicon
    maps to the label has one ("Cardiomegaly ..." over "interval increase in size of the
    cardiac silhouette"): that finding's change."""
    if lexicon is None:
        from labeler.lexicon import load_lexicon

        lexicon = load_lexicon()
    mapped = _label_concepts(label, report, lexicon)
    for f in report.report_findings or ():
        change = f.attributes.get("change")
        if change and f.concept in mapped and f.status in ("positive", "uncertain"):
            evidence = [*target.evidence, _finding_evidence(f)]
            return dataclasses.replace(
                target, finding={**target.finding, "change": change}, evidence=evidence
            )
    return target


def _concepts_of_labels(
    lexicon: Lexicon,
) -> list[tuple[frozenset[str], dict[str, frozenset[str]]]]:
    """Per packaged label set, its labels and each label -> the lexicon concepts that map
    to it (their own mapping or their nearest ancestor's); built once per lexicon."""
    from labeler.labelsets import PACKAGED, load_label_set

    cached = _OF_LABELS.get(id(lexicon))
    if cached is not None and cached[0] is lexicon:
        return cached[1]
    out = []
    for label_set in PACKAGED:
        of: dict[str, set[str]] = {}
        for cid in lexicon.concepts:
            for lab in lexicon.labels_for(cid, label_set):
                of.setdefault(lab, set()).add(cid)
        known = frozenset(load_label_set(label_set).labels)
        out.append((known, {k: frozenset(v) for k, v in of.items()}))
    if len(_OF_LABELS) >= 8:
        _OF_LABELS.clear()
    _OF_LABELS[id(lexicon)] = (lexicon, out)
    return out


_OF_LABELS: dict[int, tuple[Lexicon, list[tuple[frozenset[str], dict[str, frozenset[str]]]]]] = {}


def _read_as_label(
    target: _Target,
    label: str,
    report: ReportLabels,
    lexicon: Lexicon | None,
    patterns: QuestionPatterns,
    standing_for: Mapping[str, tuple[str, ...]] | None = None,
) -> _Target:
    """A label the report names nowhere, read from the concepts that stand for it in a
    clinician's words (`read_as_label`, or `standing_for`), the first the report names."""
    if lexicon is None:
        from labeler.lexicon import load_lexicon

        lexicon = load_lexicon()
    for concept in (standing_for or patterns.read_as_label)[label]:
        if concept in lexicon.concepts:
            found = _concept_target(concept, report, lexicon, patterns)
            if found.status != "absent":
                return found
    return target


#: question type -> what a finding read as the label may lend the label's own mentions
#: (the first: what they must lack)
_LENT = {"size": ("size_mm", "size_text"), "position": ("location", "laterality")}


def _measured_as_label(
    question: ParsedQuestion,
    target: _Target,
    report: ReportLabels,
    lexicon: Lexicon | None,
    patterns: QuestionPatterns,
) -> _Target:
    """A label the report names without a size or place ("true pulmonary nodule is a
    possibility") takes them from the finding it reads as the label that has them ("6 mm
    nodular opacity in the right upper lobe"), when that one is positive and on no other
    side; a label the report only rules out is that finding."""
    keys = _LENT[question.type]
    if keys[0] in target.finding or question.label is None:
        return target
    read = _read_as_label(target, question.label, report, lexicon, patterns)
    if target.status == "negative" and read.status == "positive":
        # "Where is the nodule?" over "no other nodules ... 1 cm nodular opacity in the
        # left midlung": the one the report describes, not those it rules out
        return read
    side, other = target.finding.get("laterality"), read.finding.get("laterality")
    if read is target or read.status != "positive" or (side and other and side != other):
        return target
    lent = {k: v for k, v in read.finding.items() if k in keys and k not in target.finding}
    if not lent:
        return target
    return dataclasses.replace(
        target, finding={**target.finding, **lent}, evidence=[*target.evidence, *read.evidence]
    )


def _measured_by(
    target: _Target,
    label: str,
    report: ReportLabels,
    lexicon: Lexicon | None,
    patterns: QuestionPatterns,
) -> _Target:
    """A finding the report names without a size ("unchanged right hilar mass") takes the
    size of the finding of its family (`measured_by`) the report measures on the same side
    and in the same place ("a 3.0 cm nodule ... within the right hilum"): one lesion, named
    twice. A side or a place must be shared; one that differs is another lesion."""
    if target.status != "positive" or target.finding.get("size_mm") is not None:
        return target
    if lexicon is None:
        from labeler.lexicon import load_lexicon

        lexicon = load_lexicon()
    side = target.finding.get("laterality")
    where = [str(p) for p in target.finding.get("location") or ()]  # type: ignore[attr-defined]
    for concept in patterns.measured_by[label]:
        if concept not in lexicon.concepts:
            continue
        other = _concept_target(concept, report, lexicon, patterns)
        size = other.finding.get("size_mm")
        if other.status != "positive" or size is None:
            continue
        o_side = other.finding.get("laterality")
        o_where = [str(p) for p in other.finding.get("location") or ()]  # type: ignore[attr-defined]
        if (side and o_side and side != o_side) or not _places_agree(where, o_where):
            continue
        if not ((side and side == o_side) or (where and o_where)):
            continue  # nothing shared: no reason to read them as one
        return dataclasses.replace(
            target,
            finding={**target.finding, "size_mm": size},
            evidence=[*target.evidence, *other.evidence],
        )
    return target


def _stated_normal(
    target: _Target, label: str, findings: Sequence[ReportFinding], patterns: QuestionPatterns
) -> _Target:
    """A label with a normal state the report gives ("normal heart size"), or rules out
    ("the heart is not enlarged"): "How big is the heart?" is answered "normal"."""
    if label not in patterns.stated_normal:
        return target
    concepts = patterns.stated_normal[label]
    said = [f for f in findings if f.label in concepts and f.status == "positive"]
    if not said and target.status != "negative":
        return target
    evidence = [*target.evidence, *(_finding_evidence(f) for f in said[:1])]
    return dataclasses.replace(
        target, finding={**target.finding, "stated_normal": True}, evidence=evidence
    )


def _normal_change(
    target: _Target,
    normals: Collection[str],
    findings: Sequence[ReportFinding],
    patterns: QuestionPatterns,
    subject: str = "",
) -> _Target:
    """A finding the report rules out, or a part of the body, with a normal statement
    (`normals`) that says how it compares ("heart size within normal limits and stable"):
    the statement's change is the finding's. So is that of a whole sentence's normal
    statement (`sentence_normals`) whose words before it name the part (`normal_subjects`
    of `subject`: "Cardiomediastinal silhouette and pulmonary vasculature are stable and
    within normal limits")."""
    said = [f for f in findings if f.label in normals and f.status == "positive"]
    words = patterns.normal_subjects.get(subject, ())
    if words:
        said += [
            f
            for f in findings
            if f.label in patterns.sentence_normals
            and f.status == "positive"
            and f.sentence_start is not None
            and any(
                w in words for w in _WORD.findall(f.sentence[: f.start - f.sentence_start].lower())
            )
        ]
    change = next((f.attributes["change"] for f in said if f.attributes.get("change")), None)
    if change is None:
        return target
    evidence = [*target.evidence, *(_finding_evidence(f) for f in said[:1])]
    return dataclasses.replace(
        target, finding={**target.finding, "change": change}, evidence=evidence
    )


def _compares(report: ReportLabels, patterns: QuestionPatterns) -> bool:
    """Whether a sentence of the report speaks of an earlier study ("compared to prior")."""
    sentences = {m.sentence for m in (*report.mentions, *(report.report_findings or ()))}
    return any(set(_WORD.findall(s.lower())) & patterns.comparison_words for s in sentences)


def _descriptive_change(m: Mention, patterns: QuestionPatterns) -> bool:
    """Whether `m`'s change is only a word before it that may describe it ("mild increased
    airspace opacity": denser), not a comparison."""
    said = [e for e in m.attribute_evidence if e.get("attribute") == "change"]
    spans = _change_spans(m)
    return (
        bool(said)
        and len(spans) == len(said)
        and all(end <= m.start and w in patterns.uncompared_change_words for end, w in spans)
    )


def _change_words(m: Mention) -> list[str]:
    """The report's words that gave `m` its change ("persistent", "decreasing")."""
    return [words for _, words in _change_spans(m)]


def _change_spans(m: Mention) -> list[tuple[int, str]]:
    """Where each of the report's words that gave `m` its change ends, with the words."""
    if m.sentence_start is None:
        return []
    return [
        (
            int(ev["end"]),
            m.sentence[
                int(ev["start"]) - m.sentence_start : int(ev["end"]) - m.sentence_start
            ].lower(),
        )
        for ev in m.attribute_evidence
        if ev.get("attribute") == "change" and "start" in ev and "end" in ev
    ]


def _placed_in_interval(
    target: _Target, patterns: QuestionPatterns, lexicon: Lexicon | None
) -> _Target:
    """`target` as new where the report puts a word of `interval_new_words` right before a
    device or an operation it names ("There has been interval CABG", "Interval left chest
    pacemaker") and gives it no change of its own."""
    if lexicon is None or target.finding.get("change") or target.status != "positive":
        return target
    for m in target.deciding:
        entry = lexicon.concepts.get(m.label)
        if entry is None or entry.kind not in patterns.interval_new_kinds:
            continue
        if m.sentence_start is None:
            continue
        # the words of its own modifiers before it count with it ("interval left chest
        # pacemaker"), where nothing but words lies between
        starts = [int(ev.get("start", m.start)) for ev in m.attribute_evidence]
        first = min([s for s in starts if m.sentence_start <= s < m.start] + [m.start])
        if re.search(
            r"[^\w\s-]", m.sentence[first - m.sentence_start : m.start - m.sentence_start]
        ):
            first = m.start
        before = _WORD.findall(m.sentence[: first - m.sentence_start].lower())
        if before and before[-1] in patterns.interval_new_words:
            return dataclasses.replace(target, finding={**target.finding, "change": "new"})
    return target


def _course_over_persistence(target: _Target, patterns: QuestionPatterns) -> _Target:
    """`target` with the course another mention states ("Decreasing right pleural effusion")
    where its change is only that it is still there ("Persistent small right pleural
    effusion"): the direction answers how it changed, the persistence does not."""
    if target.finding.get("change") != "unchanged":
        return target
    courses: list[str] = []
    for m in target.deciding:
        change = m.attributes.get("change")
        if change in patterns.course_changes:
            courses.append(str(change))
        elif change and not set(_change_words(m) or ["?"]) <= patterns.persistence_words:
            return target  # "stable" beside "decreasing": the report does not agree
    if len(set(courses)) != 1:
        return target
    return dataclasses.replace(target, finding={**target.finding, "change": courses[0]})


def _change_said_elsewhere(
    target: _Target,
    findings: Sequence[ReportFinding],
    patterns: QuestionPatterns,
    lexicon: Lexicon | None = None,
) -> _Target:
    """A finding there with no change of its own takes, in this order, the change of a list it
    is an item of, of the finding it is of, of another mention of its concept, of a broader
    or narrower concept at the same place, or of a report that calls the whole study as
    before ("Stable appearing chest.", "Findings are grossly unchanged")."""
    steps: tuple[Callable[[_Target], _Target], ...] = (
        lambda t: _change_of_list(t, findings, patterns),
        lambda t: _change_of_complement(t, findings, patterns),
        lambda t: _change_of_other_mention(t, findings),
        lambda t: _change_of_kin_there(t, findings, lexicon),
        lambda t: _normal_change(t, patterns.unchanged_statements, findings, patterns),
    )
    for take in steps:
        if target.status not in ("positive", "uncertain") or target.finding.get("change"):
            break
        target = take(target)
    return target


def _change_of_list(
    target: _Target, findings: Sequence[ReportFinding], patterns: QuestionPatterns
) -> _Target:
    """A finding with no change of its own, listed with one that has a change word before
    the whole list or after it ("Stable calcified hilar nodes and granulomas", "Emphysema
    and scarring, unchanged", "Hyperexpansion and changes of COPD as before"): the list's
    change is the finding's. The items are joined by `change_list_joins`, with only
    `change_list_fillers` beside the join."""
    joins, fillers = patterns.change_list_joins, patterns.change_list_fillers
    for m in target.deciding:
        if m.sentence_start is None:
            continue
        at = m.sentence_start
        mates = sorted(
            (f for f in findings if f.sentence_start == at and f.status != "negative"),
            key=lambda f: f.start,
        )
        if not any(f.start < m.end and m.start < f.end for f in mates):
            continue
        for i in range(len(mates) - 1):
            base = mates[i].end
            text = list(m.sentence[base - at : mates[i + 1].start - at])
            for ev in mates[i].attribute_evidence:
                # the item's own words after it ("calcified hilar XXXX": its place)
                lo = max(int(ev.get("start", -1)) - base, 0)
                hi = min(int(ev.get("end", -1)) - base, len(text))
                if hi > lo:
                    text[lo:hi] = [" "] * (hi - lo)
            gap = set("".join(text).lower().replace(",", " , ").split())
            if not gap & joins or not gap <= joins | fillers:
                mates = []  # not one list: "A near B", "A. B"
                break
        if len(mates) < 2:
            continue
        first, last = mates[0].start, mates[-1].end
        for f in mates:
            for ev in f.attribute_evidence:
                if ev.get("attribute") != "change":
                    continue
                start, end = int(ev.get("start", -1)), int(ev.get("end", -1))
                if end <= first or start >= last:
                    evidence = [*target.evidence, _finding_evidence(f)]
                    finding = {**target.finding, "change": ev["value"]}
                    return dataclasses.replace(target, finding=finding, evidence=evidence)
    return target


def _change_of_complement(
    target: _Target, findings: Sequence[ReportFinding], patterns: QuestionPatterns
) -> _Target:
    """A finding with no change of its own whose complement is another finding ("Fracture of
    the sternotomy wire is unchanged", "blunting of the right costophrenic angle, stable"):
    the change said after the complement is the whole phrase's. The complement follows one
    of `complement_joins` within `_COMPLEMENT_GAP` words, all in one clause."""
    for m in target.deciding:
        if m.sentence_start is None:
            continue
        at = m.sentence_start
        for f in findings:
            if f.sentence_start != at or f.start < m.end or f.status == "negative":
                continue
            gap = m.sentence[m.end - at : f.start - at].lower().split()
            if not gap or gap[0] not in patterns.complement_joins or len(gap) > _COMPLEMENT_GAP:
                continue
            if any(not w.isalpha() for w in gap):
                continue  # "fracture, and the wire is unchanged": another clause
            for ev in f.attribute_evidence:
                if ev.get("attribute") == "change" and int(ev.get("start", -1)) >= f.end:
                    evidence = [*target.evidence, _finding_evidence(f)]
                    finding = {**target.finding, "change": ev["value"]}
                    return dataclasses.replace(target, finding=finding, evidence=evidence)
    return target


def _change_of_kin_there(
    target: _Target, findings: Sequence[ReportFinding], lexicon: Lexicon | None
) -> _Target:
    """A finding with no change of its own where a mention of a broader or narrower concept
    on the same side and at the same place has one ("The opacity at the left lung base is
    stable. ... Left basilar opacity, likely atelectasis": the basilar opacity is
    unchanged)."""
    if lexicon is None:
        return target
    for m in target.deciding:
        if m.label not in lexicon.concepts:
            continue
        side, places = m.attributes.get("laterality"), set(m.attributes.get("location") or ())
        if not side or not places:
            continue  # a place not said: which of several it is is not known
        above = {m.label, *lexicon.ancestors(m.label)}
        for f in findings:
            change = f.attributes.get("change")
            if not change or f.status not in ("positive", "uncertain") or f.label == m.label:
                continue
            below = f.label in lexicon.concepts and m.label in lexicon.ancestors(f.label)
            if f.label not in above and not below:
                continue
            if f.attributes.get("laterality") != side:
                continue
            if not places & set(f.attributes.get("location") or ()):
                continue
            evidence = [*target.evidence, _finding_evidence(f)]
            finding = {**target.finding, "change": change}
            return dataclasses.replace(target, finding=finding, evidence=evidence)
    return target


def _change_of_other_mention(target: _Target, findings: Sequence[ReportFinding]) -> _Target:
    """A finding with no change of its own where another mention of the same concept, hedged
    or not, has one ("There is prominence of the superior mediastinum ... Increasing
    prominence of the superior mediastinum may be due to ..."): that mention's change."""
    concepts = {m.label for m in target.deciding}
    for f in findings:
        change = f.attributes.get("change")
        if change and f.label in concepts and f.status in ("positive", "uncertain"):
            evidence = [*target.evidence, _finding_evidence(f)]
            finding = {**target.finding, "change": change}
            return dataclasses.replace(target, finding=finding, evidence=evidence)
    return target


def _hedge_named(
    question: ParsedQuestion, lexicon: Lexicon | None, patterns: QuestionPatterns
) -> bool:
    """Whether the question's concept is named by a word of `probable_within` ("borderline
    heart size"): asked about, that word is the finding, not a doubt about it."""
    concept = _concept_id(question.label or "")
    if lexicon is None or concept not in lexicon.concepts:
        return False
    name = lexicon.concepts[concept].name
    return any(p.search(name) for p in patterns.probable_within)


def _probable_reading(m: Mention, patterns: QuestionPatterns, within: bool = True) -> bool:
    """Whether the words before the mention in its sentence give it as a probable reading
    ("probable atelectasis"), or, with `within`, its own words do ("heart size borderline
    enlarged")."""
    if within and any(p.search(m.text) for p in patterns.probable_within):
        return True
    if m.sentence_start is None or not patterns.probable_readings:
        return False
    before = m.sentence[: m.start - m.sentence_start]
    return any(p.search(before) for p in patterns.probable_readings)


#: what the OpenI de-identification masked after "lymph" is read as a plural: unmasked,
#: the dev reports say "lymph nodes" 110 times and "lymph node" 15; masked, "lymph XXXX are"
#: 12 times and "lymph XXXX is" never
_MASKED_PLURALS = ("lymph xxxx",)


def _plural(text: str) -> bool:
    """Whether a mention's last word is a plural ("rib fractures", "lymph XXXX")."""
    lowered = text.lower()
    words = lowered.split()
    if lowered.endswith(_MASKED_PLURALS):
        return True
    # a Greek or Latin singular is none ("atelectasis", "bullous", "thrombus")
    return (
        bool(words)
        and not words[-1].endswith(_SINGULAR_ENDINGS)
        and singular(words[-1]) != words[-1]
    )


_SINGULAR_ENDINGS = ("is", "us")


def _process_head(m: Mention, patterns: QuestionPatterns) -> str | None:
    """The word of `process_heads` a mention ends in or is followed by ("anterior osteophyte
    formation"): the finding named by the process that makes it."""
    words = m.text.lower().split()
    if words and words[-1] in patterns.process_heads:
        return words[-1]
    if m.sentence_start is None:
        return None
    after = _WORD.findall(m.sentence[m.end - m.sentence_start :].lower())[:1]
    return after[0] if after and after[0] in patterns.process_heads else None


def _narrowed_to_part(
    question: ParsedQuestion, target: _Target, patterns: QuestionPatterns
) -> _Target:
    """Of several mentions, those beside the part of a place the question names ("Which way
    does the thoracic spine curve?" over a thoracic dextrocurvature and a lumbar
    levocurvature), when some are there and some are not (`place_parts`)."""
    if len(target.deciding) < 2:
        return target
    asked = set(_WORD.findall(question.text.lower())) & patterns.place_parts
    if not asked:
        return target
    there = [m for m in target.deciding if asked & _own_place_words(m)]
    if not there or len(there) == len(target.deciding):
        return target
    return dataclasses.replace(target, finding=_merged(there), deciding=there)


def _own_place_words(m: Mention) -> set[str]:
    """The words of a mention's own phrase with four after it ("thoracic levoscoliosis",
    "dextrocurvature of the thoracic spine"); none without its sentence."""
    return set(_phrase_words(m, after=4)) if m.sentence_start is not None else set()


def _narrowed_to_place(
    question: ParsedQuestion, target: _Target, patterns: QuestionPatterns
) -> _Target:
    """Of several mentions, those in the place the question names, when some are there and
    some are not: "Has the right midlung opacity improved?" over a left and a right opacity
    asks about the right one, "How large is the left effusion?" about the left one. One
    deciding mention on the side, zone or lobe asked about answers with its own attributes
    ("Has the left effusion changed?" is not answered by a resolved right one)."""
    places = question.where or tuple(q for q in question.qualifiers if q.kind in _PLACE_KINDS)
    if not places or not target.deciding:
        return target
    zones = patterns.zone_includes
    # a site or describing word is checked against the words beside each finding; a side,
    # zone or lobe against its attributes alone
    worded = any(q.kind in ("descriptor", "site") for q in places)
    there = [
        m
        for m in target.deciding
        for seen in (
            {**m.attributes, "near_words": _near_words([m], patterns.denying_words, patterns)}
            if worded
            else m.attributes,
        )
        if all(_check(q, seen, zones) == "yes" for q in places)
    ]
    if not there or len(there) == len(target.deciding) > 1:
        return target
    if len(target.deciding) == 1 and worded:
        return target  # a site or describing word picks nothing among one
    graded = any(m.attributes.get("severity") for m in there)
    if question.type in ("size", "severity") and not graded:
        # "How bad are the opacities at the bases?" over "opacities in both lung bases ...
        # IMPRESSION: Mild opacities": a graded mention that names no place restates them
        there += [
            m
            for m in target.deciding
            if m.attributes.get("severity") and not any(m.attributes.get(k) for k in _PLACE_ATTRS)
        ]
    # the findings there, with their own attributes: not those the label's other mentions
    # (a resolved effusion on the other side) lend its summary
    return dataclasses.replace(target, finding=_merged(there), deciding=there)


def _hedged_at_place(
    question: ParsedQuestion, target: _Target, report: ReportLabels, patterns: QuestionPatterns
) -> _Target:
    """A finding seen only elsewhere, and only hedged at the place a closed question asks
    about, is possible there, not absent: "Is there a nodule in the right upper lobe?" over "left
    lower lobe nodule ... possible right upper lobe nodule" (the positive one decides the
    label, and its place is not the one asked)."""
    places = tuple(q for q in question.qualifiers if q.kind in _PLACE_KINDS)
    if question.open or not places or target.status != "positive" or not target.deciding:
        return target
    zones = patterns.zone_includes

    def at(m: Mention) -> bool:
        return all(_check(q, m.attributes, zones) == "yes" for q in places)

    # each positive one placed elsewhere (one with no place may be the one asked about)
    if not all(
        any(_check(q, m.attributes, zones) == "no" for q in places) for m in target.deciding
    ):
        return target
    kinds = {m.label for m in target.deciding}
    said: list[Mention] = [*report.mentions, *(report.report_findings or ())]
    there = [m for m in said if m.label in kinds and m.status == "uncertain" and at(m)]
    if not there:
        return target
    evidence = [ev for m in there[:_MAX_SHOWN] for ev in _mention_evidence(m)]
    return _Target("uncertain", _merged(there), evidence + target.evidence, there)


#: the word the OpenI de-identification put in place of a masked one, lower-cased
_MASK = "xxxx"
_ALT_WORD = re.compile(r"[a-z]+(?:/[a-z]+)?|[,;:.]")


def _one_of_alternatives(m: Mention, patterns: QuestionPatterns) -> bool:
    """Whether the mention stands as one side of "X or Y" / "X and/or Y": an alternative
    word right after it or right before it ("new or increased effusion" offers no other
    reading of the effusion)."""
    words = patterns.alternatives
    if m.sentence_start is None or not words:
        return False
    a, b = m.start - m.sentence_start, m.end - m.sentence_start
    # a degree word does not part the finding from its alternative ("normal or mildly
    # enlarged heart")
    # nor does a masked word ("scarring or XXXX atelectasis")
    degree = patterns.degree_words | {_MASK}
    after = [w for w in _ALT_WORD.findall(m.sentence[b:].lower()) if w != _MASK][:1]
    before = [w for w in _ALT_WORD.findall(m.sentence[:a].lower()) if w not in degree][-1:]
    # a statement that holds both readings ("heart size is upper normal or mildly enlarged")
    inside = _ALT_WORD.findall(m.text.lower())[1:-1]
    return any(w in words for w in (*after, *before, *inside))


#: open question types asked of one finding by either of two names
_OF_EITHER = frozenset({"position", "size", "severity", "change"})
#: open question types that may leave their finding out ("Which lobe?", "How big?")
_ELLIPTIC = frozenset({"position", "size", "severity"})


def _answer_several(
    question: ParsedQuestion,
    report: ReportLabels,
    patterns: QuestionPatterns,
    lexicon: Lexicon | None,
) -> ReportAnswer:
    """A presence question about several findings: "or" is yes when any is present, no
    when none is, else uncertain; "and" is yes when all are, no when one is not. An open
    question about one finding by either of two names ("Where is the atelectasis or
    infiltrate?") is answered from the first the report names."""
    answers = [
        answer_from_report(
            dataclasses.replace(
                question,
                label=label,
                also=(),
                joined=None,
                kin=question.kin if label == question.label else None,
            ),
            report,
            patterns,
            lexicon,
        )
        for label in (question.label or "", *question.also)
    ]
    if question.open:
        return next((a for a in answers if a.status in ("positive", "uncertain")), answers[0])
    said = [str(a.answer) for a in answers]
    if question.joined == "and":
        answer = "no" if "no" in said else ("yes" if all(s == "yes" for s in said) else "uncertain")
    else:
        answer = "yes" if "yes" in said else ("uncertain" if "uncertain" in said else "no")
    status = {"yes": "positive", "uncertain": "uncertain"}.get(answer, "negative")
    evidence = [ev for a in answers for ev in a.evidence][:_MAX_SHOWN]
    return ReportAnswer(answer, True, status, None, evidence)


#: the most words between a comma and the reading of the placed finding before it
_READING_GAP = 3


def _place_of_sentence(
    question: ParsedQuestion, target: _Target, report: ReportLabels, patterns: QuestionPatterns
) -> _Target:
    """A finding with neither side nor place of its own, read after a comma as what a
    finding placed earlier in its sentence may be ("opacities in the left base, atelectasis
    versus infiltrate", "biapical opacities, possibly scarring"), or running straight into
    the placed finding it is said of (`_joined_placed`): that finding's side and place, for
    a question that asks where."""
    asks_where = question.type == "position" or any(
        q.kind in _PLACE_KINDS for q in question.qualifiers
    )
    if (
        not asks_where
        or target.status not in ("positive", "uncertain")
        or not target.deciding
        or target.finding.get("laterality")
        or target.finding.get("location")
    ):
        return target
    for m in target.deciding:
        if m.sentence_start is None:
            continue
        joined = _joined_placed(m, report, patterns)
        if joined is not None:
            place = {
                k: joined.attributes[k]
                for k in ("laterality", "location")
                if joined.attributes.get(k)
            }
            return dataclasses.replace(target, finding={**target.finding, **place})
        placed = [
            f
            for f in report.report_findings or ()
            if f.end <= m.start
            and (f.sentence_start == m.sentence_start or _before_semicolon(f, m.sentence_start))
            and f.status in ("positive", "uncertain")
            and f.kind == "finding"
            and (f.attributes.get("laterality") or f.attributes.get("location"))
        ]
        if not placed:
            continue
        f = max(placed, key=lambda x: x.end)
        if f.sentence_start == m.sentence_start:
            between = m.sentence[f.end - m.sentence_start : m.start - m.sentence_start]
        else:  # "streaky bibasilar opacities; the appearance XXXX subsegmental atelectasis"
            piece = m.sentence[: m.start - m.sentence_start]
            between = "" if "," in piece else "," + piece
        # the reading follows the comma closely ("..., possibly scarring", "..., atelectasis
        # versus infiltrate"), not a clause of its own after it
        if "," not in between or len(between.rsplit(",", 1)[1].split()) > _READING_GAP:
            continue
        place = {k: f.attributes[k] for k in ("laterality", "location") if f.attributes.get(k)}
        return dataclasses.replace(target, finding={**target.finding, **place})
    return target


def _worded_with_descriptor(
    concept: str, question: ParsedQuestion, report: ReportLabels, lexicon: Lexicon
) -> list[ReportFinding]:
    """The report's positive or hedged findings of another concept whose own words are the
    question's: a one-word phrase of `concept` with a word its describing qualifier accepts
    ("calcific density" read as a calcification, asked as a calcified density)."""
    accepts = {
        w for q in question.where if q.kind == "descriptor" for w in q.accepts if " " not in w
    }
    heads = {ph for ph in lexicon.concepts[concept].phrases if " " not in ph}
    if not accepts or not heads:
        return []
    return [
        f
        for f in report.report_findings or ()
        if f.status in ("positive", "uncertain")
        for words in (set(_WORD.findall(f.text.lower())),)
        if words & heads and words & accepts
    ]


def _joined_placed(
    m: Mention, report: ReportLabels, patterns: QuestionPatterns
) -> ReportFinding | None:
    """The placed finding that `m` runs straight into, as its describing word or joined by
    words of `joining_words` ("prominence of soft tissue density in the upper mediastinum",
    "left upper quadrant calcified focus"): what `m` is said of, so where it is."""
    if m.sentence_start is None:
        return None
    for f in report.report_findings or ():
        if (
            f.sentence_start != m.sentence_start
            or f.start < m.end
            or f.status not in ("positive", "uncertain")
            or not (f.attributes.get("laterality") or f.attributes.get("location"))
        ):
            continue
        between = m.sentence[m.end - m.sentence_start : f.start - m.sentence_start]
        if set(_WORD.findall(between.lower())) <= patterns.joining_words and not re.search(
            r"[^\w\s]", between
        ):
            return f
    return None


def _before_semicolon(f: ReportFinding, start: int) -> bool:
    """Whether finding `f` stands in the sentence piece that a semicolon ends right before
    the sentence at `start` ("bibasilar opacities; ... atelectasis" is one statement)."""
    if f.sentence_start is None:
        return False
    end = f.sentence_start + len(f.sentence)
    return f.sentence.rstrip().endswith(";") and 0 <= start - end <= 2


def _with_kin_words(target: _Target, lexicon: Lexicon) -> _Target:
    """The finding with the words of its concept's name and its broader concepts' names
    (`kin_words`): a site one of them names is the finding's ("degenerative spine" for a
    spondylosis)."""
    kin = {
        w
        for f in target.deciding
        if f.label in lexicon.concepts
        for c in (f.label, *lexicon.ancestors(f.label))
        for w in _WORD.findall(lexicon.concepts[c].name.lower())
    }
    if not kin:
        return target
    return dataclasses.replace(target, finding={**target.finding, "kin_words": frozenset(kin)})


def _with_findings_attributes(target: _Target, findings: Sequence[ReportFinding]) -> _Target:
    """A label's finding with the attributes only the findings reading gave it: those of
    the report's findings over the same words with the same status ("mass ..., increased
    in size" where the label's reading of the sentence stopped short). The label's own
    attributes stand."""
    same = [
        f
        for f in findings
        if f.status == target.status
        and any(f.start < m.end and m.start < f.end for m in target.deciding)
    ]
    if not same:
        return target
    # not a count: a finding named again in the impression is not a second one here
    extra = {k: v for k, v in _merged(same).items() if k not in target.finding and k != "count"}
    if not extra:
        return target
    return dataclasses.replace(target, finding={**target.finding, **extra})


_CHANGED = frozenset({"new", "increased", "decreased", "resolved", "improved", "worsened"})


def answer_study(
    question: ParsedQuestion, report: ReportLabels, patterns: QuestionPatterns | None = None
) -> ReportAnswer:
    """Answer a whole-study question (`type == "study"`) from a report read with findings.

    normal: yes when no abnormal finding is read (`ReportLabels.normal`); abnormal: the
    reverse; acute: yes when a label of the pattern file's `acute_labels` is positive,
    uncertain when one is only hedged; change: yes when a finding is new or changed, no
    when findings are called unchanged and none changed, else unknown; worse: yes when a
    finding is new or worse, no when the report compares and none is; better: yes when
    one improved and none is worse.
    """
    patterns = patterns or load_question_patterns()
    findings = report.report_findings or []
    abnormal = [f for f in findings if f.status != "negative" and is_abnormal(f.kind)]
    stated = [f for f in findings if f.kind == "normal" and f.status == "positive"]
    status = "absent" if report.normal is None else ("negative" if report.normal else "positive")

    def out(
        answer: AnswerValue, shown: Sequence[ReportFinding], known: bool = True
    ) -> ReportAnswer:
        evidence = [_finding_evidence(f) for f in shown[:_MAX_SHOWN]]
        return ReportAnswer(answer, known, status, None, evidence)

    asks = question.asks
    if report.normal is None:
        return out("unknown", [], False)
    if asks in ("change", "worse", "better") and not _compares(report, patterns):
        # "mild increased airspace opacity" in a report that compares with nothing: no change
        findings = [f for f in findings if not _descriptive_change(f, patterns)]
        abnormal = [f for f in abnormal if not _descriptive_change(f, patterns)]
    if asks in ("normal", "abnormal") and question.qualifiers:
        # "Is the left lung affected?": an abnormal finding there
        there = _abnormal_there(abnormal, question.qualifiers, patterns)
        found = bool(there)
        return out(_yes(found if asks == "abnormal" else not found), there)
    if asks in ("normal", "abnormal"):
        # how the film was taken ("patient is slightly rotated") says nothing of the patient;
        # the coders' `normal` counts it (their "technical quality" heading), a clinician not
        seen = [f for f in abnormal if f.kind != "technique"]
        # the reader's own "Normal chest exam." outweighs a minor finding read beside it (a
        # calcified granuloma), not a label's
        called_normal = [
            f
            for f in stated
            if " ".join(f.text.lower().split()).startswith(patterns.study_normal_statements)
            and _word_before(f) not in patterns.study_normal_not_after
        ]
        no_label = all(v not in ("positive", "uncertain") for v in report.labels.values())
        normal = bool(report.normal) or (no_label and (not seen or bool(called_normal)))
        return out(_yes(normal if asks == "normal" else not normal), stated if normal else seen)
    if asks == "acute":
        acute = [v for k, v in report.labels.items() if k in patterns.acute_labels]
        seen = [f for f in abnormal if f.kind == "finding"]
        said_none = [f for f in stated if f.label in patterns.no_acute_statements]
        # the reader's own "no acute process" outweighs a finding it may call chronic or
        # minor ("patchy basilar atelectasis"), not a pneumonia
        acute_now = [
            v
            for k, v in report.labels.items()
            if k in patterns.acute_labels and not (said_none and k in patterns.minor_acute_labels)
        ]
        if "positive" in acute_now:
            return out("yes", seen)
        if "uncertain" in acute and not said_none:
            return out("uncertain", seen)
        # a hedge ("could obscure a small nodule") under the reader's own "no acute disease"
        return out("no", said_none or stated)
    if asks == "change":
        said_same = [
            f
            for f in findings
            if f.concept in patterns.unchanged_statements and f.status == "positive"
        ]
        said_same += [f for f in findings if _denied_since_prior(f, patterns)]
        pool: Sequence[ReportFinding] = findings
        places = [q for q in question.qualifiers if q.kind != "change"]
        told = [q for q in question.qualifiers if q.kind == "change"]
        if places:
            # "Has the right base abnormality changed?": the abnormal findings there, as
            # before where the report calls the whole study so
            pool = _abnormal_there(abnormal, places, patterns)
            if not pool:
                return out("unknown", [], False)
        # "No new opacity": a new finding denied is no change
        changed = [
            f
            for f in pool
            if f.attributes.get("change") in _CHANGED
            and not (f.status == "negative" and f.attributes["change"] == "new")
        ]
        if changed and told:
            # "Is the left basal abnormality worse?": the change asked, else another
            asked = [f for f in changed if any(f.attributes["change"] in q.accepts for q in told)]
            return out("yes", asked) if asked else out("no", changed)
        if changed:
            return out("yes", changed)
        same = [f for f in pool if f.attributes.get("change") == "unchanged"]
        # a study statement that carries its own change is shown once
        same += [f for f in said_same if not any(f is g for g in same)]
        return out("no", same) if same else out("unknown", [], False)
    if asks == "list":
        # the abnormal findings by name, those stated before those hedged
        seen = _abnormal_there(abnormal, question.qualifiers, patterns)
        seen = sorted(seen, key=lambda f: f.status != "positive")
        names = [f.name if f.status == "positive" else f"possible {f.name}" for f in seen]
        names = list(dict.fromkeys(names))[:_MAX_SHOWN]
        return out(names, seen) if names else out("normal", stated)
    if asks == "quality":
        limits = _limiting(question, findings, patterns)
        return out("no", limits) if limits else out("yes", [])
    if asks == "views":
        named = {f.concept: f for f in findings if f.status == "positive"}
        for concept, count in patterns.view_counts.items():
            if concept in named:
                return out(count, [named[concept]])
        return out("unknown", [], False)
    if asks in ("lobes", "lungs", "bases", "levels", "ribs"):
        # the places the abnormal findings name: in the lungs, or on the spine for levels;
        # the positive ones, else the hedged ones ("density at the right base ... may
        # represent right lower lobe pneumonia": one lobe)
        if asks == "levels":
            seen = [f for f in abnormal if _on_spine(f, patterns)]
        elif asks == "ribs":
            seen = [f for f in abnormal if _ribs_of(f)]
        else:
            seen = [f for f in abnormal if f.kind == "finding"]
        for status_seen in ("positive", "uncertain"):
            these = [f for f in seen if f.status == status_seen]
            counted = _places_counted(asks, these, patterns, asked=question.text)
            if counted is not None:
                return out(counted, these)
        return out("unknown", seen, False)
    if asks in ("worse", "better"):
        compared = [f for f in findings if f.attributes.get("change")]
        if not compared:
            return out("unknown", [], False)
        worse = [f for f in compared if f.attributes["change"] in patterns.worse_changes]
        better = [f for f in compared if f.attributes["change"] in _CHANGED and f not in worse]
        if asks == "worse":
            return out("yes", worse) if worse else out("no", compared)
        return out("yes", better) if better and not worse else out("no", worse or compared)
    if asks in ("side", "place", "dominant"):
        # where the abnormal findings are (devices and post-operative changes are not
        # abnormalities here); the positive ones, else the hedged ones
        seen = _abnormal_there(abnormal, (), patterns)
        seen = [f for f in seen if f.status == "positive"] or seen
        if asks == "dominant":
            target = _findings_target(seen, "no abnormal finding is read")
            side_more = target.finding.get("laterality")
            if side_more not in ("left", "right"):
                side_more = _dominant_side(target, patterns)
            return out([str(side_more)], seen) if side_more else out("unknown", seen, False)
        where = _merged(seen)
        side = where.get("laterality")
        terms = [str(side)] if side else []
        if asks == "place":
            terms += [str(p) for p in where.get("location") or ()]  # type: ignore[attr-defined]
        return out(terms, seen) if terms else out("unknown", seen, False)
    return out("unknown", [], False)


def _denied_since_prior(f: ReportFinding, patterns: QuestionPatterns) -> bool:
    """Whether `f` says nothing is new since a prior study: a denied abnormality, or the
    reader's "no acute abnormality", dated against the prior ("No new acute abnormalities
    since the previous chest radiograph.")."""
    if f.concept not in patterns.unchanged_denials:
        return False
    if f.status != ("positive" if f.kind == "normal" else "negative"):
        return False
    sentence = " " + " ".join(re.sub(r"[^\w\s-]", " ", f.sentence.lower()).split()) + " "
    return any(d in sentence for d in patterns.unchanged_denial_dates)


def _abnormal_there(
    abnormal: Sequence[ReportFinding], places: Sequence[Qualifier], patterns: QuestionPatterns
) -> list[ReportFinding]:
    """The abnormal findings in the places asked about (every one when none is); devices,
    operations and technique are no abnormality here."""
    zones = patterns.zone_includes
    return [
        f
        for f in abnormal
        if f.kind not in ("device", "postop", "technique")
        and all(_check(q, f.attributes, zones) == "yes" for q in places)
    ]


_NEXT_WORD = re.compile(r"\s+([A-Za-z]+)\b")
_WORD = re.compile(r"\b[a-z][a-z-]*\b")  # "5th" is no word: "old healed right 5th rib"
# the words beside a finding keep a letter's level of the spine ("deformity of T9")
_NEAR_WORD = re.compile(r"\b[a-z][a-z0-9-]*\b")
#: words before and after a finding that may describe it ("old right rib fractures",
#: "nodule is calcified", "thoracic aorta is mildly tortuous and calcified")
_NEAR, _AFTER = 6, 14


def _word_before(m: Mention) -> str:
    """The word right before a mention in its sentence ("" at its start or without one)."""
    if m.sentence_start is None:
        return ""
    before = _WORD.findall(m.sentence[: m.start - m.sentence_start].lower())
    return before[-1] if before else ""


def _near_words(
    mentions: Iterable[Mention],
    denying: frozenset[str],
    patterns: QuestionPatterns | None = None,
) -> frozenset[str]:
    """The words of each mention, up to six before it and fourteen after it within its
    clause; with `patterns`, also the relative clause right after its clause's comma
    ("wires, several of which are interrupted": interrupted) unless a word denies it."""
    out: set[str] = set()
    for m in mentions:
        if m.sentence_start is None:  # a mention without its sentence: nothing beside it
            continue
        a, b = m.start - m.sentence_start, m.end - m.sentence_start
        before = _NEAR_WORD.findall(re.split(r"[,;:]", m.sentence[:a])[-1].lower())
        clauses = re.split(r"[,;:.]", m.sentence[b:])
        after = _NEAR_WORD.findall(clauses[0].lower())
        if (
            patterns is not None
            and len(clauses) > 1
            and re.match(r"\s*,", m.sentence[b:][len(clauses[0]) :])
        ):
            relative = _NEAR_WORD.findall(clauses[1].lower())
            if set(relative[:4]) & patterns.relative_words and not set(relative) & (
                denying | patterns.relative_denying
            ):
                after += relative
        # its predicate may come later ("nodule ... is unchanged and appears calcified")
        words = [*before[-_NEAR:], *_NEAR_WORD.findall(m.sentence[a:b].lower()), *after[:_AFTER]]
        # "not calcified" describes the finding as not calcified
        kept = [w for i, w in enumerate(words) if i == 0 or words[i - 1] not in denying]
        out.update(kept)
        # and each part of a hyphenated word ("T-spine", "fracture-dislocation")
        out.update(part for w in kept if "-" in w for part in w.split("-") if part)
    return frozenset(out)


def _spread(mentions: Iterable[Mention], patterns: QuestionPatterns) -> bool:
    """Whether a word of `spread_words` stands just beside a mention, in its noun phrase
    ("diffuse increased interstitial markings", "opacities diffusely")."""
    return _beside(mentions, patterns.spread_words)


def _beside(mentions: Iterable[Mention], beside: frozenset[str]) -> bool:
    """Whether one of the words stands just beside a mention, in its noun phrase: two
    words before it, its own, three after it in its clause."""
    for m in mentions:
        if m.sentence_start is None:
            continue
        a, b = m.start - m.sentence_start, m.end - m.sentence_start
        words = [
            *_WORD.findall(m.sentence[:a].lower())[-2:],
            *_WORD.findall(m.sentence[a:b].lower()),
            *_WORD.findall(re.split(r"[,;:.]", m.sentence[b:])[0].lower())[:3],
        ]
        if beside.intersection(words):
            return True
    return False


def _place_words(mentions: Iterable[Mention], parts: Collection[str] = ()) -> list[str]:
    """The report's own words for each place its location evidence names ("left base"); a
    zone with the part it is of after it (`parts`: "lower mediastinum", not "lower")."""
    return _evidence_words(mentions, "location", parts)


def _evidence_words(
    mentions: Iterable[Mention], attribute: str, parts: Collection[str] = ()
) -> list[str]:
    """The report's own words for each value of `attribute` its mentions' evidence gives,
    in order, once each, with the word after them where it is one of `parts`."""
    out: list[str] = []
    for m in mentions:
        if m.sentence_start is None:
            continue
        for ev in m.attribute_evidence:
            if ev.get("attribute") == attribute:
                a, b = int(ev["start"]) - m.sentence_start, int(ev["end"]) - m.sentence_start
                after = _NEXT_WORD.match(m.sentence, b) if parts and 0 <= a < b else None
                if after and after[1].lower() in parts:
                    b = after.end()
                words = " ".join(m.sentence[a:b].split()) if 0 <= a < b else ""
                if words:
                    out.append(words)
    return list(dict.fromkeys(out))


def _label_target(label: str, report: ReportLabels, keys: Iterable[str]) -> _Target:
    status = str(report.labels.get(label, "absent"))
    mentions = [m for m in report.mentions if m.label == label]
    shown = deciding_first(mentions, {label: report.labels.get(label, "absent")}, _MAX_SHOWN)
    shown.sort(key=lambda m: m.status != status)  # stable: the deciding status leads
    evidence = [ev for m in shown for ev in _mention_evidence(m, keys)]
    if len(shown) < len(mentions):
        left = len(mentions) - len(shown)
        evidence.append({"kind": "omitted", "count": left, "text": f"{left} more mentions"})
    if not evidence and status == "absent":
        evidence = [{"kind": "absent", "text": f"{label} is not mentioned in the report"}]
    deciding = [m for m in mentions if m.status == status]
    return _Target(status, report.findings.get(label, {}), evidence, deciding)


_STATUS_ORDER = ("positive", "uncertain", "negative")


def _side_named_alone(
    question: ParsedQuestion, target: _Target, label: str, report: ReportLabels
) -> _Target:
    """A question about one side ("Is there a right effusion?") where the deciding mentions
    reach that side only as "bilateral" or with no side, and others name it alone
    ("bilateral small effusions ... questionable small right effusion"): those decide; where
    the deciding ones are all on the other side, that side's negative mentions too."""
    sides = [str(q.value) for q in question.qualifiers if q.kind == "side"]
    if len(sides) != 1 or sides[0] not in ("left", "right"):
        return target
    side = sides[0]
    if any(m.attributes.get("laterality") == side for m in target.deciding):
        return target
    named = [
        m for m in report.mentions if m.label == label and m.attributes.get("laterality") == side
    ]
    own = [m for m in named if m.status != "negative"]
    other = "left" if side == "right" else "right"
    if not own and all(m.attributes.get("laterality") == other for m in target.deciding):
        # "Has the right effusion resolved?" over "no residual right effusion ... small left
        # effusion": that side's mentions rule it out
        own = named
    if not own:
        return target
    status = next(s for s in _STATUS_ORDER if any(m.status == s for m in own))
    deciding = [m for m in own if m.status == status]
    return dataclasses.replace(target, status=status, finding=_merged(deciding), deciding=deciding)


def _tip_of_parts(
    target: _Target,
    concept: str,
    report: ReportLabels,
    lexicon: Lexicon,
    patterns: QuestionPatterns,
) -> _Target:
    """A device's tip given to its parts ("pacemaker generator ... with leads in the right
    atrium"): the parts' tip, where the device has none of its own (`tips_of`)."""
    for part in patterns.tips_of.get(concept, ()):
        found = _concept_target(part, report, lexicon, patterns)
        tip = {k: found.finding[k] for k in ("tip", "tip_text", "tips") if found.finding.get(k)}
        if tip:
            return dataclasses.replace(
                target,
                finding={**target.finding, **tip},
                evidence=[*target.evidence, *found.evidence],
            )
    return target


def _concept_target(
    concept: str,
    report: ReportLabels,
    lexicon: Lexicon,
    patterns: QuestionPatterns,
    *,
    own_first: bool = False,
) -> _Target:
    """The report's findings of `concept` or a concept below it, as one finding.

    A concept named by a describing word and its parent ("healed rib fracture") is also
    found as its parent with a word of that description beside it ("old right rib
    fractures"), from the pattern file's descriptors. With `own_first`, the findings of
    the concepts that answer it (`answered_by`) count only where it has none of its own.
    """
    itself = {concept, *lexicon.descendants(concept)}
    wanted = set(itself)
    for other in patterns.answered_by.get(concept, ()):
        wanted.update((other, *lexicon.descendants(other)))
    found = _not_replaced(
        [f for f in report.report_findings or () if f.concept in wanted], patterns
    )
    if own_first and any(f.concept in itself and f.status != "negative" for f in found):
        # "Where's the calcified granuloma?" over a left granuloma and a right calcified
        # nodule: the granuloma's place, not both
        found = [f for f in found if f.concept in itself]
    if not found:
        found = _described_parent(concept, report, lexicon, patterns)
    if not found and lexicon.concepts[concept].kind in patterns.named_within_kinds:
        found = _named_within(itself, report, lexicon)
    name = lexicon.concepts[concept].name
    target = _findings_target(found, f"{name} is not mentioned in the report")
    deciding = target.deciding
    finding = dict(target.finding)
    if lexicon.concepts[concept].kind == "normal" and "laterality" not in finding:
        finding["laterality"] = "bilateral"  # "the lungs are clear": both of them
    # "Which part of the spine?" over degenerative thoracic spine: the words a narrower
    # concept's name adds say where ("thoracic"), or the report's own words beside it
    # ("thoracic spondylosis", "degenerative changes throughout the thoracic spine")
    asked = set(name.split())
    parts: list[str] = []
    for f in deciding:
        words = lexicon.concepts[f.label].name if f.label in lexicon.concepts else ""
        # in the report's order where it says them ("descending thoracic aorta")
        text = f.text.lower()
        own = " ".join(
            sorted(
                (
                    w
                    for w in dict.fromkeys([*words.split(), *text.split()])
                    if w not in asked and w in patterns.place_parts
                ),
                key=text.find,
            )
        )
        # not a word of the concept's own name ("aortic" of an aortic aneurysm)
        near = (_near_words([f], patterns.denying_words) - asked) & patterns.place_parts
        # each word beside it a term of its own, in the report's order ("lower thoracic or
        # upper lumbar vertebra": thoracic, lumbar)
        parts += [own] if own else sorted(near, key=(f.sentence or "").lower().find)
        if not own and not near:
            # "Where is the degenerative change?" over "degenerative changes of the spine":
            # the whole part a narrower concept's name adds, where nothing narrower is said
            parts += [w for w in words.split() if w not in asked and w in patterns.place_wholes]
    if any(parts):
        finding["parts"] = list(dict.fromkeys(p for p in parts if p))
    return dataclasses.replace(target, finding=finding)


def _read_together(
    concept: str, report: ReportLabels, lexicon: Lexicon, patterns: QuestionPatterns
) -> list[ReportFinding]:
    """The positive or hedged findings of the first concept of `read_together[concept]`
    (itself: a narrower one names its own kind, as an aortic calcification) whose sentence
    also reads a finding of one of the others, or one below it, that is not denied
    ("calcifications in the left base, old granulomatous disease": calcified granulomas
    there)."""
    first, *others = patterns.read_together.get(concept, ())
    beside = {k for o in others for k in (o, *lexicon.descendants(o))}
    findings = report.report_findings or ()
    sentences = {
        f.sentence_start
        for f in findings
        if f.concept in beside and f.status != "negative" and f.sentence_start is not None
    }
    return [
        f
        for f in findings
        if f.concept == first
        and f.status in ("positive", "uncertain")
        and f.sentence_start in sentences
    ]


def _not_replaced(found: list[ReportFinding], patterns: QuestionPatterns) -> list[ReportFinding]:
    """`found` less a finding a later one of them took the place of: one followed within
    its clause by a word of `replaced_words` ("has been exchanged for") and then by
    another of `found`."""
    if len(found) < 2 or not patterns.replaced_words:
        return found
    gone = []
    for f in found:
        if f.sentence_start is None:
            continue
        after = re.split(r"[;:.]", f.sentence[f.end - f.sentence_start :])[0].lower()
        words = " ".join(_NEAR_WORD.findall(after)[: _NEAR + 2])
        if any(re.search(rf"\b{re.escape(w)}\b", words) for w in patterns.replaced_words) and any(
            g.sentence_start == f.sentence_start and g.start > f.end for g in found
        ):
            gone.append(f)
    return [f for f in found if f not in gone] if len(gone) < len(found) else found


def _named_within(
    concepts: Collection[str], report: ReportLabels, lexicon: Lexicon
) -> list[ReportFinding]:
    """The findings of other concepts whose mention holds a phrase of one of `concepts`
    as its own words ("CABG clips", a finding of clips, names the CABG they come from)."""
    phrases = {p for c in concepts for p in lexicon.concepts[c].phrases}
    return [
        f
        for f in report.report_findings or ()
        if any(re.search(rf"\b{re.escape(p)}\b", f.text.lower()) for p in phrases)
    ]


def _holders_named(
    concept: str, report: ReportLabels, lexicon: Lexicon, patterns: QuestionPatterns
) -> list[ReportFinding]:
    """The report's findings, positive or hedged, that may hold `concept` unnamed: its
    broader concept named as such ("deformity" for a vertebral deformity), or a device
    whose parts it is (`tips_of`: a pacemaker for its leads)."""
    parent = lexicon.concepts[concept].parent
    devices = {d for d, parts in patterns.tips_of.items() if concept in parts}
    return [
        f
        for f in report.report_findings or ()
        if f.status in ("positive", "uncertain")
        and (
            (f.concept == parent and lexicon.concepts[parent].kind != "anatomy")
            or f.concept in devices
        )
    ]


def _broader_at_site(
    concept: str, report: ReportLabels, lexicon: Lexicon, patterns: QuestionPatterns
) -> list[ReportFinding]:
    """The report's findings, positive or hedged, of the concept's broader one (or of one
    below that) placed at the body part (`part_places`) the concept's name names: a
    "sternal fracture" for "old fractures of several ribs and the sternum"."""
    parent = lexicon.concepts[concept].parent
    if parent is None or lexicon.concepts[parent].kind == "anatomy":
        return []
    name = set(_WORD.findall(lexicon.concepts[concept].name.lower()))
    sites = {place for place, (_, words) in place_parts(patterns).items() if words & name}
    if not sites:
        return []
    return [
        f
        for f in report.report_findings or ()
        if f.status in ("positive", "uncertain")
        and f.concept in lexicon.concepts
        and (f.concept == parent or parent in lexicon.ancestors(f.concept))
        and sites & _place_values(f)
    ]


def _findings_target(found: Sequence[ReportFinding], absent: str) -> _Target:
    """The findings of a question's target as one: the strongest status found, the
    attributes of its findings merged, and their evidence (`absent` when none is found)."""
    status = next((s for s in _STATUS_ORDER if any(f.status == s for f in found)), "absent")
    deciding = [f for f in found if f.status == status]
    shown = sorted(found, key=lambda f: f.status != status)[:_MAX_SHOWN]
    evidence = [_finding_evidence(f) for f in shown] or [{"kind": "absent", "text": absent}]
    return _Target(status, _merged(deciding), evidence, deciding)


def _open_target(
    word: str, report: ReportLabels, lexicon: Lexicon, patterns: QuestionPatterns
) -> _Target:
    """A finding the question names by a general word ("Where is the lesion?"): the report's
    open findings of that word, and its concepts whose name or a phrase ends in it, with
    every concept below them ("lung lesion": a nodule, a mass). Where the report has none,
    those of a word of the same sight (`open_alike`: a fullness is a prominence)."""
    wanted = {OPEN_PREFIX + word}
    if not any(f.label == OPEN_PREFIX + word for f in report.report_findings or ()):
        wanted.update(OPEN_PREFIX + w for w in patterns.open_alike.get(word, ()))
    for concept in _concepts_headed(lexicon).get(word, ()):
        wanted.update((concept, *lexicon.descendants(concept)))
    found = [f for f in report.report_findings or () if f.label in wanted]
    return _findings_target(found, f"no {word} is mentioned in the report")


#: kinds of findings that are no abnormality of a part of the body
_NOT_OF_PART = frozenset({"normal", "anatomy", "view", "technique", "device", "postop"})
#: words after a finding in its clause that may name the part it is at ("irregularity of
#: the distal left clavicle")
_PART_AFTER = 6


def _part_target(
    part: str, report: ReportLabels, lexicon: Lexicon, patterns: QuestionPatterns
) -> _Target:
    """The report's abnormal findings at a part of the body, as one finding: those below its
    anatomy concept, those at its place (`location`) or one of its levels ("9th rib"), and
    those with a word of the part in their own phrase ("contour irregularity of the distal
    left clavicle"). Where none of
    them was given a side, the side word just before the part's word in that phrase."""
    concepts: set[str] = set()
    words: set[str] = set()
    entry = lexicon.concepts.get(part)
    if entry is not None and entry.kind == "anatomy":
        concepts = {part, *lexicon.descendants(part)}
        words = {
            w for ph in entry.phrases for w in ph.split() if w not in patterns.site_generic_words
        }
    place = place_parts(patterns).get(part)
    values = {part} if place is not None else set()
    if place is not None:
        words |= place[1]
    found: list[ReportFinding] = []
    for f in report.report_findings or ():
        if f.kind in _NOT_OF_PART:
            continue
        located = {str(p) for p in f.attributes.get("location") or ()}
        # a level of the part is at it ("the 9th rib ... may be the site of an old fracture")
        leveled = {w for v in f.attributes.get("levels") or () for w in _WORD.findall(str(v))}
        if (
            f.label in concepts
            or located & values
            or words.intersection(_phrase_words(f))
            or words & leveled
        ):
            found.append(f)
    name = entry.name if entry is not None else part
    target = _findings_target(found, f"nothing at the {name} is mentioned in the report")
    return _side_before_site(target, words, patterns)


def _side_before_site(
    target: _Target, words: Collection[str], patterns: QuestionPatterns
) -> _Target:
    """A target read with no side given the side word just before a word of its site in
    its findings' own phrases ("fracture-dislocation of the right shoulder"), where they
    all say the same."""
    if target.finding.get("laterality") or not target.deciding or not words:
        return target
    sides = {
        ph: str(e.value)
        for e in patterns.qualifiers["side"]
        for ph in e.phrases
        if " " not in ph and e.value in ("left", "right", "bilateral")
    }
    said = {
        sides[ws[j]]
        for m in target.deciding
        for ws in (_phrase_words(m),)
        for i, w in enumerate(ws)
        if w in words
        for j in range(max(0, i - 3), i)
        if ws[j] in sides
    }
    if len(said) != 1:
        return target
    return dataclasses.replace(target, finding={**target.finding, "laterality": said.pop()})


def _phrase_words(m: Mention, after: int = _PART_AFTER) -> list[str]:
    """The words of a mention's own phrase, in order: two before it in its list item and
    `after` after it in its clause ("irregularity of the distal left clavicle"); its own
    words without its sentence."""
    if m.sentence_start is None:
        return _WORD.findall(m.text.lower())
    a, b = m.start - m.sentence_start, m.end - m.sentence_start
    words_before = _WORD.findall(re.split(r"[,;:]|\band\b|\bor\b", m.sentence[:a])[-1].lower())
    words_after = _WORD.findall(re.split(r"[,;:.]|\band\b", m.sentence[b:])[0].lower())
    return [*words_before[-2:], *_WORD.findall(m.sentence[a:b].lower()), *words_after[:after]]


def _concepts_headed(lexicon: Lexicon) -> dict[str, frozenset[str]]:
    """Each last word of a concept's name or phrases (singular) -> those concepts, findings
    and bone findings only; built once per lexicon."""
    cached = _HEADED.get(id(lexicon))
    if cached is not None and cached[0] is lexicon:
        return cached[1]
    heads: dict[str, set[str]] = {}
    for cid, entry in lexicon.concepts.items():
        if entry.kind not in ("finding", "bone", "soft_tissue"):
            continue
        for phrase in (entry.name, *entry.phrases):
            words = phrase.lower().split()
            if words:
                heads.setdefault(singular(words[-1]), set()).add(cid)
    out = {k: frozenset(v) for k, v in heads.items()}
    if len(_HEADED) >= 8:
        _HEADED.clear()
    _HEADED[id(lexicon)] = (lexicon, out)
    return out


_HEADED: dict[int, tuple[Lexicon, dict[str, frozenset[str]]]] = {}


def _described_parent(
    concept: str,
    report: ReportLabels,
    lexicon: Lexicon,
    patterns: QuestionPatterns,
    said: frozenset[str] | None = None,
    by_site: bool = False,
) -> list[ReportFinding]:
    """The findings of a broader concept that carry the words `concept`'s name adds to the
    broader one's: a description ("healed" in "healed rib fracture", by a descriptor's
    report words) or a site ("shoulder" in "shoulder dislocation", by any word of that
    site's phrases: "dislocation of the right humeral head"). The nearest ancestor whose
    name leaves no word unexplained is read, with every concept below it. With `said` (the
    question's words), only the words of the name the question says need explaining. With
    `by_site`, a word nothing explains is passed over where a site word of the name is
    explained ("vertebral compression deformity" over "deformity of a lumbar vertebral
    body": where it is, not what kind it is)."""
    entry = lexicon.concepts[concept]
    sites = site_words(lexicon, patterns.site_generic_words)
    wanted = set(entry.name.split())
    if said is not None:
        wanted &= said
    for broader in lexicon.ancestors(concept):
        if lexicon.concepts[broader].kind == "anatomy":
            continue
        names = lexicon.concepts[broader].name.split()
        # words the broader name holds, whole or inside one of its words ("arthritis" in
        # "osteoarthritis")
        extra = {w for w in wanted if not any(w in n for n in names)}
        accepts: list[Collection[str]] = []
        unexplained = False
        for word in extra:
            match = next((d for d in patterns.qualifiers["descriptor"] if word in d.phrases), None)
            zone = next((z for z in patterns.qualifiers["zone"] if word in z.phrases), None)
            if match is not None:
                accepts.append(match.accepts)
            elif word in sites:
                accepts.append(sites[word])
            elif zone is not None:
                # "basal opacities": an opacity whose place lies in the zone
                accepts.append(patterns.zone_includes.get(str(zone.value), frozenset()))
            elif word in patterns.place_parts:
                # "degenerative thoracic spine": "thoracic" beside degenerative changes
                accepts.append({word})
            elif by_site:
                unexplained = True
            else:
                break  # a word nothing explains: not this concept
        else:
            if not accepts:
                return []
            if unexplained and not any(w in sites for w in extra):
                break  # only a site makes the broader finding the asked one
            kinds = {broader, *lexicon.descendants(broader)}
            return [
                f
                for f in report.report_findings or ()
                if f.concept in kinds
                for near in (_near_words([f], patterns.denying_words) | _place_values(f),)
                if all(any(w in near for w in words) for words in accepts)
            ]
    return []


def _placed_elsewhere(
    concept: str, report: ReportLabels, lexicon: Lexicon, patterns: QuestionPatterns
) -> bool:
    """Whether the report places a finding of a broader kind than `concept` while the name
    of `concept` adds a zone ("basal opacity" over "opacities in both upper lobes"): the
    asked finding is then not there, not merely unnamed (read after `_described_parent`
    found none in the zone)."""
    words = set(lexicon.concepts[concept].name.split())
    if not any(words.intersection(z.phrases) for z in patterns.qualifiers["zone"]):
        return False
    kinds: set[str] = set()
    for broader in lexicon.ancestors(concept):
        if lexicon.concepts[broader].kind != "anatomy":
            kinds |= {broader, *lexicon.descendants(broader)}
    return any(
        f.concept in kinds and f.status in ("positive", "uncertain") and _place_values(f)
        for f in report.report_findings or ()
    )


def _counts_lobes(text: str, patterns: QuestionPatterns) -> bool:
    """Whether a count question counts lobes ("How many lobes show collapse?"), not a
    finding in one ("How many nodules are in the left lower lobe?")."""
    words = _WORD.findall(text.lower())
    pairs = zip(words, words[1:], strict=False)
    return any(a == "many" and b in patterns.lobe_words for a, b in pairs)


def _place_unit(text: str, patterns: QuestionPatterns) -> str | None:
    """The places a count question counts: the unit of `place_units` whose words follow
    "many" ("How many lung bases are involved?": bases), else None ("How many nodules?")."""
    words = _WORD.findall(text.lower())
    longest = max((len(k) for k in patterns.place_units), default=0)
    for i, word in enumerate(words):
        if word != "many":
            continue
        for n in range(min(longest, len(words) - i - 1), 0, -1):
            unit = patterns.place_units.get(tuple(words[i + 1 : i + 1 + n]))
            if unit is not None:
                return unit
    return None


def _sides(mentions: Iterable[Mention]) -> set[str]:
    """The sides the mentions name, bilateral as both."""
    out: set[str] = set()
    for m in mentions:
        side = m.attributes.get("laterality")
        out |= {"left", "right"} if side == "bilateral" else {str(side)} if side else set()
    return out


#: a zone called a lobe, on each side ("bilateral lower lobe opacities")
_ZONE_LOBES = {
    ("upper", "right"): "right upper lobe",
    ("upper", "left"): "left upper lobe",
    ("middle", "right"): "right middle lobe",
    ("middle", "left"): "lingula",
    ("lower", "right"): "right lower lobe",
    ("lower", "left"): "left lower lobe",
}


def _lobes_named(mentions: Sequence[Mention]) -> set[str]:
    """The lobes the mentions name: "right upper lobe", and a zone the report calls a lobe
    once on each of its sides ("bilateral lower lobe opacities": both lower lobes; "lower
    lobes" with no side: both)."""
    lobes = {p for m in mentions for p in _place_values(m) if _is_lobe(p)}
    for m in mentions:
        for ev in m.attribute_evidence:
            zone = ev.get("value")
            if ev.get("attribute") != "location" or m.sentence_start is None:
                continue
            a, b = int(ev["start"]) - m.sentence_start, int(ev["end"]) - m.sentence_start
            words = m.sentence[a:b].lower().split() if 0 <= a < b else []
            if not any(w in ("lobe", "lobes") for w in words):
                # "right upper and right middle lobes": the zone shares the lobe after it
                words = [*words, *_joined_to_lobe(m.sentence[b:])]
                if not words or words[-1] not in ("lobe", "lobes"):
                    continue
            before = _WORD.findall(m.sentence[:a].lower())[-1:]
            said = {w for w in [*before, *words] if w in ("left", "right")}
            sides = said or _sides([m]) or ({"left", "right"} if "lobes" in words else set())
            lobes |= {
                _ZONE_LOBES[(str(zone), side)] for side in sides if (zone, side) in _ZONE_LOBES
            }
    return lobes


#: the words between a zone and the lobe it shares ("right middle and right lower lobe")
_LOBE_JOINED = frozenset({"and", "or", "right", "left", "upper", "middle", "lower"})


def _joined_to_lobe(after: str) -> list[str]:
    """The words after a zone that join it to the lobe named next, whose noun it shares
    ("and right lower lobe" after "middle" in "right middle and right lower lobe
    opacification"), ending with that noun; [] where none follows."""
    words = _WORD.findall(after.lower())[:6]
    for i, w in enumerate(words):
        if w in ("lobe", "lobes"):
            return [w] if i == 0 or words[0] in ("and", "or") else []
        if w not in _LOBE_JOINED:
            return []
    return []


def _part_counts(
    mentions: Sequence[Mention], part: str, patterns: QuestionPatterns
) -> list[int | str]:
    """How many vertebrae each place of the spine's `part` the mentions name holds, by the
    words around that place in the report ("a single upper lumbar vertebral body": 1,
    "two thoracic vertebrae": 2, "lumbar vertebral bodies": multiple); [] where no mention
    names a place of several parts, one of them `part` (a mention on one part alone is
    counted as the levels are)."""
    out: list[int | str] = []
    for m in mentions:
        places = [str(p) for p in _place_values(m)]
        parts = {w for p in places for w in p.split() if w in patterns.spine_parts}
        if part not in parts or len(parts) < 2 or m.sentence_start is None:
            continue
        for ev in m.attribute_evidence:
            if ev.get("attribute") != "location" or part not in str(ev.get("value")).split():
                continue
            a, b = int(ev["start"]) - m.sentence_start, int(ev["end"]) - m.sentence_start
            before = _WORD.findall(re.split(r"[,;:]|\band\b", m.sentence[:a])[-1].lower())
            after = _WORD.findall(re.split(r"[,;:.]|\band\b", m.sentence[b:])[0].lower())
            # the place's own zone words ("upper") stand between a number and the part
            before = [w for w in before if w not in ("upper", "mid", "middle", "lower")][-1:]
            said = [_number(w, patterns.number_words) for w in before]
            if said and said[0] is not None:
                out.append(int(said[0]))
            elif before and before[0] in patterns.single_words:
                out.append(1)
            else:
                noun = " ".join([*m.sentence[a:b].lower().split(), *after[:2]])
                out.append("multiple" if _plural(noun) else 1)
    return out


def _ribs_of(m: Mention) -> list[str]:
    """The ribs a mention is placed on: its rib levels, else those its own phrase names
    after it ("irregularity of the 7th posterior right rib"), not a later clause's."""
    ribs = [str(v) for v in m.attributes.get("levels") or () if str(v).endswith(" rib")]
    if ribs or m.sentence_start is None:
        return ribs
    after = re.split(r"[,;:.]|\bwith\b|\band\b", m.sentence[m.end - m.sentence_start :])[0]
    return [level for level, _, _ in _level_finder().spans(after) if level.endswith(" rib")]


@functools.cache
def _level_finder() -> LevelFinder:
    return load_level_finder()


def _sides_left_hanging(mentions: Iterable[Mention]) -> set[str]:
    """The sides a mention's clause names right before "and" with no noun of their own,
    sharing the mention's place ("right" in "increase in right and decrease in left basilar
    atelectasis"), the mention itself sided."""
    out: set[str] = set()
    for m in mentions:
        if m.sentence_start is None or m.attributes.get("laterality") not in ("left", "right"):
            continue
        clause = re.split(r"[,;:]", m.sentence[: m.start - m.sentence_start])[-1]
        words = _WORD.findall(clause.lower())
        out |= {
            w
            for w, nxt in zip(words, words[1:], strict=False)
            if w in ("left", "right") and nxt in ("and", "or")
        }
    return out


def _places_counted(
    unit: str,
    mentions: Sequence[Mention],
    patterns: QuestionPatterns,
    label: str | None = None,
    asked: str = "",
) -> int | str | None:
    """How many places of `unit` (lobes, lungs, bases, levels) the mentions occupy, or
    `multiple` where the report spreads them without a number; None where it does not say.
    Levels asked of one part of the spine (`asked`, the question: "How many lumbar
    vertebrae ...?") are that part's."""
    if not mentions:
        return None
    if unit == "lobes":
        lobes = _lobes_named(mentions)
        # "bibasilar airspace disease": a base is its side's lower lobe, on a side where no
        # lobe is named ("right basilar opacity ... right middle lobe pneumonia": one)
        sided = {"left" if lobe == "lingula" else lobe.split()[0] for lobe in lobes}
        lower = patterns.zone_includes.get("lower", frozenset())
        basal = [m for m in mentions if _place_values(m) & lower]
        lobes |= {
            _ZONE_LOBES[("lower", s)] for s in _sides(basal) - sided if ("lower", s) in _ZONE_LOBES
        }
        return len(lobes) or None
    if unit in ("lungs", "pairs"):
        sides = _sides(mentions) | _sides_left_hanging(mentions)
        if not sides and _placed_in_plural(mentions, patterns):
            return 2  # "degenerative changes of the acromioclavicular joints": both
        return len(sides) or None
    if unit == "bases":
        lower = patterns.zone_includes.get("lower", frozenset())
        basal = [m for m in mentions if _place_values(m) & lower]
        return len(_sides(basal) | _sides_left_hanging(basal)) or None
    if unit == "ribs":
        # "How many ribs are abnormal?": the ribs numbered, by side
        ribs = {(m.attributes.get("laterality"), rib) for m in mentions for rib in _ribs_of(m)}
        return len(ribs) or None
    if unit == "places":
        # "In how many places are there clips?" over clips "over the left lung apex, as well
        # as over the right upper quadrant": the places named, one named twice (a zone and
        # the lobe it is in) once
        named = [(None, None, frozenset({p})) for m in mentions for p in _place_values(m)]
        return _distinct(named) if named else None
    part = next((w for w in _WORD.findall(asked.lower()) if w in patterns.spine_parts), None)
    levels = {
        str(v)
        for m in mentions
        for v in m.attributes.get("levels") or ()
        if not str(v).endswith(" rib")
    }
    if part is not None:
        # "How many lumbar vertebrae are fractured?": that part's levels and places only
        letter = patterns.spine_parts[part].upper()
        levels = {v for v in levels if v.upper().startswith(letter)}
        on_part = _part_counts(mentions, part, patterns)
        if not levels and on_part:
            return "multiple" if "multiple" in on_part else sum(int(n) for n in on_part)
    if levels:
        return len(levels)
    near = _near_words(mentions, patterns.denying_words)
    if any(all(w in near for w in words) for words in patterns.multiple_places_words):
        return "multiple"  # "multilevel degenerative changes"
    count = stated_count(mentions, PLURAL_RULE)
    if count is not None:
        return count
    if any(_plural(m.text) for m in mentions):
        return "multiple"  # "compression deformities"
    if _concept_id(label or "") in patterns.uncounted or all(
        m.label in patterns.uncounted for m in mentions
    ):
        return None  # "degenerative changes of the thoracic spine": how many levels unsaid
    return 1


def _joined_places(mentions: Sequence[Mention]) -> int | None:
    """How many places joined by "and" stand before a singular finding's noun, in its own
    noun phrase ("left hilar and medial left base granuloma": two); None where fewer than
    two, or where a mention is plural."""
    best = 0
    for m in mentions:
        if m.sentence_start is None or _plural(m.text):
            return None
        a = m.start - m.sentence_start
        spans = sorted(
            (int(ev["start"]) - m.sentence_start, int(ev["end"]) - m.sentence_start)
            for ev in m.attribute_evidence
            if ev.get("attribute") == "location"
        )
        if len(spans) < 2 or not all(0 <= e <= a for _, e in spans):
            continue
        gaps = [_WORD.findall(m.sentence[e:b].lower()) for (_, e), (b, _) in pairwise(spans)]
        tail = _WORD.findall(m.sentence[spans[-1][1] : a].lower())
        # each gap a joiner with at most a side or a part word; nothing but the noun after
        if all("and" in g and len(g) <= 3 for g in gaps) and not tail:
            best = max(best, len(spans))
    return best or None


def _chambers_named(mentions: Iterable[Mention]) -> int | None:
    """How many landmarks a device's own words name joined before its noun ("right atrial
    and right ventricular leads": two), the tip rules' landmarks; None where fewer than two."""
    finder = load_tip_finder()
    for m in mentions:
        if m.sentence_start is None:
            continue
        a, b = m.start - m.sentence_start, m.end - m.sentence_start
        clause = len(re.split(r"[,;:]", m.sentence[:a])[-1])
        tip = finder.find(m.sentence[:b], a - clause)
        # the landmarks run into the device's own words, not a place of the clause before it
        if tip is not None and len(tip.names) > 1 and a < tip.end <= b:
            return len(tip.names)
    return None


def _placed_in_plural(mentions: Iterable[Mention], patterns: QuestionPatterns) -> bool:
    """Whether a mention's place, or its own words, is written with one of `paired_plurals`
    ("degenerative changes of the acromioclavicular joints", "bihilar prominence",
    "flattening of the hemidiaphragms"), the words as the report gives them, and not as one
    of them (`one_of_pair`: "a nodule within one of the lung bases")."""
    plurals = patterns.paired_plurals
    for m in mentions:
        spans = [(m.start, m.end)]
        spans += [
            (int(ev["start"]), int(ev["end"]))
            for ev in m.attribute_evidence
            if ev.get("attribute") == "location"
        ]
        for start, end in spans:
            if m.sentence_start is None:
                words, before = m.text.lower(), ""
            else:
                a, b = start - m.sentence_start, end - m.sentence_start
                if not 0 <= a < b:
                    continue
                words, before = m.sentence[a:b].lower(), m.sentence[:a].lower()
            for hit in _WORD.finditer(words):
                if hit[0] in plurals and not _ends_with_one_of(
                    before + words[: hit.start()], patterns.one_of_pair
                ):
                    return True
    return False


def _ends_with_one_of(text: str, phrases: Collection[str]) -> bool:
    """Whether one of `phrases` is among the last words of `text` ("one of the lung")."""
    tail = f" {' '.join(_WORD.findall(text)[-_ONE_OF_WORDS:])} "
    return any(f" {ph} " in tail for ph in phrases)


#: words before a paired plural that may pick one of the pair ("one of the lung bases")
_ONE_OF_WORDS = 4


def _on_spine(f: ReportFinding, patterns: QuestionPatterns) -> bool:
    """Whether a finding lies on the spine: a vertebra numbered or a place of the spine."""
    if any(not str(v).endswith(" rib") for v in f.attributes.get("levels") or ()):
        return True
    return any(w in patterns.spine_place_words for p in _place_values(f) for w in str(p).split())


def _is_lobe(place: str) -> bool:
    return place.endswith(" lobe") or place == "lingula"


def _place_values(f: Mention) -> frozenset[str]:
    """The finding's places as its attributes give them ("basilar", "right lower lobe")."""
    return frozenset(str(p) for p in f.attributes.get("location") or ())


def _finding_evidence(f: ReportFinding) -> dict[str, object]:
    return {
        "kind": "finding",
        "concept": f.concept,
        "text": f.text,
        "start": f.start,
        "end": f.end,
        "status": f.status,
        "rule": f.rule or "positive.plain",
    }


def _count_by_place(findings: Sequence[Mention]) -> int | None:
    """How many there are where the report counts them place by place ("Three nodules in
    the left lower lobe ... Another nodule near the right hilum": four): the sum over the
    distinct places (a side and a lobe or zone) of each place's count; None when fewer than
    two places are named or one place says only "multiple". A mention without a place of
    its own ("multiple nodules in both lungs") is one of the others."""
    groups: list[tuple[str, set[str], set[float], list[Mention]]] = []  # side, places, sizes
    for f in findings:
        side, places = f.attributes.get("laterality"), f.attributes.get("location")
        if side not in ("left", "right") or not places:
            continue
        where = {str(p) for p in places}
        size = f.attributes.get("size_mm")
        sizes = {float(size)} if isinstance(size, int | float) else set()
        # one place on one side, or one size on one side, is one finding however the other
        # is put ("left lung base" in the findings, "left lower lobe" in the impression)
        same = next(
            (g for g in groups if g[0] == side and (_places_agree(g[1], where) or g[2] & sizes)),
            None,
        )
        if same is None:
            groups.append((str(side), where, sizes, [f]))
        else:
            same[1].update(where)
            same[2].update(sizes)
            same[3].append(f)
    if len(groups) < 2:
        return None
    total = 0
    for *_, members in groups:
        count = stated_count(members, PLURAL_RULE)
        if count is None and any(_plural(m.text) for m in members):
            return None  # "left hilar granulomas": more than one there, how many unsaid
        if not isinstance(count, int) and count is not None:
            return None
        total += count or 1
    return total


def _distinct(described: Sequence[tuple[object, object, frozenset[str]]]) -> int:
    """How many findings one concept's mentions describe, by side, size and place: a
    mention that adds a size or a narrower place ("nodular opacity in the left upper lung
    measuring 7 mm" ... "nodular opacity in the left upper lung"; "nodule in the right upper
    lung" ... "right upper lobe nodule") is the same one; at least one."""
    kept: list[tuple[object, object, frozenset[str]]] = []
    for side, size, places in described:
        if side is None and size is None and not places:
            continue
        for i, (k_side, k_size, k_places) in enumerate(kept):
            if (
                (side is None or k_side is None or side == k_side)
                and (size is None or k_size is None or size == k_size)
                and _places_agree(places, k_places)
            ):
                kept[i] = (k_side or side, k_size or size, k_places | places)
                break
        else:
            kept.append((side, size, places))
    return max(1, len(kept))


def _places_agree(a: Collection[str], b: Collection[str]) -> bool:
    """Whether two mentions' places may be one place: either is unsaid, they share one, or
    one's word is in the other's name ("upper" and "right upper lobe")."""
    if not a or not b or not set(a).isdisjoint(b):
        return True
    words_a = {w for p in a for w in p.split()}
    words_b = {w for p in b for w in p.split()}
    return any(p in words_b for p in a) or any(p in words_a for p in b)


def _exchanged(m: Mention, others: Sequence[Mention], patterns: QuestionPatterns) -> bool:
    """Whether a mention is the thing its sentence says was exchanged for another mention
    after it (`exchange_words`: "the right catheter has been exchanged for a left central
    venous catheter"), so no longer there; or one that names the exchange itself, right
    before one of `exchange_nouns` ("interval central catheter exchange"), where others are
    counted."""
    if m.sentence_start is None:
        return False
    following = _WORD.findall(m.sentence[m.end - m.sentence_start :].lower())[:1]
    if patterns.exchange_nouns.intersection(following) and len(others) > 1:
        return True  # "interval central catheter exchange": the exchange, not one more
    for o in others:
        if o is m or o.sentence_start != m.sentence_start or o.start <= m.end:
            continue
        gap = " ".join(
            _WORD.findall(m.sentence[m.end - m.sentence_start : o.start - o.sentence_start].lower())
        )
        if len(gap.split()) <= 12 and any(
            re.search(rf"\b{re.escape(w)}\b", gap) for w in patterns.exchange_words
        ):
            return True
    return False


def _merged(findings: Sequence[Mention]) -> dict[str, object]:
    """The attributes of several mentions of one concept, as one finding's."""
    out: dict[str, object] = {}
    sides = {str(f.attributes["laterality"]) for f in findings if f.attributes.get("laterality")}
    if sides:
        out["laterality"] = sides.pop() if len(sides) == 1 else "bilateral"  # both sides
    places = [str(p) for f in findings for p in f.attributes.get("location") or ()]
    if places:
        out["location"] = list(dict.fromkeys(places))
    sizes = [float(f.attributes["size_mm"]) for f in findings if "size_mm" in f.attributes]
    if sizes:
        out["size_mm"] = max(sizes)
    for key in (
        "severity", "change", "tip", "tip_text", "tip_distance_mm", "tip_distance_range_mm",
        "tips",
    ):  # fmt: skip
        value = next((f.attributes[key] for f in findings if f.attributes.get(key)), None)
        if value is not None:
            out[key] = value
    count = stated_count(findings, PLURAL_RULE)
    if count is None and len(findings) > 1:
        # findings named one by one ("a 17 mm nodule on the left ... a 10 mm nodule on the
        # right", "a PICC ... an NG tube"): per concept, as many as differ in side, place or
        # size; a repeat in the impression is the same finding
        total = _described_count(findings)
        count = total if total > 1 else None
        if count is not None and any(_plural(f.text) for f in findings):
            # "a 5 mm granuloma and left hilar granulomas": more than two, how many unsaid;
            # a plural that only sums up those named one by one ("a nodule at the right
            # apex ... a right lower lobe nodule ... right lung nodules") adds none
            single = [f for f in findings if not _plural(f.text)]
            if _described_count(single) < 2 or _described_count(single) != total:
                count = "multiple"
    levels = list(dict.fromkeys(str(v) for f in findings for v in f.attributes.get("levels") or ()))
    if levels:
        out["levels"] = levels
        if count is None or count == "multiple":
            count = len(levels)  # "fractures of the 5th through 9th ribs": five
    if count is not None:
        out["count"] = count
    return out


def superlative_place(
    question: ParsedQuestion, answer: ReportAnswer, text: str, patterns: QuestionPatterns
) -> ReportAnswer:
    """The place of the one a report calls the largest or the smaller ("Where is the largest
    nodule?" over "... nodules; the largest in the left base"), for an open question that
    asks it of a finding the report holds: the place after the report's word of the
    same direction, in a sentence of the answer's evidence or the one right after it; else
    `answer` as it is."""
    if (
        question.type != "position"
        or not question.open
        or question.asks not in ("place", "side", "dominant")
        # "Which effusion is larger?" keeps the side the report says is worse
        or (question.asks == "dominant" and answer.answer != "unknown")
        or answer.status not in ("positive", "uncertain")
        or not (isinstance(answer.answer, list) or answer.answer == "unknown")
    ):
        return answer
    asked = set(_WORD.findall(question.text.lower()))
    directions = [d for d, words in patterns.superlatives.items() if words & asked]
    if len(directions) != 1:
        return answer
    starts = sorted(
        int(str(e["start"])) for e in answer.evidence if "start" in e and "attribute" not in e
    )
    if not starts:
        return answer
    lowered = text.lower()
    bounds = [0, *(m.end() for m in _SENTENCE_END.finditer(lowered)), len(lowered)]
    spans = {
        (bounds[i], bounds[min(i + 2, len(bounds) - 1)])
        for start in starts
        for i in range(len(bounds) - 1)
        if bounds[i] <= start < bounds[i + 1]
    }
    pattern = _superlative_pattern(patterns, directions[0])
    for a, b in sorted(spans):
        found = pattern.search(lowered, a, b)
        if found:
            place = " ".join(found.group("place").split())
            if question.asks in ("side", "dominant"):
                side = next((w for w in place.split() if w in ("left", "right")), None)
                if side is None:
                    return answer
                place = side
            return dataclasses.replace(answer, answer=[place], known=True)
    return answer


_SENTENCE_END = re.compile(r"[.!?](?=\s)|\n")


def _superlative_pattern(patterns: QuestionPatterns, direction: str) -> re.Pattern[str]:
    """A report's word of `direction` ("largest") and the place after it ("in the left
    base"), built once per pattern file and direction."""
    key = (id(patterns), direction)
    cached = _SUPERLATIVE.get(key)
    if cached is not None and cached[0] is patterns:
        return cached[1]
    phrases = {
        ph
        for term in load_attribute_rules().terms
        if any(k in ("location", "laterality") for k, _ in term.sets)
        for ph in term.phrases
        if len(ph) > 2
    }
    place = "|".join(re.escape(ph) for ph in sorted(phrases, key=len, reverse=True))
    words = "|".join(re.escape(w) for w in sorted(patterns.superlatives[direction]))
    compiled = re.compile(
        rf"\b(?:{words})\b(?:\s+[a-z]+){{0,5}}?\s+(?:in|within|at|over|overlying|involving)"
        rf"\s+(?:the\s+)?(?P<place>(?:{place})(?:\s+(?:lung\s+)?(?:{place})){{0,2}})\b"
    )
    if len(_SUPERLATIVE) >= 8:
        _SUPERLATIVE.clear()
    _SUPERLATIVE[key] = (patterns, compiled)
    return compiled


_SUPERLATIVE: dict[tuple[int, str], tuple[QuestionPatterns, re.Pattern[str]]] = {}


def _asks_where_it_was(
    question: ParsedQuestion, target: _Target, patterns: QuestionPatterns
) -> bool:
    """Whether an open question in the past tense asks where a finding was that the
    report says is gone ("Which side was the PICC on?" over "the right PICC has been
    removed", "Where was the nodule?" over "the nodule is not seen on today's study"): every
    deciding mention is read as gone and names a side or place."""
    return (
        question.type == "position"
        and target.status == "negative"
        and bool(target.deciding)
        and bool(patterns.past_words & set(_WORD.findall(question.text.lower())))
        and all(
            m.rule in patterns.gone_rules or m.attributes.get("change") in patterns.gone_changes
            for m in target.deciding
        )
        and bool(target.finding.get("laterality") or target.finding.get("location"))
    )


def _described_count(findings: Sequence[Mention]) -> int:
    """How many findings mentions describe, per concept, as differ in side, place or size
    (`_distinct`); 0 for none."""
    described: dict[str, list[tuple[object, object, frozenset[str]]]] = {}
    for f in findings:
        a = f.attributes
        where = frozenset(str(p) for p in a.get("location") or ())
        described.setdefault(f.label, []).append((a.get("laterality"), a.get("size_mm"), where))
    return sum(_distinct(kinds) for kinds in described.values())


def _answer(
    question: ParsedQuestion, target: _Target, patterns: QuestionPatterns, device: bool = False
) -> ReportAnswer:
    if question.type == "count":
        kept = [m for m in target.deciding if not _exchanged(m, target.deciding, patterns)]
        if 0 < len(kept) < len(target.deciding):
            # "the right catheter has been exchanged for a left one": one there now
            target = dataclasses.replace(target, finding=_merged(kept), deciding=kept)
    status, finding, evidence = target.status, target.finding, target.evidence
    side = finding.get("laterality")
    lat = str(side) if side else None
    if (
        lat is None
        and question.label in patterns.one_per_side
        and any(_plural(m.text) for m in target.deciding if m.status == status)
    ):
        lat = "bilateral"  # "small volume effusions": one in each pleural space

    def out(answer: AnswerValue, known: bool = True) -> ReportAnswer:
        return ReportAnswer(answer, known, status, lat, evidence)

    qtype = question.type
    if qtype == "presence" and not question.qualifiers:
        if status == "absent" and (
            DENIED_NORMAL_RULE in question.rules
            or _concept_id(question.label or "") in patterns.unruled_by_silence
        ):
            # "Any acute bony findings?" over a report that says nothing of the bones: its
            # findings may still be there; a cancer a report does not name is not ruled out
            return out("unknown", False)
        if status == "positive":
            ans = "yes"
        elif status == "uncertain":
            return out("uncertain")
        else:
            ans = "no"
        if question.negated:
            ans = "no" if ans == "yes" else "yes"
        return out(ans)
    if question.open:
        if _asks_where_it_was(question, target, patterns):
            # "Which side was the PICC on?" over "the right PICC has been removed": where
            # the finding the report says is gone was
            status = "positive"
        if status in ("negative", "absent") and qtype != "change":
            if qtype == "count":
                return out(0)
            if (
                finding.get("stated_normal")
                and qtype in ("size", "severity")
                # "What is the cardiothoracic ratio?", "How wide is the heart?": a normal
                # heart gives no number
                and question.asks != "measure"
            ):
                return out("normal")
            return out("unknown", False)
        if qtype == "position" and question.asks == "dominant":
            side_more = lat if lat in ("left", "right") else _dominant_side(target, patterns)
            return out([side_more]) if side_more else out("unknown", False)
        if qtype == "position" and question.asks == "level" and finding.get("levels"):
            # "Which rib is fractured?": the side, then each rib or vertebra named
            return out([*([lat] if lat else []), *map(str, finding["levels"])])  # type: ignore[call-overload]
        if (
            qtype == "position"
            and finding.get("tip")
            and (
                question.asks == "tip"
                or (
                    question.asks == "place"
                    and not finding.get("location")
                    and not patterns.insertion_words & set(_WORD.findall(question.text.lower()))
                )
            )
        ):
            # "Where are the pacemaker leads?": a line, tube or lead is where it ends (not
            # "Where was the line inserted?")
            # the report's words first ("upper SVC"), then the landmark's name
            # without the approximation a distance was given with ("approximately 4.7 cm
            # above the carina"): the answer is the distance
            tip_words = _APPROXIMATELY.sub("", str(finding.get("tip_text") or ""))
            words = [tip_words, str(finding["tip"])]
            if finding.get("tips"):
                # "leads in the right atrium and another in the right ventricle": each landmark
                words = [str(t) for t in finding["tips"]]  # type: ignore[attr-defined]
            return out(list(dict.fromkeys(w for w in words if w)))
        if (
            qtype == "position"
            and device
            and question.asks == "tip"
            and patterns.tip_words & set(_WORD.findall(question.text.lower()))
        ):
            # "Where's the tip of the line?" over a line whose tip the report does not place:
            # where the line runs is not where it ends (a nodule's "tip" is its place)
            return out("unknown", False)
        if qtype == "position":
            asked = {str(q.value) for q in question.where if q.kind == "side"}
            if lat == "bilateral" and len(asked) == 1 and asked <= {"left", "right"}:
                lat = asked.pop()  # "Where is the scarring in the left lung?": the left's
            if (
                lat is None
                and status in ("positive", "uncertain")
                and _placed_in_plural([m for m in target.deciding if m.status == status], patterns)
            ):
                # "degenerative changes of the acromioclavicular joints": both of the pair
                lat = "bilateral"
            terms: list[str] = [lat] if lat else []
            if question.asks != "side":
                terms += [str(p) for p in finding.get("location") or ()]  # type: ignore[attr-defined]
                # a part the finding's own words name where a place was read too
                # ("calcified mediastinal and hilar lymph nodes", read as hilar): one no
                # term says
                said_words = {w for t in terms for w in _WORD.findall(t.lower())}
                own_words = {w for m in target.deciding for w in _WORD.findall(m.text.lower())}
                terms += [
                    str(p)
                    for p in finding.get("parts") or ()  # type: ignore[attr-defined]
                    for ws in (set(_WORD.findall(str(p))),)
                    if not finding.get("location") or (ws <= own_words and not ws <= said_words)
                ]
                # then the report's own words for them ("left base" for "basilar")
                said = _place_words(target.deciding, patterns.place_parts)
                terms += [w for w in said if w.lower() not in {t.lower() for t in terms}]
            if (
                not terms
                and status in ("positive", "uncertain")
                and _spread(target.deciding, patterns)
            ):
                # "mild diffuse interstitial prominence": both lungs, all over
                terms = ["bilateral"] if question.asks == "side" else ["diffuse", "bilateral"]
            return out(terms, True) if terms else out("unknown", False)
        if qtype == "size":
            if finding.get("size_mm") is not None:
                return out(float(finding["size_mm"]))  # type: ignore[arg-type]
            if finding.get("tip_distance_mm") is not None:
                # "How far above the carina is the ET tube tip?"
                return out(float(finding["tip_distance_mm"]))  # type: ignore[arg-type]
            span = finding.get("tip_distance_range_mm")
            if isinstance(span, list) and len(span) == 2:
                # "tip 5-6 cm above the carina": the range, in the unit asked (mm by default)
                name = question.unit if question.unit in _MM_PER_UNIT else "mm"
                low, high = (float(v) / _MM_PER_UNIT[name] for v in span)
                return out(f"{low:g}-{high:g} {name}")
            if finding.get("severity") and not question.unit and question.asks != "measure":
                # the report's size word ("small", "large") or its grade ("mild cardiomegaly"),
                # unless the question asks for a measurement ("in cm", "What does it measure?")
                grade = str(finding["severity"])
                offered = _offered(question, grade)
                if offered != grade or any(q.kind == "severity" for q in question.qualifiers):
                    return out(offered)  # "small, moderate or large?": one of those offered
                word = _severity_word(target.deciding)
                if word in patterns.size_words:
                    return out(word)
                if question.label in patterns.sized_by_grade:
                    return out(grade)
                # "mild airspace disease" grades how much, not how big
                return out("unknown", False)
            return out("unknown", False)
        unit = _place_unit(question.text, patterns) if qtype == "count" else None
        if unit is None and qtype == "count" and _counts_lobes(question.text, patterns):
            unit = "lobes"
        if unit is not None:
            # "How many lobes show collapse?", "How many lungs show opacities?": the places
            # the finding's mentions name
            counted = _places_counted(
                unit, target.deciding, patterns, question.label, question.text
            )
            if counted is not None or unit != "ribs":
                return out(counted) if counted is not None else out("unknown", False)
            # "How many ribs are fractured?" with no rib numbered: the fractures counted
        if qtype == "count":
            count = finding.get("count")
            tips = finding.get("tips")
            if (
                count in (None, "multiple")
                and isinstance(tips, list)
                and _concept_id(question.label or "") in patterns.counted_by_tips
            ):
                count = len(tips)  # "leads in the right atrium and right ventricle": two
            if count in (None, "multiple") and _concept_id(question.label or "") in (
                patterns.counted_by_tips
            ):
                # "right atrial and right ventricular leads": one for each chamber named
                count = _chambers_named(target.deciding) or count
            things = [m for m in target.deciding if m.label not in patterns.uncounted]
            if 0 < len(things) < len(target.deciding):
                # "a calcified granuloma ... prior granulomatous disease": the process is not
                # one more of the things counted
                count = _merged(things).get("count")
            by_place = _count_by_place(target.deciding)
            if by_place is not None and (not isinstance(count, int) or by_place > count):
                count = by_place
            if (
                lat == "bilateral"
                and question.label in patterns.one_per_side
                and count in (None, "multiple", 1)
            ):
                count = 2  # "bilateral pleural effusions": one in each pleural space
            heads = {_process_head(m, patterns) for m in target.deciding} - {None}
            if count is None and not heads and lat != "bilateral":
                # "left hilar and left basilar granuloma": one in each place joined before it;
                # places on both sides stay several ("left upper and right upper lobe bullous
                # disease" is disease in each, not one bulla each)
                count = _joined_places(target.deciding)
            if count is None and heads:
                # "osteophyte formations": several; "osteophyte formation": how many unsaid
                if any(_plural(str(h)) for h in heads):
                    return out("multiple")
                return out("unknown", False)
            if count is None and any(_plural(m.text) for m in target.deciding):
                count = "multiple"  # "chronic left-sided rib fractures", no number
            if count is None and (
                _concept_id(question.label or "") in patterns.uncounted
                or all(m.label in patterns.uncounted for m in target.deciding)
            ):
                # "How many granulomas?" over "prior granulomatous disease": not said
                return out("unknown", False)
            if count is None and lat == "bilateral":
                count = "multiple"  # "left upper and right upper lobe bullous disease"
            return out(count if count is not None else 1)  # type: ignore[arg-type]
        if qtype == "change":
            change = finding.get("change")
            size_asked = re.findall(r"\w+", question.text.lower())
            if (
                change == "new"
                and question.label in patterns.sized_by_grade
                and not patterns.size_change_words.isdisjoint(size_asked)
            ):
                change = "increased"  # "Has the heart size changed?" over new cardiomegaly
            return out(_offered(question, str(change))) if change else out("unknown", False)
        if qtype == "severity":
            sev = finding.get("severity")
            if not sev and _beside(target.deciding, patterns.borderline_words):
                # "borderline cardiomegaly": borderline, the mildest grade where one is offered
                sev = "borderline"
            return out(_offered(question, str(sev))) if sev else out("unknown", False)
        return out("unknown", False)
    # closed: every qualifier must hold
    if any(q.kind in ("descriptor", "site") for q in question.qualifiers):
        # the words beside the finding, and its change as read ("stable": "unchanged")
        near = _near_words(target.deciding, patterns.denying_words, patterns)
        change = finding.get("change")
        finding = {**finding, "near_words": near | {str(change)} if change else near}
    changes = [q for q in question.qualifiers if q.kind == "change"]
    if status in ("negative", "absent"):
        if changes and finding.get("change"):
            # "Has the effusion resolved?" -- a resolved finding is negative
            verdicts = [_check(q, finding, patterns.zone_includes) for q in changes]
            return out(_combine(verdicts), "unknown" not in verdicts)
        if changes and question.label in patterns.stated_normal:
            # "Has the heart got bigger?" over a normal heart compared with nothing: a heart
            # is always there, so whether it grew is not said
            return out("unknown", False)
        if changes and status == "absent" and not target.elsewhere:
            # "Has the aortic calcification progressed?" over a report that never names it:
            # whether it changed is not said (a finding the report denies did not appear)
            return out("unknown", False)
        return out("no")
    if (
        status == "positive"
        and not finding.get("change")
        and changes
        and all(q.value == "resolved" for q in changes)
    ):
        # "Has the mass gone away?" over a mass the report sees: not gone, whatever before
        return out("no")
    if (
        status in ("positive", "uncertain")
        and not finding.get("change")
        and changes
        and all(q.value == "new" for q in changes)
        and _near_words(target.deciding, patterns.denying_words) & patterns.not_new_words
    ):
        # "Is the scarring new?" over "chronic scarring", "old healed rib fracture": no
        return out("no")
    verdicts = [
        "unknown" if v == "no" and q.rule == _READ_WORD_RULE else v
        for q in question.qualifiers
        for v in (_check(q, finding, patterns.zone_includes),)
    ]
    combined = _combine(verdicts)
    if combined == "unknown" and question.asks == "reading" and set(verdicts) == {"unknown"}:
        # "Is the basal opacity atelectasis?" over "basilar opacities, scarring or
        # atelectasis": the place is the opacity's; the reading, given none, is answered
        return out("yes" if status == "positive" else "uncertain")
    if combined == "yes" and status == "uncertain" and not _measure_of_pointed(question, patterns):
        return out("uncertain")
    return out(combined, combined != "unknown")


def _measure_of_pointed(question: ParsedQuestion, patterns: QuestionPatterns) -> bool:
    """Whether a closed question compares only the size of a finding it points at ("Is that
    opacity over a centimetre?", "Is it bigger than 2 cm?"): the report's measurement answers
    it, though the finding is hedged; "Is there a nodule over 1 cm?" asks whether there is one."""
    if not question.qualifiers or any(q.kind != "size" for q in question.qualifiers):
        return False
    words = re.findall(r"[a-z]+", question.text.lower())
    pointing = patterns.demonstratives | patterns.pronouns | {"the"}
    return len(words) > 1 and words[1] in pointing


def _severity_word(mentions: Sequence[Mention]) -> str | None:
    """The report's own word for a finding's severity ("small" where it was read as mild)."""
    said = _evidence_words(mentions, "severity")
    return said[0].lower() if said else None


def _dominant_side(target: _Target, patterns: QuestionPatterns) -> str | None:
    """The side a finding on both sides is more of: as the report's words put it ("left
    greater than right"), else the side of the larger stated size; None if neither says."""
    for m in target.deciding:
        sentence = m.sentence.lower()
        for pattern in patterns.dominance_patterns:
            found = pattern.search(sentence)
            if found:
                side = found.group("side")
                return {"l": "left", "r": "right"}.get(side, side)
    sizes: dict[str, float] = {}
    for m in target.deciding:
        side, size = m.attributes.get("laterality"), m.attributes.get("size_mm")
        if side in ("left", "right") and isinstance(size, int | float):
            sizes[str(side)] = max(sizes.get(str(side), 0.0), float(size))
    if len(sizes) == 2 and sizes["left"] != sizes["right"]:
        return max(sizes, key=lambda k: sizes[k])
    # "moderate right pleural effusion ... small left pleural effusion": the higher grade
    order = load_attribute_rules().severity_order
    grades: dict[str, int] = {}
    for m in target.deciding:
        side, grade = m.attributes.get("laterality"), m.attributes.get("severity")
        if side in ("left", "right") and grade in order:
            grades[str(side)] = max(grades.get(str(side), -1), order.index(str(grade)))
    if len(grades) == 2 and grades["left"] != grades["right"]:
        return max(grades, key=lambda k: grades[k])
    return None


def _offered(question: ParsedQuestion, value: str) -> str:
    """The question's own word for `value` when it offered a choice ("small, moderate or
    large?": a mild effusion is "small"), else `value`."""
    for q in question.qualifiers:
        if value in q.accepts or value == q.value:
            return question.text[q.start : q.end].lower()
    return value


def _combine(verdicts: Sequence[str]) -> str:
    if "no" in verdicts:
        return "no"
    if "unknown" in verdicts:
        return "unknown"
    return "yes"
