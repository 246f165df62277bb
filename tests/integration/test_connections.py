"""Issue 10: workers keep their database connection across tasks, and one that died
(a database restart, a killed backend) is replaced before the next task uses it."""

from __future__ import annotations

from django.db import connection

from tests.support.stack import APP_DB_ROLE, wait_status


def app_backends() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND usename = %s", [APP_DB_ROLE]
        )
        return [row[0] for row in cursor.fetchall()]


def test_a_worker_whose_connection_died_reconnects_and_goes_on(stack, people, api_as):
    stack.up()
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    first = requester.start("2026-03")["id"]
    approval = wait_status(requester, first, "awaiting_approval")["pending_approval"]

    # Every connection the application's processes hold is killed, as a database restart would.
    killed = app_backends()
    assert killed, "the worker and the web server keep their connections between tasks and requests"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid) t", [killed]
        )

    assert manager.decide(first, approval).status_code == 202
    wait_status(requester, first, "completed", timeout=60)
    second = requester.start("2026-04")["id"]
    wait_status(requester, second, "awaiting_approval", timeout=60)
    assert not set(killed) & set(app_backends())  # new connections, not the dead ones
