"""What triage's endpoints and forms accept: bulk operations, restart from a step,
closing a compensation. Built from the edge's types (``executions.inputs``), so a
value the database can't hold is a 422 naming the field here too."""

from __future__ import annotations

from typing import Annotated, Literal

from ninja import Schema
from pydantic import Field

from executions.inputs import (
    DB_INT_MAX,
    FORM,
    ActionKey,
    Body,
    Evidence,
    ExecutionRef,
    Reason,
    Sha256,
    WorkflowName,
    WorkflowVersion,
)
from executions.models import Status
from executions.reasons import StuckReason
from executions.storable import STORABLE

# --- restart from a step, close a compensation

StepName = Annotated[str, Field(min_length=1, max_length=100), STORABLE]


class RestartIn(Body):
    from_step: StepName
    # Which pass through ``from_step`` (a loop visits a step more than once); default: the latest.
    visit: Annotated[int, Field(ge=1, le=DB_INT_MAX, strict=True)] | None = None
    reason: Reason = ""
    # Send again effects that already happened (a restart refuses it otherwise: triage.restart).
    accept_repeats: bool = False


class AcceptRequestIn(Body):
    """Accept the request a drifted model call's step rebuilt (triage.drift)."""

    key: ActionKey  # the model call's key
    request_sha256: Sha256  # the rebuilt request's, as shown
    reason: Reason = ""


class CloseIn(Body):
    outcome: Literal["succeeded", "failed"]
    evidence: Evidence


class CloseFormIn(CloseIn):
    model_config = FORM
    key: ActionKey


# --- versions in flight (triage.migration, triage.rollout)

Blocker = Annotated[str, Field(min_length=1, max_length=20000), STORABLE]  # a replay's finding may be long


class MigrateIn(Body):
    """Move an execution to another version of its workflow."""

    to_version: WorkflowVersion
    reason: Reason = ""
    accept: list[Blocker] = Field(default_factory=list, max_length=100)  # blocker sentences, as the preview says them


class RolloutIn(Body):
    """Send ``percent`` of the new starts without a version to ``version``."""

    version: WorkflowVersion
    percent: Annotated[int, Field(ge=0, le=100, strict=True)]
    reason: Reason = ""


# --- bulk operations (triage.bulk)

MAX_BULK_ITEMS = 500  # executions in one bulk run


class BulkFilterIn(Body):
    """The execution list's filters, to pick what a dry run looks at."""

    status: Status | None = None
    reason: Literal[tuple(StuckReason.values)] | None = None  # type: ignore[valid-type]
    workflow: WorkflowName | None = None


BulkToken = Annotated[str, Field(min_length=1, max_length=1000), STORABLE]
FormToken = Annotated[str, Field(max_length=1000), STORABLE]


class BulkIn(Body):
    operation: Literal["cancel", "resume", "retry", "pause", "migrate"]
    ids: list[ExecutionRef] | None = Field(default=None, min_length=1, max_length=MAX_BULK_ITEMS)
    filter: BulkFilterIn | None = None
    reason: Reason = ""
    dry_run: bool = False
    token: BulkToken | None = None  # a dry run's: the run does exactly its ids or nothing
    to_version: WorkflowVersion | None = None  # migrate: the version they move to


class BulkFormIn(Schema):
    """The console's confirm form: the frozen ids of its dry run, and why."""

    operation: Literal["cancel", "resume", "retry", "pause"]
    ids: list[ExecutionRef] = Field(min_length=1, max_length=MAX_BULK_ITEMS)
    reason: Reason = ""  # required: triage.bulk says so, naming the operation
    token: FormToken = ""  # required: the dry run's (triage.bulk.check_token)
