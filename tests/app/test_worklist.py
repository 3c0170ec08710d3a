"""The discrepancy worklist (app/worklist.py) and GET /v1/discrepancies: report and image
disagreements read from stored batch results."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
    assert r.json() == {"items": [], "scanned": 0}


def test_get_discrepancies_lists_stored_batch_results(
    make_client: Callable[..., TestClient],
) -> None:
    from app.db.models import BatchItem, BatchJobRow

    client = make_client(model=False)
    result = {
        "rows": 300,
        "columns": 200,
        "view_position": "PA",
        "accession_number": "A1",
        "report": {"labels": {"Effusion": "positive"}, "source": "csv"},
        "prediction": {"probabilities": {"Effusion": 0.1}, "positive": [], "boxes": []},
    }
    agree = dict(result, report={"labels": {"Effusion": "negative"}, "source": "csv"})
    with client.app.state.cxr.sessions() as session:  # type: ignore[attr-defined]
        session.add(BatchJobRow(id="job-1", state="done", source_kind="path", source="x"))
        session.add(
            BatchItem(job_id="job-1", path="a.dcm", kind="image", state="done", result=result)
        )
        session.add(
            BatchItem(job_id="job-1", path="b.dcm", kind="image", state="done", result=agree)
        )
        session.commit()
    body = client.get("/v1/discrepancies").json()
    assert body["scanned"] == 2
    [item] = body["items"]
    assert (item["item"], item["label"], item["accession_number"]) == ("a.dcm", "Effusion", "A1")
    assert item["report"]["status"] == "positive" and item["image"]["positive"] is False
    assert client.get("/v1/discrepancies", params={"job_id": "other"}).json()["items"] == []
