"""Screenshots of the web page for the README, taken as the browser tests run it; prints
how long the page took to show a prediction with its overlay, a labeled report and a batch.

Serves the app with the `cxr serve --demo` model (built or reused in --storage) on a
free loopback port, drives Debian's chromium through Playwright (nothing downloaded),
and writes app/web/screenshots/{predict,report,batches,worklist,worklist-open,apikey}.png (the
worklist from a job on a server folder, so an opened row re-reads its report), plus model.json: the
demo recipe (version and SHA-256) the pictures were taken with, which a test compares with
the recipe file, so a recipe change without new screenshots fails.

    python benchmarks/web_screenshots.py                # about 1 min once the demo model exists
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import socket
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--no-default-browser-check",
]
REPORT = (
    "INDICATION: Cough, rule out pneumonia.\n"
    "FINDINGS: The heart is enlarged. There is a small left pleural effusion. "
    "No pneumothorax. Possible right basilar atelectasis.\n"
    "IMPRESSION: Cardiomegaly with small left effusion. No focal consolidation to suggest "
    "pneumonia."
)


def _serve(settings: Any) -> tuple[Any, threading.Thread, str]:
    import uvicorn

    from app.main import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return server, thread, f"http://127.0.0.1:{port}"


def _phantom_dicom(seed: int, labels: list[str], accession: str) -> bytes:
    import numpy as np
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, generate_uid

    from models.demo import example_phantom

    image = example_phantom(seed, size=384, labels=labels).image
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.file_meta.MediaStorageSOPClassUID = "1.2.840.10008.5.1.4.1.1.1.1"
    ds.file_meta.MediaStorageSOPInstanceUID = generate_uid()
    ds.SOPClassUID = ds.file_meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID
    ds.StudyInstanceUID, ds.SeriesInstanceUID = generate_uid(), generate_uid()
    ds.AccessionNumber, ds.Modality, ds.PatientID = accession, "DX", f"PHANTOM{seed}"
    ds.Rows, ds.Columns = image.shape
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    ds.PixelData = (image.astype(np.uint16) * 16).tobytes()
    buffer = io.BytesIO()
    ds.save_as(buffer, enforce_file_format=True)
    return buffer.getvalue()


def _export_zip() -> tuple[bytes, str]:
    cases: list[tuple[list[str], str | None]] = [
        (["Cardiomegaly"], "Cardiomegaly. No effusion."),
        (["Effusion"], "Small right pleural effusion."),
        (["Mass", "Effusion"], "Right upper lobe mass. Small effusion."),
        ([], "No acute cardiopulmonary abnormality."),
        (["Pneumothorax"], "Small left apical pneumothorax."),
        (["Nodule"], "Possible nodule in the left mid lung."),
        (["Effusion"], None),  # no report in the CSV: "no report matched"
    ]
    buffer = io.BytesIO()
    rows = ["AccessionNumber,Report"]
    with zipfile.ZipFile(buffer, "w") as z:
        for i, (labels, text) in enumerate(cases):
            z.writestr(f"STUDY{i}/IM0001.dcm", _phantom_dicom(100 + i, labels, f"ACC{i}"))
            if text is not None:
                rows.append(f'ACC{i},"{text}"')
        z.writestr("STUDY9/broken.dcm", _phantom_dicom(99, [], "ACC9")[:-5000])
        z.writestr("README.TXT", "exported by a PACS\n")
    return buffer.getvalue(), "\n".join(rows) + "\n"


def _top_of(page: Any, selector: str, height: int) -> dict[str, float]:
    """The first `height` pixels of an element on screen (a long table's top)."""
    box = page.locator(selector).bounding_box()
    return {"x": box["x"], "y": box["y"], "width": box["width"], "height": height}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--storage", type=Path, default=REPO / "runs" / "web-demo-storage")
    parser.add_argument("--out", type=Path, default=REPO / "app" / "web" / "screenshots")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    from playwright.sync_api import sync_playwright

    from app.settings import Settings
    from models.checkpoint import load_checkpoint
    from models.demo import DEMO_RECIPE, ensure_demo_model, recipe_digest

    model = ensure_demo_model(args.storage)
    card = load_checkpoint(model, map_location="cpu").card
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cxr-shots-"))
    # A database of its own: a job of an earlier run would be "done" before this one starts.
    settings = Settings(
        storage_dir=args.storage,
        database_url=f"sqlite:///{work / 'shots.db'}",
        model=model,
        device="cpu",
        batch_roots=[work / "roots"],
    )
    server, thread, url = _serve(settings)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(60_000)
        page.goto(url + "/")
        t0 = time.perf_counter()
        page.locator("#demo-sample").click()
        page.wait_for_function(
            "() => { const i = document.getElementById('heatmap-image');"
            " return i.complete && i.naturalWidth > 0 && !i.hidden; }"
        )
        timings = {"predict (phantom to overlay shown)": time.perf_counter() - t0}
        time.sleep(0.3)
        page.screenshot(path=str(args.out / "predict.png"))

        page.locator("textarea").fill(REPORT)
        t0 = time.perf_counter()
        page.get_by_role("button", name="Label", exact=True).click()
        page.locator("#report-highlighted mark").first.wait_for()
        timings["report (Label to highlights)"] = time.perf_counter() - t0
        page.locator("#report-highlighted mark.negative").first.hover()
        page.locator("#report").screenshot(path=str(args.out / "report.png"))

        data, csv_text = _export_zip()
        (work / "export.zip").write_bytes(data)
        (work / "reports.csv").write_text(csv_text)
        page.locator("#batch-zip").set_input_files(str(work / "export.zip"))
        page.locator("#batch-reports").set_input_files(str(work / "reports.csv"))
        t0 = time.perf_counter()
        page.locator("#batch-start").click()
        page.locator("#jobs-table tbody tr[data-state=done]").first.wait_for(timeout=120_000)
        timings["batch of 9 files (upload to done)"] = time.perf_counter() - t0
        page.wait_for_function(
            "() => document.querySelectorAll('#result-table tbody tr').length >= 9"
        )
        page.locator("#batches").screenshot(path=str(args.out / "batches.png"))
        # The same export as a server folder: its rows open with their report re-read.
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            z.extractall(work / "roots" / "export")
        (work / "roots" / "reports.csv").write_text(csv_text)
        page.locator("#batch-path").fill("export")
        page.locator("#batch-path-reports").fill("reports.csv")
        page.locator("#batch-path-form button[type=submit]").click()
        page.wait_for_function(
            "() => document.querySelectorAll('#jobs-table tbody tr[data-state=done]').length >= 2",
            timeout=120_000,
        )
        # The worklist reloads by itself when the job ends; a review saved on its first row.
        t0 = time.perf_counter()
        rows = page.locator("#worklist-table tbody tr[data-row]")
        rows.first.wait_for()
        timings["worklist (job done to rows shown)"] = time.perf_counter() - t0
        page.locator("#worklist-table .wl-open img").first.wait_for()
        rows.first.locator("select.wl-verdict").select_option("agree_report")
        rows.first.locator("input.wl-note").fill("checked on the film")
        rows.first.locator("button.wl-save").click()
        page.locator("#worklist-table .wl-who", has_text="anonymous").first.wait_for()
        page.locator("#worklist").evaluate("e => e.scrollIntoView()")
        page.screenshot(path=str(args.out / "worklist.png"), clip=_top_of(page, "#worklist", 640))
        # A row opened: the film at display size, the finding's heatmap, its report beside it.
        t0 = time.perf_counter()
        rows.first.locator(".wl-open").click()
        page.locator("#row-report-text mark").first.wait_for()
        timings["worklist row opened (click to report shown)"] = time.perf_counter() - t0
        time.sleep(0.3)
        page.screenshot(path=str(args.out / "worklist-open.png"))
        browser.close()
    server.should_exit = True
    thread.join(timeout=15)

    keyed = Settings(
        storage_dir=work / "keyed", api_keys=["a-demo-key-of-enough-length"], device="cpu"
    )
    server, thread, url = _serve(keyed)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(url + "/")
        page.locator("#keybar").wait_for()
        page.screenshot(
            path=str(args.out / "apikey.png"), clip={"x": 0, "y": 0, "width": 1440, "height": 260}
        )
        browser.close()
    server.should_exit = True
    thread.join(timeout=15)
    sidecar = {"recipe": DEMO_RECIPE, "recipe_sha256": recipe_digest(), "model": card.name,
               "model_version": card.version, "created": card.created}  # fmt: skip
    (args.out / "model.json").write_text(json.dumps(sidecar, indent=2) + "\n")
    for name in ("predict", "report", "batches", "worklist", "worklist-open", "apikey"):
        sys.stdout.write(f"{args.out / (name + '.png')}\n")
    for what, seconds in timings.items():
        sys.stdout.write(f"{what}: {seconds:.2f} s\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
