"""Legal holds (docs/design.md §6 "Retention"): an auditor keeps an execution whatever its age.
The hold lives on the execution (``hold_reason``, ``hold_by``, ``hold_at``) so every
read of it shows it; placing and releasing it are events in its history (audited);
retention honours it (``retention.policy``, and the purge checks it again under the
row's lock, which a hold placed meanwhile also takes)."""

from __future__ import annotations

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from executions import runtime
from executions.errors import Forbidden, InvalidInput
from executions.models import Execution, execution_for

# Who may place and release holds: auditors (the approval audit's readers).
HOLD = "approvals.view_audit"


def hold_place(*, ref: str, user: AbstractBaseUser, reason: str) -> Execution:
    """Place (or restate) a hold; ``reason`` required."""
    _check(user)
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("reason", "a legal hold needs a reason")
    with transaction.atomic():
        execution = Execution.objects.select_for_update().get(pk=execution_for(ref).pk)
        now = timezone.now()
        Execution.objects.filter(pk=execution.pk).update(hold_reason=reason, hold_by=user, hold_at=now)
        runtime.record(execution, "hold.placed", actor=user, payload={"reason": reason})
    return Execution.objects.get(pk=execution.pk)


def hold_release(*, ref: str, user: AbstractBaseUser) -> Execution:
    """Release the hold, if any (releasing none changes nothing)."""
    _check(user)
    with transaction.atomic():
        execution = Execution.objects.select_for_update().get(pk=execution_for(ref).pk)
        if execution.hold_at is not None:
            Execution.objects.filter(pk=execution.pk).update(hold_reason="", hold_by=None, hold_at=None)
            runtime.record(execution, "hold.released", actor=user, payload={"reason": execution.hold_reason})
    return Execution.objects.get(pk=execution.pk)


def _check(user: AbstractBaseUser) -> None:
    if not user.has_perm(HOLD):
        raise Forbidden("only auditors may place or release legal holds")
