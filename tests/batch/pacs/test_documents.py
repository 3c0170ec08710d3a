"""DICOM results (batch/pacs/documents.py): TID 1500 SR and GSPS, re-read and validated."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path
from typing import Any

import highdicom as hd
import numpy as np
import pydicom
import pytest
from service_fixtures import PATIENT_ID, build_dataset, chest_pixels

from batch.pacs.codes import PRIVATE_SCHEME, code_for, load_finding_codes
from batch.pacs.documents import ModelInfo, build_gsps, build_sr, document_uids
from models.boxes import Box
from models.predict import Prediction

pytestmark = pytest.mark.issue(10)

CARD = {"name": "cxr-chestnet", "version": "v7", "demo": False}
DEMO_CARD = CARD | {"demo": True}


def _source(**elements: Any) -> pydicom.Dataset:
    return build_dataset(pixels=chest_pixels(48, 64), **elements)


def _prediction() -> Prediction:
    return Prediction(
        probabilities={"Effusion": 0.81, "Mass": 0.64, "Nodule": 0.1, "Atelectasis": 0.55},
        positive=["Effusion", "Mass", "Atelectasis"],
        boxes=[
            Box("Effusion", 2.0, 3.0, 20.0, 10.0, 0.5),
            Box("Effusion", 30.0, 30.0, 60.0, 40.0, 0.4),  # runs past the image: clipped
            Box("Mass", 10.0, 10.0, 5.0, 6.0, 0.3),
        ],
    )


def _roundtrip(ds: pydicom.Dataset) -> pydicom.Dataset:
    buffer = io.BytesIO()
    ds.save_as(buffer, enforce_file_format=True)
    return pydicom.dcmread(io.BytesIO(buffer.getvalue()))


def _dciodvfy_errors(ds: pydicom.Dataset, tmp_path: Path) -> list[str]:
    if shutil.which("dciodvfy") is None:
        pytest.skip("dciodvfy (Debian dicom3tools) not installed")
    path = tmp_path / "object.dcm"
    ds.save_as(path, enforce_file_format=True)
    run = subprocess.run(["dciodvfy", str(path)], capture_output=True, text=True, timeout=60)
    return [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("Error")]


def test_finding_codes_file_is_valid_and_private_codes_are_unique() -> None:
    codes = load_finding_codes()
    assert {"Effusion", "Cardiomegaly", "Pneumothorax", "Hernia"} <= set(codes)
    private = [c.value for c in codes.values() if c.scheme == PRIVATE_SCHEME]
    assert len(private) == len(set(private))
    assert code_for("Effusion").scheme == "SCT"
    odd = code_for("Weird label / x\\y")
    assert odd.scheme == PRIVATE_SCHEME and "\\" not in odd.value and "/" not in odd.value


@pytest.mark.parametrize("card", [CARD, DEMO_CARD], ids=["model", "demo"])
def test_sr_tid1500_content_rereads_with_highdicom(card: dict[str, Any], tmp_path: Path) -> None:
    source = _source()
    sr = hd.sr.Comprehensive3DSR.from_dataset(_roundtrip(build_sr(source, _prediction(), card)))

    assert sr.StudyInstanceUID == source.StudyInstanceUID
    assert sr.PatientID == PATIENT_ID
    assert sr.SeriesInstanceUID != source.SeriesInstanceUID
    root = sr.ContentSequence
    # Observer device carries the model's name and version.
    texts = {i.ConceptNameCodeSequence[0].CodeMeaning: getattr(i, "TextValue", None) for i in root}
    assert texts["Device Observer Name"] == "cxr-chestnet"
    assert texts["Device Observer Model Name"] == "cxr-chestnet v7"
    # The image library references the source image.
    library = next(i for i in root if i.ConceptNameCodeSequence[0].CodeValue == "111028")
    image = library.ContentSequence[0].ContentSequence[-1]
    assert image.ReferencedSOPSequence[0].ReferencedSOPInstanceUID == source.SOPInstanceUID

    groups = sr.content.get_image_measurement_groups()
    assert [g.tracking_identifier for g in groups] == [
        "Finding 1: Effusion",
        "Finding 2: Mass",
        "Finding 3: Atelectasis",
    ]
    assert len({g.tracking_uid for g in groups}) == 3
    assert [g.finding_type.value for g in groups] == ["60046008", "4147007", "CXR0001"]
    assert [g.finding_type.scheme_designator for g in groups] == ["SCT", "SCT", PRIVATE_SCHEME]
    effusion = groups[0].get_measurements()[0]
    assert effusion.name.value == "122157" and effusion.value == pytest.approx(0.81)
    assert effusion.unit.value == "1"
    scoords = effusion.referenced_coordinates  # TID 320, INFERRED FROM
    assert len(scoords) == 2 and all(s.RelationshipType == "INFERRED FROM" for s in scoords)
    for item in scoords:
        assert item.GraphicType == "POLYLINE"
        points = np.asarray(item.GraphicData, dtype=float).reshape(-1, 2)
        assert len(points) == 5 and np.array_equal(points[0], points[-1])  # closed
        ref = item.ContentSequence[0].ReferencedSOPSequence[0]
        assert ref.ReferencedSOPInstanceUID == source.SOPInstanceUID
    first = np.asarray(scoords[0].GraphicData, dtype=float).reshape(-1, 2)
    assert first[:4].tolist() == [[2, 3], [22, 3], [22, 13], [2, 13]]
    clipped = np.asarray(scoords[1].GraphicData, dtype=float).reshape(-1, 2)
    assert clipped[:, 0].max() == 64 and clipped[:, 1].max() == 48  # within the image
    # A positive finding without a box still reports its probability.
    assert groups[2].get_measurements()[0].value == pytest.approx(0.55)
    # The private coding scheme is identified in the header.
    assert [s.CodingSchemeDesignator for s in sr.CodingSchemeIdentificationSequence] == [
        PRIVATE_SCHEME
    ]
    is_demo = "DEMO" in sr.SeriesDescription
    comments = [i.TextValue for i in root if i.ConceptNameCodeSequence[0].CodeValue == "121106"]
    assert is_demo == card["demo"] and bool(comments) == card["demo"]
    assert _dciodvfy_errors(sr, tmp_path) == []


@pytest.mark.parametrize("card", [CARD, DEMO_CARD], ids=["model", "demo"])
def test_gsps_draws_boxes_and_labels_in_one_layer(card: dict[str, Any], tmp_path: Path) -> None:
    source = _source()
    gsps = _roundtrip(build_gsps(source, _prediction(), card))

    assert gsps.SOPClassUID == "1.2.840.10008.5.1.4.1.1.11.1"
    assert gsps.StudyInstanceUID == source.StudyInstanceUID
    series = gsps.ReferencedSeriesSequence[0]
    assert series.SeriesInstanceUID == source.SeriesInstanceUID
    assert series.ReferencedImageSequence[0].ReferencedSOPInstanceUID == source.SOPInstanceUID
    assert [layer.GraphicLayer for layer in gsps.GraphicLayerSequence] == ["CXR_AI"]
    [annotation] = gsps.GraphicAnnotationSequence
    assert annotation.GraphicLayer == "CXR_AI"
    ref = annotation.ReferencedImageSequence[0]
    assert ref.ReferencedSOPInstanceUID == source.SOPInstanceUID
    objects = annotation.GraphicObjectSequence
    assert len(objects) == 3
    assert all(o.GraphicType == "POLYLINE" and o.NumberOfGraphicPoints == 5 for o in objects)
    assert all(o.GraphicAnnotationUnits == "PIXEL" for o in objects)
    texts = [t.UnformattedTextValue for t in annotation.TextObjectSequence]
    assert "Effusion 0.81" in texts and "Mass 0.64" in texts and "Atelectasis 0.55" in texts
    assert any("DEMO" in t for t in texts) == card["demo"]
    assert ("DEMO" in gsps.ContentDescription) == card["demo"]
    assert _dciodvfy_errors(gsps, tmp_path) == []


def test_documents_without_findings_are_still_valid(tmp_path: Path) -> None:
    source = _source()
    nothing = Prediction(probabilities={"Effusion": 0.1}, positive=[])
    sr = build_sr(source, nothing, CARD)
    [group] = hd.sr.Comprehensive3DSR.from_dataset(
        _roundtrip(sr)
    ).content.get_image_measurement_groups()
    assert group.finding_type.meaning == "No finding" and group.get_measurements() == []
    assert _dciodvfy_errors(sr, tmp_path) == []
    gsps = build_gsps(source, nothing, CARD)
    assert "GraphicAnnotationSequence" not in gsps
    assert _dciodvfy_errors(gsps, tmp_path) == []


def test_documents_have_stable_uids_for_reruns() -> None:
    source = _source()
    first, again = build_sr(source, _prediction(), CARD), build_sr(source, _prediction(), CARD)
    assert first.SOPInstanceUID == again.SOPInstanceUID
    assert first.SeriesInstanceUID == again.SeriesInstanceUID
    other_model = build_sr(source, _prediction(), CARD | {"version": "v8"})
    assert other_model.SOPInstanceUID != first.SOPInstanceUID
    uids = document_uids(source, ModelInfo.from_card(CARD))
    assert build_gsps(source, _prediction(), CARD).SOPInstanceUID == uids.gsps_instance
    assert len({uids.sr_instance, uids.gsps_instance, uids.sr_series, uids.gsps_series}) == 4


@pytest.mark.parametrize("missing", ["SOPInstanceUID", "StudyInstanceUID", "Rows"])
def test_documents_refuse_a_source_they_cannot_reference(missing: str) -> None:
    source = _source()
    delattr(source, missing)
    with pytest.raises(ValueError, match="source image lacks"):
        build_sr(source, _prediction(), CARD)
    with pytest.raises(ValueError, match="source image lacks"):
        build_gsps(source, _prediction(), CARD)


def test_sr_from_a_real_prediction_validates(demo_predictor: Any, tmp_path: Path) -> None:
    pixels = chest_pixels(80, 96)
    source = _source(PatientOrientation=["P", "F"], ImagerPixelSpacing=[0.2, 0.2])
    source.Rows, source.Columns = pixels.shape
    [prediction] = demo_predictor.predict([pixels / pixels.max()], heatmaps="none")
    assert prediction.boxes  # thresholds at 0: every label positive, with boxes
    sr = build_sr(source, prediction, demo_predictor.card)
    groups = hd.sr.Comprehensive3DSR.from_dataset(_roundtrip(sr)).content
    assert len(groups.get_image_measurement_groups()) == len(demo_predictor.labels)
    assert "DEMO" in sr.SeriesDescription
    assert _dciodvfy_errors(sr, tmp_path) == []
    assert _dciodvfy_errors(build_gsps(source, prediction, demo_predictor.card), tmp_path) == []
