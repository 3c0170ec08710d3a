"""The upload decoders (models/upload_decoding.py): worker processes that decode an upload,
their device fit beside a GPU, and a close that ends a decode in progress. Uploads through
the service's route: tests/app/test_upload_workers.py."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
import torch
from dicom_factory import chest_pixels, dx_bytes
from troubled_decoder import troubled_upload_load

from models.upload_decoding import UploadDecoders

pytestmark = pytest.mark.issue(19)

_CPU = torch.device("cpu")


def test_upload_decoders_need_a_worker() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        UploadDecoders(0, timeout_s=None)


def test_beside_a_gpu_the_worker_only_decodes_and_the_device_fits(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile
    from types import SimpleNamespace

    import models.upload_decoding
    from models.image_pipeline import InputSpec, ReadImage, fit_read, load_for_model

    fitted_on: list[Any] = []

    def on_the_device(image: ReadImage, spec: InputSpec, device: Any) -> Any:
        assert isinstance(image, ReadImage)  # decoded in the worker, not fitted there
        fitted_on.append(device)
        return fit_read(image, spec)  # (this machine has no GPU: fitted on the host)

    monkeypatch.setattr(models.upload_decoding, "fit_read", on_the_device)
    spec = InputSpec(64, "letterbox", display_size=48)
    gpu = SimpleNamespace(type="cuda")
    decoders = UploadDecoders(1, timeout_s=30.0)
    try:
        with tempfile.TemporaryFile(dir=tmp_path) as upload:
            upload.write(dx_bytes(pixels=chest_pixels(96, 80)))
            upload.seek(0)
            here = load_for_model(upload, spec, filename="upload")
            loaded = decoders.load(upload, "upload", spec, gpu)  # type: ignore[arg-type]
    finally:
        decoders.close()
    assert fitted_on == [gpu]
    assert np.array_equal(loaded.prepared.pixels, here.prepared.pixels)
    assert loaded.display is not None and here.display is not None
    assert np.array_equal(loaded.display, here.display)


def test_closing_ends_a_decode_in_progress_at_once(tmp_path: Any) -> None:
    import tempfile
    import threading
    import time

    from models.image_pipeline import InputSpec

    decoders = UploadDecoders(1, timeout_s=60.0, fn=troubled_upload_load)
    errors: list[BaseException] = []

    def decode() -> None:
        with tempfile.TemporaryFile(dir=tmp_path) as upload:
            upload.write(dx_bytes(pixels=chest_pixels(96, 80)))
            try:
                decoders.load(upload, "hang.dcm", InputSpec(64, "letterbox"), _CPU)
            except BaseException as exc:  # noqa: BLE001 - what the request would see
                errors.append(exc)

    thread = threading.Thread(target=decode)
    thread.start()
    time.sleep(1.0)  # the worker is in the hanging decode
    t0 = time.perf_counter()
    decoders.close()
    thread.join(10)
    assert not thread.is_alive() and time.perf_counter() - t0 < 5
    assert len(errors) == 1 and "the service is stopping" in str(errors[0])
    with pytest.raises(RuntimeError, match="the service is stopping"):
        decoders.load(io.BytesIO(b""), "later.dcm", InputSpec(64, "letterbox"), _CPU)
