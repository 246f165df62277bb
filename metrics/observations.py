"""What the measures count, read from the record (events, step runs, decisions) for one
span of time: ``observed(since, until)``. The rollup folds closed minutes of it; the
measures read the minutes not folded yet the same way, so both agree.

Each observation is dated by the row that completes it — the event, the decision, the
step run's end — never by one that may still be written later, so a minute folded once
is never missing what happened in it. Counts are counted in SQL (by minute); durations
come back one row each (their buckets are ``metrics.histograms``).

The measures (names in the rollup):

* ``started``, ``completed``, ``failed``, ``cancelled``: executions created, and
  transitions into those statuses;
* ``flagged:<reason>``: transitions recorded with a stuck reason's code;
* ``effect.sent``: effects sent for the first time (an ``action.executing`` event that
  is not a re-send); ``effect.duplicate``: effects the runtime found done already when
  it came back to them (a reconciliation that found it, or a provider that answered it
  had the key) — an averted duplicate;
* ``approval.matched``: guarded effects (a gate's grant on their action: never a
  notification or a webhook) sent after the approved version and hash were checked; ``approval.refused``: effect steps the approval check refused;
* ``cancel.violation``: effects sent after their execution was cancelled;
* ``recovery.settled`` / ``recovery.completed``: executions that had been taken over
  after a lost lease, reaching completed, failed or needs_attention / completed;
* durations (seconds): ``stay:<status>`` (a stay in a status, ended by a transition),
  ``approval.latency`` (request made → decided), ``resume`` (a decision that sends the
  execution back to work, or a signal → the next step run started; dated by that run's
  end), ``step:<kind>`` (a step run, started → finished).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import NamedTuple

from django.db.models import Count, DateTimeField, Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce

from approvals.models import Decision
from executions.models import ACTIVE, Action, ExecutionEvent, Status, StepRun
from executions.stuck import REASONS

from .sql import Bucket, Seconds

MINUTE = 60
# Statuses a stay can end in: the terminal ones are never left.
STAYS = tuple(s.value for s in Status if s in ACTIVE)
FLOW = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)
SETTLED = (Status.COMPLETED, Status.FAILED, Status.NEEDS_ATTENTION)
# The ``from`` of an ``action.executing`` event when the effect is sent for the first time.
FIRST_SEND = ("", "planned", "approved")
DECIDED = Q(type="approval.decided", payload__decision__in=["approve", "request_changes"]) | Q(type="wait.received")


class Observation(NamedTuple):
    minute: int  # Unix seconds of the minute's start
    workflow: str
    measure: str
    value: float | None  # a duration; None for a count
    n: int = 1


def observed(since: datetime, until: datetime) -> Iterator[Observation]:
    """Every observation dated in ``[since, until)``, in a fixed number of queries."""
    events = ExecutionEvent.objects.filter(created_at__gte=since, created_at__lt=until).order_by()
    runs = StepRun.objects.filter(finished_at__gte=since, finished_at__lt=until, outcome__in=StepRun.Outcome.values)
    yield from _flow(events)
    yield from _flagged(events)
    yield from _sent(events)
    yield from _counted(events.filter(type="action.succeeded").filter(_found_done()), "effect.duplicate")
    yield from _counted(_after_cancel(events), "cancel.violation")
    yield from _recovered(events)
    yield from _counted(_refused(runs), "approval.refused", at="finished_at")
    yield from _stays(events)
    yield from _approval_latency(since, until)
    yield from _resumes(runs)
    yield from _step_durations(runs)


def _by_minute(rows: QuerySet, *fields: str, at: str = "created_at") -> QuerySet:
    """``rows`` counted by minute, workflow and ``fields``."""
    workflow = "execution__workflow"
    return (
        rows.annotate(minute=Bucket(F(at), MINUTE), wf=F(workflow))
        .values("minute", "wf", *fields)
        .annotate(n=Count("pk"))
        .order_by()
    )


def _counted(rows: QuerySet, measure: str, *, at: str = "created_at") -> Iterator[Observation]:
    for row in _by_minute(rows, at=at):
        yield Observation(row["minute"], row["wf"], measure, None, row["n"])


def _flow(events: QuerySet) -> Iterator[Observation]:
    flow = Q(type="execution.created") | Q(type="transition", to_status__in=FLOW)
    for row in _by_minute(events.filter(flow), "type", "to_status"):
        measure = "started" if row["type"] == "execution.created" else row["to_status"]
        yield Observation(row["minute"], row["wf"], measure, None, row["n"])


def _flagged(events: QuerySet) -> Iterator[Observation]:
    flagged = events.filter(type="transition", payload__code__in=REASONS).annotate(
        code=KeyTextTransform("code", "payload")
    )
    for row in _by_minute(flagged, "code"):
        yield Observation(row["minute"], row["wf"], f"flagged:{row['code']}", None, row["n"])


def _sent(events: QuerySet) -> Iterator[Observation]:
    sent = events.filter(type="action.executing", payload__from__in=FIRST_SEND).annotate(
        sent_from=KeyTextTransform("from", "payload"), action_key=KeyTextTransform("key", "payload")
    )
    # Guarded: an action a gate authorised (its grant recorded); never a notification or a
    # webhook, which start approved because nothing gates them (Action.beside).
    sent = sent.annotate(guarded=Exists(Action.objects.filter(key=OuterRef("action_key")).exclude(gate_ref="")))
    for row in _by_minute(sent, "sent_from", "guarded"):
        yield Observation(row["minute"], row["wf"], "effect.sent", None, row["n"])
        if row["sent_from"] == "approved" and row["guarded"]:
            yield Observation(row["minute"], row["wf"], "approval.matched", None, row["n"])


def _found_done() -> Q:
    return Q(payload__reconciled=True) | Q(payload__receipt__replayed=True)


def _earlier(type_: str, **match) -> Exists:
    """An earlier event of the same execution, of ``type_``."""
    return Exists(
        ExecutionEvent.objects.filter(execution_id=OuterRef("execution_id"), type=type_, id__lt=OuterRef("id"), **match)
    )


def _after_cancel(events: QuerySet) -> QuerySet:
    """The workflow's effects committed as executing after their execution was cancelled (a
    notification or a webhook telling of the cancel is no violation: Action.beside)."""
    executing = events.filter(type="action.executing").filter(_earlier("transition", to_status=Status.CANCELLED))
    executing = executing.annotate(action_key=KeyTextTransform("key", "payload"))
    return executing.exclude(Exists(Action.objects.filter(key=OuterRef("action_key"), beside=True)))


def _recovered(events: QuerySet) -> Iterator[Observation]:
    settled = events.filter(type="transition", to_status__in=SETTLED).filter(_earlier("lease.taken_over"))
    for row in _by_minute(settled, "to_status"):
        yield Observation(row["minute"], row["wf"], "recovery.settled", None, row["n"])
        if row["to_status"] == Status.COMPLETED:
            yield Observation(row["minute"], row["wf"], "recovery.completed", None, row["n"])


def _refused(runs: QuerySet) -> QuerySet:
    return runs.filter(outcome=StepRun.Outcome.FAILED, output__evidence__approval_check="refused")


def _entered() -> Coalesce:
    """When the stay that the outer transition ends began: recorded on the transition
    (``entered_at``, executions.engine.lifecycle), or, for older events, the execution's
    previous event that set a status (a transition, or its creation)."""
    previous = Subquery(
        ExecutionEvent.objects.filter(execution_id=OuterRef("execution_id"), id__lt=OuterRef("id"))
        .exclude(to_status="")
        .order_by("-id")
        .values("created_at")[:1]
    )
    return Coalesce(Cast(KeyTextTransform("entered_at", "payload"), DateTimeField()), previous)


def _durations(rows: QuerySet, measure: str, value, *, at: str, label: str | None = None) -> Iterator[Observation]:
    """One observation per row: ``value`` (seconds), measure ``measure`` or ``measure:<label>``."""
    fields = ["minute", "wf", "seconds", *([label] if label else [])]
    annotated = rows.annotate(minute=Bucket(F(at), MINUTE), seconds=value).values_list(*fields).order_by()
    for minute, workflow, seconds, *labelled in annotated.iterator(chunk_size=5000):
        if seconds is not None:
            name = f"{measure}:{labelled[0]}" if labelled else measure
            yield Observation(minute, workflow, name, max(seconds, 0.0))


def _stays(events: QuerySet) -> Iterator[Observation]:
    # A transition that keeps the status (an operator's migrate) ends no stay.
    transitions = events.filter(type="transition", from_status__in=STAYS).exclude(to_status=F("from_status"))
    transitions = transitions.annotate(wf=F("execution__workflow"), entered=_entered())
    yield from _durations(
        transitions, "stay", Seconds(F("created_at"), F("entered")), at="created_at", label="from_status"
    )


def _approval_latency(since: datetime, until: datetime) -> Iterator[Observation]:
    decided = Decision.objects.filter(created_at__gte=since, created_at__lt=until).annotate(
        wf=F("request__execution__workflow")
    )
    yield from _durations(
        decided, "approval.latency", Seconds(F("created_at"), F("request__created_at")), at="created_at"
    )


def _resumes(runs: QuerySet) -> Iterator[Observation]:
    """Step runs that are the first to start after a decision or a signal, with the time
    from it: the latest such event at or before the run began, with no run between."""
    called = Subquery(
        ExecutionEvent.objects.filter(
            DECIDED, execution_id=OuterRef("execution_id"), created_at__lte=OuterRef("started_at")
        )
        .order_by("-created_at", "-id")
        .values("created_at")[:1]
    )
    between = StepRun.objects.filter(
        execution_id=OuterRef("execution_id"), started_at__gte=OuterRef("called"), started_at__lt=OuterRef("started_at")
    )
    first = (
        runs.annotate(called=called, wf=F("execution__workflow")).filter(called__isnull=False).exclude(Exists(between))
    )
    yield from _durations(first, "resume", Seconds(F("started_at"), F("called")), at="finished_at")


def _step_durations(runs: QuerySet) -> Iterator[Observation]:
    timed = runs.annotate(wf=F("execution__workflow"))
    yield from _durations(timed, "step", Seconds(F("finished_at"), F("started_at")), at="finished_at", label="kind")
