"""Ringing the doorbell: a Celery message that says "look at execution X".

Messages may be lost, duplicated or late; the lease decides who runs and the sweeper
re-rings for anything runnable that nobody is working on.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from functools import cache

from django.db import transaction
from django.db.models.functions import Now

from ..models import Execution

log = logging.getLogger(__name__)


def dispatch_on_commit(execution_id: int) -> None:
    """Inside a transaction: note the dispatch and send the message after commit."""
    Execution.objects.filter(pk=execution_id).update(dispatched_at=Now())
    send_on_commit(execution_id)


def send_on_commit(execution_id: int) -> None:
    """Send the message after commit, for a row that already notes the dispatch (an
    execution created with ``dispatched_at``: one statement fewer)."""
    transaction.on_commit(lambda: send(execution_id))


def send(execution_id: int) -> None:
    """Send now. A broker failure is logged, not raised: the sweeper will re-send."""
    from ..tasks import advance

    try:
        advance.delay(execution_id)
    except Exception:
        log.exception("could not enqueue execution %s; the sweeper will re-dispatch it", execution_id)


@cache
def worker_identity() -> str:
    """Who holds a lease: host, pid and a per-process nonce (pids are reused)."""
    return f"worker:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
