"""The worker registry: one row per worker process, written by its heartbeat (one
statement per interval: ``fleet.heartbeat``), read by ``fleet.registry``."""

from __future__ import annotations

from django.db import models


class Worker(models.Model):
    identity = models.CharField(max_length=200, unique=True)  # Celery's node name, w1@host
    host = models.CharField(max_length=200)
    pid = models.IntegerField()
    queues = models.JSONField(default=list)
    # The processes that run its tasks (itself with the solo pool, its children with
    # prefork): the executions it holds are read off the live leases they own
    # (executions.engine.leases.worker_identity: worker:<host>:<pid>:…), never written here.
    pids = models.JSONField(default=list)
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)
    stopped_at = models.DateTimeField(null=True, blank=True)  # a clean shutdown
    beats = models.BigIntegerField(default=1)  # heartbeats written: at most one per interval

    class Meta:
        ordering = ("identity",)

    def __str__(self) -> str:
        return self.identity
