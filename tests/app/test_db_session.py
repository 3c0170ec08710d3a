"""SQLite runs in WAL mode with a busy timeout, so a writer never blocks readers and a
short write lock is waited out, not failed (issue 7 item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from app.db.session import SQLITE_BUSY_TIMEOUT_MS, build_engine


@pytest.mark.issue(7)
def test_sqlite_engine_uses_wal_and_a_busy_timeout(tmp_path: Path) -> None:
    engine = build_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
            assert conn.execute(text("PRAGMA busy_timeout")).scalar() == SQLITE_BUSY_TIMEOUT_MS
            assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
    finally:
        engine.dispose()


@pytest.mark.issue(7)
def test_sqlite_reader_is_not_blocked_by_an_open_write_transaction(tmp_path: Path) -> None:
    engine = build_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE t (x INTEGER)"))
            conn.execute(text("INSERT INTO t VALUES (1)"))
        with engine.connect() as writer, engine.connect() as reader:
            writer.execute(text("BEGIN IMMEDIATE"))
            writer.execute(text("INSERT INTO t VALUES (2)"))
            # Under the default rollback journal this read would wait for the writer.
            assert reader.execute(text("SELECT count(*) FROM t")).scalar() == 1
            writer.rollback()
    finally:
        engine.dispose()
