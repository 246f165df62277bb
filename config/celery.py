"""The Celery app. A message only says "look at execution X"; the database is the record."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def _schedule_sweeper(sender: Celery, **kwargs: object) -> None:
    from django.conf import settings

    sender.add_periodic_task(
        float(settings.RUNTIME_SWEEP_SECONDS),
        sender.signature("executions.sweep"),
        name="runtime sweeper",
    )
