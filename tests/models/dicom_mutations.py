"""Mutations of DICOM files for fuzzing the reader (issue 7 item 3).

A mutation is a short list of operations, each a plain tuple so it prints as a
reproducible description:

- ("set", keyword, value): give an element a hostile value (wrong VR, several values,
  out of range, NaN, a string where a number belongs);
- ("delete", keyword);
- ("lut", sequence, entries, first, bits, data_length): add a Modality or VOI LUT with
  that LUT Descriptor and that many LUT Data entries;
- ("encode", uid): re-encode the dataset in another transfer syntax (implicit VR,
  deflate, RLE, big endian);
- ("relabel", uid): announce another transfer syntax without re-encoding anything;
- ("truncate", fraction), ("flip", fraction, bit), ("poke", fraction, byte),
  ("cut", fraction, length): byte-level damage, at a fraction of the file's length
  (fractions below 0.1 usually land in the header).

`random_mutation` draws one with `random.Random` (benchmarks/fuzz_dicom.py) and
`mutation_strategy` with hypothesis (tests/models/test_dicom_fuzz.py); `apply` turns
a base file and a mutation into new bytes. The generated base files are in `base_files`.
"""

from __future__ import annotations

import io
import random
import warnings
from typing import Any

import numpy as np
from dicom_factory import build_dataset, file_meta_bytes, gradient, to_bytes
from pydicom import dcmread
from pydicom.datadict import keyword_for_tag, tag_for_keyword
from pydicom.dataset import Dataset
from pydicom.encaps import encapsulate
from pydicom.sequence import Sequence as DicomSequence
from pydicom.uid import (
    DeflatedExplicitVRLittleEndian,
    ExplicitVRBigEndian,
    ExplicitVRLittleEndian,
    ImplicitVRLittleEndian,
    JPEG2000Lossless,
    JPEGBaseline8Bit,
    JPEGLosslessSV1,
    JPEGLSLossless,
    RLELossless,
)

Op = tuple[Any, ...]
Mutation = tuple[Op, ...]

KEYWORDS = (
    "Rows",
    "Columns",
    "BitsAllocated",
    "BitsStored",
    "HighBit",
    "PixelRepresentation",
    "PhotometricInterpretation",
    "SamplesPerPixel",
    "PlanarConfiguration",
    "NumberOfFrames",
    "RescaleSlope",
    "RescaleIntercept",
    "WindowCenter",
    "WindowWidth",
    "Modality",
    "PixelData",
)
HOSTILE_VALUES: tuple[Any, ...] = (
    0,
    1,
    2,
    3,
    7,
    8,
    12,
    15,
    16,
    17,
    32,
    33,
    64,
    255,
    4095,
    10_000,
    65535,
    -1,
    -32768,
    2**31,
    2**40,
    (48, 48),
    (1, 2, 3),
    "",
    "abc",
    "1e9",
    "NaN",
    0.0,
    -1.0,
    1e-30,
    1e308,
    float("inf"),
    float("nan"),
    "MONOCHROME1",
    "MONOCHROME2",
    "RGB",
    "YBR_FULL",
    "YBR_FULL_422",
    "PALETTE COLOR",
    "MONOCHROME3",
    b"",
    b"\x00\x01",
)
TRANSFER_SYNTAXES = (
    ImplicitVRLittleEndian,
    ExplicitVRLittleEndian,
    ExplicitVRBigEndian,
    DeflatedExplicitVRLittleEndian,
    JPEGBaseline8Bit,
    JPEGLosslessSV1,
    JPEGLSLossless,
    JPEG2000Lossless,
    RLELossless,
    "1.2.3.4.5.6.7.8.9",
)
LUT_ENTRIES = (0, 1, 2, 256, 4096, 65535)
LUT_BITS = (0, 1, 8, 10, 12, 16, 17, 32, 64, 255)
LUT_LENGTHS = (0, 1, 10, 256, 4096, 70000)


BASE_NAMES = (
    "mono2-16bit-window",
    "mono1-8bit",
    "rescale-implicit",
    "rle",
    "deflated",
    "voi-lut",
    "jpeg-baseline",
    "rgb",
)


def base_files() -> dict[str, bytes]:
    """Small generated radiographs covering the reader's paths (native, LUTs, codecs)."""
    files: dict[str, bytes] = {}
    files["mono2-16bit-window"] = to_bytes(
        build_dataset(gradient(48, 64), WindowCenter=2048, WindowWidth=4096)
    )
    files["mono1-8bit"] = to_bytes(
        build_dataset(gradient(40, 56, top=255), photometric="MONOCHROME1", bits=8)
    )
    rescaled = build_dataset(gradient(48, 48), RescaleSlope=2, RescaleIntercept=-1024)
    files["rescale-implicit"] = to_bytes(_reencode(rescaled, ImplicitVRLittleEndian))
    rle = build_dataset(gradient(40, 40))
    rle.compress(RLELossless)
    files["rle"] = to_bytes(rle)
    files["deflated"] = to_bytes(
        _reencode(build_dataset(gradient(40, 40)), DeflatedExplicitVRLittleEndian)
    )
    lut = build_dataset(gradient(40, 40, top=255), bits=8)
    _add_lut(lut, "VOILUTSequence", 256, 0, 8, 256)
    files["voi-lut"] = to_bytes(lut)
    files["jpeg-baseline"] = _jpeg_dicom()
    rgb = build_dataset(gradient(36, 36, top=255), bits=8)
    rgb.SamplesPerPixel, rgb.PhotometricInterpretation, rgb.PlanarConfiguration = 3, "RGB", 0
    rgb.PixelData = (
        np.repeat(gradient(36, 36, top=255)[..., None], 3, axis=2).astype(np.uint8).tobytes()
    )
    files["rgb"] = to_bytes(rgb)
    assert tuple(files) == BASE_NAMES
    return files


def _jpeg_dicom() -> bytes:
    from PIL import Image

    arr = gradient(48, 48, top=255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=90)
    ds = build_dataset(arr, bits=8)
    ds.file_meta.TransferSyntaxUID = JPEGBaseline8Bit
    ds.PixelData = encapsulate([buf.getvalue()])
    ds["PixelData"].VR = "OB"
    return to_bytes(ds)


def random_mutation(rng: random.Random) -> Mutation:
    """One to three operations drawn at random (for the long fuzz script)."""
    ops: list[Op] = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        kind = rng.choice(
            (
                "set",
                "set",
                "set",
                "delete",
                "lut",
                "encode",
                "relabel",
                "truncate",
                "flip",
                "flip",
                "poke",
                "cut",
            )
        )
        frac = rng.random() * (0.1 if rng.random() < 0.6 else 1.0)
        if kind == "set":
            ops.append(("set", rng.choice(KEYWORDS), rng.choice(HOSTILE_VALUES)))
        elif kind == "delete":
            ops.append(("delete", rng.choice(KEYWORDS)))
        elif kind == "lut":
            ops.append(
                (
                    "lut",
                    rng.choice(("VOILUTSequence", "ModalityLUTSequence")),
                    rng.choice(LUT_ENTRIES),
                    rng.choice((0, 1, -5, 100)),
                    rng.choice(LUT_BITS),
                    rng.choice(LUT_LENGTHS),
                )
            )
        elif kind in ("encode", "relabel"):
            ops.append((kind, rng.choice(TRANSFER_SYNTAXES)))
        elif kind == "truncate":
            ops.append(("truncate", rng.random()))
        elif kind == "flip":
            ops.append(("flip", frac, rng.randrange(8)))
        elif kind == "poke":
            ops.append(("poke", frac, rng.choice((0x00, 0xFF, 0x7F, 0x80, 0x20))))
        else:
            ops.append(("cut", frac, rng.choice((1, 2, 4, 8, 64))))
    return tuple(ops)


def mutation_strategy() -> Any:
    """A hypothesis strategy of mutations (hypothesis is imported only here)."""
    from hypothesis import strategies as st

    fraction = st.one_of(st.floats(0, 0.1), st.floats(0, 1))
    op = st.one_of(
        st.tuples(st.just("set"), st.sampled_from(KEYWORDS), st.sampled_from(HOSTILE_VALUES)),
        st.tuples(st.just("delete"), st.sampled_from(KEYWORDS)),
        st.tuples(
            st.just("lut"),
            st.sampled_from(("VOILUTSequence", "ModalityLUTSequence")),
            st.sampled_from(LUT_ENTRIES),
            st.sampled_from((0, 1, -5, 100)),
            st.sampled_from(LUT_BITS),
            st.sampled_from(LUT_LENGTHS),
        ),
        st.tuples(st.sampled_from(("encode", "relabel")), st.sampled_from(TRANSFER_SYNTAXES)),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("flip"), fraction, st.integers(0, 7)),
        st.tuples(st.just("poke"), fraction, st.sampled_from((0x00, 0xFF, 0x7F, 0x80))),
        st.tuples(st.just("cut"), fraction, st.sampled_from((1, 2, 4, 8, 64))),
    )
    return st.lists(op, min_size=1, max_size=3).map(tuple)


def describe(base: str, mutation: Mutation) -> str:
    """A one-line, reproducible description of `mutation` applied to `base`."""
    return f"{base}: " + "; ".join(repr(op) for op in mutation)


def apply(data: bytes, mutation: Mutation) -> bytes | None:
    """The mutated file, or None when pydicom cannot even write the mutated dataset."""
    dataset_ops = [op for op in mutation if op[0] in ("set", "delete", "lut", "encode")]
    if dataset_ops:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ds = dcmread(io.BytesIO(data))
                ds.PixelData  # noqa: B018 - load it before the encoding changes
                for op in dataset_ops:
                    ds = _apply_dataset_op(ds, op)
                data = to_bytes(ds)
        except Exception:  # noqa: BLE001 - an unwritable mutation is skipped, not a finding
            return None
    for op in mutation:
        data = _apply_byte_op(data, op)
    return data


def _apply_dataset_op(ds: Dataset, op: Op) -> Dataset:
    kind = op[0]
    if kind == "set":
        _put(ds, op[1], op[2])
    elif kind == "delete":
        if op[1] in ds:
            del ds[op[1]]
    elif kind == "lut":
        _add_lut(ds, *op[1:])
    elif kind == "encode":
        ds = _reencode(ds, op[1])
    return ds


def _put(ds: Dataset, keyword: str, value: Any) -> None:
    """Store `value` under `keyword` with a VR that can hold it (maybe not the right one)."""
    tag = tag_for_keyword(keyword)
    assert tag is not None and keyword_for_tag(tag) == keyword
    if isinstance(value, bytes):
        ds.add_new(tag, "OB", value)
    elif isinstance(value, tuple):
        ds.add_new(tag, "US", list(value))
    elif isinstance(value, bool | int):
        if 0 <= value < 2**16:
            vr = "US"
        elif -(2**15) <= value < 0:
            vr = "SS"
        elif 0 <= value < 2**32:
            vr = "UL"
        else:
            vr, value = "IS", str(value)[:12]
        ds.add_new(tag, vr, value)
    elif isinstance(value, float):
        ds.add_new(tag, "DS", repr(value)[:16])
    else:
        ds.add_new(tag, "CS", value)


def _add_lut(ds: Dataset, sequence: str, entries: int, first: int, bits: int, length: int) -> None:
    item = Dataset()
    item.add_new(0x00283002, "US" if first >= 0 else "SS", [entries, first, bits])
    top = (1 << min(bits, 16)) - 1 if bits > 0 else 255
    values = np.linspace(0, top, length).astype(int).tolist() if length else []
    item.add_new(0x00283006, "US", values)
    if sequence == "ModalityLUTSequence":
        item.ModalityLUTType = "US"
    setattr(ds, sequence, DicomSequence([item]))


def _reencode(ds: Dataset, uid: str) -> Dataset:
    if uid == RLELossless and not ds.file_meta.TransferSyntaxUID.is_compressed:
        ds.compress(RLELossless)
        return ds
    if ds.file_meta.TransferSyntaxUID.is_compressed and uid in (
        ImplicitVRLittleEndian,
        ExplicitVRLittleEndian,
        ExplicitVRBigEndian,
        DeflatedExplicitVRLittleEndian,
    ):
        ds.decompress()
    ds.file_meta.TransferSyntaxUID = uid
    return ds


def _apply_byte_op(data: bytes, op: Op) -> bytes:
    kind = op[0]
    if not data or kind not in ("relabel", "truncate", "flip", "poke", "cut"):
        return data
    if kind == "relabel":
        return _relabel(data, op[1])
    if kind == "truncate":
        return data[: int(len(data) * op[1])]
    at = min(int(len(data) * op[1]), len(data) - 1)
    if kind == "flip":
        return data[:at] + bytes([data[at] ^ (1 << op[2])]) + data[at + 1 :]
    if kind == "poke":
        return data[:at] + bytes([op[2]]) + data[at + 1 :]
    return data[:at] + data[at + op[2] :]


def _relabel(data: bytes, uid: str) -> bytes:
    """Swap the File Meta Information for one announcing `uid`; the body is unchanged."""
    if len(data) < 144 or data[128:132] != b"DICM":
        return data
    meta_length = int.from_bytes(data[140:144], "little")
    return file_meta_bytes(uid) + data[144 + meta_length :]
