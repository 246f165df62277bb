# TerminalTally moved here from executions (issue 19): the table stays
# executions_terminaltally, with its rows; only Django's state (and the content type) moves.

from django.db import migrations, models


def move_content_type(apps, schema_editor, *, source="executions", target="triage"):
    ContentType = apps.get_model("contenttypes", "ContentType")
    moving = ContentType.objects.filter(app_label=source, model="terminaltally")
    if moving.exists():
        # One that post_migrate made meanwhile (a partial migrate) holds no rights yet: the moved one wins.
        ContentType.objects.filter(app_label=target, model="terminaltally").delete()
        moving.update(app_label=target)


def move_content_type_back(apps, schema_editor):
    move_content_type(apps, schema_editor, source="triage", target="executions")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("executions", "0015_lean_indexes"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="TerminalTally",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("status", models.CharField(max_length=30)),
                        ("workflow", models.CharField(max_length=100)),
                        ("reason_code", models.CharField(blank=True, default="", max_length=40)),
                        ("n", models.PositiveBigIntegerField()),
                        ("through", models.DateTimeField()),
                        ("taken_at", models.DateTimeField()),
                    ],
                    options={"db_table": "executions_terminaltally"},
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_type, move_content_type_back),
    ]
