"""Decode memory is bounded (issue 18 item 13).

A 16-bit image with a Rescale Slope and a window went through pydicom's float64 modality
and VOI LUTs on the whole image, about 28 bytes a pixel at its peak (+1.57 GB for a
7070 x 7070 upload). The LUTs now run in bands of rows into one float32 output, and a
path or stream is read by the decoder without a whole copy of the file in memory.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import models.dicom
from models.dicom import read_dicom
from models.images import load_image

pytestmark = pytest.mark.issue(18)

MakeDicom = Callable[..., Path]


def _smooth16(rows: int, columns: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    small = rng.integers(0, 4096, (rows // 50 + 1, columns // 50 + 1)).astype(np.uint16)
    return np.repeat(np.repeat(small, 50, axis=0), 50, axis=1)[:rows, :columns].copy()


@pytest.mark.parametrize(
    "elements",
    [
        {
            "RescaleSlope": "1.5",
            "RescaleIntercept": "-1024",
            "WindowCenter": 2000,
            "WindowWidth": 3000,
        },
        {"RescaleSlope": "0.37", "RescaleIntercept": "7"},
        {"WindowCenter": 1500, "WindowWidth": 1000, "VOILUTFunction": "SIGMOID"},
        {"RescaleSlope": "1e35", "RescaleIntercept": "0"},  # beyond float32: scaled in float64
        {},
    ],
)
@pytest.mark.parametrize("photometric", ["MONOCHROME2", "MONOCHROME1"])
def test_read_dicom_bands_give_the_whole_image_result(
    make_dicom: MakeDicom,
    monkeypatch: pytest.MonkeyPatch,
    elements: dict[str, Any],
    photometric: str,
) -> None:
    path = make_dicom(_smooth16(301, 257), photometric=photometric, **elements)
    whole = read_dicom(path).pixels  # 77k pixels: one band
    monkeypatch.setattr(models.dicom, "_BAND_PIXELS", 257 * 7)  # bands of 7 rows, one of 0
    banded = read_dicom(path).pixels
    assert banded.dtype == np.float32 and banded.flags.c_contiguous
    assert np.array_equal(whole, banded)  # bit for bit: predictions do not move
    assert float(banded.min()) >= 0.0 and float(banded.max()) <= 1.0


def test_load_image_reads_paths_and_streams_like_bytes(make_dicom: MakeDicom) -> None:
    path = make_dicom(_smooth16(64, 80), RescaleSlope="2", RescaleIntercept="1")
    from_bytes = load_image(path.read_bytes()).pixels
    with path.open("rb") as stream:
        from_stream = load_image(stream, filename="upload").pixels
    assert np.array_equal(load_image(path).pixels, from_bytes)
    assert np.array_equal(from_stream, from_bytes)


_PEAK = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import numpy as np, pydicom.pixels.processing  # imported before the baseline
    from models.images import load_image

    def rss(key):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    load_image(sys.argv[2])  # a small one first: the decoders' lazy imports
    base = rss("VmRSS")
    image = load_image(sys.argv[1])
    print(json.dumps({"peak": rss("VmHWM") - base, "pixels": image.pixels.size}))
    """
)


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="needs Linux /proc")
def test_load_image_peak_memory_of_a_16_bit_rescaled_image(make_dicom: MakeDicom) -> None:
    # 2500 x 2500 at 16 bits with a Rescale Slope and a window (12.5 MB on disk). Before:
    # about 28 bytes a pixel (float64 LUT temporaries and a copy of the file); now the
    # decoded uint16 array and the float32 output, about 6.
    elements = {
        "RescaleSlope": "1.5",
        "RescaleIntercept": "-1024",
        "WindowCenter": 2000,
        "WindowWidth": 3000,
    }
    path = make_dicom(_smooth16(2500, 2500), **elements)
    small = make_dicom(_smooth16(64, 64), name="small.dcm", **elements)
    run = subprocess.run(
        [sys.executable, "-c", _PEAK, str(path), str(small)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    per_pixel = result["peak"] / result["pixels"]
    assert per_pixel < 9.0, f"peak {result['peak'] / 2**20:.0f} MiB, {per_pixel:.1f} B/pixel"
