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
    assert body["scanned"] == 1 and body["next_cursor"] is None
    [item] = body["items"]
    assert (item["item"], item["label"], item["accession_number"]) == ("a.dcm", "Effusion", "A1")
    assert item["study_instance_uid"] == "1.2.A1" and item["sop_instance_uid"] == "1.2.A1.1"
    assert item["report"]["status"] == "positive" and item["image"]["positive"] is False
    # the decision's threshold travels with it: "negative (threshold 0.50)", not a bare p
    assert item["image"]["threshold"] == 0.5 and item["review"] is None
    assert item["viewable"] is False  # stored without a kept image
    assert client.get("/v1/discrepancies", params={"job_id": "other"}).json()["items"] == []


def _pages(client: TestClient, **params: Any) -> list[list[dict[str, Any]]]:
    pages: list[list[dict[str, Any]]] = []
    cursor = None
    while True:
        query = dict(params) | ({"cursor": cursor} if cursor is not None else {})
        body = client.get("/v1/discrepancies", params=query).json()
        pages.append(body["items"])
        assert body["scanned"] == len(body["items"])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 50, "the cursor does not advance"


@pytest.mark.issue(44)
def test_worklist_pages_over_every_stored_result_with_a_keyset_cursor(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(model=False)
    _store_items(client, {f"im{i:02d}.dcm": _result(f"A{i:02d}") for i in range(12)})
    pages = _pages(client, limit=5)
    assert [len(p) for p in pages] == [5, 5, 2]
    # newest first, every item once
    seen = [d["item"] for page in pages for d in page]
    assert seen == [f"im{i:02d}.dcm" for i in reversed(range(12))]


@pytest.mark.issue(44)
def test_worklist_reaches_an_old_disagreement_behind_many_agreeing_results(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(model=False)
    # rows exist only for disagreements: 300 agreeing items newer than the one disagreement
    # cost nothing to page past
    _store_items(client, {"old.dcm": _result("OLD")})
    _store_items(client, {f"ok{i}.dcm": _result(f"K{i}", report="negative") for i in range(300)})
    pages = _pages(client, limit=1)
    assert [[d["item"] for d in page] for page in pages] == [["old.dcm"]]


@pytest.mark.issue(44)
@pytest.mark.parametrize(
    ("sort", "order", "key", "descending"),
    [
        ("probability", None, lambda d: d["image"]["probability"], True),
        ("probability", "asc", lambda d: d["image"]["probability"], False),
        ("finding", None, lambda d: d["label"], False),
        ("job", None, lambda d: d["job_id"], True),  # jobs made in order: job-0 < job-1 ...
        ("review", None, lambda d: (d["review"] or {}).get("decision") or "", False),
    ],
)
def test_worklist_sorts_in_the_query_and_pages_every_row_once_in_that_order(
    make_client: Callable[..., TestClient],
    sort: str,
    order: str | None,
    key: Callable[[dict[str, Any]], Any],
    descending: bool,
) -> None:
    client = make_client(model=False)
    probabilities = [0.05, 0.3, 0.3, 0.1, 0.45, 0.2, 0.3, 0.01, 0.4, 0.15, 0.25]
    for j in range(3):  # three jobs, created one after the other
        _store_items(
            client,
            {
                f"j{j}-{i}.dcm": _two_rows(f"A{j}{i}", p)
                for i, p in enumerate(probabilities)
                if i % 3 == j
            },
            job=f"job-{j}",
        )
    every = _pages(client, limit=500)[0]
    assert len(every) == 2 * len(probabilities)  # Effusion and Mass rows of every image
    for d in every[::3]:  # reviews on a third of the rows, of every kind
        decision = ["agree_report", "agree_model", "dismissed"][d["item_id"] % 3]
        url = f"/v1/discrepancies/items/{d['item_id']}/reviews/{d['label']}"
        assert client.put(url, json={"decision": decision}).status_code == 200
    params: dict[str, Any] = {"sort": sort, "limit": 4} | ({"order": order} if order else {})
    pages = _pages(client, **params)
    rows = [d for page in pages for d in page]
    assert all(len(page) == 4 for page in pages[:-1])
    # every row exactly once, across pages ...
    assert sorted((d["item_id"], d["label"]) for d in rows) == sorted(
        (d["item_id"], d["label"]) for d in every
    )
    # ... in the order asked for, across page boundaries too
    keys = [key(d) for d in rows]
    assert keys == sorted(keys, reverse=descending)
    # a filter pages the same way
    mass = [d for page in _pages(client, **params, label="Mass") for d in page]
    assert {d["label"] for d in mass} == {"Mass"} and len(mass) == len(probabilities)
    # a cursor of another sort is refused, not misread
    other = "finding" if sort != "finding" else "probability"
    first = client.get("/v1/discrepancies", params=params).json()["next_cursor"]
    refused = client.get("/v1/discrepancies", params={"sort": other, "cursor": first})
    assert refused.status_code == 400 and "sorted by" in refused.json()["detail"]
    assert client.get("/v1/discrepancies", params={"cursor": "nonsense"}).status_code == 400
    # a cursor edited by hand (a text where the sort compares numbers) is refused, not queried
    import base64
    import json

    forged = json.dumps({"s": sort, "d": descending, "k": [1], "i": 1}).encode()
    assert (
        client.get(
            "/v1/discrepancies",
            params=params | {"cursor": base64.urlsafe_b64encode(forged).decode()},
        ).status_code
        == 400
    )


def _two_rows(accession: str, p: float) -> dict[str, Any]:
    # Effusion in the report, the model below its threshold; Mass absent from the report,
    # the model above it: two rows, with probabilities p and 0.5 + p
    result = _result(accession, p=p)
    result["prediction"]["probabilities"]["Mass"] = 0.5 + p
    result["prediction"]["positive"] = ["Mass"]
    return result


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


def _folder_job(client: TestClient, roots: Path, export: str = "export1") -> str:
    from service_fixtures import wait_for_job

    job = client.post("/v1/batches", json={"path": export, "reports": "reports.csv"}).json()
    assert wait_for_job(client, job["id"])["state"] == "done"
    return str(job["id"])


def _row_of(client: TestClient, job_id: str, item: str, label: str) -> dict[str, Any]:
    rows = client.get("/v1/discrepancies", params={"job_id": job_id, "limit": 500}).json()
    row: dict[str, Any] = next(
        d for d in rows["items"] if d["item"] == item and d["label"] == label
    )
    return row


def _report_of(client: TestClient, row: dict[str, Any]) -> dict[str, Any]:
    r = client.get(
        f"/v1/discrepancies/items/{row['item_id']}/report", params={"label": row["label"]}
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


@pytest.mark.issue(44)
def test_worklist_row_report_is_read_again_from_the_jobs_source_with_its_evidence(
    make_client: Callable[..., TestClient], tmp_path: Path
) -> None:
    from service_fixtures import CSV_TEXT, SR_TEXT, build_export, write_reports_csv

    roots = tmp_path / "roots"
    build_export(roots / "export1")
    write_reports_csv(roots / "reports.csv")
    client = make_client(batch_roots=[roots])
    job_id = _folder_job(client, roots)
    # every threshold of the test model is 0: it calls Pneumothorax, both reports deny it
    by_sr = _row_of(client, job_id, "PAT1/STUDY1/SER1/IM000001", "Pneumothorax")
    by_csv = _row_of(client, job_id, "PAT2/STUDY2/image.dcm", "Pneumothorax")
    for row, text, origin in (
        (by_sr, SR_TEXT, "structured report PAT1/STUDY1/SR/SR000001"),
        (by_csv, CSV_TEXT, "reports CSV reports.csv"),
    ):
        body = _report_of(client, row)
        assert body["origin"] == origin and body["missing"] is None
        assert text in body["text"] and body["status"] == "negative" and not body["changed"]
        [evidence] = [m for m in body["labels"]["mentions"] if m["label"] == "Pneumothorax"]
        # offsets index the text returned: the page highlights exactly these words
        assert body["text"][evidence["start"] : evidence["end"]].lower() == "pneumothorax"
        assert evidence["status"] == "negative"
    # The report rewritten since the batch: said, with the new reading.
    (roots / "reports.csv").write_text('AccessionNumber,Report\nB1,"Large pneumothorax."\n')
    changed = _report_of(client, by_csv)
    assert changed["changed"] and changed["labels"]["labels"]["Pneumothorax"] == "positive"
    # Sources gone: said plainly, no text, no error status.
    (roots / "reports.csv").unlink()
    (roots / "export1" / "PAT1" / "STUDY1" / "SR" / "SR000001").unlink()
    for row, what in ((by_csv, "The reports CSV reports.csv"), (by_sr, "The structured report")):
        gone = _report_of(client, row)
        assert gone["text"] is None and gone["labels"] is None
        assert (
            gone["missing"].startswith(what)
            and "no longer where the job read it" in (gone["missing"])
        )
    # a row that does not exist is a 404 that names the row's findings
    missing = client.get(
        f"/v1/discrepancies/items/{by_csv['item_id']}/report", params={"label": "Hernia?"}
    )
    assert missing.status_code == 404


@pytest.mark.issue(44)
def test_worklist_row_report_of_an_uploaded_zip_says_it_went_with_the_job(
    make_client: Callable[..., TestClient],
) -> None:
    import io
    import zipfile

    from dicom_factory import dx_bytes
    from service_fixtures import CSV_TEXT, wait_for_job

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("a/image.dcm", dx_bytes(accession="B1"))
    client = make_client()
    response = client.post(
        "/v1/batches",
        files={
            "file": ("x.zip", buffer.getvalue(), "application/zip"),
            "reports": ("reports.csv", f'AccessionNumber,Report\nB1,"{CSV_TEXT}"\n', "text/csv"),
        },
    )
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    assert wait_for_job(client, job_id)["state"] == "done"
    row = _row_of(client, job_id, "a/image.dcm", "Pneumothorax")
    body = _report_of(client, row)
    assert body["text"] is None and body["origin"] == "reports CSV reports.csv"
    assert "uploaded with the job and deleted when the job ended" in body["missing"]
    # the image is gone too: the opened image is the model input the batch kept
    opened = client.post(f"/v1/discrepancies/items/{row['item_id']}/prediction").json()
    assert _preview_side(client, opened["id"]) <= 512


def _preview_side(client: TestClient, prediction_id: str) -> int:
    import cv2
    import numpy as np

    png = client.get(f"/v1/predictions/{prediction_id}/image.png")
    assert png.status_code == 200
    grey = cv2.imdecode(np.frombuffer(png.content, np.uint8), cv2.IMREAD_GRAYSCALE)
    return int(max(grey.shape))


def _prediction_count(client: TestClient) -> int:
    from sqlalchemy import func, select

    from app.db.models import PredictionRow

    with client.app.state.cxr.sessions() as session:  # type: ignore[attr-defined]
        return int(session.scalar(select(func.count()).select_from(PredictionRow)) or 0)


def _big_export(roots: Path) -> None:
    from dicom_factory import chest_pixels, dx_bytes

    folder = roots / "big"
    folder.mkdir(parents=True)
    (folder / "film.dcm").write_bytes(
        dx_bytes(accession="B1", pixels=chest_pixels(1400, 1200, seed=3))
    )
    (roots / "reports.csv").write_text('AccessionNumber,Report\nB1,"No pneumothorax."\n')


@pytest.mark.issue(44)
def test_worklist_open_shows_the_source_file_at_display_size_and_reuses_its_prediction(
    make_client: Callable[..., TestClient], tmp_path: Path
) -> None:
    roots = tmp_path / "roots"
    _big_export(roots)
    client = make_client(batch_roots=[roots])
    job_id = _folder_job(client, roots, "big")
    row = _row_of(client, job_id, "film.dcm", "Pneumothorax")
    kept = client.get(f"/v1/discrepancies/items/{row['item_id']}/image.png")
    import cv2
    import numpy as np

    model_side = max(cv2.imdecode(np.frombuffer(kept.content, np.uint8), 0).shape)
    assert model_side < 1024  # the batch kept the model input only
    before = _prediction_count(client)
    first = client.post(f"/v1/discrepancies/items/{row['item_id']}/prediction").json()
    # the file is still in the folder: shown at display size, not the model's
    assert _preview_side(client, first["id"]) == 1024
    heat = client.get(first["heatmaps"]["Pneumothorax"], params={"max_size": 1024})
    assert max(cv2.imdecode(np.frombuffer(heat.content, np.uint8), 1).shape[:2]) == 1024
    assert first["image"]["rows"] == 1400 and first["image"]["columns"] == 1200
    # opened again, by the same model: the stored prediction, not a new row
    again = client.post(f"/v1/discrepancies/items/{row['item_id']}/prediction").json()
    assert again["id"] == first["id"] and _prediction_count(client) == before + 1


@pytest.mark.issue(44)
def test_worklist_open_never_draws_on_a_file_replaced_since_the_batch(
    make_client: Callable[..., TestClient], tmp_path: Path
) -> None:
    from dicom_factory import chest_pixels, dx_bytes

    roots = tmp_path / "roots"
    _big_export(roots)
    client = make_client(batch_roots=[roots])
    job_id = _folder_job(client, roots, "big")
    row = _row_of(client, job_id, "film.dcm", "Pneumothorax")
    (roots / "big" / "film.dcm").write_bytes(
        dx_bytes(accession="B1", pixels=chest_pixels(1400, 1200, seed=9))
    )
    opened = client.post(f"/v1/discrepancies/items/{row['item_id']}/prediction").json()
    assert _preview_side(client, opened["id"]) < 1024  # the kept input, not the new file
    assert opened["probabilities"]["Pneumothorax"] == pytest.approx(
        row["image"]["probability"], abs=1e-6
    )


@pytest.mark.issue(44)
def test_worklist_deleting_a_job_deletes_the_images_it_kept_unless_another_row_needs_them(
    make_client: Callable[..., TestClient], tmp_path: Path
) -> None:
    from app.db.models import Image

    roots = tmp_path / "roots"
    _big_export(roots)
    client = make_client(batch_roots=[roots])
    storage = client.app.state.cxr.storage  # type: ignore[attr-defined]
    first_job = _folder_job(client, roots, "big")
    second_job = _folder_job(client, roots, "big")  # the same file: the same stored objects
    rows = [_row_of(client, j, "film.dcm", "Pneumothorax") for j in (first_job, second_job)]
    items = [client.get(f"/v1/batches/{j}/results").text for j in (first_job, second_job)]
    assert all('"review_image"' in text for text in items)
    opened = client.post(f"/v1/discrepancies/items/{rows[0]['item_id']}/prediction").json()
    with client.app.state.cxr.sessions() as session:  # type: ignore[attr-defined]
        from app.db.models import BatchItem, PredictionRow

        kept = session.get(BatchItem, rows[0]["item_id"]).result["review_image"]
        prediction = session.get(PredictionRow, opened["id"])
        made = {prediction.heatmaps_key, prediction.image.pixels_key}
    keys = {kept["preview"], kept["input"]} | made
    assert len(keys) == 4 and all(storage.exists(k) for k in keys)

    assert client.delete(f"/v1/batches/{first_job}").status_code == 204
    # the second job kept the same image: nothing deleted, its row still opens
    assert all(storage.exists(k) for k in keys)
    assert client.get(f"/v1/predictions/{opened['id']}").status_code == 200
    assert client.get(f"/v1/discrepancies/items/{rows[1]['item_id']}/image.png").status_code == 200

    # An uploaded image whose preview is byte-identical to the kept one keeps that object.
    with client.app.state.cxr.sessions() as session:  # type: ignore[attr-defined]
        session.add(Image(sha256="0" * 64, rows=1, columns=1, pixels_key=kept["preview"]))
        session.commit()
    assert client.delete(f"/v1/batches/{second_job}").status_code == 204
    assert storage.exists(kept["preview"])
    assert not any(storage.exists(k) for k in keys - {kept["preview"]})
    # the prediction made by opening the row went with the last job that kept its image
    assert client.get(f"/v1/predictions/{opened['id']}").status_code == 404


@pytest.mark.issue(44)
def test_worklist_rows_of_old_results_are_derived_once_even_by_two_readers_at_once(
    make_client: Callable[..., TestClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import func, select
    from sqlalchemy.orm import Session

    from app import crud
    from app.db.models import WorklistRow

    client = make_client(model=False)
    _store_items(client, {f"im{i}.dcm": _result(f"A{i}") for i in range(3)})  # not indexed yet
    sessions = client.app.state.cxr.sessions  # type: ignore[attr-defined]
    derive = crud._index_items
    raced: list[int] = []
    racing_now: list[bool] = []

    def racing(session: Session, items: Any) -> None:
        derive(session, items)
        if not racing_now:  # a second reader derives the same items and commits first
            racing_now.append(True)
            with sessions() as other:
                raced.append(crud.index_worklist(other))

    monkeypatch.setattr(crud, "_index_items", racing)
    with sessions() as session:
        assert crud.index_worklist(session) == 0  # its commit lost: the other's rows stand
    assert raced == [3]
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(WorklistRow)) == 3
    assert len(client.get("/v1/discrepancies").json()["items"]) == 3
