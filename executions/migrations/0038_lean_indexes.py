"""The (status, lease_expires_at) index keeps only live executions (pending, running), the
only ones its readers ask for (the sweeper, no_worker, the Workers page): a completion no
longer adds an entry (issue 46, item 1: ~90 B of WAL a workflow; the sweeper's plan at a
million executions is unchanged, docs/BENCHMARKS.md).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("executions", "0037_migrate_rollout")]

    operations = [
        migrations.RemoveIndex(model_name="execution", name="execution_status_lease"),
        migrations.AddIndex(
            model_name="execution",
            index=models.Index(
                condition=models.Q(("status__in", ["pending", "running"])),
                fields=["status", "lease_expires_at"],
                name="execution_status_lease",
            ),
        ),
    ]
