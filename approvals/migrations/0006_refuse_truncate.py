"""TRUNCATE on the decision and audit tables is refused for every role but their owner
(the function ``keel_refuse_truncate`` comes from artifacts 0003). PostgreSQL only."""

from django.db import migrations

TABLES = ["approvals_decision", "approvals_auditentry"]


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(
                f"DROP TRIGGER IF EXISTS keel_refuse_truncate ON {table};"
                f"CREATE TRIGGER keel_refuse_truncate BEFORE TRUNCATE ON {table}"
                " FOR EACH STATEMENT EXECUTE FUNCTION keel_refuse_truncate();"
            )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(f"DROP TRIGGER IF EXISTS keel_refuse_truncate ON {table};")


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0005_refusal_window"),
        ("artifacts", "0003_refuse_truncate"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
