"""The fenced writer: a worker's fenced write, chosen once per database vendor; and a
new execution written with its first event (``create``), the same way.

A step's end needs a few writes: the fenced UPDATE of the execution (its state, the
next step — or, for the last step, the ``complete`` transition django-fsm has just
allowed in memory) and the rows that go with it (the step run; the transition's
event). ``write(values, where, inserts)`` makes them, or nothing: the UPDATE is the
fence (our lease token and owner, the status it was read with, the step), and the
rows are inserted only when it held. Every fenced write of a transition, a claim and
a checkpoint goes through it (``lifecycle.apply(where=…)``, ``leases.acquire``,
``checkpoint_step``); which way it writes is decided here, once per vendor
(``WRITERS``), and nowhere else.

On PostgreSQL it is one statement, one round trip and one commit (the ORM would send
BEGIN, each statement, COMMIT — a round trip apiece — and compile each every time):

    WITH fenced AS (
        UPDATE executions_execution SET … WHERE id = … AND lease_token = … AND … RETURNING id
    ), i1 AS (
        INSERT INTO executions_steprun (…) SELECT … FROM fenced
    )
    INSERT INTO executions_executionevent (…) SELECT … FROM fenced RETURNING id

Every INSERT selects ``FROM fenced``, so the rows exist exactly when the fence held,
and the statement commits on its own (autocommit; inside a caller's transaction it
joins it). Values are prepared by the models' own fields (JSON with Django's encoder,
aware datetimes, ``auto_now_add``), so the rows are the ones the ORM would write.
SQLite has no UPDATE inside a WITH: there the ORM makes the same writes in one
transaction (a savepoint inside the caller's). Writes that need more (artifacts,
effects) use the ORM in the runner's own transaction on every vendor.

``create(row, dependents)`` is the same idea for a new row: the execution and its
``execution.created`` event in one statement on PostgreSQL (the event selects the new
id ``FROM`` the execution's INSERT), so a start is one round trip, committing on its own
outside a transaction; elsewhere the ORM saves both in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Field, Model
from django.db.models.sql import InsertQuery, UpdateQuery

from ..models import Execution, StepRun
from . import compiled

# A scalar SQL expression read with a write, and its parameters (``write_probing``).
Probe = tuple[str, list[Any]]
Writer = Callable[[dict[str, Any], dict[str, Any], list[Model], "Probe | None"], "tuple[int, Any] | None"]


def write(values: dict[str, Any], where: dict[str, Any], inserts: list[Model]) -> int | None:
    """UPDATE the execution's ``values`` (plain values, or expressions the database
    computes, such as ``now() + lease``) where ``where`` holds (equalities, None for IS
    NULL; ``pk`` for the id) and INSERT the unsaved ``inserts`` with it. The id of the
    last insert (or of the execution, with none), or None if the fence refused: then
    nothing was written."""
    written = WRITERS.get(connection.vendor, _orm_write)(values, where, inserts, None)
    return written[0] if written else None


def write_probing(
    values: dict[str, Any], where: dict[str, Any], inserts: list[Model], probe: Probe
) -> tuple[int, Any] | None:
    """``write``, and the value of the scalar SQL expression ``probe`` read with it (on
    PostgreSQL in the same statement, so it costs no round trip): (id, value), or None if
    the fence refused."""
    return WRITERS.get(connection.vendor, _orm_write)(values, where, inserts, probe)


def _orm_write(
    values: dict[str, Any], where: dict[str, Any], inserts: list[Model], probe: Probe | None
) -> tuple[int, Any] | None:
    """The same writes through the ORM, in one transaction (the probe read after them)."""
    with transaction.atomic():
        if not Execution.objects.filter(**where).update(**values):
            return None
        for row in inserts:
            row.save()
        probed = None
        if probe is not None:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT {probe[0]}", probe[1])
                probed = cursor.fetchone()[0]
    return (inserts[-1].pk if inserts else where["pk"]), probed


def _one_statement(
    values: dict[str, Any], where: dict[str, Any], inserts: list[Model], probe: Probe | None
) -> tuple[int, Any] | None:
    """PostgreSQL: the UPDATE and the INSERTs as one statement (the module's docstring),
    the probe returned with the last row. The statement's text is built once per shape
    (``_plan``); each call only prepares its values."""
    key = (
        tuple((name, value if hasattr(value, "resolve_expression") else None) for name, value in values.items()),
        tuple((name, value is None) for name, value in where.items()),
        tuple(type(instance) for instance in inserts),
        probe[0] if probe is not None else None,
    )
    plan = _PLANS.get(key) or _plan(key)
    params: list[Any] = []
    for (field, constant), value in zip(plan.assigned, values.values(), strict=True):
        if constant is not None:
            params += constant
        else:
            params.append(field.get_db_prep_save(value, connection))
    for field, value in zip(plan.conditions, where.values(), strict=True):
        if field is not None:
            params.append(field.get_db_prep_value(value, connection))
    for fields, instance in zip(plan.inserted, inserts, strict=True):
        params += [f.get_db_prep_save(f.pre_save(instance, add=True), connection) for f in fields]
    if probe is not None:
        params += probe[1]
    found = compiled.fetch_one(plan.sql, params)
    if not found:
        return None
    return found[0], (found[1] if probe is not None else None)


@dataclass(frozen=True)
class _Plan:
    """One shape of fenced write: its SQL, and how each value becomes a parameter."""

    sql: str
    # Per assigned value: its field, and for an expression the database computes, its
    # parameters (the same every time: the expression is part of the shape).
    assigned: list[tuple[Field, list[Any] | None]]
    conditions: list[Field | None]  # per condition: its field, None for IS NULL (no parameter)
    inserted: list[list[Field]]  # per inserted row: the fields written (all but the id)


# The plans by shape: which columns are set (and to which expression), which conditions
# (and which are IS NULL), which models are inserted, which probe is read. A handful per
# process: the claim, each transition a worker makes, the checkpoint.
_PLANS: dict[tuple, _Plan] = {}


def _plan(key: tuple) -> _Plan:
    assigned_shape, where_shape, models, probe_sql = key
    ops = connection.ops
    query = UpdateQuery(Execution)
    compiler = query.get_compiler(connection=connection)
    assignments: list[str] = []
    assigned: list[tuple[Field, list[Any] | None]] = []
    for name, expression in assigned_shape:
        field = Execution._meta.get_field(name)
        if expression is not None:  # computed by the database: now() + a lease…
            sql, found = expression.resolve_expression(query).as_sql(compiler, connection)
            assignments.append(f"{ops.quote_name(field.column)} = {sql}")
            assigned.append((field, list(found)))
        else:
            assignments.append(f"{ops.quote_name(field.column)} = %s")
            assigned.append((field, None))
    conditions, condition_fields = [], []
    for name, is_null in where_shape:
        field = Execution._meta.pk if name == "pk" else Execution._meta.get_field(name)
        conditions.append(f"{ops.quote_name(field.column)} {'IS NULL' if is_null else '= %s'}")
        condition_fields.append(None if is_null else field)
    parts = [
        f"WITH fenced AS (UPDATE {ops.quote_name(Execution._meta.db_table)} SET {', '.join(assignments)} "
        f"WHERE {' AND '.join(conditions)} RETURNING id)"
    ]
    selects, inserted = [], []
    for model in models:
        fields = [f for f in model._meta.concrete_fields if not f.primary_key]
        columns = ", ".join(ops.quote_name(f.column) for f in fields)
        placeholders = ", ".join(compiled.typed_placeholder(f) for f in fields)
        selects.append(
            f"INSERT INTO {ops.quote_name(model._meta.db_table)} ({columns}) SELECT {placeholders} FROM fenced"
        )
        inserted.append(fields)
    returning = f"id, {probe_sql}" if probe_sql is not None else "id"
    if selects:
        for n, insert in enumerate(selects[:-1], start=1):
            parts.append(f", i{n} AS ({insert})")
        parts.append(f" {selects[-1]} RETURNING {returning}")
    else:
        parts.append(f" SELECT {returning} FROM fenced")
    if len(_PLANS) >= 512:  # shapes with expressions nobody reuses: start again rather than grow
        _PLANS.clear()
    plan = _PLANS[key] = _Plan("".join(parts), assigned, condition_fields, inserted)
    return plan


def checkpoint_step(
    *,
    execution: Execution,
    where: dict[str, Any],
    following: str,
    step_deadline: Any,
    run: StepRun,
    now: datetime,
    probe: Probe,
) -> tuple[bool, Any]:
    """Checkpoint ``execution`` to ``following`` and insert its step's ``run`` (unsaved),
    reading ``probe`` with them. (True, the probe's value) if written; (False, None) if
    the fence refused (nothing written)."""
    values = {
        "context": execution.context,
        "current_step": following,
        "failed_attempts": 0,
        "step_deadline": step_deadline,
        "updated_at": now,
    }
    written = write_probing(values, where, [run], probe)
    return (True, written[1]) if written else (False, None)


# How each database vendor takes a fenced write; any other, the ORM.
WRITERS: dict[str, Writer] = {"postgresql": _one_statement}


def create(row: Model, dependents: list[Model]) -> None:
    """INSERT the unsaved ``row`` and the unsaved ``dependents`` that point at it (their
    foreign key to ``row``'s model, left unset), together or not at all; sets every id.
    Raises IntegrityError (nothing written) for a unique key already used."""
    CREATORS.get(connection.vendor, _orm_create)(row, dependents)


def _orm_create(row: Model, dependents: list[Model]) -> None:
    with transaction.atomic():
        row.save(force_insert=True)
        for dependent in dependents:
            setattr(dependent, _pointer(type(dependent), type(row)).name, row)
            dependent.save(force_insert=True)


def _one_insert(row: Model, dependents: list[Model]) -> None:
    """PostgreSQL: ``WITH r AS (INSERT … RETURNING id), d1 AS (INSERT … SELECT r.id, … FROM r
    RETURNING id) SELECT r.id, d1.id FROM r, d1``: one statement, its text built once per
    shape."""
    values = [(f, f.pre_save(row, add=True)) for f in row._meta.concrete_fields if not f.primary_key]
    key = (
        type(row),
        tuple((f.name, v if hasattr(v, "resolve_expression") else None) for f, v in values),
        tuple(type(d) for d in dependents),
    )
    plan = _CREATES.get(key) or _create_plan(key)
    params: list[Any] = []
    for (field, constant), (_, value) in zip(plan.assigned, values, strict=True):
        if constant is not None:
            params += constant
        else:
            params.append(field.get_db_prep_save(value, connection))
    for fields, dependent in zip(plan.inserted, dependents, strict=True):
        params += [f.get_db_prep_save(f.pre_save(dependent, add=True), connection) for f in fields]
    ids = compiled.fetch_one(plan.sql, params)
    assert ids is not None, "an INSERT … RETURNING answers its row"
    row.pk = ids[0]
    row._state.adding, row._state.db = False, connection.alias
    for dependent, pk in zip(dependents, ids[1:], strict=True):
        setattr(dependent, _pointer(type(dependent), type(row)).attname, row.pk)
        dependent.pk = pk
        dependent._state.adding, dependent._state.db = False, connection.alias


@dataclass(frozen=True)
class _CreatePlan:
    sql: str
    assigned: list[tuple[Field, list[Any] | None]]  # the row's fields; an expression's parameters
    inserted: list[list[Field]]  # per dependent: the fields written from its values (not its pointer)


_CREATES: dict[tuple, _CreatePlan] = {}


def _create_plan(key: tuple) -> _CreatePlan:
    model, shape, dependent_models = key
    ops = connection.ops
    query = InsertQuery(model)
    compiler = query.get_compiler(connection=connection)
    columns, placeholders = [], []
    assigned: list[tuple[Field, list[Any] | None]] = []
    for name, expression in shape:
        field = model._meta.get_field(name)
        columns.append(ops.quote_name(field.column))
        if expression is not None:  # computed by the database: now()…
            sql, found = compiler.compile(expression.resolve_expression(query, allow_joins=False, for_save=True))
            placeholders.append(sql)
            assigned.append((field, list(found)))
        else:
            placeholders.append("%s")
            assigned.append((field, None))
    parts = [
        f"WITH r AS (INSERT INTO {ops.quote_name(model._meta.db_table)} ({', '.join(columns)}) "
        f"VALUES ({', '.join(placeholders)}) RETURNING id)"
    ]
    inserted = []
    for n, dependent in enumerate(dependent_models, start=1):
        pointer = _pointer(dependent, model)
        fields = [f for f in dependent._meta.concrete_fields if not f.primary_key and f is not pointer]
        names = ", ".join(ops.quote_name(f.column) for f in [pointer, *fields])
        selected = ", ".join(["r.id", *(compiled.typed_placeholder(f) for f in fields)])
        parts.append(
            f", d{n} AS (INSERT INTO {ops.quote_name(dependent._meta.db_table)} ({names}) "
            f"SELECT {selected} FROM r RETURNING id)"
        )
        inserted.append(fields)
    ids = ["r.id", *(f"d{n}.id" for n in range(1, len(dependent_models) + 1))]
    tables = ["r", *(f"d{n}" for n in range(1, len(dependent_models) + 1))]
    parts.append(f" SELECT {', '.join(ids)} FROM {', '.join(tables)}")
    plan = _CREATES[key] = _CreatePlan("".join(parts), assigned, inserted)
    return plan


def _pointer(dependent: type[Model], model: type[Model]) -> Field:
    """``dependent``'s foreign key to ``model`` (exactly one)."""
    (found,) = [f for f in dependent._meta.concrete_fields if f.is_relation and f.related_model is model]
    return found


CREATORS: dict[str, Callable[[Model, list[Model]], None]] = {"postgresql": _one_insert}
