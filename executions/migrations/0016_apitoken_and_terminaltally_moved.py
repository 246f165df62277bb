# ApiToken moved to accounts, TerminalTally to triage (issue 19): they leave executions'
# state only; their tables and rows stay (accounts 0001, triage 0001 take them over).

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("executions", "0015_lean_indexes"),
        ("accounts", "0001_initial"),
        ("triage", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ApiToken"),
                migrations.DeleteModel(name="TerminalTally"),
            ],
            database_operations=[],
        ),
    ]
