"""Creating an execution: the row, its first notes and its ``execution.created`` event,
and the doorbell once it commits. One routine for the API's start
(``executions.services.execution_start``) and a parent's children step
(``executions.children``), which passes ``parent``, ``parent_step`` and ``child_key``.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db.models.functions import Now
from django.utils import timezone

from ..authoring import notes
from ..models import Execution
from . import dispatch, lifecycle, tracing, writer

_NOW = Now()  # one object: the writer knows the statement's shape again

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

    from ..authoring.workflow import Workflow


def input_digest(workflow: str, data: dict[str, Any]) -> str:
    canonical = json.dumps({"workflow": workflow, "input": data}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def initial_notes(flow: Workflow, parsed: dict) -> dict:
    """The first progress notes. The requester's ``constraints`` go in as ``requested``
    (quoted data in the prompt, executions.authoring.notes), never with the runtime's authority —
    even when a workflow's ``constraints`` repeat them."""
    requested = list(parsed.get("constraints") or [])
    own = [c for c in flow.constraints(parsed) if c not in requested]
    assert flow.goal is not None, "a workflow's goal defaults to its title (Workflow.__post_init__)"
    return notes.initial(goal=flow.goal(parsed), constraints=own, requested=requested)


def create(
    flow: Workflow,
    parsed: dict[str, Any],
    *,
    created_by_id: int,
    actor: AbstractBaseUser | None = None,
    actor_label: str = "",
    idempotency_key: str | None = None,
    parent: Execution | None = None,
    parent_step: str = "",
    child_key: str = "",
    budget_usd: Decimal | None = None,
) -> Execution:
    """A pending execution of ``flow`` with the validated input ``parsed`` and its event,
    written together (``writer.create``), and the message to run it sent once that
    commits (at once outside a transaction). Raises IntegrityError for a key already used
    (the idempotency key, or a parent's step and child key): then nothing was written."""
    digest = input_digest(flow.name, parsed)
    execution = Execution(
        workflow=flow.name,
        workflow_version=flow.version,
        input=parsed,
        input_digest=digest,
        idempotency_key=idempotency_key or None,
        created_by_id=created_by_id,
        current_step=flow.first_step,
        dispatched_at=_NOW,  # the doorbell rings once this commits (below)
        deadline=timezone.now() + timedelta(seconds=flow.deadline_seconds) if flow.deadline_seconds else None,
        parent=parent,
        parent_step=parent_step,
        child_key=child_key,
        budget_usd=budget_usd,
        context={
            "artifacts": {},
            "notes": initial_notes(flow, parsed),
            # The prompt template of each model and agent step, pinned as the execution starts.
            "prompts": {s.name: s.prompt_version for s in flow.steps if s.prompt_version},
        },
    )
    payload: dict[str, Any] = {"workflow": flow.name, "workflow_version": flow.version, "input": parsed}
    if parent is not None:
        payload.update(parent=parent.ref, parent_step=parent_step, child_key=child_key)
    created = lifecycle.event(
        execution,
        "execution.created",
        to_status=execution.status,
        step=execution.current_step,
        actor=actor,
        actor_label=actor_label,
        payload=payload,
    )
    writer.create(execution, [created])  # one statement on PostgreSQL
    dispatch.send_on_commit(execution.pk)
    tracing.mark("keel.start", execution, **{"keel.actor": actor_label or (actor.get_username() if actor else None)})
    return execution
