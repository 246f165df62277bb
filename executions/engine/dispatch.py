"""Ringing the doorbell: a Celery message that says "look at execution X".

Messages may be lost, duplicated or late; the lease decides who runs and the sweeper
re-rings for anything runnable that nobody is working on. The message is sent by the
task's name (``ADVANCE``), as beat sends the sweep's: this module knows the record and
the broker, never the task's code (``executions.tasks``). It rings on the execution's
own queue (``executions.engine.routing``: ``RUNTIME_QUEUES``, by workflow or step kind);
a caller that knows the queue passes it, else it is read off the row when routes are
configured (none configured: the default queue, nothing read).
"""

from __future__ import annotations

import logging

from celery import current_app
from django.db import transaction
from django.db.models.functions import Now

from access import viewer

from ..models import Execution
from . import routing

# The Celery task that runs one slice of an execution (executions.tasks.advance).
ADVANCE = "executions.advance"

log = logging.getLogger(__name__)


def dispatch_on_commit(execution_id: int, *, queue: str | None = None) -> None:
    """Inside a transaction: note the dispatch and send the message after commit."""
    Execution.objects.filter(pk=execution_id).update(dispatched_at=Now())
    send_on_commit(execution_id, queue=queue)


def send_on_commit(execution_id: int, *, queue: str | None = None) -> None:
    """Send the message after commit, for a row that already notes the dispatch (an
    execution created with ``dispatched_at``: one statement fewer)."""
    transaction.on_commit(lambda: send(execution_id, queue=queue))


def queue_of(execution_id: int) -> str:
    """The queue an execution rings on now, read off its row (only with routes configured)."""
    if not routing.routes():
        return routing.default_queue()
    row = Execution.objects.filter(pk=execution_id).values("workflow", "workflow_version", "current_step").first()
    if row is None:
        return routing.default_queue()
    return routing.queue_for(row["workflow"], row["workflow_version"], row["current_step"])


@viewer.as_runtime  # after a person's commit, or their eager slice: the runtime's work, not their read
def send(execution_id: int, *, queue: str | None = None) -> None:
    """Send now, on ``queue`` (default: the execution's own). A broker or database failure
    is logged, not raised: the sweeper will re-send."""
    try:
        if current_app.conf.task_always_eager:
            # Eager mode (a user's own tests, the benchmarks' in-process rows): the slice runs
            # here, in the caller, as Celery runs eager tasks; send_task would ignore the
            # setting. The task is looked up by name, its module imported as a worker does
            # (once: importing the default modules again sets Django and its logging up again).
            if ADVANCE not in current_app.tasks:
                current_app.loader.import_default_modules()
            current_app.tasks[ADVANCE].apply(args=(execution_id,))
        else:
            current_app.send_task(ADVANCE, args=(execution_id,), queue=queue or queue_of(execution_id))
    except Exception:
        log.exception("could not enqueue execution %s; the sweeper will re-dispatch it", execution_id)
