"""Who may decide an approval request: the one rule, used by services, screens and the inbox."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from access import rules

from .models import ApprovalRequest


def refusal(user: AbstractBaseUser, request: ApprovalRequest, *, workflow: str | None = None) -> str | None:
    """Why ``user`` may not decide ``request`` (None: they may).

    The approver must be authenticated, hold the request's permission, belong to its
    group when one is set, be in a group that decides its workflow when access by
    workflow names it (``KEEL_WORKFLOW_ACCESS``), and not be the requester when
    separation of duties is on. ``workflow``: the request's, when the caller has it (a
    request built from grouped fields has no execution to read it from).
    """
    if not getattr(user, "is_authenticated", False):
        return "authentication required"
    name = user.get_username()
    if not user.is_active or not user.has_perm(request.permission):
        return f"{name} lacks the permission {request.permission} needed to decide {request.action}"
    if request.group and not user.groups.filter(name=request.group).exists():
        return f"{name} is not in the group {request.group} that decides this request"
    if rules.configured() and not rules.allows(user, "decide", workflow := workflow or request.execution.workflow):
        return f"{name} is not in a group that decides {workflow} (KEEL_WORKFLOW_ACCESS)"
    if request.separation_of_duties and request.requested_by_id == user.pk:
        return "the requester may not approve their own request (separation of duties)"
    return None


def can_decide(user: AbstractBaseUser, request: ApprovalRequest, *, workflow: str | None = None) -> bool:
    return refusal(user, request, workflow=workflow) is None
