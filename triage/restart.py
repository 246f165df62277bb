"""Restart a failed execution from one of its steps, as a new execution (what DBOS
calls a fork and Temporal a reset).

The new execution pins the same workflow version, takes the same input and the same
requester (so separation of duties still holds), and starts at ``from_step`` with the
recorded outputs of the steps before it: their checkpointed state, the artifacts they
produced (copied over the same stored bytes), the progress notes (the constraints,
the facts those steps verified, the steps completed). Those steps never run in the
new execution; ``from_step`` and everything after it do, with the new execution's
keys. The two are linked both ways (``restarted_from`` / ``Execution.restart``) and each
gets an event naming the other, with the operator and the reason. A failed child's
restart takes its parent along: a parent stopped by that failure (``child_failed``) is
resumed in the same transaction and waits for the restart (``services.parent_follow_restart``).

An approval recorded before ``from_step`` still authorises exactly the bytes it was
bound to (the effect re-checks version, sha256 and the approver's authority); restart
from the gate, or earlier, to ask again.

Not every step is a place a restart can work from, and ``restart_options`` says which
(the form offers only those, the service refuses the others): every step before it
must have completed, and a step that will run may not depend on a kept step whose
output names the failed execution (``Step.restart_with``: the replacement order's
approved proposal carries its execution's reference). A restarted effect goes out
under a new key, which no provider can recognise as a repeat; so an effect that
already succeeded (or may have been sent to a provider that doesn't de-duplicate) at
or after the chosen step *would repeat*, and the restart is refused unless the
operator accepts that (``accept_repeats``) with a reason. An effect an operator
resolved as failed is named too: if it happened after all, it exists at the provider.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from artifacts.services import artifact_copy
from executions import runtime, visits
from executions.authoring import registry
from executions.authoring.workflow import Workflow
from executions.errors import Conflict, Forbidden, InvalidInput
from executions.models import Action, Execution, ExecutionEvent, Status
from executions.services import OPERATE, execution_for, parent_follow_restart

from . import preview


@dataclass(frozen=True)
class Repeat:
    """An effect of the failed execution that a restart from some step sends again."""

    key: str
    type: str
    why: str  # "it succeeded (…)", "it may have been sent to a provider that does not de-duplicate"


@dataclass(frozen=True)
class RestartOption:
    """One step a failed execution could be restarted from, as the form and the API show it."""

    step: str
    label: str
    works: bool
    why_not: str  # when it doesn't work
    repeats: tuple[Repeat, ...]  # what a restart from here would send again (refused unless accepted)
    warnings: tuple[str, ...]  # effects resolved as failed that it sends again
    default: bool = False
    visit: int = 1  # the pass through ``step`` it runs again; every visit before it is kept

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "visit": self.visit,
            "label": self.label,
            "works": self.works,
            "why_not": self.why_not,
            "would_repeat": [{"key": r.key, "type": r.type, "why": r.why} for r in self.repeats],
            "warnings": list(self.warnings),
            "default": self.default,
        }


def restart_options(failed: Execution) -> list[RestartOption]:
    """Every visit ``failed`` made, up to the one it failed in (``executions.visits``: a
    loop's step is offered once per pass), with whether a restart from it can work, what
    it would repeat, and the default: the latest that works and repeats nothing (else
    the latest that works). Empty when ``failed`` is not failed or its version is not
    deployed. Read only."""
    if failed.status != Status.FAILED:
        return []
    try:
        workflow = registry.get(failed.workflow, failed.workflow_version)
    except registry.UnknownWorkflow:
        return []
    sequence, later = _sequence(workflow, failed)
    # The workflow's own effects: never a compensation, a notification or a webhook (sent beside the
    # steps, by their own task, whatever a restart does: notifications/).
    actions = [a for a in failed.actions.order_by("id") if not a.is_compensation and not a.beside]
    done = [v for v in sequence if v.done]
    # Where each effect was sent in the sequence: the visit it was planned in (not yet done: the failed one).
    at = {(v.name, v.visit): index for index, v in enumerate(sequence)}
    placed = [(a, at.get(_visit_key(visits.visit_of(done, a.step, a.created_at)), len(done))) for a in actions]
    resolved_failed = set(
        ExecutionEvent.objects.filter(execution=failed, type="action.failed", payload__resolved=True).values_list(
            "payload__key", flat=True
        )
    )
    options = []
    for index, visit in enumerate(sequence):
        runs_again = [a for a, position in placed if position >= index]
        why_not = _why_not(failed, kept=sequence[:index], runs=[*sequence[index:], *later])
        repeats = tuple(r for a in runs_again if (r := _repeat(a)) is not None)
        warnings = tuple(
            f"{a.key} was resolved as failed by an operator: if it happened after all, it exists at the provider "
            "and a restart sends it again"
            for a in runs_again
            if a.key in resolved_failed
        )
        label = (
            visit.step.label
            if sum(v.name == visit.name for v in sequence) == 1
            else f"{visit.step.label} (visit {visit.visit})"
        )
        options.append(RestartOption(visit.name, label, not why_not, why_not, repeats, warnings, visit=visit.visit))
    working = [o for o in options if o.works]
    chosen = next((o for o in reversed(working) if not o.repeats), working[-1] if working else None)
    return [o if o is not chosen else replace(o, default=True) for o in options]


def _sequence(workflow: Workflow, failed: Execution) -> tuple[list[visits.Visit], list[visits.Visit]]:
    """The visits a restart of ``failed`` can start from (each it made, then the one it
    failed in), and the ones its edges lead to after that (known to run again)."""
    done = visits.done(workflow, failed)
    coming = visits.ahead(workflow, failed, done)
    return [*done, *coming[:1]], coming[1:]


def _visit_key(visit: visits.Visit | None) -> tuple[str, int] | None:
    return (visit.name, visit.visit) if visit is not None else None


def _why_not(failed: Execution, *, kept: list[visits.Visit], runs: list[visits.Visit]) -> str:
    """Why a restart of ``failed`` that keeps the outputs of the visits ``kept`` and runs
    ``runs`` can't work ("" when it can)."""
    missing = next((v for v in kept if not v.done), None)
    if missing is not None:
        return f"{missing.name} never completed in {failed.ref}: restart from it or earlier"
    names = {v.name for v in kept}
    for visit in runs:
        bound = [name for name in visit.step.restart_with if name in names]
        if bound:
            return (
                f"{visit.name} checks what {bound[0]} made for {failed.ref} (it names that execution): restart from "
                f"{bound[0]} or earlier, so the new execution makes its own"
            )
    return ""


def _repeat(action: Action) -> Repeat | None:
    if action.status == Action.State.SUCCEEDED:
        why = "it succeeded; a restart sends it again under a new key, which no provider recognises as a repeat"
        return Repeat(action.key, action.type, why)
    if preview.may_repeat(action):
        return Repeat(action.key, action.type, "it may have been sent to a provider that does not de-duplicate")
    return None


def execution_restart_options(*, ref: str, user: AbstractBaseUser) -> list[RestartOption]:
    """Operators: ``restart_options`` of ``ref``. Raises Forbidden, NotFound."""
    if not user.has_perm(OPERATE):
        raise Forbidden("only operators may restart executions")
    execution = execution_for(ref)
    runtime.require(user, "operate", execution.workflow)
    return restart_options(execution)


def execution_restart(
    *,
    ref: str,
    user: AbstractBaseUser,
    from_step: str,
    reason: str,
    accept_repeats: bool = False,
    visit: int | None = None,
) -> Execution:
    """Operators: a new execution continuing failed execution ``ref`` from ``from_step``
    (its ``visit``-th pass through it; default: the latest), keeping every visit before it.

    Raises Forbidden, NotFound, InvalidInput naming ``reason``, ``from_step`` (not a
    step of the pinned version, past the step it failed at, or a step a restart can't
    work from: ``restart_options``) or ``visit`` (a pass it never made), Conflict (not
    failed; already restarted; an action whose outcome is unknown; its version not
    deployed; it would send again an effect that already happened, unless
    ``accept_repeats``). Nothing is written on any refusal.
    """
    if not user.has_perm(OPERATE):
        raise Forbidden("only operators may restart executions")
    reason = reason.strip()
    if not reason:
        raise InvalidInput("reason", "say why it should run again")
    with transaction.atomic():
        failed = Execution.objects.select_for_update(no_key=True).get(pk=execution_for(ref).pk)
        runtime.require(user, "operate", failed.workflow)
        try:
            workflow = registry.get(failed.workflow, failed.workflow_version)
        except registry.UnknownWorkflow as exc:
            raise Conflict(str(exc)) from None
        sequence, later = _sequence(workflow, failed)
        _check_from_step(failed, workflow, from_step, sequence, later)
        _check_restartable(failed)
        passes = [o for o in restart_options(failed) if o.step == from_step]
        option = passes[-1] if visit is None else next((o for o in passes if o.visit == visit), None)
        if option is None:
            raise InvalidInput(
                "visit",
                f"{failed.ref} visited {from_step} {len(passes)} time{'s' if len(passes) != 1 else ''}: "
                f"restart from visit 1 to {len(passes)}",
            )
        if not option.works:
            raise InvalidInput("from_step", option.why_not)
        if option.repeats and not accept_repeats:
            raise Conflict(
                f"a restart of {failed.ref} from {from_step} sends again what may already have happened: "
                + "; ".join(f"{r.key} ({r.why})" for r in option.repeats)
                + ". Restart from a later step, or accept the repeats (accept_repeats) and say why in the reason",
                would_repeat=[r.key for r in option.repeats],
            )
        index = next(i for i, v in enumerate(sequence) if (v.name, v.visit) == (from_step, option.visit))
        kept = sequence[:index]
        restarted = _create(failed, workflow, from_step=from_step, kept=kept)
        common = {"from_step": from_step, "reason": reason}
        if len(passes) > 1:  # a step visited more than once: which pass it runs again
            common["visit"] = option.visit
        if option.repeats:
            common["accepted_repeats"] = [r.key for r in option.repeats]
        runtime.record(
            restarted,
            "execution.created",
            to_status=restarted.status,
            step=from_step,
            actor=user,
            payload={
                "workflow": workflow.name,
                "workflow_version": workflow.version,
                "input": restarted.input,
                "restarted_from": failed.ref,
                "reused_steps": [v.name for v in kept],
                **common,
            },
        )
        runtime.record(
            failed, "execution.restarted", step=from_step, actor=user, payload={"restarted_as": restarted.ref, **common}
        )
        runtime.dispatch_on_commit(restarted.pk)
        # A child's restart: its parent, stopped by the failure, waits for the restart instead.
        parent_follow_restart(failed=failed, restarted=restarted, actor=user)
    return restarted


def _check_restartable(failed: Execution) -> None:
    if failed.status != Status.FAILED:
        raise Conflict(
            f"{failed.ref} is {failed.status}: only a failed execution can be restarted", status=failed.status
        )
    if (restart := failed.restart) is not None:
        raise Conflict(f"{failed.ref} was already restarted as {restart.ref}", restarted_as=restart.ref)
    # A notification sent beside the steps (say, the mail that told of this failure) never holds it up.
    unknown = failed.actions.filter(status__in=[Action.State.UNKNOWN, Action.State.EXECUTING], beside=False).first()
    if unknown is not None:
        raise Conflict(
            f"the outcome of {unknown.key} is unknown: a restart sends its effects under new keys, so establish "
            "whether it happened first",
            key=unknown.key,
        )


def _check_from_step(
    failed: Execution, workflow: Workflow, from_step: str, sequence: list[visits.Visit], later: list[visits.Visit]
) -> None:
    """``from_step`` is a step ``failed`` reached: on the path it took, not past the step it failed at."""
    if any(v.name == from_step for v in sequence):
        return
    names = ", ".join(dict.fromkeys(v.name for v in sequence))
    if any(v.name == from_step for v in later):
        raise InvalidInput(
            "from_step", f"{failed.ref} failed at {failed.current_step}: restart from it or an earlier step"
        )
    if any(s.name == from_step for s in workflow.steps):
        raise InvalidInput(
            "from_step", f"{from_step} is not on the path {failed.ref} took ({names}): a route chose another step"
        )
    raise InvalidInput(
        "from_step", f"{workflow.name} v{workflow.version} has no step {from_step!r}; its steps: {names}"
    )


def _create(failed: Execution, workflow: Workflow, *, from_step: str, kept: list[visits.Visit]) -> Execution:
    old = failed.context
    restarted = Execution.objects.create(
        workflow=failed.workflow,
        workflow_version=failed.workflow_version,
        input=failed.input,
        input_digest=failed.input_digest,
        created_by=failed.created_by,
        current_step=from_step,
        restarted_from=failed,
        deadline=timezone.now() + timedelta(seconds=workflow.deadline_seconds) if workflow.deadline_seconds else None,
        context={"artifacts": {}, "notes": {}},
    )
    restarted.context = {
        # Each kept step's latest output (``Execution.outputs``), and every kept visit in
        # order (``ctx.visits``, the visits' numbering: ``executions.visits``).
        "carried": {v.name: v.output for v in kept},
        "carried_visits": [[v.name, v.output] for v in kept],
        "artifacts": _artifacts(old.get("artifacts", {}), kept, restarted, done=visits.done(workflow, failed)),
        "notes": _notes(old["notes"], kept, next_action=workflow.label_for(from_step)),
    }
    restarted.save(update_fields=["context"])
    return restarted


def _artifacts(
    refs: dict[str, dict], kept: list[visits.Visit], restarted: Execution, *, done: list[visits.Visit]
) -> dict[str, dict]:
    """Each artifact's newest version a kept visit produced, copied into ``restarted``."""
    out = {}
    for name, ref in refs.items():
        version = visits.produced_before(ref, kept, done)
        if version is not None:
            out[name] = artifact_copy(version, execution=restarted).as_ref()
    return out


def _notes(notes: dict[str, Any], kept: list[visits.Visit], *, next_action: str) -> dict[str, Any]:
    """The progress notes as they stood after the kept visits: every constraint (those a
    manager added included), the facts the kept visits verified (a fact names its step
    and its visit's round; one recorded before rounds were kept, its step alone), the kept
    visits done. Facts recorded without their step are kept only when every completed
    step is kept."""
    names = {v.name for v in kept}
    rounds = {(v.name, v.run.round) for v in kept if v.run is not None}
    carried = {v.name for v in kept if v.run is None}
    everything_kept = set(notes.get("completed_steps", [])) <= names

    def verified_by_a_kept_visit(fact: dict[str, Any]) -> bool:
        if "step" not in fact:
            return everything_kept
        if not isinstance(fact.get("round"), int) or fact["step"] in carried:
            return fact["step"] in names
        return (fact["step"], fact["round"]) in rounds

    return {
        **notes,
        "facts": [f for f in notes.get("facts", []) if verified_by_a_kept_visit(f)],
        "completed_steps": [v.name for v in kept],
        "next_action": next_action,
    }
