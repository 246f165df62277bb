"""The worker registry: one row per worker process, written by its heartbeat (one
statement per interval: ``fleet.heartbeat``), read by ``fleet.registry``."""

from __future__ import annotations

from django.db import models


class Worker(models.Model):
    # One per process (issue 39, item 2): the node name, the pid and a per-process nonce, so two
    # processes started with the same ``-n`` (or the default celery@host) never share a row.
    identity = models.CharField(max_length=200, unique=True)
    node = models.CharField(max_length=200, default="", db_default="", blank=True)  # Celery's node name, w1@host
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
    # What the process counted of the tasks it ran itself (``fleet.heartbeat.Tally``): null when its
    # tasks run in pool children (prefork), whose counts it can't see.
    tasks = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ("identity",)

    def __str__(self) -> str:
        return self.identity
