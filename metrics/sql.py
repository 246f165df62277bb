"""What the measures need from SQL, on PostgreSQL and SQLite alike: ``Percentile``,
``Seconds`` (a duration), ``Bucket`` (an interval's start), and ``plain_plans`` (reads
without PostgreSQL's JIT compilation).

``Percentile(expression, fraction)``: a continuous percentile computed by the database.

PostgreSQL has it built in (``percentile_cont(f) WITHIN GROUP (ORDER BY x)``, for numbers
and intervals). SQLite, the embedded default, has none: ``install`` registers an
aggregate of the same meaning on every SQLite connection, so the same query runs on
both and only one row per group leaves the database.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from django.db.backends.signals import connection_created
from django.db.models import Aggregate, FloatField, Func, IntegerField

SQLITE_FUNCTION = "keel_percentile"


class Percentile(Aggregate):
    function = "PERCENTILE_CONT"
    name = "Percentile"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    allow_distinct = False

    def __init__(self, expression, fraction: float, **extra) -> None:
        if not 0 <= float(fraction) <= 1:
            raise ValueError("a percentile's fraction is between 0 and 1")
        extra.setdefault("output_field", FloatField())
        super().__init__(expression, fraction=repr(float(fraction)), **extra)

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(
            compiler, connection, function=SQLITE_FUNCTION, template="%(function)s(%(expressions)s, %(fraction)s)"
        )


class _Continuous:
    """The SQLite aggregate: the same linear interpolation as PostgreSQL's percentile_cont."""

    def __init__(self) -> None:
        self.values: list[float] = []
        self.fraction = 0.5

    def step(self, value, fraction) -> None:
        if value is not None:
            self.values.append(value)
        self.fraction = fraction

    def finalize(self):
        return interpolate(sorted(self.values), self.fraction)


def interpolate(ordered: list[float], fraction: float) -> float | None:
    """percentile_cont over already sorted values; None for none."""
    if not ordered:
        return None
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _register(sender, connection, **kwargs) -> None:
    if connection.vendor == "sqlite":
        connection.connection.create_aggregate(SQLITE_FUNCTION, 2, _Continuous)


def install() -> None:
    connection_created.connect(_register, dispatch_uid="metrics.sql")


class Seconds(Func):
    """``end - start`` in seconds, as a float, on PostgreSQL and SQLite alike."""

    arity = 2
    output_field = FloatField()

    def __init__(self, end, start, **extra) -> None:
        super().__init__(end, start, **extra)

    def as_sql(self, compiler, connection, **extra):
        end, end_params = compiler.compile(self.source_expressions[0])
        start, start_params = compiler.compile(self.source_expressions[1])
        return f"EXTRACT(EPOCH FROM ({end} - {start}))::double precision", [*end_params, *start_params]

    def as_sqlite(self, compiler, connection, **extra):
        end, end_params = compiler.compile(self.source_expressions[0])
        start, start_params = compiler.compile(self.source_expressions[1])
        return f"((julianday({end}) - julianday({start})) * 86400.0)", [*end_params, *start_params]


class Bucket(Func):
    """The start of the ``seconds``-long interval ``moment`` falls in, as Unix seconds."""

    arity = 1
    output_field = IntegerField()

    def __init__(self, moment, seconds: int, **extra) -> None:
        self.seconds = int(seconds)
        super().__init__(moment, **extra)

    def as_sql(self, compiler, connection, **extra):
        moment, params = compiler.compile(self.source_expressions[0])
        n = self.seconds
        return f"(FLOOR(EXTRACT(EPOCH FROM {moment}) / {n}) * {n})::bigint", params

    def as_sqlite(self, compiler, connection, **extra):
        moment, params = compiler.compile(self.source_expressions[0])
        n = self.seconds
        return f"((CAST(strftime('%%s', {moment}) AS INTEGER) / {n}) * {n})", params


@contextmanager
def plain_plans() -> Iterator[None]:
    """A read-only transaction whose queries PostgreSQL plans without JIT compilation.

    The measures' queries are short index walks with per-row subplans; the planner's
    estimates make it JIT-compile them, which costs more (≈0.25 s a query) than running
    them. Elsewhere: just a transaction."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL jit = off")
        yield
