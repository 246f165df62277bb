"""Issue 38: the archive chain's anchor in the database (``retention.models.ArchiveAnchor``),
append-only like the other history tables: UPDATE and DELETE refused
(``pgtrigger.Protect``; the application's role gets only SELECT and INSERT from
``grant_app_role``), TRUNCATE refused to all but the owner (``keel_refuse_truncate``,
artifacts 0003), ``created_at`` the database's clock for every role but the owner
(``keel_stamp_created_at``, artifacts 0004). The triggers of the RunPython are
PostgreSQL only."""

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations, models

TABLE = "retention_archiveanchor"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"DROP TRIGGER IF EXISTS keel_refuse_truncate ON {TABLE};"
            f"CREATE TRIGGER keel_refuse_truncate BEFORE TRUNCATE ON {TABLE}"
            " FOR EACH STATEMENT EXECUTE FUNCTION keel_refuse_truncate();"
            f"DROP TRIGGER IF EXISTS keel_stamp_created_at ON {TABLE};"
            f"CREATE TRIGGER keel_stamp_created_at BEFORE INSERT ON {TABLE}"
            " FOR EACH ROW EXECUTE FUNCTION keel_stamp_created_at();"
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f"DROP TRIGGER IF EXISTS keel_refuse_truncate ON {TABLE};"
            f"DROP TRIGGER IF EXISTS keel_stamp_created_at ON {TABLE};"
        )


class Migration(migrations.Migration):
    initial = True

    dependencies = [("artifacts", "0004_stamp_created_at")]

    operations = [
        migrations.CreateModel(
            name="ArchiveAnchor",
            fields=[
                ("seq", models.PositiveBigIntegerField(primary_key=True, serialize=False)),
                ("manifest", models.CharField(max_length=300, unique=True)),
                ("sha256", models.CharField(max_length=64)),
                ("purged", models.PositiveIntegerField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={"ordering": ["seq"]},
        ),
        pgtrigger.migrations.AddTrigger(
            model_name="archiveanchor",
            trigger=pgtrigger.compiler.Trigger(
                name="archive_anchor_append_only",
                sql=pgtrigger.compiler.UpsertTriggerSql(
                    func="RAISE EXCEPTION 'pgtrigger: Cannot update or delete rows from % table', TG_TABLE_NAME;",
                    hash="3a49a619f3364ded0ae64d5bf2ec70057a0cd3a9",
                    operation="UPDATE OR DELETE",
                    pgid="pgtrigger_archive_anchor_append_only_dcffe",
                    table=TABLE,
                    when="BEFORE",
                ),
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
