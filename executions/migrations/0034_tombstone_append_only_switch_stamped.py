"""Issue 38: tombstones are append-only and the kill switches' audit is stamped by the database.

* ``executions_executiontombstone``: UPDATE and DELETE refused (``pgtrigger.Protect``;
  ``grant_app_role`` then gives the application's role only SELECT and INSERT), TRUNCATE
  refused to every role but the owner (``keel_refuse_truncate``, artifacts 0003). An
  archived execution stays 410 and its idempotency key stays taken.
* ``executions_workflowswitch``: ``created_at`` set to the database's clock for every role
  but the owner (``keel_stamp_created_at``, artifacts 0004), as on the other append-only
  tables.

The triggers of the RunPython are PostgreSQL only.
"""

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "DROP TRIGGER IF EXISTS keel_refuse_truncate ON executions_executiontombstone;"
            "CREATE TRIGGER keel_refuse_truncate BEFORE TRUNCATE ON executions_executiontombstone"
            " FOR EACH STATEMENT EXECUTE FUNCTION keel_refuse_truncate();"
            "DROP TRIGGER IF EXISTS keel_stamp_created_at ON executions_workflowswitch;"
            "CREATE TRIGGER keel_stamp_created_at BEFORE INSERT ON executions_workflowswitch"
            " FOR EACH ROW EXECUTE FUNCTION keel_stamp_created_at();"
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "DROP TRIGGER IF EXISTS keel_refuse_truncate ON executions_executiontombstone;"
            "DROP TRIGGER IF EXISTS keel_stamp_created_at ON executions_workflowswitch;"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0033_fewer_index_entries"),
        ("artifacts", "0004_stamp_created_at"),
    ]

    operations = [
        pgtrigger.migrations.AddTrigger(
            model_name="executiontombstone",
            trigger=pgtrigger.compiler.Trigger(
                name="tombstone_append_only",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="RAISE EXCEPTION 'pgtrigger: Cannot update or delete rows from % table', TG_TABLE_NAME;",
                    hash="01909fe10669bf4072c5b7f252989dfea8e64289",
                    operation="UPDATE OR DELETE",
                    pgid="pgtrigger_tombstone_append_only_69ddd",
                    table="executions_executiontombstone",
                    when="BEFORE",
                ),
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
