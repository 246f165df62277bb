"""Why an execution is not moving: one annotation, in SQL, so lists filter, count and
page on it (docs/design.md §4, Stuck reasons).

``annotated()`` is every execution with ``stuck_reason`` (a word of ``REASONS`` or
NULL) and ``stuck_since``. Most reasons are recorded when the runtime stops the execution
(``Execution.reason_code``, written with the transition); the others are read off
the clock: a runnable execution nobody claimed (``no_worker``), a step past its
timeout while its worker still heartbeats (``step_overdue``), a gate past its SLA
(``approval_overdue``); or off the record: a cancelled execution with a compensation
still to be carried out by a person (``compensation_pending``). ``describe`` turns one
annotated execution into the sentence and the suggested action the screens and the
API show — an action that is possible in its status (a failed execution is restarted,
never resumed).

A terminal execution is stuck only until it is handled: a failed one whose retries
ran out until it is restarted, a cancelled one until its compensations are closed.
``counts`` is the one count by reason the list, the summary and the metrics share.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import (
    Case,
    CharField,
    Count,
    DateTimeField,
    Exists,
    ExpressionWrapper,
    F,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.functions import Now

from access import viewer

from . import children
from .authoring import registry
from .engine import pauses, routing
from .models import ACTIVE, COMPENSATION_SUFFIX, Action, Execution, Status
from .plans import plain_plans
from .reasons import StuckReason

R = StuckReason
# Every reason, in the vocabulary's order (the API's filter, the counts).
REASONS = tuple(StuckReason.values)

# What an operator should do about each reason (docs/design.md §6: the `action` of `stuck`).
ACTION = {
    R.RETRYING: "wait",
    R.RATE_LIMITED: "wait",
    R.NO_WORKER: "check_workers",
    R.STEP_OVERDUE: "check_workers",
    R.APPROVAL_OVERDUE: "escalate",
    R.WAITING_OVERDUE: "resume",
    R.UNKNOWN_OUTCOME: "resolve",
    R.PERMISSION_DENIED: "escalate",
    R.RETRIES_EXHAUSTED: "resume",
    R.STEP_ERROR: "escalate",
    R.APPROVAL_LAPSED: "resume",
    R.MODEL_DRIFT: "resolve",
    R.BUDGET_EXCEEDED: "escalate",
    R.DEADLINE_PASSED: "cancel",
    R.COMPENSATION_PENDING: "compensate",
    R.CHILD_FAILED: "restart",  # as the children stand now: children.way_forward
    R.PAUSED: "resume",
    R.LOOP_LIMIT: "escalate",
}

# What a failed execution can have done to it, whatever stopped it: a restart from a step.
FAILED_ACTION = "restart"

# The reasons read off the clock or the ledger; every other one is recorded with the transition.
OBSERVED = (R.NO_WORKER, R.STEP_OVERDUE, R.APPROVAL_OVERDUE, R.COMPENSATION_PENDING)

# Reasons recorded with the transition that stopped the execution, by status.
RECORDED = {
    Status.RETRY_PENDING: (R.RETRYING, R.RATE_LIMITED),
    Status.NEEDS_ATTENTION: tuple(r for r in StuckReason if r not in OBSERVED),
    Status.FAILED: (R.RETRIES_EXHAUSTED,),
    Status.PAUSED: (R.PAUSED,),
}
# The statuses whose one possible stuck reason is the code recorded with them (no
# condition of ``annotated`` before "recorded" can hold for them): ``counts`` counts them
# from the (status, workflow, reason_code) index alone, without reading their rows.
BY_CODE = (Status.NEEDS_ATTENTION, Status.PAUSED)


def _ago(seconds: float) -> ExpressionWrapper:
    return ExpressionWrapper(Now() - Value(timedelta(seconds=seconds)), output_field=DateTimeField())


def _held_pending(paused: list[str]) -> Q:
    """Pending while its workflow's kill switch is thrown (``paused``: those workflows):
    it waits on purpose, ``paused``, not for a worker."""
    return Q(status=Status.PENDING, workflow__in=paused) if paused else Q(pk__in=[])


def _restarted() -> Exists:
    """A restart of it exists (triage.restart): what failed was handled."""
    return Exists(Execution.objects.filter(restarted_from=OuterRef("pk")))


def _planned_compensations() -> QuerySet[Action]:
    """Compensations a cancel recorded that no person has closed yet (the partial index
    ``action_planned_execution`` holds only planned actions: few)."""
    return Action.objects.filter(status=Action.State.PLANNED, key__endswith=COMPENSATION_SUFFIX)


def _observed(paused: list[str]) -> list[tuple[str, Q]]:
    """The reasons read off the clock and the ledger, as conditions on a row that hold
    exactly where ``annotated`` gives that reason: ``annotated``'s order, status by status,
    each condition excluding the earlier ones that can hold for the same rows. Each is a
    range of an index: (status, status_changed_at), (status, lease_expires_at), (status,
    due_at), (status, gate_sla_at), or the few planned compensations."""
    since, now = _ago(settings.RUNTIME_STUCK_SECONDS), Now()
    due_late = _due_late()
    free = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=since)
    return [
        # pending: held by its workflow's kill switch, else unclaimed for too long
        (R.PAUSED, _held_pending(paused)),
        (R.NO_WORKER, Q(status=Status.PENDING, status_changed_at__lt=since) & ~_held_pending(paused)),
        # running: nobody holds it (for too long), else a live lease past the step's timeout
        (R.NO_WORKER, Q(status=Status.RUNNING, status_changed_at__lt=since) & free),
        (R.STEP_OVERDUE, Q(status=Status.RUNNING, lease_expires_at__gt=now, step_deadline__lt=now)),
        # retry_pending and waiting: due too long ago, else (waiting) past its SLA
        (R.NO_WORKER, due_late),
        (R.WAITING_OVERDUE, Q(status=Status.WAITING, gate_sla_at__lt=now) & ~due_late),
        (R.APPROVAL_OVERDUE, Q(status=Status.AWAITING_APPROVAL, gate_sla_at__lt=now)),
        # cancelled with a compensation to close: planned from the few compensations, not every cancelled row
        (R.COMPENSATION_PENDING, Q(status=Status.CANCELLED, pk__in=_planned_compensations().values("execution_id"))),
    ]


def _due_late() -> Q:
    return Q(status__in=[Status.RETRY_PENDING, Status.WAITING], due_at__lt=_ago(settings.RUNTIME_STUCK_SECONDS))


def _recorded(code: str | None = None) -> Q:
    """Where ``annotated`` gives the code recorded with the status as the reason (``code``
    alone, or any): each status that records it, less a retry due too long ago
    (no_worker) and a failed execution a restart handled."""
    conditions = []
    for status, codes in RECORDED.items():
        if code is not None and code not in codes:
            continue
        condition = Q(status=status, reason_code=code) if code is not None else Q(status=status, reason_code__in=codes)
        if status == Status.RETRY_PENDING:
            condition &= ~_due_late()
        if status == Status.FAILED:
            condition &= ~_restarted()
        conditions.append(condition)
    return _any(conditions)


def reason_filter(reason: str) -> Q:
    """The rows ``annotated`` gives ``reason``, as a condition the indexes serve (the
    list's ``reason=`` filter), rather than a filter on the computed reason."""
    found = _recorded(reason)
    for observed, condition in _observed(pauses.paused_names()):
        if observed == reason:
            found |= condition
    return found


# Every execution annotated, by (paused workflows, RUNTIME_STUCK_SECONDS): Django resolves
# the two CASEs in ~7 ms, and a page asks for them up to four times. The clock is read by
# the database (Now()), so a base built once is right whenever it is filtered.
_annotated: dict[tuple, QuerySet[Execution]] = {}


def annotated() -> QuerySet[Execution]:
    """Every execution with ``stuck_reason`` and ``stuck_since`` (NULL when it is moving,
    done, or terminal and handled); filter it as ``Execution.objects``. The reasons'
    conditions exclude one another (``_observed``, ``_recorded``), so a row matches at
    most one of them."""
    paused = sorted(pauses.paused_names())
    # Built through the scoped managers: one base per set of workflows the person looking may not read.
    key = (*paused, settings.RUNTIME_STUCK_SECONDS, viewer.hidden_now())
    base = _annotated.get(key)
    if base is None:
        if len(_annotated) >= 16:  # kill switches thrown and lifted: keep the cache small
            _annotated.clear()
        base = _annotated[key] = _annotate(Execution.objects.all(), paused)
    return base.all()


def _annotate(rows: QuerySet[Execution], paused: list[str]) -> QuerySet[Execution]:
    observed = _observed(paused)
    no_worker = _any(condition for reason, condition in observed if reason == R.NO_WORKER)
    reason = Case(
        *(When(condition, then=Value(reason)) for reason, condition in observed),
        When(_recorded(), then=F("reason_code")),
        default=Value(None),
        output_field=CharField(),
    )
    since = Case(
        When(Q(status__in=[Status.RETRY_PENDING, Status.WAITING]) & no_worker, then=F("due_at")),
        When(Q(status=Status.RUNNING, lease_expires_at__isnull=False) & no_worker, then=F("lease_expires_at")),
        When(Q(status=Status.RUNNING, step_deadline__lt=Now(), lease_expires_at__gt=Now()), then=F("step_deadline")),
        When(Q(status__in=[Status.AWAITING_APPROVAL, Status.WAITING], gate_sla_at__lt=Now()), then=F("gate_sla_at")),
        default=F("status_changed_at"),
        output_field=DateTimeField(),
    )
    return rows.annotate(stuck_reason=reason, stuck_since=since)


def _any(conditions: Iterable[Q]) -> Q:
    found = Q(pk__in=[])
    for condition in conditions:
        found |= condition
    return found


def candidates(*, workflow: str | None = None, live: Iterable[str] = ACTIVE) -> QuerySet[Execution]:
    """The executions that can be stuck, through their indexes rather than every row:
    the ``live`` ones (every live status unless told), the failed ones whose retries ran
    out, the cancelled ones with a compensation still planned."""
    rows = Execution.objects.filter(
        Q(status__in=sorted(live))
        | Q(status=Status.FAILED, reason_code__in=RECORDED[Status.FAILED])
        | Q(status=Status.CANCELLED, pk__in=_planned_compensations().values("execution_id"))
    )
    return rows.filter(workflow=workflow) if workflow else rows


def counts(*, workflow: str | None = None) -> dict[str, int]:
    """How many executions (of ``workflow``) are stuck now for each reason, every reason
    of the vocabulary included: the counts at the top of the list, ``by_reason`` of the
    summary, the ``stuck`` measure and the Prometheus gauge.

    Exactly the reasons ``annotated`` gives, counted status by status from the indexes
    rather than by evaluating its CASE over every live row (at a million executions with
    100,000 live that took ~230 ms): each status's conditions in ``annotated``'s order,
    each later one excluding the earlier ones that can hold for the same rows. Each count
    is a range of an index: (status, status_changed_at), (status, lease_expires_at),
    (status, due_at), (status, gate_sla_at), (status, workflow, reason_code); the few
    rows a range holds are read only where a condition needs another column."""
    counted = dict.fromkeys(REASONS, 0)
    rows = Execution.objects.order_by()
    if workflow:
        rows = rows.filter(workflow=workflow)
    tallies = [(reason, rows.filter(condition)) for reason, condition in _observed(pauses.paused_names())]
    # Recorded with the status (counted from the (status, workflow, reason_code) index): the
    # statuses whose only reason is their code (BY_CODE); retry_pending, less those due too
    # long ago (no_worker, above); failed, less those a restart handled (one restart each).
    recorded = rows.filter(status__in=[*BY_CODE, Status.RETRY_PENDING]).values_list("status", "reason_code")
    failed = rows.filter(status=Status.FAILED, reason_code__in=RECORDED[Status.FAILED]).values_list(
        "status", "reason_code"
    )
    due_too_long = rows.filter(_due_late(), status=Status.RETRY_PENDING).values_list("status", "reason_code")
    restarts = Execution.objects.filter(restarted_from__isnull=False, restarted_from__status=Status.FAILED)
    if workflow:
        restarts = restarts.filter(restarted_from__workflow=workflow)
    restarted = restarts.order_by().values_list("restarted_from__status", "restarted_from__reason_code")
    with plain_plans():
        for reason, found in tallies:
            counted[reason] += found.count()
        for found, sign in ((recorded, 1), (failed, 1), (due_too_long, -1), (restarted, -1)):
            for status, code, n in found.annotate(n=Count("*")).values_list(*found.query.values_select, "n"):
                if code in RECORDED[status]:
                    counted[code] += sign * n
    return counted


@dataclass(frozen=True)
class Stuck:
    reason: str
    since: datetime | None
    detail: str
    action: str
    targets: tuple[str, ...] = ()  # the executions the action is done to, when not this one (restart)

    def as_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "since": self.since, "detail": self.detail, "action": self.action}


def describe(execution: Execution, *, max_attempts: int | None = None) -> Stuck | None:
    """The reason of an execution annotated by ``annotated``, with a sentence and an action."""
    reason = getattr(execution, "stuck_reason", None)
    if not reason:
        return None
    if reason == R.CHILD_FAILED and execution.status == Status.NEEDS_ATTENTION:
        # Read off the children as they stand now: the sentence recorded at the stop may
        # name fewer of them (more failed since) or a child restarted since.
        way = children.way_forward(execution)
        return Stuck(reason, execution.stuck_since, way.detail, way.action, way.children)
    return Stuck(
        reason=reason,
        since=execution.stuck_since,
        detail=_detail(execution, reason, max_attempts),
        action=FAILED_ACTION if execution.status == Status.FAILED else ACTION.get(reason, "escalate"),
    )


def _at(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if moment else "—"


def _detail(e: Execution, reason: str, max_attempts: int | None) -> str:
    of = f" of {max_attempts}" if max_attempts else ""
    why = e.status_reason
    if reason in (R.RETRYING, R.RATE_LIMITED):
        # The attempt that failed, then the one that comes (the list's and the page's "attempt n").
        # Due at due_at; the sweeper rings it on its first pass after that (one every RUNTIME_SWEEP_SECONDS).
        by = e.due_at + timedelta(seconds=settings.RUNTIME_SWEEP_SECONDS) if e.due_at else None
        return (
            f"attempt {e.failed_attempts}{of} failed: {why}; next try (attempt {e.failed_attempts + 1}) due "
            f"{_at(e.due_at)}, started by {_at(by)} (the sweeper rings a due retry every "
            f"{settings.RUNTIME_SWEEP_SECONDS:g} s)"
        )
    if reason == R.NO_WORKER:
        return _no_worker(e)
    if reason == R.STEP_OVERDUE:
        return _overdue(e)
    if reason == R.PAUSED and e.status == Status.PENDING:
        return f"waits: its workflow {e.workflow} is paused; it starts when the workflow is resumed"
    if reason == R.PAUSED and e.status == Status.PAUSED:
        who = "its workflow's kill switch" if e.paused_by_workflow else "an operator"
        return f"held by {who}: {why or 'no reason given'}; resume returns it to {e.paused_from or 'where it was'}"
    if reason == R.APPROVAL_OVERDUE:
        return f"no decision since {_at(e.status_changed_at)}; its SLA passed at {_at(e.gate_sla_at)}"
    if reason == R.WAITING_OVERDUE and e.status == Status.WAITING:
        return f"waiting since {_at(e.status_changed_at)}; its SLA passed at {_at(e.gate_sla_at)}"
    if reason == R.RETRIES_EXHAUSTED and e.status == Status.FAILED:
        return f"{why or 'its retries ran out'}; a failed execution can't be resumed: restart it from a step"
    if reason == R.MODEL_DRIFT:
        return (
            f"{why}; compare the recorded and the rebuilt request on its page, then accept the new request (the "
            "model is asked again for that call) or restore what changed and resume"
        )
    if reason == R.COMPENSATION_PENDING:
        keys = ", ".join(_planned_compensations().filter(execution=e).order_by("id").values_list("key", flat=True))
        return (
            f"cancelled after effects that must be undone by a person: {keys}; carry each out at the "
            "provider, then close it with evidence on the execution page"
        )
    return why or reason.replace("_", " ")


# What a step of each kind waits on while it runs.
_WAITS_ON = {
    "effect": "the provider's answer to its effect",
    "model": "the model's answer",
    "agent": "the model's answer or a tool's",
    "compute": "its own code",
}


def _no_worker(e: Execution) -> str:
    """``no_worker``: since when, and the queue it rings on — named as having no live
    consumer when the worker registry (fleet) knows nobody consumes it."""
    queue = routing.queue_for(e.workflow, e.workflow_version, e.current_step)
    # Asked at most once for a page of rows (executions.selectors.prefetch_payloads), else now.
    live = e.consumed_queues() if hasattr(e, "consumed_queues") else routing.live_queues()
    if live is not None and queue not in live:
        who = f"no live worker consumes the queue {queue!r}: start a worker with -Q {queue}"
    elif live is not None:
        who = f"workers consume its queue {queue!r} but none claimed it: is beat running?"
    else:
        who = f"are workers on its queue {queue!r} and beat running?"
    if e.status in (Status.RETRY_PENDING, Status.WAITING):
        return f"due since {_at(e.due_at)} and no worker has claimed it; {who}"
    if e.status == Status.RUNNING and e.lease_owner:
        return f"the lease of {e.lease_owner} lapsed at {_at(e.lease_expires_at)}; nobody took it over; {who}"
    return f"runnable since {_at(e.status_changed_at)} and no worker has claimed it; {who}"


def _overdue(e: Execution) -> str:
    """``step_overdue``: which step, what it waits on, since when, past which timeout."""
    try:
        workflow = registry.get(e.workflow, e.workflow_version)
        step = workflow.get_step(e.current_step)
        timeout = workflow.timeout_for(step.name)
        if timeout is None:
            raise KeyError(step.name)  # a gate has no timeout of its own
    except (registry.UnknownWorkflow, KeyError):
        return (
            f"{e.current_step} has run past its timeout ({_at(e.step_deadline)}) while {e.lease_owner} still heartbeats"
        )
    started = e.step_deadline - timedelta(seconds=timeout) if e.step_deadline else None
    return (
        f"{step.label} ({e.current_step}) has waited on {_WAITS_ON.get(str(step.kind), 'its own code')} since "
        f"{_at(started)}, past its timeout of {timeout:g} s ({_at(e.step_deadline)}), while {e.lease_owner} "
        "still heartbeats: it may hang"
    )
