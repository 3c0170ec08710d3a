"""Box positions: the patient's side from View Position / Patient Orientation, lung zones."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from models.boxes import Box
from models.phantoms import make_phantom
from models.position import (
    LungField,
    estimate_lung_field,
    locate_boxes,
    orientation_of,
    sides_of,
)

# a box the model would give (the score plays no part here)
B = functools.partial(Box, score=1.0)


FIELD = LungField(0, 0, 200, 300, "image")


@pytest.mark.parametrize("view", ["PA", "AP", "pa"])
def test_frontal_views_show_patient_left_on_image_right(view: str) -> None:
    o = orientation_of(view, None)
    assert (o.image_right, o.basis) == ("left", "view_position")
    right_of_image, left_of_image = B("Nodule", 150, 10, 10, 10), B("Nodule", 20, 10, 10, 10)
    assert locate_boxes([right_of_image], FIELD, o)[0].side == "left"
    assert locate_boxes([left_of_image], FIELD, o)[0].side == "right"


def test_patient_orientation_wins_over_view_position() -> None:
    flipped = orientation_of("PA", "R\\F")
    assert (flipped.image_right, flipped.basis) == ("right", "patient_orientation")
    assert locate_boxes([B("Mass", 150, 10, 10, 10)], FIELD, flipped)[0].side == "right"
    assert orientation_of("AP", "L\\F").image_right == "left"


@pytest.mark.parametrize(
    ("view", "orient"), [("LL", None), ("LATERAL", None), (None, "A\\F"), ("XYZ", None)]
)
def test_lateral_or_unknown_views_have_no_side(view: str | None, orient: str | None) -> None:
    o = orientation_of(view, orient)
    assert o.image_right is None
    assert locate_boxes([B("Mass", 150, 10, 10, 10)], FIELD, o)[0].side == "unknown"


def test_no_metadata_is_read_by_the_frontal_convention_and_says_so() -> None:
    o = orientation_of(None, None)
    assert (o.image_right, o.basis) == ("left", "convention")
    assert "no View Position" in o.note


def test_zones_are_thirds_of_the_lung_field() -> None:
    o = orientation_of("PA", None)
    zones = [locate_boxes([B("Nodule", 10, y, 10, 10)], FIELD, o)[0].zone for y in (20, 140, 260)]
    assert zones == ["upper", "middle", "lower"]


def test_nested_boxes_count_once_and_both_sides_are_bilateral() -> None:
    o = orientation_of("PA", None)
    nested = [B("Effusion", 10, 200, 80, 90), B("Effusion", 20, 220, 30, 30)]
    assert len(locate_boxes(nested, FIELD, o)) == 1
    both = locate_boxes([B("Effusion", 10, 200, 30, 30), B("Effusion", 160, 200, 30, 30)], FIELD, o)
    assert sides_of(both) == "bilateral"
    assert locate_boxes([B("Cardiomegaly", 30, 100, 140, 80)], FIELD, o)[0].side == "bilateral"


def test_lung_field_estimate_on_phantoms_gives_the_true_side() -> None:
    rng = np.random.default_rng(3)
    o = orientation_of(None, None)
    for i in range(12):
        label = ("Nodule", "Mass", "Effusion", "Pneumothorax")[i % 4]
        ph = make_phantom(rng, size=192, labels=[label])
        field = estimate_lung_field(ph.image)
        assert field.method == "otsu_components"
        assert 0.3 * 192 < field.width < 0.95 * 192
        _, x, y, w, h = ph.boxes[0]
        truth = "right" if x + w / 2 < 96 else "left"
        [pos] = locate_boxes([B(label, x, y, w, h)], field, o)
        assert pos.side == truth
        if label == "Effusion":
            assert pos.zone == "lower"


def test_lung_field_falls_back_to_the_whole_image() -> None:
    flat = np.zeros((64, 80), np.float32)
    assert estimate_lung_field(flat) == LungField(0.0, 0.0, 80.0, 64.0, "image")
    with pytest.raises(ValueError, match="2-D"):
        estimate_lung_field(np.zeros((4, 4, 3)))


def test_heat_places_a_finding_inside_the_lung_field() -> None:
    from models.position import locate_heat

    heat = np.zeros((30, 20), np.float32)
    heat[0:3, 0:3] = 5.0  # stray heat in the corner, outside the lung field
    heat[22:25, 14:17] = 1.0  # image right, low: the patient's left lower zone
    field = LungField(50, 60, 100, 200, "otsu_components")
    pos = locate_heat("Effusion", heat, 300, 200, field, orientation_of("PA", None))
    assert pos is not None
    assert (pos.side, pos.zone) == ("left", "lower")
    both = np.zeros((30, 20), np.float32)
    both[15, 5] = both[15, 15] = 1.0
    pos = locate_heat("Edema", both, 300, 200, field, orientation_of("PA", None))
    assert pos is not None and pos.side == "bilateral"
    assert (
        locate_heat("Mass", np.zeros((8, 8)), 300, 200, field, orientation_of("PA", None)) is None
    )


def test_dicom_patient_orientation_is_read(make_dicom: Any) -> None:
    from models.dicom import read_dicom

    pixels = np.full((32, 32), 1000, np.uint16)
    meta = read_dicom(make_dicom(pixels, PatientOrientation=["R", "F"], ViewPosition="PA")).meta
    assert (meta.patient_orientation, meta.view_position) == ("R\\F", "PA")
    assert orientation_of(meta.view_position, meta.patient_orientation).image_right == "right"
    assert read_dicom(make_dicom(pixels, name="b.dcm")).meta.patient_orientation is None
