"""Questions about a study: fusion of report and image, the discrepancy flag, `cxr ask`,
POST /v1/studies/ask and the discrepancy worklist."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.cli import main
from app.worklist import discrepancies_in_result
from batch.study_questions import StudyQuestions, discrepancy_of
from labeler.config import LabelerConfig
from labeler.pipeline import build_nlp
from models.dicom import ImageMeta
from models.image_findings import ImageFindings, image_findings
from models.position import LungField

REPORT = (
    "FINDINGS: Small left pleural effusion. No pneumothorax. A 2 cm mass in the right upper lobe."
)


@dataclass(frozen=True)
class B:
    label: str
    x: float
    y: float
    width: float
    height: float
    score: float = 0.9


@pytest.fixture(scope="module")
def engine() -> StudyQuestions:
    config = LabelerConfig()
    return StudyQuestions(build_nlp(config), config)


def _image(positive: list[str], boxes: list[B], view: str | None = "PA") -> ImageFindings:
    probs = {"Effusion": 0.1, "Pneumothorax": 0.1, "Mass": 0.1, "Nodule": 0.1}
    probs.update(dict.fromkeys(positive, 0.9))
    meta = ImageMeta(rows=300, columns=200, view_position=view)
    return image_findings(
        probs, positive, boxes, None, meta, lung_field=LungField(0, 0, 200, 300, "image")
    )


# image right (x > 100) is the patient's left on a PA view
LEFT_LOW = B("Effusion", 140, 220, 40, 50)
RIGHT_LOW = B("Effusion", 20, 220, 40, 50)


def test_report_and_image_agree(engine: StudyQuestions) -> None:
    report = engine.label_reports([REPORT])[REPORT]
    a = engine.ask(
        "Is the effusion on the left?", report=report, image=_image(["Effusion"], [LEFT_LOW])
    )
    assert (a.type, a.answer, a.source, a.discrepancy) == ("position", "yes", "both", False)
    assert a.evidence["image"]["boxes"][0]["side"] == "left"  # type: ignore[index]
    assert a.evidence["report"][0]["rule"]  # type: ignore[index]


def test_image_only_position_uses_view_position_and_zones(engine: StudyQuestions) -> None:
    img = _image(["Effusion"], [LEFT_LOW])
    assert engine.ask("Which side is the effusion on?", image=img).answer == ["left"]
    assert engine.ask("Where is the effusion?", image=img).answer == ["left", "lower"]
    ap = _image(["Effusion"], [RIGHT_LOW], view="AP")
    a = engine.ask("Is the effusion on the right?", image=ap)
    assert (a.answer, a.source) == ("yes", "image")
    lateral = _image(["Effusion"], [RIGHT_LOW], view="LL")
    assert engine.ask("Which side is the effusion on?", image=lateral).answer == "unknown"


def test_discrepancy_on_side(engine: StudyQuestions) -> None:
    report = engine.label_reports([REPORT])[REPORT]
    a = engine.ask("Is there an effusion?", report=report, image=_image(["Effusion"], [RIGHT_LOW]))
    assert (a.answer, a.discrepancy) == ("yes", True)
    assert "on the left, the image on the right" in str(a.evidence["discrepancy"])


def test_discrepancy_on_presence_both_ways(engine: StudyQuestions) -> None:
    report = engine.label_reports([REPORT])[REPORT]
    missed = engine.ask("Is there an effusion?", report=report, image=_image([], []))
    assert (missed.answer, missed.discrepancy) == ("yes", True)
    extra = engine.ask(
        "Is there a pneumothorax?",
        report=report,
        image=_image(["Pneumothorax"], [B("Pneumothorax", 150, 30, 20, 60)]),
    )
    assert (extra.answer, extra.discrepancy) == ("no", True)
    assert "rules it out" in str(extra.evidence["discrepancy"])


def test_no_discrepancy_for_an_uncertain_report_or_unknown_label(engine: StudyQuestions) -> None:
    img = _image([], [])
    assert discrepancy_of("uncertain", None, img, "Effusion") is None
    assert discrepancy_of("positive", None, img, "Hernia") is None


def test_unsupported_question_is_not_answered(engine: StudyQuestions) -> None:
    a = engine.ask("Why is there an effusion?", report=engine.label_reports([REPORT])[REPORT])
    assert (a.type, a.answer, a.source) == ("unsupported", None, None)
    assert a.message


def test_size_answer_has_a_unit(engine: StudyQuestions) -> None:
    a = engine.ask("How big is the mass?", report=engine.label_reports([REPORT])[REPORT])
    assert a.to_dict()["answer"] == 20.0 and a.to_dict()["unit"] == "mm"


def test_image_cannot_answer_size(engine: StudyQuestions) -> None:
    a = engine.ask("How big is the mass?", image=_image(["Mass"], [B("Mass", 20, 30, 30, 30)]))
    assert (a.answer, a.source) == ("unknown", "image")
    assert "report" in str(a.message)


def test_cxr_ask_one_question(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["ask", "--report", REPORT, "--question", "Is there a pneumothorax?", "-q"])
    out = json.loads(capsys.readouterr().out)
    assert status == 0
    assert {k: out[k] for k in ("type", "label", "answer", "source")} == {
        "type": "presence",
        "label": "Pneumothorax",
        "answer": "no",
        "source": "report",
    }


def test_cxr_ask_questions_csv(tmp_path: Path) -> None:
    src = tmp_path / "q.csv"
    with src.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "report", "image", "question"])
        w.writerow(["a", REPORT, "", "Where is the mass?"])
        w.writerow(["b", REPORT, "", "Is the mass larger than 3 cm?"])
        w.writerow(["c", "Possible pleural effusion.", "", "Is there an effusion?"])
        w.writerow(["d", REPORT, "", "What is the diagnosis?"])
    out = tmp_path / "answers.jsonl"
    assert main(["ask", "--questions", str(src), "-o", str(out), "-q"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "b", "c", "d"]
    assert rows[0]["answer"] == ["right", "right upper lobe"]
    assert rows[1]["answer"] == "no"
    assert rows[2]["answer"] == "uncertain"
    assert rows[3]["type"] == "unsupported"


@pytest.mark.parametrize("name", ["report_2023_0417.txt", "notes/r1", "."])
def test_cxr_ask_a_report_path_that_is_not_a_file_is_an_error_not_a_no(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["ask", "--report", name, "--question", "Is there a pneumothorax?"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"--report {name}:" in captured.err


def test_cxr_ask_reads_a_report_file_and_takes_a_one_word_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "r.txt").write_text("Small left pleural effusion.")
    ask = ["--question", "Is there an effusion?", "-q"]
    assert main(["ask", "--report", str(tmp_path / "r.txt"), *ask]) == 0
    assert json.loads(capsys.readouterr().out)["answer"] == "yes"
    assert main(["ask", "--report", "Normal.", *ask]) == 0
    assert json.loads(capsys.readouterr().out)["answer"] == "no"


def test_cxr_ask_an_empty_or_too_long_report_fails_its_row(tmp_path: Path) -> None:
    src = tmp_path / "q.csv"
    with src.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "report", "question"])
        w.writerow(["blank", "   ", "Is there an effusion?"])
        w.writerow(["long", "No effusion. " * 10_000, "Is there an effusion?"])
        w.writerow(["good", "Small effusion.", "Is there an effusion?"])
    out = tmp_path / "answers.jsonl"
    assert main(["ask", "--questions", str(src), "-o", str(out), "-q"]) == 1
    rows = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows["blank"]["message"] == "the report is empty"
    assert rows["long"]["message"].startswith("the report cannot be read: ReportTooLongError")
    assert rows["blank"]["answer"] == rows["long"]["answer"] == "unknown"
    assert rows["good"]["answer"] == "yes" and "message" not in rows["good"]


def test_cxr_ask_refuses_an_unknown_view(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["ask", "--report", REPORT, "--question", "Is there a mass?", "--view", "XX"])
    assert stop.value.code == 2 and "unknown view 'XX'" in capsys.readouterr().err


def test_cxr_ask_image_needs_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "--image", str(tmp_path / "x.png"), "--question", "Is there a mass?"]) == 2
    assert "need a model" in capsys.readouterr().err


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


def test_batch_report_summary_carries_the_findings_sides() -> None:
    from batch.processor import _report_summary
    from labeler.schema import ReportLabels

    labels = ReportLabels(
        id="r", labels={"Mass": "positive"}, no_finding=False,
        findings={"Mass": {"status": "positive", "laterality": "left"}},
    )  # fmt: skip
    summary = _report_summary(labels, "csv", "v")
    assert summary["findings"]["Mass"]["laterality"] == "left"


# --- the service ---------------------------------------------------------------------------


def test_post_studies_ask_json(make_client: Callable[..., TestClient]) -> None:
    client = make_client(model=False)
    r = client.post(
        "/v1/studies/ask",
        json={"id": "s1", "report": REPORT, "questions": ["Is there an effusion?", "Why?"]},
    )
    assert r.status_code == 200, r.text
    answers = r.json()["answers"]
    assert [a["id"] for a in answers] == ["s1#1", "s1#2"]
    assert answers[0]["answer"] == "yes" and answers[1]["type"] == "unsupported"


def test_post_studies_ask_with_image(client: TestClient) -> None:
    from PIL import Image

    rng = np.random.default_rng(0)
    from models.phantoms import make_phantom

    buf = io.BytesIO()
    Image.fromarray(make_phantom(rng, size=128, labels=["Effusion"]).image).save(buf, "PNG")
    r = client.post(
        "/v1/studies/ask",
        data={
            "question": ["Is there an effusion?", "Which side is the effusion on?"],
            "report": REPORT,
        },
        files={"file": ("p.png", buf.getvalue(), "image/png")},
    )
    assert r.status_code == 200, r.text
    first = r.json()["answers"][0]
    assert first["source"] == "both"
    assert first["evidence"]["image"]["orientation"]["basis"] == "convention"


def test_post_studies_ask_errors(make_client: Callable[..., TestClient]) -> None:
    client = make_client(model=False)
    assert client.post("/v1/studies/ask", json={"report": REPORT}).status_code == 422
    assert (
        client.post(
            "/v1/studies/ask", content=b"x", headers={"content-type": "text/plain"}
        ).status_code
        == 415
    )
    r = client.post(
        "/v1/studies/ask",
        data={"question": "Is there an effusion?"},
        files={"file": ("p.png", b"\x89PNG....", "image/png")},
    )
    assert r.status_code == 503


def test_post_studies_ask_refuses_sloppy_and_hostile_bodies(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(model=False)
    ask = "Is there an effusion?"

    def status(**kwargs: object) -> tuple[int, str]:
        r = client.post("/v1/studies/ask", **kwargs)  # type: ignore[arg-type]
        return r.status_code, r.json()["error"]

    json_headers = {"content-type": "application/json"}
    # malformed JSON and JSON nested past the parser's recursion limit: 400, never a 500
    assert status(content=b'{"question": "abc', headers=json_headers) == (400, "MalformedBody")
    assert status(content=b"[" * 5000 + b"]" * 5000, headers=json_headers) == (
        400,
        "MalformedBody",
    )
    assert status(content=b'{"question": "\xff"}', headers=json_headers)[0] == 400
    # a misspelt key, an over-long question in the list, a control character in the id
    assert status(json={"question": ask, "reprot": REPORT}) == (422, "BadQuestionRequest")
    assert status(json={"questions": ["x" * 501]}) == (422, "BadQuestionRequest")
    assert status(json={"question": ask, "id": "a\nb"}) == (422, "BadQuestionRequest")
    # the report sent as a file would have been ignored
    assert status(
        data={"question": ask}, files={"report": ("r.txt", REPORT.encode(), "text/plain")}
    ) == (422, "BadQuestionRequest")
    # an empty image, as /v1/images/predict answers it
    assert status(data={"question": ask}, files={"file": ("p.png", b"", "image/png")}) == (
        422,
        "EmptyUpload",
    )


def test_post_studies_ask_answer_size_is_bounded_for_a_repetitive_report(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(model=False)
    report = "FINDINGS: " + "Small effusion. " * 2000
    r = client.post(
        "/v1/studies/ask", json={"report": report, "questions": ["Is there an effusion?"] * 100}
    )
    assert r.status_code == 200, r.text
    evidence = r.json()["answers"][0]["evidence"]["report"]
    assert sum(ev["kind"] == "mention" for ev in evidence) == 10
    assert evidence[-1]["kind"] == "omitted" and evidence[-1]["count"] == 90
    # 100 answers of ten mentions each: about 200 KB, not every mention a hundred times
    assert len(r.content) < 400_000


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
