"""Reads PostgreSQL should plan without JIT compilation (``plain_plans``).

The counts and measures are short index walks with per-row conditions; at a million
rows the planner's cost estimates make PostgreSQL JIT-compile them, which costs more
(≈0.3 s a query, measured) than running them. Imported by whatever runs such reads:
the stuck counts here, the measures in ``metrics``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction


@contextmanager
def plain_plans() -> Iterator[None]:
    """A transaction whose queries PostgreSQL plans without JIT compilation (``SET
    LOCAL``: nothing outlives it, as PgBouncer's transaction mode needs). Elsewhere: just
    a transaction."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL jit = off")
        yield
