"""CXR_LABEL_SET chooses the service's label set (CheXpert users, issue 8)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.settings import Settings

pytestmark = pytest.mark.issue(8)


def test_service_labels_with_the_chexpert_set(make_client: Callable[..., TestClient]) -> None:
    client = make_client(label_set="chexpert")
    body = client.post(
        "/v1/reports/label",
        json={"id": "r1", "text": "IMPRESSION: Small left pleural effusion. No pneumothorax."},
    ).json()
    assert body["labels"]["Pleural Effusion"] == "positive"
    assert body["labels"]["Pneumothorax"] == "negative"
    assert "Effusion" not in body["labels"]
    assert "Support Devices" in body["labels"]


def test_service_default_label_set_is_chestxray14(client: TestClient) -> None:
    body = client.post("/v1/reports/label", json={"text": "Small left effusion."}).json()
    assert body["labels"]["Effusion"] == "positive"
    assert len(body["labels"]) == 14


def test_unknown_label_set_is_refused_at_start() -> None:
    with pytest.raises(ValidationError, match="chexpert"):
        Settings(label_set="chexpart")
