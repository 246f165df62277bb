"""The action ledger: the only way a worker causes an external side effect.

``perform`` commits the action as ``executing`` (fenced, execution re-checked as
running) *before* the call, so the key is durable before anything leaves the
process; the caller commits ``succeeded`` with the receipt together with the step's
checkpoint (``mark_succeeded``). Two commits per effect.

An action found ``executing`` or ``unknown`` from an earlier attempt is reconciled
before anything else: looked up at the provider by its key; re-sent with the same key
only when the provider honours keys; otherwise the execution needs an operator.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from . import failpoints, lifecycle
from .errors import FailureKind, StepFailure
from .leases import Lease, fence
from .models import Action, Execution, Status
from .workflow import Effect

log = logging.getLogger(__name__)


class ExecutionStopped(Exception):
    """The execution left ``running`` (cancelled, flagged) under the worker: stop quietly."""


def perform(*, lease: Lease, step: str, action_type: str, effect: Effect) -> tuple[Action, dict[str, Any]]:
    """Make sure the effect happened exactly once; return (action, receipt).

    Raises StepFailure (already recorded on the action) or ExecutionStopped.
    """
    try:
        action, receipt = _begin(lease=lease, step=step, action_type=action_type, effect=effect)
    except StepFailure as failure:  # reconciliation could not establish the outcome
        _record_failure(lease=lease, key=effect.key, failure=failure)
        raise
    if receipt is not None:
        return action, receipt
    failpoints.hit(f"before_effect_call:{step}")
    try:
        receipt = effect.call(effect.args, effect.key)
    except StepFailure as failure:
        _record_failure(lease=lease, key=action.key, failure=failure)
        raise
    failpoints.hit(f"after_effect_call:{step}")
    return action, receipt


def mark_succeeded(action: Action, receipt: dict[str, Any], *, execution: Execution, actor_label: str) -> None:
    """Inside the caller's fenced transaction: the outcome is known and recorded.

    A no-op for an action already recorded as succeeded (found by reconciliation).
    """
    before = action.status
    if before == Action.State.SUCCEEDED:
        return
    Action.objects.filter(pk=action.pk).update(status=Action.State.SUCCEEDED, receipt=receipt, last_error="")
    _history(execution, action, before, Action.State.SUCCEEDED, actor_label, receipt=receipt)


def _begin(*, lease: Lease, step: str, action_type: str, effect: Effect) -> tuple[Action, dict[str, Any] | None]:
    """Commit the action as executing, or find its outcome. Returns (action, receipt or None)."""
    with transaction.atomic():
        fence(lease)
        execution = Execution.objects.get(pk=lease.execution_id)
        if execution.status != Status.RUNNING:
            raise ExecutionStopped(f"{execution.ref} is {execution.status}; no effect may start")
        action, created = Action.objects.get_or_create(
            key=effect.key,
            defaults={
                "execution": execution,
                "step": step,
                "type": action_type,
                "args": effect.args,
                "status": Action.State.EXECUTING,
                "attempts": 1,
            },
        )
        if created:
            _history(execution, action, "", Action.State.EXECUTING, lease.owner, attempt=1)
            return action, None
        if action.execution_id != execution.pk:
            raise StepFailure(FailureKind.INVALID_INPUT, f"action key {effect.key} belongs to another execution")
        if action.status == Action.State.SUCCEEDED:
            return action, action.receipt
        if action.status in (Action.State.EXECUTING, Action.State.UNKNOWN):
            receipt = _reconcile(action=action, effect=effect, execution=execution, actor_label=lease.owner)
            if receipt is not None:
                return action, receipt
        before = action.status
        action.status = Action.State.EXECUTING
        action.attempts += 1
        action.save(update_fields=["status", "attempts", "updated_at"])
        _history(execution, action, before, Action.State.EXECUTING, lease.owner, attempt=action.attempts)
        return action, None


def _reconcile(*, action: Action, effect: Effect, execution: Execution, actor_label: str) -> dict[str, Any] | None:
    """An earlier attempt may have acted: ask the provider before doing anything else.

    Returns the receipt when the provider knows the key (recorded here as succeeded).
    Returns None when it is safe to send again with the same key. Raises
    StepFailure(OUTCOME_UNKNOWN) when it is not.
    """
    evidence: dict[str, Any] = {"previous_status": action.status}
    if effect.lookup is not None:
        try:
            found = effect.lookup(effect.key, effect.args)
        except StepFailure as failure:
            found, evidence["lookup_error"] = None, failure.message
        else:
            evidence["lookup"] = "found" if found else "not found"
            if found is not None:
                before = action.status
                action.status, action.receipt = Action.State.SUCCEEDED, found
                action.save(update_fields=["status", "receipt", "updated_at"])
                _history(execution, action, before, action.status, actor_label, receipt=found, reconciled=True)
                return found
    if effect.honors_key and "lookup_error" not in evidence:
        return None
    raise StepFailure(
        FailureKind.OUTCOME_UNKNOWN,
        f"outcome of {action.key} can't be established; not re-sending",
        evidence=evidence,
    )


def _record_failure(*, lease: Lease, key: str, failure: StepFailure) -> None:
    unknown = failure.kind == FailureKind.OUTCOME_UNKNOWN
    status = Action.State.UNKNOWN if unknown else Action.State.FAILED
    with transaction.atomic():
        fence(lease)
        execution = Execution.objects.get(pk=lease.execution_id)
        action = Action.objects.filter(key=key, execution=execution).first()
        if action is None:
            return
        before = action.status
        Action.objects.filter(pk=action.pk).update(status=status, last_error=f"{failure.kind}: {failure.message}")
        details = {"error": failure.message, "kind": str(failure.kind)}
        if failure.evidence is not None:
            details["evidence"] = failure.evidence
        _history(execution, action, before, status, lease.owner, **details)


def _history(
    execution: Execution, action: Action, before: str, after: str, actor_label: str, **details: Any
) -> None:
    lifecycle.record(
        execution,
        f"action.{after}",
        step=action.step,
        actor_label=actor_label,
        payload={"key": action.key, "type": action.type, "from": before, "to": after, **details},
    )
