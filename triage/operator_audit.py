"""The operator audit: every act a person took on executions, across executions.

An act is an ``ExecutionEvent`` with an actor (a user) of one of these shapes, each
written by the service that made the change, in its transaction:

| act | the event | service |
|---|---|---|
| cancel, resume | a ``transition`` by a user | ``execution_cancel``, ``execution_resume`` |
| redraft | the ``resume_after_decision`` transition marked ``redraft`` | ``approvals.services.execution_redraft`` |
| retry_now (and any other ``operator.<act>``) | ``operator.<act>`` | ``execution_retry_now`` |
| resolve | ``action.succeeded`` / ``action.failed`` with ``resolved`` | ``action_resolve`` |
| close_compensation | ``action.succeeded`` / ``action.failed`` with ``closed`` | ``compensations.action_close`` |
| restart | ``execution.restarted`` (on the failed execution) | ``restart.execution_restart`` |
| signal | ``wait.received`` | ``waits.signal_deliver`` |
| pause, unpause | a ``transition`` by a user (an operator's hold, or a workflow resumed) | ``executions.pauses`` |
| migrate | the ``migrate`` transition (another version of its workflow; before → after: the versions) | ``triage.migration`` |
| pause by a kill switch | the worker's ``pause`` transition marked ``by: workflow``, its actor the switch's thrower | ``runner._pause_at_boundary`` |
| hold, release_hold (legal holds) | ``hold.placed`` / ``hold.released`` | ``retention.holds`` |

Acts on no one execution come from their own records and are listed beside them by
``console.audit_feed`` (the page and the CSV; the API's cursor walks the events alone):

| act | the record | service |
|---|---|---|
| workflow_pause, workflow_resume (the kill switch) | a ``WorkflowSwitch`` row (append-only) | ``executions.pauses`` |
| schedule_create, schedule_delete | the ``Schedule`` row's ``created_*`` / ``deleted_*`` | ``schedules.services`` |
| archive (its acts went into the archive with it) | the ``ExecutionTombstone`` | ``retention.archiver`` |

Left out, because another row or another audit already tells them: a decision's
transitions (``resume_after_decision``, and the cancel that follows a rejection:
approvals' audit trail has the decision), the ``wake`` after a signal (the signal's
row), the ``resume``/``fail`` right after a resolve or an accepted model request
(their own rows), and the
``operator.bulk_item`` marker, which gives its batch to the act it follows, and the
``via.cli`` marker (``VIA_CLI``), which says an event was written by ``manage.py keel …
--as USER`` rather than the API or a screen (``cli.trace``): the act it names shows
``via`` ``cli``. A new operator act shows up here when it is recorded as
``operator.<act>`` with an actor.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Case, CharField, Exists, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, Substr

from executions.models import ExecutionEvent, WorkflowSwitch, pk_from_ref, ref_for
from executions.storable import text_refusal

from .bulk import ITEM_EVENT

ACTIONS = (
    "cancel",
    "resume",
    "fail",
    "retry_now",
    "resolve",
    "close_compensation",
    "restart",
    "accept_request",
    "redraft",
    "signal",
    "raise_budget",
    "pause",
    "unpause",
    "hold",
    "release_hold",
    "migrate",
)
# Acts of the page and the CSV that are not execution events (``console.audit_feed``).
ARCHIVE = "archive"  # an archived execution: its acts went with it (issue 39 item 10)
OTHER_ACTIONS = ("workflow_pause", "workflow_resume", "schedule_create", "schedule_delete", ARCHIVE)
HOLD_EVENTS = {"hold.placed": "hold", "hold.released": "release_hold"}
KILL_SWITCH = "kill switch"
PAGE_SIZE = 50
# The marker ``cli.trace`` appends beside each event an act of the command line wrote:
# payload ``{"event": <that event's id>, "command": <the keel command>}``.
VIA_CLI = "via.cli"
BATCH = re.compile(r"^BULK-[0-9A-F]{12}$")


@dataclass
class Filters:
    """The audit's filters from a query string; a bad value is ignored and named in ``errors``."""

    actor: str = ""
    action: str = ""
    execution: str = ""  # RUN_0042
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    batch: str = ""
    errors: list[str] = field(default_factory=list)

    def as_query(self) -> dict[str, str]:
        """The valid filters, as GET parameters (for the pager and the CSV link)."""
        out = {
            "actor": self.actor,
            "action": self.action,
            "execution": self.execution,
            "from": self.date_from.isoformat() if self.date_from else "",
            "to": self.date_to.isoformat() if self.date_to else "",
            "batch": self.batch,
        }
        return {k: v for k, v in out.items() if v}


def filters_from(params: Mapping[str, Any]) -> Filters:
    """Read the filters (``actor``, ``action``, ``execution``, ``from``, ``to``, ``batch``)."""
    errors: list[str] = []

    def text(name: str, limit: int) -> str:
        raw = str(params.get(name) or "").strip()
        if reason := text_refusal(raw):
            errors.append(f"Ignored the {name} filter: it {reason}.")
            return ""
        if len(raw) > limit:
            errors.append(f"Ignored the {name} filter: longer than {limit} characters.")
            return ""
        return raw

    def date(name: str) -> dt.date | None:
        raw = text(name, 40)
        if not raw:
            return None
        try:
            return dt.date.fromisoformat(raw)
        except ValueError:
            errors.append(f"Ignored the {name} date {raw!r}: use YYYY-MM-DD.")
            return None

    action = text("action", 40)
    if action and action not in ACTIONS + OTHER_ACTIONS:
        errors.append(f"Ignored the action filter {action!r}: use one of {', '.join(ACTIONS + OTHER_ACTIONS)}.")
        action = ""
    execution = text("execution", 40)
    if execution:
        pk = pk_from_ref(execution)
        if pk is None:
            errors.append(f"Ignored the execution filter {execution!r}: an execution id looks like RUN_0042.")
            execution = ""
        else:
            execution = ref_for(pk)
    batch = text("batch", 40).upper()
    if batch and not BATCH.match(batch):
        errors.append(f"Ignored the batch filter {batch!r}: a batch looks like BULK-0123456789AB.")
        batch = ""
    filters = Filters(
        actor=text("actor", 150),
        action=action,
        execution=execution,
        date_from=date("from"),
        date_to=date("to"),
        batch=batch,
        errors=errors,
    )
    if filters.date_from and filters.date_to and filters.date_from > filters.date_to:
        errors.append(f"The from date {filters.date_from} is after the to date {filters.date_to}: nothing can match.")
    return filters


def _payload(key: str) -> KeyTextTransform:
    return KeyTextTransform(key, "payload")


def acts(filters: Filters | None = None) -> QuerySet[ExecutionEvent]:
    """The operator acts matching ``filters``, newest first, annotated with ``action``,
    ``reason`` and ``batch`` (the bulk batch it belongs to, or NULL)."""
    filters = filters or Filters()
    same_execution = ExecutionEvent.objects.filter(execution=OuterRef("execution"))
    rejected = same_execution.filter(type="approval.decided", payload__decision="reject")
    previous = same_execution.filter(id__lt=OuterRef("id")).order_by("-id").values("id")[:1]
    after_resolve = ExecutionEvent.objects.filter(id=OuterRef("previous")).filter(
        Q(type__startswith="action.", payload__resolved=True) | Q(type="operator.accept_request")
    )
    marker = same_execution.filter(type=ITEM_EVENT).annotate(event=_payload("event"))
    marker = marker.filter(event=Cast(OuterRef("id"), CharField()))
    from_cli = same_execution.filter(type=VIA_CLI).annotate(event=_payload("event"))
    from_cli = from_cli.filter(event=Cast(OuterRef("id"), CharField()))
    transitions = Q(type="transition") & (
        ~Q(payload__transition__in=["resume_after_decision", "wake"]) | Q(payload__redraft=True)
    )
    # A kill switch's pause is its worker's (no actor): the person is the switch's thrower.
    kill_switch_pause = Q(actor__isnull=True, type="transition", payload__transition="pause", payload__by="workflow")
    switch = WorkflowSwitch.objects.filter(
        workflow=OuterRef("execution__workflow"), paused=True, created_at__lte=OuterRef("created_at")
    ).order_by("-id")
    rows = (
        ExecutionEvent.objects.filter(
            Q(actor__isnull=False)
            & (
                transitions
                | (Q(type__startswith="operator.") & ~Q(type=ITEM_EVENT))
                | Q(type__startswith="action.", payload__resolved=True)
                | Q(type__startswith="action.", payload__closed=True)
                | Q(type="execution.restarted")
                | Q(type="wait.received")
                | Q(type__in=HOLD_EVENTS)
            )
            | kill_switch_pause
        )
        .annotate(
            previous=Subquery(previous),
            switched_by=Case(
                When(kill_switch_pause, then=Subquery(switch.values("actor__username")[:1])),
                default=Value(""),
                output_field=CharField(),
            ),
            switch_reason=Case(
                When(kill_switch_pause, then=Subquery(switch.values("reason")[:1])),
                default=Value(""),
                output_field=CharField(),
            ),
            action=Case(
                *(When(type=t, then=Value(a)) for t, a in HOLD_EVENTS.items()),
                When(type="transition", payload__redraft=True, then=Value("redraft")),
                When(type="transition", then=_payload("transition")),
                When(type__startswith="operator.", then=Substr("type", len("operator.") + 1)),
                When(type__startswith="action.", payload__closed=True, then=Value("close_compensation")),
                When(type__startswith="action.", then=Value("resolve")),
                When(type="execution.restarted", then=Value("restart")),
                When(type="wait.received", then=Value("signal")),
                output_field=CharField(),
            ),
            reason=Coalesce(
                _payload("instruction"), _payload("reason"), _payload("evidence"), Value(""), output_field=CharField()
            ),
            batch=Subquery(marker.values(b=_payload("batch"))[:1]),
            via=Case(When(Exists(from_cli), then=Value("cli")), default=Value(""), output_field=CharField()),
        )
        .exclude(Q(type="transition", payload__transition="cancel") & Exists(rejected))
        # A resume that is part of a resolution or an accepted request: marked on it (``follows``),
        # or, recorded before the mark, the event right after that act's.
        .exclude(Q(type="transition") & (Q(payload__has_key="follows") | Exists(after_resolve)))
        .select_related("actor")
    )
    if filters.actor:
        rows = rows.filter(
            Q(actor__username__iexact=filters.actor) | Q(actor__isnull=True, switched_by__iexact=filters.actor)
        )
    if filters.action:
        rows = rows.filter(action=filters.action)
    if filters.execution:
        rows = rows.filter(execution_id=pk_from_ref(filters.execution))
    if filters.date_from:
        rows = rows.filter(created_at__date__gte=filters.date_from)
    if filters.date_to:
        rows = rows.filter(created_at__date__lte=filters.date_to)
    if filters.batch:
        rows = rows.filter(batch=filters.batch)
    return rows.order_by("-id")


@dataclass(frozen=True)
class Act:
    """One row of the audit, as plain values (the page, the CSV and the API)."""

    id: int
    at: dt.datetime
    execution: str
    actor: str
    action: str
    reason: str
    before: str
    after: str
    subject: str  # the action key resolved, the signal received
    batch: str
    via: str = ""  # "cli": by manage.py keel --as (else the API or a screen)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": self.at,
            "execution": self.execution,
            "actor": self.actor,
            "action": self.action,
            "reason": self.reason,
            "before": self.before,
            "after": self.after,
            "subject": self.subject,
            "batch": self.batch or None,
            "via": self.via or None,
        }


def act_of(event: ExecutionEvent) -> Act:
    """``event`` (a row of ``acts``) as an Act: before → after is the status the act changed."""
    payload = event.payload if isinstance(event.payload, dict) else {}
    before, after, subject = event.from_status, event.to_status, ""
    if event.type == "operator.retry_now":
        before, after = "retry_pending", "retry_pending, due now"
    elif event.type.startswith("action."):
        before, after, subject = str(payload.get("from", "")), str(payload.get("to", "")), str(payload.get("key", ""))
    elif event.type == "execution.restarted":  # the failed one stays failed; the restart is a new execution
        before, after, subject = (
            "failed",
            f"restarted as {payload.get('restarted_as', '')}",
            str(payload.get("from_step", "")),
        )
    elif event.type == "wait.received":  # the signal wakes it in the same transaction
        before, after, subject = "waiting", "running", str(payload.get("signal", ""))
    elif event.type.startswith("operator."):
        before, after = str(payload.get("from", "")), str(payload.get("to", ""))
    elif event.type == "transition" and payload.get("transition") == "migrate":  # the versions it moved between
        before, after = f"v{payload.get('from_version', '?')}", f"v{payload.get('to_version', '?')}"
        subject = f"{event.from_status} → {event.to_status}" if event.from_status != event.to_status else ""
    elif event.type in HOLD_EVENTS:  # a legal hold: retention keeps it whatever its status
        held = event.type == "hold.placed"
        before, after = ("", "on legal hold") if held else ("on legal hold", "")
    actor = event.actor.get_username() if event.actor else event.actor_label
    reason = event.reason or ""
    if event.actor is None and payload.get("by") == "workflow":  # a kill switch's pause
        actor, subject = getattr(event, "switched_by", "") or actor, KILL_SWITCH
        reason = getattr(event, "switch_reason", "") or reason
    return Act(
        id=event.pk,
        at=event.created_at,
        execution=ref_for(event.execution_id),
        actor=actor,
        action=event.action,
        reason=reason,
        before=before,
        after=after,
        subject=subject,
        batch=event.batch or "",
        via=getattr(event, "via", "") or "",
    )
