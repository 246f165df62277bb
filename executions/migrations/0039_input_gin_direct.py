"""The execution's input index (``execution_input_path``, migration 0035) written directly
instead of through GIN's pending list (issue 46, item 1). With ``fastupdate`` on, each new
index entry is appended to the pending list and the metapage rewritten with it: ~160 B of
WAL for each of an execution's three row versions (inserted, started, ended). Off, the
entry goes into its posting tree at once. The searches it serves (``?input=KEY:VALUE``)
then never read a pending list either. PostgreSQL only, like the index.
"""

from django.db import migrations


def direct(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER INDEX execution_input_path SET (fastupdate = off)")


def pending_list(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER INDEX execution_input_path RESET (fastupdate)")


class Migration(migrations.Migration):
    dependencies = [("executions", "0038_lean_indexes")]

    operations = [migrations.RunPython(direct, pending_list)]
