"""Deciding an approval request: the one place the rules live (API, screens, CLI).

A decision is accepted only when the user is authenticated and holds the request's
permission, is not the requester (separation of duties), the request is pending, the
execution awaits it, and the version and hash the user saw are the ones bound to it.
The same ``event_id`` again returns the first result and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models.functions import Now
from django.utils import timezone

from executions import dispatch, ledger, lifecycle
from executions.errors import Conflict, Forbidden, InvalidInput, NotFound
from executions.models import Execution, Status, ref_for

from .models import ApprovalRequest, Decision

OUTCOME = {
    Decision.Verdict.APPROVE: ApprovalRequest.State.APPROVED,
    Decision.Verdict.REJECT: ApprovalRequest.State.REJECTED,
    Decision.Verdict.REQUEST_CHANGES: ApprovalRequest.State.CHANGES_REQUESTED,
}


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
            "decided_by": self.decision.decided_by.get_username(),
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
        raise InvalidInput("event_id", "required, at most 100 characters: a unique id for this decision, reused on retries")
    if len(comment) > 4000:
        raise InvalidInput("comment", "at most 4000 characters")
    if decision == Decision.Verdict.REQUEST_CHANGES:
        raise InvalidInput("decision", "request_changes is not supported by this runtime yet")
    previous = Decision.objects.filter(event_id=event_id).select_related("request__execution").first()
    if previous is not None:
        return _replay(previous, user, approval_id)
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


def _decide(*, user, execution_ref, approval_id, decision, artifact_version, content_sha256, event_id, comment):
    found = ApprovalRequest.objects.filter(pk=approval_id).values_list("execution_id", flat=True).first()
    if found is None or ref_for(found) != execution_ref.upper():
        raise NotFound(f"no approval request {approval_id} on {execution_ref}")
    # Lock order everywhere: the execution row, then its approval requests.
    execution = Execution.objects.select_for_update(no_key=True).get(pk=found)
    request = ApprovalRequest.objects.select_for_update().get(pk=approval_id)
    if not user.has_perm(request.permission):
        raise Forbidden(f"{user.get_username()} may not decide {request.action} approvals")
    if request.separation_of_duties and request.requested_by_id == user.pk:
        raise Forbidden("the requester may not approve their own request (separation of duties)")
    if not request.is_pending:
        existing = Decision.objects.filter(request=request).first()
        if existing is not None and existing.event_id == event_id:
            return _replay(existing, user, approval_id)  # the same click arrived twice at once
        if existing is not None:
            raise _already_decided(existing)
        raise Conflict(f"approval request {request.pk} is {request.status}", status=request.status)
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
        artifact_version=artifact_version,
        content_sha256=content_sha256,
        comment=comment,
    )
    request.status = OUTCOME[decision]
    request.closed_at = timezone.now()
    request.save(update_fields=["status", "closed_at"])
    payload = {
        "approval_id": request.pk,
        "decision": decision,
        "event_id": event_id,
        "artifact_version": artifact_version,
        "content_sha256": content_sha256,
        "comment": comment,
    }
    lifecycle.record(execution, "approval.decided", step=request.step, actor=user, payload=payload)
    ledger.authorise(
        request,
        approved=decision == Decision.Verdict.APPROVE,
        actor_label=f"user:{user.get_username()}",
        reason=f"approval {request.pk} was {request.status}",
    )
    if decision == Decision.Verdict.APPROVE:
        lifecycle.apply(execution, "resume_after_decision", actor=user, payload={"approval_id": request.pk})
        dispatch.dispatch_on_commit(execution.pk)
    else:
        lifecycle.apply(execution, "cancel", actor=user, reason=f"rejected: {comment}".strip(": "))
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
        f"{existing.decided_by.get_username()} at {existing.created_at:%Y-%m-%d %H:%M:%S} UTC",
        existing={
            "decision": existing.decision,
            "decided_by": existing.decided_by.get_username(),
            "event_id": existing.event_id,
        },
    )
