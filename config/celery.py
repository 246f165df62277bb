"""The Celery app. A message only says "look at execution X"; the database is the record."""

import os

from celery import Celery
from celery.signals import task_prerun

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Django's system checks run with every manage.py command (migrate on each deploy) and the
# web server's start; a worker running them again imports every view and URL for nothing
# (~1 s of CPU per worker start). An empty CELERY_SKIP_CHECKS= in the environment brings them back.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("config")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Celery's Django fix-up closes every database connection before and after each task
# unless told to reuse them; a new PostgreSQL connection per task costs more than the
# task. Reuse them (recycled every DB_REUSE_MAX tasks), and check them before each task
# instead (close_old_connections with CONN_HEALTH_CHECKS), so a connection a database
# restart killed is replaced, not used.
app.conf.CELERY_DB_REUSE_MAX = 1000
app.autodiscover_tasks()


@task_prerun.connect
def _usable_connections(**kwargs: object) -> None:
    from django.db import close_old_connections

    close_old_connections()


@app.on_after_finalize.connect
def _schedule_sweeper(sender: Celery, **kwargs: object) -> None:
    from django.conf import settings

    sender.add_periodic_task(
        float(settings.RUNTIME_SWEEP_SECONDS),
        sender.signature("executions.sweep"),
        name="runtime sweeper",
    )
    sender.add_periodic_task(  # nothing hangs without a reason (executions.engine.sweeper.flag_unheld)
        float(settings.RUNTIME_UNHELD_SECONDS),
        sender.signature("executions.unheld"),
        name="unheld executions",
    )
    sender.add_periodic_task(
        float(settings.RUNTIME_HOUSEKEEPING_SECONDS),
        sender.signature("metrics.fold"),
        name="metrics rollup",
    )
    sender.add_periodic_task(
        float(settings.RUNTIME_HOUSEKEEPING_SECONDS),
        sender.signature("triage.tally"),
        name="triage tally",
    )
    sender.add_periodic_task(
        float(settings.RUNTIME_HOUSEKEEPING_SECONDS),
        sender.signature("notifications.sweep"),
        name="notifications",
    )
    sender.add_periodic_task(  # schedules (issue 22): the database decides what is due
        float(settings.RUNTIME_HOUSEKEEPING_SECONDS),
        sender.signature("schedules.tick"),
        name="schedules tick",
    )
    from celery.schedules import crontab

    sender.add_periodic_task(
        crontab(minute=17, hour=settings.RUNTIME_RETENTION_HOUR),
        sender.signature("retention.archive"),
        name="retention: the daily archive pass",
    )
