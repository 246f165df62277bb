"""Pauses (docs/design.md §6 Operations): an operator's pause of one execution, and a workflow's
kill switch (a legal hold is another thing: ``retention.holds``). Shared by the API, the
console, the CLI and bulk operations.

A pause is a transition (``pause``) from pending, running, retry_pending, waiting or
awaiting_approval to ``paused``, remembering the status it left (``paused_from``);
resume (``unpause``) returns it there and rings the doorbell. Pausing a running
execution doesn't stop its worker mid-step: the step finishes and checkpoints, then
the worker lets go (``executions.engine.pauses``). A paused execution's gates stay open
but can't be passed: a decision or a signal on it is refused (409) until it is resumed.

A workflow's kill switch is an append-only row per switch (``WorkflowSwitch``: the
audit, with who and why), its latest row the state. While it is thrown, new
executions are accepted and stay ``pending`` (never claimed) and running ones pause
at their next step boundary (by their worker); lifting it resumes the executions the
switch paused (not those an operator paused one by one) and rings for the pending ones.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

import dblocks

from . import acts
from .authoring import registry
from .engine import dispatch, gates, lifecycle, pauses
from .errors import Conflict, Forbidden, InvalidInput, NotFound
from .models import HOLDABLE, OPERATE, TERMINAL, Execution, Status, WorkflowSwitch, execution_for
from .reasons import StuckReason


def _operator(user: AbstractBaseUser, act: str) -> None:
    if not user.has_perm(OPERATE):
        raise Forbidden(f"only operators may {act}")


def _reason(reason: str, hint: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("reason", hint)
    return reason


def execution_pause(*, ref: str, user: AbstractBaseUser, reason: str) -> Execution:
    """Operators: hold ``ref`` where it is. Conflict (409) unless it is pending, running,
    retry_pending, waiting or awaiting_approval; InvalidInput naming ``reason`` without one."""
    _operator(user, "pause executions")
    reason = _reason(reason, "say why it is held")
    with transaction.atomic():
        execution = Execution.objects.select_for_update(no_key=True).get(pk=execution_for(ref).pk)
        acts.require(user, "operate", execution.workflow)
        if execution.status not in HOLDABLE:
            already = "already " if execution.status in TERMINAL or execution.status == Status.PAUSED else ""
            raise Conflict(
                f"{execution.ref} is {already}{execution.status}: only a pending, running, retry_pending, waiting "
                "or awaiting_approval execution can be paused",
                status=execution.status,
            )
        pause_locked(execution, actor=user, reason=reason)
    return execution


def pause_locked(execution: Execution, *, actor: AbstractBaseUser, reason: str, by_workflow: bool = False) -> None:
    """Inside a transaction, ``execution`` locked and holdable: pause it (its worker, if
    one is in a step, finishes the step and lets go)."""
    execution.paused_by_workflow = by_workflow
    lifecycle.apply(
        execution,
        "pause",
        actor=actor,
        reason=reason,
        code=StuckReason.PAUSED,
        payload={"by": "workflow" if by_workflow else "operator"},
        update_fields=("paused_from", "paused_by_workflow"),
    )


def unpause_locked(execution: Execution, *, actor: AbstractBaseUser, reason: str) -> None:
    """Inside a transaction, ``execution`` locked and paused: back to the status it left,
    and the doorbell rung once this commits (a claim takes it if it is runnable)."""
    left = execution.paused_from
    lifecycle.apply(
        execution,
        "unpause",
        actor=actor,
        reason=reason,
        payload={"to": left},
        update_fields=("paused_from", "paused_by_workflow"),
    )
    if left == Status.AWAITING_APPROVAL and gates.pending_of(execution) is None:
        # Its request expired (or was withdrawn) while it was paused: nobody can decide it now.
        lifecycle.apply(
            execution,
            "flag",
            actor=actor,
            reason="its approval request lapsed while it was paused; resume asks again",
            code=StuckReason.APPROVAL_LAPSED,
        )
    dispatch.dispatch_on_commit(execution.pk)


def unpause_refusal(execution: Execution) -> str | None:
    """Why a paused ``execution`` can't be resumed now (its workflow is paused), or None."""
    if pauses.workflow_paused(execution.workflow):
        return f"its workflow {execution.workflow} is paused: resume the workflow"
    return None


def resume_explained(execution: Execution) -> str:
    """The resume preview's sentence for a paused execution."""
    who = "its workflow's kill switch" if execution.paused_by_workflow else "an operator"
    return (
        f"paused by {who} ({execution.status_reason or 'no reason given'}); resume returns it to "
        f"{execution.paused_from or 'the status it left'} and it goes on from {execution.current_step or 'its end'}"
    )


# --- A workflow's kill switch.


def _known(name: str) -> None:
    try:
        registry.latest(name)
    except registry.UnknownWorkflow:
        raise NotFound(f"no workflow {name}") from None


def switch_of(name: str) -> WorkflowSwitch | None:
    """The latest switch of workflow ``name`` (None: never switched)."""
    return WorkflowSwitch.objects.filter(workflow=name).order_by("-id").select_related("actor").first()


def workflow_pause(*, name: str, user: AbstractBaseUser, reason: str) -> None:
    """Operators: throw ``name``'s kill switch (one audited row). New executions stay
    pending; running ones pause at their next step boundary. Pausing a paused workflow
    changes nothing and writes nothing."""
    _operator(user, "pause workflows")
    _known(name)
    acts.require(user, "operate", name)
    reason = _reason(reason, "say why the workflow is paused")
    with transaction.atomic():
        _lock_switches(name)
        switch = switch_of(name)
        if not (switch and switch.paused):
            WorkflowSwitch.objects.create(workflow=name, paused=True, reason=reason, actor=user)


def workflow_resume(*, name: str, user: AbstractBaseUser, reason: str) -> None:
    """Operators: lift ``name``'s kill switch (one audited row): the executions it paused
    return to where they were, and the pending ones are rung for."""
    _operator(user, "resume workflows")
    _known(name)
    acts.require(user, "operate", name)
    reason = _reason(reason, "say why the workflow may run again")
    with transaction.atomic():
        _lock_switches(name)
        switch = switch_of(name)
        if switch and switch.paused:
            WorkflowSwitch.objects.create(workflow=name, paused=False, reason=reason, actor=user)
        held = Execution.objects.select_for_update(no_key=True).filter(
            workflow=name, status=Status.PAUSED, paused_by_workflow=True
        )
        for execution in held.order_by("id"):
            unpause_locked(execution, actor=user, reason=f"workflow {name} resumed: {reason}")
        for pk in Execution.objects.filter(workflow=name, status=Status.PENDING).values_list("pk", flat=True):
            dispatch.dispatch_on_commit(pk)


def _lock_switches(name: str) -> None:
    """Serialise two operators switching the same workflow (a transaction-scoped advisory lock)."""
    dblocks.xact(dblocks.Lock.WORKFLOW_SWITCH, name)
