"""Database models, engine/session factory and migrations runner."""
