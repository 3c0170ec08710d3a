"""dciodvfy errors of the SR and GSPS built from real DICOMs, as read and with hostile values.

Builds a TID 1500 SR and a GSPS (`batch.pacs.documents`) for each real file in
../shared/data/dicom (or --data), first as the file is, then once per hostile value of
issue 18 item 12 written into its header (raw bytes in an Implicit VR copy, read back
with `stop_before_pixels` as the push sink reads headers). Each object is checked with
`dciodvfy`; the table counts objects built, objects refused (with the first reason) and
objects with dciodvfy "Error" lines, and the Error lines. Only the public builders are
used, so the same script measures another checkout:

    nice -n 10 env PYTHONPATH=. python benchmarks/sr_validity.py
    nice -n 10 env PYTHONPATH=/work/main python benchmarks/sr_validity.py   # before

Skips (exit 0) when the data folder or dciodvfy is absent.
"""

from __future__ import annotations

import argparse
import copy
import io
import logging
import shutil
import subprocess
import tempfile
import warnings
from collections import Counter
from pathlib import Path

import pydicom
from bench_kit import say
from pydicom.datadict import dictionary_VR, tag_for_keyword
from pydicom.dataelem import DataElement
from pydicom.dataset import Dataset
from pydicom.uid import ImplicitVRLittleEndian

from batch.pacs.documents import build_gsps, build_sr
from models.boxes import Box
from models.predict import Prediction

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "dicom"
CARD = {"name": "cxr-chestnet", "version": "bench", "demo": False}

# (name, attribute, raw bytes): the odd values the issue lists, one at a time.
HOSTILE: tuple[tuple[str, str, bytes], ...] = (
    ("age 62 (no unit)", "PatientAge", b"62"),
    ("accession 17 chars", "AccessionNumber", b"A" * 17),
    ("study ID 17 chars", "StudyID", b"S" * 17),
    ("name group 65 chars", "PatientName", b"N" * 65),
    ("non-ASCII name, no charset", "PatientName", "Müller^Jörg".encode("latin-1")),
    ("study date 2024-13-45", "StudyDate", b"2024-13-45"),
    ("study date 2024-03-01", "StudyDate", b"2024-03-01"),
    ("birth date 19450230", "PatientBirthDate", b"19450230"),
    ("study time 10:11:12", "StudyTime", b"10:11:12"),
    ("patient sex X", "PatientSex", b"X"),
    ("imager spacing 1 value", "ImagerPixelSpacing", b"0.139"),
    ("pixel spacing 1 value", "PixelSpacing", b"0.139"),
    ("weight DS 20 chars", "PatientWeight", b"70.12345678901234567"),
    ("weight DS 'seventy'", "PatientWeight", b"seventy"),
    ("control char in description", "StudyDescription", b"Chest\x07PA"),
    ("backslash in patient ID", "PatientID", b"MRN1\\MRN2"),
    ("frame of reference 1.2.03.4", "FrameOfReferenceUID", b"1.2.03.4"),
    ("laterality X", "Laterality", b"X"),
    ("window width 0", "WindowWidth", b"0"),
    ("identity removed, no method", "PatientIdentityRemoved", b"YES"),
)


def _with_raw(header: Dataset, keyword: str, value: bytes) -> Dataset:
    ds = copy.deepcopy(header)  # Dataset(header) would share (and change) its elements
    tag = tag_for_keyword(keyword)
    if tag is None:
        raise KeyError(keyword)
    pad = b"\x00" if dictionary_VR(tag) == "UI" else b" "
    ds[tag] = DataElement(tag, "OB", value + pad * (len(value) % 2))
    if keyword == "WindowWidth":
        ds.WindowCenter = "128"
    ds.file_meta.TransferSyntaxUID = ImplicitVRLittleEndian
    buffer = io.BytesIO()
    ds.save_as(buffer, enforce_file_format=True, implicit_vr=True, little_endian=True)
    return pydicom.dcmread(io.BytesIO(buffer.getvalue()), stop_before_pixels=True)


def _errors(ds: Dataset, folder: Path) -> list[str]:
    path = folder / "object.dcm"
    ds.save_as(path, enforce_file_format=True)
    run = subprocess.run(["dciodvfy", str(path)], capture_output=True, timeout=60)
    output = (run.stdout + run.stderr).decode("utf-8", "replace")
    return [line for line in output.splitlines() if line.startswith("Error")]


def _measure(sources: dict[str, Dataset], folder: Path) -> dict[str, int | str]:
    prediction = Prediction(
        probabilities={"Effusion": 0.81, "Mass": 0.2},
        positive=["Effusion"],
        boxes=[Box("Effusion", 100.0, 120.0, 300.0, 200.0, 0.5)],
    )
    tally: Counter[str] = Counter()
    refusals: Counter[str] = Counter()
    for source in sources.values():
        for build in (build_sr, build_gsps):
            try:
                document = build(source, prediction, CARD)
            except Exception as exc:  # what main raises on odd values: counted, not fatal
                tally["refused"] += 1
                refusals[f"{type(exc).__name__}: {str(exc)[:70]}"] += 1
                continue
            tally["built"] += 1
            errors = _errors(document, folder)
            tally["with errors"] += bool(errors)
            tally["error lines"] += len(errors)
    first = refusals.most_common(1)[0][0] if refusals else ""
    return {**tally, "reason": first}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    files = sorted(args.data.glob("*.dcm")) if args.data.is_dir() else []
    if not files:
        say(f"no DICOM files in {args.data}: nothing to measure (skipped)")
        return 0
    if shutil.which("dciodvfy") is None:
        say("dciodvfy (Debian dicom3tools) not installed: nothing to measure (skipped)")
        return 0
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")  # pydicom's warnings quote the hostile values
    headers: dict[str, Dataset] = {
        p.name: pydicom.dcmread(p, stop_before_pixels=True) for p in files
    }
    say(f"{len(files)} files x (SR + GSPS) per row; dciodvfy 'Error' lines")
    say(f"{'source':30} {'built':>5} {'refused':>7} {'w/errors':>8} {'errors':>6}  first refusal")
    totals: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="cxr-sr-") as tmp:
        rows: list[tuple[str, dict[str, Dataset]]] = [("as read", headers)]
        rows += [
            (name, {k: _with_raw(h, keyword, value) for k, h in headers.items()})
            for name, keyword, value in HOSTILE
        ]
        for name, sources in rows:
            result = _measure(sources, Path(tmp))
            for key in ("built", "refused", "with errors", "error lines"):
                totals[key] += int(result.get(key, 0))
            say(
                f"{name:30} {result.get('built', 0):>5} {result.get('refused', 0):>7} "
                f"{result.get('with errors', 0):>8} {result.get('error lines', 0):>6}  "
                f"{result['reason']}"
            )
    say(
        f"{'total':30} {totals['built']:>5} {totals['refused']:>7} "
        f"{totals['with errors']:>8} {totals['error lines']:>6}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
