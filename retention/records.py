"""Every row of an execution (docs/design.md §4 "Retention": its row, events, step runs,
actions, model calls, waits, approval requests, decisions, audit entries, artifacts
and their versions' metadata — and whatever a later model hangs off them), found
from the models' foreign keys rather than a list kept by hand: a table another app
adds with a foreign key to an execution (or to one of its rows) is archived and
purged with it, and the purge can't leave a row pointing at a deleted one.

``Graph.rows(ids)`` reads them as ``{"execution": "RUN_0042", "model":
"approvals.decision", "pk": 7, "row": {column: value}}``, one line of the archive
each, in a fixed order: by execution, then model, then pk.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, reduce
from operator import or_

import pgtrigger
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connections, transaction
from django.db.models import F, Field, ForeignObject, ForeignObjectRel, Lookup, Model, Q
from django.db.models.functions import Coalesce

from executions.models import Execution, ref_for


@ForeignObject.register_lookup  # (a foreign key takes only its own class's lookups)
@Field.register_lookup
class AnyOf(Lookup):
    """``field__any_of=[…]``: ``field = ANY(%s)`` with the list as one array parameter on
    PostgreSQL (a batch's 500 ids as 500 ``IN`` placeholders cost more to send than the
    rows they find); ``IN (…)`` elsewhere."""

    lookup_name = "any_of"
    prepare_rhs = False

    def get_db_prep_lookup(self, value, connection):
        return ("%s", [list(value)])

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        values = list(self.rhs)
        if connection.vendor == "postgresql":
            return f"{lhs} = ANY(%s)", [*lhs_params, values]
        if not values:
            return "1 = 0", list(lhs_params)
        return f"{lhs} IN ({', '.join(['%s'] * len(values))})", [*lhs_params, *values]


@dataclass(frozen=True)
class Table:
    model: type[Model]
    paths: tuple[str, ...]  # every lookup from a row to an execution's pk, shortest first

    @property
    def label(self) -> str:
        return self.model._meta.label_lower

    def owner_expression(self):
        """The row's execution: the first of its paths that is set (an audit entry may name only its request)."""
        if len(self.paths) == 1:
            return F(self.paths[0])
        return Coalesce(*(F(path) for path in self.paths))

    def of(self, ids: list[int]) -> Q:
        return reduce(or_, (Q(**{f"{path}__any_of": ids}) for path in self.paths))


@cache
def graph() -> tuple[Table, ...]:
    """The tables reachable from Execution by reverse foreign keys, breadth first."""
    found: dict[type[Model], list[str]] = {Execution: ["pk"]}
    order: list[type[Model]] = [Execution]
    queue: list[tuple[type[Model], str]] = [(Execution, "pk")]
    while queue:
        model, path = queue.pop(0)
        # Hidden ones too (related_name="+": a schedule's firing, a notification's occasion).
        for rel in model._meta.get_fields(include_hidden=True):
            if not isinstance(rel, ForeignObjectRel) or rel.many_to_many or not rel.field.concrete:
                continue
            child = rel.related_model
            if child._meta.proxy or not child._meta.managed or child is Execution:
                continue
            child_path = rel.field.name + ("" if path == "pk" else f"__{path}")
            if child_path.count("__") > 4:
                continue
            if child not in found:
                found[child] = [child_path]
                order.append(child)
                queue.append((child, child_path))
            elif child_path not in found[child] and child is not model:
                found[child].append(child_path)
    return tuple(Table(m, tuple(found[m])) for m in order)


def encode(value) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def rows(ids: list[int], *, using: str = "default") -> Iterator[dict]:
    """Every row of the executions ``ids`` (see the module's docstring)."""
    lines = []
    for table in graph():
        queryset = table.model._default_manager.using(using).filter(table.of(ids))
        columns = [f.attname for f in table.model._meta.concrete_fields]
        for values in queryset.annotate(_owner=table.owner_expression()).values(*columns, "_owner").order_by("pk"):
            owner = values.pop("_owner")
            lines.append((owner, table.label, values[table.model._meta.pk.attname], values))
    order = {table.label: n for n, table in enumerate(graph())}
    lines.sort(key=lambda line: (line[0], order[line[1]], line[2]))
    for owner, label, pk, values in lines:
        yield {"execution": ref_for(owner), "model": label, "pk": pk, "row": values}


def keys(ids: list[int], *, using: str) -> dict[int, set[tuple[str, int]]]:
    """Per execution, the (model, pk) of each of its rows now: what the purge compares with the archive."""
    found: dict[int, set[tuple[str, int]]] = {pk: set() for pk in ids}
    for table in graph():
        queryset = table.model._default_manager.using(using).filter(table.of(ids))
        for pk, owner in queryset.annotate(_owner=table.owner_expression()).values_list("pk", "_owner"):
            found.setdefault(owner, set()).add((table.label, pk))
    return found


def delete(keys_by_table: dict[str, list[int]], *, using: str) -> int:
    """Delete exactly these rows (inside the caller's transaction: the foreign keys are
    checked at commit, so the order doesn't matter and a row still pointing at one of
    them fails the whole batch), the append-only tables' triggers set aside for these
    statements only (the privilege to delete is the owner's alone). Returns the number
    of rows deleted."""
    by_label = {table.label: table for table in graph()}
    connection = connections[using]
    deleted = 0
    # A savepoint inside the ignore: a refused DELETE rolls back to it, so the ignore's own
    # clean-up runs on a usable transaction and the refusal is what the caller sees.
    with pgtrigger.ignore(databases=[using]), transaction.atomic(using=using), connection.cursor() as cursor:
        for label, pks in keys_by_table.items():
            model = by_label[label].model
            table = connection.ops.quote_name(model._meta.db_table)
            column = connection.ops.quote_name(model._meta.pk.column)
            if connection.vendor == "postgresql":  # one array parameter, however many rows
                cursor.execute(f"DELETE FROM {table} WHERE {column} = ANY(%s)", [pks])  # names from _meta
                deleted += cursor.rowcount
                continue
            for start in range(0, len(pks), 500):
                chunk = pks[start : start + 500]
                marks = ", ".join(["%s"] * len(chunk))
                cursor.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", chunk)  # names from _meta
                deleted += cursor.rowcount
    return deleted
