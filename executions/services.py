"""Writes on executions: start, cancel, resume, resolve; and the runtime services gates
use to move an execution on (continue, rewind, cancel). Shared by the API, the screens,
the CLI and the gates."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from decimal import ROUND_DOWN, Decimal
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models.functions import Now

from access import viewer

from . import acts, blockers, pauses, rollouts
from . import children as children_module
from .agent.modelclient import get_model_client
from .authoring import registry
from .engine import costs, dispatch, gates, ledger, lifecycle, starting
from .errors import Conflict, Forbidden, InvalidInput
from .models import OPERATE, TERMINAL, Action, Execution, ExecutionTombstone, Status, execution_for
from .reasons import StuckReason

input_digest = starting.input_digest


def execution_start(
    *,
    user: AbstractBaseUser,
    workflow: str,
    input: dict[str, Any],
    idempotency_key: str | None = None,
    budget_usd: Any = None,
    version: Any = None,
) -> tuple[Execution, bool]:
    """Start an execution of ``workflow``: of ``version`` (one of its registered versions),
    or of the version its rollout chooses (``executions.rollouts``: the latest deployed
    version when it has none).

    Returns (execution, created). The idempotency key is scoped to the user: the same
    key with the same input returns the original execution; with other input, Conflict.
    ``budget_usd`` (optional, USD, > 0 and at most 1e6): no model call of it or of its
    descendants starts unless its worst case fits (executions.engine.costs); not part of
    the input's identity (a replayed key returns the original with its budget).
    Raises InvalidInput naming the field for an unknown workflow or version, bad input or
    budget: a bad budget and bad input fields are refused together (issue 39, item 15).
    """
    refused: list[tuple[str, str]] = []
    budget = None
    if budget_usd is not None:
        with _refusals(refused):
            budget = usd_amount("budget_usd", budget_usd)
    try:
        # Without a version: the one its rollout chooses (executions.rollouts; the latest without one),
        # or, for a key already used, the version that start chose (a retry parses as it did).
        flow = rollouts.choose(workflow, seed=f"{user.pk}:{idempotency_key}" if idempotency_key else "")
        existing = (
            Execution.objects.filter(created_by=user, idempotency_key=idempotency_key).first()
            if idempotency_key
            else None
        )
        pinned = existing.workflow_version if existing is not None and existing.workflow == workflow else None
        if version is None and pinned in registry.versions(workflow):
            flow = registry.get(workflow, pinned)
    except registry.UnknownWorkflow as exc:  # one a person may not read is unknown to them
        raise InvalidInput.of([("workflow", str(exc)), *refused]) from None
    acts.require(user, "start", workflow)  # one they read but may not start: 403
    if version is not None:
        flow = _version_of(workflow, version)
    if budget is not None:
        with _refusals(refused):
            _budgetable(flow, "budget_usd")
    if not isinstance(input, dict):
        raise InvalidInput.of([*refused, ("input", "must be a JSON object")])
    assert flow.parse_input is not None, "Workflow.__post_init__ sets it"
    with _refusals(refused):
        parsed = flow.parse_input(input)
    if refused:
        raise InvalidInput.of(refused)
    digest = input_digest(workflow, parsed)
    if idempotency_key:
        if existing is not None:
            return _replay(existing, digest), False
        archived = ExecutionTombstone.objects.filter(created_by=user, idempotency_key=idempotency_key).first()
        if archived is not None:  # the key's execution was archived: never silently a new one (docs/api.md)
            raise archived.gone()
    # Inside a caller's transaction, a savepoint keeps it usable if the key is taken; outside
    # one, the start is a single statement that commits on its own (engine.writer.create).
    try:
        with transaction.atomic() if transaction.get_connection().in_atomic_block else nullcontext():
            execution = starting.create(
                flow,
                parsed,
                created_by_id=user.pk,
                actor=user,
                idempotency_key=idempotency_key,
                budget_usd=budget,
            )
    except IntegrityError:  # the same key raced in from another request
        existing = Execution.objects.get(created_by=user, idempotency_key=idempotency_key)
        return _replay(existing, digest), False
    return execution, True


def execution_input_refusals(*, workflow: str, input: dict[str, Any]) -> list[tuple[str, str]]:
    """Every ``(field, reason)`` the latest version of ``workflow`` refuses in ``input``
    (empty: it would start); starts nothing. For a form that already found some fields
    wrong and still tells of the others (issue 39, item 15)."""
    refused: list[tuple[str, str]] = []
    parse = registry.latest(workflow).parse_input
    assert parse is not None, "Workflow.__post_init__ sets it"
    with _refusals(refused):
        parse(input)
    return refused


@contextmanager
def _refusals(refused: list[tuple[str, str]]) -> Iterator[None]:
    """Adds an InvalidInput's refusals to ``refused`` instead of raising it."""
    try:
        yield
    except InvalidInput as exc:
        refused.extend(exc.errors)


def _version_of(workflow: str, version: Any) -> Any:
    """Registered version ``version`` of ``workflow``; InvalidInput naming ``version``."""
    if isinstance(version, bool) or not isinstance(version, int):
        raise InvalidInput("version", f"must be an integer, not {version!r}")
    try:
        return registry.get(workflow, version)
    except registry.UnknownWorkflow:
        deployed = ", ".join(str(v) for v in registry.versions(workflow))
        raise InvalidInput(
            "version", f"{workflow} has no registered version {version} (registered: {deployed})"
        ) from None


# The steps that ask a model, or start children that may: what a budget can stop.
ASKS_A_MODEL = ("model", "agent", "route", "children")


def _budgetable(flow, field: str) -> None:
    """A budget must be able to stop something: InvalidInput naming ``field`` when ``flow``
    asks no model (no model, agent, route or children step), or when ``RUNTIME_MODEL_PRICES``
    has no price for the model calls are asked of."""
    if not any(step.kind in ASKS_A_MODEL or step.agent is not None for step in flow.steps):  # a framework's agent too
        raise InvalidInput(
            field, f"{flow.name} asks no model (no model, agent, route or children step): a budget would stop nothing"
        )
    model = get_model_client().model
    if costs.price_for(model) is None:
        raise InvalidInput(
            field,
            f"the model {model} has no price in RUNTIME_MODEL_PRICES, so a budget could stop nothing; "
            "give it a price, or start without a budget",
        )


MAX_USD = Decimal(1_000_000)
CENT_MICRO = Decimal("0.000001")


def _column_max(field: str) -> Decimal:
    """The largest value the decimal column ``Execution.<field>`` holds (16 digits, 6 after the point)."""
    column = Execution._meta.get_field(field)
    return Decimal(10) ** (column.max_digits - column.decimal_places) - Decimal(10) ** -column.decimal_places


# A budget raised past this can't be stored: the raise is refused (422 naming add_usd), not a 500.
MAX_BUDGET_USD = _column_max("budget_usd")


def usd_amount(field: str, value: Any) -> Decimal:
    """``value`` as a USD amount: a JSON number > 0 and at most 1e6 (to the millionth),
    else InvalidInput naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise InvalidInput(field, "must be a number of US dollars, e.g. 2.5")
    amount = Decimal(str(value))
    if not amount.is_finite() or amount > MAX_USD:
        raise InvalidInput(field, f"must be at most {MAX_USD} US dollars")
    amount = amount.quantize(CENT_MICRO, rounding=ROUND_DOWN)
    if amount <= 0:
        raise InvalidInput(field, "must be more than 0 (at least 0.000001) US dollars")
    return amount


def execution_raise_budget(*, ref: str, user: AbstractBaseUser, add_usd: Any, reason: str) -> Execution:
    """Operators: add ``add_usd`` to a live execution's budget (one without a budget gets
    one of ``add_usd``), audited (``operator.raise_budget`` with the reason, before and
    after). It doesn't resume a ``budget_exceeded`` execution: ``resume`` does. A raise
    that would take the budget past ``MAX_BUDGET_USD`` is InvalidInput naming ``add_usd``,
    nothing written."""
    if not user.has_perm(OPERATE):
        raise Forbidden("only operators may raise a budget")
    amount = usd_amount("add_usd", add_usd)
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("reason", "say why the budget is raised")
    with transaction.atomic():
        execution = _locked(ref)
        acts.require(user, "operate", execution.workflow)
        if execution.status in TERMINAL:
            raise Conflict(f"{execution.ref} is already {execution.status}", status=execution.status)
        before = execution.budget_usd
        if (before or Decimal(0)) + amount > MAX_BUDGET_USD:
            raise InvalidInput(
                "add_usd",
                f"would take the budget past {MAX_BUDGET_USD} US dollars, the most it can hold (it is {before} now)",
            )
        execution.budget_usd = (before or Decimal(0)) + amount
        execution.save(update_fields=["budget_usd", "updated_at"])
        lifecycle.record(
            execution,
            "operator.raise_budget",
            actor=user,
            payload={
                "reason": reason,
                "add_usd": str(amount),
                "from": f"${before}" if before is not None else "no budget",
                "to": f"${execution.budget_usd}",
            },
        )
    return execution


def _replay(existing: Execution, digest: str) -> Execution:
    if existing.input_digest != digest:
        raise Conflict(
            f"idempotency key already used for {existing.ref} with different input",
            execution_id=existing.ref,
        )
    return existing


def _locked(ref: str) -> Execution:
    execution = execution_for(ref)
    return Execution.objects.select_for_update(no_key=True).get(pk=execution.pk)


def execution_cancel(*, ref: str, user: AbstractBaseUser, reason: str) -> Execution:
    """Cancel from any non-terminal state; what its gates wait for is withdrawn.

    Operators, and the user who started it, with a reason (InvalidInput naming
    ``reason`` without one: it is the one act that can't be undone). Once this commits, no new effect starts:
    a worker commits an action as ``executing`` only under its fence with the
    execution still running (the row lock orders it against this cancel). An effect
    already committed as executing is in flight; its outcome is still recorded.
    """
    with transaction.atomic():
        execution = _locked(ref)
        if not (user.has_perm(OPERATE) or execution.created_by_id == user.pk):
            raise Forbidden("only operators or the user who started it may cancel it")
        if execution.created_by_id != user.pk:  # the starter's own cancel needs no more
            acts.require(user, "operate", execution.workflow)
        reason = (reason or "").strip()
        if not reason:
            raise InvalidInput("reason", "say why it is cancelled: a cancel is final, it never resumes")
        if execution.status in TERMINAL:
            raise Conflict(f"{execution.ref} is already {execution.status}", status=execution.status)
        cancel_locked(execution, actor=user, reason=reason)
    return execution


@viewer.as_runtime
def cancel_locked(execution: Execution, *, actor: AbstractBaseUser | None = None, actor_label: str = "", reason: str):
    """Inside a transaction, ``execution`` locked and not terminal: withdraw what its
    gates wait for, void the effects that never started, record the compensations
    of those that did, and cancel; then cancel its live children the same way (the
    parent's row is locked first, then each child's, always in that order)."""
    if actor_label:
        label = actor_label
    else:
        assert actor is not None, "a cancel names who cancels: a user, or a label"
        label = f"user:{actor.get_username()}"
    withdrawn = gates.withdraw_all(execution, actor=actor, actor_label=label, reason=f"cancelled: {reason}")
    ledger.abandon_unstarted(execution, actor_label=label, reason="cancelled before it started")
    compensations = ledger.record_compensations(
        execution, compensations=_compensations_of(execution), actor_label=label
    )
    children = children_module.live_children(execution)
    lifecycle.apply(
        execution,
        "cancel",
        actor=actor,
        actor_label=actor_label,
        reason=reason,
        payload={
            **withdrawn,
            "compensations": compensations,
            **({"cancelled_children": [c.ref for c in children]} if children else {}),
        },
    )
    # Its live children go with it, each by its own cancel (one audited transition each).
    for child in children:
        locked = Execution.objects.select_for_update(no_key=True).get(pk=child.pk)
        if locked.status not in TERMINAL:
            cancel_locked(
                locked,
                actor=actor,
                actor_label=actor_label,
                reason=f"its parent {execution.ref} was cancelled: {reason}",
            )


def execution_continue(execution: Execution, *, actor: AbstractBaseUser, payload: dict[str, Any]) -> None:
    """Inside a transaction, ``execution`` locked at a gate that let it through: back to
    work at the same step (the gate's visit records the outcome)."""
    lifecycle.apply(execution, "resume_after_decision", actor=actor, payload=payload)
    dispatch.dispatch_on_commit(execution.pk)


def execution_rewind(
    execution: Execution, *, to_step: str, constraint: str, actor: AbstractBaseUser, reason: str, payload: dict
) -> None:
    """Inside a transaction, ``execution`` locked at a gate: go back to ``to_step`` in a
    new round (its steps run again; finished rounds stay recorded), with ``constraint``
    added to the mandatory constraints the next steps must follow."""
    state = execution.context
    state["notes"]["constraints"].append(constraint)
    execution.context = state
    execution.current_step = to_step
    execution.failed_attempts = 0
    round_field = execution.start_round()
    lifecycle.apply(
        execution,
        "resume_after_decision",
        actor=actor,
        reason=reason,
        # The constraint and the round it holds from: a replay rebuilds earlier rounds without it.
        payload={**payload, "constraint": constraint, "round": execution.round},
        update_fields=("context", round_field, "current_step", "failed_attempts"),
    )
    dispatch.dispatch_on_commit(execution.pk)


def _compensations_of(execution: Execution) -> dict:
    try:
        return registry.get(execution.workflow, execution.workflow_version).compensations
    except registry.UnknownWorkflow:
        return {}


def execution_resume(*, ref: str, user: AbstractBaseUser, reason: str) -> Execution:
    """Operators: send an execution that needs attention back to work at its current step,
    or a paused one back to the status it left (``executions.pauses``; refused while its
    workflow is paused).

    Refused (Conflict naming each blocker) while the resume preview says it can't
    resume: an unknown outcome not yet resolved, a stale approval (``executions.blockers``).
    """
    if not user.has_perm(OPERATE):
        raise Forbidden("only operators may resume executions")
    with transaction.atomic():
        execution = _locked(ref)
        acts.require(user, "operate", execution.workflow)
        if execution.status not in (Status.NEEDS_ATTENTION, Status.PAUSED):
            raise Conflict(
                f"{execution.ref} is {execution.status}, not needs_attention or paused", status=execution.status
            )
        if not reason.strip():
            raise InvalidInput("reason", "say why it is safe to resume")
        if execution.status == Status.PAUSED:
            refused = pauses.unpause_refusal(execution)
            if refused:
                raise Conflict(f"{execution.ref} can't be resumed: {refused}", blocked_by=[refused])
            pauses.unpause_locked(execution, actor=user, reason=reason)
            return execution
        resume_locked(execution, actor=user, reason=reason)
    return execution


def resume_locked(
    execution: Execution,
    *,
    actor: AbstractBaseUser,
    reason: str,
    if_clear: bool = False,
    follows: str = "",
) -> bool:
    """Send ``execution`` (needs_attention, its row locked, a transaction open) back to
    work at its current step: one audited ``resume`` and its message after commit. The
    one resume: an operator's, a resolved outcome's, an accepted drift's, a parent
    following its child's restart.

    While a blocker stands (``executions.blockers``): Conflict naming each, writing
    nothing — or, ``if_clear``, False and the execution left as it is (the caller's
    own write, a resolution, still stands). ``follows``: the operator's act this resume
    is part of (``resolve``, ``accept_request``), marked on its transition so the operator
    audit lists the act once."""
    blocked = blockers.blockers(execution)
    if blocked and if_clear:
        return False
    if blocked:
        raise Conflict(
            f"{execution.ref} can't be resumed: " + "; ".join(b.sentence for b in blocked),
            blocked_by=[b.sentence for b in blocked],
            keys=[b.key for b in blocked if b.key],
        )
    lifecycle.apply(execution, "resume", actor=actor, reason=reason, payload={"follows": follows} if follows else None)
    dispatch.dispatch_on_commit(execution.pk)
    return True


@viewer.as_runtime
def parent_follow_restart(*, failed: Execution, restarted: Execution, actor: AbstractBaseUser) -> Execution | None:
    """In the transaction that restarted child ``failed`` as ``restarted``: the parent that
    needs attention because of it (``child_failed``, at the step that started it) goes
    back to work by the same operator's resume, so its children step waits for
    ``restarted`` and is woken by it (``executions.children``) — no second act needed.
    Left as it is (None) when another child of that step still can't complete (the
    parent's ``stuck`` names it) or anything else blocks a resume. Locks the parent
    after the child (the restart's order; a parent's cancel locks only live children)."""
    parent = children_module.parent_of(failed)
    if parent is None:
        return None
    parent = Execution.objects.select_for_update(no_key=True).get(pk=parent.pk)
    if parent.status != Status.NEEDS_ATTENTION or parent.reason_code != StuckReason.CHILD_FAILED:
        return None
    at_step = children_module.children_of(parent, parent.current_step)
    if restarted.pk not in {c.pk for c in at_step}:
        return None
    why = f"follows {restarted.ref}, the restart of its child {failed.ref}"
    return parent if resume_locked(parent, actor=actor, reason=why, if_clear=True) else None


def execution_retry_now(*, ref: str, user: AbstractBaseUser, reason: str) -> Execution:
    """Operators: a ``retry_pending`` execution is due now instead of at its backoff time
    (audited with the reason); the next claim runs the step again."""
    if not user.has_perm(OPERATE):
        raise Forbidden("only operators may retry executions")
    if not reason.strip():
        raise InvalidInput("reason", "say why it should run now")
    with transaction.atomic():
        execution = _locked(ref)
        acts.require(user, "operate", execution.workflow)
        if execution.status != Status.RETRY_PENDING:
            raise Conflict(f"{execution.ref} is {execution.status}, not retry_pending", status=execution.status)
        was_due = execution.due_at
        execution.due_at = Now()
        execution.save(update_fields=["due_at", "updated_at"])
        lifecycle.record(
            execution,
            "operator.retry_now",
            actor=user,
            payload={"reason": reason, "was_due_at": was_due.isoformat() if was_due else None},
        )
        dispatch.dispatch_on_commit(execution.pk)
    return execution


def operator_outcome(user: AbstractBaseUser, outcome: str, evidence: str, *, act: str, hint: str) -> str:
    """An operator's word on an action's outcome, checked: Forbidden for anyone else,
    InvalidInput naming ``outcome`` (succeeded or failed) or ``evidence`` (``hint`` says
    what to write). Returns the evidence, stripped."""
    if not user.has_perm(OPERATE):
        raise Forbidden(f"only operators may {act}")
    if outcome not in (Action.State.SUCCEEDED, Action.State.FAILED):
        raise InvalidInput("outcome", "must be succeeded or failed")
    evidence = evidence.strip()
    if not evidence:
        raise InvalidInput("evidence", hint)
    return evidence


def action_resolve(
    *, key: str, user: AbstractBaseUser, outcome: str, evidence: str, receipt: dict[str, Any] | None = None
) -> Action:
    """Operators: establish the outcome of an action the runtime could not, with evidence.

    Only for an ``unknown`` (or stranded ``executing``) action of an execution that
    needs attention, so no worker is reconciling it at the same time. ``succeeded``
    records the receipt (the fields the effect declares as read by later steps, each
    required and validated, plus the evidence and who resolved it) and resumes the
    execution: the effect step completes with that receipt without calling again.
    ``failed`` fails the execution, or, when the effect declares ``on_failure``, resumes
    it to go on there (the ledger never sends an action an operator resolved as failed
    again). Raises InvalidInput naming ``receipt.<field>``
    (nothing written), Forbidden, NotFound, Conflict.
    """
    evidence = operator_outcome(
        user, outcome, evidence, act="resolve actions", hint="say how you established the outcome"
    )
    if receipt is not None and not isinstance(receipt, dict):
        raise InvalidInput("receipt", "must be an object of receipt fields")
    given = {k: v for k, v in (receipt or {}).items() if v not in (None, "")}
    if given and outcome != Action.State.SUCCEEDED:
        raise InvalidInput("receipt", "a receipt goes with outcome succeeded only")
    with transaction.atomic():
        execution, action = ledger.locked_by_key(key)
        acts.require(user, "operate", execution.workflow)
        if action.beside:  # a notification: its outcome is recorded; the execution is not touched
            if action.status != Action.State.UNKNOWN:
                raise Conflict(
                    f"{key} is {action.status}; only an unknown outcome can be resolved", status=action.status
                )
            ledger.resolve(action, execution=execution, outcome=outcome, fields={}, actor=user, evidence=evidence)
            return action
        if action.status not in (Action.State.UNKNOWN, Action.State.EXECUTING):
            raise Conflict(f"{key} is {action.status}; only an unknown outcome can be resolved", status=action.status)
        if execution.status != Status.NEEDS_ATTENTION:
            raise Conflict(
                f"{execution.ref} is {execution.status}; resolve while it needs attention", status=execution.status
            )
        fields = _resolved_receipt_fields(execution, action, given) if outcome == Action.State.SUCCEEDED else {}
        ledger.resolve(action, execution=execution, outcome=outcome, fields=fields, actor=user, evidence=evidence)
        goes_on = _on_failure_of(execution, action)
        if outcome == Action.State.SUCCEEDED:  # back to work, unless something else still holds it
            resume_locked(
                execution, actor=user, reason=f"{key} resolved as succeeded", if_clear=True, follows="resolve"
            )
        elif goes_on:  # the effect's step goes on at its on_failure (the ledger won't send it again)
            resume_locked(
                execution,
                actor=user,
                reason=f"{key} resolved as failed: on to {goes_on}",
                if_clear=True,
                follows="resolve",
            )
        else:
            lifecycle.apply(execution, "fail", actor=user, reason=f"{key} resolved as failed: {evidence}")
    return action


def _on_failure_of(execution: Execution, action: Action) -> str:
    """The ``on_failure`` step of the effect ``action`` belongs to, when the execution
    stands at that effect ("" otherwise, or when its version is not deployed here)."""
    if execution.current_step != action.step:
        return ""
    try:
        step = registry.get(execution.workflow, execution.workflow_version).get_step(action.step)
    except (registry.UnknownWorkflow, KeyError):
        return ""
    return step.on_failure or ""


def receipt_fields_for(execution: Execution, action: Action) -> tuple:
    """The receipt fields the effect behind ``action`` declares (empty if none, or undeployed)."""
    try:
        step = registry.get(execution.workflow, execution.workflow_version).get_step(action.step)
    except (registry.UnknownWorkflow, KeyError):
        return ()
    return step.receipt_fields


def _resolved_receipt_fields(execution: Execution, action: Action, given: dict[str, Any]) -> dict[str, str]:
    """Validate an operator's receipt against what the effect declares; InvalidInput names the field."""
    declared = {f.name: f for f in receipt_fields_for(execution, action)}
    for name in sorted(given):
        if name not in declared:
            takes = ", ".join(declared) or "none"
            raise InvalidInput(f"receipt.{name}"[:120], f"not a receipt field of {action.step} (it takes: {takes})")
    fields = {}
    for name, spec in declared.items():
        problem = spec.problem(given.get(name))
        if problem:
            raise InvalidInput(f"receipt.{name}", problem)
        fields[name] = given[name].strip()
    return fields
