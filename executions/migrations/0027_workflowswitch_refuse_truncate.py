"""TRUNCATE on executions_workflowswitch (the kill switches' audit) is refused for every role but its owner
(the function ``keel_refuse_truncate`` comes from artifacts 0003). PostgreSQL only."""

from django.db import migrations

TABLE = "executions_workflowswitch"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"DROP TRIGGER IF EXISTS keel_refuse_truncate ON {TABLE};"
            f"CREATE TRIGGER keel_refuse_truncate BEFORE TRUNCATE ON {TABLE}"
            " FOR EACH STATEMENT EXECUTE FUNCTION keel_refuse_truncate();"
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP TRIGGER IF EXISTS keel_refuse_truncate ON {TABLE};")


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0026_retention_hold_tombstone"),
        ("artifacts", "0003_refuse_truncate"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
