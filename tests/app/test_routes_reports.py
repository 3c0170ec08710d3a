"""POST /v1/reports/label through HTTP."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, inspect, text

REPORT = "FINDINGS: The heart is enlarged. No pneumothorax.\nIMPRESSION: Cardiomegaly."


def test_label_single_report_returns_labels_and_mentions(client: TestClient) -> None:
    response = client.post("/v1/reports/label", json={"id": "r1", "text": REPORT})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == "r1"
    assert body["labels"]["Cardiomegaly"] == "positive"
    assert body["labels"]["Pneumothorax"] == "negative"
    assert body["no_finding"] is False
    mention = next(m for m in body["mentions"] if m["label"] == "Cardiomegaly")
    assert REPORT[mention["start"] : mention["end"]] == mention["text"]
    assert body["labeler_version"].startswith("concepts.")


def test_label_batch_keeps_order_and_flags_bad_reports(client: TestClient) -> None:
    reports = [
        {"id": "a", "text": REPORT},
        {"id": "b", "text": "   "},
        {"id": "c", "text": "No acute cardiopulmonary abnormality."},
    ]
    response = client.post("/v1/reports/label", json={"reports": reports})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["id"] for r in results] == ["a", "b", "c"]
    assert results[0]["labels"]["Cardiomegaly"] == "positive"
    assert results[1]["error"] and "empty" in results[1]["error"].lower()
    assert results[2]["error"] is None


def test_label_empty_text_is_422(client: TestClient) -> None:
    response = client.post("/v1/reports/label", json={"text": ""})
    assert response.status_code == 422
    assert response.json()["error"] == "RequestValidationError"
    blank = client.post("/v1/reports/label", json={"text": "   "})
    assert blank.status_code == 422
    assert blank.json()["error"] == "EmptyReportError"


def test_label_batch_over_limit_is_422(make_client: Callable[..., TestClient]) -> None:
    client = make_client(model=False, max_reports_per_request=2)
    reports = [{"id": str(i), "text": REPORT} for i in range(3)]
    response = client.post("/v1/reports/label", json={"reports": reports})
    assert response.status_code == 422
    assert "limit is 2" in response.json()["detail"]


@pytest.mark.issue(7)
def test_label_request_over_the_character_budget_is_413(
    make_client: Callable[..., TestClient],
) -> None:
    # Labeling is serialized: one request of 256 long reports used to hold every
    # other caller up for minutes (and write hundreds of MB of evidence rows).
    client = make_client(model=False, max_report_chars_per_request=100)
    reports = [{"id": str(i), "text": "Small left effusion. " * 2} for i in range(3)]
    response = client.post("/v1/reports/label", json={"reports": reports})
    assert response.status_code == 413
    body = response.json()
    assert body["error"] == "PayloadTooLarge"
    assert "126 characters" in body["detail"]
    assert "CXR_MAX_REPORT_CHARS_PER_REQUEST" in body["detail"]
    single = client.post("/v1/reports/label", json={"text": "Small left effusion. " * 5})
    assert single.status_code == 413
    ok = client.post("/v1/reports/label", json={"reports": reports[:2]})
    assert ok.status_code == 200
    assert (
        "413"
        in client.get("/openapi.json").json()["paths"]["/v1/reports/label"]["post"]["responses"]
    )


@pytest.mark.issue(7)
@pytest.mark.parametrize(
    "body",
    [
        # both forms at once used to be read as the batch alone, the text ignored
        {"text": "Small left effusion.", "reports": [{"text": "No effusion."}]},
        # a misspelt or unknown option used to be ignored silently
        {"text": "Small left effusion.", "labels": "chexpert"},
        {"reports": [{"text": "Small left effusion.", "explian": True}]},
        # control characters in the stored id; a study UID that is no UID
        {"text": "Small left effusion.", "id": "acc\u0000 1"},
        {"text": "Small left effusion.", "id": "acc\n1"},
        {"text": "Small left effusion.", "study_instance_uid": "../../etc"},
        {"text": "Small left effusion.", "study_instance_uid": "1.2\u00003"},
    ],
)
def test_label_refuses_ambiguous_or_unstorable_fields(
    client: TestClient, body: dict[str, object]
) -> None:
    response = client.post("/v1/reports/label", json=body)
    assert response.status_code == 422
    assert response.json()["error"] == "RequestValidationError"


def test_label_accepts_ordinary_ids_and_uids(client: TestClient) -> None:
    body = {"text": "Small left effusion.", "id": "ACC-1 é/2", "study_instance_uid": "1.2.840.1"}
    response = client.post("/v1/reports/label", json=body)
    assert response.status_code == 200
    assert response.json()["id"] == "ACC-1 é/2"


def test_label_stores_hash_not_text(client: TestClient) -> None:
    assert client.post("/v1/reports/label", json={"id": "r9", "text": REPORT}).status_code == 200
    url = client.app.state.cxr.settings.resolved_database_url  # type: ignore[attr-defined]
    engine = create_engine(url)
    with engine.connect() as conn:
        reports = conn.execute(text("SELECT external_id, text_sha256 FROM reports")).all()
        results = conn.execute(text("SELECT labels FROM label_results")).all()
    engine.dispose()
    assert reports[0][0] == "r9" and len(reports[0][1]) == 64
    assert "heart is enlarged" not in str(reports) + str(results)
    assert len(results) == 1


def test_label_works_without_model(make_client: Callable[..., TestClient]) -> None:
    client = make_client(model=False)
    assert client.post("/v1/reports/label", json={"text": REPORT}).status_code == 200


def test_label_malformed_json_is_400_and_a_schema_mismatch_422(client: TestClient) -> None:
    headers = {"content-type": "application/json"}
    broken = client.post("/v1/reports/label", content=b'{"text": "abc', headers=headers)
    assert broken.status_code == 400
    assert broken.json()["error"] == "MalformedBody"
    assert broken.json()["detail"].startswith("request body is not valid JSON")
    assert "abc" not in broken.text  # never the body
    assert client.post("/v1/reports/label", json={"txt": "abc"}).status_code == 422


def test_label_too_long_report_is_422(make_client: Callable[..., TestClient]) -> None:
    client = make_client(model=False, max_report_chars=50)
    response = client.post("/v1/reports/label", json={"text": REPORT * 3})
    assert response.status_code == 422
    assert response.json()["error"] == "ReportTooLongError"
    assert response.json()["detail"].endswith("(here: CXR_MAX_REPORT_CHARS)")


# A name typed into a report, beside a finding, so it lands in the evidence sentence.
PLANTED = "Quenfordby Xaltrimmer"
NAMED_REPORT = (
    f"FINDINGS: Patient {PLANTED} has a small left pleural effusion. Heart normal.\n"
    "IMPRESSION: Effusion."
)


def _database_dump(client: TestClient) -> str:
    """Every row of every table, as text (SQLite or PostgreSQL)."""
    url = client.app.state.cxr.settings.resolved_database_url  # type: ignore[attr-defined]
    engine = create_engine(url)
    try:
        tables = inspect(engine).get_table_names()
        with engine.connect() as conn:
            # str() of each value: a Row's repr truncates long strings.
            return "\n".join(
                " | ".join(str(value) for value in row)
                for table in tables
                for row in conn.execute(text(f'SELECT * FROM "{table}"')).all()
            )
    finally:
        engine.dispose()


def _label_named_reports(client: TestClient) -> dict[str, Any]:
    one = client.post("/v1/reports/label", json={"id": "n1", "text": NAMED_REPORT})
    many = client.post("/v1/reports/label", json={"reports": [{"id": "n2", "text": NAMED_REPORT}]})
    assert one.status_code == 200 and many.status_code == 200, one.text + many.text
    body: dict[str, Any] = one.json()
    return body


@pytest.mark.issue(7)
def test_label_stores_no_report_text_by_default(
    make_client: Callable[..., TestClient], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = make_client(model=False)
    body = _label_named_reports(client)
    # The caller gets its own evidence back...
    mention = next(m for m in body["mentions"] if m["label"] == "Effusion")
    assert PLANTED in mention["sentence"] and mention["text"]
    # ...but the database, the storage folder and the logs hold none of the text.
    dump = _database_dump(client)
    fragments = (PLANTED, "Quenfordby", "pleural effusion", "Heart normal", mention["sentence"])
    for fragment in fragments:
        assert fragment not in dump
    assert all(word in dump for word in ("start", "rule", "Effusion"))  # offsets, rules kept
    root = client.app.state.cxr.settings.storage_dir  # type: ignore[attr-defined]
    for path in root.rglob("*"):
        if path.is_file():
            assert PLANTED.encode() not in path.read_bytes(), path
    assert PLANTED not in caplog.text


@pytest.mark.issue(7)
def test_label_stores_evidence_text_when_enabled(
    make_client: Callable[..., TestClient], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    client = make_client(model=False, store_report_text=True)
    body = _label_named_reports(client)
    mention = next(m for m in body["mentions"] if m["label"] == "Effusion")
    dump = _database_dump(client)
    assert PLANTED in dump and mention["sentence"] in dump
    assert NAMED_REPORT not in dump  # the full report is never stored, only evidence
    assert PLANTED not in caplog.text


@pytest.mark.issue(40)
def test_label_reads_every_finding_when_asked(client: TestClient) -> None:
    text = "FINDINGS: Right PICC. Calcified granuloma. No pneumothorax."
    plain = client.post("/v1/reports/label", json={"text": text}).json()
    assert "report_findings" not in plain or plain["report_findings"] is None
    asked = client.post("/v1/reports/label", json={"text": text, "findings": True})
    assert asked.status_code == 200, asked.text
    body = asked.json()
    read = {f["concept"]: f for f in body["report_findings"]}
    assert read["picc"]["mesh"] == "Catheters, Indwelling/right"
    assert (read["picc"]["radlex"], read["calcified_granuloma"]["radlex"]) == ("RID5581", "")
    assert read["calcified_granuloma"]["status"] == "positive"
    assert read["pneumothorax"]["status"] == "negative"
    assert body["normal"] is False
    assert body["labels"] == plain["labels"]  # the labels do not change
    batch = client.post(
        "/v1/reports/label",
        json={"reports": [{"id": "a", "text": text, "findings": True}, {"id": "b", "text": text}]},
    ).json()["results"]
    assert batch[0]["report_findings"] and batch[0]["normal"] is False
    assert batch[1]["report_findings"] is None and batch[1]["normal"] is None  # not asked
