"""What one database connection sends, read from libpq's own trace of the protocol.

``wire_trace`` traces this thread's Django connection: every message it sends and
every answer. SQL sent any way at all (the ORM, a raw cursor, psycopg directly on
that connection) is seen, and so is what no wrapper sees: psycopg's BEGIN and
COMMIT. Counted:

- ``statements``: the SQL of every simple-protocol query other than transaction
  control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE), and of every extended-protocol
  Execute (the statement its Bind named: parsed in the trace, or prepared on the
  connection before it — psycopg's prepared statements, read when the trace starts);
- ``round_trips``: the server's ReadyForQuery answers (one per query sent);
- ``commits``: transactions the server committed: a COMMIT, or a statement run
  outside a transaction block (autocommit), that ended without an error;
- ``write_commits``: those of them that wrote (a statement other than a plain SELECT:
  an INSERT, UPDATE, DELETE, a WITH, or a SELECT that locks rows), the ones PostgreSQL
  gives a transaction id and flushes to the WAL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection
from psycopg import pq

CONTROL = {"BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"}


@dataclass
class Wire:
    statements: list[str] = field(default_factory=list)
    round_trips: int = 0
    commits: int = 0
    write_commits: int = 0

    @property
    def kinds(self) -> Counter:
        return Counter(sql.split(None, 1)[0].upper() for sql in self.statements)

    def summary(self) -> str:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(self.kinds.items()))
        return (
            f"{len(self.statements)} statements ({kinds}), {self.commits} commits ({self.write_commits} writing), "
            f"{self.round_trips} round trips"
        )


@contextmanager
def wire_trace(path: Path) -> Iterator[Wire]:
    """Trace this thread's connection inside the block; the Wire is filled in when it ends."""
    wire = Wire()
    connection.ensure_connection()
    prepared = _prepared_before(connection.connection)
    pgconn = connection.connection.pgconn
    with open(path, "w") as out:
        pgconn.trace(out.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield wire
        finally:
            pgconn.untrace()
    _parse(path.read_text(errors="replace"), wire, prepared)


def _prepared_before(conn) -> dict[str, str]:
    """The statements psycopg prepared on ``conn`` before the trace: name → SQL."""
    names = getattr(getattr(conn, "_prepared", None), "_names", {})
    return {name.decode(): query.decode() for (query, _types), name in names.items()}


def _messages(trace: str) -> Iterator[str]:
    """The trace's messages, one each: a query's own newlines continue its message."""
    message = ""
    for line in trace.splitlines():
        if line[:2] in ("F\t", "B\t") and message:
            yield message
            message = line
        else:
            message = f"{message}\n{line}" if message else line
    if message:
        yield message


def _writes(sql: str) -> bool:
    """Whether ``sql`` writes (or locks rows, which also takes a transaction id)."""
    upper = sql.upper()
    return not upper.startswith("SELECT") or " FOR UPDATE" in upper or " FOR NO KEY UPDATE" in upper


def _quoted(payload: str) -> list[str]:
    """The leading double-quoted strings of a message's payload (names, then the SQL)."""
    found, rest = [], payload
    while rest.startswith('"'):
        end = rest.index('"', 1)
        while end + 1 < len(rest) and rest[end + 1] == '"':  # a doubled quote inside the string
            end = rest.index('"', end + 2)
        found.append(rest[1:end].replace('""', '"'))
        rest = rest[end + 1 :].lstrip()
    return found


def _parse(trace: str, wire: Wire, prepared: dict[str, str]) -> None:
    last_command = ""
    failed = False
    wrote = False
    statements = dict(prepared)  # name → SQL ("" is the unnamed statement)
    bound = ""
    for line in _messages(trace):
        parts = line.split("\t", 3)
        if len(parts) < 3 or parts[0] not in ("F", "B"):
            continue
        direction, message = parts[0], parts[2]
        payload = parts[3].strip() if len(parts) > 3 else ""
        if direction == "F" and message == "Query":
            sql = payload.strip('"')
            last_command = sql.split(None, 1)[0].upper() if sql else ""
            if last_command not in CONTROL:
                wire.statements.append(sql)
                wrote = wrote or _writes(sql)
        elif direction == "F" and message == "Parse":
            name, sql, *_ = _quoted(payload) + ["", ""]
            statements[name] = sql
        elif direction == "F" and message == "Bind":
            _portal, name, *_ = _quoted(payload) + ["", ""]
            bound = statements.get(name, "")
        elif direction == "F" and message == "Execute":
            last_command = bound.split(None, 1)[0].upper() if bound else "EXECUTE"
            wire.statements.append(bound or "EXECUTE (extended protocol, statement unknown)")
            wrote = wrote or not bound or _writes(bound)
        elif direction == "B" and message == "ErrorResponse":
            failed = True
        elif direction == "B" and message == "ReadyForQuery":
            wire.round_trips += 1
            if payload == "I":  # the transaction (or the autocommit statement) ended
                if not failed and last_command not in ("ROLLBACK", ""):
                    wire.commits += 1
                    wire.write_commits += wrote
                wrote = False
            failed = False
            last_command = ""
