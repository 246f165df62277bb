from django.db import migrations

from accounts.roles import ensure_roles


def grant_per_action_permissions(apps, schema_editor):
    ensure_roles(apps)


class Migration(migrations.Migration):
    dependencies = [("approvals", "0003_auditentry_alter_approvalrequest_options_and_more")]

    operations = [migrations.RunPython(grant_per_action_permissions, migrations.RunPython.noop)]
