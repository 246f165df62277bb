"""What the measures need from SQL, on PostgreSQL and SQLite alike: ``Seconds`` (a
duration) and ``Bucket`` (an interval's start). Reads without PostgreSQL's JIT
compilation: ``executions.plans.plain_plans``."""

from __future__ import annotations

from django.db.models import FloatField, Func, IntegerField


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
