"""`load_for_model`'s fingerprint of the model input: what a batch compares, with the SOP
Instance UID, to tell a second copy of an image from another image."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import numpy as np
from dicom_factory import build_dataset, chest_pixels, to_bytes, write
from pydicom.uid import ImplicitVRLittleEndian

from models.image_pipeline import InputSpec, load_for_model, load_task

SPEC = InputSpec(64, "letterbox", fingerprint=True)


def test_fingerprint_is_the_same_for_the_same_file(tmp_path: Path) -> None:
    path = write(build_dataset(chest_pixels()), tmp_path / "IM1.dcm")
    first = load_for_model(path, SPEC)
    again = load_for_model(path.read_bytes(), SPEC)  # read again, from its bytes
    assert first.fingerprint is not None and len(first.fingerprint) == 32
    int(first.fingerprint, 16)  # hex digits
    assert again.fingerprint == first.fingerprint


def test_fingerprint_is_the_same_in_another_transfer_syntax() -> None:
    ds = build_dataset(chest_pixels())
    implicit = copy.deepcopy(ds)
    implicit.file_meta.TransferSyntaxUID = ImplicitVRLittleEndian
    assert to_bytes(implicit) != to_bytes(ds)
    assert load_for_model(to_bytes(implicit), SPEC).fingerprint == (
        load_for_model(to_bytes(ds), SPEC).fingerprint
    )


def test_fingerprint_differs_for_other_pixels() -> None:
    one = load_for_model(to_bytes(build_dataset(chest_pixels(seed=0))), SPEC)
    other = load_for_model(to_bytes(build_dataset(chest_pixels(seed=1))), SPEC)
    inverted = load_for_model(
        to_bytes(build_dataset(chest_pixels(seed=0), photometric="MONOCHROME1")), SPEC
    )
    assert len({one.fingerprint, other.fingerprint, inverted.fingerprint}) == 3


def test_fingerprint_differs_for_the_same_pixels_in_another_shape() -> None:
    # 32x64 and 64x32 fit to the same number of input pixels: the geometry tells them apart.
    flat = np.zeros((32, 64), np.uint16)
    tall = np.zeros((64, 32), np.uint16)
    wide = load_for_model(to_bytes(build_dataset(flat)), SPEC)
    high = load_for_model(to_bytes(build_dataset(tall)), SPEC)
    assert wide.prepared.pixels.tobytes() == high.prepared.pixels.tobytes()
    assert wide.fingerprint != high.fingerprint


def test_fingerprint_follows_the_model_input_size() -> None:
    data = to_bytes(build_dataset(chest_pixels()))
    small = load_for_model(data, SPEC)
    large = load_for_model(data, InputSpec(96, "letterbox", fingerprint=True))
    assert small.fingerprint != large.fingerprint


def test_no_fingerprint_unless_asked() -> None:
    data = to_bytes(build_dataset(chest_pixels()))
    assert load_for_model(data, InputSpec(64, "letterbox")).fingerprint is None
    assert InputSpec(64, "letterbox", None, None) == InputSpec(64, "letterbox")  # positional


def test_spec_and_fingerprint_cross_to_a_worker_process(tmp_path: Path) -> None:
    # Decoding workers get the spec pickled and send the loaded image back pickled.
    path = write(build_dataset(chest_pixels()), tmp_path / "IM1.dcm")
    spec = pickle.loads(pickle.dumps(SPEC))
    assert spec.fingerprint is True
    loaded = pickle.loads(pickle.dumps(load_task((str(path), spec, "dicom"))))
    assert loaded.fingerprint == load_for_model(path, SPEC).fingerprint


def test_an_upload_task_gives_what_load_for_model_gives_from_the_stream(tmp_path: Path) -> None:
    import os
    import tempfile

    from models.image_pipeline import OpenFile, ReadImage, fit_read, load_upload_task

    spec = InputSpec(64, "letterbox", display_size=48, fingerprint=True)
    with tempfile.TemporaryFile(dir=tmp_path) as upload:  # as the service spools it
        upload.write(to_bytes(build_dataset(chest_pixels())))
        upload.seek(0)
        here = load_for_model(upload, spec, filename="upload")
        # Each task closes its duplicate of the descriptor, never the caller's.
        fitted = load_upload_task((OpenFile(os.dup(upload.fileno())), "upload", spec, True))
        read = load_upload_task((OpenFile(os.dup(upload.fileno())), "upload", spec, False))
        upload.seek(0)  # the duplicates shared its offset
        assert upload.read(4) != b""  # still open and readable
    assert isinstance(read, ReadImage) and not isinstance(fitted, ReadImage)
    for loaded in (fitted, fit_read(read, spec)):
        assert loaded.fingerprint == here.fingerprint
        assert loaded.prepared.geometry == here.prepared.geometry
        assert np.array_equal(loaded.prepared.pixels, here.prepared.pixels)
        assert loaded.display is not None and here.display is not None
        assert np.array_equal(loaded.display, here.display)
        assert loaded.meta == here.meta


def test_an_open_file_crosses_to_a_worker_as_a_duplicate_descriptor(tmp_path: Path) -> None:
    import os
    import tempfile

    from models.decode_pool import DecodePool
    from models.image_pipeline import OpenFile, load_upload_task

    spec = InputSpec(64, "letterbox")
    with tempfile.TemporaryFile(dir=tmp_path) as upload:  # no name on disk
        upload.write(to_bytes(build_dataset(chest_pixels())))
        upload.seek(0)
        here = load_for_model(upload, spec, filename="upload")
        with DecodePool(load_upload_task, workers=1, on_error=lambda _, e: e) as pool:
            results = list(pool.map([(OpenFile(upload.fileno()), "upload", spec, True)] * 2))
        os.fstat(upload.fileno())  # the caller's descriptor is still its own
    for loaded in results:
        assert not isinstance(loaded, Exception), loaded
        assert np.array_equal(loaded.prepared.pixels, here.prepared.pixels)
