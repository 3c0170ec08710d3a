"""Request values checked for their type and form (issue 42, low items).

Before: `"explain": 0` (and 1, "yes") was taken as a boolean, and `view_position` on
POST /v1/studies/ask was any text up to 16 characters, control characters included.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

pytestmark = pytest.mark.issue(42)

REPORT = "No pneumothorax. Small left effusion."


@pytest.mark.parametrize("value", [0, 1, "true", "yes", None])
@pytest.mark.parametrize("field", ["explain", "findings"])
def test_report_options_are_json_booleans(client: TestClient, field: str, value: object) -> None:
    response = client.post("/v1/reports/label", json={"text": REPORT, field: value})
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "RequestValidationError"
    assert client.post("/v1/reports/label", json={"text": REPORT, field: True}).status_code == 200


@pytest.mark.parametrize("view", ["PA\x00", "AP<script>", "PA\nAP", "P\u0410"])
def test_ask_view_position_is_a_code_string(client: TestClient, view: str) -> None:
    body = {"report": REPORT, "question": "Is there a pneumothorax?", "view_position": view}
    response = client.post("/v1/studies/ask", json=body)
    assert response.status_code == 422, response.text
    body["view_position"] = "AP SUPINE"
    assert client.post("/v1/studies/ask", json=body).status_code == 200
