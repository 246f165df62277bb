"""A pause, as the engine sees it (docs/design.md §6 Operations): where a worker lets a paused
execution go, and a workflow's kill switch read at each step boundary.

An operator's pause (``executions.pauses``) is an unfenced transition: it may land while
a worker is in a step. That worker's step finishes and checkpoints all the same (the
runner's held checkpoint, fenced on its lease and ``paused`` left from ``running``),
then it gives the lease back and nothing after the step runs; no effect starts while
paused, because the ledger commits an action as executing only with the execution
``running`` (``ledger._running``, under the row lock the pause also takes). A kill
switch is read before every step (``paused_at_boundary``, with no statement of its own):
a running execution of a paused workflow is paused there by its worker
(``runner._pause_at_boundary``: a fenced transition that also gives the lease back), and
a pending one is never claimed (``leases.acquire``, from its locked read).
"""

from __future__ import annotations

import time

from django.conf import settings
from django.db import connection
from django.db.models import Max, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from ..models import Execution, WorkflowSwitch

# The switches as this process last read them: (monotonic time of the read, paused names).
_seen: tuple[float, frozenset[str]] = (float("-inf"), frozenset())


def workflow_paused(workflow: str, *, fresh: bool = True) -> bool:
    """Whether ``workflow``'s kill switch is thrown. ``fresh``: read now (a resume);
    otherwise as read at most ``RUNTIME_SWITCH_RECHECK_SECONDS`` ago (default 0: read now)."""
    global _seen
    if settings.RUNTIME_SWITCH_RECHECK_SECONDS <= 0:
        return _latest_paused(workflow)
    now = time.monotonic()
    if fresh or now - _seen[0] >= settings.RUNTIME_SWITCH_RECHECK_SECONDS:
        _seen = (now, frozenset(paused_names()))
    return workflow in _seen[1]


def paused_at_boundary(execution: Execution) -> bool:
    """Before each step of a slice: whether ``execution``'s workflow is paused.

    At the default ``RUNTIME_SWITCH_RECHECK_SECONDS=0`` the switch is read with the
    statement that ended the step before — the claim's locked read for the slice's first
    step, each checkpoint's fenced statement for the next (``SWITCH_SQL``, left on the row
    in memory as ``switch_thrown``) — so a boundary costs no statement of its own; a
    reading serves one boundary, and a boundary without one (after a step written through
    the ORM: an artifact, an effect) reads the switch itself. With n > 0: as read at most n
    seconds ago (``workflow_paused``)."""
    if settings.RUNTIME_SWITCH_RECHECK_SECONDS > 0:
        return workflow_paused(execution.workflow, fresh=False)
    seen = getattr(execution, "switch_thrown", None)
    execution.switch_thrown = None
    return _latest_paused(execution.workflow) if seen is None else bool(seen)


# A workflow's latest switch as a scalar subquery (standard SQL quoting: PostgreSQL and
# SQLite alike): true if thrown, false if lifted or never thrown; one probe of the index
# workflow_switch_latest. Its parameter is the workflow's name.
SWITCH_SQL = (
    f'COALESCE((SELECT paused FROM "{WorkflowSwitch._meta.db_table}" WHERE workflow = %s ORDER BY id DESC LIMIT 1), '
    "false)"
)


def switch_thrown_of_row() -> Coalesce:
    """The same reading for a query over executions (the claim's locked read): each row's workflow's switch."""
    latest = WorkflowSwitch.objects.filter(workflow=OuterRef("workflow")).order_by("-id").values("paused")[:1]
    return Coalesce(Subquery(latest), Value(False))


def _latest_paused(workflow: str) -> bool:
    """Whether ``workflow``'s latest switch is thrown (a boundary with no reading, a resume)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {SWITCH_SQL}", [workflow])
        return bool(cursor.fetchone()[0])


def paused_names() -> list[str]:
    """The workflows whose kill switch is thrown now (the latest switch of each; one query)."""
    latest = WorkflowSwitch.objects.values("workflow").annotate(last=Max("id")).values("last")
    return sorted(WorkflowSwitch.objects.filter(id__in=latest, paused=True).values_list("workflow", flat=True))
