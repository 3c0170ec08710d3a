"""Alembic migrations for the service database (run by `cxr db upgrade` and at start-up)."""
