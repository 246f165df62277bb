from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("executions", "0022_execution_parent")]

    operations = [
        migrations.AddField(
            model_name="action",
            name="beside",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
