"""Who is told: the one rule for each kind of message (issue 22, item 2).

An opened request and its reminder go to every user who may decide it (approvals'
own rule, ``approvals.policy``: the permission, the group, active, never the requester)
and has an address; ``approval_overdue`` to them and to the operators (who can't
decide: their message leads to what they can do); an operator's ``remind`` to them.
Nobody who turned e-mails
off on their account page, and nobody outside the workflow's groups when access by
workflow names it (``KEEL_WORKFLOW_ACCESS``: deciding through ``approvals.policy``,
operating through ``access.rules``). ``superseded`` to those told about the old version.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Permission
from django.db.models import Q, QuerySet

from access import rules
from approvals import policy
from approvals.models import ApprovalRequest

from .models import Preference

OPERATE = "executions.operate_execution"


def deciders(request: ApprovalRequest) -> list[AbstractBaseUser]:
    """Everyone who may decide ``request`` and wants e-mail, by username."""
    return [u for u in _holding(request.permission) if policy.can_decide(u, request)]


def operators(workflow: str) -> list[AbstractBaseUser]:
    """Everyone who may operate ``workflow`` (the role, and access by workflow) and wants e-mail."""
    return [u for u in _holding(OPERATE) if u.has_perm(OPERATE) and rules.allows(u, "operate", workflow)]


def reads(user: AbstractBaseUser, workflow: str) -> bool:
    """May ``user`` read ``workflow`` (access by workflow)? Who may not is told nothing of it:
    a question to the user who started it, a superseded version to those told of the first."""
    return rules.allows(user, "read", workflow)


def wants_email(user: AbstractBaseUser) -> str | None:
    """Why ``user`` gets no e-mail now (None: they do)."""
    if not user.is_active:
        return f"{user.get_username()} is no longer active"
    if not user.email:
        return f"{user.get_username()} has no e-mail address"
    if Preference.objects.filter(user=user, email=False).exists():
        return f"{user.get_username()} turned e-mails off"
    return None


def _holding(permission: str) -> QuerySet:
    """Active users with an address who hold ``permission`` (directly, by a group, or as
    superusers) and didn't turn e-mails off, by username."""
    app_label, _, codename = permission.partition(".")
    perm = Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
    holds = Q(is_superuser=True)
    if perm is not None:
        holds |= Q(user_permissions=perm) | Q(groups__permissions=perm)
    off = Preference.objects.filter(email=False).values("user_id")
    return (
        get_user_model()
        .objects.filter(holds, is_active=True)
        .exclude(email="")
        .exclude(pk__in=off)
        .distinct()
        .order_by("username")
    )
