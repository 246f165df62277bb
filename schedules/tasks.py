"""Beat's tick for schedules: a thin wrapper around ``services.fire_due``."""

from celery import shared_task

from . import services


@shared_task(name="schedules.tick", ignore_result=True)
def tick() -> int:
    return len(services.fire_due())
