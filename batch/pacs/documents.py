"""Results as DICOM: a TID 1500 Comprehensive 3D SR and a GSPS per image (highdicom).

    sr = build_sr(source, prediction, card)        # highdicom.sr.Comprehensive3DSR
    gsps = build_gsps(source, prediction, card)    # highdicom.pr.GrayscaleSoftcopyPresentationState

`source` is the image's pydicom header (pixel data not needed); `prediction` a
`models.predict.Prediction` whose boxes are in the image's pixel coordinates; `card`
the model card (`Predictor.card`). Both objects join the image's study, in their own
series. Their UIDs are derived from the image's SOP Instance UID and the model's name
and version, so building them again (a rerun, a retry) gives the same UIDs: a PACS
stores the object once instead of collecting duplicates.

SR content tree (TID 1500 Imaging Measurement Report):

- observer device (TID 1004): the model's name and version;
- image library (TID 1600): the source image;
- one measurement group (TID 1501) per positive finding: tracking identifier and UID,
  the finding's code (`finding_codes.v1.yaml`), the algorithm (TID 4019), the source
  image, and the probability as a NUM (DCM 122157 "Probability", unit "1") inferred
  from one closed POLYLINE SCOORD per box (TID 320, image pixel coordinates);
- a demo model adds a TEXT comment, and the series description says so.
"""

from __future__ import annotations

import logging
import uuid
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import highdicom as hd
import numpy as np
from highdicom.coding_schemes import CodingSchemeIdentificationItem
from highdicom.sr import (
    AlgorithmIdentification,
    CodedConcept,
    Comprehensive3DSR,
    CoordinatesForMeasurement,
    DeviceObserverIdentifyingAttributes,
    GraphicTypeValues,
    Measurement,
    MeasurementReport,
    MeasurementsAndQualitativeEvaluations,
    ObservationContext,
    ObserverContext,
    RelationshipTypeValues,
    SourceImageForMeasurementGroup,
    SourceImageForRegion,
    TextContentItem,
    TrackingIdentifier,
)
from pydicom.dataset import Dataset
from pydicom.sr.codedict import codes

from batch.pacs.codes import PRIVATE_SCHEME, code_for, private_scheme_description
from batch.pacs.source_attributes import copy_source_attributes
from models.boxes import Box
from models.predict import Prediction

__all__ = ["ModelInfo", "NotGrayscaleError", "build_gsps", "build_sr", "document_uids"]

log = logging.getLogger(__name__)

MANUFACTURER = "cxr"
SR_SERIES_NUMBER = 9901
GSPS_SERIES_NUMBER = 9902
GSPS_LAYER = "CXR_AI"
_PROBABILITY = CodedConcept("122157", "DCM", "Probability")
_NO_UNITS = CodedConcept("1", "UCUM", "no units")
DEMO_NOTE = "DEMO MODEL (random or phantom weights): not for clinical use"


class NotGrayscaleError(ValueError):
    """The image is not grayscale: a GSPS cannot present it (its SR can still be built)."""


# A GSPS applies to grayscale images only (its pipeline starts from one sample per
# pixel); a colour image would need a Color Softcopy Presentation State. PALETTE COLOR is
# the one colour interpretation with a single sample per pixel.
_PALETTE = "PALETTE COLOR"


@dataclass(frozen=True)
class ModelInfo:
    """What the DICOM results say about the model that produced them."""

    name: str
    version: str
    demo: bool

    @classmethod
    def from_card(cls, card: dict[str, Any]) -> ModelInfo:
        return cls(
            name=str(card.get("name") or "cxr-chestnet"),
            version=str(card.get("version") or "unknown"),
            demo=bool(card.get("demo", False)),
        )

    @property
    def title(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(frozen=True)
class DocumentUIDs:
    """Deterministic UIDs of the results of one model for one image."""

    sr_series: str
    sr_instance: str
    gsps_series: str
    gsps_instance: str


def _uid(*parts: str) -> str:
    # A name-based UUID as a 2.25 UID (PS3.5 B.2): stable across runs for the same inputs.
    return f"2.25.{uuid.uuid5(uuid.NAMESPACE_OID, chr(31).join(parts)).int}"


def document_uids(source: Dataset, model: ModelInfo) -> DocumentUIDs:
    """The UIDs the SR and GSPS of `source` by `model` get (the same on every run)."""
    study, sop = str(source.StudyInstanceUID), str(source.SOPInstanceUID)
    return DocumentUIDs(
        sr_series=_uid("cxr-sr-series", study, model.name, model.version),
        sr_instance=_uid("cxr-sr", sop, model.name, model.version),
        gsps_series=_uid("cxr-gsps-series", study, model.name, model.version),
        gsps_instance=_uid("cxr-gsps", sop, model.name, model.version),
    )


def _series_description(kind: str, model: ModelInfo) -> str:
    text = f"AI {kind} {model.title}"
    return (f"{text} DEMO not for clinical use" if model.demo else text)[:64]


def _closed_box(box: Box, rows: int, columns: int) -> np.ndarray:
    """Box corners clockwise from top-left, first point repeated: (5, 2) float32 (x, y)."""
    x0, y0 = max(0.0, float(box.x)), max(0.0, float(box.y))
    x1 = min(float(columns), float(box.x) + float(box.width))
    y1 = min(float(rows), float(box.y) + float(box.height))
    return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]], dtype=np.float32)


def _finding_concept(label: str) -> CodedConcept:
    code = code_for(label)
    return CodedConcept(value=code.value, scheme_designator=code.scheme, meaning=code.meaning)


def _boxes_by_label(prediction: Prediction) -> dict[str, list[Box]]:
    out: dict[str, list[Box]] = {name: [] for name in prediction.positive}
    for box in prediction.boxes:
        if box.label in out and box.width > 0 and box.height > 0:
            out[box.label].append(box)
    return out


def _check_source(source: Dataset) -> tuple[int, int]:
    missing = [
        k
        for k in ("StudyInstanceUID", "SeriesInstanceUID", "SOPInstanceUID", "SOPClassUID")
        if not str(source.get(k, "") or "")
    ]
    if missing:
        raise ValueError(f"source image lacks {', '.join(missing)}: cannot reference it")
    rows, columns = int(source.get("Rows", 0) or 0), int(source.get("Columns", 0) or 0)
    if rows < 1 or columns < 1:
        raise ValueError("source image lacks Rows/Columns: not an image")
    return rows, columns


# highdicom's image library entry (TID 1603) reads PatientOrientation and
# ImagerPixelSpacing of CR/DX images unconditionally, but many real radiographs lack
# them (both are optional there). The entry is built from a copy with placeholders and
# the placeholder descriptors are removed again: the SR never states invented values.
_ORIENTATION = ("PatientOrientation", ("111044", "111043"))  # row, column descriptors
_SPACING = ("ImagerPixelSpacing", ("111026", "111066"))  # horizontal, vertical


def _copied(source: Dataset) -> tuple[Dataset, int, int]:
    """The attributes the results copy, valid (`source_attributes`), and the image size."""
    copied = copy_source_attributes(source)
    for correction in copied.corrections:
        # A push sink copies first and logs once per job; a direct caller gets debug lines.
        log.debug("SR/GSPS: the source image's %s", correction)
    view = copied.dataset
    rows, columns = _check_source(view)
    return view, rows, columns


@contextmanager
def _quiet_person_names() -> Iterator[None]:
    # highdicom warns about a one-component Patient's Name quoting the name (a patient
    # identifier in the log); such a name is valid DICOM, so the warning is silenced.
    # (catch_warnings is process-wide: another thread's warnings are filtered meanwhile.)
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*unlikely to represent the intended person name"
        )
        yield


def _library_view(source: Dataset) -> tuple[Dataset, set[str]]:
    view = Dataset()
    view.update(source)
    if "Modality" not in view:  # read to choose the modality's descriptors: none then
        view.Modality = ""
    placeholders: set[str] = set()
    for keyword, concepts in (_ORIENTATION, _SPACING):
        value = source.get(keyword)
        if value is None or len(value) != 2 or not all(str(v).strip() for v in value):
            setattr(view, keyword, ["X", "X"] if keyword == "PatientOrientation" else [1, 1])
            placeholders.update(concepts)
    return view, placeholders


def _drop_descriptors(content: Dataset, concepts: set[str]) -> None:
    if not concepts:
        return
    for item in content.ContentSequence:
        if item.ConceptNameCodeSequence[0].CodeValue != "111028":  # Image Library
            continue
        for group in item.ContentSequence:
            for entry in group.ContentSequence:
                if "ContentSequence" in entry:
                    entry.ContentSequence = [
                        d
                        for d in entry.ContentSequence
                        if d.ConceptNameCodeSequence[0].CodeValue not in concepts
                    ]


def build_sr(source: Dataset, prediction: Prediction, card: dict[str, Any]) -> Comprehensive3DSR:
    """A TID 1500 Imaging Measurement Report of one image's prediction.

    Args:
        source: the image's header (patient, study, series, SOP identifiers; Rows, Columns).
        prediction: the model's result for this image (boxes in its pixel coordinates).
        card: the model card (`name`, `version`, `demo`).

    Returns:
        A Comprehensive 3D SR in the image's study.

    Raises:
        ValueError: the source lacks the identifiers or the size needed to reference it.
    """
    source, rows, columns = _copied(source)
    model = ModelInfo.from_card(card)
    uids = document_uids(source, model)
    device = ObserverContext(
        observer_type=codes.cid270.Device,
        observer_identifying_attributes=DeviceObserverIdentifyingAttributes(
            uid=_uid("cxr-device", model.name, model.version),
            name=model.name,
            manufacturer_name=MANUFACTURER,
            model_name=model.title,
        ),
    )
    groups = _measurement_groups(source, prediction, model, rows, columns)
    library_view, placeholders = _library_view(source)
    report = MeasurementReport(
        observation_context=ObservationContext(observer_device_context=device),
        procedure_reported=codes.SCT.ImagingProcedure,
        imaging_measurements=groups,
        referenced_images=[library_view],
    )
    content = report[0]
    _drop_descriptors(content, placeholders)
    if model.demo:
        content.ContentSequence.append(
            TextContentItem(
                name=codes.DCM.Comment,
                value=DEMO_NOTE,
                relationship_type=RelationshipTypeValues.CONTAINS,
            )
        )
    schemes = _coding_schemes(prediction)
    with _quiet_person_names():
        return Comprehensive3DSR(
            evidence=[source],
            coding_schemes=schemes,
            content=content,
            series_instance_uid=uids.sr_series,
            series_number=SR_SERIES_NUMBER,
            sop_instance_uid=uids.sr_instance,
            instance_number=1,
            manufacturer=MANUFACTURER,
            is_complete=True,
            series_description=_series_description("SR", model),
            content_qualification=hd.ContentQualificationValues.RESEARCH,
        )


def _measurement_groups(
    source: Dataset, prediction: Prediction, model: ModelInfo, rows: int, columns: int
) -> list[MeasurementsAndQualitativeEvaluations]:
    """One group per positive label, its probability measured on the label's boxes; or one
    "No finding" group."""
    algorithm = AlgorithmIdentification(
        name=model.name,
        version=model.version,
        parameters=[DEMO_NOTE] if model.demo else None,
    )
    region_source = SourceImageForRegion(
        referenced_sop_class_uid=str(source.SOPClassUID),
        referenced_sop_instance_uid=str(source.SOPInstanceUID),
    )
    groups: list[MeasurementsAndQualitativeEvaluations] = []
    for number, (label, boxes) in enumerate(_boxes_by_label(prediction).items(), start=1):
        coordinates = [
            CoordinatesForMeasurement(
                graphic_type=GraphicTypeValues.POLYLINE,
                graphic_data=_closed_box(box, rows, columns),
                source_image=region_source,
            )
            for box in boxes
        ]
        probability = Measurement(
            name=_PROBABILITY,
            value=float(prediction.probabilities[label]),
            unit=_NO_UNITS,
            algorithm_id=algorithm,
            referenced_coordinates=coordinates or None,
        )
        groups.append(
            MeasurementsAndQualitativeEvaluations(
                tracking_identifier=TrackingIdentifier(
                    uid=_uid("cxr-finding", str(source.SOPInstanceUID), model.title, label),
                    identifier=f"Finding {number}: {label}",
                ),
                finding_type=_finding_concept(label),
                algorithm_id=algorithm,
                measurements=[probability],
                source_images=[
                    SourceImageForMeasurementGroup(
                        referenced_sop_class_uid=str(source.SOPClassUID),
                        referenced_sop_instance_uid=str(source.SOPInstanceUID),
                    )
                ],
            )
        )
    if not groups:
        # TID 1500 needs a group: a negative result is reported as one "No finding" group,
        # so a reader sees the model ran and found nothing above its thresholds.
        groups.append(
            MeasurementsAndQualitativeEvaluations(
                tracking_identifier=TrackingIdentifier(
                    uid=_uid("cxr-finding", str(source.SOPInstanceUID), model.title, ""),
                    identifier="No finding above the model's thresholds",
                ),
                finding_type=_finding_concept("No Finding"),
                algorithm_id=algorithm,
                source_images=[
                    SourceImageForMeasurementGroup(
                        referenced_sop_class_uid=str(source.SOPClassUID),
                        referenced_sop_instance_uid=str(source.SOPInstanceUID),
                    )
                ],
            )
        )
    return groups


def _coding_schemes(prediction: Prediction) -> list[CodingSchemeIdentificationItem] | None:
    """The private coding scheme's identification, when a label reported is coded in it."""
    used = prediction.positive or ["No Finding"]
    if not any(code_for(label).scheme == PRIVATE_SCHEME for label in used):
        return None
    described = private_scheme_description()
    return [
        CodingSchemeIdentificationItem(
            designator=PRIVATE_SCHEME,
            name=described.get("name"),
            version=described.get("version"),
            responsible_organization=described.get("responsible_organization"),
        )
    ]


def _check_grayscale(source: Dataset, copied: Dataset) -> None:
    """Raise NotGrayscaleError for a colour image (`copied`: its checked attributes)."""
    samples = int(copied.get("SamplesPerPixel") or 1)  # absent or left out: one, as below
    # Photometric Interpretation is not copied, so a header already copied (the push
    # sink's) is judged by Samples per Pixel alone. It is read from the bytes, not
    # through pydicom's conversion, whose warnings would quote a malformed value.
    element = source.get_item(0x00280004)
    raw = element.value if element is not None else None
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw or "")
    photometric = text.strip(" \x00").upper()
    if samples != 1 or photometric == _PALETTE:
        known = photometric in (_PALETTE, "RGB", "YBR_FULL", "YBR_FULL_422", "YBR_ICT", "YBR_RCT")
        kind = photometric if known else f"{samples} samples per pixel"
        raise NotGrayscaleError(
            f"source image is colour ({kind}): a GSPS presents grayscale images only"
        )


def _label_text(label: str, probability: float) -> str:
    return f"{label} {probability:.2f}"[:64]


def build_gsps(
    source: Dataset, prediction: Prediction, card: dict[str, Any]
) -> hd.pr.GrayscaleSoftcopyPresentationState:
    """A GSPS drawing the boxes and labels of one image's positive findings in one layer.

    Each box is a closed POLYLINE with its label and probability as text at its top-left
    corner; a positive finding without a box (and the demo warning) is listed as text in
    the image's top-left corner.

    Raises:
        NotGrayscaleError: the image is colour (RGB, YBR..., PALETTE COLOR); the SR of the
            same image can still be built.
        ValueError: the source lacks the identifiers or the size needed to reference it.
    """
    copied, rows, columns = _copied(source)
    _check_grayscale(source, copied)
    source = copied
    if "SamplesPerPixel" not in source:
        source.SamplesPerPixel = 1  # only read by highdicom's grayscale check, not copied
    model = ModelInfo.from_card(card)
    uids = document_uids(source, model)
    units = hd.pr.AnnotationUnitsValues.PIXEL
    graphics: list[hd.pr.GraphicObject] = []
    texts: list[hd.pr.TextObject] = []
    corner_lines: list[str] = [f"DEMO: {DEMO_NOTE}"] if model.demo else []
    for label, boxes in _boxes_by_label(prediction).items():
        text = _label_text(label, prediction.probabilities[label])
        if not boxes:
            corner_lines.append(text)
        for box in boxes:
            polygon = _closed_box(box, rows, columns)
            graphics.append(
                hd.pr.GraphicObject(
                    graphic_type=hd.pr.GraphicTypeValues.POLYLINE,
                    graphic_data=polygon,
                    units=units,
                )
            )
            texts.append(
                hd.pr.TextObject(
                    text_value=text,
                    units=units,
                    anchor_point=(float(polygon[0, 0]), float(polygon[0, 1])),
                    anchor_point_visible=False,
                )
            )
    line_height = max(rows / 40.0, 1.0)
    for i, line in enumerate(corner_lines):
        top = min(i * line_height, rows - line_height)
        texts.append(
            hd.pr.TextObject(
                text_value=line[:64],
                units=units,
                bounding_box=(0.0, top, float(columns), top + line_height),
                text_justification=hd.pr.TextJustificationValues.LEFT,
            )
        )
    layer = hd.pr.GraphicLayer(
        layer_name=GSPS_LAYER, order=1, description=f"findings of {model.title}"[:64]
    )
    annotations = []
    if graphics or texts:
        annotations.append(
            hd.pr.GraphicAnnotation(
                referenced_images=[source],
                graphic_layer=layer,
                graphic_objects=graphics or None,
                text_objects=texts or None,
            )
        )
    description = f"findings of {model.title}" + (" DEMO not for clinical use" * model.demo)
    with _quiet_person_names():
        gsps = hd.pr.GrayscaleSoftcopyPresentationState(
            referenced_images=[source],
            series_instance_uid=uids.gsps_series,
            series_number=GSPS_SERIES_NUMBER,
            sop_instance_uid=uids.gsps_instance,
            instance_number=1,
            manufacturer=MANUFACTURER,
            manufacturer_model_name=model.name[:64],
            software_versions=model.version[:64],
            device_serial_number="",
            content_label=GSPS_LAYER,
            content_description=description[:64],
            graphic_annotations=annotations or None,
            graphic_layers=[layer],
            series_description=_series_description("GSPS", model),
        )
    # General Series Laterality is 2C; dciodvfy cannot tell a chest is unpaired and
    # calls it missing, so it is sent as the source's, else empty (= unknown).
    gsps.Laterality = str(source.get("Laterality", "") or "")
    return gsps


def predictions_from_line(line: dict[str, Any]) -> Prediction | None:
    """Rebuild a `Prediction` from a result line's "prediction" object (None if absent)."""
    data = line.get("prediction")
    if not isinstance(data, dict):
        return None
    boxes: Sequence[dict[str, Any]] = data.get("boxes") or []
    return Prediction(
        probabilities={str(k): float(v) for k, v in (data.get("probabilities") or {}).items()},
        positive=[str(p) for p in data.get("positive") or []],
        boxes=[Box.from_dict(b) for b in boxes],
    )
