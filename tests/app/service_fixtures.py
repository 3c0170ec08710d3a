"""Builders for service tests: SR and DICOMDIR datasets, a generated PACS export tree with
its expected outcome per file, poisoned exports, a reports CSV, a job poller, a live server.

Imported by the tests as `service_fixtures` (pytest puts tests/app on sys.path). The DICOM
builder itself is `tests/dicom_factory.py`; the names the service tests use from it are
re-exported here (`__all__`), so each test imports its fixtures from one place."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dicom_factory import (
    BASIC_TEXT_SR,
    CT_STORAGE,
    DICOMDIR_CLASS,
    DX_STORAGE,
    GSPS_STORAGE,
    PATIENT_ID,
    PATIENT_NAME,
    build_dataset,
    chest_pixels,
    dx_bytes,
    to_bytes,
)
from fastapi.testclient import TestClient
from pydicom.dataset import Dataset

if TYPE_CHECKING:
    from app.settings import Settings

__all__ = [
    # from dicom_factory
    "BASIC_TEXT_SR",
    "CT_STORAGE",
    "DICOMDIR_CLASS",
    "DX_STORAGE",
    "GSPS_STORAGE",
    "PATIENT_ID",
    "PATIENT_NAME",
    "build_dataset",
    "chest_pixels",
    "dx_bytes",
    "to_bytes",
    # defined here
    "CSV_TEXT",
    "EXPECTED_EXPORT",
    "GOOD_BESIDE_POISON",
    "POISONED",
    "SR_TEXT",
    "STUDY_A",
    "STUDY_B",
    "LiveServer",
    "build_export",
    "build_poisoned_export",
    "corrupt_deflate_bytes",
    "dicomdir_dataset",
    "free_port",
    "sr_dataset",
    "two_rows_bytes",
    "wait_for_job",
    "write_reports_csv",
    "zero_bit_voi_lut_bytes",
]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (for a server a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """uvicorn serving `create_app(settings)` in a thread on a free loopback port, with the
    HTTP protocol `cxr serve` runs (`app.server.guarded_protocol`)."""

    def __init__(self, settings: Settings, predictor: Any = None) -> None:
        import uvicorn

        from app.main import create_app
        from app.server import guarded_protocol

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        protocol = guarded_protocol(
            header_timeout_s=settings.header_timeout_s,
            max_connections=settings.max_connections,
            send_timeout_s=settings.send_timeout_s,
            min_send_rate=settings.send_min_rate,
            response_timeout_s=settings.response_timeout_s,
        )
        self.app = create_app(settings, predictor=predictor)
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            http=protocol,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)

    def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """One request on a connection of its own: status, lower-cased headers, body."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            answer = {name.lower(): value for name, value in response.getheaders()}
            return response.status, answer, response.read()
        finally:
            conn.close()


def sr_dataset(text_value: str, *, study_uid: str, accession: str) -> Dataset:
    """A Basic Text SR holding one 'Finding' TEXT item."""
    ds = build_dataset(
        modality="SR", sop_class=BASIC_TEXT_SR, study_uid=study_uid, accession=accession
    )
    concept = Dataset()
    concept.CodeValue = "121071"
    concept.CodingSchemeDesignator = "DCM"
    concept.CodeMeaning = "Finding"
    item = Dataset()
    item.RelationshipType = "CONTAINS"
    item.ValueType = "TEXT"
    item.ConceptNameCodeSequence = [concept]
    item.TextValue = text_value
    ds.ValueType = "CONTAINER"
    ds.ContentSequence = [item]
    return ds


def dicomdir_dataset() -> Dataset:
    """A (minimal) DICOMDIR: the Media Storage Directory SOP class with an empty record list."""
    ds = build_dataset(sop_class=DICOMDIR_CLASS, modality="")
    ds.DirectoryRecordSequence = []
    return ds


STUDY_A = "1.2.826.0.1.3680043.8.498.101"
STUDY_B = "1.2.826.0.1.3680043.8.498.202"
SR_TEXT = "The heart is enlarged. No pneumothorax."
CSV_TEXT = "Small left pleural effusion. No pneumothorax."

# path -> (kind, final state) for every file of the generated export
EXPECTED_EXPORT = {
    "DICOMDIR": ("dicomdir", "skipped"),
    "PAT1/STUDY1/SER1/IM000001": ("image", "done"),
    "PAT1/STUDY1/SER1/IM000002.dcm": ("image", "done"),
    "PAT1/STUDY1/SR/SR000001": ("sr", "done"),
    "PAT2/STUDY2/image.dcm": ("image", "done"),
    "PAT2/STUDY2/broken.dcm": ("image", "failed"),
    "PAT2/STUDY2/GARBAGE01": ("invalid", "failed"),
    "PAT3/ct_slice.dcm": ("other", "skipped"),
    "PAT3/PS000001": ("other", "skipped"),
    "README.TXT": ("ignored", "skipped"),
}


def build_export(root: Path) -> Path:
    """A PACS-export-like tree: nested folders, names with and without .dcm, a DICOMDIR,
    an SR report (study A), a truncated DICOM, a non-DICOM file without extension, a CT
    slice, a presentation state and a README."""

    def put(rel: str, data: bytes) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    put("DICOMDIR", to_bytes(dicomdir_dataset()))
    put("PAT1/STUDY1/SER1/IM000001", dx_bytes(study_uid=STUDY_A, accession="A1"))
    put(
        "PAT1/STUDY1/SER1/IM000002.dcm",
        dx_bytes(study_uid=STUDY_A, accession="A1", pixels=chest_pixels(seed=1)),
    )
    put("PAT1/STUDY1/SR/SR000001", to_bytes(sr_dataset(SR_TEXT, study_uid=STUDY_A, accession="A1")))
    put("PAT2/STUDY2/image.dcm", dx_bytes(study_uid=STUDY_B, accession="B1"))
    good = dx_bytes(study_uid=STUDY_B, accession="B1")
    put("PAT2/STUDY2/broken.dcm", good[:-1000])  # pixel data cut short: corrupt
    put("PAT2/STUDY2/GARBAGE01", bytes(range(256)) * 8)  # no extension, not DICOM
    put(
        "PAT3/ct_slice.dcm",
        to_bytes(build_dataset(pixels=chest_pixels(), modality="CT", sop_class=CT_STORAGE)),
    )
    put("PAT3/PS000001", to_bytes(build_dataset(modality="PR", sop_class=GSPS_STORAGE)))
    put("README.TXT", b"Exported by a PACS. Not DICOM.\n")
    return root


def write_reports_csv(path: Path) -> Path:
    """Reports CSV keyed by accession number (only study B has one here)."""
    path.write_text(f'AccessionNumber,Report\nB1,"{CSV_TEXT}"\nZ9,"No acute disease."\n')
    return path


def wait_for_job(client: TestClient, job_id: str, timeout: float = 60.0) -> dict[str, Any]:
    """Poll GET /v1/batches/{id} until the job is done or failed."""
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(f"/v1/batches/{job_id}").json()
        if body["state"] in ("done", "failed") or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


# --- poisoned exports (issue 7 item 2) ---------------------------------------------------


def corrupt_deflate_bytes() -> bytes:
    """A DX in Deflated Explicit VR Little Endian whose deflate stream is garbage."""
    from pydicom.uid import DeflatedExplicitVRLittleEndian

    ds = build_dataset(pixels=chest_pixels())
    ds.file_meta.TransferSyntaxUID = DeflatedExplicitVRLittleEndian
    data = to_bytes(ds)
    meta_end = 144 + int.from_bytes(data[140:144], "little")  # after (0002,0000)'s group
    garbled = bytes(b ^ 0x5A for b in data[meta_end : meta_end + 40])
    return data[:meta_end] + garbled + data[meta_end + 40 :]


def zero_bit_voi_lut_bytes() -> bytes:
    """A DX whose VOI LUT Sequence has a LUT Descriptor giving 0 bits per entry."""
    ds = build_dataset(pixels=chest_pixels())
    item = Dataset()
    item.LUTDescriptor = [0, 0, 0]
    item.add_new(0x00283006, "US", [0, 0, 0, 0])  # LUT Data
    ds.VOILUTSequence = [item]
    return to_bytes(ds)


def two_rows_bytes() -> bytes:
    """A DX whose Rows element holds two values."""
    ds = build_dataset(pixels=chest_pixels())
    ds.Rows = [64, 64]
    return to_bytes(ds)


POISONED = {
    "POISON/deflate.dcm": corrupt_deflate_bytes,
    "POISON/voi_lut.dcm": zero_bit_voi_lut_bytes,
    "POISON/two_rows.dcm": two_rows_bytes,
}
GOOD_BESIDE_POISON = ("POISON/good1.dcm", "POISON/good2.dcm")


def build_poisoned_export(root: Path) -> Path:
    """Three malformed DICOMs that once froze a job, between two good images (one chunk)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "POISON").mkdir(exist_ok=True)
    (root / GOOD_BESIDE_POISON[0]).write_bytes(dx_bytes(accession="G1"))
    for rel, build in POISONED.items():
        (root / rel).write_bytes(build())
    (root / GOOD_BESIDE_POISON[1]).write_bytes(dx_bytes(accession="G2"))
    return root
