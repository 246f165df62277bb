"""Restart a failed execution from one of its steps, as a new execution (what DBOS
calls a fork and Temporal a reset).

The new execution pins the same workflow version, takes the same input and the same
requester (so separation of duties still holds), and starts at ``from_step`` with the
recorded outputs of the steps before it: their checkpointed state, the artifacts they
produced (copied over the same stored bytes), the progress notes (the constraints,
the facts those steps verified, the steps completed). Those steps never run in the
new execution; ``from_step`` and everything after it do, with the new execution's
keys. The two are linked both ways (``restarted_from`` / ``restarted_as``) and each
gets an event naming the other, with the operator and the reason.

An approval recorded before ``from_step`` still authorises exactly the bytes it was
bound to (the effect re-checks version, sha256 and the approver's authority); restart
from the gate, or earlier, to ask again.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from artifacts.models import ArtifactVersion
from artifacts.services import artifact_copy
from executions.authoring import registry
from executions.authoring.workflow import Workflow
from executions.engine import dispatch, lifecycle
from executions.errors import Conflict, Forbidden, InvalidInput
from executions.models import Action, Execution, Status
from executions.services import OPERATE, execution_for


def execution_restart(*, ref: str, user: AbstractBaseUser, from_step: str, reason: str) -> Execution:
    """Operators: a new execution continuing failed execution ``ref`` from ``from_step``.

    Raises Forbidden, NotFound, InvalidInput naming ``reason`` or ``from_step`` (not a
    step of the pinned version, or past the step it failed at), Conflict (not failed;
    already restarted; an action whose outcome is unknown; its version not deployed).
    Nothing is written on any refusal.
    """
    if not user.has_perm(OPERATE):
        raise Forbidden("only operators may restart executions")
    reason = reason.strip()
    if not reason:
        raise InvalidInput("reason", "say why it should run again")
    with transaction.atomic():
        failed = Execution.objects.select_for_update(no_key=True).get(pk=execution_for(ref).pk)
        try:
            workflow = registry.get(failed.workflow, failed.workflow_version)
        except registry.UnknownWorkflow as exc:
            raise Conflict(str(exc)) from None
        names = [s.name for s in workflow.steps]
        if from_step not in names:
            raise InvalidInput(
                "from_step",
                f"{workflow.name} v{workflow.version} has no step {from_step!r}; its steps: {', '.join(names)}",
            )
        _check_restartable(failed)
        kept = names[: names.index(from_step)]
        _check_reached(failed, from_step, kept, names)
        restarted = _create(failed, workflow, from_step=from_step, kept=kept)
        common = {"from_step": from_step, "reason": reason}
        lifecycle.record(
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
                "reused_steps": kept,
                **common,
            },
        )
        lifecycle.record(
            failed, "execution.restarted", step=from_step, actor=user, payload={"restarted_as": restarted.ref, **common}
        )
        dispatch.dispatch_on_commit(restarted.pk)
    return restarted


def _check_restartable(failed: Execution) -> None:
    if failed.status != Status.FAILED:
        raise Conflict(
            f"{failed.ref} is {failed.status}: only a failed execution can be restarted", status=failed.status
        )
    if failed.restart is not None:
        raise Conflict(f"{failed.ref} was already restarted as {failed.restart.ref}", restarted_as=failed.restart.ref)
    unknown = failed.actions.filter(status__in=[Action.State.UNKNOWN, Action.State.EXECUTING]).first()
    if unknown is not None:
        raise Conflict(
            f"the outcome of {unknown.key} is unknown: a restart sends its effects under new keys, so establish "
            "whether it happened first",
            key=unknown.key,
        )


def _check_reached(failed: Execution, from_step: str, kept: list[str], names: list[str]) -> None:
    """Every step before ``from_step`` has a recorded output to reuse."""
    if failed.current_step in names and names.index(from_step) > names.index(failed.current_step):
        raise InvalidInput(
            "from_step", f"{failed.ref} failed at {failed.current_step}: restart from it or an earlier step"
        )
    state = failed.context.get("state", {})
    missing = next((name for name in kept if name not in state), None)
    if missing is not None:
        raise InvalidInput("from_step", f"{missing} never completed in {failed.ref}: restart from it or earlier")


def _create(failed: Execution, workflow: Workflow, *, from_step: str, kept: list[str]) -> Execution:
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
        context={"state": {}, "artifacts": {}, "notes": {}},
    )
    restarted.context = {
        "state": {name: old["state"][name] for name in kept},
        "artifacts": _artifacts(old.get("artifacts", {}), kept, restarted),
        "notes": _notes(old["notes"], kept, next_action=workflow.label_for(from_step)),
    }
    restarted.save(update_fields=["context"])
    return restarted


def _artifacts(refs: dict[str, dict], kept: list[str], restarted: Execution) -> dict[str, dict]:
    """The artifacts the kept steps produced, copied into ``restarted``."""
    out = {}
    for name, ref in refs.items():
        version = ArtifactVersion.objects.select_related("artifact").get(pk=ref["version_pk"])
        if version.produced_by_step in kept:
            out[name] = artifact_copy(version, execution=restarted).as_ref()
    return out


def _notes(notes: dict[str, Any], kept: list[str], *, next_action: str) -> dict[str, Any]:
    """The progress notes as they stood after the kept steps: every constraint (those a
    manager added included), the facts the kept steps verified, the kept steps done.
    Facts recorded without their step are kept only when every completed step is kept."""
    done = notes.get("completed_steps", [])
    everything_kept = set(done) <= set(kept)
    return {
        **notes,
        "facts": [f for f in notes.get("facts", []) if f.get("step") in kept or ("step" not in f and everything_kept)],
        "completed_steps": [s for s in done if s in kept],
        "next_action": next_action,
    }
