"""Hostile source images: the SR and GSPS copy only valid values (batch/pacs/source_attributes.py).

Each source is written as an Implicit VR file with raw bytes and read back with
`stop_before_pixels`, as the push sink gets its headers, so pydicom meets the values the
way it does in a PACS's files (dictionary VRs, nothing converted yet).
"""

from __future__ import annotations

import io
import logging
import re
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pydicom
import pytest
from pydicom.datadict import dictionary_VR, tag_for_keyword
from pydicom.dataelem import DataElement
from pydicom.dataset import Dataset
from pydicom.uid import ImplicitVRLittleEndian
from service_fixtures import PATIENT_ID, PATIENT_NAME, build_dataset, chest_pixels

from batch.dicom_push import DicomPushSink
from batch.interfaces import Outcome
from batch.pacs.dicomweb import DicomwebClient, parse_multipart
from batch.pacs.documents import NotGrayscaleError, build_gsps, build_sr
from batch.pacs.source_attributes import (
    COPIED,
    VR_RULES,
    Correction,
    CorrectionLog,
    copy_source_attributes,
)
from models.boxes import Box
from models.predict import Prediction

pytestmark = pytest.mark.issue(18)

CARD = {"name": "cxr-chestnet", "version": "v7", "demo": False}
JAPANESE = (  # PS3.5 H.3.1: Yamada^Tarou=山田^太郎=やまだ^たろう in ISO 2022 IR 87
    b"Yamada^Tarou=\x1b$B;3ED\x1b(B^\x1b$BB@O:\x1b(B=\x1b$B$d$^$@\x1b(B^\x1b$B$?$m$&\x1b(B"
)


def _prediction() -> Prediction:
    return Prediction(
        probabilities={"Effusion": 0.81, "Mass": 0.2},
        positive=["Effusion"],
        boxes=[Box("Effusion", 2.0, 3.0, 20.0, 10.0, 0.5)],
    )


def _hostile(raw: dict[str, bytes], bits: int = 16, **elements: Any) -> Dataset:
    """A DX image whose `raw` attributes hold exactly these bytes, read back as a PACS's."""
    ds = build_dataset(
        pixels=chest_pixels(48, 64),
        bits=bits,
        PatientSex="F",
        StudyDate="20240301",
        StudyTime="101500",
        StudyID="S1",
        PatientBirthDate="19600101",
        ReferringPhysicianName="Who^Doctor",
        **elements,
    )
    for keyword, value in raw.items():
        if keyword == "SpecificCharacterSet":  # the writer reads it: a plain element
            ds.SpecificCharacterSet = value.decode().split("\\")
            continue
        tag = tag_for_keyword(keyword)
        assert tag is not None
        pad = b"\x00" if dictionary_VR(tag) == "UI" else b" "
        ds[tag] = DataElement(tag, "OB", value + pad * (len(value) % 2))  # written as is
    ds.file_meta.TransferSyntaxUID = ImplicitVRLittleEndian
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # the writer fills the file meta from hostile UIDs
        warnings.simplefilter("ignore")
        ds.save_as(buffer, enforce_file_format=True, implicit_vr=True, little_endian=True)
    return pydicom.dcmread(io.BytesIO(buffer.getvalue()), stop_before_pixels=True)


def _reread(ds: Dataset) -> Dataset:
    buffer = io.BytesIO()
    ds.save_as(buffer, enforce_file_format=True)
    return pydicom.dcmread(io.BytesIO(buffer.getvalue()))


def _dciodvfy_errors(ds: Dataset, tmp_path: Path) -> list[str]:
    """dciodvfy's "Error" lines (warnings allowed, as in test_documents.py)."""
    if shutil.which("dciodvfy") is None:
        pytest.skip("dciodvfy (Debian dicom3tools) not installed")
    path = tmp_path / "object.dcm"
    ds.save_as(path, enforce_file_format=True)
    run = subprocess.run(["dciodvfy", str(path)], capture_output=True, timeout=60)
    # dciodvfy echoes values in the file's own bytes (Latin-1 names): decode leniently.
    output = (run.stdout + run.stderr).decode("utf-8", "replace")
    return [line for line in output.splitlines() if line.startswith("Error")]


# name: (raw attribute bytes, corrections expected as (keyword, action), values expected
# in both results: a string, or None for "absent").
CASES: dict[str, tuple[dict[str, bytes], set[tuple[str, str]], dict[str, str | None]]] = {
    "age_without_unit": (
        {"PatientAge": b"81"},
        {("PatientAge", "corrected")},
        {"PatientAge": "081Y"},
    ),
    "age_62": ({"PatientAge": b"62"}, {("PatientAge", "corrected")}, {"PatientAge": "062Y"}),
    "age_lower_unit": (
        {"PatientAge": b"7m"},
        {("PatientAge", "corrected")},
        {"PatientAge": "007M"},
    ),
    "age_words": ({"PatientAge": b"sixty"}, {("PatientAge", "dropped")}, {"PatientAge": None}),
    "accession_17": (
        {"AccessionNumber": b"A" * 17},
        {("AccessionNumber", "emptied")},
        {"AccessionNumber": ""},
    ),
    "study_id_17": ({"StudyID": b"S" * 17}, {("StudyID", "emptied")}, {"StudyID": ""}),
    "name_group_65": (
        {"PatientName": b"A" * 65},
        {("PatientName", "emptied")},
        {"PatientName": ""},
    ),
    "name_group_65_with_given": (
        {"PatientName": b"D" * 40 + b"^" + b"G" * 30},
        {("PatientName", "emptied")},
        {"PatientName": ""},
    ),
    "name_six_components": (
        {"PatientName": b"a^b^c^d^e^f"},
        {("PatientName", "emptied")},
        {"PatientName": ""},
    ),
    "name_non_ascii_undeclared": (
        {"PatientName": "Müller^Jörg".encode("latin-1")},
        {("PatientName", "emptied")},
        {"PatientName": ""},
    ),
    "name_latin1_declared": (
        {"SpecificCharacterSet": b"ISO_IR 100", "PatientName": "Müller^Jörg".encode("latin-1")},
        set(),
        {"PatientName": "Müller^Jörg", "SpecificCharacterSet": "ISO_IR 100"},
    ),
    "name_utf8_declared": (
        {"SpecificCharacterSet": b"ISO_IR 192", "PatientName": "王^小明".encode()},
        set(),
        {"PatientName": "王^小明"},
    ),
    "name_iso2022_japanese": (
        {"SpecificCharacterSet": b"\\ISO 2022 IR 87", "PatientName": JAPANESE},
        set(),
        {
            "PatientName": "Yamada^Tarou=山田^太郎=やまだ^たろう",
            "SpecificCharacterSet": "ISO_IR 192",
        },
    ),
    "cp1252_punctuation_under_latin1": (  # O’Brien, “Chest” PA – erect… from Windows
        {
            "SpecificCharacterSet": b"ISO_IR 100",
            "PatientName": b"O\x92Br\xefen^M\x91ry\x92",
            "StudyDescription": b"\x93Chest\x94 PA \x96 erect\x85",
            "InstitutionAddress": b"\x84Main\x93 St \x97 1",
        },
        {
            ("PatientName", "corrected"),
            ("StudyDescription", "corrected"),
            ("InstitutionAddress", "corrected"),
        },
        {"PatientName": "O'Brïen^M'ry'", "StudyDescription": '"Chest" PA - erect...'},
    ),
    "cp1252_without_ascii_form_under_latin1": (  # euro sign, Œ, and 0x81 (undefined)
        {
            "SpecificCharacterSet": b"ISO_IR 100",
            "PatientName": b"\x8cuvre^Jos\xe9",
            "StudyDescription": b"Chest \x80 PA",
            "ReferringPhysicianName": b"Who\x81^Doctor",
        },
        {
            ("PatientName", "emptied"),
            ("StudyDescription", "dropped"),
            ("ReferringPhysicianName", "emptied"),
        },
        {"PatientName": "", "StudyDescription": None, "ReferringPhysicianName": ""},
    ),
    "cp1252_quote_in_identifiers": (  # never rewritten: another record's identifier
        {
            "SpecificCharacterSet": b"ISO_IR 100",
            "PatientID": b"MRN\x92042",
            "AccessionNumber": b"A\x961",
        },
        {("PatientID", "emptied"), ("AccessionNumber", "emptied")},
        {"PatientID": "", "AccessionNumber": ""},
    ),
    "c1_control_in_utf8": (
        {"SpecificCharacterSet": b"ISO_IR 192", "PatientName": "O\u0092Brien^Mary".encode()},
        {("PatientName", "emptied")},
        {"PatientName": ""},
    ),
    "c1_control_in_latin2": (  # the Windows reading is Latin-1's alone: not repaired
        {"SpecificCharacterSet": b"ISO_IR 101", "StudyDescription": b"\x93Chest\x94"},
        {("StudyDescription", "dropped")},
        {"StudyDescription": None},
    ),
    "name_bytes_not_utf8": (
        {"SpecificCharacterSet": b"ISO_IR 192", "PatientName": b"M\xfcller"},
        {("PatientName", "emptied")},
        {"PatientName": ""},
    ),
    "charset_unknown_term": (
        {"SpecificCharacterSet": b"UTF8", "PatientName": "Müller".encode()},
        {("SpecificCharacterSet", "dropped"), ("PatientName", "emptied")},
        {"PatientName": "", "SpecificCharacterSet": None},
    ),
    "description_64_chars_over_64_bytes": (
        {"SpecificCharacterSet": b"ISO_IR 192", "StudyDescription": "ü".encode() * 40},
        {("StudyDescription", "dropped")},
        {"StudyDescription": None},
    ),
    "date_malformed": ({"StudyDate": b"2024-13-45"}, {("StudyDate", "emptied")}, {"StudyDate": ""}),
    "date_year_999": ({"StudyDate": b"09990101"}, {("StudyDate", "emptied")}, {"StudyDate": ""}),
    "date_year_3000": (
        {"PatientBirthDate": b"30000101"},
        {("PatientBirthDate", "emptied")},
        {"PatientBirthDate": ""},
    ),
    "date_iso_form_year_9999": (
        {"StudyDate": b"9999-12-31"},
        {("StudyDate", "emptied")},
        {"StudyDate": ""},
    ),
    "date_years_at_the_limits": (
        {"StudyDate": b"29991231", "PatientBirthDate": b"10000101"},
        set(),
        {"StudyDate": "29991231", "PatientBirthDate": "10000101"},
    ),
    "date_iso_form": (
        {"StudyDate": b"2024-03-01"},
        {("StudyDate", "corrected")},
        {"StudyDate": "20240301"},
    ),
    "date_acr_nema_form": (
        {"StudyDate": b"2024.03.01"},
        {("StudyDate", "corrected")},
        {"StudyDate": "20240301"},
    ),
    "birth_date_february_30": (
        {"PatientBirthDate": b"19450230"},
        {("PatientBirthDate", "emptied")},
        {"PatientBirthDate": ""},
    ),
    "birth_date_words": (
        {"PatientBirthDate": b"unknown"},
        {("PatientBirthDate", "emptied")},
        {"PatientBirthDate": ""},
    ),
    "time_malformed": ({"StudyTime": b"25:61"}, {("StudyTime", "emptied")}, {"StudyTime": ""}),
    "time_with_colons": (
        {"StudyTime": b"10:11:12"},
        {("StudyTime", "corrected")},
        {"StudyTime": "101112"},
    ),
    "time_leap_second": ({"StudyTime": b"235960"}, {("StudyTime", "emptied")}, {"StudyTime": ""}),
    "time_seven_fraction_digits": (
        {"StudyTime": b"120000.1234567"},
        {("StudyTime", "emptied")},
        {"StudyTime": ""},
    ),
    "birth_time_malformed": (
        {"PatientBirthTime": b"noon"},
        {("PatientBirthTime", "dropped")},
        {"PatientBirthTime": None},
    ),
    "sex_x": ({"PatientSex": b"X"}, {("PatientSex", "emptied")}, {"PatientSex": ""}),
    "sex_lower_case": ({"PatientSex": b"m"}, {("PatientSex", "corrected")}, {"PatientSex": "M"}),
    "sex_word": ({"PatientSex": b"FEMALE"}, {("PatientSex", "emptied")}, {"PatientSex": ""}),
    "imager_pixel_spacing_one_value": (
        {"ImagerPixelSpacing": b"0.2"},
        {("ImagerPixelSpacing", "dropped")},
        {},
    ),
    "pixel_spacing_one_value": ({"PixelSpacing": b"0.2"}, {("PixelSpacing", "dropped")}, {}),
    "pixel_spacing_three_values": (
        {"ImagerPixelSpacing": b"0.2\\0.2\\0.2"},
        {("ImagerPixelSpacing", "dropped")},
        {},
    ),
    "orientation_one_value": (
        {"PatientOrientation": b"A"},
        {("PatientOrientation", "dropped")},
        {},
    ),
    "ds_20_characters": (
        {"PatientWeight": b"70.12345678901234567"},
        {("PatientWeight", "corrected")},
        {"PatientWeight": "70.1234567890123"},
    ),
    "ds_word": (
        {"PatientWeight": b"seventy"},
        {("PatientWeight", "dropped")},
        {"PatientWeight": None},
    ),
    "ds_infinite": ({"PatientSize": b"1e999"}, {("PatientSize", "dropped")}, {"PatientSize": None}),
    "control_character": (
        {"StudyDescription": b"Chest\x07PA"},
        {("StudyDescription", "dropped")},
        {"StudyDescription": None},
    ),
    "newline_in_long_string": (
        {"InstitutionName": b"Ward\r\n7"},
        {("InstitutionName", "dropped")},
        {},
    ),
    "backslash_where_one_value": (
        {"PatientID": b"MRN1\\MRN2"},
        {("PatientID", "emptied")},
        {"PatientID": ""},
    ),
    "empty_type2_attributes": (
        {"PatientName": b"", "PatientID": b"", "AccessionNumber": b""},
        set(),
        {"PatientName": "", "PatientID": "", "AccessionNumber": ""},
    ),
    "issuer_70": (
        {"IssuerOfPatientID": b"I" * 70},
        {("IssuerOfPatientID", "dropped")},
        {"IssuerOfPatientID": None},
    ),
    "referring_physician_70": (
        {"ReferringPhysicianName": b"B" * 70},
        {("ReferringPhysicianName", "emptied")},
        {"ReferringPhysicianName": ""},
    ),
    "frame_of_reference_leading_zero": (
        {"FrameOfReferenceUID": b"1.2.03.4"},
        {("FrameOfReferenceUID", "dropped")},
        {},
    ),
    "frame_of_reference_letters": (
        {"FrameOfReferenceUID": b"1.2.abc"},
        {("FrameOfReferenceUID", "dropped")},
        {},
    ),
    "laterality_x": ({"Laterality": b"X"}, {("Laterality", "dropped")}, {"Laterality": ""}),
    "window_width_zero": (
        {"WindowCenter": b"40", "WindowWidth": b"0"},
        {("WindowCenter", "dropped"), ("WindowWidth", "dropped")},
        {},
    ),
    "window_center_word": (
        {"WindowCenter": b"abc", "WindowWidth": b"400"},
        {("WindowCenter", "dropped"), ("WindowWidth", "dropped")},
        {},
    ),
    "window_counts_differ": (
        {"WindowCenter": b"40\\50", "WindowWidth": b"400"},
        {("WindowCenter", "dropped"), ("WindowWidth", "dropped")},
        {},
    ),
    "voi_function_unknown": (
        {"WindowCenter": b"40", "WindowWidth": b"400", "VOILUTFunction": b"CURVY"},
        {("VOILUTFunction", "dropped")},
        {},
    ),
    "rescale_slope_alone": ({"RescaleSlope": b"2"}, {("RescaleSlope", "dropped")}, {}),
    # issue 42: values that are valid decimal strings but no real rescale or window
    "rescale_slope_zero": (
        {"RescaleIntercept": b"0", "RescaleSlope": b"0"},
        {("RescaleIntercept", "dropped"), ("RescaleSlope", "dropped")},
        {},
    ),
    "rescale_intercept_huge": (
        {"RescaleIntercept": b"-1e300", "RescaleSlope": b"1"},
        {("RescaleIntercept", "dropped"), ("RescaleSlope", "dropped")},
        {},
    ),
    "window_width_1e308": (
        {"WindowCenter": b"40", "WindowWidth": b"1e308"},
        {("WindowCenter", "dropped"), ("WindowWidth", "dropped")},
        {},
    ),
    "window_center_huge": (
        {"WindowCenter": b"-9e99", "WindowWidth": b"400"},
        {("WindowCenter", "dropped"), ("WindowWidth", "dropped")},
        {},
    ),
    "rescale_intercept_20_characters": (
        {"RescaleIntercept": b"-1024.0000000000000001", "RescaleSlope": b"1"},
        {("RescaleIntercept", "corrected")},
        {},
    ),
    "identity_removed_without_method": (
        {"PatientIdentityRemoved": b"YES"},
        {("PatientIdentityRemoved", "dropped")},
        {"PatientIdentityRemoved": None},
    ),
    "identity_removed_with_method": (
        {"PatientIdentityRemoved": b"YES", "DeidentificationMethod": b"cxr-test"},
        set(),
        {"PatientIdentityRemoved": "YES", "DeidentificationMethod": "cxr-test"},
    ),
    "manufacturer_70": (
        {"Manufacturer": b"M" * 70, "InstitutionName": b"Clinic"},
        {("Manufacturer", "dropped")},
        {},
    ),
    "station_name_17": (
        {"Manufacturer": b"ACME", "StationName": b"S" * 17},
        {("StationName", "dropped")},
        {},
    ),
    "type_of_patient_id_unknown": (
        {"TypeOfPatientID": b"DNA"},
        {("TypeOfPatientID", "dropped")},
        {"TypeOfPatientID": None},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_source_attributes_hostile_values_give_valid_sr_and_gsps(name: str, tmp_path: Path) -> None:
    raw, expected_fixes, expected_values = CASES[name]
    source = _hostile(raw)
    copied = copy_source_attributes(source)
    assert {(c.keyword, c.action) for c in copied.corrections} == expected_fixes
    for build in (build_sr, build_gsps):
        document = build(source, _prediction(), CARD)
        reread = _reread(document)
        for keyword, value in expected_values.items():
            if value is None:
                assert keyword not in reread, keyword
            else:
                assert str(reread.get(keyword, "")) == value, keyword
        assert reread.PatientSex in ("M", "F", "O", "")
        assert _dciodvfy_errors(document, tmp_path) == [], build.__name__


def test_source_attributes_every_hostile_value_at_once(tmp_path: Path) -> None:
    raw: dict[str, bytes] = {}
    for case in ("age_62", "accession_17", "study_id_17", "name_group_65", "date_malformed"):
        raw |= CASES[case][0]
    raw |= {
        "PatientSex": b"X",
        "StudyTime": b"10:11:12",
        "ImagerPixelSpacing": b"0.139",
        "PixelSpacing": b"0.139",
        "PatientWeight": b"70.12345678901234567",
        "StudyDescription": b"Chest\x07PA",
        "ReferringPhysicianName": b"B" * 70,
        "FrameOfReferenceUID": b"1.2.03.4",
        "Laterality": b"X",
        "WindowCenter": b"abc",
        "WindowWidth": b"0",
        "PatientIdentityRemoved": b"YES",
        "Manufacturer": b"M" * 70,
    }
    source = _hostile(raw)
    source.add_new(0x00091010, "LO", "private value")  # private tags are never copied
    sr, gsps = build_sr(source, _prediction(), CARD), build_gsps(source, _prediction(), CARD)
    for document in (sr, gsps):
        assert _dciodvfy_errors(document, tmp_path) == []
        assert all(not element.tag.is_private for element in document)
        assert document.PatientAge == "062Y" and document.PatientSex == ""
        assert document.AccessionNumber == "" and document.StudyTime == "101112"


def test_source_attributes_missing_optional_modules(tmp_path: Path) -> None:
    # Only what an image must have: no patient, study, equipment or presentation values.
    source = Dataset()
    full = build_dataset(pixels=chest_pixels(48, 64))
    for keyword in ("SOPClassUID", "SOPInstanceUID", "StudyInstanceUID", "SeriesInstanceUID"):
        setattr(source, keyword, full.get(keyword))
    source.Rows, source.Columns = 48, 64
    copied = copy_source_attributes(source)
    assert copied.corrections == ()
    for build in (build_sr, build_gsps):
        document = build(source, _prediction(), CARD)
        assert document.PatientName == "" and document.PatientID == ""
        assert document.StudyDate == "" and document.AccessionNumber == ""
        assert _dciodvfy_errors(document, tmp_path) == []


def test_source_attributes_keep_valid_values_unchanged() -> None:
    source = _hostile(
        {"PatientAge": b"081Y", "ImagerPixelSpacing": b"0.139\\0.139"},
        PatientOrientation=["P", "F"],
        PatientWeight="70.5",
        WindowCenter=["40", "300"],
        WindowWidth=["400", "1500"],
        WindowCenterWidthExplanation=["SOFT", "BONE"],
    )
    copied = copy_source_attributes(source)
    assert copied.corrections == ()
    view = copied.dataset
    assert str(view.PatientName) == PATIENT_NAME and view.PatientID == PATIENT_ID
    assert view.PatientAge == "081Y" and [float(v) for v in view.ImagerPixelSpacing] == [0.139] * 2
    assert list(view.WindowWidth) == [400, 1500] and view.PatientOrientation == ["P", "F"]
    again = copy_source_attributes(view)  # idempotent: a copied dataset passes as it is
    assert again.corrections == () and again.dataset == view


@pytest.mark.parametrize(
    ("keyword", "value", "rule"),
    [
        ("StudyInstanceUID", b"1.2.abc.4", "not a valid UI value"),
        ("SOPInstanceUID", b"1." + b"2" * 70, "over 64 bytes"),
        ("SeriesInstanceUID", b"1.2.03.4", "not a valid UI value"),
        ("SOPClassUID", b"1.2.3.4.5", "not an image storage SOP class"),
    ],
)
def test_source_attributes_refuse_invalid_referencing_uids(
    keyword: str, value: bytes, rule: str
) -> None:
    # The results must reference the image by its own UIDs: never altered, so refused.
    source = _hostile({keyword: value})
    with pytest.raises(ValueError, match=f"{keyword}: {rule}") as raised:
        build_sr(source, _prediction(), CARD)
    assert value.decode() not in str(raised.value)  # the message names the rule, not the value
    with pytest.raises(ValueError, match=keyword):
        build_gsps(source, _prediction(), CARD)


def test_source_attributes_gsps_takes_window_over_voi_lut(tmp_path: Path) -> None:
    lut = Dataset()
    lut.LUTDescriptor = [4, 0, 16]
    lut.add_new(0x00283006, "OW", np.array([0, 20000, 45000, 65535], np.uint16).tobytes())
    both = build_dataset(
        pixels=chest_pixels(48, 64), WindowCenter="2048", WindowWidth="4096", VOILUTSequence=[lut]
    )
    fixes = copy_source_attributes(both).corrections
    assert [(c.keyword, c.action) for c in fixes] == [("VOILUTSequence", "dropped")]
    gsps = build_gsps(both, _prediction(), CARD)
    [voi] = gsps.SoftcopyVOILUTSequence
    assert float(voi.WindowWidth) == 4096 and "VOILUTSequence" not in voi
    assert _dciodvfy_errors(gsps, tmp_path) == []
    only_lut = build_dataset(pixels=chest_pixels(48, 64), VOILUTSequence=[lut])
    assert copy_source_attributes(only_lut).corrections == ()
    gsps = build_gsps(only_lut, _prediction(), CARD)
    assert gsps.SoftcopyVOILUTSequence[0].VOILUTSequence[0].LUTDescriptor == [4, 0, 16]
    assert _dciodvfy_errors(gsps, tmp_path) == []
    # 12-bit data under a 16-bit descriptor: dciodvfy calls it an error, the bits are not
    # ours to change, so the LUT is left out (the GSPS then states no VOI transformation).
    lut.LUTData = np.array([0, 1000, 2000, 4095], np.uint16).tobytes()
    short = build_dataset(pixels=chest_pixels(48, 64), VOILUTSequence=[lut])
    fixes = copy_source_attributes(short).corrections
    assert [(c.keyword, c.action) for c in fixes] == [("VOILUTSequence", "dropped")]
    gsps = build_gsps(short, _prediction(), CARD)
    assert "SoftcopyVOILUTSequence" not in gsps
    assert _dciodvfy_errors(gsps, tmp_path) == []


def test_source_attributes_tables_are_consistent() -> None:
    for spec in COPIED:
        tag = tag_for_keyword(spec.keyword)
        assert tag is not None, spec.keyword
        vr = dictionary_VR(tag).split(" or ")[0]
        assert vr in VR_RULES or vr in {"US", "SQ"}, spec.keyword
        pattern = VR_RULES[vr].pattern if vr in VR_RULES else None
        assert all(re.fullmatch(pattern or ".*", v) for v in spec.values), spec.keyword
    assert len({spec.keyword for spec in COPIED}) == len(COPIED)


def test_source_attributes_never_put_values_in_logs_or_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret_name, secret_birth = "Zyxwvut^Secret", "19450230"
    source = _hostile(
        {
            "PatientName": (secret_name + "^" + "x" * 60).encode(),
            "PatientBirthDate": secret_birth.encode(),
            "PatientAge": b"62",
            "AccessionNumber": b"ACC-" + b"9" * 14,
        }
    )
    caplog.set_level(logging.DEBUG)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_sr(source, _prediction(), CARD)
        build_gsps(source, _prediction(), CARD)
    said = [str(w.message) for w in caught] + [r.getMessage() for r in caplog.records]
    assert any("PatientBirthDate emptied" in line for line in said)  # debug lines, by keyword
    for secret in ("Zyxwvut", secret_birth, "ACC-999"):
        assert not [line for line in said if secret in line], secret


def test_source_attributes_one_component_name_is_kept_without_a_warning() -> None:
    source = _hostile({"PatientName": b"Covid0000"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # highdicom's warning would quote the name
        sr = build_sr(source, _prediction(), CARD)
    assert sr.PatientName == "Covid0000"


def test_correction_log_logs_each_kind_once(caplog: pytest.LogCaptureFixture) -> None:
    corrections = CorrectionLog(logging.getLogger("cxr.test"))
    age = Correction("PatientAge", "corrected", "zero-padded")
    with caplog.at_level(logging.WARNING, logger="cxr.test"):
        for _ in range(3):
            corrections.record([age, Correction("PatientSex", "emptied", "not one of M, F, O")])
    assert len(caplog.records) == 2
    assert corrections.counts[age] == 3
    assert caplog.records[0].getMessage().startswith("SR/GSPS: the source image's PatientAge")


class _Stow:
    def __init__(self) -> None:
        self.stored: list[Dataset] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        bodies = parse_multipart(request.headers["content-type"], request.content)
        new = [pydicom.dcmread(io.BytesIO(b)) for _, b in bodies]
        self.stored += new
        refs = [{"00081155": {"vr": "UI", "Value": [d.SOPInstanceUID]}} for d in new]
        return httpx.Response(200, json={"00081199": {"vr": "SQ", "Value": refs}})


def test_dicom_push_sink_logs_corrections_once_per_job(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    headers = {
        f"k{i}": _hostile({"PatientAge": b"81", "AccessionNumber": b"A" * 17, "PatientSex": b"X"})
        for i in range(4)
    }
    stow = _Stow()
    client = DicomwebClient("http://pacs.test/dicom-web", transport=httpx.MockTransport(stow))
    sink = DicomPushSink(client, kinds=["sr", "gsps"], card=CARD, headers=headers.get)
    line = {
        "prediction": {
            "probabilities": {"Effusion": 0.81},
            "positive": ["Effusion"],
            "boxes": [
                {"label": "Effusion", "x": 2, "y": 3, "width": 20, "height": 10, "score": 0.5}
            ],
        }
    }
    with caplog.at_level(logging.WARNING, logger="batch.dicom_push"):
        for chunk in (["k0", "k1"], ["k2", "k3"]):
            outcomes = [Outcome(key, "done", result=dict(line)) for key in chunk]
            sink.write(outcomes)
            assert all(o.state == "done" and len(o.result["pushed"]) == 2 for o in outcomes)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3  # PatientAge, AccessionNumber, PatientSex: once each
    assert {m.split()[4] for m in messages} == {"PatientAge", "AccessionNumber", "PatientSex"}
    assert not [m for m in messages if "81" in m or "AAAA" in m]
    assert all(count == 4 for count in sink.corrections.counts.values())
    assert len(stow.stored) == 8
    for document in stow.stored:
        assert document.PatientAge == "081Y" and document.AccessionNumber == ""
        assert _dciodvfy_errors(document, tmp_path) == []


def _text_values(ds: Dataset) -> list[str]:
    """Every text value of `ds` and its sequences, as pydicom decodes it."""
    found: list[str] = []
    for element in ds.iterall():
        if element.VR in ("LO", "LT", "PN", "SH", "ST", "UC", "UT") and element.value:
            values = element.value if element.VM > 1 else [element.value]
            found += [str(v) for v in values]
    return found


def test_source_attributes_c1_controls_never_written(tmp_path: Path) -> None:
    # Windows software labels Windows-1252 text ISO_IR 100: its quotes land in 0x80-0x9F,
    # which ISO_IR 100 reads as C1 control characters (PS3.5 6.1.2 uses none).
    source = _hostile(
        {
            "SpecificCharacterSet": b"ISO_IR 100",
            "PatientName": b"O\x92Brien^Mary",
            "StudyDescription": b"\x93Chest\x94 PA \x80 \x96 erect",  # the euro sign: none
            "InstitutionName": b"St. Mary\x92s",
            "Manufacturer": b"ACME\x99",  # trade mark sign: no ASCII form
        }
    )
    copied = copy_source_attributes(source)
    assert {(c.keyword, c.action) for c in copied.corrections} == {
        ("PatientName", "corrected"),
        ("StudyDescription", "dropped"),
        ("InstitutionName", "corrected"),
        ("Manufacturer", "dropped"),
    }
    for build in (build_sr, build_gsps):
        reread = _reread(build(source, _prediction(), CARD))
        assert reread.SpecificCharacterSet == "ISO_IR 100"
        assert str(reread.PatientName) == "O'Brien^Mary"
        assert "StudyDescription" not in reread
        values = _text_values(reread)
        assert values and not [v for v in values if re.search("[\x80-\x9f]", v)]
        assert _dciodvfy_errors(reread, tmp_path) == [], build.__name__


def _rgb(**elements: Any) -> Dataset:
    """An RGB secondary-capture-like DX header, read back as the push sink gets it."""
    return _hostile(
        {},
        bits=8,
        SamplesPerPixel=3,
        PhotometricInterpretation="RGB",
        PlanarConfiguration=0,
        PixelData=np.zeros((48, 64, 3), np.uint8).tobytes(),
        **elements,
    )


def test_colour_image_gets_an_sr_but_no_gsps(tmp_path: Path) -> None:
    source = _rgb()
    sr = build_sr(source, _prediction(), CARD)
    assert _dciodvfy_errors(sr, tmp_path) == []
    with pytest.raises(NotGrayscaleError, match=r"colour \(RGB\): a GSPS presents grayscale"):
        build_gsps(source, _prediction(), CARD)
    # The push sink passes headers already copied (no Photometric Interpretation there).
    with pytest.raises(NotGrayscaleError, match=r"colour \(3 samples per pixel\)"):
        build_gsps(copy_source_attributes(source).dataset, _prediction(), CARD)
    palette = build_dataset(pixels=chest_pixels(48, 64), photometric="PALETTE COLOR")
    with pytest.raises(NotGrayscaleError, match="PALETTE COLOR"):
        build_gsps(palette, _prediction(), CARD)


def test_dicom_push_sink_pushes_the_sr_of_a_colour_image(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    headers = {"rgb0": _rgb(), "rgb1": _rgb(), "grey": _hostile({})}
    stow = _Stow()
    client = DicomwebClient("http://pacs.test/dicom-web", transport=httpx.MockTransport(stow))
    sink = DicomPushSink(client, kinds=["sr", "gsps"], card=CARD, headers=headers.get)
    line = {"prediction": {"probabilities": {"Effusion": 0.81}, "positive": ["Effusion"]}}
    outcomes = [Outcome(key, "done", result=dict(line)) for key in headers]
    with caplog.at_level(logging.WARNING, logger="batch.dicom_push"):
        sink.write(outcomes)
    assert all(o.state == "done" for o in outcomes), [o.error for o in outcomes]
    assert [len(o.result["pushed"]) for o in outcomes] == [1, 1, 2]
    kinds = [d.SOPClassUID.name for d in stow.stored]
    assert kinds.count("Comprehensive 3D SR Storage") == 3
    assert kinds.count("Grayscale Softcopy Presentation State Storage") == 1
    assert sink.gsps_skipped == 2
    [message] = [r.getMessage() for r in caplog.records]  # once per job
    assert "GSPS not built, SR pushed alone" in message and "colour" in message
    for document in stow.stored:
        assert _dciodvfy_errors(document, tmp_path) == []
    # GSPS alone: a colour image has nothing to push, and its line says why.
    only_gsps = DicomPushSink(client, kinds=["gsps"], card=CARD, headers=headers.get)
    outcome = Outcome("rgb0", "done", result=dict(line))
    only_gsps.write([outcome])
    assert outcome.state == "failed" and "a GSPS presents grayscale images only" in str(
        outcome.error
    )
