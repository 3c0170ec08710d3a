"""POST /v1/reports/label returns finding attributes (issue 12)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

pytestmark = pytest.mark.issue(12)

REPORT = (
    "FINDINGS: Stable small left pleural effusion. New 8 mm nodule in the right upper lobe.\n"
    "IMPRESSION: The right pneumothorax has resolved."
)


def test_label_returns_findings_with_attributes(client: TestClient) -> None:
    response = client.post("/v1/reports/label", json={"id": "r1", "text": REPORT})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["findings"]["Effusion"] == {
        "status": "positive",
        "laterality": "left",
        "severity": "mild",
        "change": "unchanged",
    }
    assert body["findings"]["Nodule"]["size_mm"] == 8.0
    assert body["findings"]["Nodule"]["location"] == ["right upper lobe"]
    assert body["findings"]["Pneumothorax"] == {
        "status": "negative",
        "laterality": "right",
        "change": "resolved",
    }
    assert "Mass" not in body["findings"]
    effusion = next(m for m in body["mentions"] if m["label"] == "Effusion")
    assert effusion["attributes"]["laterality"] == "left"
    for ev in effusion["attribute_evidence"]:
        assert REPORT[ev["start"] : ev["end"]].lower() in ("stable", "small", "left")


def test_label_findings_in_openapi(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    props = schema["components"]["schemas"]["ReportLabelsRead"]["properties"]
    assert "findings" in props
    assert "attributes" in schema["components"]["schemas"]["MentionRead"]["properties"]
