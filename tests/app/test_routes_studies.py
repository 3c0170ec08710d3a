"""POST /v1/studies/ask (app/routes/studies.py): JSON and multipart questions, with and
without an image, and the bodies it refuses."""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
from fastapi.testclient import TestClient

REPORT = (
    "FINDINGS: Small left pleural effusion. No pneumothorax. A 2 cm mass in the right upper lobe."
)


def test_post_studies_ask_json(make_client: Callable[..., TestClient]) -> None:
    client = make_client(model=False)
    whole = client.post(
        "/v1/studies/ask", json={"question": "Is this chest X-ray normal?", "report": REPORT}
    ).json()["answers"][0]
    assert whole["type"] == "study" and whole["answer"] in ("yes", "no")
    assert whole["demo_model"] is False  # no image, no model
    r = client.post(
        "/v1/studies/ask",
        json={"id": "s1", "report": REPORT, "questions": ["Is there an effusion?", "Why?"]},
    )
    assert r.status_code == 200, r.text
    answers = r.json()["answers"]
    assert [a["id"] for a in answers] == ["s1#1", "s1#2"]
    assert answers[0]["answer"] == "yes" and answers[1]["type"] == "unsupported"


def test_post_studies_ask_it_is_the_finding_of_the_question_before(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(model=False)
    questions = ["How big is the mass?", "Where is it?", "Is it on the left?"]
    r = client.post("/v1/studies/ask", json={"report": REPORT, "questions": questions})
    assert r.status_code == 200, r.text
    answers = r.json()["answers"]
    assert [a["label"] for a in answers] == ["Mass", "Mass", "Mass"]
    assert answers[1]["answer"] == ["right", "right upper lobe"]
    assert answers[2]["answer"] == "no"


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
    # the test model is a demo model: every answer that read the image says so
    assert all(a["demo_model"] for a in r.json()["answers"])
    assert r.json()["model"]["demo"] is True


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
