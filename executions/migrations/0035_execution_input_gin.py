"""The execution list's search by input (issue 39, the peers' paragraph): ``GET
/api/executions?input=KEY:VALUE`` asks ``input @> '{"KEY": VALUE}'``, which a GIN index
with ``jsonb_path_ops`` serves on PostgreSQL (a hash per path and value: smaller than the
default ``jsonb_ops``, and containment is the only question asked of it). Other databases
(the embedded SQLite) have no such index; there the list filters each row
(``executions.selectors._with_input``). Django's declared indexes don't include it (an
operator class of one vendor can't be declared for every database at once).
"""

from django.db import migrations

POSTGRES = "CREATE INDEX execution_input_path ON executions_execution USING gin (input jsonb_path_ops)"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRES)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX execution_input_path")


class Migration(migrations.Migration):
    dependencies = [("executions", "0034_tombstone_append_only_switch_stamped")]

    operations = [migrations.RunPython(create, drop)]
