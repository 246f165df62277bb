"""Celery tasks: thin wrappers. ``notifications.sweep`` (beat, the control queue)
plans and hands out what is due; ``notifications.send`` sends one delivery, beside
the steps (the default queue)."""

from celery import shared_task
from django.conf import settings

from . import planning, sending


@shared_task(name=planning.SEND, acks_late=True, ignore_result=True)
def send_task(key: str) -> str:
    return sending.deliver(key)


@shared_task(name="notifications.sweep", ignore_result=True)
def sweep() -> int:
    if not settings.KEEL_NOTIFICATIONS and not settings.KEEL_WEBHOOK_URL:
        return 0  # nothing is planned or sent
    planned = planning.plan()
    for key in sending.due():
        send_task.delay(key)
    return planned
