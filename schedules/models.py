"""Schedules (issue 22): start executions of a workflow on a cron schedule.

Our own model rather than django-celery-beat's database scheduler: a firing here is a
row in the record (``Firing``, unique per schedule and firing time) and an execution
started under the idempotency key ``schedule:{id}:{firing time}`` — so a beat restart,
two beats, or a tick delivered twice start one execution per firing, and a firing that
passed while beat was down is caught up from the cron expression and the schedule's
``next_fire_at`` (beat's own ``last_run_at`` lives in its process or its file and is
lost with it). Beat only ticks (``schedules.tick``, every ``RUNTIME_SWEEP_SECONDS``);
the database decides what is due.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from access.managers import scoped


class Schedule(models.Model):
    class Overlap(models.TextChoices):
        SKIP = "skip", "Skip a firing while the previous execution is live"
        ALLOW = "allow", "Start one at every firing"

    workflow = models.CharField(max_length=100)
    cron = models.CharField(max_length=200)  # five fields, or six with seconds last (croniter)
    timezone = models.CharField(max_length=64, default="UTC")
    input = models.JSONField(default=dict, blank=True)  # laid over the workflow's scheduled_input
    overlap = models.CharField(max_length=10, choices=Overlap.choices, default=Overlap.SKIP)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    next_fire_at = models.DateTimeField()
    deleted_at = models.DateTimeField(null=True, blank=True)  # deleted: never fires again, its firings kept
    # Who deleted it (the operator audit, issue 39 item 12); NULL for one deleted before it was recorded.
    deleted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    objects = scoped("workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["next_fire_at"], name="schedule_next_fire")]

    def __str__(self) -> str:
        return f"schedule {self.pk}: {self.workflow} at {self.cron} ({self.timezone})"


class Firing(models.Model):
    """One firing time of a schedule and what came of it: started (the execution),
    skipped (overlap), or refused (the workflow refused the input, or the schedule's
    creator is deactivated: the reason)."""

    class Outcome(models.TextChoices):
        STARTED = "started"
        SKIPPED = "skipped"
        REFUSED = "refused"

    schedule = models.ForeignKey(Schedule, on_delete=models.PROTECT, related_name="firings")
    fire_at = models.DateTimeField()
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    execution = models.ForeignKey(
        "executions.Execution", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    detail = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = scoped("schedule__workflow")  # access by workflow (access.managers)

    class Meta:
        ordering = ["-fire_at"]
        constraints = [models.UniqueConstraint(fields=["schedule", "fire_at"], name="one_firing_per_time")]

    def __str__(self) -> str:
        return f"{self.schedule_id}@{self.fire_at:%Y-%m-%dT%H:%M:%SZ}: {self.outcome}"
