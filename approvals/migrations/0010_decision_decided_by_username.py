"""The approver's username on each decision, as it was when they decided (issue 18, item 8).

The decisions table is append-only, so rows made before this column keep it empty and
show the name their approver has now (``Decision.approver``): nothing better is known.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("approvals", "0009_metrics_indexes")]

    operations = [
        migrations.AddField(
            model_name="decision",
            name="decided_by_username",
            field=models.CharField(blank=True, db_default="", default="", max_length=150),
        ),
    ]
