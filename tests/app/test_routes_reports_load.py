"""POST /v1/reports/label under load: probes stay live, the queue is bounded (issue 18 item 1).

Labeling is serialized. When the route ran on the shared threadpool, one slow report and
45 ordinary requests held all 40 of its threads, and /readyz (also on that pool) missed
its 4 s health check for two minutes. The labeler is slowed here on purpose (4 s for a
report that says "slow", 0.05 s for the others) so that the queue forms on any machine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

import labeler.pipeline

_SLOW_S = 4.0
_CALL_S = 0.05


@pytest.fixture
def slow_labeler(monkeypatch: pytest.MonkeyPatch) -> None:
    original = labeler.pipeline.label_report

    def slow(text: str, *args: Any, **kwargs: Any) -> Any:
        time.sleep(_SLOW_S if "slow" in text else _CALL_S)
        return original(text, *args, **kwargs)

    monkeypatch.setattr(labeler.pipeline, "label_report", slow)


def _flood(client: TestClient, n: int) -> tuple[list[threading.Thread], list[int]]:
    statuses: list[int] = []

    def post(i: int) -> None:
        text = "A slow effusion." if i == 0 else f"Effusion {i}."
        response = client.post("/v1/reports/label", json={"text": text})
        if response.status_code == 503:
            assert response.headers["retry-after"] == "1"
            assert response.json()["error"] == "LabelerBusy"
        statuses.append(response.status_code)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(n)]
    threads[0].start()
    time.sleep(0.2)  # the slow report first: it holds the labeler
    for t in threads[1:]:
        t.start()
    return threads, statuses


@pytest.fixture
def flood() -> Iterator[Callable[[TestClient, int], list[int]]]:
    started: list[threading.Thread] = []

    def run(client: TestClient, n: int) -> list[int]:
        threads, statuses = _flood(client, n)
        started.extend(threads)
        return statuses

    yield run
    for t in started:
        t.join(timeout=60)


@pytest.mark.issue(18)
def test_probes_answer_while_label_requests_queue(
    make_client: Callable[..., TestClient],
    slow_labeler: None,
    flood: Callable[[TestClient, int], list[int]],
) -> None:
    client = make_client(model=False)
    statuses = flood(client, 45)
    time.sleep(0.5)
    for path in ("/readyz", "/healthz"):
        start = time.monotonic()
        response = client.get(path)
        assert response.status_code == 200
        assert time.monotonic() - start < 2.0, path
    assert len(statuses) < 45  # the queue was still there while the probes answered


@pytest.mark.issue(18)
def test_label_requests_past_the_waiting_bound_answer_503(
    make_client: Callable[..., TestClient],
    slow_labeler: None,
    flood: Callable[[TestClient, int], list[int]],
) -> None:
    client = make_client(model=False, max_waiting_label_requests=3)
    statuses = flood(client, 12)
    deadline = time.monotonic() + 60
    while len(statuses) < 12 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(set(statuses)) == [200, 503]
    assert statuses.count(200) >= 3
    busy = client.post("/v1/reports/label", json={"text": "Effusion."})
    assert busy.status_code == 200  # the queue drained: served again


def test_report_labeler_is_the_library_labeler_built_once_per_config() -> None:
    import asyncio

    from app.report_labeler import ReportLabeler, load_report_labeler
    from batch.labeling import PipelineLabeler
    from labeler.config import LabelerConfig

    service = load_report_labeler()
    assert isinstance(service, ReportLabeler) and isinstance(service, PipelineLabeler)
    assert load_report_labeler(LabelerConfig()) is service
    items = [("a", "Small left effusion."), ("b", "")]
    by_loop = asyncio.run(service.label_many_async(items))
    assert [r.to_dict() for r in by_loop] == [r.to_dict() for r in service.label_many(items)]
    assert by_loop[1].error is not None
