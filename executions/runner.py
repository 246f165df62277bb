"""Advancing an execution: one bounded slice of steps under one lease.

A worker that holds the lease runs the next step directly, without a round trip
through the broker, until the execution waits, stops, or the slice's time is up;
then it gives the lease back and rings again. Every write is fenced by the lease
token. Cost: one commit per compute/model step (output + checkpoint + event), two
per effect (ledger row before the call, result after), one claim per slice.
"""

from __future__ import annotations

import logging
import time
import traceback
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import DateTimeField, ExpressionWrapper, Value
from django.db.models.functions import Now
from django.utils import timezone

from approvals import audit
from approvals import policy as approval_policy
from approvals.models import ApprovalRequest, AuditEntry
from approvals.services import supersede_older
from artifacts.models import ArtifactVersion
from artifacts.services import artifact_version_create

from . import dispatch, failpoints, ledger, lifecycle, registry, retry
from .context import StepContext
from .errors import FailureKind, StepFailure
from .http import call_timeout
from .leases import Heartbeat, Lease, LeaseLost, acquire, fence, release
from .modelclient import get_model_client
from .models import Action, Execution, Status, StepRun
from .workflow import Step, StepKind, Workflow

log = logging.getLogger(__name__)

CONTINUE, STOP = "continue", "stop"


def advance(execution_id: int, *, worker: str) -> str:
    """Run one slice of execution ``execution_id`` if this worker can take it.

    Returns what happened ("not claimed", "stopped", "sliced", "lease lost").
    Never raises for a lost lease or a stopped execution.
    """
    lease = acquire(execution_id, owner=worker)
    if lease is None:
        return "not claimed"
    with Heartbeat(lease) as heartbeat:
        try:
            return _run_slice(lease, heartbeat)
        except (LeaseLost, ledger.ExecutionStopped) as stop:
            log.info("execution %s: %s", execution_id, stop)
            return "lease lost" if isinstance(stop, LeaseLost) else "stopped"
        except Exception as exc:  # outside any step: undeployed version, a database error…
            log.exception("execution %s: slice failed", execution_id)
            return _flag_outside_step(lease, f"{type(exc).__name__}: {exc}")


def _run_slice(lease: Lease, heartbeat: Heartbeat) -> str:
    ends = time.monotonic() + settings.RUNTIME_SLICE_SECONDS
    while True:
        if heartbeat.lost.is_set():
            raise LeaseLost("heartbeat lost the lease")
        execution = Execution.objects.annotate(db_now=Now()).get(pk=lease.execution_id)
        if execution.status != Status.RUNNING or execution.lease_token != lease.token:
            return "stopped"
        if execution.deadline and execution.deadline <= execution.db_now:
            return _stop_at_deadline(lease)
        workflow = registry.get(execution.workflow, execution.workflow_version)
        step = workflow.get_step(execution.current_step)
        if _run_step(lease, execution, workflow, step) == STOP:
            return "stopped"
        if time.monotonic() >= ends:
            with transaction.atomic():
                fence(lease)
                release(lease)
                dispatch.dispatch_on_commit(lease.execution_id)
            return "sliced"


def _run_step(lease: Lease, execution: Execution, workflow: Workflow, step: Step) -> str:
    failpoints.hit(f"before_step:{step.name}")
    started = timezone.now()
    ctx = StepContext(execution=execution, workflow=workflow)
    try:
        if step.kind == StepKind.APPROVAL:
            return _approval_gate(lease, execution, workflow, step, started)
        if step.kind == StepKind.EFFECT:
            return _effect(lease, ctx, workflow, step, started)
        if step.kind == StepKind.MODEL:
            model = RecordingModel(get_model_client())
            output = step.fn(ctx, model) or {}
            output["model_calls"] = model.calls
        else:
            output = step.fn(ctx) or {}
    except StepFailure as failure:
        return _step_failed(lease, step, failure, started)
    except (LeaseLost, ledger.ExecutionStopped):
        raise
    except Exception as exc:  # a bug in step code: keep the evidence, ask a person
        log.exception("step %s of %s raised", step.name, execution.ref)
        failure = StepFailure(
            FailureKind.TRANSIENT, f"{type(exc).__name__}: {exc}", evidence=traceback.format_exc(limit=5)
        )
        return _step_failed(lease, step, failure, started, unexpected=True)
    return _checkpoint(lease, ctx, workflow, step, output, started)


def _checkpoint(
    lease: Lease,
    ctx: StepContext,
    workflow: Workflow,
    step: Step,
    output: dict[str, Any],
    started,
    *,
    action: Action | None = None,
) -> str:
    """One commit: artifacts, step run, state, progress notes, event (and ledger result).

    If the execution stopped running meanwhile (cancelled while an effect's call was
    in flight), nothing is checkpointed, but the effect's receipt is still recorded.
    """
    with transaction.atomic():
        fence(lease)
        execution = Execution.objects.get(pk=lease.execution_id)
        stopped = execution.status != Status.RUNNING or execution.current_step != step.name
        if stopped and action is not None:
            ledger.mark_succeeded(action, output, execution=execution, actor_label=lease.owner)
        if not stopped:
            following = _commit_step(lease, execution, ctx, workflow, step, output, started, action)
    if stopped:
        raise ledger.ExecutionStopped(f"{execution.ref} is {execution.status}, no longer at {step.name}")
    log.info("%s: %s done (%s)%s", execution.ref, step.name, step.kind, "" if following else "; completed")
    failpoints.hit(f"after_step:{step.name}")
    return CONTINUE if following else STOP


def _commit_step(lease, execution, ctx, workflow, step, output, started, action) -> str:
    """Inside the fenced transaction: record the step and move to the next. Returns it ("" at the end)."""
    state = execution.context
    for staged in ctx.staged_artifacts:
        version = artifact_version_create(
            execution=execution,
            kind=staged.kind,
            title=staged.title,
            blob=staged.blob,
            content_type=staged.content_type,
            step=step.name,
        )
        state.setdefault("artifacts", {})[staged.name] = version.as_ref()
        supersede_older(version, actor_label=lease.owner)
    state.setdefault("state", {})[step.name] = output
    notes = state["notes"]
    notes["facts"] = _merge_facts(notes["facts"], ctx.new_facts)
    notes["completed_steps"].append(step.name)
    following = workflow.next_step(step.name)
    notes["next_action"] = workflow.label_for(following) if following else "done"
    attempt = _record_run(lease, execution, step, started, StepRun.Outcome.SUCCEEDED, output=output)
    if action is not None:
        ledger.mark_succeeded(action, output, execution=execution, actor_label=lease.owner)
    lifecycle.record(
        execution,
        "step.completed",
        step=step.name,
        actor_label=lease.owner,
        payload=_step_summary(step, output, attempt),
    )
    execution.context = state
    execution.current_step = following
    if following:
        execution.save(update_fields=["context", "current_step", "updated_at"])
    else:
        lifecycle.apply(execution, "complete", actor_label=lease.owner, update_fields=("context", "current_step"))
        release(lease)
    return following


def _approval_gate(lease: Lease, execution: Execution, workflow: Workflow, step: Step, started) -> str:
    """First visit: ask (and release the worker). After a decision: record it and go on."""
    request = ApprovalRequest.objects.filter(execution=execution, step=step.name, round=execution.round).first()
    closed = (ApprovalRequest.State.EXPIRED, ApprovalRequest.State.WITHDRAWN, ApprovalRequest.State.SUPERSEDED)
    if request is None or request.status in closed:  # first visit, or resumed after the request lapsed
        planned = _plan_guarded_effects(execution, workflow, step)
        policy = step.approver
        with transaction.atomic():
            fence(lease)
            execution = Execution.objects.get(pk=lease.execution_id)
            if execution.status != Status.RUNNING:
                raise ledger.ExecutionStopped(f"{execution.ref} is {execution.status}")
            if request is not None:  # a fresh request needs a fresh round
                execution.round += 1
                execution.save(update_fields=["round", "updated_at"])
            ref = execution.context["artifacts"][step.artifact]
            version = ArtifactVersion.objects.get(pk=ref["version_pk"])
            expires = policy.expires_after_seconds
            request = ApprovalRequest.objects.create(
                execution=execution,
                step=step.name,
                round=execution.round,
                artifact_version=version,
                version=version.number,
                content_sha256=version.sha256,
                action=step.action,
                requested_by=execution.created_by,
                permission=policy.permission,
                group=policy.group,
                separation_of_duties=policy.separation_of_duties,
                on_expiry=policy.on_expiry,
                expires_at=ExpressionWrapper(Now() + Value(timedelta(seconds=expires)), output_field=DateTimeField())
                if expires
                else None,
            )
            audit.record(
                AuditEntry.Kind.REQUESTED,
                request=request,
                actor_label=lease.owner,
                artifact_version=version.number,
                content_sha256=version.sha256,
                requested_by=execution.created_by.get_username(),
                permission=policy.permission,
                group=policy.group,
            )
            lifecycle.record(
                execution,
                "approval.requested",
                step=step.name,
                actor_label=lease.owner,
                payload={
                    "approval_id": request.pk,
                    "artifact_id": ref["artifact_id"],
                    "artifact_version": version.number,
                    "content_sha256": version.sha256,
                    "action": step.action,
                },
            )
            for effect_step, effect in planned:
                ledger.plan(execution, step=effect_step, effect=effect, approval=request, actor_label=lease.owner)
            lifecycle.apply(execution, "await_approval", actor_label=lease.owner, step=step.name)
            release(lease)
        log.info("%s: awaiting approval %s of %s V%d", execution.ref, request.pk, ref["artifact_id"], version.number)
        failpoints.hit(f"after_step:{step.name}")
        return STOP
    if request.status != ApprovalRequest.State.APPROVED:
        # Running at a gate whose request isn't approved (e.g. resumed by an operator
        # after it was withdrawn or expired): a person has to decide what happens.
        _flag_outside_step(lease, f"approval request {request.pk} is {request.status}; no approval to act on")
        return STOP
    decision = request.decision
    output = {
        "approval_id": request.pk,
        "decision": decision.decision,
        "decided_by": decision.decided_by.get_username(),
        "artifact_version": request.version,
        "content_sha256": request.content_sha256,
        "action": request.action,
    }
    ctx = StepContext(execution=execution, workflow=workflow)
    return _checkpoint(lease, ctx, workflow, step, output, started)


def _plan_guarded_effects(execution: Execution, workflow: Workflow, gate: Step) -> list[tuple[Step, Any]]:
    """The effects this gate authorises, described now so the ledger shows them as planned."""
    ctx = StepContext(execution=execution, workflow=workflow)
    planned = []
    for effect_step in workflow.steps:
        if effect_step.kind == StepKind.EFFECT and effect_step.requires_approval == gate.name:
            try:
                planned.append((effect_step, effect_step.fn(ctx)))
            except Exception:  # describing it early is a courtesy; the step itself decides later
                log.exception("%s: could not plan %s", execution.ref, effect_step.name)
    return planned


def _effect(lease: Lease, ctx: StepContext, workflow: Workflow, step: Step, started) -> str:
    if step.requires_approval:
        _check_approval_binding(ctx.execution, workflow, step)
    effect = step.fn(ctx)
    if step.requires_approval and not Action.objects.filter(key=effect.key, status=Action.State.SUCCEEDED).exists():
        _check_approver_authority(ctx.execution, workflow, step)
    with call_timeout(step.retry.timeout):
        action, receipt = ledger.perform(lease=lease, step=step.name, action_type=step.action, effect=effect)
    return _checkpoint(lease, ctx, workflow, step, receipt, started, action=action)


def _check_approval_binding(execution: Execution, workflow: Workflow, step: Step) -> None:
    """Right before the effect: the artifact it will use is the version and hash approved."""
    gate = workflow.get_step(step.requires_approval)
    approval = execution.context.get("state", {}).get(gate.name)
    ref = execution.context.get("artifacts", {}).get(gate.artifact)
    if not approval or approval.get("decision") != "approve" or ref is None:
        raise StepFailure(FailureKind.PERMISSION, f"{step.name} needs an approval from {gate.name}")
    # The newest version of the artifact, whoever made it: an edit after the approval
    # must not ride on it.
    version = ArtifactVersion.objects.filter(artifact_id=ref["artifact_pk"]).order_by("-number").first()
    if (version.number, version.sha256) != (approval["artifact_version"], approval["content_sha256"]):
        raise StepFailure(
            FailureKind.PERMISSION,
            f"approved V{approval['artifact_version']} ({approval['content_sha256'][:12]}) "
            f"but the current artifact is V{version.number} ({version.sha256[:12]})",
        )


def _check_approver_authority(execution: Execution, workflow: Workflow, step: Step) -> None:
    """Right before a call goes out: the approver still may decide the request, by the one
    approver rule (approvals.policy). Skipped only once the effect is recorded as done,
    when nothing will be sent. Refused: PERMISSION, so needs_attention (permission_denied)."""
    approval = execution.context["state"][workflow.get_step(step.requires_approval).name]
    request = ApprovalRequest.objects.select_related("decision__decided_by").get(pk=approval["approval_id"])
    approver = request.decision.decided_by
    refused = approval_policy.refusal(approver, request)
    if refused:
        raise StepFailure(
            FailureKind.PERMISSION,
            f"the approver lost the authority: the approval of V{request.version} by {approver.get_username()} "
            f"no longer holds ({refused})",
        )


def _step_failed(lease: Lease, step: Step, failure: StepFailure, started, *, unexpected: bool = False) -> str:
    """One commit: the failed attempt, then retry later, stop, or ask a person (retry policy).

    A retry is ``retry_pending`` with a due time (database clock) that the sweeper
    honours; no worker sleeps and no long Celery countdown is used.
    """
    with transaction.atomic():
        fence(lease)
        execution = Execution.objects.annotate(db_now=Now()).get(pk=lease.execution_id)
        if execution.status != Status.RUNNING:
            raise ledger.ExecutionStopped(f"{execution.ref} is {execution.status}")
        attempt = _record_run(
            lease,
            execution,
            step,
            started,
            StepRun.Outcome.FAILED,
            output={"evidence": failure.evidence} if failure.evidence is not None else {},
            error=f"{failure.kind}: {failure.message}",
        )
        if unexpected:
            verdict = retry.Decision(retry.Verdict.ATTENTION, reason="unexpected error in step code")
        else:
            first = StepRun.objects.filter(execution=execution, step=step.name, round=execution.round).order_by("id")[0]
            verdict = retry.decide(
                step.retry,
                kind=failure.kind,
                attempt=attempt,
                elapsed_seconds=(execution.db_now - first.started_at).total_seconds(),
                retry_after=failure.retry_after,
                seconds_to_deadline=(execution.deadline - execution.db_now).total_seconds()
                if execution.deadline
                else None,
            )
        payload = {
            "failure": str(failure.kind),
            "attempt": attempt,
            "error": failure.message,
            "verdict": verdict.reason,
        }
        if verdict.verdict == retry.Verdict.RETRY:
            execution.due_at = ExpressionWrapper(
                Now() + Value(timedelta(seconds=verdict.delay_seconds)), output_field=DateTimeField()
            )
            payload.update(delay_seconds=round(verdict.delay_seconds, 3), retry_after=failure.retry_after)
            lifecycle.apply(
                execution,
                "schedule_retry",
                actor_label=lease.owner,
                reason=verdict.reason,
                step=step.name,
                payload=payload,
                update_fields=("due_at",),
            )
        else:
            lifecycle.apply(
                execution,
                "fail" if verdict.verdict == retry.Verdict.FAIL else "flag",
                actor_label=lease.owner,
                reason=f"{step.label}: {failure.message} ({verdict.reason})",
                step=step.name,
                payload=payload,
            )
        release(lease)
    log.warning("%s: %s failed (%s): %s", execution.ref, step.name, failure.kind, verdict.reason)
    return STOP


def _stop_at_deadline(lease: Lease) -> str:
    with transaction.atomic():
        fence(lease)
        execution = Execution.objects.get(pk=lease.execution_id)
        lifecycle.apply(
            execution,
            "fail",
            actor_label=lease.owner,
            reason=f"deadline {execution.deadline:%Y-%m-%d %H:%M:%S} UTC passed",
        )
        release(lease)
    return "stopped"


def _flag_outside_step(lease: Lease, reason: str) -> str:
    """Send the execution to needs_attention with ``reason`` and give the lease up."""
    try:
        with transaction.atomic():
            fence(lease)
            execution = Execution.objects.get(pk=lease.execution_id)
            if execution.status == Status.RUNNING:
                lifecycle.apply(execution, "flag", actor_label=lease.owner, reason=reason)
            release(lease)
    except LeaseLost:
        return "lease lost"
    return "stopped"


def _record_run(
    lease: Lease, execution: Execution, step: Step, started, outcome: str, *, output: dict, error: str = ""
) -> int:
    """Append this attempt's StepRun (inside the fenced transaction); returns the attempt number."""
    attempt = StepRun.objects.filter(execution=execution, step=step.name, round=execution.round).count() + 1
    StepRun.objects.create(
        execution=execution,
        step=step.name,
        kind=step.kind,
        round=execution.round,
        attempt=attempt,
        outcome=outcome,
        output=output,
        error=error,
        worker=lease.owner,
        lease_token=lease.token,
        workflow_version=execution.workflow_version,
        started_at=started,
    )
    return attempt


def _merge_facts(known: list[dict], new: list[dict]) -> list[dict]:
    ids = {f["id"] for f in known}
    return known + [f for f in new if f["id"] not in ids]


def _step_summary(step: Step, output: dict[str, Any], attempt: int) -> dict[str, Any]:
    summary: dict[str, Any] = {"kind": str(step.kind), "label": step.label, "attempt": attempt}
    for call in output.get("model_calls", []):
        summary.setdefault("model", call["model"])
        summary.setdefault("prompt_version", call["prompt_version"])
    return summary


class RecordingModel:
    """Wraps the model client so every call lands in the step's checkpoint."""

    def __init__(self, client) -> None:
        self.client = client
        self.calls: list[dict[str, Any]] = []

    @property
    def name(self) -> str:
        return self.client.name

    @property
    def label(self) -> str:
        return self.client.label

    def complete(self, *, prompt: str, prompt_version: str):
        response = self.client.complete(prompt=prompt, prompt_version=prompt_version)
        self.calls.append(
            {
                "model": response.model,
                "prompt_version": response.prompt_version,
                "prompt": prompt,
                "response": response.text,
            }
        )
        return response
