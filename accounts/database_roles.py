"""The application's PostgreSQL role: every right it needs, and none to rewrite history.

The owner (the role in ``DATABASE_URL`` when ``migrate`` runs) owns every table. The
application's processes (web, workers, beat) connect as a second role that may only
SELECT and INSERT the append-only tables — a model with a ``pgtrigger.Protect`` on
UPDATE and DELETE — and read and write the others. Privileges are checked before any
trigger, so ``SET LOCAL pgtrigger.ignore`` does not help that role; TRUNCATE is not
granted, and a statement trigger refuses it to anyone but the owner even if it were
(``keel_refuse_truncate``, artifacts migration 0003).

``app_role_grant`` is idempotent: it resets the role's table rights to exactly the
above on every run, so run it after every ``migrate``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pgtrigger
from django.apps import apps
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction

ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# The app reads the migration history (runserver's check) but never writes it.
READ_ONLY_TABLES = frozenset({"django_migrations"})


class RoleError(Exception):
    """The role can't be made a safe application role; the message says why."""


@dataclass(frozen=True, kw_only=True)
class GrantReport:
    role: str
    created: bool
    append_only: tuple[str, ...]
    read_write: tuple[str, ...]
    read_only: tuple[str, ...]


def append_only_tables() -> list[str]:
    """Tables of installed models protected against both UPDATE and DELETE."""
    tables = []
    for model in apps.get_models():
        for trigger in getattr(model._meta, "triggers", []):
            operations = str(getattr(trigger, "operation", "")).split(" OR ")
            if isinstance(trigger, pgtrigger.Protect) and {"UPDATE", "DELETE"} <= set(operations):
                tables.append(model._meta.db_table)
                break
    return sorted(tables)


def app_role_grant(*, role: str, using: str = DEFAULT_DB_ALIAS) -> GrantReport:
    """Create ``role`` if missing (LOGIN, no other attribute) and set its rights.

    Runs as the owner of the tables. Refuses a role that is the owner, a superuser,
    one that may create roles, or a member of the owner (any of those could rewrite
    the append-only tables).
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        raise RoleError(f"database roles need PostgreSQL; this database is {connection.vendor}")
    if not ROLE_NAME.match(role):
        raise RoleError(f"{role!r} is not a plain role name (lower-case letters, digits and _, at most 63)")
    quoted = connection.ops.quote_name(role)
    append_only = set(append_only_tables())
    with transaction.atomic(using=using), connection.cursor() as cursor:
        cursor.execute("SELECT current_user, current_database(), current_schema()")
        owner, database, schema = cursor.fetchone()
        if role == owner:
            raise RoleError(f"{role!r} is the owner running this command; the application needs a role of its own")
        cursor.execute("SELECT rolsuper, rolcreaterole FROM pg_roles WHERE rolname = %s", [role])
        row = cursor.fetchone()
        created = row is None
        if created:
            _create_role(cursor, quoted, role)
        elif row[0]:
            raise RoleError(f"{role!r} is a superuser: it bypasses every privilege; use a plain role")
        elif row[1]:
            raise RoleError(
                f"{role!r} may create roles (and so grant itself the owner's); ALTER ROLE {role} NOCREATEROLE"
            )
        cursor.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", [role, owner])
        if cursor.fetchone()[0]:
            raise RoleError(f"{role!r} is a member of the owner {owner!r} and would inherit its rights; revoke that")
        cursor.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tableowner = %s ORDER BY tablename",
            [schema, owner],
        )
        tables = [name for (name,) in cursor.fetchall()]
        missing = append_only - set(tables)
        if missing:
            raise RoleError(f"append-only tables not found (run migrate first): {', '.join(sorted(missing))}")
        cursor.execute(f"GRANT CONNECT ON DATABASE {connection.ops.quote_name(database)} TO {quoted}")
        cursor.execute(f"GRANT USAGE ON SCHEMA {connection.ops.quote_name(schema)} TO {quoted}")
        for table in tables:
            name = connection.ops.quote_name(table)
            cursor.execute(f"REVOKE ALL ON TABLE {name} FROM {quoted}")
            if table in append_only:
                cursor.execute(f"GRANT SELECT, INSERT ON TABLE {name} TO {quoted}")
            elif table in READ_ONLY_TABLES:
                cursor.execute(f"GRANT SELECT ON TABLE {name} TO {quoted}")
            else:
                cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE {name} TO {quoted}")
        cursor.execute(
            f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {connection.ops.quote_name(schema)} TO {quoted}"
        )
    return GrantReport(
        role=role,
        created=created,
        append_only=tuple(t for t in tables if t in append_only),
        read_write=tuple(t for t in tables if t not in append_only and t not in READ_ONLY_TABLES),
        read_only=tuple(t for t in tables if t in READ_ONLY_TABLES),
    )


def _create_role(cursor, quoted: str, role: str) -> None:
    # Roles are cluster-wide: another database's setup may create it at the same moment.
    try:
        cursor.execute(
            "DO $$ BEGIN "
            f"CREATE ROLE {quoted} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS; "
            "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
        )
    except DatabaseError as exc:
        raise RoleError(
            f"could not create role {role!r} ({exc}); create it as a superuser first: CREATE ROLE {role} LOGIN PASSWORD '…'"
        ) from exc
