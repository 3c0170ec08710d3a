"""Alembic migrations: up, down, and in step with the SQLAlchemy models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from app.db.migrate import current_revision, downgrade, upgrade
from app.db.models import Base
from app.db.session import build_engine


def test_db_migrations_upgrade_matches_models_and_downgrade_empties(database_url: str) -> None:
    engine = build_engine(database_url)
    upgrade(database_url)
    assert current_revision(engine) == "0003"
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        tables = set(inspect(conn).get_table_names())
    assert set(Base.metadata.tables) <= tables
    downgrade(database_url)
    with engine.connect() as conn:
        assert set(inspect(conn).get_table_names()) <= {"alembic_version"}
    assert current_revision(engine) is None
    upgrade(database_url)  # and back up again
    assert current_revision(engine) == "0003"
    engine.dispose()
