"""Every finding a report names (`LabelerConfig(findings=True)`): lexicon concepts and open
findings, each decided by the labels' negation and certainty rules, with its MeSH heading;
the label outputs do not change."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.util import filter_spans

from labeler import findings, vocabulary
from labeler.config import LabelerConfig
from labeler.findings import PhraseIndex, lexicon_matcher
from labeler.lexicon import Lexicon, load_lexicon
from labeler.pattern_cache import cache_path
from labeler.pipeline import label_report, label_with_words
from labeler.schema import Mention, ReportFinding, ReportLabels

pytestmark = pytest.mark.issue(40)

FINDINGS = LabelerConfig(findings=True)
Read = Callable[[str], ReportLabels]


@pytest.fixture(scope="module")
def read(nlp: Language) -> Read:
    def run(text: str) -> ReportLabels:
        return label_report(text, nlp=nlp, config=FINDINGS)

    return run


def _one(result: ReportLabels, concept: str) -> ReportFinding:
    assert result.report_findings is not None
    found = [f for f in result.report_findings if f.concept == concept]
    assert len(found) == 1, [f.concept for f in result.report_findings]
    return found[0]


def test_a_device_is_read_with_its_heading_and_side(read: Read) -> None:
    picc = _one(read("FINDINGS: Right PICC with tip in the SVC."), "picc")
    assert (picc.kind, picc.status, picc.text) == ("device", "positive", "PICC")
    assert picc.mesh == "Catheters, Indwelling/right"  # the coders' heading, then the side
    assert picc.attributes["laterality"] == "right"


def test_a_side_the_qualifiers_name_is_not_named_twice(read: Read) -> None:
    collapse = _one(read("FINDINGS: Right middle lobe collapse."), "rml_collapse")
    assert collapse.mesh == "Pulmonary Atelectasis/middle lobe/right"
    effusion = _one(read("FINDINGS: Small right effusion."), "pleural_effusion")
    assert effusion.mesh == "Pleural Effusion/right"


@pytest.mark.parametrize(
    ("text", "concept", "radlex"),
    [
        ("FINDINGS: Small right pleural effusion.", "pleural_effusion", "RID34539"),
        ("FINDINGS: Right PICC with tip in the SVC.", "picc", "RID5581"),
        ("FINDINGS: Retrocardiac opacity.", "retrocardiac_opacity", ""),  # none in the lexicon
        ("FINDINGS: Fluid collection in the right axilla.", "open:collection", ""),
        # the rib level makes the fracture a rib fracture, which has no id of its own
        ("FINDINGS: Fracture of the left 5th rib.", "rib_fracture", ""),
        ("FINDINGS: Fracture of the T11 vertebra.", "vertebral_fracture", "RID49608"),
    ],
)
def test_a_finding_carries_its_concepts_radlex_id(
    read: Read, text: str, concept: str, radlex: str
) -> None:
    finding = _one(read(text), concept)
    assert finding.radlex == radlex
    assert finding.to_dict()["radlex"] == radlex


def test_a_findings_json_is_its_mentions_with_its_concept() -> None:
    # `ReportFinding.to_dict` writes the mention's keys out itself: a field added to
    # `Mention` must show there too, after the concept's keys
    finding = ReportFinding(
        label="picc", text="PICC", start=17, end=21, sentence="Right PICC.", status="positive",
        rule="r1", negex="affirmed", section="findings", cue="c", attributes={"x": 1},
        attribute_evidence=[{"y": 2}], sentence_start=0, name="PICC line", kind="device",
        mesh="Catheters, Indwelling", radlex="RID5581",
    )  # fmt: skip
    concept = {"concept": "picc", "name": "PICC line", "kind": "device",
               "mesh": "Catheters, Indwelling", "radlex": "RID5581"}  # fmt: skip
    out = finding.to_dict()
    assert out == {**concept, **Mention.to_dict(finding)}
    assert list(out) == [*concept, *Mention.to_dict(finding)]


@pytest.mark.parametrize(
    ("text", "concept", "status"),
    [
        ("FINDINGS: Calcified granuloma, left upper lobe.", "calcified_granuloma", "positive"),
        ("FINDINGS: No pneumothorax.", "pneumothorax", "negative"),
        ("FINDINGS: There is no evidence of a rib fracture.", "rib_fracture", "negative"),
        ("FINDINGS: Opacity at the right base may represent atelectasis.", "atelectasis",
         "uncertain"),
        ("FINDINGS: Opacity at the right base may represent atelectasis.", "opacity", "positive"),
        # lymphoid tissue named for the nodes, hedged, plain and denied
        ("FINDINGS: Wide hila, possibly from lymphoid enlargement.", "lymphadenopathy",
         "uncertain"),
        ("FINDINGS: Mild enlarged lymphoid tissue at the left hilum.", "lymphadenopathy",
         "positive"),
        ("FINDINGS: No lymphoid enlargement.", "lymphadenopathy", "negative"),
    ],
)  # fmt: skip
def test_findings_get_the_labels_rules(read: Read, text: str, concept: str, status: str) -> None:
    assert _one(read(text), concept).status == status


def test_the_longest_concept_wins(read: Read) -> None:
    found = read("FINDINGS: Calcified granuloma in the left upper lobe.").report_findings
    assert found is not None and [f.concept for f in found] == ["calcified_granuloma"]
    assert found[0].mesh.startswith("Calcified Granuloma")


def test_an_open_finding_is_a_finding_word_outside_the_lexicon(read: Read) -> None:
    found = _one(read("FINDINGS: Irregularity of the left lateral ribs."), "open:irregularity")
    assert (found.kind, found.status, found.mesh) == ("finding", "positive", "")
    assert _one(read("FINDINGS: No focal lesion."), "open:lesion").status == "negative"


@pytest.mark.parametrize(
    ("text", "status", "side"),
    [
        ("FINDINGS: Several phleboliths over the left upper quadrant.", "positive", "left"),
        ("FINDINGS: No phleboliths are seen.", "negative", None),
        ("FINDINGS: Possible right phlebolith.", "uncertain", "right"),
    ],
)
def test_a_word_asked_about_is_read_as_an_open_finding_with_the_same_rules(
    nlp: Language, text: str, status: str, side: str | None
) -> None:
    words = {"phlebolith", "phleboliths"}
    found = _one(label_with_words(text, words, nlp=nlp, config=FINDINGS), "open:phlebolith")
    assert (found.status, found.attributes.get("laterality")) == (status, side)
    # the labels and the ordinary reading do not change
    plain = label_report(text, nlp=nlp, config=FINDINGS)
    assert plain.report_findings is not None
    assert not [f for f in plain.report_findings if f.concept == "open:phlebolith"]
    assert label_with_words(text, words, nlp=nlp, config=FINDINGS).labels == plain.labels


def test_normal_statements_make_a_normal_report(read: Read) -> None:
    normal = read(
        "FINDINGS: The lungs are clear.\nIMPRESSION: No acute cardiopulmonary abnormality."
    )
    assert normal.normal is True
    statement = _one(normal, "no_acute_abnormality")
    assert (statement.kind, statement.status) == ("normal", "positive")  # its "no" is its own
    assert read("FINDINGS: The lungs are clear. Small left effusion.").normal is False
    assert read("FINDINGS: Possible small left effusion.").normal is False  # hedged counts


def test_a_normal_template_that_names_the_finding_it_denies(read: Read) -> None:
    # "engorgement ... within limits of normal" says the vessels are normal
    said = read(
        "FINDINGS: Cardiac size and pulmonary vascular engorgement appear within limits of normal."
    )
    assert _one(said, "normal_pulmonary_vascularity").status == "positive"
    assert said.normal is True
    engorged = read("FINDINGS: Mild pulmonary vascular engorgement.")
    assert _one(engorged, "pulmonary_vascular_congestion").status == "positive"
    assert engorged.normal is False


@pytest.mark.parametrize(
    ("text", "concept", "changed"),
    [
        # a predicate form, a degree inside it; a plural the loader cannot make
        ("The right hemidiaphragm is mildly elevated.", "elevated_hemidiaphragm", None),
        ("Apical scars, unchanged.", "apical_scarring", "unchanged"),
        ("Atherosclerotic calcifications of the aorta.", "aortic_atherosclerosis", None),
        # a stable part is the normal statement, and lungs "expanded" have not grown
        ("The mediastinum is stable.", "normal_mediastinum", "unchanged"),
        ("Both lungs are clear and expanded.", "clear_lungs", None),
        # the predicate forms of "<adjective> <noun>" phrases
        ("The thoracic aorta remains tortuous.", "tortuous_thoracic_aorta", "unchanged"),
        ("The aorta is unfolded.", "unfolded_aorta", None),
        ("Heart and mediastinum are normal.", "normal_mediastinum", None),
        # a normal statement said only with its change word, before or after its part
        ("Stable heart size.", "normal_heart_size", "unchanged"),
        ("The heart size is unchanged.", "normal_heart_size", "unchanged"),
        ("Heart size and mediastinal contours are unchanged.", "normal_mediastinum", "unchanged"),
        ("Heart and mediastinal silhouette appear stable.", "normal_mediastinum", "unchanged"),
        ("Heart size upper normal but stable.", "normal_heart_size", "unchanged"),
        # a heart at the top of normal is a normal heart size statement
        (
            "The heart size is at the upper limits of normal, unchanged.",
            "top_normal_heart_size",
            "unchanged",
        ),
        (
            "Cardiac silhouette is near upper limits of normal in size.",
            "top_normal_heart_size",
            None,
        ),
        ("The heart is top normal in size.", "top_normal_heart_size", None),
        # ... also said without "of"
        ("Heart size is at upper limits normal.", "top_normal_heart_size", None),
        # the report's shorthand drops the verb
        ("Cardiomediastinal silhouette stable.", "normal_mediastinum", "unchanged"),
        ("Mediastinal contours normal.", "normal_mediastinum", None),
        # the OpenI de-identification's mask for "compression"
        (
            "Stable wedge XXXX deformity of a midthoracic vertebral body.",
            "vertebral_compression_deformity",
            "unchanged",
        ),
        ("Calcified mediastinal lymph XXXX.", "calcified_lymph_node", None),
        # an adjective of the finding's own name is no change; a noun still is
        ("Increased interstitial markings.", "interstitial_markings", None),
        ("Decreased lung volumes.", "low_lung_volumes", None),
        ("Increase in heart size since the prior study.", "cardiomegaly", "increased"),
    ],
)
def test_findings_in_the_reports_words(
    read: Read, text: str, concept: str, changed: str | None
) -> None:
    found = _one(read(f"FINDINGS: {text}"), concept)
    assert found.status == "positive"
    assert found.attributes.get("change") == changed


@pytest.mark.parametrize(
    ("text", "concept", "where"),
    [
        ("Mild wedge deformity of a midthoracic vertebral body.",
         "vertebral_compression_deformity", ["mid thoracic spine"]),
        ("Degenerative disc disease at the thoracolumbar junction.", "degenerative_spine",
         ["thoracolumbar junction"]),
        ("Retrolisthesis of two lower thoracic vertebral bodies.", "retrolisthesis",
         ["lower thoracic spine"]),
        ("Nodule in the left lower lobe.", "nodule", ["left lower lobe"]),
    ],
)  # fmt: skip
def test_a_spine_finding_is_placed_in_the_spine(
    read: Read, text: str, concept: str, where: list[str]
) -> None:
    assert _one(read(f"FINDINGS: {text}"), concept).attributes.get("location") == where


@pytest.mark.parametrize(
    ("text", "concept", "count"),
    [
        # a count after "of", of vertebral bodies, ribs or levels, is the finding's
        ("FINDINGS: Minimal retrolisthesis of two lower thoracic vertebral bodies.",
         "retrolisthesis", 2),
        ("FINDINGS: Wedge deformities of 3 midthoracic vertebral bodies.",
         "vertebral_compression_deformity", 3),
        ("FINDINGS: Healed fractures of several left anterior ribs.", "healed_fracture",
         "multiple"),
        # not a size, nor a count of something else
        ("FINDINGS: Calcified granuloma of 2 cm.", "calcified_granuloma", None),
        ("FINDINGS: Retrolisthesis of two years standing.", "retrolisthesis", None),
    ],
)  # fmt: skip
def test_a_count_after_of_counts_the_finding(
    read: Read, text: str, concept: str, count: object
) -> None:
    assert _one(read(text), concept).attributes.get("count") == count


def test_levels_joined_before_a_finding_keep_its_describing_words(read: Read) -> None:
    # "and" between two levels does not end the words the fractures take ("stable")
    text = "FINDINGS: Osteopenia, stable appearance of T9 and T12 XXXX fractures."
    fracture = _one(read(text), "vertebral_fracture")
    assert fracture.attributes.get("change") == "unchanged"
    assert fracture.attributes.get("levels") == ["T9", "T12"]
    # two levels further from the finding are another finding's: "right" stays the density's
    text = (
        "FINDINGS: Curvilinear density over the right anterior 3rd and 4th ribs beyond "
        "which lung markings are seen."
    )
    assert _one(read(text), "density").attributes.get("laterality") == "right"


def test_levels_listed_together_go_to_one_finding(read: Read) -> None:
    # a level listed after another goes where the first went, not to a nearer finding
    # after it ...
    found = read("FINDINGS: Compression fractures at T7 and L3 with diffuse sclerosis.")
    assert _one(found, "compression_fracture").attributes.get("levels") == ["T7", "L3"]
    assert "levels" not in _one(found, "sclerotic_bone_lesion").attributes
    # ... unless it names the finding right after it
    found = read("FINDINGS: T7 compression fracture and L3 sclerosis.")
    assert _one(found, "compression_fracture").attributes.get("levels") == ["T7"]
    assert _one(found, "sclerotic_bone_lesion").attributes.get("levels") == ["L3"]


def test_rib_levels_make_a_deformity_a_rib_deformity_with_the_ribs_side(read: Read) -> None:
    found = _one(read("FINDINGS: Old deformities of the left 6th and 7th ribs."), "rib_deformity")
    assert found.attributes.get("laterality") == "left"
    assert found.attributes.get("levels") == ["6th rib", "7th rib"]
    # a vertebral level does not make it a rib deformity
    result = read("FINDINGS: Deformity of T8.")
    assert result.report_findings is not None
    assert "rib_deformity" not in [f.concept for f in result.report_findings]


def test_the_sign_a_finding_is_evidenced_by_takes_its_side(read: Read) -> None:
    text = "FINDINGS: Mild right-sided volume loss as evidenced by diaphragm elevation."
    found = _one(read(text), "elevated_hemidiaphragm")
    assert found.attributes.get("laterality") == "right"
    # not across another word
    text = "FINDINGS: Mild right-sided volume loss. Diaphragm elevation."
    assert "laterality" not in _one(read(text), "elevated_hemidiaphragm").attributes


def test_a_clause_with_a_place_verb_places_the_finding(read: Read) -> None:
    text = "FINDINGS: Atelectasis is suggested, possibly involving the right base."
    found = _one(read(text), "atelectasis")
    assert found.attributes.get("laterality") == "right"
    assert found.attributes.get("location") == ["basilar"]
    # another clause does not
    text = "FINDINGS: Atelectasis is suggested, possibly since the right lung is small."
    assert "laterality" not in _one(read(text), "atelectasis").attributes


def test_places_joined_by_and_stay_the_findings_before_the_next_finding(read: Read) -> None:
    # two place words of one place joined by "and", another finding after: both places
    text = "FINDINGS: Fibrosis in the left upper and mid lung zone with a small nodule."
    assert _one(read(text), "pulmonary_fibrosis").attributes.get("location") == ["upper", "middle"]
    # a place that runs into the next finding is that finding's own
    text = "FINDINGS: Fibrosis at the left apex and right basilar atelectasis."
    found = read(text)
    assert _one(found, "pulmonary_fibrosis").attributes.get("location") == ["apical"]
    assert _one(found, "basilar_atelectasis").attributes.get("laterality") == "right"


@pytest.mark.parametrize(
    ("text", "concept", "attributes"),
    [
        # a degree word before a change word of the finding's own name grades the finding
        ("FINDINGS: Mildly diminished lung volumes.", "low_lung_volumes", {"severity": "mild"}),
        ("FINDINGS: Markedly increased interstitial markings.", "interstitial_markings",
         {"severity": "severe"}),
        # ... and before a change the finding went through, how much it changed: no severity
        ("FINDINGS: Slightly increased right pleural effusion.", "pleural_effusion",
         {"laterality": "right", "change": "increased"}),
        # other words of the lexicon's: "to" the aorta, hypoventilation, UK spellings
        ("FINDINGS: There is mild tortuosity to the descending thoracic aorta.",
         "tortuous_thoracic_aorta", {"severity": "mild"}),
        # "calcific" for "calcified"; an aneurysm "of" the aorta's named segment
        ("FINDINGS: Calcific aorta.", "aortic_calcification", {}),
        ("IMPRESSION: Focal contour abnormality, may reflect aneurysm of the descending "
         "thoracic aorta.", "aortic_aneurysm", {}),
        ("IMPRESSION: Mild hypoventilation.", "low_lung_volumes", {"severity": "mild"}),
        ("FINDINGS: Splenic artery embolisation coils.", "embolization_coils",
         {"location": ["spleen"]}),
        ("FINDINGS: Dual-lumen catheter tip at the cavoatrial junction.",
         "central_venous_catheter", {"tip": "cavoatrial junction",
                                     "tip_text": "cavoatrial junction"}),
        # tortuosity on its own is the aorta's, as the coders code it; "low volume lungs";
        # a "portacatheter" is a port
        ("FINDINGS: Mild aortic ectasia/tortuosity.", "tortuous_aorta", {"severity": "mild"}),
        ("FINDINGS: There is tortuosity and/or ectasia of the thoracic aorta.",
         "tortuous_aorta", {}),
        # a word written onto the finding with a slash shares its pre-modifiers; a linking
        # word ends them
        ("FINDINGS: Aortic calcifications and mild ectasia/tortuosity.", "tortuous_aorta",
         {"severity": "mild"}),
        ("FINDINGS: Markings are slightly accentuated suggesting underlying emphysema.",
         "emphysema", {}),
        # prominent pulmonary vessels are the lexicon's vascular congestion
        ("FINDINGS: Slightly prominent pulmonary vascularity.", "pulmonary_vascular_congestion",
         {"severity": "mild"}),
        ("IMPRESSION: Low volume lungs.", "low_lung_volumes", {}),
        ("IMPRESSION: Portacatheter is noted.", "port", {}),
        # a bone or joint is a finding's place; the zone word in a bone's name is the bone's
        ("FINDINGS: Old fracture, right mid clavicle.", "healed_fracture",
         {"laterality": "right", "location": ["clavicle"]}),
        ("FINDINGS: Widening of the right acromioclavicular joint.",
         "acromioclavicular_separation",
         {"laterality": "right", "location": ["acromioclavicular joint"]}),
        ("FINDINGS: Left humeral neck fracture.", "humerus_fracture",
         {"laterality": "left", "location": ["humerus"]}),
        ("FINDINGS: Anterior cervical fusion.", "cervical_spinal_fusion",
         {"location": ["cervical spine"]}),
        # and the upper abdomen under the diaphragm
        ("FINDINGS: Surgical clips in the right upper quadrant.", "cholecystectomy_clips",
         {"laterality": "right", "location": ["right upper quadrant"]}),
        ("FINDINGS: Vascular clips project over the epigastrium.", "surgical_clips",
         {"location": ["epigastrium"]}),
        ("FINDINGS: Stable postoperative changes in the epigastric region.",
         "postoperative_change", {"location": ["epigastrium"], "change": "unchanged"}),
        # the abdomen named whole, the gastroesophageal junction, and the place under the
        # clavicle where a generator sits
        ("FINDINGS: Surgical clips are present in the abdomen.", "surgical_clips",
         {"location": ["abdomen"]}),
        ("FINDINGS: Surgical clips near the gastroesophageal junction.", "surgical_clips",
         {"location": ["gastroesophageal junction"]}),
        ("FINDINGS: Left infraclavicular pacemaker generator.", "pacemaker",
         {"laterality": "left", "location": ["infraclavicular"]}),
        # a jugular line without "internal" or with its own name masked
        ("FINDINGS: Right jugular XXXX catheter with tip in the lower SVC.",
         "internal_jugular_catheter",
         {"laterality": "right", "tip": "superior vena cava", "tip_text": "lower SVC"}),
        # the places of the neck, the gullet, the upper mediastinum, the thoracic spine and
        # the pelvis, each with its other forms; the bare mediastinum is the part a finding
        # is of, no place
        ("FINDINGS: Retained contrast in the distal esophagus.", "residual_contrast",
         {"location": ["esophagus"]}),
        ("FINDINGS: Soft tissue density in the superior mediastinum.", "soft_tissue_mass",
         {"location": ["upper mediastinum"]}),
        ("FINDINGS: The mediastinum is widened.", "widened_mediastinum", {}),
        ("FINDINGS: Small T-spine osteophytes.", "osteophyte",
         {"location": ["thoracic spine"], "severity": "mild"}),
        ("IMPRESSION: Tiny density, possibly within a pyriform sinus.", "density",
         {"location": ["piriform sinus"], "severity": "minimal"}),
        ("FINDINGS: Surgical clips in the pelvis.", "surgical_clips", {"location": ["pelvis"]}),
        # the front and back recesses of the costophrenic angle, and the angle itself
        ("IMPRESSION: 2 cm nodular density in the anterior costophrenic sulcus.",
         "nodular_opacity", {"location": ["anterior costophrenic"], "size_mm": 20.0}),
        ("FINDINGS: Blunting of the posterior costophrenic angles.",
         "blunted_posterior_sulcus", {"location": ["posterior costophrenic"]}),
        ("FINDINGS: Blunting of the left costophrenic angle.", "blunted_costophrenic_angle",
         {"laterality": "left", "location": ["costophrenic"]}),
        # lung volumes said low or decreased as a predicate; a hilum's prominence
        ("FINDINGS: Lung volumes are mildly decreased.", "low_lung_volumes",
         {"severity": "mild"}),
        ("FINDINGS: The lung volumes are slightly on the low side.", "low_lung_volumes",
         {"severity": "mild"}),
        ("FINDINGS: There are very low lung volumes.", "low_lung_volumes",
         {"severity": "severe"}),
        ("FINDINGS: Low lung volumes.", "low_lung_volumes", {}),
        ("FINDINGS: Mild prominence left hilar contour.", "hilar_enlargement",
         {"laterality": "left", "location": ["perihilar"], "severity": "mild"}),
        # sides compared are both sides, not a change; a masked word between two sides
        ("FINDINGS: Pleural effusions, left larger than right.", "pleural_effusion",
         {"laterality": "bilateral"}),
        ("FINDINGS: There are small right and XXXX left pleural effusions.", "pleural_effusion",
         {"laterality": "bilateral", "severity": "mild"}),
        # improved aeration is the aeration's change, not the effusion's beside it
        ("FINDINGS: There is improved aeration of the lung bases with small residual left "
         "basilar effusion.", "lung_aeration", {"change": "improved", "location": ["basilar"]}),
        # a line whose name the de-identification masked, known by its tip
        ("FINDINGS: There is a left chest XXXX with tip in the mid SVC.", "vascular_catheter",
         {"laterality": "left", "tip": "superior vena cava", "tip_text": "mid SVC"}),
        ("FINDINGS: Right chest XXXX is again seen with tip in the right atrium.",
         "vascular_catheter", {"laterality": "right", "change": "unchanged",
                               "tip": "right atrium", "tip_text": "right atrium"}),
        ("FINDINGS: Right XXXX XXXX noted with tip in the lower SVC.", "vascular_catheter",
         {"laterality": "right", "tip": "superior vena cava", "tip_text": "lower SVC"}),
        # the markers of a bypass graft are the operation's
        ("FINDINGS: Median sternotomy wires and coronary bypass graft markers.", "cabg", {}),
        ("FINDINGS: There is a right chest XXXX, with its distal tip in the upper SVC.",
         "vascular_catheter", {"laterality": "right", "tip": "superior vena cava",
                               "tip_text": "upper SVC"}),
        # a finding said as a noun of what follows "of"
        ("FINDINGS: Mild prominence of the central pulmonary arteries.",
         "pulmonary_artery_enlargement", {"severity": "mild"}),
        ("FINDINGS: Tortuosity of the descending thoracic aorta.", "tortuous_thoracic_aorta", {}),
        ("FINDINGS: Stable widening of the upper mediastinum.", "widened_mediastinum",
         {"change": "unchanged", "location": ["upper mediastinum"]}),
        # a change compared with an earlier study that the reading after it would lose
        ("FINDINGS: Right upper lobe mass measuring 5 cm, larger compared to the prior exam, "
         "most consistent with malignancy.", "mass",
         {"change": "increased", "laterality": "right", "location": ["right upper lobe"],
          "size_mm": 50.0}),
    ],
)  # fmt: skip
def test_more_of_the_reports_words(
    read: Read, text: str, concept: str, attributes: dict[str, object]
) -> None:
    assert _one(read(text), concept).attributes == attributes


def test_a_lung_zone_is_still_a_lung_zone(read: Read) -> None:
    # the bones' names do not take the zones of the lungs
    found = _one(read("FINDINGS: Right mid lung nodular opacity."), "nodular_opacity")
    assert found.attributes.get("location") == ["middle"]
    rib = _one(read("FINDINGS: Healed rib fracture."), "healed_rib_fracture")
    assert "location" not in rib.attributes


def test_a_masked_word_of_the_chest_is_no_line(read: Read) -> None:
    found = read("FINDINGS: Visualized XXXX of the chest XXXX are within normal limits.")
    assert "vascular_catheter" not in [f.concept for f in found.report_findings or ()]
    found = read("FINDINGS: XXXX XXXX noted in the left upper quadrant.")
    assert "vascular_catheter" not in [f.concept for f in found.report_findings or ()]


@pytest.mark.parametrize(
    ("text", "concept", "attributes"),
    [
        ("FINDINGS: Calcified left upper lobe 5 mm peripheral granuloma.", "calcified_granuloma",
         {"laterality": "left", "location": ["left upper lobe"], "size_mm": 5.0}),
        ("FINDINGS: Calcified bilateral lung and perihilar granulomas.", "calcified_granuloma",
         {"laterality": "bilateral", "location": ["perihilar"]}),
        ("FINDINGS: Calcified right basilar nodule.", "calcified_nodule",
         {"laterality": "right", "location": ["basilar"]}),
    ],
)  # fmt: skip
def test_a_describing_word_reads_across_its_findings_place_and_size(
    read: Read, text: str, concept: str, attributes: dict[str, object]
) -> None:
    found = read(text).report_findings or []
    assert [f.concept for f in found] == [concept]
    assert found[0].attributes == attributes


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        ("FINDINGS: Degenerative changes are present in the spine.", "degenerative_spine"),
        ("FINDINGS: Mild degenerative changes are present in the XXXX spine.",
         "degenerative_spine"),
        ("FINDINGS: Degenerative changes throughout the thoracic spine.",
         "degenerative_thoracic_spine"),
        # no place after it: the concept without one; a finding in between keeps them apart
        ("FINDINGS: Degenerative changes.", "degenerative_change"),
        ("FINDINGS: Degenerative changes, no pneumothorax in the spine.", "degenerative_change"),
    ],
)  # fmt: skip
def test_a_finding_is_read_with_the_place_named_after_it(
    read: Read, text: str, concept: str
) -> None:
    assert (read(text).report_findings or [])[0].concept == concept


def test_a_describing_word_of_another_finding_is_its_own(read: Read) -> None:
    found = read("FINDINGS: Calcified aorta and right lung granuloma.").report_findings or []
    assert [f.concept for f in found] == ["aortic_calcification", "granuloma"]
    # a verb between them: two findings
    found = read("FINDINGS: Calcification is seen near a granuloma.").report_findings or []
    assert "calcified_granuloma" not in [f.concept for f in found]


def test_maybe_is_a_hedge(read: Read) -> None:
    found = read("IMPRESSION: Maybe due to pulmonary fibrosis.").report_findings or []
    assert [(f.concept, f.status) for f in found] == [("pulmonary_fibrosis", "uncertain")]
    found = read("IMPRESSION: Pulmonary fibrosis.").report_findings or []
    assert [(f.concept, f.status) for f in found] == [("pulmonary_fibrosis", "positive")]


def test_a_stable_study_is_a_whole_sentence_statement(read: Read) -> None:
    def concepts(text: str) -> list[str]:
        return [f.concept for f in read(text).report_findings or ()]

    assert "stable_study" in concepts("IMPRESSION: Stable chest.")
    # not a chest wall device's, nor a finding's change in the same sentence
    assert "stable_study" not in concepts("FINDINGS: Stable left chest wall generator.")
    found = read("FINDINGS: Cardiomegaly with no interval change.").report_findings or []
    assert [(f.concept, f.attributes.get("change")) for f in found] == [
        ("cardiomegaly", "unchanged")
    ]


def test_a_stable_study_in_other_words(read: Read) -> None:
    def concepts(text: str) -> list[str]:
        return [f.concept for f in read(text).report_findings or ()]

    for text in (
        "IMPRESSION: Unchanged.",
        "IMPRESSION: No interval change.",
        "IMPRESSION: Stable appearing chest.",
        "IMPRESSION: Findings are grossly unchanged compared with the prior CT.",
        "IMPRESSION: Mild cardiomegaly, otherwise unchanged.",
        # dated against the prior, from the sentence's start or after "otherwise"
        "IMPRESSION: No significant interval change compared to prior radiographs.",
        "IMPRESSION: No interval change since the prior exam.",
        "FINDINGS: Small granuloma. Otherwise no significant interval change compared to prior "
        "films.",
    ):
        assert "stable_study" in concepts(text), text
    # "^": the sentence's start only, not a finding's own change
    for text in (
        "FINDINGS: The nodule is unchanged.",
        "FINDINGS: Heart size is stable.",
        "FINDINGS: Effusion with no interval change compared to prior exam.",
        # the marker is no word of the text: a stray "^" starts no sentence
        "FINDINGS: Right lung nodule ^ unchanged.",
    ):
        assert "stable_study" not in concepts(text), text


def test_reading_findings_leaves_the_labels_as_they_were(nlp: Language) -> None:
    reports = [
        "FINDINGS: No focal consolidation, effusion or pneumothorax. Right PICC.",
        "FINDINGS: Opacity may represent atelectasis or pneumonia. Calcified granuloma.",
        "IMPRESSION: Stable cardiomegaly. Healed left rib fractures. No edema.",
    ]
    for text in reports:
        plain = label_report(text, nlp=nlp, config=LabelerConfig()).to_dict()
        both = label_report(text, nlp=nlp, config=FINDINGS).to_dict()
        assert both.pop("report_findings") and "normal" in both
        both.pop("normal")
        assert both == plain
    assert "report_findings" not in plain and "normal" not in plain  # only when asked


@pytest.fixture(scope="module")
def lexicon() -> Lexicon:
    return load_lexicon()


def _phrase_matcher_reading(
    nlp: Language, lexicon: Lexicon, doc: Doc
) -> list[tuple[str, int, int]]:
    """What spaCy's PhraseMatcher on LOWER, then filter_spans, finds: the reference."""
    matcher = lexicon_matcher(nlp, lexicon, skip_kinds={"anatomy"})
    spans = [Span(doc, s, e, label=nlp.vocab.strings[m]) for m, s, e in matcher(doc)]
    return [(sp.label_, sp.start, sp.end) for sp in filter_spans(spans)]


def test_the_phrase_index_splits_each_phrase_as_the_tokenizer(
    nlp: Language, lexicon: Lexicon
) -> None:
    index = PhraseIndex(nlp, lexicon, skip_kinds={"anatomy"})
    indexed = {tuple(words) for words in _phrases_of(index)}
    tokenized = {
        tuple(t.lower_ for t in nlp.make_doc(p))
        for ps in lexicon.phrases_by_concept({"anatomy"}).values()
        for p in ps
    }
    assert tokenized <= indexed
    # and the phrases it reads a side through: a spelt-out side's phrase goes on as the
    # phrase without it ("calcified right hilar lymph node")
    sides = {"left", "right", "bilateral"}

    def sideless(words: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(w for i, w in enumerate(words) if not (i and w in sides))

    spelt = {sideless(t) for t in tokenized}
    for extra in indexed - tokenized:
        assert sideless(extra) in spelt and sideless(extra) != extra, extra
    assert ("calcified", "right", "hilar", "lymph", "node") in indexed - tokenized
    # the hyphenated and possessive phrases went through the tokenizer
    assert ("ground", "-", "glass", "opacity") in indexed
    assert any(len(p) > 1 and p[1] == "'s" for p in indexed)


@pytest.mark.parametrize(
    "text",
    [
        "Calcified granuloma in the left upper lobe and a right PICC.",
        "Ground-glass opacities with tree-in-bud nodules; no pleural effusions.",
        "Left IJ central venous catheter tip in the SVC, chest tube in place.",
        # (a side inside a phrase is the index's own reading: the test below)
        "Kerley B-lines. Hampton's hump. Old healed rib fractures on the left.",
        "No acute cardiopulmonary abnormality.",
        "",
    ],
)
def test_the_phrase_index_finds_what_the_phrase_matcher_finds(
    nlp: Language, lexicon: Lexicon, text: str
) -> None:
    doc = nlp.make_doc(text)
    index = PhraseIndex(nlp, lexicon, skip_kinds={"anatomy"})
    found = index([t.lower_ for t in doc])
    assert found == _phrase_matcher_reading(nlp, lexicon, doc)
    assert bool(found) == bool(text)


def test_the_phrase_index_keeps_the_longest_then_the_first_match(
    nlp: Language, tmp_path: Path
) -> None:
    path = tmp_path / "lexicon.yaml"
    path.write_text(
        "concepts:\n"
        "  - {id: effusion, name: Effusion, kind: finding, phrases: [pleural effusion]}\n"
        "  - {id: pleura, name: Pleura, kind: finding, phrases: [pleura, pleural]}\n"
        "  - {id: thickening, name: Thickening, kind: finding,\n"
        "     phrases: [effusion thickening]}\n",
        encoding="utf-8",
    )
    index = PhraseIndex(nlp, load_lexicon(str(path)))
    words = ["left", "pleural", "effusion", "thickening", "and", "pleura"]
    # "pleural effusion" and "effusion thickening" overlap: equally long, the first wins
    assert index(words) == [("effusion", 1, 3), ("pleura", 5, 6)]
    assert index(["pleural"]) == [("pleura", 0, 1)]
    assert index([]) == []


def test_the_phrase_index_reads_a_phrase_with_a_side_in_its_midst(
    nlp: Language, tmp_path: Path
) -> None:
    path = tmp_path / "lexicon.yaml"
    path.write_text(
        "concepts:\n"
        "  - {id: shoulder, name: Shoulder, kind: bone,\n"
        "     phrases: [degenerative changes of the shoulder]}\n"
        "  - {id: change, name: Change, kind: bone, phrases: [degenerative changes]}\n",
        encoding="utf-8",
    )
    index = PhraseIndex(nlp, load_lexicon(str(path)))
    words = ["severe", "degenerative", "changes", "of", "the", "right", "shoulder"]
    assert index(words) == [("shoulder", 1, 7)]
    assert index(["degenerative", "changes", "of", "the", "bilateral", "shoulders"]) == [
        ("shoulder", 0, 6)
    ]
    # a side the phrase does not go on after is not taken, nor a word other than a side
    assert index(["degenerative", "changes", "of", "the", "right"]) == [("change", 0, 2)]
    assert index(["degenerative", "changes", "of", "the", "old", "shoulder"]) == [("change", 0, 2)]


def test_the_phrase_index_reads_through_the_lexicons_read_through_words(
    nlp: Language, tmp_path: Path
) -> None:
    path = tmp_path / "lexicon.yaml"
    path.write_text(
        "read_through: [appearing]\n"
        "concepts:\n"
        "  - {id: wide_vessel, name: Wide vessel, kind: finding, phrases: [wide upper vessel]}\n",
        encoding="utf-8",
    )
    index = PhraseIndex(nlp, load_lexicon(str(path)))
    assert index(["a", "wide", "appearing", "upper", "vessel"]) == [("wide_vessel", 1, 5)]
    assert index(["wide", "upper", "vessel"]) == [("wide_vessel", 0, 3)]
    # only where the phrase has no word there, and never a word that is not listed
    assert index(["wide", "looking", "upper", "vessel"]) == []
    assert index(["wide", "appearing"]) == []


def test_an_appearing_between_a_describing_word_and_its_noun_is_read_through(read: Read) -> None:
    aorta = _one(read("FINDINGS: Mildly ectatic appearing ascending aorta."), "ectatic_aorta")
    assert aorta.status == "positive"
    no = read("FINDINGS: No ectatic appearing aorta.")
    assert _one(no, "ectatic_aorta").status == "negative"


def test_a_stacked_describing_word_shares_the_head_of_the_finding_after_it(read: Read) -> None:
    # no "and" between them: "dilated" describes the aorta as "tortuous" does
    got = read("FINDINGS: Slightly dilated tortuous calcified aorta.")
    assert _one(got, "ectatic_aorta").status == "positive"
    assert _one(got, "tortuous_aorta").status == "positive"
    # its head masked ("aortic XXXX"): the aortic arch or knob
    assert _one(read("FINDINGS: Dilated tortuous aortic XXXX."), "ectatic_aorta").text == "Dilated"
    # a word of state is not stacked: the silhouette stays enlarged, not normal
    got = read("FINDINGS: Stable enlarged cardiomediastinal silhouette.")
    assert got.report_findings is not None
    assert "normal_mediastinum" not in {f.concept for f in got.report_findings}


def test_a_packaged_lexicons_phrase_index_is_kept_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vocabulary, "_PATTERN_DIR", tmp_path)
    (tmp_path / "lexicon.cachetest.yaml").write_text(
        "concepts:\n"
        "  - {id: effusion, name: Effusion, kind: finding, phrases: [pleural effusion]}\n"
        "  - {id: ggo, name: GGO, kind: finding, phrases: [ground-glass opacity]}\n",
        encoding="utf-8",
    )
    load_lexicon.cache_clear()
    lexicon = load_lexicon("lexicon.cachetest")
    load_lexicon.cache_clear()
    nlp = spacy.blank("en")
    built = PhraseIndex(nlp, lexicon).root
    assert cache_path(tmp_path / "lexicon.cachetest.yaml", "phrases").is_file()
    assert built["ground"]["-"]["glass"]["opacity"] == {"": "ggo"}

    def refuse(*args: object) -> Any:
        raise AssertionError("built although the cache holds this lexicon's trie")

    with monkeypatch.context() as patched:
        patched.setattr(findings, "_trie", refuse)
        assert PhraseIndex(nlp, lexicon).root == built
    # another tokenizer splits other words: the trie is built again
    nlp.tokenizer.add_special_case("effusion", [{"ORTH": "effus"}, {"ORTH": "ion"}])
    assert PhraseIndex(nlp, lexicon).root["pleural"]["effus"] == {"ion": {"": "effusion"}}
    # a lexicon given by path is the user's: nothing is written beside it
    user = tmp_path / "mine" / "lexicon.yaml"
    user.parent.mkdir()
    user.write_text((tmp_path / "lexicon.cachetest.yaml").read_text(), encoding="utf-8")
    PhraseIndex(nlp, load_lexicon(str(user)))
    assert [p.name for p in user.parent.iterdir()] == ["lexicon.yaml"]


def _phrases_of(index: PhraseIndex) -> list[list[str]]:
    """The word lists the index's trie spells, one per phrase end."""
    out: list[list[str]] = []
    todo: list[tuple[list[str], dict[str, Any]]] = [([], index.root)]
    while todo:
        words, node = todo.pop()
        for word, child in node.items():
            if word == "":
                out.append(words)
            else:
                todo.append(([*words, word], child))
    return out


def test_a_malignancy_named_without_its_organ(read: Read) -> None:
    found = read("IMPRESSION: Right hilar fullness, postoperative versus neoplastic.")
    assert _one(found, "malignancy").status == "uncertain"
    said = read("IMPRESSION: No evidence of malignancy.")
    assert _one(said, "malignancy").status == "negative"
    # a longer name keeps its own concept
    lung = read("IMPRESSION: Findings concerning for lung cancer.")
    assert "lung_cancer" in [f.concept for f in lung.report_findings or ()]


def test_a_change_without_a_comparison_is_no_findings(read: Read) -> None:
    found = read(
        "FINDINGS: Patchy right basilar opacity, possibly pneumonia; followup is advised to "
        "document resolution."
    )
    assert all("change" not in f.attributes for f in found.report_findings or ())


def test_one_statement_of_the_mediastinum_and_the_hila(read: Read) -> None:
    found = read("FINDINGS: Normal heart. Stable mediastinal and hilar contours.")
    hila = _one(found, "normal_mediastinum_hila")
    assert (hila.status, hila.attributes.get("change")) == ("positive", "unchanged")


def test_expanded_lungs_keep_their_clear_lungs(read: Read) -> None:
    found = read("FINDINGS: Both lungs are clear and expanded.")
    assert {"clear_lungs", "normal_lung_volumes"} <= {
        f.concept for f in found.report_findings or ()
    }


def test_a_length_before_a_landmark_is_a_distance_not_a_size(read: Read) -> None:
    found = read(
        "IMPRESSION: Heart size borderline enlarged, tracheostomy tube tip 4.7 cm above the carina."
    )
    heart = _one(found, "borderline_cardiomegaly")
    assert "size_mm" not in heart.attributes
    tube = _one(found, "tracheostomy_tube")
    assert "size_mm" not in tube.attributes and tube.attributes["tip"] == "carina"


def test_a_number_before_a_masked_unit_is_no_count(read: Read) -> None:
    one = _one(read("FINDINGS: There is a XXXX 10 XXXX nodule in the right apex."), "nodule")
    assert "count" not in one.attributes
    two = read("FINDINGS: There are 2 XXXX nodules in the right lung.")
    assert _one(two, "nodule").attributes["count"] == 2


def test_a_port_catheter_is_one_port(read: Read) -> None:
    found = read("FINDINGS: Mediport catheter on the right with the tip in the mid SVC.")
    assert [f.concept for f in found.report_findings or ()] == ["port"]


def test_a_change_the_parse_leaves_alone_is_the_findings_before_it(read: Read) -> None:
    # a relative clause far from its finding, with its comparison in the change's own words
    found = read(
        "FINDINGS: There is a 1 cm nodular density in the right midlung between the third and "
        "fourth anterior ribs which does not appear to be present on the prior study."
    )
    assert _one(found, "nodular_opacity").attributes.get("change") == "new"


def test_readings_joined_by_a_slash_share_their_words(read: Read) -> None:
    found = read("FINDINGS: Mild atelectasis/scarring at the left base.")
    for concept in ("atelectasis", "scarring"):
        assert _one(found, concept).attributes == {
            "laterality": "left",
            "location": ["basilar"],
            "severity": "mild",
        }
    aorta = read("FINDINGS: Mild aortic ectasia/tortuosity.")
    assert _one(aorta, "tortuous_aorta").attributes == {"severity": "mild"}


def test_a_findings_own_word_compared_with_a_prior_is_a_change(read: Read) -> None:
    found = read("FINDINGS: Lung volumes are decreased from the prior study.")
    assert _one(found, "low_lung_volumes").attributes.get("change") == "decreased"
    named = read("FINDINGS: Decreased lung volumes.")
    assert "change" not in _one(named, "low_lung_volumes").attributes


def test_worn_jewellery_implants_and_shunts_are_devices_of_their_own(read: Read) -> None:
    ring = _one(read("FINDINGS: Lungs are clear. Left nipple ring is seen."), "body_piercing")
    assert (ring.kind, ring.attributes.get("laterality")) == ("technique", "left")
    # the irregular plural the loader does not add
    assert _one(read("FINDINGS: There are bilateral breast prostheses."), "breast_implant")
    assert _one(read("IMPRESSION: A TIPS stent projects over the liver."), "tips_shunt")
    # a report's "tips" alone is the ends of leads, not a shunt
    leads = read("FINDINGS: Pacemaker generator with lead tips over the right ventricle.")
    assert "tips_shunt" not in [f.concept for f in leads.report_findings or ()]
    port = _one(read("FINDINGS: Left chest wall venous XXXX XXXX with tip in the SVC."), "port")
    assert port.attributes.get("laterality") == "left"


def test_broken_hardware_and_a_complication_the_report_rules_out(read: Read) -> None:
    screw = _one(read("FINDINGS: The upper plate screw is fractured."), "fractured_hardware")
    assert screw.status == "positive"
    none = _one(read("IMPRESSION: Pacemaker in place without evidence of complication."),
                "complication")  # fmt: skip
    assert none.status == "negative"


def test_the_necks_fusion_is_read_apart(read: Read) -> None:
    neck = _one(read("FINDINGS: Prior anterior cervical fusion."), "cervical_spinal_fusion")
    assert neck.status == "positive"
    assert _one(read("FINDINGS: Posterior spinal fusion hardware."), "spinal_fusion_hardware")


@pytest.mark.parametrize(
    ("text", "concept", "where"),
    [
        ("FINDINGS: Mild subsegmental atelectasis posteriorly.", "subsegmental_atelectasis",
         ["posterior"]),
        ("FINDINGS: Small metallic foreign body in the posterior soft tissues.", "foreign_body",
         ["posterior"]),
        ("FINDINGS: Small bilateral effusions layering posteriorly.", "pleural_effusion",
         ["posterior"]),
        ("FINDINGS: Right basilar opacity extending laterally.", "basilar_opacity",
         ["basilar", "lateral"]),
        # a view is no place
        ("FINDINGS: Opacity seen on the lateral view.", "opacity", None),
    ],
)  # fmt: skip
def test_a_direction_places_a_finding(
    read: Read, text: str, concept: str, where: list[str] | None
) -> None:
    assert _one(read(text), concept).attributes.get("location") == where


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        # a deformity placed in the spine, or at several levels, is a vertebral deformity
        ("FINDINGS: The previously described XXXX deformity in the midthoracic spine is again "
         "seen.", "vertebral_compression_deformity"),
        ("FINDINGS: Mild deformity of the thoracic spine.", "vertebral_compression_deformity"),
        ("FINDINGS: Osteopenia with multilevel XXXX deformities.",
         "vertebral_compression_deformity"),
        # ... or at a thoracic vertebra named by its level, hedged too
        ("FINDINGS: Stable mild deformity of T7.", "vertebral_compression_deformity"),
        ("FINDINGS: Possible XXXX deformity of the T11.", "vertebral_compression_deformity"),
        ("FINDINGS: No deformity of T8.", "vertebral_compression_deformity"),
        # elsewhere, or with no place: the deformity it was
        ("FINDINGS: Deformity of the right clavicle.", "clavicle_deformity"),
        ("FINDINGS: Deformity near the spine and a right rib fracture.", "deformity"),
        # endplate changes placed in the thoracic spine are its degenerative change
        ("FINDINGS: Minimal endplate degenerative changes of the midthoracic spine.",
         "thoracic_endplate_degeneration"),
        ("FINDINGS: Endplate changes in the thoracic spine.", "thoracic_endplate_degeneration"),
        ("FINDINGS: Endplate changes of the spine.", "endplate_degeneration"),
    ],
)  # fmt: skip
def test_a_spine_deformity_or_endplate_change_is_placed_in_the_spine(
    read: Read, text: str, concept: str
) -> None:
    concepts = [f.concept for f in read(text).report_findings or []]
    assert concept in concepts
    placed = {"vertebral_compression_deformity", "thoracic_endplate_degeneration"}
    assert concept in placed or placed.isdisjoint(concepts)


@pytest.mark.parametrize(
    ("text", "concept", "severity"),
    [
        # a describing word joined by "and" shares the head after it, with its own degree
        ("FINDINGS: Mild unfolding and atherosclerotic calcification of the aorta.",
         "unfolded_aorta", "mild"),
        ("FINDINGS: Moderately enlarged and tortuous calcified aorta.", "ectatic_aorta",
         "moderate"),
        ("FINDINGS: Enlarged and tortuous aorta.", "ectatic_aorta", None),
    ],
)  # fmt: skip
def test_coordinated_describing_words_share_their_head(
    read: Read, text: str, concept: str, severity: str | None
) -> None:
    found = read(text).report_findings or []
    assert _one(read(text), concept).attributes.get("severity") == severity
    assert len({f.concept for f in found}) >= 2


def test_a_predicate_before_and_shares_no_head(read: Read) -> None:
    # "the heart is enlarged and ...": what the heart is, not an enlarged aorta
    found = read("FINDINGS: The heart is enlarged and tortuous aorta is seen.").report_findings
    assert "ectatic_aorta" not in [f.concept for f in found or []]


@pytest.mark.parametrize(
    ("text", "concept", "severity"),
    [
        # a predicate adjective after "and" says it of the same subject, with its own degree
        ("FINDINGS: The aorta is tortuous and mildly ectatic.", "ectatic_aorta", "mild"),
        ("FINDINGS: The lungs are well-expanded and clear.", "clear_lungs", None),
        ("FINDINGS: Lungs are expanded and clear of consolidation.", "clear_lungs", None),
    ],
)  # fmt: skip
def test_a_predicate_after_and_shares_its_subject(
    read: Read, text: str, concept: str, severity: str | None
) -> None:
    assert _one(read(text), concept).attributes.get("severity") == severity


@pytest.mark.parametrize(
    ("text", "concepts"),
    [
        # "and" then no adjective: the next clause has its own subject
        ("FINDINGS: The heart is enlarged and the lungs are clear.",
         ["cardiomegaly", "clear_lungs"]),
        # the second word says the first again, or only its change: nothing new
        ("FINDINGS: The mediastinum is normal and unchanged.", ["normal_mediastinum"]),
        ("FINDINGS: Heart size is upper limits of normal and stable.", ["top_normal_heart_size"]),
    ],
)  # fmt: skip
def test_a_predicate_after_and_adds_no_finding_the_first_already_is(
    read: Read, text: str, concepts: list[str]
) -> None:
    assert [f.concept for f in read(text).report_findings or []] == concepts


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        ("FINDINGS: Mild acromioclavicular joint degenerative change on the left.",
         "acromioclavicular_arthritis"),
        ("FINDINGS: Air distending the stomach.", "gastric_distention"),
        ("FINDINGS: Coarse interstitial marking at the bases.", "interstitial_markings"),
        ("FINDINGS: Endplate degenerative change in the lumbar spine.", "endplate_degeneration"),
        ("FINDINGS: One sternotomy wire is interrupted.", "fractured_sternal_wire"),
        ("FINDINGS: Two disrupted sternal wires.", "fractured_sternal_wire"),
    ],
)  # fmt: skip
def test_more_findings_and_hardware_words(read: Read, text: str, concept: str) -> None:
    assert concept in [f.concept for f in read(text).report_findings or []]


def test_dissection_alone_is_the_aortas_and_the_operations_are_postoperative(read: Read) -> None:
    assert _one(read("IMPRESSION: Concern for dissection, CT is recommended."), "aortic_dissection")
    neck = read("FINDINGS: Status post right neck dissection. Clear lungs.")
    assert "aortic_dissection" not in [f.concept for f in neck.report_findings or ()]
    assert _one(neck, "postoperative_change")


@pytest.mark.parametrize(
    ("text", "concept", "expected"),
    [
        # a view names how the film was taken: the words after it are the finding's
        ("Small nodule seen on the lateral view is unchanged.", "nodule", {"change": "unchanged"}),
        ("Opacity seen posteriorly on the lateral view.", "opacity", {"location": ["posterior"]}),
        (
            "Granuloma on the frontal view is stable since the prior exam.",
            "granuloma",
            {"change": "unchanged"},
        ),
        # ... and it hides no finding's own words: nothing to give
        ("Nodule is seen on the lateral view.", "nodule", {}),
    ],
)
def test_a_view_holds_no_attribute(
    read: Read, text: str, concept: str, expected: dict[str, object]
) -> None:
    result = read(f"FINDINGS: {text}")
    found = _one(result, concept)
    for key, value in expected.items():
        assert found.attributes.get(key) == value
    if not expected:
        assert "change" not in found.attributes
    assert result.report_findings is not None
    assert all(not f.attributes for f in result.report_findings if f.concept.endswith("_view"))


@pytest.mark.parametrize(
    ("text", "concept", "expected"),
    [
        # describing words joined by "and" before one finding are all its own
        (
            "There are stable appearing left upper and right upper lobe bullae.",
            "bulla",
            {"change": "unchanged", "laterality": "bilateral"},
        ),
        (
            "Stable mild left apical and right apical pleural thickening.",
            "apical_pleural_thickening",
            {"change": "unchanged", "laterality": "bilateral"},
        ),
        # ... but not across another finding's noun
        (
            "Stable moderate levoscoliosis and mild right basilar atelectasis.",
            "basilar_atelectasis",
            {"change": None, "laterality": "right"},
        ),
        (
            "Stable left shoulder and right basilar atelectasis.",
            "basilar_atelectasis",
            {"change": None, "laterality": "right"},
        ),
    ],
)
def test_describing_words_joined_before_a_finding(
    read: Read, text: str, concept: str, expected: dict[str, object]
) -> None:
    found = _one(read(f"FINDINGS: {text}"), concept)
    for key, value in expected.items():
        assert found.attributes.get(key) == value


@pytest.mark.parametrize(
    ("text", "concept", "changed"),
    [
        # items of a list governed by a noun share its change
        (
            "Stable appearance of the right hilar node calcifications and a few granulomas.",
            "granuloma",
            "unchanged",
        ),
        (
            "Stable appearance of the aortic calcification and the calcified granuloma.",
            "calcified_granuloma",
            "unchanged",
        ),
        # ... not a finding after the governed list's sentence breaks
        (
            "Unchanged appearance of the granuloma, but new left effusion.",
            "pleural_effusion",
            "new",
        ),
        # no governing noun: the change word is the first item's own
        ("Stable granuloma and small effusion.", "pleural_effusion", None),
        # a device placed or an operation done since the last study is new
        ("Interval placement of a left-sided catheter.", "vascular_catheter", "new"),
        ("Interval performance of a cervical spinal fusion.", "cervical_spinal_fusion", "new"),
        ("Interval insertion of a right chest tube.", "chest_tube", "new"),
        # ... a device said without it is not
        ("Left-sided catheter in place.", "vascular_catheter", None),
    ],
)
def test_a_change_shared_by_a_governed_list_or_said_by_an_interval_placement(
    read: Read, text: str, concept: str, changed: str | None
) -> None:
    found = _one(read(f"FINDINGS: {text}"), concept)
    assert found.attributes.get("change") == changed


@pytest.mark.parametrize(
    ("text", "concept", "status", "side"),
    [
        # the diaphragm's shapes in a report's other words
        ("The hemidiaphragms are flat.", "flattened_diaphragm", "positive", None),
        ("Small right diaphragmatic hump.", "elevated_hemidiaphragm", "positive", "right"),
        ("The left hemidiaphragm is eventrated.", "eventration", "positive", "left"),
        ("Eventration of right hemidiaphragm.", "eventration", "positive", "right"),
        # a hilum that is full or distorted
        ("Mild fullness of the left hilum.", "hilar_enlargement", "positive", "left"),
        ("The right hilum is full.", "hilar_enlargement", "positive", "right"),
        ("Distortion of the right hilum.", "hilar_distortion", "positive", "right"),
        ("No hilar distortion.", "hilar_distortion", "negative", None),
        # a curve's side said before it
        ("Mild dextro curvature of the thoracic spine.", "dextroscoliosis", "positive", "right"),
        ("Levo curvature of the spine.", "levoscoliosis", "positive", "left"),
        # air trapping is its own finding, hedged by a "versus" hung on its last word
        ("Hyperinflated lungs, air trapping versus inspiratory effort.", "air_trapping",
         "uncertain", None),
        ("Hyperinflated lungs may represent air trapping.", "air_trapping", "uncertain", None),
        ("Hyperinflated lungs with air trapping.", "air_trapping", "positive", None),
        ("No air trapping.", "air_trapping", "negative", None),
        ("Reversal of the normal cervical lordosis.", "reversed_lordosis", "positive", None),
        # a straightened kyphosis is a finding of its own, not a kyphosis
        ("Mild straightening of the thoracic kyphosis.", "straightened_kyphosis", "positive",
         None),
        ("Loss of the normal thoracic kyphosis.", "straightened_kyphosis", "positive", None),
        # a degenerative disc change placed in the thoracic spine is the thoracic spine's
        ("Mild degenerative disc change at the thoracic spine.", "degenerative_thoracic_spine",
         "positive", None),
        # a hedge before the finding on a word of it is not read this way
        ("Age-indeterminate wedge deformity of a vertebral body.",
         "vertebral_compression_deformity", "positive", None),
    ],
)  # fmt: skip
def test_diaphragm_hilum_curve_and_air_trapping_words(
    read: Read, text: str, concept: str, status: str, side: str | None
) -> None:
    found = _one(read(f"FINDINGS: {text}"), concept)
    assert (found.status, found.attributes.get("laterality")) == (status, side)


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        # a study called limited after its noun, or in the predicate form of "limited study"
        ("FINDINGS: The study is limited by patient motion.", "technical_limitation"),
        ("IMPRESSION: Exam limited on the lateral view by the arms.", "technical_limitation"),
        ("FINDINGS: Limited film due to rotation.", "technical_limitation"),
        # ... a study called suboptimal, and its inspiration
        ("FINDINGS: The examination is suboptimal. Clear lungs.", "technical_limitation"),
        ("FINDINGS: The film is suboptimal. Clear lungs.", "technical_limitation"),
        ("FINDINGS: Inspiration is suboptimal. Clear lungs.", "poor_inspiration"),
        # a part left off one view, or cut off
        ("FINDINGS: The posterior sulci are excluded on the lateral view.", "clipped_field"),
        ("FINDINGS: The right costophrenic angle is excluded from the PA film.", "clipped_field"),
        ("FINDINGS: The lung apices are cut off. Clear lungs.", "clipped_field"),
        # the patient's own chin or arms over the chest limit the study
        ("FINDINGS: The patient's chin obscures both lung apices.", "overlying_body_part"),
        (
            "IMPRESSION: Lateral view limited by soft tissue and bony structures of the arms.",
            "overlying_body_part",
        ),
        # a heart called small in its own words
        ("FINDINGS: Small sized heart. Clear lungs.", "small_heart"),
        ("FINDINGS: The heart is small.", "small_heart"),
    ],
)
def test_a_limited_study_and_a_small_heart_in_the_reports_words(
    read: Read, text: str, concept: str
) -> None:
    assert _one(read(text), concept).status == "positive"


def test_a_study_not_limited_is_no_limitation(read: Read) -> None:
    result = read("FINDINGS: The study is not limited. The heart is normal in size.")
    assert result.report_findings is not None
    positive = [f.concept for f in result.report_findings if f.status == "positive"]
    assert "technical_limitation" not in positive
    result = read("FINDINGS: The study is not suboptimal. Clear lungs.")
    assert result.report_findings is not None
    assert "technical_limitation" not in [
        f.concept for f in result.report_findings if f.status == "positive"
    ]
    assert "small_heart" not in positive


def test_well_expanded_and_clear_lungs_keep_both(read: Read) -> None:
    found = read("IMPRESSION: Well-expanded and clear lungs. No effusion.")
    assert {"clear_lungs", "normal_lung_volumes"} <= {
        f.concept for f in found.report_findings or ()
    }


def test_a_straightened_kyphosis_is_no_kyphosis(read: Read) -> None:
    found = read("FINDINGS: Straightening of the normal thoracic kyphosis.").report_findings
    assert [f.concept for f in found or () if f.status == "positive"] == ["straightened_kyphosis"]


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        # the fixing of a fracture, or the stabilizing of the spine, is hardware
        ("FINDINGS: Interval fixation of the left humeral fracture.", "orthopedic_hardware"),
        ("FINDINGS: Lower lumbar vertebral body stabilization.", "spinal_fusion_hardware"),
        ("FINDINGS: Prior spinal stabilization. Clear lungs.", "spinal_fusion_hardware"),
    ],
)
def test_fixation_and_stabilization_are_hardware(read: Read, text: str, concept: str) -> None:
    assert _one(read(text), concept).status == "positive"


def test_no_fixation_is_no_hardware(read: Read) -> None:
    assert _one(
        read("FINDINGS: No internal fixation. Clear lungs."), "orthopedic_hardware"
    ).status == ("negative")


def test_a_flattened_posterior_diaphragm_keeps_its_degree(read: Read) -> None:
    found = read("FINDINGS: Hyperinflated lungs with mildly flattened posterior diaphragm.")
    diaphragm = _one(found, "flattened_diaphragm")
    assert (diaphragm.status, diaphragm.attributes.get("severity")) == ("positive", "mild")
    assert _one(
        read("FINDINGS: No flattening of the posterior diaphragm."), "flattened_diaphragm"
    ).status == ("negative")


@pytest.mark.parametrize(
    "text",
    ["Heart size is at the upper limits of normal.", "The heart is near top normal in size."],
)
def test_a_heart_at_the_top_of_normal_keeps_the_report_normal(read: Read, text: str) -> None:
    found = read(f"FINDINGS: {text} Lungs are clear.")
    heart = _one(found, "top_normal_heart_size")
    assert (heart.status, heart.mesh) == ("positive", "normal")
    assert "borderline_cardiomegaly" not in {f.concept for f in found.report_findings or ()}
    assert found.normal is True
    # ... an enlargement as the other reading is borderline
    for hedged_text in (
        "Heart size at upper limits of normal to borderline enlarged.",
        "The cardiac silhouette is at the upper limits of normal or mildly enlarged.",
    ):
        hedged = read(f"FINDINGS: {hedged_text}")
        assert _one(hedged, "borderline_cardiomegaly").status == "positive"
        assert hedged.normal is False


@pytest.mark.parametrize(
    ("text", "change"),
    [
        ("There has been interval increase in size of the cardiac silhouette.", "increased"),
        ("Moderate increase in the size of the cardiac silhouette.", "increased"),
        ("Interval enlargement in the cardiac silhouette.", "increased"),
    ],
)
def test_an_increase_in_size_of_the_cardiac_silhouette_is_its_enlargement(
    read: Read, text: str, change: str
) -> None:
    found = read(f"FINDINGS: {text}")
    heart = _one(found, "enlarged_cardiac_silhouette")
    assert (heart.status, heart.mesh, heart.attributes.get("change")) == (
        "positive",
        "Cardiac Shadow/enlarged",
        change,
    )
    assert found.normal is False
