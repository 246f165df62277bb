"""A hold, as the engine sees it (DESIGN §6 Operations): where a worker lets a paused
execution go, and a workflow's kill switch read at each step boundary.

An operator's pause (``executions.holds``) is an unfenced transition: it may land while
a worker is in a step. That worker's step finishes and checkpoints all the same (the
runner's held checkpoint, fenced on its lease and ``paused`` left from ``running``),
then it gives the lease back and nothing after the step runs; no effect starts while
paused, because the ledger commits an action as executing only with the execution
``running`` (``ledger._running``, under the row lock the pause also takes). A kill
switch is read before every step: a running execution of a paused workflow is paused
there by its worker (``runner._pause_at_boundary``: a fenced transition that also gives
the lease back), and a pending
one is never claimed (``leases.acquire``).
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db import connection
from django.db.models import Max

from ..models import WorkflowSwitch

# The switches as this process last read them: (monotonic time of the read, paused names).
_seen: tuple[float, frozenset[str]] = (float("-inf"), frozenset())


def workflow_paused(workflow: str, *, fresh: bool = True) -> bool:
    """Whether ``workflow``'s kill switch is thrown. ``fresh``: read now (the claim, a resume);
    otherwise — the runner, before each step — as read at most
    ``RUNTIME_SWITCH_RECHECK_SECONDS`` ago (default 0: read now; n > 0: a step boundary
    costs no query and a switch reaches running executions within n seconds)."""
    global _seen
    if settings.RUNTIME_SWITCH_RECHECK_SECONDS <= 0:
        return _latest_paused(workflow)
    now = time.monotonic()
    if fresh or now - _seen[0] >= settings.RUNTIME_SWITCH_RECHECK_SECONDS:
        _seen = (now, frozenset(paused_names()))
    return workflow in _seen[1]


# The switch read before each step: the workflow's latest switch, one probe of the index
# workflow_switch_latest (standard SQL quoting: PostgreSQL and SQLite alike).
_LATEST_SQL = f'SELECT paused FROM "{WorkflowSwitch._meta.db_table}" WHERE workflow = %s ORDER BY id DESC LIMIT 1'


def _latest_paused(workflow: str) -> bool:
    """Whether ``workflow``'s latest switch is thrown (the runner asks before every step)."""
    with connection.cursor() as cursor:
        cursor.execute(_LATEST_SQL, [workflow])
        row = cursor.fetchone()
    return bool(row and row[0])


def paused_names() -> list[str]:
    """The workflows whose kill switch is thrown now (the latest switch of each; one query)."""
    latest = WorkflowSwitch.objects.values("workflow").annotate(last=Max("id")).values("last")
    return sorted(WorkflowSwitch.objects.filter(id__in=latest, paused=True).values_list("workflow", flat=True))
