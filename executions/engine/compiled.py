"""The hot path's SQL: compiled once, and on PostgreSQL prepared — the claim's read of one
execution and a gate's read of its outcome (``CompiledRead``), and the cursor the fenced
writer sends its statements on (``cursor``).

Django builds and compiles a queryset every time it runs (cloning it at each
``filter``/``annotate``, resolving every expression, writing the SQL): for the claim's
read that was most of the claim's Python. ``CompiledRead`` builds the queryset once per
database, with a stand-in for the one value that changes (the row's id), keeps the SQL,
the parameters and the converters Django chose, and answers each read with one
execution of that SQL and the instance Django would have built (``Model.from_db``, the
annotations set, each value through the same converters). Any vendor: the SQL and the
converters are Django's own for it.

PostgreSQL plans every statement it is sent as text; a step's fenced statement took
longer to plan (≈ 0.09 ms) than to run. ``cursor()`` sends the hot path's statements with
their parameters apart (server-side binding), so psycopg prepares each one the
connection has run ``prepare_threshold`` times (5) and PostgreSQL plans it once per
connection. Through PgBouncer in transaction mode ``prepare_threshold`` is None
(settings, ``DATABASE_POOL_MODE``): nothing is prepared there, the parameters are still
bound by the server. Statements sent this way type their parameters where PostgreSQL
can't infer them (an INSERT's ``SELECT %s``: ``typed_placeholder``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import NotSupportedError, connection
from django.db.models import Field, Model, QuerySet
from django.db.models.query import ModelIterable

from access import viewer

log = logging.getLogger(__name__)

# Stand in for the arguments while the queryset compiles; found again among its parameters.
# An integer within every integer column's range (Django compiles an out-of-range lookup
# to nothing), high enough that no other parameter is it.
_INT_STAND_IN = 2_147_483_000
_STR_STAND_IN = "\x01keel stand-in {}\x01"


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: list[Any]
    at: list[int]  # where each argument goes among the parameters
    model: type[Model] | None  # None: a values_list read, answered as a tuple
    init_list: list[str]  # the model's attnames, in the select's order
    fields_end: int  # the model's columns are row[:fields_end]
    annotations: dict[str, int]  # name → position in the row
    converters: dict[int, tuple[list[Callable], Any]]  # position → (converters, expression)


class CompiledRead:
    """``build(*args)`` → a queryset of at most one row, compiled on first use per database:
    the model's own columns then annotations (no select_related), answered as the model
    instance the queryset would give; or a ``values_list`` (joins allowed), answered as
    its tuple. ``args`` names each argument's type (``int`` or ``str``)."""

    def __init__(self, build: Callable[..., QuerySet], args: tuple[type, ...] = (int,)) -> None:
        self._build = build
        self._args = args
        self._compiled: dict[tuple[str, str], _Compiled] = {}

    def get(self, *args: Any) -> Any:
        """The row ``build(*args)`` selects, as the queryset would give it; None if none."""
        compiled = self._compiled.get((connection.alias, connection.vendor)) or self._compile()
        params = list(compiled.params)
        for at, value in zip(compiled.at, args, strict=True):
            params[at] = value
        row: tuple[Any, ...] | list[Any] | None = fetch_one(compiled.sql, params)
        if row is None:
            return None
        if compiled.converters:
            row = list(row)
            for position, (converters, expression) in compiled.converters.items():
                for convert in converters:
                    row[position] = convert(row[position], expression, connection)
        if compiled.model is None:
            return tuple(row)
        instance = compiled.model.from_db(connection.alias, compiled.init_list, row[: compiled.fields_end])
        for name, position in compiled.annotations.items():
            setattr(instance, name, row[position])
        return instance

    def _compile(self) -> _Compiled:
        stand_ins = [_INT_STAND_IN + n if kind is int else _STR_STAND_IN.format(n) for n, kind in enumerate(self._args)]
        with viewer.looking_as(None):  # the runtime's read, whoever is looking when it is first compiled
            queryset = self._build(*stand_ins)
        compiler = queryset.query.get_compiler(using=connection.alias)
        sql, params = compiler.as_sql()  # fills compiler.select, klass_info, annotation_col_map
        params = list(params)
        if any(params.count(stand_in) != 1 for stand_in in stand_ins):
            raise ValueError("a compiled read takes each of its arguments exactly once among its parameters")
        columns = [column[0] for column in compiler.select]
        model, init_list, end = None, [], 0
        if queryset._iterable_class is ModelIterable:  # model instances (not a values_list)
            select_fields = compiler.klass_info["select_fields"]
            if select_fields[0] != 0 or compiler.klass_info.get("related_klass_infos"):
                raise ValueError("a compiled read selects the model's own columns first, and no related rows")
            end = select_fields[-1] + 1
            model = compiler.klass_info["model"]
            init_list = [column.target.attname for column in columns[:end]]
        compiled = _Compiled(
            sql=sql,
            params=params,
            at=[params.index(stand_in) for stand_in in stand_ins],
            model=model,
            init_list=init_list,
            fields_end=end,
            annotations=dict(compiler.annotation_col_map or {}) if model is not None else {},
            converters=compiler.get_converters(columns),
        )
        self._compiled[(connection.alias, connection.vendor)] = compiled
        return compiled


def cursor() -> Any:
    """A cursor of this thread's connection for the hot path (the module's docstring):
    Django's own, but on PostgreSQL binding its parameters on the server so they can be
    prepared; checked, wrapped and instrumented as ``connection.cursor()``'s are."""
    if connection.vendor != "postgresql":
        return connection.cursor()
    from django.db.backends.postgresql.base import ServerBindingCursor

    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        return connection._prepare_cursor(ServerBindingCursor(connection.connection))


def fetch_one(sql: str, params: list[Any]) -> tuple | None:
    """Run one hot-path statement on ``cursor()`` and fetch its first row (None if none).

    A statement prepared before a migration changed the columns it returns fails with
    "cached plan must not change result type" (a worker that kept running across a deploy):
    outside a transaction the connection lets go of its prepared statements and the
    statement is sent once more; inside one, the caller's rollback lets go of them all
    (psycopg forgets its prepared statements at a ROLLBACK)."""
    try:
        with cursor() as cursor_:
            cursor_.execute(sql, params)
            return cursor_.fetchone()
    except NotSupportedError as exc:
        if connection.in_atomic_block or "cached plan must not change result type" not in str(exc):
            raise
        log.warning("a prepared statement outlived a change of its table; preparing again: %s", exc)
    with connection.cursor() as cursor_:
        cursor_.execute("DEALLOCATE ALL")  # psycopg sees it and forgets its own names too
    with cursor() as cursor_:
        cursor_.execute(sql, params)
        return cursor_.fetchone()


def typed_placeholder(field: Field) -> str:
    """``%s`` with its column's type on PostgreSQL, where a parameter in an INSERT's SELECT
    list (or a NULL) has no type of its own; a plain ``%s`` elsewhere. The type without its
    modifiers (``varchar``, not ``varchar(200)``): an explicit cast to a length truncates
    silently, where the INSERT's own assignment refuses a value too long, as the ORM's does."""
    if connection.vendor != "postgresql":
        return "%s"
    return f"%s::{_MODIFIERS.sub('', field.db_type(connection))}"


_MODIFIERS = re.compile(r"\(.*?\)")
