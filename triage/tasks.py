"""Celery tasks of triage: thin wrappers around its services."""

from celery import shared_task

from . import tallies


@shared_task(name="triage.tally", ignore_result=True)
def tally() -> bool:
    """Beat, every sweep: retake the terminal tally when it is older than ``tallies.REFRESH``."""
    return tallies.refresh()
