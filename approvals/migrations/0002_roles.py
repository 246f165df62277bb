from django.db import migrations

from accounts.roles import ensure_roles


def create_roles(apps, schema_editor):
    ensure_roles(apps)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0001_initial"),
        ("executions", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_roles, migrations.RunPython.noop)]
