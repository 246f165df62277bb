"""The pytest process's flush (tests/support/flushing_postgres): what pytest-django runs
after every transactional test leaves every table empty, the append-only ones included,
as Django's TRUNCATE did, but the content types and permissions, which stay as
post_migrate would have refilled them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connection, transaction
from django.db.models.signals import post_migrate

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
    tables = ["executions_execution", "approvals_auditentry", "django_content_type", "auth_permission"]
    (sql,) = connection.ops.sql_flush(no_style(), tables)  # one round trip
    statements = sql.split(";\n")
    assert statements[0] == "SET LOCAL session_replication_role = replica"
    assert statements[1:] == ['DELETE FROM "executions_execution"', 'DELETE FROM "approvals_auditentry"']


def test_the_flush_empties_every_table_the_append_only_ones_too(people):
    with transaction.atomic():
        execution, request, _ = approved_execution(people["requester"].user, people["manager"].user, 1)
    ExecutionEvent.objects.create(execution=execution, type="note", payload={})
    AuditEntry.objects.create(request=request, kind="viewed", actor=people["manager"].user)
    assert Execution.objects.exists() and ExecutionEvent.objects.exists() and AuditEntry.objects.exists()

    kept = sorted(Permission.objects.values_list("pk", "content_type_id", "codename"))
    # As Django's TransactionTestCase (under pytest-django) calls it after each test.
    call_command("flush", interactive=False, verbosity=0, reset_sequences=False, allow_cascade=False)

    left = {table: n for table, n in rows().items() if n}
    assert set(left) == {ContentType._meta.db_table, Permission._meta.db_table}, left
    assert sorted(Permission.objects.values_list("pk", "content_type_id", "codename")) == kept


def test_the_flush_skips_post_migrate_only_while_it_would_change_nothing(transactional_db):
    if connection.vendor != "postgresql" or not connection.is_superuser():
        pytest.skip("only the fast flush keeps the content types and permissions")
    sent = []
    receiver = lambda **kwargs: sent.append(kwargs["app_config"].label)  # noqa: E731
    post_migrate.connect(receiver, weak=False)
    try:
        call_command("flush", interactive=False, verbosity=0, reset_sequences=False, allow_cascade=False)
        call_command("flush", interactive=False, verbosity=0, reset_sequences=False, allow_cascade=False)
        sent.clear()
        call_command("flush", interactive=False, verbosity=0, reset_sequences=False, allow_cascade=False)
        assert sent == [], "the tables are as the last post_migrate left them"

        # A test that deleted a permission: the next flush's post_migrate puts it back.
        gone = Permission.objects.get(codename="view_execution")
        gone.delete()
        call_command("flush", interactive=False, verbosity=0, reset_sequences=False, allow_cascade=False)
        assert "auth" in sent
        assert Permission.objects.filter(codename="view_execution", content_type=gone.content_type).exists()

        # A flush that truncates everything (reset_sequences) always refills.
        sent.clear()
        call_command("flush", interactive=False, verbosity=0, reset_sequences=True, allow_cascade=False)
        assert "auth" in sent and "contenttypes" in sent
        assert Permission.objects.filter(codename="view_execution").exists()
    finally:
        post_migrate.disconnect(receiver)
