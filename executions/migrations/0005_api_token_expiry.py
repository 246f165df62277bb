"""API tokens expire: every existing token gets 90 days from its creation (docs/api.md)."""

import datetime

from django.db import migrations, models
from django.db.models import F


def expire_existing(apps, schema_editor):
    ApiToken = apps.get_model("executions", "ApiToken")
    ApiToken.objects.filter(expires_at__isnull=True).update(expires_at=F("created_at") + datetime.timedelta(days=90))


class Migration(migrations.Migration):
    dependencies = [("executions", "0004_executionevent_refuse_truncate")]

    operations = [
        migrations.AlterModelOptions(name="apitoken", options={"ordering": ["id"]}),
        migrations.AddField(
            model_name="apitoken",
            name="prefix",
            field=models.CharField(blank=True, default="", max_length=12),
        ),
        migrations.AddField(model_name="apitoken", name="expires_at", field=models.DateTimeField(null=True)),
        migrations.RunPython(expire_existing, migrations.RunPython.noop),
        migrations.AlterField(model_name="apitoken", name="expires_at", field=models.DateTimeField()),
    ]
