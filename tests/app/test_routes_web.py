"""The page at `/` and its assets over HTTP (no browser; see test_web.py for one)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from service_fixtures import dx_bytes

pytestmark = pytest.mark.issue(11)


def test_page_served_without_key_and_assets_local(make_client: Callable[..., TestClient]) -> None:
    client = make_client(api_keys=["k" * 20])
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assets = re.findall(r'(?:src|href)="([^"#]+)"', page.text)
    assert assets and all(a.startswith("/static/") for a in assets), assets
    for asset in assets:
        assert client.get(asset).status_code == 200
    assert '"apiKeyRequired": true' in page.text.replace("&quot;", '"')
    assert "DEMO MODEL" in page.text  # the test predictor is a demo checkpoint
    assert client.get("/v1/batches").status_code == 401  # the data still needs the key


@pytest.mark.parametrize("name", ["../main.py", "app.py", "%2e%2e%2fmain.py", "templates"])
def test_static_serves_only_shipped_assets(client: TestClient, name: str) -> None:
    assert client.get(f"/static/{name}").status_code == 404


def test_page_without_model_disables_image_upload(make_client: Callable[..., TestClient]) -> None:
    page = make_client(model=False).get("/").text
    assert re.search(r'id="predict-file"[^>]*disabled', page)
    assert "No image model loaded" in page
    assert 'id="demo-banner" role="alert" hidden' in page


def test_prediction_image_is_the_stored_preview(client: TestClient) -> None:
    body = client.post("/v1/images/predict", files={"file": ("a.dcm", dx_bytes())}).json()
    image = client.get(f"/v1/predictions/{body['id']}/image.png")
    assert image.status_code == 200 and image.content.startswith(b"\x89PNG")
    assert client.get("/v1/predictions/nope/image.png").status_code == 404


def test_demo_phantom_offered_only_with_a_demo_model(
    client: TestClient, make_client: Callable[..., TestClient]
) -> None:
    sample = client.get("/demo/phantom.png", params={"seed": 3})
    assert sample.status_code == 200 and sample.content.startswith(b"\x89PNG")
    assert sample.headers["x-cxr-phantom-labels"]
    assert client.get("/demo/phantom.png", params={"seed": 3}).content == sample.content
    assert make_client(model=False).get("/demo/phantom.png").status_code == 404


@pytest.mark.issue(22)
def test_demo_phantom_truth_is_the_generators(
    client: TestClient, make_client: Callable[..., TestClient]
) -> None:
    from models.demo import example_phantom

    truth = client.get("/demo/phantom.json", params={"seed": 3}).json()
    phantom = example_phantom(3)
    assert truth["labels"] == phantom.labels and len(truth["labels"]) in (2, 3)
    assert (truth["rows"], truth["columns"]) == phantom.image.shape
    assert [(b["label"], b["x"], b["y"], b["width"], b["height"]) for b in truth["boxes"]] == [
        tuple(b) for b in phantom.boxes
    ]
    png = client.get("/demo/phantom.png", params={"seed": 3})
    assert png.headers["x-cxr-phantom-labels"] == ",".join(truth["labels"])
    assert make_client(model=False).get("/demo/phantom.json").status_code == 404


def test_heatmap_without_boxes_for_the_page(client: TestClient) -> None:
    body = client.post("/v1/images/predict", files={"file": ("a.dcm", dx_bytes())}).json()
    label = next(b["label"] for b in body["boxes"])
    url = body["heatmaps"][label]
    with_boxes = client.get(url, params={"max_size": 64})
    without = client.get(url, params={"max_size": 64, "boxes": "false"})
    assert with_boxes.status_code == without.status_code == 200
    assert without.content.startswith(b"\x89PNG") and without.content != with_boxes.content
