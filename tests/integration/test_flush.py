"""The pytest process's flush (tests/support/flushing_postgres): what pytest-django runs
after every transactional test leaves every table empty, the append-only ones included,
as Django's TRUNCATE did, and post_migrate refills what Django needs (content types,
permissions)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection, transaction

from approvals.models import AuditEntry
from executions.models import Execution, ExecutionEvent
from tests.support.records import approved_execution


def rows() -> dict[str, int]:
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    with connection.cursor() as cursor:
        counts = {}
        for table in tables:
            cursor.execute(f"SELECT count(*) FROM {connection.ops.quote_name(table)}")
            counts[table] = cursor.fetchone()[0]
    return counts


def test_the_flush_deletes_instead_of_truncating(transactional_db):
    if connection.vendor != "postgresql" or not connection.is_superuser():
        pytest.skip("the fast flush needs PostgreSQL and a superuser; otherwise it is Django's TRUNCATE")
    sql = connection.ops.sql_flush(no_style(), ["executions_execution", "approvals_auditentry"])
    assert sql[0] == "SET LOCAL session_replication_role = replica"
    assert [s.split()[0] for s in sql[1:]] == ["DELETE", "DELETE"]


def test_the_flush_empties_every_table_the_append_only_ones_too(people):
    with transaction.atomic():
        execution, request, _ = approved_execution(people["requester"].user, people["manager"].user, 1)
    ExecutionEvent.objects.create(execution=execution, type="note", payload={})
    AuditEntry.objects.create(request=request, kind="viewed", actor=people["manager"].user)
    assert Execution.objects.exists() and ExecutionEvent.objects.exists() and AuditEntry.objects.exists()

    call_command("flush", interactive=False, verbosity=0)

    left = {table: n for table, n in rows().items() if n}
    refilled = {ContentType._meta.db_table, Permission._meta.db_table}
    assert set(left) == refilled, left  # post_migrate puts back content types and permissions
