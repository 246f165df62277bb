"""Triage's part of the Task API (assembled in config.api, ahead of the runtime's, whose
``/executions/{execution_id}`` would otherwise take ``/executions/summary`` and
``/executions/bulk``): the counts, bulk operations, the resume preview, restart from a
step, closing a compensation, and the operator audit. Thin: parse, call one service or
selector, answer; the error contract is the runtime's (``executions.api``).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Literal

from django.http import HttpRequest
from ninja import Query, Router, Schema
from ninja import Status as Reply  # an answer's status and body (``Status`` is the lifecycle's)
from pydantic import Field

from accounts.roles import reads_operator_audit
from apikit.answers import READ, READ_ONE, WRITE, WRITE_ONE, ErrorOut
from executions import selectors
from executions.answers import ActionDetailOut, ExecutionOut, WorkflowOut
from executions.errors import Forbidden, InvalidInput
from executions.inputs import ActionKey, Cursor, DbInt, ExecutionRef, RequiredWorkflowName, WorkflowName
from executions.models import pk_from_ref, ref_for
from executions.storable import STORABLE

from . import bulk, compensations, drift, migration, operator_audit, preview, restart, rollout, tallies
from .inputs import AcceptRequestIn, BulkIn, CloseIn, MigrateIn, RestartIn, RolloutIn

router = Router()


class SummaryOut(Schema):
    by_status: dict[str, int]
    by_reason: dict[str, int]


@router.get("/executions/summary", response={200: SummaryOut, **READ}, tags=["executions"])
def executions_summary(request: HttpRequest, workflow: WorkflowName | None = None):
    """How many executions are in each status (terminal included) and stuck for each reason."""
    return tallies.summary(workflow=workflow)


# --- bulk operations (triage.bulk)


class IneligibleOut(Schema):
    id: str
    why: str


class BulkDryRunOut(Schema):
    operation: str
    eligible: list[str]
    ineligible: list[IneligibleOut]
    truncated: bool
    token: str
    notes: dict[str, str]


class BulkResultOut(Schema):
    id: str
    outcome: Literal["done", "skipped", "error"]
    detail: str


class BulkRunOut(Schema):
    operation: str
    batch: str
    results: list[BulkResultOut]


@router.post("/executions/bulk", response={200: BulkDryRunOut | BulkRunOut, **WRITE}, tags=["executions"])
def bulk_operation(request: HttpRequest, payload: BulkIn):
    """Operators: cancel, resume, retry, pause or migrate (``to_version``) many executions. A dry run (``ids`` or a
    ``filter``) changes nothing and lists what is eligible; a real run takes the ``ids``
    a dry run returned and reports per item, each its own audited transition."""
    if payload.dry_run:
        found = bulk.bulk_dry_run(
            user=request.user,
            operation=payload.operation,
            ids=payload.ids,
            filter=payload.filter.model_dump() if payload.filter is not None else None,
            to_version=payload.to_version,
        )
        return found.as_dict()
    if payload.filter is not None:
        raise InvalidInput("filter", "a real run takes the ids a dry run returned, not a filter")
    if payload.ids is None:
        raise InvalidInput("ids", "name the executions (the eligible ids of a dry run)")
    return bulk.bulk_run(
        user=request.user,
        operation=payload.operation,
        ids=payload.ids,
        reason=payload.reason,
        token=payload.token,
        to_version=payload.to_version,
    ).as_dict()


# --- resume preview, restart from a step, accepting a drifted request, closing compensations


class PlannedStepOut(Schema):
    step: str
    label: str
    kind: str
    visit: int  # its pass through the step: 1, then 2, … when a loop or changes requested leads back
    plan: Literal["skip", "run", "blocked"]
    why: str


class PreviewEffectOut(Schema):
    key: str
    type: str
    status: str
    may_repeat: bool
    provider_dedupes: bool


class StaleApprovalOut(Schema):
    approval_id: int
    artifact_version: int
    content_sha256: str
    why: str


class WorkflowVersionOut(Schema):
    pinned: int
    latest: int


class PauseHoldOut(Schema):
    """An operator's pause, as the resume preview shows it (not a legal hold: ``LegalHoldOut``)."""

    paused_from: str
    by: str
    reason: str
    why: str


class ResumePreviewOut(Schema):
    can_resume: bool
    blocked_by: list[str]
    steps: list[PlannedStepOut]
    effects: list[PreviewEffectOut]
    stale_approvals: list[StaleApprovalOut]
    workflow_version: WorkflowVersionOut
    hold: PauseHoldOut | None = None  # a paused execution: where resume returns it, and who held it (issue 22)


@router.get(
    "/executions/{execution_id}/resume-preview",
    response={200: ResumePreviewOut, **READ_ONE, 403: ErrorOut},
    tags=["executions"],
)
def resume_preview(request: HttpRequest, execution_id: ExecutionRef):
    """Operators: what a resume would skip, run and risk; resume refuses while ``can_resume`` is false."""
    return preview.execution_resume_preview(ref=execution_id, user=request.user)


# --- versions in flight (triage.migration)


class MigrationStepOut(Schema):
    step: str
    plan: Literal["skip", "run", "gone"]
    why: str


class MigrationStaleOut(Schema):
    approval_id: int
    why: str


class PositionOut(Schema):
    step: str
    maps_to: str | None


class ReplayFindingOut(Schema):
    kind: str
    step: str
    key: str
    detail: str


class MigrationReplayOut(Schema):
    verdict: str  # ok | drift | unregistered_version, or "" when it could not be placed to replay
    findings: list[ReplayFindingOut]


class MigratePreviewOut(Schema):
    id: str
    can_migrate: bool
    blocked_by: list[str]
    from_: int = Field(alias="from")
    to: int
    position: PositionOut
    steps: list[MigrationStepOut]
    effects: list[PreviewEffectOut]  # as the resume preview lists them
    stale_approvals: list[MigrationStaleOut]
    replay: MigrationReplayOut

    model_config = {"populate_by_name": True}


@router.get(
    "/executions/{execution_id}/migrate-preview",
    response={200: MigratePreviewOut, **READ_ONE, 403: ErrorOut},
    tags=["executions"],
    by_alias=True,
)
def migrate_preview(request: HttpRequest, execution_id: ExecutionRef, to: DbInt):
    """Operators: what moving the execution to version ``to`` of its workflow would skip, run,
    repeat and make stale, and its replay against that version's code; ``migrate`` refuses
    while ``can_migrate`` is false unless each blocker is accepted by name."""
    return migration.execution_migrate_preview(ref=execution_id, user=request.user, to=to)


@router.post("/executions/{execution_id}/migrate", response={200: ExecutionOut, **WRITE_ONE}, tags=["executions"])
def migrate_execution(request: HttpRequest, execution_id: ExecutionRef, payload: MigrateIn):
    """Operators: move the execution to version ``to_version`` of its workflow, one audited
    ``migrate`` transition; 409 naming each blocker of its preview not in ``accept``."""
    execution = migration.execution_migrate(
        ref=execution_id,
        user=request.user,
        to_version=payload.to_version,
        reason=payload.reason,
        accept=payload.accept,
    )
    return selectors.execution_payload(execution)


@router.post("/workflows/{name}/rollout", response={200: WorkflowOut, **WRITE_ONE}, tags=["workflows"])
def rollout_workflow(request: HttpRequest, name: RequiredWorkflowName, payload: RolloutIn):
    """Operators: ``percent`` of the new starts without a ``version`` go to ``version``, the
    rest to the highest registered version below it (0: a rollback for new starts). Raising
    it → 409 naming the executions on that version whose replay finds drift. → the catalogue item."""
    return rollout.workflow_rollout(
        name=name, user=request.user, version=payload.version, percent=payload.percent, reason=payload.reason
    )


@router.post("/executions/{execution_id}/restart", response={201: ExecutionOut, **WRITE_ONE}, tags=["executions"])
def restart_execution(request: HttpRequest, execution_id: ExecutionRef, payload: RestartIn):
    """Operators: a failed execution runs again from ``from_step`` as a new execution
    that reuses the recorded outputs of the steps before it."""
    execution = restart.execution_restart(
        ref=execution_id,
        user=request.user,
        from_step=payload.from_step,
        reason=payload.reason,
        accept_repeats=payload.accept_repeats,
        visit=payload.visit,
    )
    return Reply(201, selectors.execution_payload(execution))


class RepeatOut(Schema):
    key: str
    type: str
    why: str


class RestartOptionOut(Schema):
    step: str
    visit: int  # which pass through the step a restart from here runs again (the rest before it are kept)
    label: str
    works: bool
    why_not: str
    would_repeat: list[RepeatOut]
    warnings: list[str]
    default: bool


class RestartOptionsOut(Schema):
    options: list[RestartOptionOut]


@router.get(
    "/executions/{execution_id}/restart-options",
    response={200: RestartOptionsOut, **READ_ONE, 403: ErrorOut},
    tags=["executions"],
)
def restart_options(request: HttpRequest, execution_id: ExecutionRef):
    """Operators: the steps a failed execution can be restarted from, what each would send
    again, and the default (empty when it is not failed)."""
    return {"options": [o.as_dict() for o in restart.execution_restart_options(ref=execution_id, user=request.user)]}


@router.post(
    "/executions/{execution_id}/accept-request", response={200: ExecutionOut, **WRITE_ONE}, tags=["executions"]
)
def accept_request(request: HttpRequest, execution_id: ExecutionRef, payload: AcceptRequestIn):
    """Operators: an execution stopped by a model drift goes on with the request its step
    rebuilt (``key`` and its ``request_sha256``, as the page shows them): the model is
    asked again for that call; the old record is kept, superseded (audited)."""
    execution = drift.execution_accept_request(
        ref=execution_id,
        user=request.user,
        key=payload.key,
        request_sha256=payload.request_sha256,
        reason=payload.reason,
    )
    return selectors.execution_payload(execution)


@router.post("/actions/{key}/close", response={200: ActionDetailOut, **WRITE_ONE}, tags=["actions"])
def close_action(request: HttpRequest, key: ActionKey, payload: CloseIn):
    """Operators: close a planned compensation of a cancelled execution with evidence (audited)."""
    return compensations.action_close(key=key, user=request.user, outcome=payload.outcome, evidence=payload.evidence)


# --- the operator audit (triage.operator_audit): operators and auditors read it


class ActOut(Schema):
    id: int
    at: datetime
    execution: str
    actor: str
    action: str
    reason: str
    before: str
    after: str
    subject: str
    batch: str | None
    via: str | None = None  # "cli": by manage.py keel --as USER; null: the API or a screen


class ActPage(Schema):
    items: list[ActOut]
    next: int | None


@router.get("/operator-audit", response={200: ActPage, **READ, 403: ErrorOut}, tags=["audit"])
def operator_audit_list(
    request: HttpRequest,
    actor: Annotated[str, Field(min_length=1, max_length=150), STORABLE] | None = None,
    action: Literal[operator_audit.ACTIONS] | None = None,  # type: ignore[valid-type]
    execution: Cursor | None = None,
    date_from: date | None = Query(None, alias="from"),  # noqa: B008
    date_to: date | None = Query(None, alias="to"),  # noqa: B008
    batch: Annotated[str, Field(pattern=operator_audit.BATCH.pattern)] | None = None,
    cursor: DbInt | None = None,
):
    """Every act a person took on executions (cancel, resume, retry now, resolve, signal,
    bulk items), newest first, 50 a page; pass ``next`` as ``cursor`` for the next."""
    if not reads_operator_audit(request.user):
        raise Forbidden("operators and auditors read the operator audit")
    filters = operator_audit.Filters(
        actor=actor or "",
        action=action or "",
        execution=ref_for(pk_from_ref(execution)) if execution else "",
        date_from=date_from,
        date_to=date_to,
        batch=batch or "",
    )
    rows = operator_audit.acts(filters)
    if cursor:
        rows = rows.filter(id__lt=cursor)
    page = list(rows[: operator_audit.PAGE_SIZE + 1])
    more = len(page) > operator_audit.PAGE_SIZE
    page = page[: operator_audit.PAGE_SIZE]
    return {"items": [operator_audit.act_of(e).as_dict() for e in page], "next": page[-1].pk if more else None}
