"""The chest radiology lexicon: the shipped file, its hierarchy and mappings, loader errors."""

from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path

import pytest

from labeler.errors import LabelerError, PatternFileError
from labeler.labelsets import load_label_set
from labeler.lexicon import KINDS, Lexicon, Mesh, load_lexicon

pytestmark = pytest.mark.issue(40)


@pytest.fixture(scope="module")
def lexicon() -> Lexicon:
    return load_lexicon()


def _write(tmp_path: Path, body: str) -> str:
    path = tmp_path / "lexicon.yaml"
    path.write_text("version: 1\nconcepts:\n" + body, encoding="utf-8")
    return str(path)


_DEVICE = """
  - {id: support_device, name: support device, kind: device, phrases: [device],
     labels: {chexpert: [Support Devices]}}
"""


def test_lexicon_ships_at_least_300_concepts(lexicon: Lexicon) -> None:
    assert lexicon.name == "lexicon.v1"
    assert len(lexicon.concepts) >= 300


def test_lexicon_has_every_kind(lexicon: Lexicon) -> None:
    kinds = Counter(c.kind for c in lexicon.concepts.values())
    assert set(kinds) == set(KINDS)


def test_lexicon_anatomy_is_only_a_parent(lexicon: Lexicon) -> None:
    leaves = [c.id for c in lexicon.concepts.values() if c.kind == "anatomy"]
    assert [cid for cid in leaves if not lexicon.descendants(cid)] == []


def test_lexicon_picc_ancestors(lexicon: Lexicon) -> None:
    ancestors = lexicon.ancestors("picc")
    assert ancestors[0] == "central_venous_catheter"
    assert "support_device" in ancestors
    assert "picc" in lexicon.descendants("central_venous_catheter")
    assert "picc" in lexicon.descendants("support_device")


@pytest.mark.parametrize(
    ("concept_id", "parent"),
    [
        ("calcified_granuloma", "granuloma"),
        ("healed_rib_fracture", "rib_fracture"),
        ("rib_fracture", "fracture"),
        ("tension_pneumothorax", "pneumothorax"),
        ("sternotomy_wires", "median_sternotomy"),
    ],
)
def test_lexicon_parents(lexicon: Lexicon, concept_id: str, parent: str) -> None:
    assert lexicon.ancestors(concept_id)[0] == parent


def test_lexicon_labels_inherit(lexicon: Lexicon) -> None:
    assert lexicon.concepts["picc"].labels == {}
    assert lexicon.labels_for("picc", "chexpert") == ("Support Devices",)
    assert lexicon.labels_for("healed_rib_fracture", "chexpert") == ("Fracture",)
    assert lexicon.labels_for("lll_collapse", "chestxray14") == ("Atelectasis",)
    assert lexicon.labels_for("picc", "chestxray14") == ()


def test_lexicon_own_labels_win(lexicon: Lexicon) -> None:
    # an empty mapping of its own stops inheritance: a calcified nodule is a ChestX-ray14
    # Nodule but not a CheXpert Lung Lesion
    assert lexicon.labels_for("calcified_nodule", "chestxray14") == ("Nodule",)
    assert lexicon.labels_for("calcified_nodule", "chexpert") == ()
    assert lexicon.labels_for("hydropneumothorax", "chexpert") == (
        "Pneumothorax",
        "Pleural Effusion",
    )


def test_lexicon_postop_is_not_a_support_device(lexicon: Lexicon) -> None:
    for cid in ("sternotomy_wires", "surgical_clips", "median_sternotomy"):
        assert lexicon.labels_for(cid, "chexpert") == ()
    assert lexicon.labels_for("pericardial_effusion", "chestxray14") == ()


def test_lexicon_labels_exist_in_their_label_sets(lexicon: Lexicon) -> None:
    for concept in lexicon.concepts.values():
        for label_set, names in concept.labels.items():
            assert set(names) <= set(load_label_set(label_set).labels), concept.id


@pytest.mark.parametrize(
    ("phrase", "concept_id"),
    [
        ("ett", "endotracheal_tube"),
        ("picc", "picc"),
        ("ng tube", "nasogastric_tube"),
        ("ngt", "nasogastric_tube"),
        ("cvc", "central_venous_catheter"),
        ("ij line", "internal_jugular_catheter"),
        ("aicd", "aicd"),
        ("icd", "aicd"),
        ("port-a-cath", "port"),
        ("swan-ganz catheter", "pulmonary_artery_catheter"),
        ("pleural effusions", "pleural_effusion"),
        ("oedema", "pulmonary_edema"),
        ("lungs are clear", "clear_lungs"),
        ("no acute cardiopulmonary abnormality", "no_acute_abnormality"),
        ("underpenetrated", "underpenetration"),
        ("calcified granulomatous disease", "calcified_granulomatous_disease"),
        ("enlarged liver", "hepatomegaly"),
        ("diminutive hilar silhouette", "small_hilum"),
    ],
)
def test_lexicon_phrases_resolve(lexicon: Lexicon, phrase: str, concept_id: str) -> None:
    assert lexicon.by_phrase[phrase] == (concept_id,)


def test_lexicon_plurals_of_last_words(lexicon: Lexicon) -> None:
    assert "calcified granulomas" in lexicon.concepts["calcified_granuloma"].phrases
    assert "piccs" in lexicon.by_phrase
    assert "atelectasises" not in lexicon.by_phrase


def test_lexicon_other_spellings_inside_phrases(lexicon: Lexicon) -> None:
    # the file lists one spelling; the loader adds the other, in either direction
    assert lexicon.by_phrase["lymphangitic spread of tumour"] == ("lymphangitic_carcinomatosis",)
    assert "lymphangitic spread of tumours" in lexicon.by_phrase
    assert lexicon.by_phrase["pulmonary haemorrhage"] == ("pulmonary_hemorrhage",)
    assert "tumoour" not in lexicon.by_phrase


def test_lexicon_mesh_headings(lexicon: Lexicon) -> None:
    meshes = [c.mesh for c in lexicon.concepts.values() if c.mesh is not None]
    assert meshes
    assert all(isinstance(m.heading, str) and m.heading.strip() for m in meshes)
    assert lexicon.mesh_of("degenerative_thoracic_spine") == Mesh(
        "Thoracic Vertebrae", ("degenerative",)
    )
    assert lexicon.mesh_of("tortuous_aorta") == Mesh("Aorta", ("tortuous",))
    # inherited from central_venous_catheter's parent
    assert lexicon.mesh_of("picc") == Mesh("Catheters, Indwelling")
    assert lexicon.mesh_of("normal_study") == Mesh("normal")


@pytest.mark.parametrize(
    ("concept_id", "rid"),
    [
        # each checked against a RadLex export that lists the class's preferred name
        ("pneumothorax", "RID5352"),
        ("pleural_effusion", "RID34539"),
        ("atelectasis", "RID28493"),
        ("consolidation", "RID43255"),
        ("nodule", "RID50149"),  # pulmonary nodule
        ("endotracheal_tube", "RID5557"),
        ("chest_tube", "RID5573"),  # thoracostomy tube
        ("pacemaker", "RID5436"),
        ("lung", "RID1301"),
        ("pulmonary_artery", "RID974"),  # RID874 is a palmar digital artery
    ],
)
def test_lexicon_radlex_ids(lexicon: Lexicon, concept_id: str, rid: str) -> None:
    assert lexicon.concepts[concept_id].radlex == rid


@pytest.mark.parametrize(
    "concept_id",
    [
        "opacity",  # lung opacity: RadLex's opacity is not only the lung's
        "loculated_effusion",  # narrower than RadLex's pleural effusion
        "cardiomegaly",  # no RadLex class
        "stent",  # RadLex's class is obsolete
    ],
)
def test_lexicon_radlex_left_out_without_the_same_concept(
    lexicon: Lexicon, concept_id: str
) -> None:
    assert lexicon.concepts[concept_id].radlex is None


def test_lexicon_radlex_id_names_one_concept(lexicon: Lexicon) -> None:
    # a narrower concept never borrows its parent's id
    ids = Counter(c.radlex for c in lexicon.concepts.values() if c.radlex is not None)
    assert len(ids) > 100
    assert [rid for rid, n in ids.items() if n > 1] == []


def test_lexicon_open_finding_heads(lexicon: Lexicon) -> None:
    assert {"opacity", "opacities", "density", "lesion", "collection"} <= (
        lexicon.open_finding_heads
    )


def test_lexicon_unknown_id_and_label_set(lexicon: Lexicon) -> None:
    with pytest.raises(KeyError, match="no concept 'picc_line'"):
        lexicon.ancestors("picc_line")
    with pytest.raises(KeyError, match="unknown label set 'mimic'"):
        lexicon.labels_for("picc", "mimic")


def test_lexicon_loads_a_path(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        _DEVICE + "  - {id: picc, name: PICC, kind: device, parent: support_device, "
        "phrases: [PICC, PICC  line]}\n",
    )
    lexicon = load_lexicon(path)
    assert lexicon.by_phrase["picc line"] == ("picc",)
    assert lexicon.labels_for("picc", "chexpert") == ("Support Devices",)
    assert lexicon.open_finding_heads == frozenset()


def test_lexicon_predicates_add_the_predicate_forms_of_a_phrase(tmp_path: Path) -> None:
    path = tmp_path / "lexicon.yaml"
    path.write_text(
        "predicates: {adjectives: [tortuous], verbs: [is, remains], degrees: [mildly]}\n"
        "concepts:\n"
        "  - {id: tortuous_aorta, name: a, kind: finding, phrases: [tortuous aorta]}\n"
        "  - {id: other, name: b, kind: finding, phrases: [aorta is tortuous]}\n",
        encoding="utf-8",
    )
    lexicon = load_lexicon(str(path))
    assert lexicon.by_phrase["aorta remains mildly tortuous"] == ("tortuous_aorta",)
    assert lexicon.by_phrase["aortas is tortuous"] == ("tortuous_aorta",)  # of the plural
    assert lexicon.by_phrase["aorta is tortuous"] == ("other",)  # a listed phrase keeps its own
    assert "aorta remains tortuous" in lexicon.predicate_phrases
    assert "aorta is tortuous" not in lexicon.predicate_phrases
    assert (
        "aorta remains tortuous"
        not in lexicon.phrases_by_concept(predicates=False)["tortuous_aorta"]
    )
    path.write_text(
        "predicates: {adjectives: [tortuous], verbs: is}\nconcepts:\n"
        "  - {id: a, name: a, kind: finding, phrases: [tortuous aorta]}\n",
        encoding="utf-8",
    )
    with pytest.raises(PatternFileError, match="`predicates.verbs` must be a list of words"):
        load_lexicon.__wrapped__(str(path))


def test_lexicon_verbless_adjectives_follow_their_noun_with_no_verb(tmp_path: Path) -> None:
    path = tmp_path / "lexicon.yaml"
    head = "predicates: {adjectives: [stable, tortuous], verbs: [is], degrees: [mildly], "
    concepts = (
        "concepts:\n"
        "  - {id: same, name: a, kind: normal, phrases: [stable mediastinum]}\n"
        "  - {id: tortuous_aorta, name: b, kind: finding, phrases: [tortuous aorta]}\n"
    )
    path.write_text(head + "verbless: [stable]}\n" + concepts, encoding="utf-8")
    lexicon = load_lexicon.__wrapped__(str(path))
    assert lexicon.by_phrase["mediastinum stable"] == ("same",)
    assert lexicon.by_phrase["mediastinum mildly stable"] == ("same",)
    assert "aorta tortuous" not in lexicon.by_phrase  # only the adjectives listed
    assert lexicon.by_phrase["aorta is tortuous"] == ("tortuous_aorta",)
    # written as the other lists may be: any case, any spacing
    path.write_text(head + "verbless: [' Stable']}\n" + concepts, encoding="utf-8")
    assert load_lexicon.__wrapped__(str(path)).by_phrase["mediastinum stable"] == ("same",)
    path.write_text(head + "verbless: [enlarged]}\n" + concepts, encoding="utf-8")
    with pytest.raises(PatternFileError, match="`predicates.verbless` must list some"):
        load_lexicon.__wrapped__(str(path))


def test_lexicon_nominals_add_the_noun_forms_of_a_phrase(tmp_path: Path) -> None:
    path = tmp_path / "lexicon.yaml"
    head = "predicates: {adjectives: [dilated], verbs: [is], degrees: [], nominals: "
    concepts = (
        "concepts:\n"
        "  - {id: dilated_artery, name: a, kind: finding, phrases: [dilated artery]}\n"
        "  - {id: other, name: b, kind: finding, phrases: [dilation of the artery]}\n"
    )
    path.write_text(head + "{dilated: [dilation, Dilatation]}}\n" + concepts, encoding="utf-8")
    lexicon = load_lexicon.__wrapped__(str(path))
    assert lexicon.by_phrase["dilatation of the artery"] == ("dilated_artery",)
    assert lexicon.by_phrase["dilation of artery"] == ("dilated_artery",)
    assert lexicon.by_phrase["dilation of the artery"] == ("other",)  # a listed phrase keeps it
    assert "dilatation of the artery" in lexicon.predicate_phrases
    for bad, why in (
        ("[dilation]", "must map an adjective to a list of nouns"),
        ("{dilated: dilation}", "`predicates.nominals`.dilated must be a list of nouns"),
        ("{dilated: [1]}", "must be a list of nouns"),
    ):
        path.write_text(head + bad + "}\n" + concepts, encoding="utf-8")
        with pytest.raises(PatternFileError, match=re.escape(why)):
            load_lexicon.__wrapped__(str(path))


def test_described_and_placed_findings_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "lexicon.yaml"
    concepts = (
        "concepts:\n"
        "  - {id: calcification, name: a, kind: finding, phrases: [calcified]}\n"
        "  - {id: granuloma, name: b, kind: finding, phrases: [granuloma]}\n"
    )
    path.write_text(
        "described:\n  - {words: [calcified], by: calcification, "
        "becomes: {granuloma: calcified_granuloma}, between: [left]}\n" + concepts,
        encoding="utf-8",
    )
    with pytest.raises(PatternFileError, match="unknown concept 'calcified_granuloma'"):
        load_lexicon.__wrapped__(str(path))
    path.write_text("described:\n  - {words: [calcified]}\n" + concepts, encoding="utf-8")
    with pytest.raises(PatternFileError, match="needs words, by, becomes and between"):
        load_lexicon.__wrapped__(str(path))
    path.write_text(
        "placed:\n  - {concept: granuloma, between: [in], places: {lung: lung_granuloma}}\n"
        + concepts,
        encoding="utf-8",
    )
    with pytest.raises(PatternFileError, match="unknown concept 'lung_granuloma'"):
        load_lexicon.__wrapped__(str(path))
    # sloppy sections: not a list, a mapping that is a list
    path.write_text("placed: calcified\n" + concepts, encoding="utf-8")
    with pytest.raises(PatternFileError, match="`placed` must be a list"):
        load_lexicon.__wrapped__(str(path))
    path.write_text(
        "described:\n  - {words: [calcified], by: calcification, becomes: [granuloma], "
        "between: []}\n" + concepts,
        encoding="utf-8",
    )
    with pytest.raises(PatternFileError, match="becomes must map"):
        load_lexicon.__wrapped__(str(path))


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            _DEVICE + "  - {id: support_device, name: again, kind: device, phrases: [x]}\n",
            "concept id 'support_device' appears twice",
        ),
        (
            "  - {id: picc, name: PICC, kind: device, parent: catheter, phrases: [picc]}\n",
            "concept 'picc' has unknown parent 'catheter'",
        ),
        (
            "  - {id: a, name: a, kind: finding, parent: b, phrases: [a]}\n"
            "  - {id: b, name: b, kind: finding, parent: a, phrases: [b]}\n",
            r"concept 'a' is its own ancestor \(a -> b -> a\)",
        ),
        (
            "  - {id: a, name: a, kind: disease, phrases: [a]}\n",
            "concept 'a': kind 'disease' is not one of finding, device",
        ),
        (
            "  - {id: a, name: a, kind: finding, phrases: [a], labels: {chexpert: [Effusion]}}\n",
            r"concept 'a': label\(s\) \['Effusion'\] are not in label set 'chexpert'",
        ),
        (
            "  - {id: a, name: a, kind: finding, phrases: [a], labels: {mimic: [Edema]}}\n",
            "concept 'a': unknown label set 'mimic'",
        ),
        (
            "  - {id: a, name: a, kind: finding, phrases: []}\n",
            "concept 'a': `phrases` must be a non-empty list",
        ),
        (
            "  - {id: a, name: a, kind: finding, phrases: [a, '  ']}\n",
            "concept 'a': phrase '  ' is empty",
        ),
        (
            "  - {id: a, name: a, kind: finding, phrases: [lead]}\n"
            "  - {id: b, name: b, kind: device, phrases: [leads, pacer]}\n"
            "  - {id: c, name: c, kind: device, phrases: [Pacer]}\n",
            r"3 phrase\(s\) claimed by two unrelated concepts "
            r"\('leads': a, b; 'pacer': b, c; 'pacers': b, c\)",
        ),
        (
            "  - {id: a, name: a, kind: finding, phrases: [a], mesh: {heading: ''}}\n",
            "concept 'a': `mesh` must be a heading",
        ),
        (
            "  - {id: Pleural-Effusion, name: a, kind: finding, phrases: [a]}\n",
            "concept 'Pleural-Effusion': an id is lower-case snake_case",
        ),
        (
            "  - {id: a, name: a, kind: finding, phrases: [a], synonyms: [b]}\n",
            r"concept 'a': unknown field\(s\) \['synonyms'\]",
        ),
        (
            "  - {id: a, name: a, kind: finding, phrases: [a], radlex: '1301'}\n",
            "concept 'a': radlex '1301' is not a RadLex id",
        ),
    ],
    ids=[
        "duplicate-id",
        "unknown-parent",
        "cycle",
        "unknown-kind",
        "unknown-label",
        "unknown-label-set",
        "no-phrases",
        "empty-phrase",
        "phrase-clash",
        "empty-mesh",
        "bad-id",
        "unknown-field",
        "bad-radlex",
    ],
)
def test_lexicon_rejects_bad_files(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(PatternFileError, match=message) as info:
        load_lexicon(_write(tmp_path, body))
    assert isinstance(info.value, LabelerError)


def test_lexicon_phrase_shared_with_an_ancestor_is_allowed(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "  - {id: atelectasis, name: a, kind: finding, phrases: [atelectasis, collapse]}\n"
        "  - {id: lobar_collapse, name: b, kind: finding, parent: atelectasis, "
        "phrases: [collapse, lobar collapse]}\n",
    )
    assert load_lexicon(path).by_phrase["collapse"] == ("atelectasis", "lobar_collapse")


def test_lexicon_missing_file() -> None:
    with pytest.raises(PatternFileError, match="no packaged pattern set 'lexicon.v9'"):
        load_lexicon("lexicon.v9")


def test_lexicon_covers_openi_mesh_headings(
    lexicon: Lexicon, shared_data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At least 85% of the OpenI coders' heading occurrences are some concept's heading."""
    reports = shared_data / "openi" / "indiana_reports_dev.csv"
    if not reports.is_file():
        pytest.skip(f"OpenI reports not found at {reports}")
    named = {c.mesh.heading.lower() for c in lexicon.concepts.values() if c.mesh is not None}
    headings: Counter[str] = Counter()
    with reports.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            # "heading/qualifier/qualifier; heading/..."; only the MeSH column is read
            for term in (row.get("MeSH") or "").split(";"):
                heading = term.split("/")[0].strip()
                if heading and heading != "No Indexing":
                    headings[heading] += 1
    covered = sum(n for h, n in headings.items() if h.lower() in named)
    coverage = covered / sum(headings.values())
    missing = [h for h, _ in headings.most_common() if h.lower() not in named]
    with capsys.disabled():
        print(  # noqa: T201 - the figure is what this test reports
            f"\nOpenI MeSH heading coverage: {covered}/{sum(headings.values())} "
            f"= {coverage:.3f} (missing: {', '.join(missing) or 'none'})"
        )
    assert coverage >= 0.85, missing
