"""The discrepancy worklist (app/worklist.py) and GET /v1/discrepancies: report and image
disagreements read from stored batch results."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.worklist import discrepancies_in_result


def test_worklist_reads_stored_batch_results() -> None:
    result: dict[str, Any] = {
        "rows": 300,
        "columns": 200,
        "view_position": "PA",
        "study_instance_uid": "1.2.3",
        "report": {"labels": {"Effusion": "positive", "Mass": "absent"}, "source": "csv"},
        "prediction": {
            "probabilities": {"Effusion": 0.2, "Mass": 0.8},
            "positive": ["Mass"],
            "boxes": [{"label": "Mass", "x": 20, "y": 30, "width": 30, "height": 30, "score": 0.7}],
        },
    }
    found = {d.label: d for d in discrepancies_in_result(result, job_id="j", item="a.dcm")}
    assert set(found) == {"Effusion", "Mass"}
    assert found["Mass"].image["side"] == "right"
    assert "does not mention" in found["Mass"].reason


def test_worklist_flags_a_finding_on_the_other_side() -> None:
    result: dict[str, Any] = {
        "rows": 300,
        "columns": 200,
        "view_position": "PA",
        "report": {
            "labels": {"Mass": "positive"},
            "findings": {"Mass": {"status": "positive", "laterality": "left"}},
            "source": "csv",
        },
        "prediction": {
            "probabilities": {"Mass": 0.9},
            "positive": ["Mass"],
            # the image's left half: the patient's right on a PA view
            "boxes": [{"label": "Mass", "x": 20, "y": 30, "width": 30, "height": 30, "score": 0.7}],
        },
    }
    (found,) = discrepancies_in_result(result, job_id="j", item="a.dcm")
    assert found.label == "Mass" and found.image["side"] == "right"
    assert found.report["laterality"] == "left"


def test_get_discrepancies_empty(make_client: Callable[..., TestClient]) -> None:
    r = make_client(model=False).get("/v1/discrepancies")
    assert r.status_code == 200
    assert r.json() == {"items": [], "scanned": 0, "next_cursor": None}


def _result(accession: str, report: str = "positive", p: float = 0.1) -> dict[str, Any]:
    return {
        "rows": 300,
        "columns": 200,
        "view_position": "PA",
        "accession_number": accession,
        "study_instance_uid": f"1.2.{accession}",
        "sop_instance_uid": f"1.2.{accession}.1",
        "report": {"labels": {"Effusion": report, "Mass": "absent"}, "source": "csv"},
        "prediction": {
            "probabilities": {"Effusion": p, "Mass": 0.2},
            "positive": ["Effusion"] if p >= 0.5 else [],
            "boxes": [],
            "thresholds": {"Effusion": 0.5, "Mass": 0.5},
        },
    }


def _store_items(
    client: TestClient, results: dict[str, dict[str, Any]], job: str = "job-1"
) -> None:
    from app.db.models import BatchItem, BatchJobRow

    with client.app.state.cxr.sessions() as session:  # type: ignore[attr-defined]
        if session.get(BatchJobRow, job) is None:
            session.add(BatchJobRow(id=job, state="done", source_kind="path", source="x"))
        for path, result in results.items():
            session.add(BatchItem(job_id=job, path=path, kind="image", state="done", result=result))
        session.commit()


def test_get_discrepancies_lists_stored_batch_results(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(model=False)
    agree = _result("A2", report="negative")
    _store_items(client, {"a.dcm": _result("A1"), "b.dcm": agree})
    body = client.get("/v1/discrepancies").json()
    assert body["scanned"] == 2 and body["next_cursor"] is None
    [item] = body["items"]
    assert (item["item"], item["label"], item["accession_number"]) == ("a.dcm", "Effusion", "A1")
    assert item["study_instance_uid"] == "1.2.A1" and item["sop_instance_uid"] == "1.2.A1.1"
    assert item["report"]["status"] == "positive" and item["image"]["positive"] is False
    # the decision's threshold travels with it: "negative (threshold 0.50)", not a bare p
    assert item["image"]["threshold"] == 0.5 and item["review"] is None
    assert item["viewable"] is False  # stored without a kept image
    assert client.get("/v1/discrepancies", params={"job_id": "other"}).json()["items"] == []


@pytest.mark.issue(44)
def test_worklist_pages_over_every_stored_result_with_a_keyset_cursor(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(model=False)
    _store_items(client, {f"im{i:02d}.dcm": _result(f"A{i:02d}") for i in range(12)})
    seen: list[str] = []
    before = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 5}
        if before is not None:
            params["before"] = before
        body = client.get("/v1/discrepancies", params=params).json()
        pages += 1
        seen += [d["item"] for d in body["items"]]
        before = body["next_cursor"]
        if before is None:
            break
    assert pages == 3
    # newest first, every item once
    assert seen == [f"im{i:02d}.dcm" for i in reversed(range(12))]


@pytest.mark.issue(44)
def test_worklist_reads_past_its_scan_budget_instead_of_stopping(
    make_client: Callable[..., TestClient],
) -> None:
    from app.worklist import list_discrepancies

    client = make_client(model=False)
    # ten agreeing items newer than the one disagreement: a page that reads 4 items finds
    # nothing yet says where to go on, and the cursor reaches the old row
    _store_items(client, {"old.dcm": _result("OLD")})
    _store_items(client, {f"ok{i}.dcm": _result(f"K{i}", report="negative") for i in range(10)})
    found: list[str] = []
    before = None
    with client.app.state.cxr.sessions() as session:  # type: ignore[attr-defined]
        for _ in range(10):
            page = list_discrepancies(session, before=before, max_scan=4)
            assert page.scanned <= 4
            found += [d.item for d in page.items]
            before = page.next_cursor
            if before is None:
                break
    assert found == ["old.dcm"] and before is None


@pytest.mark.issue(44)
def test_worklist_review_recorded_with_the_keys_name_filtered_and_exported(
    make_client: Callable[..., TestClient],
) -> None:
    import csv
    import io

    from app.security import hash_api_key

    key = "a-key-for-dr-smith-0123"
    client = make_client(model=False, api_keys=[f"dr-smith={hash_api_key(key)}"])
    headers = {"X-API-Key": key}
    _store_items(client, {"a.dcm": _result("A1"), "b.dcm": _result("B1")})
    rows = client.get("/v1/discrepancies", headers=headers).json()["items"]
    first = next(d for d in rows if d["item"] == "a.dcm")
    url = f"/v1/discrepancies/items/{first['item_id']}/reviews/Effusion"
    r = client.put(url, json={"decision": "agree_model", "note": " small, old "}, headers=headers)
    assert r.status_code == 200, r.text
    review = r.json()
    assert review["reviewer"] == "dr-smith" and review["decision"] == "agree_model"
    assert review["note"] == "small, old" and review["reviewed_at"]
    # a second verdict replaces the first
    again = client.put(url, json={"decision": "dismissed"}, headers=headers).json()
    assert again["decision"] == "dismissed" and again["note"] is None
    listed = client.get("/v1/discrepancies", headers=headers).json()["items"]
    by_item = {d["item"]: d for d in listed}
    assert by_item["a.dcm"]["review"]["decision"] == "dismissed"
    assert by_item["b.dcm"]["review"] is None
    open_rows = client.get("/v1/discrepancies", params={"unreviewed": True}, headers=headers)
    assert [d["item"] for d in open_rows.json()["items"]] == ["b.dcm"]
    assert (
        client.get("/v1/discrepancies", params={"label": "Mass"}, headers=headers).json()["items"]
        == []
    )
    # not a row of that item; an unknown decision; no such item; no key
    assert client.put(url.replace("Effusion", "Mass"), json={}, headers=headers).status_code == 404
    assert client.put(url, json={"decision": "maybe"}, headers=headers).status_code == 422
    assert (
        client.put(
            "/v1/discrepancies/items/999/reviews/Effusion", json={}, headers=headers
        ).status_code
        == 404
    )
    assert client.put(url, json={"decision": "dismissed"}).status_code == 401
    exported = client.get("/v1/discrepancies.csv", headers=headers)
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(exported.text)))
    assert {r["item"] for r in table} == {"a.dcm", "b.dcm"}
    a = next(r for r in table if r["item"] == "a.dcm")
    assert (a["review_decision"], a["reviewer"], a["model_decision"]) == (
        "dismissed",
        "dr-smith",
        "negative",
    )
    assert a["model_threshold"] == "0.5" and a["accession_number"] == "A1"


@pytest.mark.issue(44)
def test_worklist_keeps_the_image_and_opens_it_with_the_batchs_numbers(
    make_client: Callable[..., TestClient], tmp_path: Path
) -> None:
    from service_fixtures import build_export, wait_for_job, write_reports_csv

    roots = tmp_path / "roots"
    build_export(roots / "export1")
    write_reports_csv(roots / "reports.csv")
    client = make_client(batch_roots=[roots])
    job = client.post("/v1/batches", json={"path": "export1", "reports": "reports.csv"}).json()
    assert wait_for_job(client, job["id"])["state"] == "done"
    rows = client.get("/v1/discrepancies", params={"job_id": job["id"]}).json()["items"]
    assert rows and all(d["viewable"] for d in rows)
    row = rows[0]
    thumb = client.get(f"/v1/discrepancies/items/{row['item_id']}/image.png?max_size=96")
    assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/png"
    import cv2
    import numpy as np

    small = cv2.imdecode(np.frombuffer(thumb.content, np.uint8), cv2.IMREAD_GRAYSCALE)
    assert small is not None and max(small.shape) <= 96
    opened = client.post(f"/v1/discrepancies/items/{row['item_id']}/prediction")
    assert opened.status_code == 200, opened.text
    p = opened.json()
    assert p["probabilities"][row["label"]] == pytest.approx(row["image"]["probability"], abs=1e-6)
    assert row["label"] in p["heatmaps"]  # every finding has one, negative or not
    assert p["image"]["study_instance_uid"] == row["study_instance_uid"]
    heat = client.get(p["heatmaps"][row["label"]])
    assert heat.status_code == 200
