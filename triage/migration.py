"""Moving live executions to another version of their workflow (docs/design.md §4, "Versions
in flight"; ``GET /api/executions/{id}/migrate-preview``, ``POST …/migrate``, bulk
``migrate``, ``keel migrate``).

The *move* of an execution to version N is computed the same way for the preview and for
the migration itself (``plan``): where it stands (its step, or what the author's
``Workflow(migrate_from={old: fn})`` maps it to), the outputs N's steps will read (the old
ones, through ``migrate_from`` when given, less the steps N doesn't have) and the visits
it carries over. A moved execution reads its past the way a restart reads what it
carried (``context["carried_visits"]``), with its step runs until then kept as the
record (``context["migrated_through"]``: ``Execution.succeeded_runs``).

The preview says, before anything moves: the steps skipped (done, their output reused),
run (where it stands and what follows) or gone (N doesn't have them); the effects a run
on N could repeat (``preview.may_repeat``); the approvals that go stale (the gate N asks
at that step binds another action or artifact, or is no gate); and the replay of the
moved execution against N's code (``triage.replay``: the step it stands at, the
structure). Each of those is a *blocker* sentence, which the operator may accept by
naming it; what makes a move impossible (a terminal or running execution, the same
version, a step N can't place it at, a ``migrate_from`` that fails) can't be accepted.

The migration is one audited ``migrate`` transition (executions.models) in the
transaction that writes the new pin, the row locked: it keeps its status, except that
an approval gate whose request goes stale is asked again — the request withdrawn, the
execution running at that gate, which opens a new request in a new round (its approvers
told as for any new request). Operators only.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from approvals.models import ApprovalRequest
from executions import runtime
from executions.authoring import registry
from executions.authoring.workflow import Workflow
from executions.errors import Conflict, Forbidden, InvalidInput
from executions.models import OPERATE, TERMINAL, Execution, Status, StepRun, execution_for
from executions.storable import json_refusal

from . import preview, replay

SKIP, RUN, GONE = "skip", "run", "gone"


@dataclass
class Move:
    """Execution ``execution`` moved to ``flow`` (N), as computed; nothing written."""

    execution: Execution
    flow: Workflow
    maps_to: str | None = None  # the step it stands at in N ("" before its first step)
    outputs: dict[str, Any] = field(default_factory=dict)  # what N's steps read
    carried: list[list[Any]] = field(default_factory=list)  # [step, output] per visit carried over
    through: int | None = None  # its last step run before the move
    done: list[tuple[str, Any]] = field(default_factory=list)  # (step, output) of each visit it made
    impossible: list[str] = field(default_factory=list)  # blockers nobody can accept
    acceptable: list[str] = field(default_factory=list)  # blockers an operator may accept by name
    steps: list[dict[str, Any]] = field(default_factory=list)
    effects: list[dict[str, Any]] = field(default_factory=list)
    stale: list[dict[str, Any]] = field(default_factory=list)
    replayed: dict[str, Any] = field(default_factory=lambda: {"verdict": "", "findings": []})

    @property
    def blocked_by(self) -> list[str]:
        return [*self.impossible, *self.acceptable]

    def context(self) -> dict[str, Any]:
        """The execution's context on N: its past carried over as the move mapped it."""
        context = {k: v for k, v in (self.execution.context or {}).items() if k not in ("state", "carried")}
        context["carried"] = self.outputs
        context["carried_visits"] = self.carried
        if self.through is not None:
            context["migrated_through"] = self.through
        return context

    def moved(self) -> Execution:
        """An in-memory copy of the execution as it would stand on N (for the replay)."""
        moved = copy.copy(self.execution)
        moved.__dict__.pop("_outputs", None)
        moved.__dict__.pop("_visit_outputs", None)
        moved.context = self.context()
        moved.current_step = self.maps_to or ""
        moved.workflow_version = self.flow.version
        return moved

    def as_dict(self) -> dict[str, Any]:
        execution = self.execution
        return {
            "id": execution.ref,
            "can_migrate": not self.blocked_by,
            "blocked_by": self.blocked_by,
            "from": execution.workflow_version,
            "to": self.flow.version,
            "position": {"step": execution.current_step, "maps_to": self.maps_to},
            "steps": self.steps,
            "effects": self.effects,
            "stale_approvals": self.stale,
            "replay": self.replayed,
        }


def target(workflow: str, to: Any, *, field_name: str = "to") -> Workflow:
    """Version ``to`` of ``workflow``, registered now; InvalidInput naming ``field_name`` otherwise."""
    if isinstance(to, bool) or not isinstance(to, int) or to < 1:
        raise InvalidInput(field_name, "a version number (a positive integer)")
    try:
        return registry.get(workflow, to)
    except registry.UnknownWorkflow:
        known = ", ".join(f"v{v}" for v in registry.versions(workflow)) or "none"
        raise InvalidInput(
            field_name, f"{workflow} has no v{to} in the code now installed (registered: {known})"
        ) from None


def execution_migrate_preview(*, ref: str, user: AbstractBaseUser, to: Any) -> dict[str, Any]:
    """Operators: what moving ``ref`` to version ``to`` would do, and what stands in its way."""
    return execution_migrate_plan(ref=ref, user=user, to=to).as_dict()


def execution_migrate_plan(*, ref: str, user: AbstractBaseUser, to: Any) -> Move:
    """Operators: the move of ``ref`` to version ``to`` as computed (the preview's, and the
    page's, which tells the blockers an operator may accept from the others)."""
    if not user.has_perm(OPERATE):
        raise Forbidden("only operators may preview a migration")
    execution = execution_for(ref)
    runtime.require(user, "operate", execution.workflow)
    return plan(execution, target(execution.workflow, to))


def execution_migrate(
    *, ref: str, user: AbstractBaseUser, to_version: Any, reason: str, accept: list[str] | None = None
) -> Execution:
    """Operators: move ``ref`` to version ``to_version`` (one audited ``migrate``). Conflict
    naming each blocker the operator did not accept (and each one nobody can); InvalidInput
    naming ``reason`` (none given) or ``to_version`` (not registered)."""
    if not user.has_perm(OPERATE):
        raise Forbidden("only operators may migrate executions")
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("reason", "say why it moves to another version")
    execution = execution_for(ref)
    runtime.require(user, "operate", execution.workflow)
    flow = target(execution.workflow, to_version, field_name="to_version")
    with transaction.atomic():
        locked = Execution.objects.select_for_update(no_key=True).get(pk=execution.pk)
        migrate_locked(locked, flow, actor=user, reason=reason, accept=accept or [])
    return locked


def migrate_locked(
    execution: Execution, flow: Workflow, *, actor: AbstractBaseUser, reason: str, accept: list[str]
) -> Move:
    """Inside a transaction, ``execution`` locked: the move to ``flow``, planned again under
    the lock, written as one ``migrate`` transition — or Conflict, writing nothing."""
    move = plan(execution, flow)
    accepted = {_words(sentence) for sentence in accept}  # as a form sends it back (line breaks as CRLF)
    refused = [*move.impossible, *(b for b in move.acceptable if _words(b) not in accepted)]
    if refused:
        raise Conflict(
            f"{execution.ref} can't move to v{flow.version}: " + "; ".join(refused),
            blocked_by=refused,
        )
    runtime.failpoint(f"migrate:{execution.ref}")  # the crash tests' hook: nothing of this move is written yet
    reopen = bool(move.stale) and execution.status == Status.AWAITING_APPROVAL
    withdrawn: dict[str, Any] = {}
    if reopen:  # its gate asks again on N: what it asked on the old version is withdrawn
        withdrawn = runtime.withdraw_gates(
            execution, actor=actor, actor_label="", reason=f"migrated to v{flow.version}: asked again"
        )
    before = execution.workflow_version
    execution.context = move.context()
    execution.current_step = move.maps_to or ""
    execution.workflow_version = flow.version
    # Fences out a claim that read the row before this move: its write expects the old token,
    # so no worker runs it on the old version's code (a pending one is rung again below).
    execution.lease_token += 1
    runtime.transition(
        execution,
        "migrate",
        actor=actor,
        reason=reason if reopen else "",
        options={"reopen": reopen},
        payload={
            "reason": reason,
            "from_version": before,
            "to_version": flow.version,
            "position": {"step": move.execution.current_step, "maps_to": move.maps_to},
            "accepted": [b for b in move.acceptable if _words(b) in accepted],
            **withdrawn,
        },
        update_fields=("context", "current_step", "workflow_version", "lease_token"),
    )
    if reopen or execution.status in (Status.PENDING, Status.RETRY_PENDING, Status.WAITING):
        runtime.dispatch_on_commit(execution.pk)  # a claim the new token fenced out rings again (due ones run)
    return move


def _words(sentence: str) -> str:
    return " ".join(str(sentence).split())


# --- the plan


def plan(execution: Execution, flow: Workflow) -> Move:
    """The move of ``execution`` to ``flow``: where it lands, what it carries, what stands in the way."""
    move = Move(execution=execution, flow=flow)
    ref, to = execution.ref, f"v{flow.version}"
    if execution.status in TERMINAL:
        move.impossible.append(f"{ref} is {execution.status}: only a live execution moves to another version")
        return move
    if execution.status == Status.RUNNING:
        move.impossible.append(
            f"{ref} is running (a worker holds it at {execution.current_step or 'its start'}): migrate it once it "
            "waits, or pause it first"
        )
    elif execution.status == Status.PAUSED and execution.paused_from == Status.RUNNING and execution.lease_owner:
        move.impossible.append(
            f"{ref} was paused while running and its worker ({execution.lease_owner}) has not checkpointed "
            f"{execution.current_step or 'its step'} yet: migrate it once that step finished"
        )
    if execution.workflow_version == flow.version:
        move.impossible.append(f"{ref} is already on {to}")
    if not _map(move):
        return move
    actions = [a for a in execution.actions.order_by("id") if not a.beside and not a.is_compensation]
    try:
        flow.path(move.outputs)
    except Exception as exc:  # an output migrate_from reshaped that a branch or gate of N can't read
        move.impossible.append(
            f"v{flow.version}'s steps can't follow the outputs it would carry (check migrate_from): "
            f"{type(exc).__name__}: {exc}"
        )
        return move
    _steps(move)
    ahead = {s["step"] for s in move.steps if s["plan"] == RUN}
    for action in actions:
        repeats = preview.may_repeat(action, runs_again=action.step in ahead)
        move.effects.append({**preview.effect_row(action), "may_repeat": repeats})
        if repeats:
            move.acceptable.append(
                f"{action.key} could be sent again by {to}'s {action.step}: it may have been sent ({action.status}) "
                "and its provider does not recognise the key"
            )
    _stale_gate(move)
    _replay(move)
    return move


def _map(move: Move) -> bool:
    """Where it stands on N, the outputs N's steps read and the visits carried over (through
    ``migrate_from`` when the author gave one for its version). False: it can't be placed."""
    execution, flow = move.execution, move.flow
    names = {step.name for step in flow.steps}
    state: Any = {"step": execution.current_step, "outputs": copy.deepcopy(execution.outputs())}
    fn = flow.migrate_from.get(execution.workflow_version)
    if fn is not None:
        try:
            state = fn(state)
        except Exception as exc:
            move.impossible.append(
                f"{flow.name} v{flow.version}'s migrate_from[{execution.workflow_version}] failed on "
                f"{execution.ref}: {type(exc).__name__}: {exc}"
            )
            return False
        wrong = _bad_state(state)
        if wrong:
            move.impossible.append(
                f"{flow.name} v{flow.version}'s migrate_from[{execution.workflow_version}] answered {wrong}"
            )
            return False
    step = state["step"]
    if step and step not in names:
        how = "nor does its migrate_from map it" if fn is not None else "and no migrate_from maps it"
        move.impossible.append(
            f"{execution.ref} stands at {step}, which v{flow.version} doesn't have (removed or renamed), {how}"
        )
        return False
    move.maps_to = step
    move.outputs = {name: output for name, output in state["outputs"].items() if name in names}
    move.done = done = _visits(execution)
    last = {name: index for index, (name, _output) in enumerate(done)}
    carried = [
        [name, move.outputs[name] if last[name] == index else output]
        for index, (name, output) in enumerate(done)
        if name in move.outputs
    ]
    listed = {name for name, _output in carried}
    path = [s.name for s in flow.path(move.outputs) if s.name in move.outputs and s.name not in listed]
    rest = [name for name in move.outputs if name not in listed and name not in path]
    move.carried = carried + [[name, move.outputs[name]] for name in [*path, *rest]]
    move.through = StepRun.objects.filter(execution_id=execution.pk).order_by("-id").values_list(
        "id", flat=True
    ).first() or (execution.context or {}).get("migrated_through")
    return True


def _visits(execution: Execution) -> list[tuple[str, Any]]:
    """(step, output) of every visit it completed, oldest first, whatever version declared it."""
    context = execution.context or {}
    carried = [(name, output) for name, output in context.get("carried_visits") or []]
    if not carried:
        carried = list((context.get("carried") or {}).items())
    return carried + list(execution.succeeded_runs().values_list("step", "output"))


def _bad_state(state: Any) -> str:
    if not isinstance(state, dict) or not isinstance(state.get("step"), str):
        return "no {'step': str, 'outputs': dict}"
    if not isinstance(state.get("outputs"), dict):
        return "outputs that are not an object"
    refused = json_refusal(state)
    return f"a state that can't be stored: {refused}" if refused else ""


def _steps(move: Move) -> None:
    """The plan per step of N along its path, then each done step N doesn't have."""
    flow, position = move.flow, move.maps_to
    path = flow.path(move.outputs)
    names = [s.name for s in path]
    at = names.index(position) if position in names else (0 if not position else len(names))
    for index, step in enumerate(path):
        if index < at and step.name in move.outputs:
            why = f"done on v{move.execution.workflow_version}: its output is carried over, it does not run again"
            move.steps.append({"step": step.name, "plan": SKIP, "why": why})
        elif index < at:
            why = f"comes before {position} in v{flow.version}, but this execution never ran it: it would not run"
            move.steps.append({"step": step.name, "plan": SKIP, "why": why})
        elif index == at and position:
            move.steps.append({"step": step.name, "plan": RUN, "why": f"where it stands: {_standing(move)}"})
        else:
            move.steps.append({"step": step.name, "plan": RUN, "why": preview.runs_later(step)})
    declared = {s.name for s in flow.steps}
    for name in dict.fromkeys(name for name, _output in move.done):
        if name not in declared:
            mapped = (
                " (its migrate_from carries what it produced)"
                if move.execution.workflow_version in flow.migrate_from
                else ""
            )
            why = f"v{flow.version} has no {name}: its run stays in the record, no step of v{flow.version} reads it{mapped}"
            move.steps.append({"step": name, "plan": GONE, "why": why})


def _standing(move: Move) -> str:
    status = move.execution.status
    if status == Status.AWAITING_APPROVAL:
        return f"it waits for the decision, which v{move.flow.version} acts on"
    if status in (Status.WAITING, Status.PAUSED, Status.NEEDS_ATTENTION, Status.RETRY_PENDING):
        return f"{status}; when it goes on, this step runs on v{move.flow.version}'s code"
    return f"it runs on v{move.flow.version}'s code"


def _stale_gate(move: Move) -> None:
    """An approval asked at the step it stands at that N no longer asks the same way."""
    execution, flow = move.execution, move.flow
    at_gate = execution.status == Status.AWAITING_APPROVAL or (
        execution.status == Status.PAUSED and execution.paused_from == Status.AWAITING_APPROVAL
    )
    if not at_gate or not move.maps_to:
        return
    step = flow.get_step(move.maps_to)
    spec = step.spec if step.is_gate else None
    for request in ApprovalRequest.objects.filter(execution=execution, status=ApprovalRequest.State.PENDING):
        artifact = getattr(spec, "artifact", None)
        if request.step != step.name:
            why = f"asked at {request.step}, which v{flow.version} asks at {step.name}"
        elif artifact is None:
            why = f"v{flow.version}'s {step.name} asks no approval"
        elif getattr(spec, "action", None) != request.action:
            why = f"asked for {request.action}; v{flow.version}'s {step.name} asks for {spec.action}"
        elif (execution.context or {}).get("artifacts", {}).get(artifact, {}).get(
            "version_pk"
        ) != request.artifact_version_id:
            why = f"bound to another artifact than {artifact!r}, which v{flow.version}'s {step.name} names"
        else:
            continue
        _add_stale(move, request.pk, why)


def _add_stale(move: Move, approval_id: int, why: str) -> None:
    if any(s["approval_id"] == approval_id for s in move.stale):
        return
    move.stale.append({"approval_id": approval_id, "why": why})
    execution = move.execution
    if execution.status != Status.AWAITING_APPROVAL:  # only a gate that waits can be asked again by the move
        move.impossible.append(
            f"approval #{approval_id} goes stale on v{move.flow.version} ({why}), and {execution.ref} is "
            f"{execution.status}: resume it to its gate first, then migrate (or cancel it)"
        )
        return
    move.acceptable.append(
        f"approval #{approval_id} goes stale on v{move.flow.version} ({why}): migrating withdraws it and the gate "
        "asks again"
    )


def _replay(move: Move) -> None:
    """The moved execution replayed against N's code (nothing written, nothing called)."""
    with transaction.atomic():
        item = replay.replay_one(move.moved(), against=move.flow.version)
        transaction.set_rollback(True)
    move.replayed = {"verdict": item["verdict"], "findings": item["findings"]}
    for finding in item["findings"]:
        if finding["kind"] == "approval" and finding["key"].startswith("approval:"):
            _add_stale(move, int(finding["key"].split(":", 1)[1]), finding["detail"])
        else:
            move.acceptable.append(f"replay against v{move.flow.version}: {finding['detail']}")


__all__ = [
    "Move",
    "execution_migrate",
    "execution_migrate_plan",
    "execution_migrate_preview",
    "migrate_locked",
    "plan",
    "target",
]
