"""Connecting to the test database as one of keel's PostgreSQL roles."""

from __future__ import annotations

from django.db import connection


def dsn(user: str) -> str:
    db = connection.settings_dict
    return f"postgresql://{user}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
