"""The web page at `/`, driven in a real browser: Debian's chromium through Playwright.

The service runs with uvicorn on a free loopback port (a thread) with a tiny random-weight
checkpoint; nothing is downloaded (the system chromium, no Playwright browser download).
Every test fails on a console error, an uncaught page error or a failed request.
Skipped when playwright or chromium is absent.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM = os.environ.get("CXR_CHROMIUM", "/usr/bin/chromium")
if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
    pytest.skip(f"no chromium at {CHROMIUM} (set CXR_CHROMIUM)", allow_module_level=True)

from service_fixtures import (  # noqa: E402
    LiveServer,
    build_export,
    chest_pixels,
    dx_bytes,
    write_reports_csv,
)

from app.settings import Settings  # noqa: E402

pytestmark = pytest.mark.issue(11)

KEY = "s3cret-key-for-the-web-test"

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--metrics-recording-only",
]
TIMEOUT_MS = 20_000
REPORT = (
    "FINDINGS: The heart is enlarged. No pneumothorax.\n"
    "IMPRESSION: Possible small left pleural effusion."
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random resnet18 demo checkpoint at 64 px whose thresholds make every label positive,
    so every label has a heatmap and boxes are drawn."""
    from models.checkpoint import build_demo_checkpoint, load_checkpoint, save_checkpoint

    path = build_demo_checkpoint(tmp_path_factory.mktemp("web-ckpt") / "tiny.pt", image_size=64)
    ckpt = load_checkpoint(path)
    ckpt.card.thresholds = dict.fromkeys(ckpt.card.labels, 0.0)
    return save_checkpoint(path, model=ckpt.model, card=ckpt.card)


def _settings(root: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "storage_dir": root / "storage",
        "database_url": f"sqlite:///{root / 'web.db'}",
        "inference_max_wait_ms": 1.0,
        "device": "cpu",
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, checkpoint: Path) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("web")
    with LiveServer(_settings(root, model=checkpoint)) as live:
        yield live


@pytest.fixture(scope="module")
def filtered_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The tiny demo model with its card's thresholds (0.5): some labels positive, some
    not, and side peaks below the threshold, as the default box filter meets them."""
    from models.checkpoint import build_demo_checkpoint

    root = tmp_path_factory.mktemp("web-filtered")
    model = build_demo_checkpoint(root / "tiny.pt", image_size=64)
    with LiveServer(_settings(root, model=model)) as live:
        yield live


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


# ReDoc's sidebar shows Redocly's logo from its CDN (hard-coded, hidden when it fails to
# load): the docs' CSP blocks it, as a network without internet access would (issue 18).
REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


class Problems:
    """Console errors, page errors and failed requests seen by a page."""

    def __init__(self, page: Any) -> None:
        self.items: list[str] = []
        page.on(
            "console",
            lambda m: (
                self.items.append(f"console {m.type}: {m.text}")
                if m.type == "error" and REDOC_LOGO not in m.text
                else None
            ),
        )
        page.on("pageerror", lambda e: self.items.append(f"page error: {e}"))
        page.on(
            "requestfailed",
            lambda r: (
                self.items.append(f"request failed: {r.method} {r.url}")
                if r.url != REDOC_LOGO
                else None
            ),
        )
        page.on(
            "response",
            lambda r: (
                self.items.append(f"HTTP {r.status}: {r.request.method} {r.url}")
                if r.status >= 400
                else None
            ),
        )


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    problems = Problems(pg)
    yield pg
    context.close()
    assert problems.items == [], "\n".join(problems.items)


def test_web_page_is_self_contained(server: LiveServer, page: Any) -> None:
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    response = page.goto(server.url + "/")
    assert response is not None and response.status == 200
    csp = response.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    page.wait_for_load_state("networkidle")
    assert requested and all(u.startswith(server.url) for u in requested), requested
    # The first file input is the image upload of Predict.
    first = page.locator("input[type=file]").first
    assert first.get_attribute("id") == "predict-file"
    assert page.get_by_role("button", name="Label", exact=True).count() == 1
    assert page.locator("textarea").count() == 1
    assert page.locator("#demo-banner").is_visible()  # the test checkpoint is a demo


def test_web_predict_dicom_draws_overlay_boxes_and_table(
    server: LiveServer, page: Any, tmp_path: Path
) -> None:
    rows, columns = 240, 180  # not square: boxes must follow the original geometry
    dicom = tmp_path / "chest.dcm"
    dicom.write_bytes(dx_bytes(pixels=chest_pixels(rows, columns, seed=3)))
    page.goto(server.url + "/")
    with page.expect_response("**/v1/images/predict") as answer:
        page.locator("input[type=file]").first.set_input_files(str(dicom))
    prediction = answer.value.json()
    assert prediction["demo"] is True and prediction["boxes"]

    table = page.locator("#prob-table tbody tr")
    table.first.wait_for()
    assert table.count() == len(prediction["probabilities"]) == 14
    assert page.locator("#prob-table tr.positive").count() == len(prediction["positive"])
    assert page.locator("#prob-table .tick").count() == 14  # thresholds marked
    assert page.locator("#predict-notice").is_visible()
    assert "DEMO" in page.locator("#predict-notice").inner_text()

    heat = page.locator("#heatmap-image")
    heat.wait_for(state="visible")
    page.wait_for_function(
        "() => { const i = document.getElementById('heatmap-image');"
        " return i.complete && i.naturalWidth > 0; }"
    )
    base_box = page.locator("#base-image").bounding_box()
    heat_box = heat.bounding_box()
    assert base_box is not None and heat_box is not None
    assert abs(base_box["width"] - heat_box["width"]) < 1
    assert abs(base_box["height"] - heat_box["height"]) < 1
    # The image is shown large: most of the viewport height.
    assert base_box["height"] > 0.6 * 900

    svg = page.locator("#box-layer")
    assert svg.get_attribute("viewBox") == f"0 0 {columns} {rows}"
    shown = heat.get_attribute("data-label")
    visible = page.locator("#box-layer rect:visible")
    assert visible.count() == sum(b["label"] == shown for b in prediction["boxes"])
    page.locator("#boxes-scope").select_option("all")
    rects = page.locator("#box-layer rect:visible")
    assert rects.count() == len(prediction["boxes"])
    first = prediction["boxes"][0]
    rect = rects.first
    assert float(rect.get_attribute("x")) == pytest.approx(first["x"])
    assert float(rect.get_attribute("width")) == pytest.approx(first["width"])
    assert first["label"] in (page.locator("#box-layer text").first.text_content() or "")
    assert page.locator("#box-table tbody tr").count() == len(prediction["boxes"])
    assert "ms" in (page.locator("#timings").text_content() or "")
    assert prediction["model"]["name"] in (page.locator("#model-card").text_content() or "")

    # Opacity and toggles act on the overlay.
    page.locator("#heatmap-opacity").fill("25")
    assert heat.evaluate("i => i.style.opacity") == "0.25"
    page.locator("#heatmap-toggle").uncheck()
    assert not heat.is_visible()
    page.locator("#heatmap-toggle").check()
    page.locator("#boxes-toggle").uncheck()
    assert not svg.is_visible()
    page.locator("#boxes-toggle").check()
    # Choosing another label loads its overlay at display size.
    other = [label for label in prediction["heatmaps"] if label != heat.get_attribute("data-label")]
    with page.expect_response(lambda r: "/heatmaps/" in r.url and "boxes=false" in r.url):
        page.locator("#heatmap-label").select_option(other[0])
    page.wait_for_function(
        f"() => document.getElementById('heatmap-image').dataset.label === {json.dumps(other[0])}"
    )


def test_web_report_highlights_mentions(server: LiveServer, page: Any) -> None:
    page.goto(server.url + "/")
    page.locator("textarea").fill(REPORT)
    page.get_by_role("button", name="Label", exact=True).click()
    marks = page.locator("#report-highlighted mark.mention")
    marks.first.wait_for()
    by_label = {
        m.get_attribute("data-label"): m.get_attribute("class") for m in marks.element_handles()
    }
    assert "positive" in by_label["Cardiomegaly"]
    assert "negative" in by_label["Pneumothorax"]
    assert "uncertain" in by_label["Effusion"]
    title = page.locator("#report-highlighted mark.negative").first.get_attribute("title")
    assert "rule:" in title and "section:" in title and "NegEx:" in title
    # The highlighted text is the report itself, character for character.
    assert page.locator("#report-highlighted").inner_text() == REPORT
    # Finding attributes (laterality here) beside the label when the labeler gives them.
    effusion = page.locator("#report-labels tbody tr", has_text="Effusion")
    assert "left" in effusion.locator("td.attrs").inner_text()
    labels = page.locator("#report-labels tbody tr")
    assert labels.count() >= 3
    assert page.locator("#report-labels td.positive", has_text="positive").count() >= 1


def test_web_batch_job_followed_to_done(server: LiveServer, page: Any, tmp_path: Path) -> None:
    export = build_export(tmp_path / "export")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for path in sorted(export.rglob("*")):
            if path.is_file():
                z.write(path, path.relative_to(export).as_posix())
    archive = tmp_path / "export.zip"
    archive.write_bytes(buffer.getvalue())
    reports = write_reports_csv(tmp_path / "reports.csv")

    page.goto(server.url + "/")
    page.locator("#batch-zip").set_input_files(str(archive))
    page.locator("#batch-reports").set_input_files(str(reports))
    page.locator("#batch-start").click()
    done = page.locator("#jobs-table tbody tr[data-state=done]")
    done.first.wait_for(timeout=45_000)
    assert done.first.locator("progress").get_attribute("value") == "1"
    results = page.locator("#result-table tbody tr")
    page.wait_for_function("() => document.querySelectorAll('#result-table tbody tr').length >= 10")
    total = results.count()
    page.locator("#filter-errors").check()
    failed = page.locator("#result-table tbody tr").count()
    assert 0 < failed < total
    assert page.locator("#result-table tbody td.err").count() == failed
    page.locator("#filter-errors").uncheck()
    page.locator("#filter-label").select_option("Effusion")  # from the reports CSV
    assert 0 < page.locator("#result-table tbody tr").count() < total
    with page.expect_download() as download:
        done.first.locator("button.dl[data-format=csv]").click()
    path = download.value.path()
    assert Path(path).read_text().startswith("path,state,kind")


def test_web_api_key_asked_once_and_sent(
    tmp_path_factory: pytest.TempPathFactory, browser: Any
) -> None:
    root = tmp_path_factory.mktemp("web-key")
    with LiveServer(_settings(root, api_keys=[KEY])) as live:
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        problems = Problems(page)
        sent: list[str | None] = []
        page.on(
            "request",
            lambda r: sent.append(r.headers.get("x-api-key")) if "/v1/" in r.url else None,
        )
        page.goto(live.url + "/")
        page.wait_for_load_state("networkidle")
        assert page.locator("#keybar").is_visible()
        assert sent == []  # nothing asked of the API before a key is given
        page.locator("#apikey-input").fill(KEY)
        page.locator("#keybar button[type=submit]").click()
        assert not page.locator("#keybar").is_visible()
        assert page.evaluate("sessionStorage.getItem('cxr-api-key')") == KEY
        page.locator("textarea").fill(REPORT)
        page.get_by_role("button", name="Label", exact=True).click()
        page.locator("#report-highlighted mark").first.wait_for()
        # A reload keeps the key for this tab: not asked again.
        page.reload()
        page.wait_for_load_state("networkidle")
        assert not page.locator("#keybar").is_visible()
        assert sent and all(k == KEY for k in sent)
        # No model on this service: the image input is disabled and says why.
        assert page.locator("#predict-file").is_disabled()
        context.close()
        assert problems.items == [], "\n".join(problems.items)


def test_web_dropped_png_is_predicted(server: LiveServer, page: Any) -> None:
    import base64

    import cv2

    png = cv2.imencode(".png", (chest_pixels(96, 128, seed=5) // 16).astype("uint8"))[1]
    page.goto(server.url + "/")
    with page.expect_response("**/v1/images/predict") as answer:
        page.evaluate(
            """data => {
                const bytes = Uint8Array.from(atob(data), c => c.charCodeAt(0));
                const transfer = new DataTransfer();
                transfer.items.add(new File([bytes], "dropped.png", {type: "image/png"}));
                const viewer = document.getElementById("viewer");
                viewer.dispatchEvent(new DragEvent("dragover", {dataTransfer: transfer,
                    bubbles: true, cancelable: true}));
                viewer.dispatchEvent(new DragEvent("drop", {dataTransfer: transfer,
                    bubbles: true, cancelable: true}));
            }""",
            base64.b64encode(png.tobytes()).decode(),
        )
    prediction = answer.value.json()
    assert (prediction["image"]["rows"], prediction["image"]["columns"]) == (96, 128)
    page.locator("#prob-table tbody tr").first.wait_for()
    assert page.locator("#box-layer").get_attribute("viewBox") == "0 0 128 96"
    assert "dropped.png" in page.locator("#predict-status").inner_text()


@pytest.mark.issue(18)
@pytest.mark.parametrize(
    ("path", "rendered"),
    [("/docs", ".swagger-ui .opblock-summary"), ("/redoc", "[data-section-id]")],
)
def test_web_api_docs_render_under_their_csp(
    server: LiveServer, page: Any, path: str, rendered: str
) -> None:
    # A CSP violation is a console error: the page fixture fails on it.
    response = page.goto(server.url + path)
    assert response is not None and response.status == 200
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert response.headers["x-frame-options"] == "DENY"
    page.locator(rendered).first.wait_for()
    page.wait_for_load_state("networkidle")
    assert page.locator(rendered).count() > 3


ATTACK_PAGE = """<!doctype html><title>elsewhere</title><script>
const form = new FormData();
const empty_zip = new Uint8Array(22);
empty_zip.set([0x50, 0x4b, 0x05, 0x06]);
form.append("file", new Blob([empty_zip]), "x.zip");
fetch("%s/v1/batches", {method: "POST", mode: "no-cors", body: form})
  .catch(() => null).finally(() => { document.title = "done"; });
</script>"""


@pytest.mark.issue(18)
def test_web_cross_site_page_cannot_start_a_batch_job(server: LiveServer, browser: Any) -> None:
    # Issue 18 item 9: a page on another origin started a batch job with a no-cors fetch.
    # Here another site on this machine (a local one is what Chromium still lets reach
    # loopback; other browsers let any site): http://localhost:<other port>.
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    page_html = (ATTACK_PAGE % server.url).encode()

    class Attacker(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page_html)

        def log_message(self, *args: Any) -> None:
            pass

    elsewhere = ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=elsewhere.serve_forever, daemon=True).start()
    context = browser.new_context()
    page = context.new_page()
    seen: list[int] = []
    page.on("response", lambda r: seen.append(r.status) if "/v1/" in r.url else None)
    jobs_before = {j["id"] for j in _jobs(server)}
    try:
        page.goto(f"http://localhost:{elsewhere.server_address[1]}/")
        page.wait_for_function("document.title === 'done'")
    finally:
        context.close()
        elsewhere.shutdown()
        elsewhere.server_close()
    assert seen == [403]  # sent by the browser, refused by the service
    assert {j["id"] for j in _jobs(server)} == jobs_before


def _jobs(server: LiveServer) -> list[dict[str, Any]]:
    import urllib.request

    with urllib.request.urlopen(server.url + "/v1/batches", timeout=30) as answer:
        jobs: list[dict[str, Any]] = json.loads(answer.read())
    return jobs


# --- issue 22: true boxes, the default box filter, the layout, the batch report column ---


def _predict_dicom(page: Any, url: str, path: Path) -> dict[str, Any]:
    page.goto(url + "/")
    with page.expect_response("**/v1/images/predict") as answer:
        page.locator("#predict-file").set_input_files(str(path))
    prediction: dict[str, Any] = answer.value.json()
    page.locator("#box-table tbody tr").first.wait_for()
    return prediction


@pytest.mark.issue(22)
def test_web_phantom_shows_its_true_boxes_dashed(server: LiveServer, page: Any) -> None:
    page.goto(server.url + "/")
    with page.expect_response("**/demo/phantom.json*") as answer:
        page.locator("#demo-sample").click()
    truth = answer.value.json()
    assert truth["boxes"] and truth["labels"]
    rects = page.locator("#box-layer rect.truth")
    rects.first.wait_for()
    assert rects.count() == len(truth["boxes"])
    for i, box in enumerate(truth["boxes"]):
        rect = page.locator(f'#box-layer rect.truth[data-truth="{i}"]')
        assert rect.get_attribute("data-truth-label") == box["label"]
        assert float(rect.get_attribute("x")) == pytest.approx(box["x"])
        assert float(rect.get_attribute("height")) == pytest.approx(box["height"])
        assert rect.get_attribute("stroke-dasharray")  # dashed, beside the solid predictions
        assert rect.is_visible()
    # Shown whatever finding's heatmap is selected, and they can be hidden.
    assert page.locator("#truth-control").is_visible()
    page.locator("#truth-toggle").uncheck()
    assert page.locator("#box-layer rect.truth:visible").count() == 0
    # the true boxes come with the sample, the status line once its prediction is back
    page.wait_for_function(
        "() => document.querySelector('#predict-status').innerText.includes('true boxes dashed')"
    )
    # An uploaded image has no truth: none drawn, no control.
    dicom = dx_bytes(pixels=chest_pixels(240, 180, seed=3))
    page.locator("#predict-file").set_input_files(
        {"name": "a.dcm", "mimeType": "application/dicom", "buffer": dicom}
    )
    page.wait_for_function("() => !document.querySelector('#box-layer rect.truth')")
    assert not page.locator("#truth-control").is_visible()


@pytest.mark.issue(22)
def test_web_default_boxes_only_at_threshold_merged_and_captions_apart(
    filtered_server: LiveServer, page: Any, tmp_path: Path
) -> None:
    dicom = tmp_path / "chest.dcm"
    dicom.write_bytes(dx_bytes(pixels=chest_pixels(240, 180, seed=3)))
    p = _predict_dicom(page, filtered_server.url, dicom)
    thresholds = p["model"]["thresholds"]
    labels = set(p["probabilities"])
    assert p["boxes"] and 0 < len(p["positive"]) < len(labels)  # the filter has work to do
    cell = (180 / 64 * 8) * (240 / 64 * 8)  # LayerCAM stride 8 at 64 px, in original px
    for b in p["boxes"]:
        assert b["label"] in p["positive"] and b["score"] >= thresholds[b["label"]]
        assert b["width"] * b["height"] >= cell - 1
        assert b["heatmap_level"] in (60, 180) and "threshold" not in b
    for i, a in enumerate(p["boxes"]):  # no nested or overlapping pair within a label
        for b in p["boxes"][i + 1 :]:
            if a["label"] == b["label"]:
                ix = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
                iy = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
                smaller = min(a["width"] * a["height"], b["width"] * b["height"])
                assert max(ix, 0) * max(iy, 0) < 0.5 * smaller
    # "All positive findings": every box of a positive label, none of another.
    page.locator("#boxes-scope").select_option("all")
    drawn = page.locator("#box-layer rect.box:visible")
    assert drawn.count() == len(p["boxes"])
    assert {r.get_attribute("data-label") for r in drawn.element_handles()} <= set(p["positive"])
    # Captions do not overlap one another on screen (their client rectangles).
    rects = page.evaluate(
        """() => [...document.querySelectorAll('#box-layer text')]
            .filter((t) => getComputedStyle(t).display !== 'none')
            .map((t) => t.getBoundingClientRect().toJSON())"""
    )
    assert len(rects) >= 2
    for i, a in enumerate(rects):
        for b in rects[i + 1 :]:
            apart = (
                a["right"] <= b["left"] + 0.5
                or b["right"] <= a["left"] + 0.5
                or a["bottom"] <= b["top"] + 0.5
                or b["bottom"] <= a["top"] + 0.5
            )
            assert apart, (a, b)


@pytest.mark.issue(22)
def test_web_layout_at_800_by_900(
    filtered_server: LiveServer, browser: Any, tmp_path: Path
) -> None:
    context = browser.new_context(viewport={"width": 800, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    problems = Problems(page)
    page.goto(filtered_server.url + "/")
    toolbar = page.locator("#dropzone")
    before = toolbar.bounding_box()
    long_name = tmp_path / ("a-radiograph-with-a-very-long-file-name-" * 4 + ".dcm")
    long_name.write_bytes(dx_bytes(pixels=chest_pixels(240, 180, seed=3)))
    with page.expect_response("**/v1/images/predict"):
        page.locator("#predict-file").set_input_files(str(long_name))
    page.locator("#box-table tbody tr").first.wait_for()
    page.wait_for_function("() => document.getElementById('predict-status').textContent"
                           ".includes('done')")  # fmt: skip
    after = toolbar.bounding_box()
    status = page.locator("#predict-status").bounding_box()
    assert before and after and status
    # The toolbar keeps its one line: same place and height, the status ellipsised inside.
    assert after == before and after["height"] <= 44
    assert status["width"] > 0 and status["x"] + status["width"] <= after["x"] + after["width"] + 1
    # The image stays large beside the panel.
    image = page.locator("#base-image").bounding_box()
    assert image and image["width"] >= 480
    # The panel fits: the box table's frame is on screen without scrolling the panel (a
    # long list scrolls inside it), and so are the details below it.
    table = page.locator("#box-scroll").bounding_box()
    first_row = page.locator("#box-table tbody tr").first.bounding_box()
    panel = page.locator("#predict-panel").bounding_box()
    assert table and first_row and panel and table["y"] + table["height"] <= 900
    assert first_row["y"] + first_row["height"] <= 900
    assert page.locator("#predict-panel").evaluate("e => e.scrollTop") == 0
    assert panel["x"] >= image["x"] + image["width"]  # beside the image, not below it
    for summary in ("#model-card summary", "#image-info summary"):
        box = page.locator(summary).bounding_box()
        assert box and box["y"] + box["height"] <= 900
    context.close()
    assert problems.items == [], "\n".join(problems.items)


@pytest.mark.issue(22)
def test_web_batch_rows_say_whether_a_report_matched(
    server: LiveServer, page: Any, tmp_path: Path
) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for i, accession in enumerate(("R1", "R2", "R3")):
            z.writestr(f"S{i}/im.dcm", dx_bytes(accession=accession, pixels=chest_pixels(seed=i)))
    (tmp_path / "export.zip").write_bytes(buffer.getvalue())
    (tmp_path / "reports.csv").write_text(
        "AccessionNumber,Report\n"
        'R1,"Small right pleural effusion."\n'
        'R2,"No acute cardiopulmonary abnormality."\n'  # matched, nothing positive
    )  # R3: no report
    page.goto(server.url + "/")
    page.locator("#batch-zip").set_input_files(str(tmp_path / "export.zip"))
    page.locator("#batch-reports").set_input_files(str(tmp_path / "reports.csv"))
    page.locator("#batch-start").click()
    page.wait_for_function(
        "() => document.querySelectorAll('#result-table tbody td[data-report]').length === 3",
        timeout=45_000,
    )
    by_path = {
        row.locator("td").first.inner_text(): row.locator("td[data-report]")
        for row in page.locator("#result-table tbody tr").all()
    }
    kinds = {
        path.split("/")[0]: cell.get_attribute("data-report") for path, cell in by_path.items()
    }
    assert kinds == {"S0": "positive", "S1": "negative", "S2": "none"}
    texts = {path.split("/")[0]: cell.inner_text() for path, cell in by_path.items()}
    assert "Effusion" in texts["S0"]
    assert texts["S1"] != texts["S2"] and "no report matched" in texts["S2"]


# --- issue 44: the worklist, decisions, the 800 px layout, the nav ---------------------


def _zip_of(rows: dict[str, bytes], path: Path) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in rows.items():
            z.writestr(name, data)
    path.write_bytes(buffer.getvalue())
    return path


def _run_batch_in_page(page: Any, tmp_path: Path, accessions: tuple[str, ...]) -> None:
    """Start a batch from the page: one image per accession, each with a report that the
    all-positive test model disagrees with."""
    archive = _zip_of(
        {
            f"S{i}/im.dcm": dx_bytes(accession=a, pixels=chest_pixels(200, 180, seed=i))
            for i, a in enumerate(accessions)
        },
        tmp_path / "worklist.zip",
    )
    reports = tmp_path / "worklist.csv"
    reports.write_text(
        "AccessionNumber,Report\n"
        + "".join(f'{a},"No pleural effusion. No pneumothorax."\n' for a in accessions)
    )
    page.locator("#batch-zip").set_input_files(str(archive))
    page.locator("#batch-reports").set_input_files(str(reports))
    page.locator("#batch-start").click()


@pytest.mark.issue(44)
def test_web_worklist_refreshes_after_a_batch_opens_reviews_and_filters(
    tmp_path_factory: pytest.TempPathFactory, checkpoint: Path, browser: Any, tmp_path: Path
) -> None:
    from app.security import hash_api_key

    key = "a-key-for-the-reading-room"
    root = tmp_path_factory.mktemp("web-worklist")
    settings = _settings(root, model=checkpoint, api_keys=[f"dr-jones={hash_api_key(key)}"])
    with LiveServer(settings) as live:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        problems = Problems(page)
        page.goto(live.url + "/")
        page.locator("#apikey-input").fill(key)
        page.locator("#keybar button[type=submit]").click()
        page.wait_for_function(
            "() => document.getElementById('worklist-status').textContent.includes('row(s)')"
        )
        assert page.locator("#worklist-table tbody tr[data-row]").count() == 0
        _run_batch_in_page(page, tmp_path, ("W1", "W2"))
        # No click on Refresh: the worklist reloads when the job ends.
        rows = page.locator("#worklist-table tbody tr[data-row]")
        rows.first.wait_for(timeout=45_000)
        total = rows.count()
        assert total >= 2
        first = rows.first
        # Accession and study UID apart, the file beside them, a decision with its threshold.
        cells = first.locator("td")
        assert cells.nth(1).inner_text().startswith("Acc. W")
        assert "Study UID" in cells.nth(1).inner_text()
        assert cells.nth(2).inner_text().startswith("S")
        model = first.locator("td[data-decision]")
        assert model.get_attribute("data-decision") == "positive"
        assert "threshold 0.00" in model.inner_text()
        first.locator(".wl-open img").wait_for()
        # Open: the image above with the row's finding's heatmap and its boxes.
        label = first.get_attribute("data-label")
        with page.expect_response("**/prediction"):
            first.locator(".wl-open").click()
        page.wait_for_function(
            f"() => document.getElementById('heatmap-image').dataset.label === {json.dumps(label)}"
        )
        assert page.locator("#base-image").is_visible()
        assert page.locator("#prob-table tbody tr").count() == 14
        # Thresholds at 0 (this test model's) are a calibration artifact, said beside them.
        warnings = page.locator("#model-warnings")
        assert warnings.is_visible()
        assert "at the bottom of the probability range" in warnings.inner_text()
        assert first.get_attribute("class") == "selected"
        # An uploaded zip's reports CSV went with the job: said plainly, no text.
        report = page.locator("#row-report")
        report.wait_for()
        assert "Report not available" in report.inner_text()
        assert "deleted when the job ended" in report.inner_text()
        # ... and so did its files: the image is the model input kept (64 px), said so
        assert "model's input size" in page.locator("#predict-status").inner_text()
        # Review: saved with the key's name, shown after a reload of the list.
        row_id = first.get_attribute("data-row")
        first.locator("select.wl-verdict").select_option("agree_report")
        first.locator("input.wl-note").fill("report is right")
        with page.expect_response(lambda r: "/reviews/" in r.url and r.request.method == "PUT"):
            first.locator("button.wl-save").click()
        page.locator("#worklist-refresh").click()
        reviewed = page.locator(f'#worklist-table tr[data-row="{row_id}"]')
        page.wait_for_function(
            """id => { const r = document.querySelector(`#worklist-table tr[data-row="${id}"]`);
                return r && r.querySelector('.wl-who').textContent.includes('dr-jones'); }""",
            arg=row_id,
        )
        assert reviewed.locator("select.wl-verdict").input_value() == "agree_report"
        # Filters: unreviewed only drops it; a finding keeps only its rows.
        page.locator("#wl-filter-unreviewed").check()
        page.wait_for_function(
            f"() => !document.querySelector('#worklist-table tr[data-row=\"{row_id}\"]')"
        )
        assert rows.count() == total - 1
        page.locator("#wl-filter-unreviewed").uncheck()
        page.locator("#wl-filter-label").select_option(label)
        page.wait_for_function(
            "l => [...document.querySelectorAll('#worklist-table tbody tr[data-row]')]"
            ".every((r) => r.dataset.label === l)",
            arg=label,
        )
        assert 0 < rows.count() < total
        # Sort by finding, then the CSV export with the review in it.
        page.locator("#wl-filter-label").select_option("")
        page.wait_for_function(
            "n => document.querySelectorAll('#worklist-table tbody tr[data-row]').length === n",
            arg=total,
        )
        # The sort runs on the server: the page asks for it and shows the rows as answered.
        with page.expect_response(lambda r: "sort=finding" in r.url):
            page.locator('#worklist-table th[data-sort="finding"]').click()
        page.wait_for_function(
            "() => { const l = [...document.querySelectorAll('#worklist-table tbody "
            "tr[data-row]')].map((r) => r.dataset.label); return l.length && "
            "l.every((x, i) => !i || l[i - 1] <= x); }"
        )
        assert page.locator('th[data-sort="finding"]').get_attribute("aria-sort") == "ascending"
        with page.expect_response(lambda r: "sort=probability" in r.url):
            page.locator("#wl-sort").select_option("probability")
        page.wait_for_function(
            "() => { const p = [...document.querySelectorAll('#worklist-table tbody "
            "tr[data-row]')].map((r) => Number(r.dataset.p)); return p.length && "
            "p.every((x, i) => !i || p[i - 1] >= x); }"
        )
        assert rows.count() == total
        with page.expect_response(lambda r: "order=asc" in r.url):
            page.locator('#worklist-table th[data-sort="probability"]').click()
        page.wait_for_function(
            "() => { const p = [...document.querySelectorAll('#worklist-table tbody "
            "tr[data-row]')].map((r) => Number(r.dataset.p)); return p.length && "
            "p.every((x, i) => !i || p[i - 1] <= x); }"
        )
        with page.expect_download() as download:
            page.locator("#wl-export").click()
        exported = Path(download.value.path()).read_text()
        assert "dr-jones" in exported and "report is right" in exported
        context.close()
        assert problems.items == [], "\n".join(problems.items)


@pytest.mark.issue(44)
def test_web_worklist_row_opens_with_its_report_and_the_findings_evidence_highlighted(
    tmp_path_factory: pytest.TempPathFactory, checkpoint: Path, browser: Any
) -> None:
    root = tmp_path_factory.mktemp("web-row-report")
    roots = root / "roots"
    (roots / "ward").mkdir(parents=True)
    (roots / "ward" / "im.dcm").write_bytes(
        dx_bytes(accession="R1", pixels=chest_pixels(400, 360, seed=4))
    )
    (roots / "ward.csv").write_text(f'AccessionNumber,Report\nR1,"{REPORT}"\n')
    with LiveServer(_settings(root, model=checkpoint, batch_roots=[roots])) as live:
        context = browser.new_context(viewport={"width": 800, "height": 900})
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        problems = Problems(page)
        page.goto(live.url + "/")
        page.locator("#batch-path").fill("ward")
        page.locator("#batch-path-reports").fill("ward.csv")
        page.locator("#batch-path-form button[type=submit]").click()
        # the all-positive test model against "No pneumothorax": a row to open
        row = page.locator('#worklist-table tbody tr[data-label="Pneumothorax"]')
        row.wait_for(timeout=45_000)
        row.locator(".wl-open img").wait_for()
        row.locator(".wl-open").click()
        text = page.locator("#row-report-text")
        text.locator("mark").first.wait_for()
        # the same renderer as the Report view: every mention marked, the row's outlined
        focus = text.locator("mark.focus")
        assert focus.count() == 1 and focus.inner_text().lower() == "pneumothorax"
        assert focus.get_attribute("class") == "mention negative focus"
        assert text.locator("mark.mention.positive").count() >= 1  # the enlarged heart
        assert text.inner_text() == REPORT
        origin = page.locator("#row-report-origin").inner_text()
        assert "reports CSV ward.csv" in origin and "Pneumothorax evidence is outlined" in origin
        # the file is still in the folder: the image is shown beyond the 64 px model input
        natural = page.evaluate("() => document.getElementById('base-image').naturalWidth")
        assert natural == 360
        assert "model's input size" not in page.locator("#predict-status").inner_text()
        widths = page.evaluate(
            "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert widths[0] <= widths[1], widths
        # The CSV moved away: the row says so when opened again, and nothing errs.
        (roots / "ward.csv").unlink()
        page.locator("#worklist-refresh").click()
        row.locator(".wl-open img").wait_for()
        row.locator(".wl-open").click()
        page.wait_for_function(
            "() => document.getElementById('row-report-text').textContent"
            ".includes('Report not available')"
        )
        assert "no longer where the job read it" in text.inner_text()
        context.close()
        assert problems.items == [], "\n".join(problems.items)


@pytest.mark.issue(44)
def test_web_no_horizontal_scroll_at_800_px_and_nav_targets_clear_the_header(
    server: LiveServer, browser: Any, tmp_path: Path
) -> None:
    context = browser.new_context(viewport={"width": 800, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    problems = Problems(page)
    page.goto(server.url + "/")
    # Fill what widened the page: the report's mention table and a worklist row.
    page.locator("textarea").fill(REPORT)
    page.get_by_role("button", name="Label", exact=True).click()
    page.locator("#report-findings tbody tr").first.wait_for()
    _run_batch_in_page(page, tmp_path, ("N1",))
    page.locator("#worklist-table tbody tr[data-row]").first.wait_for(timeout=45_000)
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], widths
    for table in ("#report-findings", "#worklist-table", "#jobs-table"):
        box = page.locator(table).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 800, (table, box)
    header = page.locator("header.top").bounding_box()
    assert header and header["height"] <= 43  # one line at 800 px
    for target in ("predict", "report", "batches", "worklist"):
        page.locator(f'nav a[href="#{target}"]').click()
        page.wait_for_function(
            f"() => Math.abs(document.getElementById('{target}').getBoundingClientRect().top"
            " - 48) < 2 || window.scrollY + window.innerHeight >= document.body.scrollHeight - 1"
        )
        top = page.locator(f"#{target}").bounding_box()
        assert top and top["y"] >= header["height"] - 1, (target, top)
    # After "Predict", the file chooser and the status line are below the header.
    page.locator('nav a[href="#predict"]').click()
    page.wait_for_timeout(300)
    for control in ("#predict-file", "#predict-status"):
        box = page.locator(control).bounding_box()
        assert box and box["y"] >= header["height"], (control, box)
    context.close()
    assert problems.items == [], "\n".join(problems.items)


@pytest.mark.issue(44)
def test_web_probabilities_show_decisions_with_their_thresholds(
    filtered_server: LiveServer, page: Any, tmp_path: Path
) -> None:
    dicom = tmp_path / "chest.dcm"
    dicom.write_bytes(dx_bytes(pixels=chest_pixels(240, 180, seed=3)))
    p = _predict_dicom(page, filtered_server.url, dicom)
    thresholds = p["model"]["thresholds"]
    for label in p["probabilities"]:
        cell = page.locator(f'#prob-table tr[data-label="{label}"] td.decision')
        text = " ".join((cell.text_content() or "").split())
        if label in p["positive"]:
            assert text == f"positive ≥ {thresholds[label]:.2f}"
        else:
            assert text == f"negative < {thresholds[label]:.2f}"
        assert cell.get_attribute("data-decision") in text
    # Printed numbers never contradict the decision: as many digits as that takes.
    cases = page.evaluate(
        """() => [decisionNumbers(0.99996, 1.0, false), decisionNumbers(1.0, 1.0, true),
                  decisionNumbers(0.3015, 0.302003, false), decisionNumbers(0.7, 0.5, true)]"""
    )
    assert [(c["p"], c["sign"], c["thr"]) for c in cases] == [
        ("0.99996", "<", "1.00000"),
        ("1.000", "≥", "1.00"),
        ("0.3015", "<", "0.3020"),
        ("0.700", "≥", "0.50"),
    ]
