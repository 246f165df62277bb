"""What a resume would do, said before it is done (docs/design.md §5, §6): which steps are
skipped (their checkpointed output is reused), which run, which are blocked; which
effects could be repeated at a provider that does not de-duplicate; which approvals
no longer hold; the pinned and the latest workflow version.

``can_resume`` and the blocked steps come from the one rule the resume itself checks
(``executions.blockers``). Read only: nothing here writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from executions import pauses, runtime, visits
from executions.authoring import registry
from executions.authoring.workflow import Step, StepKind, Workflow
from executions.blockers import Blocker, blockers, workflow_of
from executions.errors import Forbidden
from executions.models import OPERATE, Action, Execution, Status, StepRun, execution_for

SKIP, RUN, BLOCKED = "skip", "run", "blocked"
_UNSENT = (Action.State.PLANNED, Action.State.APPROVED)


def execution_resume_preview(*, ref: str, user: AbstractBaseUser) -> dict[str, Any]:
    """Operators: what a resume of ``ref`` would skip, run and risk."""
    if not user.has_perm(OPERATE):
        raise Forbidden("only operators may preview a resume")
    execution = execution_for(ref)
    runtime.require(user, "operate", execution.workflow)
    return resume_preview(execution)


def resume_preview(execution: Execution) -> dict[str, Any]:
    """The resume preview of docs/design.md §6, for ``execution`` as it is now."""
    workflow = workflow_of(execution)
    # The workflow's own effects: a notification or a webhook (sent beside the steps, by its
    # own task) is never sent again by a resume, so it is no part of what a resume would do.
    actions = [a for a in execution.actions.order_by("id") if not a.beside]
    stale = runtime.stale_of(execution)
    done = visits.done(workflow, execution) if workflow is not None else []
    found = blockers(execution, actions=actions, stale=stale, done=done)
    blocked_by = [b.sentence for b in found]
    hold = None
    if execution.status == Status.PAUSED:  # a hold: resume checks only that its workflow may run (executions.pauses)
        refused = pauses.unpause_refusal(execution)
        blocked_by = [refused] if refused else []
        hold = {
            "paused_from": execution.paused_from,
            "by": "workflow" if execution.paused_by_workflow else "operator",
            "reason": execution.status_reason,
            "why": pauses.resume_explained(execution),
        }
    elif execution.status != Status.NEEDS_ATTENTION:
        blocked_by.insert(0, _status_sentence(execution))
    steps = _steps(execution, workflow, actions, found, done) if workflow is not None else []
    ahead = {s["step"] for s in steps if s["plan"] != SKIP} if workflow is not None else None
    return {
        "can_resume": not blocked_by,
        "blocked_by": blocked_by,
        "steps": steps,
        "effects": [_effect(a, ahead) for a in actions],
        "stale_approvals": [{**grant.details, "why": grant.why} for grant in stale],
        "workflow_version": {"pinned": execution.workflow_version, "latest": _latest(execution)},
        "hold": hold,
    }


def cancel_preview(execution: Execution) -> dict[str, Any]:
    """What cancelling ``execution`` now would do, said before it is done (read only): it
    is final (``can_cancel``, or why not); the gate it waits at is withdrawn; the effects
    that never started never will (``voided``); one in flight still has its outcome
    recorded (``in_flight``); each done effect that has a compensation gets one recorded
    for a person to carry out (``compensations``); an unknown outcome can no longer be
    resolved once it is cancelled (``unknown``: resolve first if it matters)."""
    workflow = workflow_of(execution)
    compensated = set(workflow.compensations) if workflow is not None else set()
    # Cancel never touches what is sent beside the steps (notifications, webhooks).
    actions = [a for a in execution.actions.order_by("id") if not a.is_compensation and not a.beside]
    pending = runtime.pending_of(execution) if not execution.is_terminal else None

    def keys(*states: str) -> list[str]:
        return [a.key for a in actions if a.status in states]

    return {
        "can_cancel": not execution.is_terminal,
        "why_not": f"{execution.ref} is already {execution.status}" if execution.is_terminal else "",
        "withdrawn": pending.waiting_for if pending is not None else "",
        "voided": keys(*_UNSENT),
        "in_flight": keys(Action.State.EXECUTING),
        "compensations": [a.key for a in actions if a.status == Action.State.SUCCEEDED and a.type in compensated],
        "unknown": keys(Action.State.UNKNOWN),
    }


def may_repeat(action: Action, *, runs_again: bool = True) -> bool:
    """Running its step again could repeat the effect at a provider that does not
    de-duplicate: it may have been sent (executing, unknown, or failed after a send)
    and the provider won't recognise the key."""
    sent = action.status in (Action.State.EXECUTING, Action.State.UNKNOWN) or (
        action.status == Action.State.FAILED and action.attempts > 0 and not runtime.resolved_failed(action)
    )
    # A notification (beside the steps) is never sent again by a resume.
    return runs_again and sent and not action.honors_key and not action.is_compensation and not action.beside


# --- the parts


def _latest(execution: Execution) -> int:
    try:
        return registry.latest(execution.workflow).version
    except registry.UnknownWorkflow:
        return execution.workflow_version


def _status_sentence(execution: Execution) -> str:
    hint = {
        Status.RETRY_PENDING: "; retry runs it now",
        Status.FAILED: "; restart runs it again from a step, as a new execution",
    }.get(execution.status, "")
    return (
        f"{execution.ref} is {execution.status}: only an execution that needs attention (or is paused) can be "
        f"resumed{hint}"
    )


def _effect(action: Action, ahead: set[str] | None) -> dict[str, Any]:
    runs_again = ahead is None or action.step in ahead
    return {**effect_row(action), "may_repeat": may_repeat(action, runs_again=runs_again)}


def effect_row(action: Action) -> dict[str, Any]:
    """An effect as a preview lists it (the resume's, the migration's), without ``may_repeat``."""
    return {"key": action.key, "type": action.type, "status": action.status, "provider_dedupes": action.honors_key}


def _steps(
    execution: Execution, workflow: Workflow, actions: list[Action], found: list[Blocker], done: list[visits.Visit]
) -> list[dict]:
    """Each visit the execution made (skipped: its output is reused), then each a resume
    would make (run, or blocked), numbered per step (``executions.visits``)."""
    coming = visits.ahead(workflow, execution, done)
    blocking = {b.step: b for b in found if b.step}
    first_blocked = ""
    out = [_entry(visit, SKIP, _skipped(execution, visit)) for visit in done]
    for index, visit in enumerate(coming):
        if visit.name in blocking and not first_blocked:
            first_blocked = visit.name
            plan, why = BLOCKED, blocking[visit.name].sentence
        elif first_blocked:
            plan, why = BLOCKED, f"after {first_blocked}, which is blocked"
        elif index == 0:
            plan, why = RUN, _runs_again(execution, visit.step, actions)
        else:
            plan, why = RUN, runs_later(visit.step)
        out.append(_entry(visit, plan, why))
    if coming and coming[-1].step.chooses:
        out[-1]["why"] += f"; what comes after it is {coming[-1].name}'s to choose"
    return out


def _entry(visit: visits.Visit, plan: str, why: str) -> dict[str, Any]:
    step = visit.step
    return {
        "step": step.name,
        "label": step.label,
        "kind": str(step.kind),
        "visit": visit.visit,
        "plan": plan,
        "why": why,
    }


def _skipped(execution: Execution, visit: visits.Visit) -> str:
    run = visit.run
    if run is not None:
        return (
            f"visit {visit.visit}, checkpointed in round {run.round} (attempt {run.attempt}, "
            f"{run.finished_at:%Y-%m-%d %H:%M:%S} UTC): its recorded output is reused, it does not run again"
        )
    if execution.restarted_from_id:
        return f"its output was recorded by {execution.restarted_from.ref} and is reused: it does not run"
    return "checkpointed: its recorded output is reused, it does not run again"


def _runs_again(execution: Execution, step: Step, actions: list[Action]) -> str:
    """Why the current step runs, and what it will do."""
    if step.is_gate:
        return (
            f"the {step.kind} gate is visited again: it lets the execution through if what it asked was "
            "granted, otherwise it asks again in a new round"
        )
    if step.kind == StepKind.EFFECT:
        return _effect_again(step, [a for a in actions if a.step == step.name and not a.is_compensation])
    failed = (
        StepRun.objects.filter(
            execution=execution, step=step.name, round=execution.round, outcome=StepRun.Outcome.FAILED
        )
        .order_by("-id")
        .first()
    )
    if failed is None:
        return "runs from its start (nothing of it was checkpointed)"
    drifted = _drifted(execution, failed)
    if drifted:
        return drifted
    if failed.error.startswith("budget_exceeded:") and step.agent is not None:  # any agent kind (a framework's too)
        return (
            f"runs again with the same budget: its recorded calls replay and count against it, so it stops again "
            f"where it did ({failed.error.removeprefix('budget_exceeded: ')}) — unless only its time ran out"
        )
    return f"runs again (attempt {failed.attempt + 1}); the last attempt failed: {failed.error}"


def _drifted(execution: Execution, failed: StepRun) -> str:
    """What running again does to a step whose last attempt stopped at a model drift."""
    evidence = (failed.output or {}).get("evidence")
    if not isinstance(evidence, dict) or not {"key", "recorded_sha256", "rebuilt_sha256"} <= set(evidence):
        return ""
    key, recorded, rebuilt = evidence["key"], evidence["recorded_sha256"], evidence["rebuilt_sha256"]
    replayed = "the calls before it replay from the journal"
    if runtime.accepted(execution.pk, key, recorded, rebuilt):
        return (
            f"runs again: {replayed}; {key} is asked again with the accepted request {rebuilt[:12]}, and so are the "
            "calls after it (their answers recorded before are kept, superseded); any other request stops it again"
        )
    return (
        f"runs again, and stops again at {key} without calling the model: it was recorded with request "
        f"{recorded[:12]} and rebuilt as {rebuilt[:12]} — unless what changed was restored since; to go on with "
        "the new request, accept it on the execution page instead (the model is asked again for that call)"
    )


def _effect_again(step: Step, actions: list[Action]) -> str:
    guarded = f" (once {step.guarded_by}'s approval is checked again)" if step.guarded_by else ""
    action = actions[-1] if actions else None
    if action is None:
        return f"sends its effect for the first time, its ledger entry committed before the call{guarded}"
    key = action.key
    if action.status == Action.State.SUCCEEDED:
        return f"{key} is already done: the step completes from its recorded receipt without a call"
    if action.status in _UNSENT or action.attempts == 0:
        return f"sends {key}, which was never sent{guarded}"
    if runtime.resolved_failed(action):
        after = f"goes on at {step.on_failure}" if step.on_failure else "the step fails"
        return f"{key} was resolved as failed by an operator: it is not sent again; {after}"
    if action.honors_key:
        return f"{key} failed; it is sent again with the same key, which the provider de-duplicates{guarded}"
    return (
        f"{key} failed at a provider that does not de-duplicate: it is first looked up by its key; found, it is "
        "recorded without a call; not found, it is not re-sent and waits for an operator again"
    )


def runs_later(step: Step) -> str:
    """What a step after the current one does when the resume reaches it: the engine's own
    kinds (``LATER``), a gate, or the sentence a kind that plugs in says of itself."""
    if step.is_gate:
        return f"the {step.kind} gate stops the execution here until it passes"
    if step.kind in LATER:
        return LATER[step.kind](step)
    try:
        return runtime.step_kind(step.kind).later(step)
    except (LookupError, NotImplementedError):
        return f"runs (a {step.kind} step)"


# What each of the engine's own kinds does when a resume reaches it (gates and the kinds
# that plug in say it themselves; tests/unit/test_step_kinds.py checks every kind is covered).
LATER: dict[str, Callable[[Step], str]] = {
    StepKind.COMPUTE: lambda step: "runs",
    StepKind.EFFECT: lambda step: (
        f"sends its effect ({step.action})" + (f", once {step.guarded_by} let it through" if step.guarded_by else "")
    ),
    StepKind.BRANCH: lambda step: "its code chooses the next step; the choice is recorded",
}
