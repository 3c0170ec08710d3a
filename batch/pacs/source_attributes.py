"""What the SR and GSPS copy from their image, checked against DICOM's value rules.

    copied = copy_source_attributes(source)    # SourceAttributes (ValueError: see below)
    copied.dataset        # a new Dataset holding only the attributes the results copy
    copied.corrections    # (keyword, action, reason) of each value corrected or left out

Images in the wild carry values their own standard forbids: Patient's Age "81", a
17-character Accession Number, Patient's Sex "X", a one-valued Imager Pixel Spacing, a
date written "2024-03-01". The SR and GSPS copy the image's patient, study and equipment
attributes, so unchecked they repeat the error (`dciodvfy` fails them) or highdicom
refuses to build them at all (issue 18, item 12).

Each copied attribute is checked for its VR (PS3.5 6.2: repertoire, control characters,
length in bytes as written, format, number of values) and, where the IOD enumerates
them, its values (`COPIED`, `VR_RULES`). A bad value is corrected only when the
correction is unambiguous ("81" -> "081Y", "2024.03.01" -> "20240301", "10:30" -> "1030",
a decimal string of 20 characters rounded to 16, "m" -> "M", Windows-1252 quotes and
dashes under ISO_IR 100 -> their ASCII forms); otherwise a Type 2 attribute is sent empty
(unknown) and a Type 3 one is left out. C1 control characters (0x80-0x9F in the ISO 8859
sets, U+0080-U+009F) are control characters like C0 ones; a date's year must lie in
1000-2999 (dciodvfy's range). Identifiers are never truncated or rewritten. The UIDs by
which the results reference their image cannot be changed, so an image whose UIDs are
invalid gets no results: `copy_source_attributes` raises ValueError naming the attribute
and the rule.

Values are read from the image's bytes while pydicom has not converted them yet, so a
hostile value neither raises inside pydicom's conversion nor reaches pydicom's warnings,
which quote values (a patient's name or birth date in a log). A correction names the
attribute's keyword and the rule, never the value. `CorrectionLog` logs each kind once
per job and counts them (a push sink holds one).
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import numpy as np
from highdicom._standard_utils import get_sop_class_iod_map
from pydicom.charset import decode_bytes, python_encoding
from pydicom.datadict import dictionary_VR, tag_for_keyword
from pydicom.dataelem import DataElement, RawDataElement
from pydicom.dataset import Dataset
from pydicom.multival import MultiValue
from pydicom.sequence import Sequence as DicomSequence
from pydicom.valuerep import PersonName, format_number_as_ds

__all__ = [
    "COPIED",
    "VR_RULES",
    "Copied",
    "Correction",
    "CorrectionLog",
    "SourceAttributes",
    "VRRule",
    "copy_source_attributes",
]

log = logging.getLogger(__name__)

Action = Literal["corrected", "emptied", "dropped"]


@dataclass(frozen=True)
class Correction:
    """One copied attribute whose value was corrected, sent empty or left out, and why."""

    keyword: str
    action: Action
    reason: str

    def __str__(self) -> str:
        return f"{self.keyword} {self.action}: {self.reason}"


@dataclass(frozen=True)
class SourceAttributes:
    """The attributes the results copy from one image, valid, and what was changed."""

    dataset: Dataset
    corrections: tuple[Correction, ...]


@dataclass(frozen=True)
class VRRule:
    """What a value of one VR may hold (PS3.5 Table 6.2-1).

    `max_bytes` counts bytes as written (PN: per component group), as dciodvfy does;
    `pattern` must match the whole value; `text` is the repertoire: "code" (default
    repertoire, no control characters), "line" (any declared character set, no control
    characters) or "paragraph" (also CR, LF, FF and TAB); `multi`: a backslash separates
    values (not in ST, LT, UT).
    """

    max_bytes: int | None
    pattern: str | None = None
    text: Literal["code", "line", "paragraph"] = "code"
    multi: bool = True


# HH[MM[SS[.F{1,6}]]]. dciodvfy (and datetime) refuse the leap second PS3.5 allows.
_TIME = r"(([01]\d|2[0-3])([0-5]\d([0-5]\d(\.\d{1,6})?)?)?)"

VR_RULES: dict[str, VRRule] = {
    "AE": VRRule(16, r"[^\\]*"),
    "AS": VRRule(4, r"\d{3}[DWMY]"),
    "CS": VRRule(16, r"[A-Z0-9 _]*"),
    "DA": VRRule(8, r"\d{8}"),
    "DS": VRRule(16, r" *[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)? *"),
    "DT": VRRule(26, r"\d{4}((0[1-9]|1[0-2])(\d{2}" + _TIME + r"?)?)?([+-]\d{4})?"),
    "IS": VRRule(12, r" *[+-]?\d+ *"),
    "LO": VRRule(64, text="line"),
    "LT": VRRule(10240, text="paragraph", multi=False),
    "PN": VRRule(64, text="line"),
    "SH": VRRule(16, text="line"),
    "ST": VRRule(1024, text="paragraph", multi=False),
    "TM": VRRule(14, _TIME),
    "UC": VRRule(None, text="line"),
    "UI": VRRule(64, r"(0|[1-9]\d*)(\.(0|[1-9]\d*))*"),
    "UT": VRRule(None, text="paragraph", multi=False),
}

# Binary VRs are valid by construction: only their number of values is checked.
_BINARY_VRS = {"US", "SS", "UL", "SL", "FL", "FD", "OB", "OW", "OF", "OD", "OL", "OV"}


@dataclass(frozen=True)
class Copied:
    """One attribute the results copy.

    `type`: "1" the results reference the image by it (an invalid value refuses the
    image), "2" sent empty when invalid (meaning unknown), "3" left out when invalid.
    `vm`: how many values (None: any number); `values`: the IOD's enumerated values.
    """

    keyword: str
    type: Literal["1", "2", "3"]
    vm: tuple[int, int | None] = (1, 1)
    values: tuple[str, ...] = ()


COPIED: tuple[Copied, ...] = (
    # The image's identity: the results reference it by these, so they are never altered.
    Copied("SOPClassUID", "1"),
    Copied("SOPInstanceUID", "1"),
    Copied("StudyInstanceUID", "1"),
    Copied("SeriesInstanceUID", "1"),
    Copied("Rows", "1"),
    Copied("Columns", "1"),
    # Patient module
    Copied("PatientName", "2"),
    Copied("PatientID", "2"),
    Copied("IssuerOfPatientID", "3"),
    Copied("TypeOfPatientID", "3", values=("TEXT", "RFID", "BARCODE")),
    Copied("PatientBirthDate", "2"),
    Copied("PatientBirthTime", "3"),
    Copied("PatientSex", "2", values=("M", "F", "O")),
    Copied("PatientIdentityRemoved", "3", values=("YES", "NO")),
    Copied("DeidentificationMethod", "3", vm=(1, None)),
    # General Study module
    Copied("StudyDate", "2"),
    Copied("StudyTime", "2"),
    Copied("AccessionNumber", "2"),
    Copied("ReferringPhysicianName", "2"),
    Copied("StudyID", "2"),
    Copied("StudyDescription", "3"),
    # Patient Study module
    Copied("PatientAge", "3"),
    Copied("PatientSize", "3"),
    Copied("PatientWeight", "3"),
    # General Equipment of the image: the SR's Contributing Equipment (acquisition)
    Copied("Manufacturer", "3"),
    Copied("ManufacturerModelName", "3"),
    Copied("SoftwareVersions", "3", vm=(1, None)),
    Copied("DeviceSerialNumber", "3"),
    Copied("InstitutionName", "3"),
    Copied("InstitutionalDepartmentName", "3"),
    Copied("InstitutionAddress", "3"),
    Copied("StationName", "3"),
    # What the references, the SR's image library and the GSPS's series describe
    Copied("Modality", "3"),
    Copied("SamplesPerPixel", "3"),
    Copied("PatientOrientation", "3", vm=(2, 2)),
    Copied("ImagerPixelSpacing", "3", vm=(2, 2)),
    Copied("PixelSpacing", "3", vm=(2, 2)),
    Copied("FrameOfReferenceUID", "3"),
    Copied("Laterality", "3", values=("R", "L")),
    # The GSPS's Modality LUT and Softcopy VOI LUT start from the image's
    Copied("RescaleIntercept", "3"),
    Copied("RescaleSlope", "3"),
    Copied("RescaleType", "3"),
    Copied("WindowCenter", "3", vm=(1, None)),
    Copied("WindowWidth", "3", vm=(1, None)),
    Copied("WindowCenterWidthExplanation", "3", vm=(1, None)),
    Copied("VOILUTFunction", "3", values=("LINEAR", "LINEAR_EXACT", "SIGMOID")),
    Copied("VOILUTSequence", "3"),
)

# Unambiguous repairs by VR: (pattern of the bad form, rebuild, reason). Checked again after.
_REPAIRS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "AS": (
        (
            r"0*(?P<n>\d{1,3}) *(?P<u>[DWMYdwmy]?)",
            "age",
            "not nnnD/W/M/Y: zero-padded, in years when no unit is given",
        ),
    ),
    "DA": (
        (
            r"(?P<y>\d{4})[.-](?P<m>\d{2})[.-](?P<d>\d{2})",
            "{y}{m}{d}",
            "date with separators (ACR-NEMA or ISO form): written YYYYMMDD",
        ),
    ),
    "TM": (
        (
            r"(?P<h>\d{2}):(?P<m>\d{2})(:(?P<s>\d{2}(\.\d{1,6})?))?",
            "{h}{m}{s}",
            "time with colons (ACR-NEMA form): written HHMMSS",
        ),
    ),
    "CS": ((r"[A-Za-z0-9 _]*", "upper", "lower-case letters in a code string: upper-cased"),),
}

_TEXT_VRS = {"LO", "LT", "PN", "SH", "ST", "UC", "UT"}
# C0, DEL and C1 (U+0080-U+009F): PS3.5 6.1.2 uses no C1 control in any repertoire, and a
# single-byte set (ISO_IR 100...) decodes bytes 0x80-0x9F to exactly these code points.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_PARAGRAPH_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")  # TAB LF FF CR allowed
_UTF8 = "ISO_IR 192"
_LATIN1 = python_encoding["ISO_IR 100"]
# Windows software writes Windows-1252 and labels it ISO_IR 100: its quotation marks,
# dashes and ellipsis land in the C1 range. None of them exists in Latin-1, but each has
# an ASCII form that means the same; the other cp1252 characters there (euro sign, Š, Œ,
# ™, bullet, dagger...) have none and leave the value invalid.
_CP1252_PUNCTUATION = str.maketrans(
    {
        "\x82": "'",  # single low-9 quotation mark
        "\x84": '"',  # double low-9 quotation mark
        "\x85": "...",  # horizontal ellipsis
        "\x91": "'",  # left single quotation mark
        "\x92": "'",  # right single quotation mark (the apostrophe of O'Brien)
        "\x93": '"',  # left double quotation mark
        "\x94": '"',  # right double quotation mark
        "\x96": "-",  # en dash
        "\x97": "-",  # em dash
    }
)
# The PACS files and finds a patient, a study or a request by these as written: one that
# differs by a character would reference another record, so they are never rewritten.
_IDENTIFIERS = {"PatientID", "IssuerOfPatientID", "AccessionNumber", "StudyID"}
# dciodvfy (dicom3tools) reads a DA or DT year as [12]ddd and calls any other year an
# error; PS3.5 states no range, and dciodvfy is the arbiter here (see the leap second).
_YEARS = range(1000, 3000)


class _Invalid(Exception):
    """A value that breaks its VR's rules and has no unambiguous correction."""


@dataclass(frozen=True)
class _Charset:
    declared: list[str]  # the image's Specific Character Set terms
    known: bool  # every term is one DICOM defines (pydicom can decode it)
    output: str | None  # what the results declare
    extensions: bool = False  # ISO 2022 code extensions (escape sequences)

    @property
    def codec(self) -> str:
        if self.output is None:
            return "ascii"
        return "utf-8" if self.output == _UTF8 else python_encoding[self.output]


def _charset(source: Dataset) -> tuple[_Charset, list[Correction]]:
    element = source.get_item(0x00080005)
    terms: list[str] = []
    if element is not None:
        raw = element.value
        text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw
        values = text if isinstance(text, list | MultiValue) else str(text or "").split("\\")
        terms = [str(t).strip() for t in values]
    if all(t in ("", "ISO_IR 6") for t in terms):  # the default repertoire: ASCII
        return _Charset([], True, None), []
    if not all(t in python_encoding for t in terms):
        fix = Correction(
            "SpecificCharacterSet", "dropped", "not a defined term: text read as ASCII"
        )
        return _Charset(terms, False, None), [fix]
    code_extensions = len(terms) > 1 or terms[0].startswith("ISO 2022")
    # Values decoded from ISO 2022 code extensions are written again in UTF-8.
    output = _UTF8 if code_extensions else terms[0]
    return _Charset(terms, True, output, code_extensions), []


def _decode(raw: bytes, vr: str, charset: _Charset) -> str:
    if vr not in _TEXT_VRS or not charset.declared or not charset.known:
        try:
            return raw.decode("ascii")
        except UnicodeDecodeError:
            if vr not in _TEXT_VRS:
                raise _Invalid("characters outside the default repertoire") from None
            if charset.declared:
                raise _Invalid("non-ASCII text in an unknown character set") from None
            raise _Invalid("non-ASCII text without a Specific Character Set") from None
    if not charset.extensions:
        try:
            return raw.decode(python_encoding[charset.declared[0]])
        except UnicodeDecodeError:
            raise _Invalid("bytes not valid in the declared character set") from None
    codecs = [python_encoding[t] for t in charset.declared]
    text = decode_bytes(raw, codecs, {0x5C, 0x3D, 0x5E} if vr == "PN" else {0x5C})
    if "\ufffd" in text:
        raise _Invalid("bytes not valid in the declared character set")
    return text


def _one_text(value: Any) -> str:
    original = getattr(value, "original_string", None)  # DS, IS, DA, TM, DT as read
    if isinstance(original, str) and not isinstance(value, PersonName):
        return original
    return str(value)


def _texts(element: DataElement | RawDataElement, vr: str, charset: _Charset) -> list[str]:
    """The element's values as text, as the image holds them ([] when empty)."""
    value = element.value
    if isinstance(value, bytes | bytearray):
        text = _decode(bytes(value), vr, charset)
    elif isinstance(value, list | tuple | MultiValue):
        items = [_one_text(v) for v in value]
        if vr not in _TEXT_VRS:
            for item in items:
                if not item.isascii():
                    raise _Invalid("characters outside the default repertoire")
        text = "\\".join(items)
    elif value is None:
        return []
    else:
        text = _one_text(value)
    text = text.rstrip(" \x00")
    if vr in _TEXT_VRS and charset.output is None and not text.isascii():
        reason = "unknown character set" if charset.declared else "no Specific Character Set"
        raise _Invalid(f"non-ASCII text with {reason}")
    if text == "":
        return []
    return text.split("\\") if VR_RULES[vr].multi else [text]


def _repair(vr: str, text: str, codec: str, keyword: str) -> tuple[str, str] | None:
    if (
        vr in _TEXT_VRS
        and codec == _LATIN1
        and keyword not in _IDENTIFIERS
        and text != (repaired := text.translate(_CP1252_PUNCTUATION))
    ):
        return repaired, "Windows-1252 quotes, dashes or ellipsis (C1 in ISO_IR 100): in ASCII"
    for pattern, rebuild, reason in _REPAIRS.get(vr, ()):
        found = re.fullmatch(pattern, text.strip())
        if found is None:
            continue
        if rebuild == "age":
            repaired = f"{int(found['n']):03d}{(found['u'] or 'Y').upper()}"
        elif rebuild == "upper":
            repaired = text.upper()
        else:
            repaired = rebuild.format(**{k: v or "" for k, v in found.groupdict().items()})
        return repaired, reason
    if vr == "DS":
        try:
            number = Decimal(text.strip())  # exact: a float would round twice
        except InvalidOperation:
            return None
        if number.is_finite() and math.isfinite(float(number)):
            return format_number_as_ds(number), "decimal string over 16 characters: rounded"
    return None


def _calendar_ok(vr: str, text: str) -> bool:
    try:
        if vr == "DA":
            date(int(text[:4]), int(text[4:6]), int(text[6:8]))
        elif vr == "DT":
            date(int(text[:4]), int(text[4:6] or 1), int(text[6:8] or 1))
    except ValueError:
        return False
    return True


def _check_text(vr: str, text: str, codec: str) -> str:
    """The value, valid for `vr` (raises _Invalid: the rule it breaks)."""
    rule = VR_RULES[vr]
    if rule.text == "code" and not text.isascii():
        raise _Invalid("characters outside the default repertoire")
    if rule.text == "paragraph":
        if _PARAGRAPH_CONTROL.search(text):
            raise _Invalid("control characters")
    elif _CONTROL.search(text):
        raise _Invalid("control characters")
    if rule.pattern is not None and not re.fullmatch(rule.pattern, text):
        raise _Invalid(f"not a valid {vr} value")
    if vr == "DA" or vr == "DT":
        if not _calendar_ok(vr, text):
            raise _Invalid("not a calendar date")
        if int(text[:4]) not in _YEARS:
            raise _Invalid("year outside 1000-2999")
    elif vr == "IS" and not -(2**31) <= int(text) < 2**31:
        raise _Invalid("integer string out of range")
    elif vr == "DS" and not math.isfinite(float(text)):
        raise _Invalid("not a finite number")
    try:
        encoded = text.encode(codec)
    except UnicodeEncodeError:
        raise _Invalid("characters outside the declared character set") from None
    if vr == "PN":
        groups = text.split("=")
        if len(groups) > 3 or any(len(g.split("^")) > 5 for g in groups):
            raise _Invalid("more than 3 component groups or 5 components")
        if any(len(g.encode(codec)) > 64 for g in groups):
            raise _Invalid("name component group over 64 bytes")
    elif rule.max_bytes is not None and len(encoded) > rule.max_bytes:
        raise _Invalid(f"over {rule.max_bytes} bytes ({vr})")
    return text


def _vm_reason(count: int, vm: tuple[int, int | None]) -> str | None:
    low, high = vm
    if count < low or (high is not None and count > high):
        expected = (
            f"{low}" if low == high else f"{low} or more" if high is None else f"{low}-{high}"
        )
        return f"{count} value(s) where {expected} allowed"
    return None


def _check(spec: Copied, vr: str, values: list[str], codec: str) -> tuple[list[str], str]:
    """Valid values, and the reason of a correction ("" when none)."""
    if vr not in _TEXT_VRS:
        values = [v.strip() for v in values]  # spaces around these are not significant
    if not any(values):
        return [], ""
    reason = _vm_reason(len(values), spec.vm)
    if reason is not None:
        raise _Invalid(reason)
    if len(values) > 1 and not all(v.strip() for v in values):
        raise _Invalid("an empty value among several")
    out: list[str] = []
    corrected = ""
    for value in values:
        try:
            out.append(_check_text(vr, value, codec))
            continue
        except _Invalid:
            repaired = _repair(vr, value, codec, spec.keyword)
            if repaired is None:
                raise
        out.append(_check_text(vr, repaired[0], codec))
        corrected = repaired[1]
    if spec.values and any(v not in spec.values for v in out):
        raise _Invalid(f"not one of {', '.join(spec.values)}")
    return out, corrected


def _lut_item(item: Dataset) -> Dataset:
    """A VOI LUT item highdicom can read: descriptor, 8- or 16-bit data, explanation."""
    descriptor = item.get("LUTDescriptor")
    data = item.get("LUTData")
    if descriptor is None or data is None or len(descriptor) != 3:
        raise _Invalid("a VOI LUT item lacks its descriptor or data")
    entries, first, bits = (int(v) for v in descriptor)
    if not 8 <= bits <= 16:
        raise _Invalid("VOI LUT entries not of 8 to 16 bits")
    dtype = np.uint8 if bits == 8 else np.uint16
    raw = bytes(data) if isinstance(data, bytes | bytearray) else np.asarray(data, dtype).tobytes()
    table = np.frombuffer(raw, dtype)
    if len(table) != (entries or 65536):
        raise _Invalid("VOI LUT data length differs from its descriptor")
    # The output range is 0 to 2^bits - 1 (PS3.3 C.11.2.1.2); dciodvfy also wants an
    # 8- or 16-bit table to reach the upper half, and the bits are not ours to change.
    top = int(table.max())
    if top >= 2**bits or (bits in (8, 16) and top < 2 ** (bits - 1)):
        raise _Invalid("VOI LUT data outside its descriptor's output range")
    out = Dataset()
    out.LUTDescriptor = [entries, first, bits]
    out.add_new(0x00283006, "OW", raw)
    explanation = item.get_item(0x00283003)
    if explanation is not None:
        try:
            texts = _texts(explanation, "LO", _Charset([], True, None))
            out.LUTExplanation = _check(Copied("LUTExplanation", "3"), "LO", texts, "ascii")[0][0]
        except (_Invalid, IndexError):
            pass  # optional, and ASCII only here: left out
    return out


def _voi_lut_sequence(source: Dataset, tag: int) -> list[Dataset]:
    try:
        items = source[tag].value
    except Exception as exc:  # a malformed sequence raises whatever pydicom's parser meets
        raise _Invalid("sequence cannot be read") from exc
    if not isinstance(items, DicomSequence) or not items:
        raise _Invalid("empty sequence")
    try:
        return [_lut_item(item) for item in items]
    except _Invalid:
        raise
    except Exception as exc:  # odd items: whatever pydicom's conversion raises
        raise _Invalid("a sequence item cannot be read") from exc


def _binary(element: DataElement | RawDataElement, source: Dataset, tag: int) -> list[Any]:
    try:
        value = source[tag].value if isinstance(element, RawDataElement) else element.value
    except Exception as exc:  # pydicom's conversion of a bad binary value
        raise _Invalid("value cannot be read") from exc
    if value is None or value == b"":
        return []
    return list(value) if isinstance(value, list | MultiValue) else [value]


# No stored pixel (at most 32 bits) rescaled or windowed by a real image comes near this.
_BEYOND_PIXELS = 2.0**32


def _together(copied: dict[str, Any], corrections: list[Correction]) -> None:
    """Rules across attributes: what goes together, or excludes another."""

    def drop(keyword: str, reason: str) -> None:
        if copied.pop(keyword, None) is not None:
            corrections.append(Correction(keyword, "dropped", reason))

    for pair, reason in (
        (("WindowCenter", "WindowWidth"), "window center and width go together"),
        (("RescaleIntercept", "RescaleSlope"), "rescale intercept and slope go together"),
    ):
        if sum(k in copied for k in pair) == 1:
            for keyword in pair:
                drop(keyword, reason)
    if "RescaleSlope" in copied:
        slope = float(copied["RescaleSlope"][0])
        intercept = float(copied["RescaleIntercept"][0])
        if slope == 0 or max(abs(slope), abs(intercept)) > _BEYOND_PIXELS:
            # Slope 0 maps every pixel to one value (issue 42: copied into the GSPS's
            # Modality LUT, dciodvfy errors); such magnitudes are no real rescale.
            for keyword in ("RescaleIntercept", "RescaleSlope"):
                drop(keyword, "rescale slope 0, or a value beyond any pixel range")
    if "WindowCenter" in copied:
        centers, widths = copied["WindowCenter"], copied["WindowWidth"]
        exact = copied.get("VOILUTFunction", ["LINEAR"])[0] != "LINEAR"
        if len(centers) != len(widths):
            reason = "window centers and widths differ in number"
        elif any(float(w) <= 0 or (not exact and float(w) < 1) for w in widths):
            reason = "window width below 1 (LINEAR) or not above 0"
        elif any(abs(float(v)) > _BEYOND_PIXELS for v in [*centers, *widths]):
            reason = f"a window value beyond any pixel range (magnitude over {_BEYOND_PIXELS:g})"
        else:
            reason = ""
        if reason:
            for keyword in ("WindowCenter", "WindowWidth"):
                drop(keyword, reason)
    if len(copied.get("WindowCenterWidthExplanation", [])) != len(copied.get("WindowCenter", [])):
        drop("WindowCenterWidthExplanation", "not one per window")
    if "WindowCenter" in copied:
        drop("VOILUTSequence", "the GSPS takes window values or a VOI LUT: the window is kept")
    elif "VOILUTFunction" in copied:
        drop("VOILUTFunction", "no window values to apply it to")
    if copied.get("PatientIdentityRemoved") == ["YES"] and "DeidentificationMethod" not in copied:
        drop("PatientIdentityRemoved", "YES needs a de-identification method (Type 1C)")


def _tag_vr(keyword: str) -> tuple[int, str]:
    tag = tag_for_keyword(keyword)
    if tag is None:
        raise KeyError(f"{keyword}: not a DICOM keyword")
    return tag, dictionary_VR(tag).split(" or ")[0]  # LUT Data "US or OW": read as US


def _refuse(keyword: str, reason: str) -> ValueError:
    return ValueError(
        f"source image's {keyword}: {reason}; the SR and GSPS reference the image by it "
        "as it is, so none are built (correct the image in the archive)"
    )


def copy_source_attributes(source: Dataset) -> SourceAttributes:
    """The attributes the SR and GSPS copy from `source`, each valid for DICOM.

    Args:
        source: the image's header, as read (pixel data not needed).

    Returns:
        A new dataset with the `COPIED` attributes the image holds (values valid, Type 2
        ones present, empty when unknown), Specific Character Set when needed, and the
        corrections made.

    Raises:
        ValueError: a UID or the size by which the results reference the image is
            invalid (a missing one is left for the caller to report).
    """
    charset, corrections = _charset(source)
    copied: dict[str, Any] = {}
    for spec in COPIED:
        tag, vr = _tag_vr(spec.keyword)
        element = source.get_item(tag)
        try:
            if element is None:
                values: list[Any] = []
            elif vr == "SQ":
                values = _voi_lut_sequence(source, tag)  # the one sequence in COPIED
            elif vr in _BINARY_VRS:
                values = _binary(element, source, tag)
                reason = _vm_reason(len(values), spec.vm) if values else None
                if reason is not None:
                    raise _Invalid(reason)
            else:
                values, fixed = _check(spec, vr, _texts(element, vr, charset), charset.codec)
                if fixed and values:
                    corrections.append(Correction(spec.keyword, "corrected", fixed))
        except _Invalid as bad:
            if spec.type == "1":
                raise _refuse(spec.keyword, str(bad)) from None
            action: Action = "emptied" if spec.type == "2" else "dropped"
            corrections.append(Correction(spec.keyword, action, str(bad)))
            values = []
        if values or spec.type == "2":
            copied[spec.keyword] = values
    _together(copied, corrections)
    sop_class = copied.get("SOPClassUID")
    if sop_class and sop_class[0] not in get_sop_class_iod_map():
        # highdicom copies modules by the image's IOD: it cannot build results without it.
        raise _refuse("SOPClassUID", "not an image storage SOP class highdicom knows")
    dataset = Dataset()
    if charset.output is not None:
        dataset.SpecificCharacterSet = charset.output
    for keyword, values in copied.items():
        tag, vr = _tag_vr(keyword)
        if vr == "SQ":
            value: Any = DicomSequence(values)
        elif not values:
            value = None if vr in _BINARY_VRS else ""
        elif len(values) == 1:
            value = values[0]
        else:
            value = list(values)
        dataset.add(DataElement(tag, vr, value))
    return SourceAttributes(dataset, tuple(corrections))


class CorrectionLog:
    """Logs each kind of correction once, and counts them: one per job (a push sink's).

    A line names the attribute's keyword, the action and the rule, never the value.
    """

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or log
        self.counts: Counter[Correction] = Counter()

    def record(self, corrections: Iterable[Correction]) -> None:
        """Count the corrections of one image; log those not seen before in this job."""
        for correction in corrections:
            if not self.counts[correction]:
                self.logger.warning(
                    "SR/GSPS: the source image's %s (logged once per job)", correction
                )
            self.counts[correction] += 1
