"""The database stamps ``created_at`` on append-only rows: only the table's owner may
write its own (issue 18).

The application's role may INSERT into the append-only tables; without this it could
also choose their ``created_at`` and back-date history. A ``BEFORE INSERT`` trigger sets
it to the database's clock (``clock_timestamp()``) for every role but the table's owner
(the role that runs migrations, archives, and the test suites' fixtures). The function
is shared by the five tables; each app's migration puts it on its own. PostgreSQL only.
"""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION keel_stamp_created_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_user <> (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = TG_RELID) THEN
        NEW.created_at := clock_timestamp();
    END IF;
    RETURN NEW;
END $$;
"""


def trigger_sql(table: str) -> str:
    return (
        f"DROP TRIGGER IF EXISTS keel_stamp_created_at ON {table};"
        f"CREATE TRIGGER keel_stamp_created_at BEFORE INSERT ON {table}"
        " FOR EACH ROW EXECUTE FUNCTION keel_stamp_created_at();"
    )


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTION)
        schema_editor.execute(trigger_sql("artifacts_artifactversion"))


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP TRIGGER IF EXISTS keel_stamp_created_at ON artifacts_artifactversion;")


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0003_refuse_truncate")]

    operations = [migrations.RunPython(forwards, backwards)]
