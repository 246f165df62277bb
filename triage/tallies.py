"""The counts at the top of the triage list (``summary``: by status and by stuck
reason), cheap at a million executions because the terminal ones are tallied.

A terminal execution never changes again. Every ``REFRESH`` beat's ``triage.tally``
(``triage.tasks``; the doorbell's sweeper knows nothing of it) counts the
terminal ones whose status changed before ``through`` (an hour before it counts, so a
worker whose clock runs behind can't slip a row past it) by status, workflow and
reason code, and keeps the counts in ``TerminalTally``. Counting then reads the tally,
adds the terminal rows changed since ``through`` (the (status, status_changed_at)
index) and counts the live ones directly: exact, without reading every row.

The ledger's counts by status (the ``keel_actions`` gauge) work the same way: an action
that succeeded never changes again, so the same pass tallies the actions that had
succeeded before ``through`` (``LedgerTally``); counting adds those that succeeded since
(the partial index on ``updated_at``, which the ledger's one writer sets with every status)
and counts every other status directly (a partial index of the few not succeeded).
``keel archive`` retakes both tallies when its purge has deleted rows they counted.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from django.db import transaction
from django.db.models import Count, Max
from django.utils import timezone

from executions import stuck
from executions.models import ACTIVE, TERMINAL, Action, Execution, Status

from .models import LedgerTally, TerminalTally

SUCCEEDED = Action.State.SUCCEEDED

REFRESH = timedelta(minutes=10)
MARGIN = timedelta(hours=1)


def refresh(*, force: bool = False) -> bool:
    """Retake the tally when it is older than REFRESH (beat's ``triage.tally`` calls this). True if retaken."""
    taken = TerminalTally.objects.aggregate(at=Max("taken_at"))["at"]
    now = timezone.now()
    if not force and taken is not None and now - taken < REFRESH:
        return False
    through = now - MARGIN
    rows = (
        Execution.objects.filter(status__in=TERMINAL, status_changed_at__lt=through)
        .order_by()
        .values("status", "workflow", "reason_code")
        .annotate(n=Count("*"))
    )
    succeeded = Action.objects.filter(status=SUCCEEDED, updated_at__lt=through).count()
    with transaction.atomic():
        TerminalTally.objects.all().delete()
        TerminalTally.objects.bulk_create(
            TerminalTally(
                through=through, taken_at=now, **{k: r[k] for k in ("status", "workflow", "reason_code", "n")}
            )
            for r in rows
        )
        LedgerTally.objects.all().delete()
        LedgerTally.objects.create(n=succeeded, through=through, taken_at=now)
    return True


def action_counts() -> dict[str, int]:
    """Ledger actions by status, every status included, exactly: the succeeded ones from
    the tally plus those that succeeded since, the others counted."""
    counted = dict.fromkeys(Action.State.values, 0)
    others = Action.objects.exclude(status=SUCCEEDED).order_by().values_list("status")
    counted.update(others.annotate(n=Count("*")).values_list("status", "n"))
    succeeded = Action.objects.filter(status=SUCCEEDED)
    tally = LedgerTally.objects.first()
    if tally is not None:
        counted[SUCCEEDED] = tally.n
        succeeded = succeeded.filter(updated_at__gte=tally.through)
    counted[SUCCEEDED] += succeeded.count()
    return counted


def terminal_counts(
    *, workflow: str | None = None, by: tuple[str, ...] = ("status", "reason_code")
) -> Counter[tuple[str, ...]]:
    """``by`` (of status, workflow, reason_code) → how many terminal executions (of
    ``workflow``), exactly."""
    tally = TerminalTally.objects.all()
    recent = Execution.objects.filter(status__in=TERMINAL)
    if workflow:
        tally, recent = tally.filter(workflow=workflow), recent.filter(workflow=workflow)
    counts: Counter[tuple[str, ...]] = Counter()
    through = TerminalTally.objects.values_list("through", flat=True).first()
    if through is not None:  # the tally, and what became terminal since; else count them all
        for *key, n in tally.values_list(*by, "n"):
            counts[tuple(key)] += n
        recent = recent.filter(status_changed_at__gte=through)
    for *key, n in recent.order_by().values_list(*by).annotate(n=Count("*")).values_list(*by, "n"):
        counts[tuple(key)] += n
    return counts


def counts_by_workflow() -> Counter[tuple[str, ...]]:
    """(workflow, status) → how many executions, exactly: the terminal ones through the
    tally, the live ones counted."""
    counts = terminal_counts(by=("workflow", "status"))
    live = Execution.objects.filter(status__in=ACTIVE).order_by().values_list("workflow", "status")
    for workflow, status, n in live.annotate(n=Count("*")).values_list("workflow", "status", "n"):
        counts[(workflow, status)] += n
    return counts


def summary(*, workflow: str | None = None) -> dict[str, dict[str, int]]:
    """Counts by status (every status, terminal included: the live executions counted
    directly, the terminal ones from the tally plus what became terminal since) and by
    stuck reason (every reason; ``stuck.counts``: the live ones, and the terminal ones
    not handled yet)."""
    by_status = dict.fromkeys(Status.values, 0)
    live = Execution.objects.filter(status__in=ACTIVE, **({"workflow": workflow} if workflow else {})).order_by()
    for status, n in live.values("status").annotate(n=Count("*")).values_list("status", "n"):
        by_status[status] = n
    for (status,), n in terminal_counts(workflow=workflow, by=("status",)).items():
        by_status[status] += n
    return {"by_status": by_status, "by_reason": stuck.counts(workflow=workflow)}
