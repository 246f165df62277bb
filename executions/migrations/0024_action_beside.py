from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("executions", "0023_cost_budget")]

    operations = [
        migrations.AddField(
            model_name="action",
            name="beside",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
