"""Leave a fifth of each page of the execution table free (PostgreSQL), so a step's
checkpoint — which changes no indexed column — is a HOT update in the same page: no
index entries written, the old version pruned in place (issue 10, table and WAL bytes).
SQLite has no such setting: nothing to do there."""

from django.db import migrations

FILLFACTOR = 80


def set_fillfactor(apps, schema_editor, value=FILLFACTOR):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE executions_execution SET (fillfactor = {int(value)})")


def reset_fillfactor(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE executions_execution RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [("executions", "0013_modelcall_refuse_truncate")]

    operations = [migrations.RunPython(set_fillfactor, reset_fillfactor)]
