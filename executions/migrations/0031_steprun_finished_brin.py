"""The step runs of a window, read by ``finished_at`` (issue 25): a BRIN index on PostgreSQL
instead of the B-tree (outcome, finished_at).

Step runs are appended in the order they finish, so a block range's smallest and largest
``finished_at`` bound a window tightly: the index holds a few bytes per 16 pages (a
B-tree held an entry per run — the largest index of a 5-step workflow) and an insert
writes nothing to it until its range is summarized (``autosummarize``). Other databases
(the embedded SQLite) get a plain index on ``finished_at``. Django's declared indexes
don't include it (a BRIN index can't be declared for every database at once).
"""

from django.db import migrations

POSTGRES = (
    "CREATE INDEX steprun_finished ON executions_steprun USING brin (finished_at) "
    "WITH (pages_per_range = 16, autosummarize = on)"
)
OTHER = "CREATE INDEX steprun_finished ON executions_steprun (finished_at)"


def create(apps, schema_editor):
    schema_editor.execute(POSTGRES if schema_editor.connection.vendor == "postgresql" else OTHER)


def drop(apps, schema_editor):
    schema_editor.execute("DROP INDEX steprun_finished")


class Migration(migrations.Migration):
    dependencies = [("executions", "0030_partial_indexes")]

    operations = [
        migrations.RemoveIndex(model_name="steprun", name="steprun_outcome_finished"),
        migrations.RunPython(create, drop),
    ]
