"""POST /v1/reports/label with sloppy text: control characters never hide a finding (issue 7.8)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.mark.issue(7)
@pytest.mark.parametrize(
    "text", ["Small left effusion.\x00", "Small\x00left effusion.", "Small left effusion.\x1b\x7f"]
)
def test_label_control_characters_keep_the_finding(client: TestClient, text: str) -> None:
    response = client.post("/v1/reports/label", json={"text": text})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["labels"]["Effusion"] == "positive"
    (mention,) = [m for m in body["mentions"] if m["label"] == "Effusion"]
    assert text[mention["start"] : mention["end"]] == mention["text"]


@pytest.mark.issue(8)
def test_label_numbered_items_without_a_space(client: TestClient) -> None:
    text = "IMPRESSION:\r\n1.No pneumothorax.2.Small left effusion.\r\n3.no edema"
    response = client.post("/v1/reports/label", json={"text": text})
    assert response.status_code == 200, response.text
    labels = response.json()["labels"]
    assert labels["Pneumothorax"] == "negative"
    assert labels["Effusion"] == "positive"
    assert labels["Edema"] == "negative"


@pytest.mark.issue(8)
def test_label_explain_shows_mentions_rules_and_why(client: TestClient) -> None:
    text = "FINDINGS: Heart size is normal. No pneumothorax. Possible small left effusion."
    response = client.post("/v1/reports/label", json={"text": text, "explain": True})
    assert response.status_code == 200, response.text
    body = response.json()
    explanation = body["explanation"]
    rules = {m["label"]: m["rule"] for m in explanation["mentions"]}
    assert rules == {
        "Cardiomegaly": "normal.heart",
        "Pneumothorax": "neg.det",
        "Effusion": "unc.hedge_adjective",
    }
    assert explanation["labels"]["Effusion"]["status"] == "uncertain"
    assert "uncertain" in explanation["labels"]["Effusion"]["why"]
    assert explanation["labels"]["Hernia"]["why"].startswith("absent")
    plain = client.post("/v1/reports/label", json={"text": text}).json()
    assert plain["explanation"] is None
