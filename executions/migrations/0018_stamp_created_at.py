"""The database stamps ``created_at`` on events and model calls for every role but the
table's owner (``keel_stamp_created_at`` comes from artifacts 0004). PostgreSQL only."""

from django.db import migrations

TABLES = ("executions_executionevent", "executions_modelcall")


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(
                f"DROP TRIGGER IF EXISTS keel_stamp_created_at ON {table};"
                f"CREATE TRIGGER keel_stamp_created_at BEFORE INSERT ON {table}"
                " FOR EACH ROW EXECUTE FUNCTION keel_stamp_created_at();"
            )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(f"DROP TRIGGER IF EXISTS keel_stamp_created_at ON {table};")


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0017_signal_event_per_execution"),
        ("artifacts", "0004_stamp_created_at"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
