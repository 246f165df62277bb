"""Issue 10: workers keep their database connection across tasks, and one that died
(a database restart, a killed backend) is replaced before the next task uses it. Issue
25: the check before each task and each request costs no round trip (config.database)."""

from __future__ import annotations

import os
import socket
import time

import psycopg
import pytest
from django.db import connection, connections

from config.database import base as config_database
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


# --- the health check itself (config/database/base.py): it asks the socket, not the server ---


@pytest.fixture
def kept_connection():
    """The test process closes its connection after each request (CONN_MAX_AGE 0); a
    worker's is kept (KEEL_DB_CONN_MAX_AGE, 600 s) and checked before each task. Closed
    at the end, so no later test inherits a connection kept this way."""
    connection.ensure_connection()
    connection.close_at = None
    connection.health_check_enabled = True
    yield connection
    connection.close()


def _observer():
    s = connection.settings_dict
    return psycopg.connect(f"postgres://{s['USER']}@{s['HOST']}:{s['PORT']}/{s['NAME']}", autocommit=True)


def _last_query(observer, pid: int) -> str | None:
    row = observer.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    return row and row[0]


def test_a_quiet_connection_is_usable_without_a_round_trip(transactional_db, kept_connection):
    assert isinstance(connections["default"], config_database.DatabaseWrapper)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'before the health check'")
    pid = connection.connection.info.backend_pid
    with _observer() as observer:
        connection.close_if_unusable_or_obsolete()  # what a request or a task starts with
        connection.close_if_health_check_failed()  # what its first statement does
        assert connection.health_check_done and connection.connection is not None
        assert connection.connection.info.backend_pid == pid  # the same connection, kept
        # Django's own check would have sent SELECT 1; nothing reached the server.
        assert _last_query(observer, pid) == "SELECT 'before the health check'"


def test_a_connection_idle_for_a_while_is_asked_as_django_asks(transactional_db, kept_connection):
    """Quiet is not enough after a while: a NAT's idle timeout or a failover ends a
    connection without a word, so one idle past QUIET_TRUST_SECONDS gets SELECT 1."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'before the health check'")
    pid = connection.connection.info.backend_pid
    # As if the last statement were older than the trust (instead of sleeping that long).
    connections["default"]._used_at -= config_database.DatabaseWrapper.QUIET_TRUST_SECONDS + 1
    with _observer() as observer:
        connection.close_if_unusable_or_obsolete()
        connection.close_if_health_check_failed()
        assert connection.connection.info.backend_pid == pid  # alive: kept
        assert _last_query(observer, pid) == "SELECT 1"


def test_a_connection_the_server_ended_is_replaced_before_it_is_used(transactional_db, kept_connection):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    pid = connection.connection.info.backend_pid
    with _observer() as observer:
        observer.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 5
        while _last_query(observer, pid) is not None and time.monotonic() < deadline:
            time.sleep(0.02)
    assert not connection.is_usable()
    connection.close_if_unusable_or_obsolete()
    connection.close_if_health_check_failed()
    assert connection.connection is None  # closed: the next statement connects anew
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid


def test_a_connection_with_something_to_read_is_asked_and_kept(transactional_db):
    """A notification waiting on the socket is not a goodbye: the server is asked (SELECT 1)."""
    with connection.cursor() as cursor:
        cursor.execute("LISTEN keel_health_check_test")
    pid = connection.connection.info.backend_pid
    try:
        with _observer() as observer:
            observer.execute("NOTIFY keel_health_check_test")
            time.sleep(0.2)
            assert connection.is_usable()
            assert _last_query(observer, pid) == "SELECT 1"
        assert connection.connection.info.backend_pid == pid
    finally:
        with connection.cursor() as cursor:
            cursor.execute("UNLISTEN *")


def test_every_connection_asks_tcp_to_find_a_vanished_server_within_a_minute(transactional_db):
    """Keepalive probes after 30 s of silence and a 30 s limit on unacknowledged data
    (config.database's TCP_DEFAULTS), on the socket itself; a database's OPTIONS win."""
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    sent = connection.connection.info.get_parameters()
    assert (sent["keepalives_idle"], sent["keepalives_count"], sent["tcp_user_timeout"]) == ("30", "3", "30000")
    tcp = socket.socket(fileno=os.dup(connection.connection.pgconn.socket))
    try:
        assert tcp.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert tcp.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 30
        assert tcp.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 30_000
    finally:
        tcp.close()
    settings = {**connection.settings_dict, "OPTIONS": {**connection.settings_dict["OPTIONS"], "keepalives_idle": 5}}
    params = config_database.DatabaseWrapper(settings).get_connection_params()
    assert params["keepalives_idle"] == 5 and params["tcp_user_timeout"] == 30_000
