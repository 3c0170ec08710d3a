"""Questions about a study: one engine for `cxr ask` and `POST /v1/studies/ask`.

A question is parsed once (`labeler.questions`), answered from the labelled report and
from the image's prediction placed in the patient (`models.position`), and the two are
fused: the report's answer is given when it has one (the radiologist's reading), the
image's otherwise, and `discrepancy` is set when the two disagree on the finding's
presence or side, whatever the question's type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from labeler.findings import OPEN_PREFIX, singular
from labeler.questions import (
    CONCEPT_PREFIX,
    AnswerValue,
    ParsedQuestion,
    QuestionParser,
    ReportAnswer,
    abnormal_findings_named,
    answer_from_report,
    answer_study,
    load_question_patterns,
    superlative_place,
)
from labeler.schema import ReportFinding, ReportLabels

if TYPE_CHECKING:
    from spacy.tokens import Doc

    from batch.labeling import PipelineLabeler
    from labeler.lexicon import Lexicon
    from models.image_findings import ImageFindings

__all__ = ["Answer", "StudyQuestions", "answer_question", "discrepancy_of"]

Source = Literal["report", "image", "both"]

#: the pipes that tag a sentence's words (a report word asked about must be a noun)
_TAGGING = ("tok2vec", "tagger")


@dataclass
class Answer:
    """One answered question: the output row of `cxr ask` and of the API."""

    id: str
    question: str
    type: str
    label: str | None
    answer: AnswerValue | None
    source: Source | None
    evidence: dict[str, object] = field(default_factory=dict)
    discrepancy: bool = False
    message: str | None = None
    unit: str | None = None
    #: the image was read by a demo model (`models.demo`): its evidence means nothing
    demo_model: bool = False

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict; `message` and `unit` only when set, `demo_model` only when true."""
        out: dict[str, object] = {
            "id": self.id,
            "question": self.question,
            "type": self.type,
            "label": self.label,
            "answer": self.answer,
            "source": self.source,
            "evidence": self.evidence,
            "discrepancy": self.discrepancy,
        }
        if self.unit is not None:
            out["unit"] = self.unit
        if self.message is not None:
            out["message"] = self.message
        if self.demo_model:
            out["demo_model"] = True
        return out


def discrepancy_of(
    status: str, report_side: str | None, image: ImageFindings, label: str
) -> str | None:
    """Why the report and the image disagree on a finding, or None.

    Presence: the report calls it positive and the model does not, or the model calls it
    positive and the report negative or silent. Side: both see it, on opposite sides
    (`bilateral` on either side is no disagreement). An uncertain report, or a label the
    model does not predict, never disagrees.
    """
    if label not in image.probabilities or status == "uncertain":
        return None
    seen = label in image.positive
    if status == "positive" and not seen:
        return f"the report describes {label}; the model does not find it"
    if status in ("negative", "absent") and seen:
        said = "rules it out" if status == "negative" else "does not mention it"
        return f"the model finds {label}; the report {said}"
    if status == "positive" and seen and report_side in ("left", "right"):
        side = image.side(label)
        if side in ("left", "right") and side != report_side:
            return f"the report puts {label} on the {report_side}, the image on the {side}"
    return None


class StudyQuestions:
    """Parse and answer questions about studies, with a report cache.

    Args:
        labeler: the report labeler; its pipeline also parses the questions, and both go
            through its lock, so one labeler may serve other callers at the same time.
        patterns: the question pattern file.
        report_cache: labelled reports remembered by text (questions come in groups
            about one report).
    """

    def __init__(
        self,
        labeler: PipelineLabeler,
        *,
        patterns: str = "questions.v1",
        report_cache: int = 10_000,
    ) -> None:
        from labeler.labelsets import load_label_set
        from labeler.lexicon import load_lexicon

        self.labeler = labeler
        labels = load_label_set(labeler.config.label_set).labels
        # a question may name a concept outside the labels: reports are read for findings
        self.lexicon = load_lexicon(labeler.config.lexicon)
        self.parser = QuestionParser(labeler.nlp, labels, patterns, lexicon=self.lexicon)
        self.report_cache = report_cache
        self._reports: dict[str, ReportLabels] = {}
        # (report text, word) -> the report read with that word as a finding word
        self._read_with: dict[tuple[str, str], ReportLabels] = {}

    def label_reports(self, texts: Iterable[str]) -> dict[str, ReportLabels]:
        """Label the distinct report texts not yet cached, in one pass; return all asked."""
        wanted = list(dict.fromkeys(t for t in texts if t))
        todo = [t for t in wanted if t not in self._reports]
        if todo:
            labelled = self.labeler.label_many(
                [(str(i), t) for i, t in enumerate(todo)], findings=True
            )
            for text, result in zip(todo, labelled, strict=True):
                if len(self._reports) >= self.report_cache:
                    del self._reports[next(iter(self._reports))]
                self._reports[text] = result
        return {t: self._reports[t] for t in wanted if t in self._reports}

    def ask(
        self,
        question: str,
        *,
        report: ReportLabels | None = None,
        image: ImageFindings | None = None,
        question_id: str = "",
        referent: str | None = None,
        report_text: str | None = None,
    ) -> Answer:
        """Answer one question from a labelled report, an image's findings, or both.

        A question whose finding is a pronoun ("Has it grown?") asks about `referent`, the
        finding of the question before it about the same study; without one, about the
        report's only abnormal finding. Where the report has several, it is refused with
        their names.

        Args:
            question: the question, plain English.
            report: the labelled report (`label_reports`), or None.
            image: the image's findings (`image_findings`), or None.
            question_id: copied to the answer's `id`.
            referent: the label (or `concept:<id>`) the previous question about this study
                asked about, if any.
            report_text: the text `report` was labelled from: a question that names no
                finding but a word the report names ("Where are the phleboliths?") is
                answered from that word's mentions, read by the labeler's rules.

        Returns:
            The answer; `type == "unsupported"` with a message when the question is not
            understood (never a guess), `answer == "unknown"` when the study does not say.
        """
        with self.labeler.pipeline():
            parsed = self.parser.parse(question, referent=referent)
            if parsed.label is None and parsed.type == "unsupported" and report is not None:
                parsed = self._sole_referent(question, parsed, report)
        if parsed.label is None and report_text and report is not None and not report.error:
            parsed, report = self._report_word(question, parsed, report, report_text)
        return answer_question(
            parsed,
            report=report,
            image=image,
            question_id=question_id,
            lexicon=self.lexicon,
            report_text=report_text,
        )

    def _report_word(
        self, question: str, parsed: ParsedQuestion, report: ReportLabels, text: str
    ) -> tuple[ParsedQuestion, ReportLabels]:
        """A question that names no finding read as about a word of it the report names
        (`QuestionParser.report_words`), and the report read with that word as a finding
        word; else `parsed` and `report` as they are."""
        with self.labeler.pipeline():
            words = self.parser.report_words(question)
        lowered = text.lower()
        for word in words:
            one = singular(word)
            if one[: max(3, len(one) - 1)] not in lowered:
                continue  # most refused questions: the report does not name it
            forms = {word, one, one + "s", one + "es", one[:-1] + "ies"}
            read = self._read_with.get((text, one))
            if read is None:
                read = self.labeler.label_with_words(text, forms)
                if len(self._read_with) >= 64:
                    del self._read_with[next(iter(self._read_with))]
                self._read_with[(text, one)] = read
            label = OPEN_PREFIX + one
            found = read.report_findings or ()
            if read.error:
                continue
            tagged: dict[str, Doc] = {}  # each sentence tagged once
            # the word must be a noun somewhere the report names it ("phleboliths"), not only
            # a verb or a name; its mentions then answer as the labeler read them (the tagger
            # errs on masked text: "XXXX fragments in ...")
            found = [f for f in found if f.label != label or self._named_as_noun(f, tagged)]
            if not any(f.label == label for f in found):
                # "Has the aneurysm changed?" over "thoracic aortic aneurysm": the one
                # concept whose words in the report hold the word
                holders = {f.label for f in found if forms.intersection(f.text.lower().split())}
                if not holders and len(one) > _STEM_FROM:
                    # "How big is the cavity?" over "cavitary lesion": the one concept with a
                    # word of the word's stem (one letter off, as the report was searched)
                    stem = one[:-1]
                    holders = {
                        f.label
                        for f in found
                        if any(w.startswith(stem) for w in f.text.lower().split())
                    }
                if len(holders) != 1:
                    continue
                label = CONCEPT_PREFIX + holders.pop()
            with self.labeler.pipeline():
                again = self.parser.parse_report_word(question, word)
            if again.label == OPEN_PREFIX + one and again.type != "unsupported":
                return dataclasses.replace(again, label=label), read
        return parsed, report

    def _named_as_noun(self, f: ReportFinding, tagged: dict[str, Doc]) -> bool:
        """Whether the report's word `f` is a common noun in its sentence's parse: a thing
        seen ("phleboliths"), not a verb or a name ("findings discussed with Dr Smith");
        `tagged` holds the sentences tagged so far."""
        if f.sentence_start is None:
            return False
        doc = tagged.get(f.sentence)
        if doc is None:
            with self.labeler.pipeline() as nlp:
                doc = nlp.make_doc(f.sentence)
                for name, pipe in nlp.pipeline:
                    if name in _TAGGING:
                        doc = pipe(doc)
            tagged[f.sentence] = doc
        span = doc.char_span(f.start - f.sentence_start, f.end - f.sentence_start)
        return span is not None and span.root.tag_ in ("NN", "NNS")

    def _sole_referent(
        self, question: str, parsed: ParsedQuestion, report: ReportLabels
    ) -> ParsedQuestion:
        """The question read as about the report's only abnormal finding, where it stands
        a pronoun for its finding; else `parsed`, with the candidates named when several."""
        if not self.parser.refers_back(question):
            return parsed
        named = abnormal_findings_named(report, self.lexicon)
        if len(named) == 1:
            again = self.parser.parse(question, referent=named[0])
            if again.label is not None:
                rules = tuple("referent.sole" if r == "referent" else r for r in again.rules)
                return dataclasses.replace(again, rules=rules)
            return parsed
        if len(named) > 1:
            names = ", ".join(self.lexicon.concepts[c[len(CONCEPT_PREFIX) :]].name for c in named)
            message = (
                f"the question does not say which finding it asks about, and the report names "
                f"several ({names}); name the finding"
            )
            return dataclasses.replace(parsed, message=message)
        message = (
            "the question does not say which finding it asks about, and the report names no "
            "abnormal finding it could be; name the finding"
        )
        return dataclasses.replace(parsed, message=message)


#: the shortest word whose stem may name a concept's word ("cavity" in "cavitary"): shorter
#: stems start too many words
_STEM_FROM = 5


def answer_question(
    parsed: ParsedQuestion,
    *,
    report: ReportLabels | None,
    image: ImageFindings | None,
    question_id: str = "",
    lexicon: Lexicon | None = None,
    report_text: str | None = None,
) -> Answer:
    """Fuse the report's and the image's answers to a parsed question (see the module doc);
    `lexicon` is the one the question's concept, if any, comes from; `report_text`, the
    text `report` was labelled from, names which one of several a superlative asks for
    ("Where is the largest nodule?")."""
    base = Answer(question_id, parsed.text, parsed.type, parsed.label, None, None)
    base.evidence["question"] = {"rules": list(parsed.rules)}
    if parsed.type == "study":
        return _answer_study(base, parsed, report)
    if parsed.type == "unsupported" or parsed.label is None:
        base.message = parsed.message or "the question is not understood"
        return base
    if report is not None and report.error:
        base.message = f"the report could not be labelled: {report.error}"
        report = None
    if report is None and image is None:
        base.answer = "unknown"
        base.message = "no report or image was given"
        return base
    if parsed.also:
        # the model scores one finding at a time: several are answered from the report
        if report is None:
            base.answer = "unknown"
            base.message = "a question about several findings is answered from the report"
            return base
        image = None
    label = parsed.label
    rep: ReportAnswer | None = (
        answer_from_report(parsed, report, lexicon=lexicon) if report is not None else None
    )
    if rep is not None and report_text:
        rep = superlative_place(parsed, rep, report_text, load_question_patterns())
    img: tuple[AnswerValue, bool] | None = (
        _answer_from_image(parsed, image) if image is not None else None
    )
    if rep is not None:
        base.evidence["report"] = rep.evidence
    if image is not None:
        base.evidence["image"] = image.evidence(label)
        if label not in image.probabilities:
            base.message = f"the model does not predict {label}; answered from the report only"
    if rep is not None and image is not None:
        why = discrepancy_of(rep.status, rep.laterality, image, label)
        if why:
            base.discrepancy = True
            base.evidence["discrepancy"] = why
    if rep is not None and rep.known:
        base.answer = rep.answer
        image_spoke = img is not None and img[1]
        base.source = "both" if image_spoke else "report"
    elif img is not None and img[1]:
        base.answer, base.source = img[0], "image"
        if parsed.type == "position" and image is not None and label not in image.positive:
            p = image.probabilities.get(label, 0.0)
            base.message = base.message or (
                f"the model does not call {label} positive (p={p:.2f}); the answer is where "
                "its strongest evidence lies"
            )
    elif rep is not None:
        base.answer, base.source = rep.answer, "report"
    else:
        base.answer, base.source = (img[0] if img else "unknown"), "image"
        if parsed.type in ("size", "count", "change", "severity"):
            base.message = base.message or (
                f"the image alone does not tell the {parsed.type}; give the report"
            )
    if parsed.type == "size" and isinstance(base.answer, float):
        base.answer, base.unit = _in_unit(base.answer, parsed.unit)
    return base


_MM_PER = {"mm": 1.0, "cm": 10.0, "m": 1000.0, "in": 25.4}


def _in_unit(size_mm: float, unit: str | None) -> tuple[float, str]:
    """A size in the unit the question asked for (millimetres when it named none)."""
    if unit is None or unit not in _MM_PER:
        return size_mm, "mm"
    return round(size_mm / _MM_PER[unit], 3), unit


def _answer_study(base: Answer, parsed: ParsedQuestion, report: ReportLabels | None) -> Answer:
    """A whole-study question ("Is this chest X-ray normal?"): from the report alone."""
    if report is None or report.error:
        base.answer = "unknown"
        base.message = (
            f"the report could not be labelled: {report.error}"
            if report is not None
            else "questions about the whole study are answered from its report; give it"
        )
        return base
    rep = answer_study(parsed, report)
    base.answer, base.source = rep.answer, "report"
    base.evidence["report"] = rep.evidence
    return base


def _answer_from_image(parsed: ParsedQuestion, image: ImageFindings) -> tuple[AnswerValue, bool]:
    """(answer, known) from the model: presence and position only."""
    label = parsed.label or ""
    if label not in image.probabilities:
        return "unknown", False
    seen = label in image.positive
    if parsed.type == "presence":
        ans = "yes" if seen else "no"
        if parsed.negated:
            ans = "no" if seen else "yes"
        return ans, True
    if parsed.type != "position":
        return "unknown", False
    positions = [p for p in image.positions if p.label == label]
    if parsed.open:
        if not positions:
            return "unknown", False
        side = image.side(label)
        terms: list[str] = [] if side == "unknown" else [side]
        if parsed.asks != "side":
            terms += list(dict.fromkeys(p.zone for p in positions))
        return (terms, True) if terms else ("unknown", False)
    if not positions:
        return ("unknown", False) if seen else ("no", True)
    verdicts = []
    side = image.side(label)
    for q in parsed.qualifiers:
        if q.kind == "side":
            verdicts.append("unknown" if side == "unknown" else _yes(side in q.accepts))
        elif q.kind == "zone":
            verdicts.append(_yes(any(p.zone == q.value for p in positions)))
        elif q.kind == "lobe":
            lobe_side, lobe_zone = (q.accepts + ("", ""))[:2]
            verdicts.append(
                "unknown"
                if side == "unknown"
                else _yes(any(p.side == lobe_side and p.zone == lobe_zone for p in positions))
            )
        else:
            verdicts.append("unknown")
    if "no" in verdicts:
        return "no", True
    if "unknown" in verdicts or not verdicts:
        return "unknown", False
    return "yes", True


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
