"""The action ledger: the only way a worker causes an external side effect.

``perform`` commits the action as ``executing`` (fenced, execution re-checked as
running) *before* the call, so the key is durable before anything leaves the
process; the caller commits ``succeeded`` with the receipt together with the step's
checkpoint (``mark_succeeded``). Two commits per effect.

Statuses: planned → approved (by the gate's decision) → executing → succeeded, or
failed / unknown. ``_move`` is the one writer of ``Action.status``: it applies the
model's transition and appends the ``action.<status>`` event in the caller's
transaction.

An action found ``executing`` or ``unknown`` from an earlier attempt (or ``failed`` at
a provider that doesn't deduplicate) is reconciled before anything else: looked up at
the provider by its key; re-sent with the same key only when the provider honours
keys; otherwise it stays unknown and the execution ends up with an operator.
The provider is never called inside a database transaction. What it answers (a
receipt, a lookup's record) is redacted before it is stored (executions.redaction).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import DurationField, Q, Value
from django.db.models.functions import Now

from ..authoring.workflow import Effect
from ..errors import FailureKind, InputNeeded, NotFound, StepFailure
from ..models import COMPENSATION_SUFFIX, Action, Execution, ExecutionEvent
from ..redaction import redact
from ..storable import as_stored, jsonable, scrubbed, text_refusal
from . import failpoints, lifecycle, tracing
from .leases import Lease, fenced_row

log = logging.getLogger(__name__)


def perform(
    *, lease: Lease, step: str, action_type: str, effect: Effect, gate_ref: str = ""
) -> tuple[Action, dict[str, Any]]:
    """Make sure the effect happened exactly once; return (action, receipt). ``gate_ref``:
    what authorises it (a gate's grant), recorded on an action this call creates.

    Raises StepFailure (already recorded on the action) or ExecutionStopped.
    """
    _check(effect, step)
    with tracing.span("keel.effect", None, **{"keel.action.key": effect.key, "keel.action.type": action_type}) as span:
        try:
            action, receipt = _begin(lease=lease, step=step, action_type=action_type, effect=effect, gate_ref=gate_ref)
        except StepFailure as failure:  # reconciliation could not establish the outcome
            _record_failure(lease=lease, key=effect.key, failure=failure)
            span.set_attribute("keel.action.status", _status_after(failure))
            raise
        if receipt is not None:
            span.set_attribute("keel.action.status", Action.State.SUCCEEDED)
            span.set_attribute("keel.action.recorded", True)  # its outcome was known: nothing sent
            return action, receipt
        failpoints.hit(f"before_effect_call:{step}")
        try:
            answer = effect.call(effect.args, effect.key)
        except StepFailure as failure:
            _record_failure(lease=lease, key=action.key, failure=failure)
            span.set_attribute("keel.action.status", _status_after(failure))
            raise
        except InputNeeded as asked:  # the provider did nothing yet: it waits for a person's answer
            _defer(lease=lease, key=action.key, asked=asked)
            span.set_attribute("keel.action.status", "waiting_input")
            raise
        except Exception as exc:  # what else a call raises (an SDK's connection error): it may have acted first
            raised = StepFailure(
                FailureKind.OUTCOME_UNKNOWN,
                f"the call raised {type(exc).__name__}: {exc}; it may have acted before it did",
                evidence={"raised": type(exc).__name__, "traceback": redact(traceback.format_exc(limit=5))},
            )
            _record_failure(lease=lease, key=action.key, failure=raised)
            span.set_attribute("keel.action.status", Action.State.UNKNOWN)
            raise raised from exc
        receipt = kept(answer)  # outside data, before it is stored
        # Answered: the step's checkpoint commits ``succeeded`` with the receipt.
        span.set_attribute("keel.action.status", Action.State.SUCCEEDED)
        failpoints.hit(f"after_effect_call:{step}")
        return action, receipt


# An effect's key, with room for its compensation's (``<key>:compensate``) in the same column.
KEY_LENGTH = int(Action._meta.get_field("key").max_length or 200) - len(COMPENSATION_SUFFIX)


def _check(effect: Effect, step: str) -> None:
    """An effect the ledger can record, or a TypeError naming what is wrong (a bug in the
    step's code: nothing was sent): a key of 1–KEY_LENGTH storable characters, plain JSON
    args (stored as they are sent)."""
    key = effect.key
    if not isinstance(key, str) or not key.strip() or len(key) > KEY_LENGTH or text_refusal(key):
        what = f"{len(key)} characters" if isinstance(key, str) else type(key).__name__
        raise TypeError(f"{step}: an effect's key is text of 1–{KEY_LENGTH} characters, not {what}; nothing was sent")
    try:
        as_stored(effect.args, f"{step}: Effect.args", convert=False)
    except TypeError as refused:
        raise TypeError(f"{refused}; nothing was sent") from None


def kept(answer: Any) -> Any:
    """What is stored of a provider's answer (an effect's receipt, a lookup's record): it
    happened, so the answer is kept whatever it is — as JSON (``storable.jsonable``;
    nothing: ``{}``; of two keys that become the same text, the last), redacted
    (executions.redaction), with what the database can't hold replaced (``scrubbed``);
    an answer that is no JSON at all becomes ``{"receipt_not_json": why}``."""
    if answer is None:
        return {}
    try:
        return scrubbed(redact(jsonable(answer, distinct_keys=False)))
    except (TypeError, RecursionError) as exc:
        return {"receipt_not_json": f"{type(answer).__name__}: {exc or 'nested too deeply'}"[:500]}


def _status_after(failure: StepFailure) -> str:
    return Action.State.UNKNOWN if failure.kind == FailureKind.OUTCOME_UNKNOWN else Action.State.FAILED


def plan(execution: Execution, *, step, effect: Effect, gate_ref: str, actor_label: str) -> Action:
    """Inside the gate's fenced transaction: record the effect the gate will authorise."""
    action, created = Action.objects.get_or_create(
        key=effect.key,
        defaults={
            "execution": execution,
            "step": step.name,
            "type": step.action,
            "args": effect.args,
            "status": Action.State.PLANNED,
            "gate_ref": gate_ref,
            "honors_key": effect.honors_key,
        },
    )
    if created:
        _history(execution, action, "", Action.State.PLANNED, actor_label, gate=gate_ref)
        return action
    plan_now = {
        "step": step.name,
        "type": step.action,
        "args": effect.args,
        "gate_ref": gate_ref,
        "honors_key": effect.honors_key,
    }
    stale = {name: value for name, value in plan_now.items() if getattr(action, name) != value}
    never_sent = action.status in (Action.State.PLANNED, Action.State.FAILED) and action.attempts == 0
    if stale and never_sent and action.execution_id == execution.pk:
        # Asked again (a new round, or another version's gate after a migration): the plan that
        # was voided or never authorised is this gate's now, never sent under the old one.
        action = Action.objects.select_for_update().get(pk=action.pk)
        _move(
            action,
            "replan",
            actor_label,
            execution=execution,
            fields={**plan_now, "last_error": ""},
            gate=gate_ref,
            replanned=True,
        )
    return action


def authorise(*, gate_ref: str, approved: bool, actor_label: str, reason: str = "", **details: Any) -> None:
    """Inside the gate's transaction: the planned actions it guards become approved, or
    will never run (failed, with ``reason``)."""
    for action in Action.objects.select_for_update().filter(gate_ref=gate_ref, status=Action.State.PLANNED):
        if approved:
            _move(action, "approve", actor_label, gate=gate_ref, **details)
        else:
            _move(action, "void", actor_label, fields={"last_error": reason}, gate=gate_ref, error=reason, **details)


def abandon_unstarted(execution: Execution, *, actor_label: str, reason: str) -> None:
    """Inside a cancel's transaction: actions that never started will never start."""
    unstarted = [Action.State.PLANNED, Action.State.APPROVED]
    # Beside actions decide for themselves (their sender asks whether they are still wanted).
    for action in Action.objects.select_for_update().filter(execution=execution, status__in=unstarted, beside=False):
        _move(action, "void", actor_label, execution=execution, fields={"last_error": reason}, error=reason)


def record_compensations(execution: Execution, *, compensations: dict, actor_label: str) -> list[str]:
    """Inside a cancel's transaction: for each done effect whose type has a compensation
    hook, record the compensation as a planned action (key ``<key>:compensate``)."""
    keys = []
    for action in Action.objects.filter(execution=execution, status=Action.State.SUCCEEDED):
        hook = compensations.get(action.type)
        if hook is None:
            continue
        compensation, created = Action.objects.get_or_create(
            key=f"{action.key}{COMPENSATION_SUFFIX}",
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
    if action.status == Action.State.SUCCEEDED:
        return
    fields = {"receipt": receipt, "last_error": ""}
    _move(action, "succeed", actor_label, execution=execution, fields=fields, receipt=receipt)


# An action whose outcome is not known: it may have acted (in_flight; the sweeper's deadline batch).
IN_DOUBT = (Action.State.EXECUTING, Action.State.UNKNOWN)


def in_flight(execution: Execution, step: str) -> Action | None:
    """The latest action of ``step`` when its outcome is not known (``IN_DOUBT``): it may
    have acted. None when it has a known outcome, or none."""
    latest = Action.objects.filter(execution=execution, step=step, beside=False).order_by("-id").first()
    return latest if latest is not None and latest.status in IN_DOUBT else None


def lose_in_flight(*, lease: Lease, step: str, why: str) -> Action | None:
    """Inside the caller's transaction (fenced here): the action an attempt at ``step``
    left in flight — ``executing`` (now ``unknown``, with ``why``) or ``unknown`` — when
    that attempt can no longer tell its outcome (it ran past its timeout, the deadline
    passed): it may have acted, so it is reconciled or resolved, never taken as failed.
    None when the step's latest action has a known outcome, or it has none."""
    execution = fenced_row(lease)
    latest = in_flight(execution, step)
    if latest is not None and latest.status == Action.State.EXECUTING:
        failure = StepFailure(FailureKind.OUTCOME_UNKNOWN, why)
        fields = {"last_error": f"{failure.kind}: {why}"}
        _move(latest, "lose", lease.owner, execution=execution, fields=fields, error=why, kind=str(failure.kind))
    return latest


def resolve(
    action: Action, *, execution: Execution, outcome: str, fields: dict[str, str], actor, evidence: str
) -> None:
    """Inside the operator's transaction (action locked): the outcome an operator
    established. ``succeeded`` stores the receipt ``fields`` the effect declares, with
    who resolved it and the evidence; ``failed`` stores why."""
    who = actor.get_username()
    event = {"resolved": True, "evidence": evidence, **({"receipt": fields} if fields else {})}
    if outcome == Action.State.SUCCEEDED:
        stored: dict[str, Any] = {"receipt": {**fields, "resolved_by": who, "evidence": evidence}}
        _move(action, "succeed", "", execution=execution, actor=actor, fields=stored, **event)
    else:
        stored = {"last_error": f"resolved as failed by {who}: {evidence}"}
        _move(action, "fail", "", execution=execution, actor=actor, fields=stored, **event)


def resolved_failed(action: Action) -> bool:
    """An operator resolved ``action`` (unknown) as failed: it did not happen, and it is
    not sent again under its key (its step goes on at its ``on_failure``, or fails)."""
    if action.status != Action.State.FAILED:
        return False
    return ExecutionEvent.objects.filter(
        execution_id=action.execution_id, type="action.failed", payload__key=action.key, payload__resolved=True
    ).exists()


def close_compensation(action: Action, *, execution: Execution, outcome: str, actor, evidence: str) -> None:
    """Inside the operator's transaction (action locked): a person carried out the
    planned compensation (``succeeded``: the receipt records who and the evidence) or
    it could not be done (``failed``: why). The caller checked it is a planned
    compensation of a cancelled execution."""
    who = actor.get_username()
    event = {"closed": True, "evidence": evidence}
    if outcome == Action.State.SUCCEEDED:
        fields: dict[str, Any] = {"receipt": {"closed_by": who, "evidence": evidence}}
        _move(action, "close_done", "", execution=execution, actor=actor, fields=fields, **event)
    else:
        fields = {"last_error": f"closed as failed by {who}: {evidence}"}
        _move(action, "close_failed", "", execution=execution, actor=actor, fields=fields, **event)


def _begin(
    *, lease: Lease, step: str, action_type: str, effect: Effect, gate_ref: str = ""
) -> tuple[Action, dict[str, Any] | None]:
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
                "honors_key": effect.honors_key,
                "gate_ref": gate_ref,
            },
        )
        if created:
            _one_per_grant(action)
            _history(execution, action, "", Action.State.EXECUTING, lease.owner, attempt=1, **_gate(gate_ref))
            return action, None
        if action.execution_id != execution.pk:
            raise StepFailure(FailureKind.INVALID_INPUT, f"action key {effect.key} belongs to another execution")
        if action.status == Action.State.SUCCEEDED:
            return action, action.receipt
        if resolved_failed(action):  # a person established it did not happen: final under its key
            raise StepFailure(FailureKind.BUSINESS_REJECTION, action.last_error)
        if not _needs_reconciliation(action, effect):
            _one_per_grant(action)
            _resend(action, execution, lease, honors_key=effect.honors_key)
            return action, None
    evidence = _lookup(action, effect)
    with transaction.atomic():
        execution = _running(lease)
        action = Action.objects.get(pk=action.pk)
        if action.status == Action.State.SUCCEEDED:
            return action, action.receipt
        if evidence.get("found") is not None:
            found = evidence["found"]
            fields = {"receipt": found}
            _move(action, "succeed", lease.owner, execution=execution, fields=fields, receipt=found, reconciled=True)
            return action, found
        if effect.honors_key and "lookup_error" not in evidence:
            _resend(action, execution, lease, honors_key=effect.honors_key, evidence=evidence)  # same key: deduplicated
            return action, None
    raise StepFailure(
        FailureKind.OUTCOME_UNKNOWN,
        f"outcome of {action.key} can't be established; not re-sending",
        evidence=evidence,
    )


# --- Actions beside the steps (issue 22: notifications, webhooks). Sent by a task of
# their own, never under the execution's lease: the action row itself is the claim
# (locked, committed ``executing`` before the call, like every effect). They belong to
# the execution (its ``actions``) but never stop it: ``Action.beside``.


def record_beside(
    execution: Execution, *, key: str, action_type: str, args: dict[str, Any], honors_key: bool, actor_label: str
) -> tuple[Action, bool]:
    """Inside the caller's transaction: record an action to send beside the steps,
    ``approved`` (nothing gates it), unless its key is already recorded. Returns
    (action, created). The key is the business identity: a second call changes nothing."""
    action, created = Action.objects.get_or_create(
        key=key,
        defaults={
            "execution": execution,
            "step": execution.current_step,
            "type": action_type,
            "args": args,
            "status": Action.State.APPROVED,
            "honors_key": honors_key,
            "beside": True,
        },
    )
    if created:
        _history(execution, action, "", Action.State.APPROVED, actor_label, beside=True)
    return action, created


def perform_beside(
    *,
    key: str,
    call: Callable[[dict[str, Any], str], dict[str, Any]],
    in_flight_seconds: float,
    still_wanted: Callable[[Action], str | None],
    actor_label: str,
) -> tuple[Action, StepFailure | None]:
    """Send the beside action ``key`` at most once per attempt; return (action, the
    failure of this attempt or None). Never raises StepFailure.

    - succeeded, or unknown at a provider that doesn't honour keys: nothing is sent
      (an unknown outcome waits for an operator: no blind resend).
    - executing for less than ``in_flight_seconds``: another sender has it; nothing.
    - executing for longer: its sender died mid-call and it may have arrived. Honours
      keys → sent again with the same key; doesn't (SMTP) → ``unknown``, never re-sent.
    - approved or failed: ``still_wanted`` says why it no longer should go (→ failed with
      that reason), or None; then committed ``executing`` before the call.
    After the call: ``succeeded`` with the receipt, ``unknown`` (a lost answer), or
    ``failed`` (refused, or never sent: the caller decides whether to try again).
    """
    with transaction.atomic():
        action = Action.objects.select_for_update().select_related("execution").get(key=key)
        execution = action.execution
        if action.status == Action.State.SUCCEEDED:
            return action, None
        if action.status == Action.State.UNKNOWN and not action.honors_key:
            return action, None
        if action.status == Action.State.EXECUTING:
            if Action.objects.filter(pk=action.pk, updated_at__gt=Now() - _seconds(in_flight_seconds)).exists():
                return action, None
            if not action.honors_key:
                why = "its sender stopped during the call: it may have been delivered, and this provider can't be asked"
                _move(action, "lose", actor_label, execution=execution, fields={"last_error": why}, error=why)
                return action, None
        elif action.status in (Action.State.APPROVED, Action.State.FAILED):
            why_not = still_wanted(action)
            if why_not:  # never sent (again): it says why, not an earlier attempt's error
                transition = "void" if action.status == Action.State.APPROVED else "fail"
                _move(
                    action, transition, actor_label, execution=execution, fields={"last_error": why_not}, error=why_not
                )
                return action, None
        attempts = action.attempts + 1
        _move(action, "begin", actor_label, execution=execution, fields={"attempts": attempts}, attempt=attempts)
    failpoints.hit(f"before_beside_call:{action.type}")
    with tracing.span("keel.effect", execution, **{"keel.action.key": key, "keel.action.type": action.type}) as span:
        try:
            answer, failure = call(action.args, action.key), None
        except StepFailure as failed:
            answer, failure = None, failed
        except Exception as exc:  # a bug in a channel, after it may have sent: unknown, as in ``perform``
            answer = None
            failure = StepFailure(FailureKind.OUTCOME_UNKNOWN, f"the call raised {type(exc).__name__}: {exc}")
        receipt = kept(answer) if failure is None else None
        span.set_attribute("keel.action.status", Action.State.SUCCEEDED if failure is None else _status_after(failure))
    failpoints.hit(f"after_beside_call:{action.type}")
    with transaction.atomic():
        action = Action.objects.select_for_update().select_related("execution").get(pk=action.pk)
        if action.status != Action.State.EXECUTING:  # resolved meanwhile by an operator
            return action, failure
        if failure is None:
            _move(
                action, "succeed", actor_label, execution=action.execution, fields={"receipt": receipt}, receipt=receipt
            )
            return action, None
        unknown = failure.kind == FailureKind.OUTCOME_UNKNOWN
        details: dict[str, Any] = {"error": failure.message, "kind": str(failure.kind)}
        if failure.evidence is not None:
            details["evidence"] = failure.evidence
        fields = {"last_error": f"{failure.kind}: {failure.message}"}
        _move(action, "lose" if unknown else "fail", actor_label, execution=action.execution, fields=fields, **details)
    return action, failure


def _seconds(n: float) -> Value:
    return Value(timedelta(seconds=n), output_field=DurationField())


def _gate(gate_ref: str) -> dict[str, str]:
    return {"gate": gate_ref} if gate_ref else {}


def locked_by_key(key: str) -> tuple[Execution, Action]:
    """Inside the caller's transaction: the execution of action ``key``, then the action,
    each locked (the order of dblocks: an execution's row before its actions). Raises
    NotFound naming the key. What an operator's word on an action (a resolution, a
    compensation closed) reads before it writes."""
    found = Action.objects.filter(key=key).values_list("execution_id", flat=True).first()
    if found is None:
        raise NotFound(f"no action {key}")
    execution = Execution.objects.select_for_update(no_key=True).get(pk=found)
    return execution, Action.objects.select_for_update().get(key=key)


def _running(lease: Lease) -> Execution:
    """Fence, then make sure the execution still runs: no effect starts otherwise."""
    return fenced_row(lease, running=True)


def _one_per_grant(action: Action) -> None:
    """A decision lets exactly one effect of a step through: refuse to begin ``action``
    when another action of its execution and step, under the same grant
    (``approval:12``), went out or may have (executing, unknown, succeeded; failed at a
    provider that doesn't de-duplicate). A repeat of the same key is the ledger's own
    rule (the recorded receipt); this catches an effect whose key changed under one
    decision. PERMISSION: the execution stops for a person, nothing sent."""
    if not action.gate_ref:
        return
    spent = (
        Action.objects.filter(execution_id=action.execution_id, step=action.step, gate_ref=action.gate_ref)
        .exclude(pk=action.pk)
        .filter(
            Q(status__in=(Action.State.EXECUTING, Action.State.UNKNOWN, Action.State.SUCCEEDED))
            | Q(status=Action.State.FAILED, honors_key=False)
        )
        .values_list("key", flat=True)
        .first()
    )
    if spent is not None:
        raise StepFailure(
            FailureKind.PERMISSION,
            f"{action.gate_ref} already let {spent} through; one decision authorises one effect, "
            f"so {action.key} needs a decision of its own",
            evidence={"approval_check": "refused", "grant": action.gate_ref, "spent_by": spent},
        )


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
        answer = effect.lookup(effect.key, effect.args)
    except StepFailure as failure:
        evidence["lookup_error"] = failure.message
        return evidence
    except Exception as exc:  # what else a lookup raises: it established nothing
        evidence["lookup_error"] = f"the lookup raised {type(exc).__name__}: {exc}"
        return evidence
    found = kept(answer) if answer is not None else None
    evidence["lookup"] = "found" if found is not None else "not found"
    evidence["found"] = found
    return evidence


def _resend(
    action: Action, execution: Execution, lease: Lease, *, honors_key: bool, evidence: dict | None = None
) -> None:
    details: dict[str, Any] = {}
    if evidence:
        details["evidence"] = {k: v for k, v in evidence.items() if k != "found"}
    attempts = action.attempts + 1
    fields = {"attempts": attempts, "honors_key": honors_key}
    _move(action, "begin", lease.owner, execution=execution, fields=fields, attempt=attempts, **details)


def _defer(*, lease: Lease, key: str, asked: InputNeeded) -> None:
    """The provider answered that it needs a person's input before it acts: the action
    goes back to ``approved`` (sent again, same key, no reconciliation: nothing was done)."""
    with transaction.atomic():
        execution = fenced_row(lease)
        action = Action.objects.get(key=key, execution=execution)
        _move(action, "defer", lease.owner, execution=execution, input_id=asked.input_id, asks=asked.message)


def _record_failure(*, lease: Lease, key: str, failure: StepFailure) -> None:
    unknown = failure.kind == FailureKind.OUTCOME_UNKNOWN
    with transaction.atomic():
        execution = fenced_row(lease)
        action = Action.objects.filter(key=key, execution=execution).first()
        if action is None:
            return
        details = {"error": failure.message, "kind": str(failure.kind)}
        if failure.evidence is not None:
            details["evidence"] = failure.evidence
        _move(
            action,
            "lose" if unknown else "fail",
            lease.owner,
            execution=execution,
            fields={"last_error": f"{failure.kind}: {failure.message}"},
            **details,
        )


def _move(
    action: Action,
    transition: str,
    actor_label: str,
    *,
    execution: Execution | None = None,
    actor=None,
    fields: dict[str, Any] | None = None,
    **event: Any,
) -> None:
    """The one writer of ``Action.status``: apply ``transition`` (TransitionNotAllowed
    from a state it doesn't leave), save it with the other ``fields`` it sets, and
    append the ``action.<status>`` event with ``event`` in its payload."""
    before = action.status
    getattr(action, transition)()
    for name, value in (fields or {}).items():
        setattr(action, name, value)
    action.save(update_fields=["status", "updated_at", *(fields or {})])
    _history(execution or action.execution, action, before, action.status, actor_label, actor=actor, **event)


def _history(
    execution: Execution, action: Action, before: str, after: str, actor_label: str, *, actor=None, **details: Any
) -> None:
    lifecycle.record(
        execution,
        f"action.{after}",
        step=action.step,
        actor=actor,
        actor_label=actor_label,
        payload={"key": action.key, "type": action.type, "from": before, "to": after, **details},
    )
