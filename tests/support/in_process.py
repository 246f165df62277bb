"""Running an execution's steps in the test's own process, as a worker would
(``runner.advance``), for the tests that need no worker process."""

from __future__ import annotations

from django.db.models.functions import Now

from executions.engine import runner
from executions.models import Execution, Status


def run_here(execution: Execution, *, worker: str = "worker:in-process", retries_due: bool = False) -> Execution:
    """``execution`` advanced until it stops, parks or waits, read back; ``retries_due``: a
    retry it schedules is made due at once and taken, as the sweeper would when it is due."""
    for _ in range(10):
        if runner.advance(execution.pk, worker=worker) == "sliced":
            continue
        due = Execution.objects.filter(pk=execution.pk, status=Status.RETRY_PENDING)
        if not (retries_due and due.update(due_at=Now())):
            break
    return Execution.objects.get(pk=execution.pk)
