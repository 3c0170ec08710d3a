"""DICOM reading on pydicom-built files."""

from __future__ import annotations

import io
import signal
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from dicom_factory import (
    ACCESSION,
    BASIC_TEXT_SR,
    PATIENT_ID,
    PATIENT_NAME,
    build_dataset,
    corrupt_deflate,
    file_meta_bytes,
    gradient,
    to_bytes,
    two_valued_rows_dataset,
    voi_lut_dataset,
    write,
)
from pydicom.dataset import Dataset
from pydicom.encaps import encapsulate
from pydicom.sequence import Sequence as DicomSequence
from pydicom.uid import DeflatedExplicitVRLittleEndian, JPEGBaseline8Bit, RLELossless

from models.dicom import read_dicom, read_dicom_header, read_sr_text, reading
from models.errors import (
    ImageError,
    ImageTooLargeError,
    InvalidDicomError,
    MissingPixelData,
    UnsupportedImageError,
)
from models.images import load_image

MakeDicom = Callable[..., Path]


def test_read_dicom_monochrome2_scales_to_unit_range(make_dicom: MakeDicom) -> None:
    image = read_dicom(make_dicom(gradient()))
    assert image.pixels.dtype == np.float32
    assert image.pixels.shape == (48, 64)
    assert image.pixels[0, 0] == pytest.approx(0.0)
    assert image.pixels[0, -1] == pytest.approx(1.0)
    assert image.meta.accession_number == ACCESSION
    assert image.meta.rows == 48 and image.meta.columns == 64


def test_read_dicom_keeps_patient_id_out_of_repr(make_dicom: MakeDicom) -> None:
    meta = read_dicom(make_dicom(gradient())).meta
    # Kept only for keyed pseudonyms (patient-wise splits); never shown.
    assert meta.patient_id == PATIENT_ID
    assert PATIENT_ID not in repr(meta)
    assert PATIENT_NAME not in repr(meta)


def test_read_dicom_monochrome1_is_inverted(make_dicom: MakeDicom) -> None:
    image = read_dicom(make_dicom(gradient(), photometric="MONOCHROME1"))
    # MONOCHROME1: low stored values are displayed white, so the ramp reverses.
    assert image.pixels[0, 0] == pytest.approx(1.0)
    assert image.pixels[0, -1] == pytest.approx(0.0)


def test_read_dicom_applies_rescale_then_window(make_dicom: MakeDicom) -> None:
    # Stored 0..4095, rescale to -1024..3071 HU-like units, window 500 +/- 250 on that scale.
    path = make_dicom(
        gradient(top=4095),
        RescaleSlope=1,
        RescaleIntercept=-1024,
        WindowCenter=500,
        WindowWidth=500,
    )
    px = read_dicom(path).pixels
    stored = gradient(top=4095)[0]
    value = stored - 1024
    below = value < 250
    above = value > 750
    assert np.allclose(px[0, below], 0.0, atol=1e-3)
    assert np.allclose(px[0, above], 1.0, atol=1e-3)
    inside = (~below) & (~above)
    assert np.all(np.diff(px[0, inside]) >= 0) and 0.1 < px[0, inside].mean() < 0.9


@pytest.mark.issue(7)
@pytest.mark.parametrize("slope", [0, "0.0", "-0"])
def test_read_dicom_refuses_a_zero_rescale_slope(make_dicom: MakeDicom, slope: object) -> None:
    # A zero slope maps every pixel to the intercept: a blank image that used to be
    # predicted silently. Refused before decoding, by the image loader too.
    path = make_dicom(gradient(), RescaleSlope=slope, RescaleIntercept=-1024)
    with pytest.raises(InvalidDicomError, match=r"RescaleSlope \(0028,1053\) is 0"):
        read_dicom(path)
    with pytest.raises(InvalidDicomError, match="non-zero slope"):
        load_image(path)


@pytest.mark.issue(7)
@pytest.mark.parametrize(
    ("keyword", "value"),
    [
        ("AccessionNumber", "ACC\x00123"),
        ("StudyInstanceUID", "1.2.3\x00.4"),
        ("SeriesInstanceUID", "1.2.\x074"),
        ("SOPInstanceUID", "1.2.\x1f5"),
    ],
)
def test_read_dicom_refuses_control_characters_in_stored_strings(
    make_dicom: MakeDicom, keyword: str, value: str
) -> None:
    # These values are stored and echoed; a NUL inside one was a 500 on PostgreSQL.
    path = make_dicom(gradient(), **{keyword: value})
    for read in (read_dicom, read_dicom_header, load_image):
        with pytest.raises(InvalidDicomError, match=f"{keyword} .* control character"):
            read(path)


def test_read_dicom_strips_nul_padding(make_dicom: MakeDicom) -> None:
    path = make_dicom(gradient(), AccessionNumber="ACC123\x00", StudyInstanceUID="1.2.3\x00")
    meta = read_dicom(path).meta
    assert meta.accession_number == "ACC123" and meta.study_instance_uid == "1.2.3"


def test_read_dicom_keeps_non_square_geometry(make_dicom: MakeDicom) -> None:
    arr = np.zeros((40, 100))
    arr[5:10, 80:90] = 1000
    px = read_dicom(make_dicom(arr)).pixels
    assert px.shape == (40, 100)
    ys, xs = np.nonzero(px > 0.5)
    assert (ys.min(), ys.max(), xs.min(), xs.max()) == (5, 9, 80, 89)


def test_read_dicom_accepts_bytes_and_streams(make_dicom: MakeDicom) -> None:
    data = make_dicom(gradient()).read_bytes()
    assert read_dicom(data).pixels.shape == (48, 64)
    assert read_dicom(io.BytesIO(data)).pixels.shape == (48, 64)


def test_read_dicom_rejects_multiframe(make_dicom: MakeDicom) -> None:
    frames = np.stack([gradient(), gradient()])
    with pytest.raises(UnsupportedImageError, match="Number of Frames"):
        read_dicom(make_dicom(frames))


def test_read_dicom_rejects_missing_pixel_data(make_dicom: MakeDicom) -> None:
    with pytest.raises(MissingPixelData, match="7FE0,0010"):
        read_dicom(make_dicom(None))


def test_read_dicom_rejects_non_dicom(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"this is not a dicom file at all" * 10)
    with pytest.raises(InvalidDicomError, match="not a DICOM"):
        read_dicom(path)
    with pytest.raises(InvalidDicomError, match="no such file"):
        read_dicom(tmp_path / "missing.dcm")


def test_read_dicom_rejects_truncated_file(make_dicom: MakeDicom, tmp_path: Path) -> None:
    data = make_dicom(gradient(64, 64)).read_bytes()
    cut = tmp_path / "cut.dcm"
    cut.write_bytes(data[: len(data) - 3000])
    with pytest.raises(InvalidDicomError, match="truncated"):
        read_dicom(cut)
    header_only = tmp_path / "header.dcm"
    header_only.write_bytes(data[:200])
    with pytest.raises(ImageError, match="truncated or is not an image"):
        read_dicom(header_only)


def test_read_dicom_rejects_ct(make_dicom: MakeDicom) -> None:
    with pytest.raises(UnsupportedImageError, match="'CT'.*projection radiograph"):
        read_dicom(make_dicom(gradient(), modality="CT"))


def test_read_dicom_rejects_absurd_dimensions(make_dicom: MakeDicom) -> None:
    with pytest.raises(UnsupportedImageError, match="at least 32"):
        read_dicom(make_dicom(np.zeros((16, 16))))
    ds = build_dataset(np.zeros((40, 40)))
    ds.Rows = 20000  # header lies; must be refused before any decode
    path = write(ds, make_dicom(np.zeros((40, 40))).with_name("huge.dcm"))
    with pytest.raises(ImageTooLargeError, match="limit is 10000"):
        read_dicom(path)


def test_read_dicom_rejects_palette_colour(make_dicom: MakeDicom) -> None:
    with pytest.raises(UnsupportedImageError, match="PALETTE COLOR"):
        read_dicom(make_dicom(gradient(), photometric="PALETTE COLOR"))


def test_read_dicom_decodes_rle(make_dicom: MakeDicom, tmp_path: Path) -> None:
    ds = build_dataset(gradient())
    ds.compress(RLELossless)
    px = read_dicom(write(ds, tmp_path / "rle.dcm")).pixels
    assert px.shape == (48, 64) and px[0, -1] == pytest.approx(1.0)


def test_read_dicom_decodes_jpeg_baseline(tmp_path: Path) -> None:
    from PIL import Image

    arr = gradient(64, 64, top=255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=95)
    ds = build_dataset(arr, bits=8)
    ds.file_meta.TransferSyntaxUID = JPEGBaseline8Bit
    ds.PixelData = encapsulate([buf.getvalue()])
    ds["PixelData"].VR = "OB"
    ds.PhotometricInterpretation = "MONOCHROME2"
    path = tmp_path / "jpeg.dcm"
    ds.save_as(path, enforce_file_format=True)
    px = read_dicom(path).pixels
    assert px.shape == (64, 64)
    assert px[:, :8].mean() < 0.1 and px[:, -8:].mean() > 0.9


def test_read_dicom_header_flags(make_dicom: MakeDicom, tmp_path: Path) -> None:
    header = read_dicom_header(make_dicom(gradient()))
    assert header.has_pixel_data and not header.is_dicomdir and not header.is_structured_report
    assert header.modality == "DX" and header.accession_number == ACCESSION
    sr = read_dicom_header(make_dicom(None, modality="SR", sop_class=BASIC_TEXT_SR))
    assert sr.is_structured_report and not sr.has_pixel_data
    with pytest.raises(InvalidDicomError):
        read_dicom_header(Path(__file__))


def _text_item(meaning: str, text: str) -> Dataset:
    item = Dataset()
    item.ValueType = "TEXT"
    code = Dataset()
    code.CodeMeaning = meaning
    item.ConceptNameCodeSequence = DicomSequence([code])
    item.TextValue = text
    return item


def test_read_sr_text_keeps_section_headings(tmp_path: Path) -> None:
    ds = build_dataset(None, modality="SR", sop_class=BASIC_TEXT_SR)
    container = Dataset()
    container.ValueType = "CONTAINER"
    code = Dataset()
    code.CodeMeaning = "Findings"
    container.ConceptNameCodeSequence = DicomSequence([code])
    container.ContentSequence = DicomSequence([_text_item("Finding", "Small left effusion.")])
    ds.ContentSequence = DicomSequence([container, _text_item("Impression", "Effusion.")])
    text = read_sr_text(write(ds, tmp_path / "sr.dcm"))
    assert text.splitlines()[0] == "FINDINGS:"
    assert "Small left effusion." in text
    assert text.splitlines()[-1] == "IMPRESSION: Effusion."


def test_read_sr_text_rejects_images(make_dicom: MakeDicom) -> None:
    with pytest.raises(InvalidDicomError, match="not a Structured Report"):
        read_sr_text(make_dicom(gradient()))


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Fail (instead of hanging the suite) if the block runs longer than `seconds`."""

    def expire(*_: object) -> None:
        raise TimeoutError(f"still running after {seconds} s: the reader hangs")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# The three files that froze a batch job (issue 7 item 2), and their relatives.
POISONED = {
    "corrupt-deflate": (lambda: corrupt_deflate(), "deflate-compressed data is corrupt"),
    "voi-lut-0-bits": (lambda: to_bytes(voi_lut_dataset((256, 0, 0))), "gives 0 bits"),
    "rows-vm2": (lambda: to_bytes(two_valued_rows_dataset()), r"Rows \(0028,0010\) holds 2"),
    "voi-lut-64-bits": (lambda: to_bytes(voi_lut_dataset((256, 0, 64))), "gives 64 bits"),
    "voi-lut-0-entries": (
        lambda: to_bytes(voi_lut_dataset((0, 0, 16), data_length=256)),
        "announces 65536",
    ),
    "voi-lut-short-data": (
        lambda: to_bytes(voi_lut_dataset((256, 0, 16), data_length=10)),
        "has 10 entries",
    ),
    "voi-lut-long-data": (
        lambda: to_bytes(voi_lut_dataset((256, 0, 16), data_length=1000)),
        "has 1000 entries",
    ),
}


@pytest.mark.issue(7)
@pytest.mark.parametrize("kind", sorted(POISONED))
def test_load_image_poisoned_file_fails_promptly_with_image_error(
    kind: str, tmp_path: Path
) -> None:
    build, message = POISONED[kind]
    path = tmp_path / f"{kind}.dcm"
    path.write_bytes(build())
    with _time_limit(10), pytest.raises(ImageError, match=message) as caught:
        load_image(path)
    assert str(path) in str(caught.value) and "re-export" in str(caught.value).lower()
    with _time_limit(10), pytest.raises(ImageError, match=message):
        load_image(path.read_bytes(), filename="upload.dcm")
    # The header reader of the batch scan reads no pixels, so it may accept a bad LUT or
    # Rows; it must never raise anything but an ImageError.
    try:
        with _time_limit(10):
            read_dicom_header(path)
    except ImageError as exc:
        assert str(path) in str(exc)


@pytest.mark.issue(7)
def test_read_dicom_header_corrupt_deflate_is_invalid_dicom(tmp_path: Path) -> None:
    path = tmp_path / "deflate.dcm"
    path.write_bytes(corrupt_deflate())
    with pytest.raises(InvalidDicomError, match="deflate-compressed data is corrupt"):
        read_dicom_header(path)


@pytest.mark.issue(7)
def test_read_dicom_valid_deflate_and_voi_lut_still_read(tmp_path: Path) -> None:
    ds = build_dataset(gradient())
    ds.file_meta.TransferSyntaxUID = DeflatedExplicitVRLittleEndian
    px = load_image(write(ds, tmp_path / "deflated.dcm")).pixels
    assert px.shape == (48, 64) and px[0, -1] == pytest.approx(1.0)
    lut = load_image(to_bytes(voi_lut_dataset((256, 0, 8)))).pixels
    assert lut.shape == (48, 64) and np.isfinite(lut).all()


@pytest.mark.issue(7)
def test_read_dicom_refuses_deflate_bomb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    import models.dicom

    monkeypatch.setattr(models.dicom, "MAX_INFLATED_BYTES", 1 << 20)
    path = _deflated_zeros(tmp_path / "bomb.dcm", 4 << 20)
    with pytest.raises(ImageTooLargeError, match="inflates beyond 1 MiB"):
        load_image(path)
    with pytest.raises(ImageTooLargeError, match="deflate bomb"):
        read_dicom_header(path)


def _deflated_zeros(path: Path, size: int) -> Path:
    """A Deflated Explicit VR Little Endian file whose dataset inflates to `size` zeros."""
    import zlib

    compressor = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    bomb = compressor.compress(b"\0" * size) + compressor.flush()
    path.write_bytes(file_meta_bytes(DeflatedExplicitVRLittleEndian) + bomb)
    return path


def test_read_dicom_refuses_a_deflate_bomb_under_the_size_limits(tmp_path: Path) -> None:
    # 32 MiB of zeros from 32 KB: within every size limit, yet pydicom parsed such a stream
    # as millions of empty elements (seconds and hundreds of MB per file).

    path = _deflated_zeros(tmp_path / "bomb.dcm", 32 << 20)
    with pytest.raises(ImageTooLargeError, match="more than 100-fold"):
        read_dicom_header(path)
    with pytest.raises(ImageTooLargeError, match="more than 100-fold"):
        load_image(path)


@pytest.mark.issue(7)
def test_read_dicom_deflate_limit_follows_max_pixels(tmp_path: Path) -> None:

    path = _deflated_zeros(tmp_path / "bomb.dcm", 24 << 20)  # 24 MiB in ~24 KB
    # 1000 pixels of 16-bit RGB need 6 KB; the bound is that plus 16 MiB of header room.
    with pytest.raises(ImageTooLargeError, match="inflates beyond 16 MiB"):
        load_image(path, max_pixels=1000)


@pytest.mark.issue(7)
@pytest.mark.parametrize(
    ("elements", "message"),
    [
        ({"RescaleSlope": "NaN"}, r"Rescale Slope|RescaleSlope \(0028,1053\)"),
        ({"RescaleSlope": [1, 2], "RescaleIntercept": 0}, "holds 2 values"),
        ({"WindowCenter": 100, "WindowWidth": 0}, r"Window Width \(0028,1051\) is 0"),
        ({"BitsStored": 20}, "more than Bits Allocated"),
        ({"SamplesPerPixel": 3}, "Samples per Pixel"),
        ({"PixelRepresentation": 7}, r"PixelRepresentation \(0028,0103\) is 7"),
        ({"Columns": "abc"}, r"Columns \(0028,0011\)"),
    ],
)
def test_read_dicom_malformed_element_names_the_tag(
    elements: dict[str, object], message: str, tmp_path: Path
) -> None:
    ds = build_dataset(gradient())
    for key, value in elements.items():
        if key == "Columns":
            ds.add_new(0x00280011, "LO", value)  # a string where an integer belongs
        else:
            setattr(ds, key, value)
    with pytest.raises(ImageError, match=message):
        load_image(write(ds, tmp_path / "bad.dcm"))


@pytest.mark.issue(7)
@pytest.mark.parametrize("exc", [struct.error("bad"), TypeError("x"), KeyError("y"), MemoryError()])
def test_reading_maps_any_decoder_exception_to_image_error(exc: Exception) -> None:
    with pytest.raises(ImageError, match="scan.dcm") as caught, reading("scan.dcm"):
        raise exc
    assert caught.value.__cause__ is exc


def test_reading_lets_keyboard_interrupt_through() -> None:
    with pytest.raises(KeyboardInterrupt), reading("scan.dcm"):
        raise KeyboardInterrupt


def _jpeg_dicom(rows: int, columns: int, jpeg_size: tuple[int, int]) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (jpeg_size[1], jpeg_size[0]), 100).save(buf, format="JPEG")
    ds = build_dataset(np.zeros((rows, columns)), bits=8)
    ds.file_meta.TransferSyntaxUID = JPEGBaseline8Bit
    ds.PixelData = encapsulate([buf.getvalue()])
    ds["PixelData"].VR = "OB"
    return to_bytes(ds)


@pytest.mark.issue(7)
def test_read_dicom_refuses_codestream_larger_than_header_before_decoding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pydicom.dataset

    # The header says 64x64 (within any limit); the JPEG inside is 4000x3000.
    data = _jpeg_dicom(64, 64, (4000, 3000))

    def no_decoding(*_: object) -> None:
        raise AssertionError("pixels decoded")

    monkeypatch.setattr(pydicom.dataset.Dataset, "pixel_array", property(no_decoding))
    with pytest.raises(InvalidDicomError, match="compressed frame is 4000x3000 but Rows x Col"):
        load_image(data, max_pixels=1_000_000)


@pytest.mark.issue(7)
def test_read_dicom_checks_jpeg2000_size_against_header() -> None:
    from pydicom.uid import JPEG2000Lossless

    ds = build_dataset(gradient(48, 64))
    ds.BitsStored, ds.HighBit = 12, 11
    ds.compress(JPEG2000Lossless)
    assert load_image(to_bytes(ds)).pixels.shape == (48, 64)
    ds.Rows = 40
    with pytest.raises(InvalidDicomError, match="compressed frame is 48x64 but .* say 40x64"):
        load_image(to_bytes(ds))


@pytest.mark.issue(7)
def test_read_dicom_jpeg_without_frame_header_is_invalid() -> None:
    ds = build_dataset(np.zeros((64, 64)), bits=8)
    ds.file_meta.TransferSyntaxUID = JPEGBaseline8Bit
    ds.PixelData = encapsulate([b"\xff\xd8\xff\xda" + b"\0" * 100])
    ds["PixelData"].VR = "OB"
    with pytest.raises(InvalidDicomError, match="no readable JPEG frame header"):
        load_image(to_bytes(ds))
