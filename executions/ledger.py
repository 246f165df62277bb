"""The action ledger: the only way a worker causes an external side effect.

``perform`` commits the action as ``executing`` (fenced, execution re-checked as
running) *before* the call, so the key is durable before anything leaves the
process; the caller commits ``succeeded`` with the receipt together with the step's
checkpoint (``mark_succeeded``). Two commits per effect.

Statuses: planned → approved (by the gate's decision) → executing → succeeded, or
failed / unknown; every change is an ``action.<status>`` event on the execution.

An action found ``executing`` or ``unknown`` from an earlier attempt (or ``failed`` at
a provider that doesn't deduplicate) is reconciled before anything else: looked up at
the provider by its key; re-sent with the same key only when the provider honours
keys; otherwise it stays unknown and the execution ends up with an operator.
The provider is never called inside a database transaction.
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


def plan(execution: Execution, *, step, effect: Effect, approval, actor_label: str) -> Action:
    """Inside the gate's fenced transaction: record the effect the approval will authorise."""
    action, created = Action.objects.get_or_create(
        key=effect.key,
        defaults={
            "execution": execution,
            "step": step.name,
            "type": step.action,
            "args": effect.args,
            "status": Action.State.PLANNED,
            "approval_request": approval,
        },
    )
    if created:
        _history(execution, action, "", Action.State.PLANNED, actor_label, approval_id=approval.pk)
    return action


def authorise(approval, *, approved: bool, actor_label: str, reason: str = "") -> None:
    """Inside the decision's transaction: planned actions become approved, or fail unrun."""
    for action in Action.objects.filter(approval_request=approval, status=Action.State.PLANNED):
        after = Action.State.APPROVED if approved else Action.State.FAILED
        Action.objects.filter(pk=action.pk).update(status=after, last_error="" if approved else reason)
        _history(
            action.execution,
            action,
            action.status,
            after,
            actor_label,
            approval_id=approval.pk,
            **({} if approved else {"error": reason}),
        )


def abandon_unstarted(execution: Execution, *, actor_label: str, reason: str) -> None:
    """Inside a cancel's transaction: actions that never started will never start."""
    for action in Action.objects.filter(execution=execution, status__in=[Action.State.PLANNED, Action.State.APPROVED]):
        Action.objects.filter(pk=action.pk).update(status=Action.State.FAILED, last_error=reason)
        _history(execution, action, action.status, Action.State.FAILED, actor_label, error=reason)


def record_compensations(execution: Execution, *, compensations: dict, actor_label: str) -> list[str]:
    """Inside a cancel's transaction: for each done effect whose type has a compensation
    hook, record the compensation as a planned action (key ``<key>:compensate``)."""
    keys = []
    for action in Action.objects.filter(execution=execution, status=Action.State.SUCCEEDED):
        hook = compensations.get(action.type)
        if hook is None:
            continue
        compensation, created = Action.objects.get_or_create(
            key=f"{action.key}:compensate",
            defaults={
                "execution": execution,
                "step": action.step,
                "type": f"compensate_{action.type}",
                "args": hook(action.args, action.receipt or {}),
                "status": Action.State.PLANNED,
            },
        )
        if created:
            _history(execution, compensation, "", Action.State.PLANNED, actor_label, compensates=action.key)
            keys.append(compensation.key)
    return keys


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
    """Commit the action as executing, or find its outcome. Returns (action, receipt or None).

    The provider is never called inside a transaction: a reconciliation lookup runs
    between two fenced transactions.
    """
    with transaction.atomic():
        execution = _running(lease)
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
        if not _needs_reconciliation(action, effect):
            _resend(action, execution, lease)
            return action, None
    evidence = _lookup(action, effect)
    with transaction.atomic():
        execution = _running(lease)
        action = Action.objects.get(pk=action.pk)
        if action.status == Action.State.SUCCEEDED:
            return action, action.receipt
        if evidence.get("found") is not None:
            before, found = action.status, evidence["found"]
            action.status, action.receipt = Action.State.SUCCEEDED, found
            action.save(update_fields=["status", "receipt", "updated_at"])
            _history(execution, action, before, action.status, lease.owner, receipt=found, reconciled=True)
            return action, found
        if effect.honors_key and "lookup_error" not in evidence:
            _resend(action, execution, lease, evidence=evidence)  # same key: the provider deduplicates
            return action, None
    raise StepFailure(
        FailureKind.OUTCOME_UNKNOWN,
        f"outcome of {action.key} can't be established; not re-sending",
        evidence=evidence,
    )


def _running(lease: Lease) -> Execution:
    """Fence, then make sure the execution still runs: no effect starts otherwise."""
    fence(lease)
    execution = Execution.objects.get(pk=lease.execution_id)
    if execution.status != Status.RUNNING:
        raise ExecutionStopped(f"{execution.ref} is {execution.status}; no effect may start")
    return execution


def _needs_reconciliation(action: Action, effect: Effect) -> bool:
    """An earlier attempt may have acted: executing or unknown, or failed at a provider
    that doesn't deduplicate (its failure answer may have come after it acted)."""
    if action.status in (Action.State.EXECUTING, Action.State.UNKNOWN):
        return True
    return action.status == Action.State.FAILED and not effect.honors_key


def _lookup(action: Action, effect: Effect) -> dict[str, Any]:
    evidence: dict[str, Any] = {"previous_status": action.status}
    if effect.lookup is None:
        evidence["lookup"] = "this provider offers no lookup"
        return evidence
    try:
        found = effect.lookup(effect.key, effect.args)
    except StepFailure as failure:
        evidence["lookup_error"] = failure.message
        return evidence
    evidence["lookup"] = "found" if found is not None else "not found"
    evidence["found"] = found
    return evidence


def _resend(action: Action, execution: Execution, lease: Lease, evidence: dict | None = None) -> None:
    before = action.status
    action.status = Action.State.EXECUTING
    action.attempts += 1
    action.save(update_fields=["status", "attempts", "updated_at"])
    details = {"attempt": action.attempts}
    if evidence:
        details["evidence"] = {k: v for k, v in evidence.items() if k != "found"}
    _history(execution, action, before, Action.State.EXECUTING, lease.owner, **details)


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


def _history(execution: Execution, action: Action, before: str, after: str, actor_label: str, **details: Any) -> None:
    lifecycle.record(
        execution,
        f"action.{after}",
        step=action.step,
        actor_label=actor_label,
        payload={"key": action.key, "type": action.type, "from": before, "to": after, **details},
    )
