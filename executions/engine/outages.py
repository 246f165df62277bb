"""What "the database (or the broker) is gone" looks like as an exception.

A worker that loses PostgreSQL mid-slice writes nothing more and lets its lease lapse
(executions.runner); a web request that does answers 503 with ``Retry-After``
(config.middleware). Both ask the same question here, from the error alone: by the
time it is caught, Django may have connected again (leaving an atomic block does).
"""

from __future__ import annotations

from django.db import InterfaceError, OperationalError

# A server going away, by SQLSTATE: class 08 (connection exception), 57P01-57P03 (backend
# terminated by an administrator, crash shutdown, cannot connect now). psycopg reports a
# connection lost on the client's side (closed under it, refused) with none.
CONNECTION_LOST = ("08", "57P01", "57P02", "57P03")


def database_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is losing the database (the server restarted, failed over, refused
    the connection, or killed the backend), as opposed to an error a statement caused
    (a deadlock, a timeout, a constraint)."""
    if not isinstance(exc, (OperationalError, InterfaceError)):
        return False
    sqlstate = getattr(exc.__cause__, "sqlstate", "")  # "" when not PostgreSQL's driver (SQLite)
    return sqlstate is None or sqlstate.startswith(CONNECTION_LOST)


def broker_lost(exc: BaseException) -> bool:
    """Whether ``exc`` is the broker (Redis) being out of reach. The runtime's own sends
    never raise it (executions.dispatch logs and leaves it to the sweeper); this catches
    any other path."""
    from kombu.exceptions import OperationalError as KombuOperationalError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    return isinstance(exc, KombuOperationalError | RedisConnectionError | RedisTimeoutError)


def unavailable(exc: BaseException) -> str:
    """ "database", "broker", or "" when ``exc`` is neither going away."""
    if database_lost(exc):
        return "database"
    if broker_lost(exc):
        return "broker"
    return ""
