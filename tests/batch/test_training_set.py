"""`batch.training_set.DatasetWriter`: a chunk's PNGs written by threads at once give the
same files and rows as one at a time; a PNG that cannot be written stops at that image."""

from __future__ import annotations

import csv
import threading
from pathlib import Path

import numpy as np
import pytest

from batch.training_set import DatasetImage, DatasetWriter

pytestmark = pytest.mark.issue(19)

KEY = b"k" * 32


def _images(n: int) -> list[DatasetImage]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        pixels = rng.integers(0, 256, (40 + i, 30), dtype=np.uint8)
        labels = {"Effusion": "positive" if i % 2 else "negative", "Mass": "uncertain"}
        out.append(DatasetImage(pixels, labels, f"patient-{i % 3}", "PA" if i % 2 else None))
    return out


def _rows(folder: Path) -> list[dict[str, str]]:
    with (folder / "Data_Entry.csv").open(encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_add_many_writes_what_add_writes_one_at_a_time(tmp_path: Path) -> None:
    # threads of writers other tests left to the garbage collector are not this test's
    before = set(threading.enumerate())
    images = _images(9)
    one = DatasetWriter(tmp_path / "one", size=32, key=KEY)
    names_one = [
        one.add(i.pixels, labels=i.labels, patient_key=i.patient_key, view_position=i.view_position)
        for i in images
    ]
    many = DatasetWriter(tmp_path / "many", size=32, key=KEY)
    names_many = many.add_many(images[:4]) + many.add_many(images[4:])
    assert names_one == names_many and len(set(names_many)) == 9
    assert _rows(tmp_path / "one") == _rows(tmp_path / "many")  # in order, before close
    for name in names_many:
        assert (tmp_path / "one" / "images" / name).read_bytes() == (
            tmp_path / "many" / "images" / name
        ).read_bytes()
    one.close(), many.close()
    assert _rows(tmp_path / "one") == _rows(tmp_path / "many")
    by_patient: dict[str, list[str]] = {}
    for name in names_many:  # the images' order: patients 0, 1, 2, 0, 1, 2, ...
        patient, follow_up = name.removesuffix(".png").split("_")
        by_patient.setdefault(patient, []).append(follow_up)
    assert sorted(by_patient.values()) == [["000", "001", "002"]] * 3
    # close joins the writers' own PNG threads
    left = [t.name for t in threading.enumerate() if t not in before]
    assert not any(name.startswith("cxr-dataset-png") for name in left)


def test_add_many_stops_at_a_png_it_cannot_write(tmp_path: Path) -> None:
    images = _images(5)
    writer = DatasetWriter(tmp_path / "set", size=32, key=KEY)
    blocked = f"{writer.pseudonym(images[2].patient_key)}_000.png"
    (tmp_path / "set" / "images" / blocked).mkdir()  # a folder where the PNG should go
    with pytest.raises(OSError, match="could not write"):
        writer.add_many(images)
    assert len(writer) == 2  # the rows of the images before it, not after
    assert [r["Image Index"] for r in _rows(tmp_path / "set")] == [
        f"{writer.pseudonym(i.patient_key)}_000.png" for i in images[:2]
    ]
    writer.close()


@pytest.mark.issue(45)
def test_add_many_writes_pngs_encoded_elsewhere_as_it_encodes_them(tmp_path: Path) -> None:
    # A Ray worker encodes the PNG (encode_png); the driver's writer only names and writes
    # it: the same files and rows as when the writer encodes.
    from dataclasses import replace

    from batch.training_set import encode_png

    images = _images(5)
    here = DatasetWriter(tmp_path / "here", size=32, key=KEY)
    names = here.add_many(images)
    there = DatasetWriter(tmp_path / "there", size=32, key=KEY)
    encoded = [replace(i, pixels=encode_png(i.pixels, 32)) for i in images]
    assert there.add_many(encoded) == names
    here.close(), there.close()
    assert _rows(tmp_path / "here") == _rows(tmp_path / "there")
    assert {r["OriginalImage[Width"] for r in _rows(tmp_path / "there")} == {"30"}
    for name in names:
        png = (tmp_path / "there" / "images" / name).read_bytes()
        assert png == (tmp_path / "here" / "images" / name).read_bytes()
        assert png.startswith(b"\x89PNG")


@pytest.mark.issue(45)
def test_add_many_refuses_a_png_encoded_at_another_size(tmp_path: Path) -> None:
    from dataclasses import replace

    from batch.training_set import encode_png

    image = _images(1)[0]
    writer = DatasetWriter(tmp_path / "set", size=32, key=KEY)
    with pytest.raises(ValueError, match="encoded at 64 px for a training set of 32 px"):
        writer.add_many([replace(image, pixels=encode_png(image.pixels, 64))])
    writer.close()
    assert _rows(tmp_path / "set") == []
