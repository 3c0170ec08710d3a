"""Datasets (NIH layout, labels CSV, patient-wise splits) and the phantom generator."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from models.data import (
    ChestXrayDataset,
    canonical_label,
    is_synthetic,
    label_coverage,
    load_records,
    resolve_labels,
    split_records,
)
from models.errors import DatasetError
from models.evaluate import load_bbox_csv
from models.phantoms import PHANTOM_LABELS, make_phantom
from models.transforms import EvalTransform, TrainTransform


def test_make_phantom_boxes_lie_inside_image() -> None:
    rng = np.random.default_rng(0)
    ph = make_phantom(rng, size=128, labels=list(PHANTOM_LABELS))
    assert ph.image.shape == (128, 128) and ph.image.dtype == np.uint8
    assert sorted(b[0] for b in ph.boxes) == sorted(PHANTOM_LABELS)
    for _, x, y, w, h in ph.boxes:
        assert x >= 0 and y >= 0 and x + w <= 128 and y + h <= 128 and w > 0 and h > 0
    normal = make_phantom(np.random.default_rng(0), size=128)
    assert normal.labels == [] and normal.boxes == []
    with pytest.raises(ValueError, match="unknown phantom labels"):
        make_phantom(rng, labels=["Hernia"])


def test_phantom_dataset_is_nih_layout(phantom_dir: Path) -> None:
    with (phantom_dir / "Data_Entry.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 40 and (phantom_dir / "images" / rows[0]["Image Index"]).is_file()
    assert {"Image Index", "Finding Labels", "Patient ID", "Follow-up #"} <= set(rows[0])
    boxed = {b.image_index for b in load_bbox_csv(phantom_dir / "BBox_List.csv")}
    with_findings = {r["Image Index"] for r in rows if r["Finding Labels"] != "No Finding"}
    assert boxed == with_findings


@pytest.mark.issue(7)
def test_phantom_folder_carries_the_synthetic_marker(phantom_dir: Path, tmp_path: Path) -> None:
    # A model trained on it must say demo (models.train reads this marker).
    assert is_synthetic(phantom_dir) and is_synthetic(phantom_dir / "Data_Entry.csv")
    (tmp_path / "labels.csv").write_text("path,Mass\n")
    assert not is_synthetic(tmp_path) and not is_synthetic(tmp_path / "labels.csv")


def test_one_alias_table_for_labels_and_boxes(tmp_path: Path) -> None:
    assert canonical_label("Infiltrate") == "Infiltration"
    assert canonical_label("Pleural Thickening") == "Pleural_Thickening"
    csv_path = tmp_path / "boxes.csv"
    csv_path.write_text("Image Index,Finding Label,x,y,w,h\na.png,Infiltrate,1,2,3,4\n")
    assert load_bbox_csv(csv_path)[0].label == "Infiltration"


def test_load_records_and_patient_wise_split(phantom_dir: Path) -> None:
    records = load_records(phantom_dir)
    assert len(records) == 40
    parts = {s: split_records(records, s, seed=3) for s in ("train", "val", "test")}  # type: ignore[misc]
    assert sum(len(p) for p in parts.values()) == 40
    patients = [{r.patient_id for r in p} for p in parts.values()]
    assert not (patients[0] & patients[1] or patients[0] & patients[2] or patients[1] & patients[2])
    assert split_records(records, "train", seed=3) == parts["train"]  # seeded


def test_official_split_lists_are_used(phantom_dir: Path, tmp_path: Path) -> None:
    records = load_records(phantom_dir)
    (tmp_path / "test_list.txt").write_text("\n".join(r.image_index for r in records[:10]))
    test = split_records(records, "test", root=tmp_path)
    assert [r.image_index for r in test] == [r.image_index for r in records[:10]]
    train = split_records(records, "train", root=tmp_path)
    assert not {r.image_index for r in train} & {r.image_index for r in test}


def test_labels_csv_with_path_columns(tmp_path: Path) -> None:
    from PIL import Image

    (tmp_path / "img").mkdir()
    for i in range(3):
        Image.fromarray(np.full((40, 50), 40 * i, np.uint8)).save(tmp_path / "img" / f"{i}.png")
    (tmp_path / "labels.csv").write_text(
        "path,Effusion,Mass\nimg/0.png,1,0\nimg/1.png,0,1\nimg/2.png,0,0\nimg/missing.png,1,1\n"
    )
    records = load_records(tmp_path / "labels.csv")
    assert [sorted(r.findings) for r in records] == [["Effusion"], ["Mass"], []]
    assert resolve_labels("auto", records) == ["Effusion", "Mass"]
    assert len(resolve_labels("chestxray14", records)) == 14
    ds = ChestXrayDataset(records, ["Mass", "Effusion"], EvalTransform(32), cache_size=32)
    x, y, i = ds[0]
    assert x.shape == (1, 32, 32) and y.tolist() == [0.0, 1.0] and i == 0
    assert ds.pixels(0)[1] == (40, 50)  # original size survives the cache


def test_labels_csv_cells_are_read_strictly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # "True" and "-1.0" (CheXpert's uncertain) were read as negative without a word, and so
    # was anything else that is not "1".
    from PIL import Image

    (tmp_path / "img").mkdir()
    for i in range(4):
        Image.fromarray(np.full((40, 50), 40 * i, np.uint8)).save(tmp_path / "img" / f"{i}.png")
    labels = tmp_path / "labels.csv"
    labels.write_text(
        "path,Effusion,Mass\nimg/0.png,1.0,0.0\nimg/1.png,True,\nimg/2.png,-1.0,no\n"
        "img/3.png,yes,-1\n"
    )
    records = load_records(labels)
    assert [sorted(r.findings) for r in records] == [["Effusion"], ["Effusion"], [], ["Effusion"]]
    assert "2 uncertain (-1) label cells read as negative" in caplog.text
    labels.write_text("path,Effusion,Mass\nimg/0.png,1,0\nimg/1.png,0,present\n")
    with pytest.raises(DatasetError, match=r"line 3, column 'Mass': 'present' is not a label"):
        load_records(labels)


def test_an_unreadable_metadata_csv_is_named(tmp_path: Path) -> None:
    (tmp_path / "Data_Entry_2017.csv").write_bytes(
        b"Image Index,Finding Labels,Patient ID\nr\xe9sum\xe9.png,Mass,1\n"
    )
    with pytest.raises(
        DatasetError, match=r"Data_Entry_2017.csv: not UTF-8 text \(line 2, byte 39\)"
    ):
        load_records(tmp_path)
    (tmp_path / "Data_Entry_2017.csv").unlink()
    (tmp_path / "Data_Entry_2017.csv.gz").write_bytes(b"\x1f\x8b\x08\x00broken")
    with pytest.raises(DatasetError, match=r"Data_Entry_2017.csv.gz: cannot read the CSV"):
        load_records(tmp_path)


def test_labels_the_data_never_shows_are_refused_or_warned(tmp_path: Path) -> None:
    # A misspelt label trained on negatives only, and a misspelt finding was dropped: both
    # silently, until now.
    from models.data import Record

    def rec(i: int, *found: str) -> Record:
        return Record(f"{i}.png", tmp_path / f"{i}.png", frozenset(found), str(i))

    records = [rec(0, "Effusion"), rec(1, "Efusion"), rec(2, "Mass", "Effusion")]
    with pytest.raises(DatasetError, match=r"'Nodule'.*findings: Effusion, Efusion, Mass"):
        label_coverage("Effusion,Nodule", ["Effusion", "Nodule"], records)
    with pytest.raises(DatasetError, match=r"'Mas' \(did you mean 'Mass'\?\)"):
        label_coverage(["Mas"], ["Mas"], records)
    warnings = label_coverage("Effusion,Mass", ["Effusion", "Mass"], records)
    assert warnings == [
        "findings in the data that no label trains (images): Efusion (1); check their "
        "spelling, or name the labels to train with --labels"
    ]
    named = label_coverage("chestxray8", resolve_labels("chestxray8", records), records)
    assert "positive for Atelectasis, Cardiomegaly, Infiltration, Nodule, Pneumonia, " in named[0]
    assert "Efusion (1)" in named[1]
    auto = label_coverage("auto", resolve_labels("auto", records), records)
    assert auto == []


def test_nih_style_csv_from_service(tmp_path: Path, phantom_dir: Path) -> None:
    name = sorted((phantom_dir / "images").iterdir())[0]
    csv_path = tmp_path / "dataset.csv"
    csv_path.write_text(f"Image Index,Finding Labels,Patient ID\n{name},Effusion|Nodule,p1\n")
    [record] = load_records(csv_path)
    assert record.findings == {"Effusion", "Nodule"} and record.patient_id == "p1"


def test_nih_folder_with_a_subset_of_its_images(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Most of ChestX-ray14's rows name files a partial download does not have: they are
    # skipped with one warning; files in images_*/images and paths under the folder are found.
    (tmp_path / "images_002" / "images").mkdir(parents=True)
    (tmp_path / "extra").mkdir()
    (tmp_path / "images_002" / "images" / "b.png").write_bytes(b"")
    (tmp_path / "extra" / "c.png").write_bytes(b"")
    rows = ["Image Index,Finding Labels,Patient ID", "a.png,Mass,1", "b.png,No Finding,2"]
    rows += ["extra/c.png,Nodule,3", "gone/d.png,Nodule,4"]
    (tmp_path / "Data_Entry_2017.csv").write_text("\n".join(rows) + "\n")
    with caplog.at_level("WARNING"):
        records = load_records(tmp_path)
    assert [(r.image_index, r.path) for r in records] == [
        ("b.png", tmp_path / "images_002" / "images" / "b.png"),
        ("extra/c.png", tmp_path / "extra" / "c.png"),
    ]
    assert "2 of 4 listed images not found" in caplog.text


def test_load_records_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="Data_Entry"):
        load_records(tmp_path)
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DatasetError, match="neither NIH-style"):
        load_records(tmp_path / "bad.csv")


def test_train_transform_keeps_shape_and_range() -> None:
    px = np.random.default_rng(0).random((70, 50), dtype=np.float32)
    out = TrainTransform(32)(px, np.random.default_rng(1))
    assert out.shape == (1, 32, 32) and float(out.min()) >= 0.0 and float(out.max()) <= 1.0


def test_train_transform_flips_as_often_as_asked_and_nothing_else_changes() -> None:
    px = np.random.default_rng(0).random((70, 50), dtype=np.float32)
    never, always = TrainTransform(32, hflip=0.0), TrainTransform(32, hflip=1.0)
    for seed in range(4):
        # Same draws either way: the flipped image is the mirror of the unflipped one.
        a, b = never(px, np.random.default_rng(seed)), always(px, np.random.default_rng(seed))
        np.testing.assert_array_equal(b.numpy(), a.numpy()[..., ::-1])
    half = TrainTransform(32, rotate_deg=0, scale=(1, 1), shift=0, contrast=0, gamma=0)
    ramp = np.tile(np.linspace(0, 1, 64, dtype=np.float32), (64, 1))  # bright on the right
    rng = np.random.default_rng(0)
    flipped = [float(half(ramp, rng)[0, :, 0].mean()) > 0.5 for _ in range(400)]
    assert 150 < sum(flipped) < 250
    assert TrainTransform(32).hflip == 0.5  # CheXNet's default
