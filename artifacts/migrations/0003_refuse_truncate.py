"""TRUNCATE on an append-only table is refused for every role but the table's owner.

Privileges already keep the application's role from TRUNCATE (docs/operations.md,
``grant_app_role``); this statement trigger holds even if someone grants it. The
owner (the role that runs migrations) is let through: it can drop the trigger
anyway, and pytest-django flushes tables with TRUNCATE as the owner. PostgreSQL
only; SQLite has no TRUNCATE.
"""

from django.db import migrations

FUNCTION = """
CREATE OR REPLACE FUNCTION keel_refuse_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_user <> (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = TG_RELID) THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'keel: ' || TG_TABLE_NAME || ' is append-only; only its owner may TRUNCATE it';
    END IF;
    RETURN NULL;
END $$;
"""


def trigger_sql(table: str) -> str:
    return (
        f"DROP TRIGGER IF EXISTS keel_refuse_truncate ON {table};"
        f"CREATE TRIGGER keel_refuse_truncate BEFORE TRUNCATE ON {table}"
        " FOR EACH STATEMENT EXECUTE FUNCTION keel_refuse_truncate();"
    )


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FUNCTION)
        schema_editor.execute(trigger_sql("artifacts_artifactversion"))


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP TRIGGER IF EXISTS keel_refuse_truncate ON artifacts_artifactversion;")


class Migration(migrations.Migration):
    dependencies = [("artifacts", "0002_artifactversion_artifact_version_immutable")]

    operations = [migrations.RunPython(forwards, backwards)]
