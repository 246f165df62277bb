"""The wait gate: an execution waits for a named signal, or a timer, without a worker.

``flow.wait(name, label=…, signal="shipment_confirmed", timeout=…)`` parks the
execution in ``waiting`` with a ``Wait`` row. A signal (``POST /api/executions/{id}/
events`` with ``type: "signal"``, or an operator's form) wakes it exactly once: the
same ``event_id`` again answers the same and changes nothing; a name it isn't waiting
for, or a wait that already timed out, is a Conflict (signals are never buffered).
The payload must meet the schema the wait declares (``flow.wait(…, payload=Model)``;
none declared: no payload), else InvalidInput naming ``payload.<field>`` and nothing
changes; what the schema read becomes the step's output. Past the timeout the sweeper closes the wait:
a signal wait needs attention (``waiting_overdue``), a timer (``flow.sleep``) goes on, and a
wait with ``on_timeout`` continues at that step (its output ``timed_out: true``). What goes on
by itself parks with the execution's ``due_at``, so a worker may wake it first: its visit
closes the wait then (``_close_if_due``).

``Wait.status`` changes only in ``_close``, with its event, in the caller's transaction.
The gate registers itself (``gates.register``) and its event type, the ``signal``
(``events.register``: the body, the answer, ``signal_deliver``), when the app loads.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

import pydantic
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import DateTimeField, Exists, ExpressionWrapper, OuterRef, Q, Value
from django.db.models.functions import Now
from django.utils import timezone

from . import acts
from .authoring import registry
from .authoring.specs import WaitFor
from .authoring.step_context import StepContext
from .authoring.workflow import Step, Workflow
from .engine import dispatch, events, gates, lifecycle
from .errors import Conflict, Forbidden
from .models import OPERATE, Execution, Status, Wait, execution_for
from .reasons import StuckReason
from .storable import STORABLE, STORABLE_JSON

SWEEP_BATCH = 200


class WaitGate(gates.Gate):
    kind = WaitFor.kind

    def visit(self, execution: Execution, step: Step):
        spec = step.spec
        assert isinstance(spec, WaitFor), "the wait gate runs only wait steps"
        wait = Wait.objects.filter(execution=execution, step=step.name, round=execution.round).first()
        if wait is None:
            return None
        if wait.status == Wait.State.WAITING and spec.goes_on_by_itself:
            wait = _close_if_due(wait, spec, execution)  # woken at its due time, before the sweep closed it
        if wait.status == Wait.State.RECEIVED:
            output = {
                "signal": wait.signal,
                "payload": wait.payload,
                "event_id": wait.event_id,
                "sent_by": wait.sent_by.get_username() if wait.sent_by else "",
                "received_at": wait.closed_at.isoformat() if wait.closed_at else None,
            }
            return gates.Passed({**output, "timed_out": False} if spec.on_timeout else output)
        if wait.status == Wait.State.TIMED_OUT and spec.on_timeout:
            return gates.Passed(
                {
                    "signal": wait.signal,
                    "payload": None,
                    "timed_out": True,
                    "timed_out_at": wait.closed_at.isoformat() if wait.closed_at else None,
                }
            )
        # Timed out, withdrawn, or left open by a deadline, and an operator resumed it: wait again.
        return gates.Reopen()

    def open(self, execution: Execution, step: Step, workflow: Workflow, *, actor_label: str) -> gates.Opened:
        spec = step.spec
        assert isinstance(spec, WaitFor), "the wait gate runs only wait steps"
        seconds = spec.timeout_seconds(execution.input, StepContext(execution=execution, workflow=workflow))
        for stale in Wait.objects.select_for_update().filter(execution=execution, status=Wait.State.WAITING):
            _close(stale, "withdraw", execution, actor_label=actor_label, reason="a new wait replaced it")
        wait = Wait.objects.create(
            execution=execution,
            step=step.name,
            round=execution.round,
            signal="|".join(spec.names),  # every signal it ends on ("": a timer)
            due_at=ExpressionWrapper(Now() + Value(timedelta(seconds=seconds)), output_field=DateTimeField()),
        )
        return gates.Opened(
            transition="wait",
            ref=f"wait:{wait.pk}",
            event="wait.opened",
            payload={
                "wait_id": wait.pk,
                "signal": spec.signal,
                "timeout_seconds": seconds,
                **({"on_timeout": spec.on_timeout} if spec.on_timeout else {}),
            },
            # What goes on by itself (a sleep, a timeout that continues) is due then: the
            # execution shows ``due_at`` and is woken at it, like a retry.
            due_at=wait.due_at if spec.goes_on_by_itself else None,
        )

    def withdraw(self, execution: Execution, *, actor, actor_label: str, reason: str) -> dict:
        withdrawn = []
        for wait in Wait.objects.select_for_update().filter(execution=execution, status=Wait.State.WAITING):
            _close(wait, "withdraw", execution, actor=actor, actor_label=actor_label, reason=reason)
            withdrawn.append(wait.pk)
        return {"withdrawn_waits": withdrawn} if withdrawn else {}

    def sweep(self) -> list[int]:
        """Waits past their timeout: a signal wait → needs_attention (waiting_overdue); a timer → on."""
        closed = []
        due = Wait.objects.filter(status=Wait.State.WAITING, due_at__lte=Now()).order_by("due_at")
        for pk, execution_id in due.values_list("pk", "execution_id")[:SWEEP_BATCH]:
            with transaction.atomic():
                execution = Execution.objects.select_for_update(no_key=True).get(pk=execution_id)
                wait = Wait.objects.select_for_update().get(pk=pk)
                if wait.status != Wait.State.WAITING:
                    continue
                here = execution.status == Status.WAITING and execution.current_step == wait.step
                spec = _spec_of(execution, wait)
                if not wait.signal or (spec is not None and spec.on_timeout):
                    _close_due(wait, spec, execution, actor_label="sweeper")
                    if here:
                        lifecycle.apply(execution, "wake", actor_label="sweeper", payload={"wait_id": wait.pk})
                        dispatch.dispatch_on_commit(execution.pk)
                    closed.append(pk)
                    continue
                reason = _timeout_reason(wait)
                _close(wait, "time_out", execution, actor_label="sweeper", reason=reason)
                if here:
                    lifecycle.apply(
                        execution, "flag", actor_label="sweeper", reason=reason, code=StuckReason.WAITING_OVERDUE
                    )
            closed.append(pk)
        return closed

    def holding(self) -> Q:
        return Q(Exists(Wait.objects.filter(execution=OuterRef("pk"), status=Wait.State.WAITING)))

    def pending(self, execution: Execution) -> gates.PendingGate | None:
        wait = Wait.objects.filter(execution=execution, status=Wait.State.WAITING).order_by("-id").first()
        return _pending(wait, goes_on=execution.due_at is not None) if wait is not None else None

    def pending_many(self, executions: list[Execution]) -> dict[int, gates.PendingGate]:
        found: dict[int, gates.PendingGate] = {}
        due = {e.pk: e.due_at for e in executions}
        for wait in Wait.objects.filter(execution__in=executions, status=Wait.State.WAITING).order_by("-id"):
            found.setdefault(wait.execution_id, _pending(wait, goes_on=due.get(wait.execution_id) is not None))
        return found


def _pending(wait: Wait, *, goes_on: bool) -> gates.PendingGate:
    """``goes_on``: past its time it goes on by itself (a sleep, ``on_timeout``: the
    execution parked with that ``due_at``), not to a person."""
    return gates.PendingGate(
        kind=WaitFor.kind,
        step=wait.step,
        ref=f"wait:{wait.pk}",
        waiting_for=f"the signal {' or '.join(_names(wait))}" if wait.signal else "a timer",
        since=wait.opened_at,
        until=wait.due_at,
        details={
            "wait_id": wait.pk,
            "signal": _names(wait)[0] if wait.signal else "",
            **({"signals": _names(wait)} if len(_names(wait)) > 1 else {}),
            "due_at": wait.due_at,
            "goes_on": goes_on,
        },
    )


def signal_deliver(
    *,
    ref: str,
    user: AbstractBaseUser,
    name: str,
    payload: Any,
    event_id: str,
    reason: str = "",
) -> dict[str, str]:
    """Deliver the signal ``name`` to execution ``ref``: operators and the user who
    started it. Wakes it exactly once; the same ``event_id`` again answers the same
    body and changes nothing. Raises Forbidden, NotFound, Conflict (not waiting for
    ``name``, or the event_id was used for another signal)."""
    execution = execution_for(ref)
    if not (user.has_perm(OPERATE) or execution.created_by_id == user.pk):
        raise Forbidden("only operators or the user who started it may signal it")
    if execution.created_by_id != user.pk:  # the starter signals their own; others operate it
        acts.require(user, "operate", execution.workflow)
    replayed = _replay(event_id, execution, name)
    if replayed is not None:
        return replayed
    with transaction.atomic():
        execution = Execution.objects.select_for_update(no_key=True).get(pk=execution.pk)
        replayed = _replay(event_id, execution, name)  # the same post, raced in
        if replayed is not None:
            return replayed
        wait = (
            Wait.objects.select_for_update()
            .filter(execution=execution, step=execution.current_step, status=Wait.State.WAITING)
            .first()
        )
        if execution.status != Status.WAITING or wait is None or name not in _names(wait):
            raise Conflict(_not_waiting(execution, name), status=execution.status)
        payload = _declared(execution, wait).parse_payload(payload, name)  # InvalidInput: nothing changes
        _close(
            wait,
            "receive",
            execution,
            actor=user,
            payload=payload,
            event_id=event_id,
            sent_by=user,
            reason=reason,
            signal=name,  # the one that came, of those it waited for
        )
        lifecycle.apply(execution, "wake", actor=user, payload={"signal": name, "event_id": event_id})
        wait.execution_status = execution.status
        wait.save(update_fields=["execution_status"])
        dispatch.dispatch_on_commit(execution.pk)
    return {"event_id": event_id, "execution_status": execution.status}


def _timeout_reason(wait: Wait) -> str:
    return f"no signal {' or '.join(_names(wait))} by {wait.due_at:%Y-%m-%d %H:%M:%S} UTC (the wait's timeout)"


def _names(wait: Wait) -> list[str]:
    """The signals ``wait`` ends on (the row keeps them ``|``-separated; received: the one that came)."""
    return wait.signal.split("|") if wait.signal else []


def _close_due(wait: Wait, spec: WaitFor | None, execution: Execution, *, actor_label: str) -> None:
    """Close a wait that goes on by itself at its due time: a timer is received, a signal
    wait with ``on_timeout`` timed out (the step then continues there)."""
    if not wait.signal:
        _close(wait, "receive", execution, actor_label=actor_label, payload={"timer": True})
    else:
        reason = _timeout_reason(wait) + (f"; continues at {spec.on_timeout}" if spec and spec.on_timeout else "")
        _close(wait, "time_out", execution, actor_label=actor_label, reason=reason)


def _close_if_due(wait: Wait, spec: WaitFor, execution: Execution) -> Wait:
    """The wait, closed now if it is still open and due (database clock): the worker woke
    the execution at its due time before the sweeper closed it. Either closes it once
    (the row is locked); the other finds it closed."""
    with transaction.atomic():
        locked = Wait.objects.select_for_update().filter(pk=wait.pk, due_at__lte=Now()).first()
        if locked is not None and locked.status == Wait.State.WAITING:
            _close_due(locked, spec, execution, actor_label=execution.lease_owner or "worker")
        return locked or wait


def _spec_of(execution: Execution, wait: Wait) -> WaitFor | None:
    """The wait's spec in the execution's pinned version, or None when this process
    doesn't have that version (then a signal wait past its timeout needs a person)."""
    try:
        return _declared(execution, wait)
    except (registry.UnknownWorkflow, KeyError):
        return None


def _declared(execution: Execution, wait: Wait) -> WaitFor:
    """The spec of the wait step ``wait`` belongs to, in the execution's pinned version."""
    spec = registry.get(execution.workflow, execution.workflow_version).get_step(wait.step).spec
    assert isinstance(spec, WaitFor), "a wait belongs to a wait step of its pinned version"
    return spec


def _replay(event_id: str, execution: Execution, name: str) -> dict[str, str] | None:
    previous = Wait.objects.filter(execution=execution, event_id=event_id).first()  # ids are per execution
    if previous is None:
        return None
    if previous.signal != name:
        raise Conflict(f"event_id {event_id} was already used for another signal of {execution.ref}")
    return {"event_id": event_id, "execution_status": previous.execution_status}


def _not_waiting(execution: Execution, name: str) -> str:
    waiting = Wait.objects.filter(execution=execution, status=Wait.State.WAITING).order_by("-id").first()
    if execution.status == Status.WAITING and waiting is not None:
        now = f"it waits for {' or '.join(_names(waiting))}" if waiting.signal else "it waits for a timer"
        return f"{execution.ref} is not waiting for the signal {name} ({now})"
    last = Wait.objects.filter(execution=execution, signal=name).order_by("-id").first()
    if last is not None and last.status == Wait.State.TIMED_OUT:
        return f"{execution.ref} stopped waiting for {name}: the wait timed out (signals are not kept for later)"
    return f"{execution.ref} is {execution.status}, not waiting for the signal {name}"


def _close(
    wait: Wait,
    transition: str,
    execution: Execution,
    *,
    actor: AbstractBaseUser | None = None,
    actor_label: str = "",
    reason: str = "",
    **fields: Any,
) -> None:
    """The one writer of ``Wait.status``: apply ``transition``, save, append the event."""
    before = wait.status
    getattr(wait, transition)()
    wait.closed_at = timezone.now()
    wait.reason = reason
    for name, value in fields.items():
        setattr(wait, name, value)
    wait.save(update_fields=["status", "closed_at", "reason", *fields])
    lifecycle.record(
        execution,
        f"wait.{wait.status}",
        step=wait.step,
        actor=actor,
        actor_label=actor_label,
        payload={
            "wait_id": wait.pk,
            "signal": wait.signal,
            "from": before,
            "to": wait.status,
            **({"reason": reason} if reason else {}),
            **({"event_id": wait.event_id} if wait.event_id else {}),
        },
    )


# --- the signal, as an event type of ``POST …/events`` (executions.engine.events)

SignalName = Annotated[str, pydantic.Field(min_length=1, max_length=100), STORABLE]


class SignalIn(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")  # a field it does not declare: 422 naming it

    name: SignalName
    payload: Annotated[Any, STORABLE_JSON] = pydantic.Field(
        default=None, description="any JSON; recorded as the wait step's output"
    )
    event_id: events.EventId


class SignalEventIn(SignalIn):
    type: Literal["signal"]


class SignalOut(pydantic.BaseModel):
    event_id: str
    execution_status: str


def _deliver(*, ref: str, user: AbstractBaseUser, body: SignalEventIn) -> dict[str, str]:
    return signal_deliver(ref=ref, user=user, name=body.name, payload=body.payload, event_id=body.event_id)


gates.register(WaitGate())
events.register(
    events.EventType(
        name="signal",
        body=SignalEventIn,
        answer=SignalOut,
        handle=_deliver,
        summary="the signal an execution waits for (operators, and the user who started it); a name it "
        "isn't waiting for is a 409",
    )
)
