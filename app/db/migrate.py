"""Run the Alembic migrations in `migrations/` without an alembic.ini at the repo root."""

from __future__ import annotations

from importlib import resources

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

__all__ = ["alembic_config", "current_revision", "downgrade", "upgrade"]


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at the packaged `migrations` folder and at `url`."""
    config = Config()
    config.set_main_option("script_location", str(resources.files("migrations")))
    # ConfigParser interpolation would choke on '%' in URL-encoded passwords.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head", *, engine: Engine | None = None) -> None:
    """Migrate the database at `url` up to `revision` (default: latest).

    Args:
        url: SQLAlchemy URL of the database.
        revision: target Alembic revision.
        engine: reuse this engine's connection instead of opening a new one.
    """
    config = alembic_config(url)
    if engine is not None:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    else:
        command.upgrade(config, revision)


def downgrade(url: str, revision: str = "base") -> None:
    """Migrate the database at `url` down to `revision` (default: empty)."""
    command.downgrade(alembic_config(url), revision)


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None when it was never migrated."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()
