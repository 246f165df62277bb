# ApiToken moved here from executions (issue 19): the table stays executions_apitoken, with
# its rows; only Django's state moves. Its content type moves with it, so the permissions
# given on it (delete_apitoken…) and the admin's history still point at it.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def move_content_type(apps, schema_editor, *, source="executions", target="accounts"):
    ContentType = apps.get_model("contenttypes", "ContentType")
    moving = ContentType.objects.filter(app_label=source, model="apitoken")
    if moving.exists():
        # One that post_migrate made meanwhile (a partial migrate) holds no rights yet: the moved one wins.
        ContentType.objects.filter(app_label=target, model="apitoken").delete()
        moving.update(app_label=target)


def move_content_type_back(apps, schema_editor):
    move_content_type(apps, schema_editor, source="accounts", target="executions")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("executions", "0015_lean_indexes"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ApiToken",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("digest", models.CharField(max_length=64, unique=True)),
                        ("prefix", models.CharField(blank=True, default="", max_length=12)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("expires_at", models.DateTimeField()),
                        ("last_used_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="api_tokens",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={"db_table": "executions_apitoken", "ordering": ["id"]},
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_type, move_content_type_back),
    ]
