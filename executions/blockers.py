"""What keeps an execution from going back to work: the one rule behind a resume.

An action whose outcome is unknown (or left ``executing`` by a stopped execution) and
not yet resolved, or a gate's grant that went stale (``executions.engine.gates.StaleGrant``:
an approval of a version that is no longer the newest, by an approver who lost the
authority) guarding an effect still to run, blocks the step it belongs to; so does a
child of the current step that failed (and wasn't restarted) or was cancelled, and a
current step visited as often as the workflow allows (``max_visits``: the runner would
stop there again); an undeployed workflow version blocks everything. ``services.execution_resume`` refuses
(409, naming each blocker) while there is one; the resume preview
(``triage.preview``) says the same thing before anyone asks. Read only.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import children, visits
from .authoring import registry
from .authoring.workflow import Workflow
from .engine import gates
from .models import Action, Execution, Status


@dataclass(frozen=True)
class Blocker:
    """What must be resolved before ``step`` (and so the execution) can go on."""

    sentence: str
    step: str = ""  # "" for the execution as a whole
    key: str = ""  # the action, for an unknown outcome


def workflow_of(execution: Execution) -> Workflow | None:
    try:
        return registry.get(execution.workflow, execution.workflow_version)
    except registry.UnknownWorkflow:
        return None


def blockers(
    execution: Execution,
    *,
    actions: list[Action] | None = None,
    stale: list[gates.StaleGrant] | None = None,
    done: list[visits.Visit] | None = None,
) -> list[Blocker]:
    """What keeps ``execution`` from going back to work, whatever its status: an
    unresolved outcome, a stale approval guarding an effect still to run, a loop at its
    limit, an undeployed workflow version. ``actions``, ``stale``, ``done``: what the
    caller read already (the preview), else read here."""
    workflow = workflow_of(execution)
    if workflow is None:
        return [Blocker(f"{execution.workflow} v{execution.workflow_version} is not deployed here: nothing can run it")]
    actions = list(execution.actions.order_by("id")) if actions is None else actions
    found = [
        Blocker(
            f"the outcome of {a.key} is unknown ({a.attempts} attempt{'s' if a.attempts != 1 else ''}): establish "
            "it at the provider and resolve it with evidence first",
            step=a.step,
            key=a.key,
        )
        for a in actions
        if unresolved(a, execution)
    ]
    coming = visits.ahead(workflow, execution, done)
    ahead = {v.name for v in coming}
    if coming and coming[0].visit > workflow.max_visits:  # the runner would stop there again (loop_limit)
        found.append(
            Blocker(
                f"{coming[0].name} was visited {workflow.max_visits} times, the most {workflow.name} "
                f"v{workflow.version} allows (max_visits): a resume would stop there again, calling nothing; "
                "cancel it, or move it to a version that allows more visits",
                step=coming[0].name,
            )
        )
    for grant in gates.stale_of(execution) if stale is None else stale:
        guarded = [s.name for s in workflow.steps if s.guarded_by == grant.step and s.name in ahead]
        if guarded:
            found.append(Blocker(f"{grant.step} no longer lets {guarded[0]} through: {grant.why}", step=guarded[0]))
    if execution.status == Status.NEEDS_ATTENTION and execution.current_step:
        found += [
            Blocker(f"{children.broken_sentence(c)}; no resume is needed", step=execution.current_step)
            if c.status == Status.FAILED
            else Blocker(children.broken_sentence(c), step=execution.current_step)
            for c in children.children_of(execution, execution.current_step)
            if c.status in children.BROKEN
        ]
    return found


def unresolved(action: Action, execution: Execution) -> bool:
    """An effect of ``execution`` whose outcome nobody established, which holds its resume
    until an operator resolves it (the execution page offers the form for exactly these)."""
    if action.beside:  # a notification's outcome never holds its execution up
        return False
    if action.status == Action.State.UNKNOWN:
        return True
    return action.status == Action.State.EXECUTING and execution.status != Status.RUNNING
