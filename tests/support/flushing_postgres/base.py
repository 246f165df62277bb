"""keel's PostgreSQL backend (config.database) with a faster flush, for the pytest
process only (config/test_settings.py; keel's processes use config.database itself).

pytest-django empties the database after every transactional test with ``flush``,
which on PostgreSQL is one ``TRUNCATE`` of every table: a new file for each table and
index, ~0.2 s however few rows the test wrote, some 400 times a run. ``DELETE`` of
those few rows takes milliseconds. It runs with ``session_replication_role = replica``
(the flush's transaction only), so neither the foreign keys nor the append-only tables'
triggers fire: the owner empties everything, as its TRUNCATE did, and the result is
the same empty database (sequences are not reset either way). That setting needs a
superuser; as any other role the flush stays Django's TRUNCATE.

The statements go as one string (one round trip, not one per table), and two tables
are left as they are: the content types and the permissions, which the flush's
post_migrate would otherwise insert again, row by row, ~140 commits after every test.
They hold what the models say (post_migrate adds any missing, as before; no test
leaves one of its own), so keeping them leaves the database as refilling them would,
ids included. The flush command of this package (``management/commands/flush.py``)
then skips post_migrate itself while the two tables are as it last left them.
"""

from __future__ import annotations

from django.db.backends.postgresql import operations

from config.database import base

# Refilled unchanged by every flush's post_migrate: kept instead (the docstring).
KEPT = frozenset({"django_content_type", "auth_permission"})
# What the kept tables held after the last post_migrate, by database name.
_AFTER_POST_MIGRATE: dict[str, str] = {}
_KEPT_DIGEST = (
    "SELECT md5("
    + " || '|' || ".join(
        f"coalesce((SELECT string_agg(t::text, ';' ORDER BY t.id) FROM {table} t), '')" for table in sorted(KEPT)
    )
    + ")"
)


class DatabaseOperations(operations.DatabaseOperations):
    def keeps(self, *, reset_sequences=False, allow_cascade=False) -> bool:
        """Whether this flush deletes (keeping ``KEPT``) rather than Django's TRUNCATE of all."""
        return not reset_sequences and not allow_cascade and self.connection.is_superuser()

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if not tables or not self.keeps(reset_sequences=reset_sequences, allow_cascade=allow_cascade):
            return super().sql_flush(style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        deletes = [
            f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))}"
            for table in tables
            if table not in KEPT
        ]
        return [";\n".join(["SET LOCAL session_replication_role = replica", *deletes])]


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
    _superuser: bool | None = None

    def kept_as_post_migrate_left_them(self, **flush) -> bool:
        """Whether this flush (its ``reset_sequences`` and ``allow_cascade``) keeps the content
        types and permissions and they are exactly what the last post_migrate left: running
        it again changes nothing."""
        name = self.settings_dict["NAME"]
        return self.ops.keeps(**flush) and _AFTER_POST_MIGRATE.get(name) == self._kept()

    def post_migrate_ran(self) -> None:
        _AFTER_POST_MIGRATE[self.settings_dict["NAME"]] = self._kept()

    def _kept(self) -> str:
        with self.cursor() as cursor:
            cursor.execute(_KEPT_DIGEST)
            return cursor.fetchone()[0]

    def is_superuser(self) -> bool:
        if self._superuser is None:
            with self.cursor() as cursor:
                cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
                self._superuser = bool(cursor.fetchone()[0])
        return self._superuser
