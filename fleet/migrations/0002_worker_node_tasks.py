from django.db import migrations, models


class Migration(migrations.Migration):
    """Issue 39, item 2: a row per worker process (its node name beside a unique identity)
    and what the process counted of its tasks."""

    dependencies = [("fleet", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="worker",
            name="node",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.AddField(
            model_name="worker",
            name="tasks",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
