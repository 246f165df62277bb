"""Audit rows nobody can rewrite (issue 11): the application's PostgreSQL role may only
SELECT and INSERT the append-only tables, whatever it knows about the triggers — the
tombstones of archived executions and the archive chain's anchor among them (issue 38).

Each attempt runs on a real connection that logs in as the application's role (the
role the web server, workers and beat of tests/support/stack.py use), against the
test database; rows are committed first, so a refusal is never an empty match.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import uuid

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from accounts.database_roles import append_only_tables
from tests.support.procs import ROOT, wait_for
from tests.support.roles import dsn
from tests.support.stack import APP_DB_ROLE

APPEND_ONLY = [
    "approvals_approvaltombstone",
    "approvals_auditentry",
    "approvals_decision",
    "artifacts_artifactversion",
    "executions_executionevent",
    "executions_executiontombstone",
    "executions_modelcall",
    "executions_rollout",
    "executions_workflowswitch",
    "retention_archiveanchor",
]
PRIMARY_KEY = {"retention_archiveanchor": "seq"}  # the others' is id


def protect_trigger(table: str) -> str:
    """The pgtrigger Protect trigger's name on ``table``: what an attacker would put in pgtrigger.ignore."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND tgname LIKE 'pgtrigger_%%'", [table]
        )
        (name,) = cursor.fetchone()
    return name


def insert_as_app(cur, rows: dict) -> None:
    cur.execute(
        "INSERT INTO executions_modelcall (key, execution_id, step, round, seq, provider, adapter, model,"
        " model_returned, prompt_id, prompt_version, request_sha256, request, response, finish_reason, input_tokens,"
        " output_tokens, latency_ms, response_id, worker, lease_token, created_at) VALUES (%s, %s, 'analyze', 1, 1,"
        " 'offline', 'x', 'm', 'm', '', '', %s, '{}', '{}', 'stop', 1, 1, 1, '', 'app', 1, now())",
        [f"probe:{rows['execution']}", rows["execution"], "c" * 64],
    )
    cur.execute(
        "INSERT INTO executions_executionevent (execution_id, type, from_status, to_status, step, actor_label,"
        " payload, created_at) VALUES (%s, 'probe', '', '', '', 'app', '{}', now())",
        [rows["execution"]],
    )
    cur.execute(
        "INSERT INTO approvals_auditentry (kind, actor_label, content_sha256, detail, created_at)"
        " VALUES ('viewed', 'app', '', '{}', now())"
    )
    cur.execute(
        "INSERT INTO artifacts_artifactversion (artifact_id, number, sha256, size, content_type, storage_path,"
        " produced_by_step, created_at) VALUES (%s, 2, %s, 1, 'text/markdown', 'y', 'draft', now())",
        [rows["artifact"], "b" * 64],
    )
    cur.execute(  # a switch of a workflow nobody runs: the audit row of a kill switch
        "INSERT INTO executions_workflowswitch (workflow, paused, reason, actor_id, created_at)"
        " VALUES ('probe', false, 'probe', %s, now())",
        [rows["user"]],
    )
    cur.execute(  # a rollout of a workflow nobody runs: the audit row of a rollout (issue 43)
        "INSERT INTO executions_rollout (workflow, version, percent, reason, actor_id, created_at)"
        " VALUES ('probe', 1, 0, 'probe', %s, now())",
        [rows["user"]],
    )
    cur.execute(
        "INSERT INTO approvals_decision (request_id, event_id, decision, decided_by_id, artifact_version,"
        " content_sha256, comment, execution_status, created_at)"
        " VALUES (%s, 'e1', 'approve', %s, 1, %s, '', 'running', now())",
        [rows["request"], rows["user"], "a" * 64],
    )
    cur.execute(  # of an execution that never was: the owner's purge writes the real ones
        "INSERT INTO executions_executiontombstone (id, workflow, created_by_id, ended_at, archived_at, manifest)"
        " VALUES (987654, 'probe', %s, now(), now(), 'archive/probe.manifest.json')",
        [rows["user"]],
    )
    cur.execute(  # what the purge leaves of an archived approval request (issue 39 item 10)
        "INSERT INTO approvals_approvaltombstone (id, execution_id, action, step, version, content_sha256, status,"
        " requested_by, requested_at, decision, decided_by) VALUES (987654, 987654, 'publish', 'review', 1, %s,"
        " 'approved', 'someone', now(), '', '')",
        ["a" * 64],
    )
    cur.execute(
        "INSERT INTO retention_archiveanchor (seq, manifest, sha256, purged, created_at)"
        " VALUES (1, 'archive/probe.manifest.json', %s, 0, now())",
        ["d" * 64],
    )


def test_the_append_only_tables_are_the_protected_models():
    assert append_only_tables() == APPEND_ONLY


def test_app_role_inserts_and_reads_but_never_updates_deletes_or_truncates(rows):
    with psycopg.connect(dsn(APP_DB_ROLE), autocommit=True) as app:
        with app.cursor() as cur:
            cur.execute("SELECT current_user")
            assert cur.fetchone()[0] == APP_DB_ROLE
            insert_as_app(cur, rows)
            for table in APPEND_ONLY:
                cur.execute(f"SELECT count(*) FROM {table}")
                assert cur.fetchone()[0] >= 1, table

        attempts = {
            "UPDATE": "UPDATE {t} SET {pk} = {pk}",
            "DELETE": "DELETE FROM {t}",
            "TRUNCATE": "TRUNCATE {t} CASCADE",
        }
        for table in APPEND_ONLY:
            before = count(table)
            for ignore in (False, True):
                for verb, statement in attempts.items():
                    with pytest.raises(psycopg.errors.InsufficientPrivilege), app.transaction(), app.cursor() as cur:
                        if ignore:
                            cur.execute(f"SET LOCAL pgtrigger.ignore = '{{{protect_trigger(table)}}}'")
                        cur.execute(statement.format(t=table, pk=PRIMARY_KEY.get(table, "id")))
                    assert count(table) == before, (table, verb, ignore)


def test_the_database_stamps_the_kill_switch_history_and_the_archive_anchors(rows):
    """As keel_app, a kill switch (or an anchor) that names its created_at gets the
    database's clock instead, as the other append-only tables do (issue 38); the owner
    keeps what it writes."""
    with psycopg.connect(dsn(APP_DB_ROLE), autocommit=True) as app, app.cursor() as cur:
        cur.execute(
            "INSERT INTO executions_workflowswitch (workflow, paused, reason, actor_id, created_at)"
            " VALUES ('probe', true, 'backdated', %s, '2000-01-01') RETURNING created_at > now() - interval '1 minute'",
            [rows["user"]],
        )
        assert cur.fetchone()[0] is True
        cur.execute(
            "INSERT INTO retention_archiveanchor (seq, manifest, sha256, purged, created_at)"
            " VALUES (1, 'archive/x.manifest.json', %s, 0, '2000-01-01')"
            " RETURNING created_at > now() - interval '1 minute'",
            ["d" * 64],
        )
        assert cur.fetchone()[0] is True
    with psycopg.connect(dsn(connection.settings_dict["USER"] or "postgres"), autocommit=True) as owner:
        stamped = owner.execute(
            "INSERT INTO executions_workflowswitch (workflow, paused, reason, actor_id, created_at)"
            " VALUES ('fixture', true, 'owner', %s, '2000-01-01') RETURNING created_at",
            [rows["user"]],
        ).fetchone()[0]
    assert stamped.year == 2000


def test_the_bypass_is_real_for_a_role_with_table_rights(rows):
    """Why privileges matter: pgtrigger.ignore does switch the Protect trigger off for a
    role that holds UPDATE (here the owner, in a transaction rolled back)."""
    with psycopg.connect(dsn(connection.settings_dict["USER"] or "postgres")) as owner, owner.cursor() as cur:
        cur.execute(
            "INSERT INTO approvals_auditentry (kind, actor_label, content_sha256, detail, created_at)"
            " VALUES ('viewed', 'x', '', '{}', now()) RETURNING id"
        )
        (pk,) = cur.fetchone()
        with pytest.raises(psycopg.errors.RaiseException):
            cur.execute("UPDATE approvals_auditentry SET actor_label = 'forged' WHERE id = %s", [pk])
        owner.rollback()
        cur.execute(
            "INSERT INTO approvals_auditentry (kind, actor_label, content_sha256, detail, created_at)"
            " VALUES ('viewed', 'x', '', '{}', now()) RETURNING id"
        )
        (pk,) = cur.fetchone()
        cur.execute(f"SET LOCAL pgtrigger.ignore = '{{{protect_trigger('approvals_auditentry')}}}'")
        cur.execute("UPDATE approvals_auditentry SET actor_label = 'forged' WHERE id = %s", [pk])
        assert cur.rowcount == 1
        owner.rollback()


def test_truncate_trigger_refuses_the_app_role_even_when_granted_and_lets_the_owner_flush(rows):
    with psycopg.connect(dsn(connection.settings_dict["USER"] or "postgres")) as owner, owner.cursor() as cur:
        for table in APPEND_ONLY:
            # Someone granted TRUNCATE everywhere by mistake (rolled back below): the trigger still refuses.
            cur.execute(f"GRANT TRUNCATE ON ALL TABLES IN SCHEMA public TO {APP_DB_ROLE}")
            cur.execute(f"SET LOCAL ROLE {APP_DB_ROLE}")
            cur.execute(f"SET LOCAL pgtrigger.ignore = '{{{protect_trigger(table)}}}'")
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only; only its owner"):
                cur.execute(f"TRUNCATE {table} CASCADE")
            owner.rollback()
            # The owner (the role that migrates) may.
            cur.execute(f"TRUNCATE {table} CASCADE")
            owner.rollback()


def test_grant_app_role_is_idempotent_and_refuses_unsafe_roles(transactional_db):
    out = io.StringIO()
    call_command("grant_app_role", APP_DB_ROLE, stdout=out)
    call_command("grant_app_role", APP_DB_ROLE, stdout=out)
    assert f"Role {APP_DB_ROLE} exists: SELECT, INSERT on {len(APPEND_ONLY)} append-only tables" in out.getvalue()
    owner = connection.settings_dict["USER"] or "postgres"
    with pytest.raises(CommandError, match="is the owner running this command"):
        call_command("grant_app_role", owner, stdout=out)
    with pytest.raises(CommandError, match="not a plain role name"):
        call_command("grant_app_role", "app; DROP TABLE x", stdout=out)
    probe = f"keel_probe_{uuid.uuid4().hex[:8]}"  # roles are cluster-wide: a name of its own, dropped below
    try:
        for attribute, reason in [("SUPERUSER", "is a superuser"), ("CREATEROLE", "may create roles")]:
            with connection.cursor() as cursor:
                cursor.execute(f"DROP ROLE IF EXISTS {probe}")
                cursor.execute(f"CREATE ROLE {probe} LOGIN {attribute}")
            with pytest.raises(CommandError, match=reason):
                call_command("grant_app_role", probe, stdout=out)
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP ROLE IF EXISTS {probe}")


def test_grant_app_role_on_sqlite_says_there_is_nothing_to_do(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "KEEL_ARTIFACTS_ROOT")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings", KEEL_VAR_DIR=str(tmp_path / "var"))
    done = subprocess.run(
        [sys.executable, "manage.py", "grant_app_role", "keel_app"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "The database is sqlite (the embedded default): it has no roles; nothing to grant." in done.stdout


def count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")
        return cursor.fetchone()[0]


def test_the_stack_processes_connect_as_the_app_role(stack):
    """The workers and beat (and the web server: one environment) of the test stack run as the application's role, so
    every test that uses them proves the application works with exactly these rights."""
    stack.up()  # the sweep beat schedules makes the worker use the database

    def app_sessions() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND usename = %s",
                [APP_DB_ROLE],
            )
            return cursor.fetchone()[0]

    # The worker holds its connection only while a task runs (a sweep takes milliseconds,
    # once a second), so look often.
    wait_for(lambda: app_sessions() >= 1, timeout=30, interval=0.002, what="a connection as the application's role")
    assert stack.env["DATABASE_URL"].startswith(f"postgres://{APP_DB_ROLE}@")
