"""Deciding approval requests, superseding and expiring them: the one place the rules
live (API, screens, sweeper).

A decision is accepted only when the user may decide the request (``policy.refusal``:
permission, group, separation of duties), the request is pending and unexpired, the
execution awaits it, and the version and hash the user saw are the ones bound to it.
The same ``event_id`` again returns the first result and changes nothing. Every
refused attempt is written to the audit trail with its reason and the values sent,
clipped to what the database holds; past a burst of them a user's further refused
attempts are answered ``RateLimited`` and summarised (``throttle``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models.functions import Now
from django.utils import timezone

from artifacts.models import ArtifactVersion
from executions import runtime
from executions.errors import Conflict, Forbidden, InvalidInput, NotFound, RateLimited
from executions.models import Execution, Status, ref_for
from executions.reasons import StuckReason
from executions.services import OPERATE, execution_for
from executions.storable import clip_int, clip_text, text_refusal

from . import audit, policy, selectors, throttle
from .models import ApprovalRequest, AuditEntry, Decision

# A decision → the request's transition.
CLOSE = {
    Decision.Verdict.APPROVE: "approve",
    Decision.Verdict.REJECT: "reject",
    Decision.Verdict.REQUEST_CHANGES: "request_changes",
}


def close_request(
    request: ApprovalRequest,
    transition: str,
    kind: str,
    *,
    actor: AbstractBaseUser | None = None,
    actor_label: str = "",
    reason: str = "",
    **detail,
) -> None:
    """The one writer of ``ApprovalRequest.status``, inside the caller's transaction
    (the request read or locked in it): apply ``transition`` from pending, save it,
    authorise or void the effects the request guards, and append the audit entry
    ``kind`` with ``reason`` and ``detail``."""
    getattr(request, transition)()
    request.closed_at = timezone.now()
    request.save(update_fields=["status", "closed_at"])
    approved = request.status == ApprovalRequest.State.APPROVED
    why = f"approval {request.pk} was {request.status}" + (f" ({reason})" if reason else "")
    runtime.authorise(
        gate_ref=request.gate_ref,
        approved=approved,
        actor_label=actor_label or (f"user:{actor.get_username()}" if actor is not None else ""),
        reason="" if approved else why,
        approval_id=request.pk,
    )
    audit.record(
        kind,
        request=request,
        actor=actor,
        actor_label=actor_label,
        artifact_version=request.version,
        content_sha256=request.content_sha256,
        **({"reason": reason} if reason else {}),
        **detail,
    )


@dataclass(frozen=True)
class DecisionResult:
    decision: Decision
    execution_status: str
    replayed: bool

    def as_dict(self) -> dict:
        return {
            "approval_id": self.decision.request_id,
            "decision": self.decision.decision,
            "event_id": self.decision.event_id,
            "decided_by": self.decision.approver,
            "execution_status": self.execution_status,
        }


def approval_decide(
    *,
    user: AbstractBaseUser,
    execution_ref: str,
    approval_id: int,
    decision: str,
    artifact_version: int,
    content_sha256: str,
    event_id: str,
    comment: str = "",
) -> DecisionResult:
    if decision not in Decision.Verdict.values:
        raise InvalidInput("decision", f"must be one of {', '.join(Decision.Verdict.values)}")
    if not event_id or len(event_id) > 100:
        raise InvalidInput(
            "event_id", "required, at most 100 characters: a unique id for this decision, reused on retries"
        )
    if len(comment) > 4000:
        raise InvalidInput("comment", "at most 4000 characters")
    for field, value in (("event_id", event_id), ("comment", comment)):
        if reason := text_refusal(value):
            raise InvalidInput(field, reason)
    if decision == Decision.Verdict.REQUEST_CHANGES and not comment.strip():
        raise InvalidInput("comment", "say what must change: it becomes a mandatory constraint for the next draft")
    previous = Decision.objects.filter(event_id=event_id).select_related("request__execution").first()
    if previous is not None:
        return _replay(previous, user, approval_id)
    try:
        try:
            with transaction.atomic():
                return _decide(
                    user=user,
                    execution_ref=execution_ref,
                    approval_id=approval_id,
                    decision=decision,
                    artifact_version=artifact_version,
                    content_sha256=content_sha256,
                    event_id=event_id,
                    comment=comment,
                )
        except IntegrityError:  # a concurrent decision won the OneToOne or the event_id
            previous = Decision.objects.filter(event_id=event_id).first()
            if previous is not None:
                return _replay(previous, user, approval_id)
            existing = Decision.objects.get(request_id=approval_id)
            raise _already_decided(existing) from None
    except (Forbidden, Conflict) as refused:
        _record_refusal(
            user,
            refused,
            approval_id=approval_id,
            decision=decision,
            artifact_version=artifact_version,
            content_sha256=content_sha256,
            event_id=event_id,
            comment=comment,
        )
        raise


def _record_refusal(user, refused: Forbidden | Conflict, *, approval_id, artifact_version, **sent) -> None:
    """A refused attempt is evidence too: record it, outside the rolled-back transaction.

    Every value is clipped to what its column holds (NUL dropped, surrogates replaced,
    lengths cut, an integer out of range kept as text), so the entry is never lost to
    the values it records. Past the user's burst limit nothing is recorded one by one
    and RateLimited is raised instead (approvals.throttle).
    """
    request = ApprovalRequest.objects.filter(pk=approval_id).first() if clip_int(approval_id) else None
    if request is None:
        return
    detail = {name: clip_text(value, 500) for name, value in sent.items()}
    detail["content_sha256"] = clip_text(detail["content_sha256"], 64)
    version = clip_int(artifact_version)
    if version is None:
        detail["artifact_version_sent"] = clip_text(artifact_version, 40)
    with transaction.atomic():
        admission = (
            throttle.admit(user=user, approval_id=request.pk)
            if getattr(user, "is_authenticated", False)
            else throttle.Admission(record=True)
        )
        if admission.record:
            audit.record(
                AuditEntry.Kind.REFUSED,
                request=request,
                actor=user,
                artifact_version=version,
                content_sha256=detail.pop("content_sha256"),
                reason=clip_text(refused.message, 2000),
                status_code=refused.status_code,
                **detail,
            )
    if not admission.record:
        raise RateLimited(
            f"too many refused decisions: more than {throttle.burst()} in "
            f"{int(throttle.window().total_seconds())} s; this one was refused too ({clip_text(refused.message, 300)}) "
            f"and is counted, not recorded one by one; try again in {admission.retry_after} s",
            retry_after=admission.retry_after,
        ) from refused


def _decide(*, user, execution_ref, approval_id, decision, artifact_version, content_sha256, event_id, comment):
    found = ApprovalRequest.objects.filter(pk=approval_id).values_list("execution_id", flat=True).first()
    if found is None or ref_for(found) != execution_ref.upper():
        raise NotFound(f"no approval request {approval_id} on {execution_ref}")
    # Lock order everywhere: the execution row, then its approval requests (all of it: dblocks).
    execution = Execution.objects.select_for_update(no_key=True).get(pk=found)
    request = ApprovalRequest.objects.select_for_update().get(pk=approval_id)
    refused = policy.refusal(user, request)
    if refused:
        raise Forbidden(refused)
    if not request.is_pending:
        existing = Decision.objects.filter(request=request).first()
        if existing is not None and existing.event_id == event_id:
            return _replay(existing, user, approval_id)  # the same click arrived twice at once
        if existing is not None:
            raise _already_decided(existing)
        raise Conflict(_not_pending_message(request, artifact_version), status=request.status)
    if request.expires_at and ApprovalRequest.objects.filter(pk=request.pk, expires_at__lte=Now()).exists():
        raise Conflict(f"approval request {request.pk} expired at {request.expires_at:%Y-%m-%d %H:%M} UTC")
    if (artifact_version, content_sha256) != (request.version, request.content_sha256):
        raise Conflict(
            f"you decided on V{artifact_version} ({content_sha256[:12]}) but this request is for "
            f"V{request.version} ({request.content_sha256[:12]})",
            expected_version=request.version,
            expected_sha256=request.content_sha256,
        )
    if execution.status != Status.AWAITING_APPROVAL or execution.current_step != request.step:
        raise Conflict(f"{execution.ref} is {execution.status}, not awaiting this approval", status=execution.status)
    made = Decision(
        request=request,
        event_id=event_id,
        decision=decision,
        decided_by=user,
        decided_by_username=user.get_username(),
        artifact_version=artifact_version,
        content_sha256=content_sha256,
        comment=comment,
    )
    payload = {
        "approval_id": request.pk,
        "decision": decision,
        "event_id": event_id,
        "artifact_version": artifact_version,
        "content_sha256": content_sha256,
        "comment": comment,
    }
    runtime.record(execution, "approval.decided", step=request.step, actor=user, payload=payload)
    runtime.trace_mark(
        "keel.decision",
        execution,
        **{
            "keel.step": request.step,
            "keel.decision": decision,
            "keel.approval.id": request.pk,
            "keel.artifact.version": artifact_version,
            "keel.actor": user.get_username(),
        },
    )
    close_request(
        request,
        CLOSE[decision],
        AuditEntry.Kind.DECIDED,
        actor=user,
        decision=decision,
        event_id=event_id,
        comment=comment,
    )
    if decision == Decision.Verdict.APPROVE:
        runtime.execution_continue(execution, actor=user, payload={"approval_id": request.pk})
    elif decision == Decision.Verdict.REQUEST_CHANGES:
        _back_to_drafting(
            execution, request, user=user, instruction=comment, transition_payload={"approval_id": request.pk}
        )
    elif _on_reject(execution, request):  # the workflow goes on at the step it declared for a reject
        runtime.execution_continue(execution, actor=user, payload={"approval_id": request.pk, "decision": decision})
    else:
        runtime.cancel_locked(execution, actor=user, reason=f"rejected: {comment}".strip(": "))
    made.execution_status = execution.status
    made.save()
    return DecisionResult(decision=made, execution_status=execution.status, replayed=False)


def _replay(previous: Decision, user: AbstractBaseUser, approval_id: int) -> DecisionResult:
    if previous.request_id != approval_id or previous.decided_by_id != user.pk:
        raise Conflict(f"event_id {previous.event_id} was already used for another decision")
    return DecisionResult(decision=previous, execution_status=previous.execution_status, replayed=True)


def _already_decided(existing: Decision) -> Conflict:
    return Conflict(
        f"approval request {existing.request_id} was already decided: {existing.decision} by "
        f"{existing.approver} at {existing.created_at:%Y-%m-%d %H:%M:%S} UTC",
        existing={
            "decision": existing.decision,
            "decided_by": existing.approver,
            "event_id": existing.event_id,
        },
    )


def _not_pending_message(request: ApprovalRequest, seen_version: int) -> str:
    if request.status == ApprovalRequest.State.SUPERSEDED:
        newest = (
            ArtifactVersion.objects.filter(artifact_id=request.artifact_version.artifact_id).order_by("-number").first()
        )
        now = (
            f"the current version is V{newest.number}"
            if newest and newest.number > request.version
            else "a new version is being drafted"
        )
        return (
            f"you decided on V{seen_version}, but the request for V{request.version} was superseded: {now}, "
            "which needs its own decision"
        )
    return f"approval request {request.pk} for V{request.version} is {request.status}"


def _back_to_drafting(
    execution: Execution, request: ApprovalRequest, *, user, instruction: str, transition_payload: dict
) -> None:
    """Inside the caller's transaction (execution locked, awaiting ``request``'s gate):
    the runtime goes back to the step that drafted the version, in a new round, with
    ``instruction`` as a mandatory constraint for the next draft V(n+1)."""
    runtime.execution_rewind(
        execution,
        to_step=_redraft_step(execution, request),
        constraint=f"Requested by {user.get_username()} on V{request.version}: {instruction.strip()}",
        actor=user,
        reason=f"changes requested on V{request.version}",
        payload=transition_payload,
    )


def _redraft_step(execution: Execution, request: ApprovalRequest) -> str:
    """The gate's ``redraft_from`` step, else the step that produced the version."""
    return (
        getattr(selectors.gate_spec(request, execution=execution), "redraft_from", "")
        or request.artifact_version.produced_by_step
    )


def _on_reject(execution: Execution, request: ApprovalRequest) -> str:
    """The step the gate's ``on_reject`` continues at after a reject, or "" (the execution ends)."""
    return getattr(selectors.gate_spec(request, execution=execution), "on_reject", None) or ""


def approval_supersede(request: ApprovalRequest, *, actor_label: str, reason: str, actor=None) -> None:
    """Inside the caller's transaction: a pending request for an older version stops counting."""
    request = ApprovalRequest.objects.select_for_update().filter(pk=request.pk).select_related("execution").first()
    if request is None or not request.is_pending:
        return
    close_request(request, "supersede", AuditEntry.Kind.SUPERSEDED, actor=actor, actor_label=actor_label, reason=reason)
    runtime.record(
        request.execution,
        "approval.superseded",
        step=request.step,
        actor=actor,
        actor_label=actor_label,
        payload={"approval_id": request.pk, "artifact_version": request.version, "reason": reason},
    )


def supersede_older(version: ArtifactVersion, *, actor_label: str) -> None:
    """A new artifact version supersedes every pending request for its older versions."""
    for request in ApprovalRequest.objects.filter(
        artifact_version__artifact_id=version.artifact_id,
        version__lt=version.number,
        status=ApprovalRequest.State.PENDING,
    ).select_related("execution"):
        approval_supersede(request, actor_label=actor_label, reason=f"V{version.number} was created")


def execution_redraft(*, ref: str, user: AbstractBaseUser, instruction: str) -> Execution:
    """The requester (or an operator) asks for a new draft while approval is pending.

    The pending request is superseded now; the draft step runs again with the
    instruction as a mandatory constraint and its new version needs its own decision.
    """
    if not instruction.strip():
        raise InvalidInput("instruction", "say what the new draft must change")
    execution = execution_for(ref)
    if execution.created_by_id != user.pk:  # the starter asks for their own; others operate it
        runtime.require(user, "operate", execution.workflow)
    if not (user.has_perm(OPERATE) or execution.created_by_id == user.pk):
        raise Forbidden("only the user who started it, or an operator, may ask for a new draft")
    with transaction.atomic():
        execution = Execution.objects.select_for_update(no_key=True).get(pk=execution.pk)
        if execution.status != Status.AWAITING_APPROVAL:
            raise Conflict(f"{execution.ref} is {execution.status}, not awaiting approval", status=execution.status)
        request = ApprovalRequest.objects.select_for_update().get(
            execution=execution, step=execution.current_step, round=execution.round
        )
        approval_supersede(
            request,
            actor=user,
            actor_label=f"user:{user.get_username()}",
            reason=f"redraft asked: {instruction.strip()}",
        )
        _back_to_drafting(
            execution,
            request,
            user=user,
            instruction=instruction,
            transition_payload={"redraft": True, "instruction": instruction.strip()},  # an operator-audit act
        )
    return execution


def expire_due() -> list[int]:
    """Sweeper: pending requests past ``expires_at`` (database clock) expire; the execution
    then follows the request's policy (needs_attention or cancel). No publish follows."""
    expired = []
    due = ApprovalRequest.objects.filter(status=ApprovalRequest.State.PENDING, expires_at__lte=Now()).order_by()
    for pk, execution_id in due.values_list("pk", "execution_id")[:200]:
        with transaction.atomic():
            execution = Execution.objects.select_for_update(no_key=True).get(pk=execution_id)
            request = ApprovalRequest.objects.select_for_update().get(pk=pk)
            if not request.is_pending:
                continue
            close_request(
                request, "expire", AuditEntry.Kind.EXPIRED, actor_label="sweeper", on_expiry=request.on_expiry
            )
            if execution.status == Status.AWAITING_APPROVAL and execution.current_step == request.step:
                reason = f"approval request {request.pk} for V{request.version} expired unanswered"
                if request.on_expiry == "cancel":
                    runtime.cancel_locked(execution, actor_label="sweeper", reason=reason)
                else:
                    runtime.transition(
                        execution, "flag", actor_label="sweeper", reason=reason, code=StuckReason.APPROVAL_LAPSED
                    )
        expired.append(pk)
    return expired
