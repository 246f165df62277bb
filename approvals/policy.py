"""Who may decide an approval request: the one rule, used by services, screens and the inbox."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser

from .models import ApprovalRequest


def refusal(user: AbstractBaseUser, request: ApprovalRequest) -> str | None:
    """Why ``user`` may not decide ``request`` (None: they may).

    The approver must be authenticated, hold the request's permission, belong to its
    group when one is set, and not be the requester when separation of duties is on.
    """
    if not getattr(user, "is_authenticated", False):
        return "authentication required"
    name = user.get_username()
    if not user.is_active or not user.has_perm(request.permission):
        return f"{name} lacks the permission {request.permission} needed to decide {request.action}"
    if request.group and not user.groups.filter(name=request.group).exists():
        return f"{name} is not in the group {request.group} that decides this request"
    if request.separation_of_duties and request.requested_by_id == user.pk:
        return "the requester may not approve their own request (separation of duties)"
    return None


def can_decide(user: AbstractBaseUser, request: ApprovalRequest) -> bool:
    return refusal(user, request) is None
