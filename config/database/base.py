"""Django's PostgreSQL backend, with a health check that costs no round trip.

Connections are kept (``CONN_MAX_AGE``) and checked before each request and each Celery
task (``CONN_HEALTH_CHECKS``), so one that a database restart killed is replaced instead
of failing the work. Django checks with ``SELECT 1``: a round trip before every task and
every page, as much as a step's whole statement. An idle connection in autocommit has
nothing to read until it sends something; if its socket is readable, the server has
spoken first — almost always its goodbye (a restart, ``pg_terminate_backend``, an idle
timeout, a PgBouncer restart: an error message and end of file). So the check here
asks the socket (``poll`` with no wait): quiet, the connection is used as it is;
anything waiting, Django's ``SELECT 1`` decides, and reads it. A connection that dies
after the check fails its next statement either way, as it did before.

A connection can also die without a word: a NAT's or load balancer's idle timeout, a
failover that moves the address, a host that crashed. Its socket stays quiet, and only
a packet sent finds out. So the socket is trusted only for a connection used in the
last ``QUIET_TRUST_SECONDS`` (a busy worker's or web server's, where the round trip
counted); one idle for longer is asked with ``SELECT 1``, as Django does.

The kernel's defaults take long to find such a connection dead: two hours before an
idle one is probed, some fifteen minutes of retransmissions for one waiting on an
answer — a worker stuck that long on a statement to a vanished server does nothing
(its lease lapses and another worker takes the execution, but it is one worker fewer).
So every connection asks TCP to probe after 30 s of silence (every 10 s, dead after 3
unanswered) and to give up on data unacknowledged for 30 s (``TCP_DEFAULTS``: libpq's
parameters; a database's ``OPTIONS`` override each, and libpq ignores them on a Unix
socket). A long statement is not cut: the server acknowledges the probes while it works.
"""

from __future__ import annotations

import select
import time

import psycopg
from django.db.backends.postgresql import base
from psycopg import pq

# libpq's connection parameters, unless the database's OPTIONS set them (module docstring).
TCP_DEFAULTS = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,  # milliseconds
}


class DatabaseWrapper(base.DatabaseWrapper):
    QUIET_TRUST_SECONDS = 5.0
    _used_at = float("-inf")  # monotonic time of the last cursor made on this connection

    def get_connection_params(self) -> dict:
        return {**TCP_DEFAULTS, **super().get_connection_params()}

    def _prepare_cursor(self, cursor):
        self._used_at = time.monotonic()  # every cursor, Django's and the hot path's, passes here
        return super()._prepare_cursor(cursor)

    def is_usable(self) -> bool:
        conn = self.connection
        if conn is None or conn.closed or conn.broken:
            return False
        if conn.info.transaction_status != pq.TransactionStatus.IDLE:
            return super().is_usable()  # inside a transaction: ask the server
        if time.monotonic() - self._used_at > self.QUIET_TRUST_SECONDS:
            return super().is_usable()  # idle a while: it may have died without a word
        try:
            poller = select.poll()
            poller.register(conn.pgconn.socket, select.POLLIN | select.POLLPRI)
            waiting = poller.poll(0)
        except (OSError, ValueError, psycopg.Error):  # no socket to ask: not usable
            return False
        return not waiting or super().is_usable()
