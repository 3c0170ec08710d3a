"""The service's database sink when the engine begins the next chunk before it records this
one: each write completes its own chunk and clears only that chunk's in-flight marks."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from app import crud
from app.jobs import DatabaseSink
from batch.interfaces import Outcome, SourceItem

pytestmark = pytest.mark.issue(19)


def test_database_sink_writes_its_oldest_begun_chunk(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client(run_batch_jobs=False)
    sessions = client.app.state.cxr.sessions  # type: ignore[attr-defined]
    items = [SourceItem(f"IM{i}", "image") for i in range(5)]
    with sessions() as session:
        job = crud.create_batch_job(session, source_kind="folder", source="x", reports_path=None)
        crud.add_batch_items(session, job.id, items)
    sink = DatabaseSink(sessions, job.id)
    sink.write([Outcome("IM4", "failed", {"kind": "image"}, "given up")])  # none begun
    sink.begin(items[:2])
    sink.begin(items[2:4])  # the next chunk, begun before the first is recorded
    with sessions() as session:
        assert crud.in_flight_attempts(session, job.id) == {f"IM{i}": 1 for i in range(4)}
    # The first chunk was cancelled after IM0: IM1 was not at fault, IM2 and IM3 still are.
    sink.write([Outcome("IM0", "done", {"kind": "image"})])
    with sessions() as session:
        assert crud.in_flight_attempts(session, job.id) == {"IM2": 1, "IM3": 1}
    sink.write([Outcome(k, "done", {"kind": "image"}) for k in ("IM2", "IM3")])
    with sessions() as session:
        assert crud.in_flight_attempts(session, job.id) == {}
        assert crud.batch_counts(session, job.id) == {
            "pending": 1, "done": 3, "skipped": 0, "failed": 1,
        }  # fmt: skip
