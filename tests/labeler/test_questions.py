"""Questions: parsing (types, findings, qualifiers, comparisons) and answers from a report."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from spacy.language import Language

from labeler.errors import PatternFileError
from labeler.lexicon import load_lexicon
from labeler.questions import (
    ParsedQuestion,
    QuestionParser,
    answer_from_report,
    compare,
    load_question_patterns,
    superlative_place,
)
from labeler.schema import CHESTXRAY14, ReportLabels

REPORT = (
    "FINDINGS: Small left pleural effusion, increased since the prior study. "
    "A 2.5 cm mass in the right upper lobe. Two nodules in the left lower lobe. "
    "No pneumothorax. Possible pneumonia. The heart is moderately enlarged."
)


@pytest.fixture(scope="module")
def parser(nlp: Language) -> QuestionParser:
    return QuestionParser(nlp, [str(label) for label in CHESTXRAY14])


@pytest.fixture(scope="module")
def report(label: Callable[[str], ReportLabels]) -> ReportLabels:
    return label(REPORT)


def ask(
    parser: QuestionParser, report: ReportLabels, question: str
) -> tuple[ParsedQuestion, object]:
    parsed = parser.parse(question)
    assert parsed.type != "unsupported", parsed.message
    return parsed, answer_from_report(parsed, report).answer


@pytest.mark.parametrize(
    ("question", "finding", "answer"),
    [
        ("Is there a pleural effusion?", "Effusion", "yes"),
        ("Is there pleural fluid?", "Effusion", "yes"),
        ("Does the patient have fluid around the lung?", "Effusion", "yes"),
        ("Is an effusion present?", "Effusion", "yes"),
        ("Any effusion?", "Effusion", "yes"),
        ("Effusion?", "Effusion", "yes"),
        ("Is there a pneumothorax?", "Pneumothorax", "no"),
        ("Is there a collapsed lung?", "Pneumothorax", "no"),
        ("Is pneumonia seen?", "Pneumonia", "uncertain"),
        ("Is the heart enlarged?", "Cardiomegaly", "yes"),
        ("Does the patient have an enlarged heart?", "Cardiomegaly", "yes"),
        ("Does the heart look big?", "Cardiomegaly", "yes"),
        ("Is the heart size normal?", "Cardiomegaly", "no"),
        ("Is there a lung mass?", "Mass", "yes"),
        ("Is there edema?", "Edema", "no"),  # not mentioned: read as absent
        ("Is there no pneumothorax?", "Pneumothorax", "yes"),
    ],
)
def test_presence_answers(
    parser: QuestionParser, report: ReportLabels, question: str, finding: str, answer: str
) -> None:
    parsed, got = ask(parser, report, question)
    assert (parsed.type, parsed.label, got) == ("presence", finding, answer)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("No pleural effusion.", "no"),
        ("Possible pleural effusion.", "uncertain"),
        ("Pleural effusion cannot be excluded.", "uncertain"),
        ("Pleural effusion cannot be confidently excluded.", "uncertain"),
        ("A pleural effusion is confidently excluded.", "no"),
        ("Small right pleural effusion.", "yes"),
        ("The lungs are clear.", "no"),
    ],
)
def test_presence_follows_negation_and_uncertainty(
    parser: QuestionParser, label: Callable[[str], ReportLabels], text: str, answer: str
) -> None:
    parsed = parser.parse("Is there an effusion?")
    assert answer_from_report(parsed, label(text)).answer == answer


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("Where is the effusion?", ["left"]),
        ("Which side is the effusion on?", ["left"]),
        ("Is the effusion on the left or right?", ["left"]),
        ("Which lung has the nodules?", ["left"]),
        ("Where is the mass?", ["right", "right upper lobe"]),
        ("In which lobe is the mass?", ["right", "right upper lobe"]),
        ("Is the effusion on the left?", "yes"),
        ("Is the effusion right-sided?", "no"),
        ("Is the effusion bilateral?", "no"),
        ("Is the mass in the right upper lobe?", "yes"),
        ("Is the mass in the lower lobe?", "no"),
        ("Is the nodule in the lower lobe?", "yes"),
        ("Can you see a nodule in the left lung?", "yes"),
        ("Is there a right pleural effusion?", "no"),
        ("Is the effusion located on the left?", "yes"),
        ("Is the mass located in the upper lobe?", "yes"),
        ("Where is the pneumothorax?", "unknown"),
    ],
)
def test_position_answers(
    parser: QuestionParser, report: ReportLabels, question: str, answer: object
) -> None:
    parsed, got = ask(parser, report, question)
    assert parsed.type == "position"
    assert got == answer


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("How big is the mass?", 25.0),
        ("What is the size of the mass?", 25.0),
        ("How large is the effusion?", "small"),  # no measurement: the report's size word
        ("Is the mass larger than 3 cm?", "no"),
        ("Is the mass larger than 2 cm?", "yes"),
        ("Is the mass smaller than 30 mm?", "yes"),
        ("Does the mass measure more than 20 mm?", "yes"),
        ("Is the mass at least 2.5 cm?", "yes"),
        ("Is the mass >3cm?", "no"),
        ("Is the mass 3 cm or larger?", "no"),
        ("Is the mass over 1 inch?", "no"),
        ("Is the mass bigger than 0.02 m?", "yes"),
    ],
)
def test_size_answers_and_numeric_comparisons(
    parser: QuestionParser, report: ReportLabels, question: str, answer: object
) -> None:
    parsed, got = ask(parser, report, question)
    assert parsed.type == "size"
    assert got == answer


def test_comparison_units_convert_to_mm(parser: QuestionParser) -> None:
    q = parser.parse("Is the nodule larger than 1.5 cm?").qualifiers[0]
    assert (q.kind, q.value, q.op, q.rule) == ("size", 15.0, "gt", "cmp.gt")
    assert parser.parse("Is the nodule 8 mm or smaller?").qualifiers[0].op == "le"
    assert compare(25.0, "ge", 25.0) and not compare(25.0, "gt", 25.0)


@pytest.mark.parametrize(
    ("question", "type_", "answer"),
    [
        ("How many nodules are there?", "count", 2),
        ("Number of nodules?", "count", 2),
        ("Are there multiple nodules?", "count", "yes"),
        ("Are there more than 2 nodules?", "count", "no"),
        ("Is there a single nodule?", "count", "no"),
        ("How many masses are there?", "count", 1),
        ("How many pneumothoraces are there?", "count", 0),
        ("Has the effusion changed?", "change", "increased"),
        ("Has the effusion increased?", "change", "yes"),
        ("Has the effusion gotten worse?", "change", "yes"),
        ("Has the effusion improved?", "change", "no"),
        ("Is the effusion stable?", "change", "no"),
        ("Is the effusion larger than before?", "change", "yes"),
        ("Has the mass grown since the last exam?", "change", "unknown"),
        ("How severe is the cardiomegaly?", "severity", "moderate"),
        ("Is the effusion small?", "severity", "yes"),
        ("Is the effusion large?", "severity", "no"),
        ("Is the cardiomegaly mild or severe?", "severity", "moderate"),
        ("Is there a small left effusion?", "severity", "yes"),
        ("Is there a small right effusion?", "severity", "no"),
        ("How much fluid is there?", "severity", "mild"),
        ("Is there any change in the left effusion?", "change", "increased"),
    ],
)
def test_count_change_severity_answers(
    parser: QuestionParser, report: ReportLabels, question: str, type_: str, answer: object
) -> None:
    parsed, got = ask(parser, report, question)
    assert (parsed.type, got) == (type_, answer)


def test_resolved_finding_answers_change(
    parser: QuestionParser, label: Callable[[str], ReportLabels]
) -> None:
    parsed = parser.parse("Has the pneumothorax resolved?")
    assert answer_from_report(parsed, label("The pneumothorax has resolved.")).answer == "yes"


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Heart size is normal. Scattered granulomas in both lungs.", "unknown"),  # unnamed
        ("No pleural effusion. The heart is normal in size.", "no"),  # denied: none appeared
        ("Small right pleural effusion, new since the prior study.", "yes"),
        ("Small right pleural effusion, unchanged from the prior exam.", "no"),
    ],
)
def test_change_of_a_finding_the_report_never_names_is_unknown(
    parser: QuestionParser, label: Callable[[str], ReportLabels], text: str, answer: str
) -> None:
    parsed = parser.parse("Is the pleural effusion worse than before?")
    assert answer_from_report(parsed, label(text)).answer == answer


@pytest.mark.parametrize(
    "question",
    [
        "Why is there an effusion?",
        "What caused the pneumothorax?",
        "How old is the patient?",
        "Should the effusion be drained?",
        "Which side are the effusion and the pneumothorax on?",  # several: presence only
        "What is the effusion made of?",
        "Is the mass malignant?",
        "",
        "Is it mild, moderate or severe?",
        "Is there evidence of congestive heart failure?",
        "Is the nodule lobulated?",  # a closed question with a word no entry explains
        "Is the effusion septated?",
        "Are both lungs clear of effusion?",  # negated and qualified
        "Could this be TB reactivation?",  # an old infection active again: not its presence
        "Is the nodule solid?",  # a qualifier asked of the finding, not beside its words
        "Is the nodule recurrent?",
        "Is the nodule of concern?",
        # a reading question's subject words describe what is pointed at; what follows
        # "be" is still read
        "Could the effusion be drained?",
        "Could the opacity be treated with antibiotics?",
        "Could the opacity be treated with antibiotics rather than surgery?",
        "Is the mass pericardial?",  # the word asked of the finding, not before its reading
    ],
)
def test_unsupported_questions_are_never_guessed(parser: QuestionParser, question: str) -> None:
    parsed = parser.parse(question)
    assert parsed.type == "unsupported"
    assert parsed.message


def test_parse_names_the_pattern_ids(parser: QuestionParser) -> None:
    parsed = parser.parse("Is the effusion on the left?")
    assert parsed.rules == ("concept.Effusion", "side.left")
    assert parser.parse("Is there pleural fluid?").rules[0] == "finding.effusion"


def test_report_evidence_has_offsets_and_rules(
    parser: QuestionParser, report: ReportLabels
) -> None:
    answer = answer_from_report(parser.parse("Is the effusion on the left?"), report)
    mention = next(e for e in answer.evidence if e["kind"] == "mention")
    assert REPORT[int(mention["start"]) : int(mention["end"])] == mention["text"]  # type: ignore[call-overload]
    side = next(e for e in answer.evidence if e["kind"] == "attribute")
    assert side["rule"] == "laterality.left"


def test_pattern_file_rejects_unquoted_yaml_booleans(tmp_path: object) -> None:
    from pathlib import Path

    bad = Path(str(tmp_path)) / "q.yaml"
    bad.write_text(
        "version: 1\nunits: {mm: 1}\nnegations:\n  - id: n\n    phrases: [no]\n", encoding="utf-8"
    )
    with pytest.raises(PatternFileError, match="quote"):
        load_question_patterns(str(bad))


@pytest.mark.parametrize(
    ("pattern", "why"), [("'(left'", "missing"), ("'(left|right) > x'", "no group `side`")]
)
def test_pattern_file_rejects_a_bad_dominance_pattern(
    tmp_path: object, pattern: str, why: str
) -> None:
    from pathlib import Path

    bad = Path(str(tmp_path)) / "q.yaml"
    bad.write_text(
        f"version: 1\nunits: {{mm: 1}}\ndominance:\n  report_patterns: [{pattern}]\n",
        encoding="utf-8",
    )
    with pytest.raises(PatternFileError, match=why):
        load_question_patterns(str(bad))


def test_report_evidence_is_bounded_and_shows_the_deciding_mention(
    parser: QuestionParser, label: Callable[[str], ReportLabels]
) -> None:
    report = label("FINDINGS: " + "No effusion. " * 30 + "Small left effusion.")
    answer = answer_from_report(parser.parse("Is there an effusion?"), report)
    assert answer.answer == "yes"
    mentions = [ev for ev in answer.evidence if ev["kind"] == "mention"]
    assert len(mentions) == 10
    assert mentions[0]["status"] == "positive"  # the deciding one, though it comes last
    assert answer.evidence[-1] == {"kind": "omitted", "count": 21, "text": "21 more mentions"}


def test_every_concept_the_question_patterns_name_is_in_the_lexicon() -> None:
    # a misspelt concept id would only make a rule silently never apply
    known = set(load_lexicon().concepts)
    p = load_question_patterns()
    named: set[str] = {
        *p.view_counts,
        *p.no_acute_statements,
        *p.uncounted,
        *p.tip_devices,
        *p.answered_by,
        *p.read_together,
        *p.anatomy_normals,
    }
    for table in (p.stated_normal, p.anatomy_normals, p.answered_by, p.read_together,
                  p.read_as_label, p.suggested_by, p.suggested_when_hedged):  # fmt: skip
        for concepts in table.values():
            named.update(concepts)
    # labels named as "concept:<id>" too
    named.update(c.removeprefix("concept:") for c in p.sized_by_grade if c.startswith("concept:"))
    assert named - known == set()


@pytest.mark.issue(40)
def test_endplate_changes_placed_in_the_thoracic_spine_answer_both_questions(
    nlp: Language,
) -> None:
    from labeler.config import LabelerConfig
    from labeler.pipeline import label_report

    parser = QuestionParser(nlp, [str(label) for label in CHESTXRAY14], lexicon=load_lexicon())

    report = label_report(
        "FINDINGS: Minimal endplate degenerative changes of the midthoracic spine.",
        nlp=nlp,
        config=LabelerConfig(findings=True),
    )
    question = "How bad is the degenerative change in the thoracic spine?"
    assert ask(parser, report, question)[1] == "minimal"
    assert ask(parser, report, "Are there endplate changes?")[1] == "yes"


@pytest.mark.issue(40)
@pytest.mark.parametrize(
    ("question", "label", "kin"),
    [
        ("Any lung tumor?", "Mass", "lung_cancer"),  # the longest words, not "tumor"
        ("Is there a tumour?", "Mass", "malignancy"),
        ("Is there water on the lung?", "Effusion", None),  # words no concept has
    ],
)
def test_a_labels_words_that_also_name_a_lexicon_concept(
    nlp: Language, question: str, label: str, kin: str | None
) -> None:
    parser = QuestionParser(nlp, [str(label) for label in CHESTXRAY14], lexicon=load_lexicon())
    parsed = parser.parse(question)
    assert (parsed.label, parsed.kin) == (label, kin)


@pytest.mark.parametrize(
    ("question", "text", "answer"),
    [
        ("Where is the largest nodule?", "Bilateral nodules, the largest in the left base.",
         ["left base"]),
        ("Which side is the largest nodule on?", "Bilateral nodules. The largest lies in the "
         "right upper lobe.", ["right"]),
        # another direction, or a word two sentences on, names none
        ("Where is the smallest nodule?", "Bilateral nodules, the largest in the left base.",
         None),
        ("Where is the largest nodule?", "Bilateral nodules. Clear lungs otherwise. The "
         "largest is in the left base.", None),
    ],
)  # fmt: skip
def test_superlative_place(
    parser: QuestionParser,
    label: Callable[[str], ReportLabels],
    question: str,
    text: str,
    answer: list[str] | None,
) -> None:
    parsed = parser.parse(question)
    got = answer_from_report(parsed, label(text))
    placed = superlative_place(parsed, got, text, load_question_patterns())
    assert placed.answer == (got.answer if answer is None else answer)
    assert answer is None or got.answer != answer


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("Is there atelectasis at the right base?", "uncertain"),
        ("Is there atelectasis in the left lung?", "no"),
    ],
)
def test_a_reading_offered_after_a_link_is_placed_where_the_opacity_is(
    parser: QuestionParser, label: Callable[[str], ReportLabels], question: str, answer: str
) -> None:
    # "opacity ... consistent with scarring or atelectasis": both readings are at the base
    text = "Streaky opacities in the right lung base are consistent with fibrosis or atelectasis."
    parsed, got = ask(parser, label(text), question)
    assert (parsed.type, got) == ("position", answer)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Findings may reflect mass progression.", "uncertain"),
        ("No evidence of mass progression.", "no"),
    ],
)
def test_a_hedged_course_named_after_the_finding_is_possible(
    parser: QuestionParser, label: Callable[[str], ReportLabels], text: str, answer: str
) -> None:
    parsed, got = ask(parser, label(text), "Could the mass have progressed?")
    assert (parsed.type, got) == ("change", answer)


def test_the_side_a_finding_is_compared_with_is_not_involved(
    parser: QuestionParser, label: Callable[[str], ReportLabels]
) -> None:
    text = "A nodule at the right base is denser compared to the left."
    assert ask(parser, label(text), "Is there a nodule on the left?")[1] == "no"
    assert ask(parser, label(text), "Is there a nodule on the right?")[1] == "yes"
