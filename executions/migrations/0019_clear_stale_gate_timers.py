"""Issue 17: a gate that opens owns ``due_at`` (executions.gates.park). Before, a wait
or an approval opened after a retry kept the retry's due time, and the sweeper woke
such a waiting execution at every sweep. No gate sets a timer of its own yet, so any
``due_at`` on a parked execution is such a leftover: cleared, the loop stops."""

from django.db import migrations

PARKED = ("waiting", "awaiting_approval")


def clear(apps, schema_editor):
    Execution = apps.get_model("executions", "Execution")
    Execution.objects.filter(status__in=PARKED, due_at__isnull=False).update(due_at=None)


class Migration(migrations.Migration):
    dependencies = [("executions", "0018_stamp_created_at")]

    operations = [migrations.RunPython(clear, migrations.RunPython.noop)]
