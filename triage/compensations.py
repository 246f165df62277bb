"""Closing compensations. A cancel records how each done effect would be undone as a
``planned`` action (``<key>:compensate``, ``runtime.record_compensations``); the runtime
never carries it out, because undoing is a business decision. A person does it at
the provider and an operator closes it here with evidence: done (``succeeded``) or
not possible (``failed``), one audited ledger transition."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from executions import runtime
from executions.errors import Conflict
from executions.models import Action, Status
from executions.services import operator_outcome


def action_close(*, key: str, user: AbstractBaseUser, outcome: str, evidence: str) -> Action:
    """Operators: close the planned compensation ``key`` of a cancelled execution.

    Raises Forbidden, InvalidInput naming ``outcome`` or ``evidence``, NotFound, Conflict
    (not a compensation, not planned any more, the execution not cancelled).
    """
    evidence = operator_outcome(
        user, outcome, evidence, act="close compensations", hint="say what was done at the provider, and how you know"
    )
    with transaction.atomic():
        execution, action = runtime.locked_by_key(key)
        runtime.require(user, "operate", execution.workflow)
        if not action.is_compensation:
            raise Conflict(f"{key} is not a compensation; only a planned compensation can be closed")
        if action.status != Action.State.PLANNED:
            raise Conflict(f"{key} is already {action.status}", status=action.status)
        if execution.status != Status.CANCELLED:
            raise Conflict(
                f"{execution.ref} is {execution.status}; compensations are closed once it is cancelled",
                status=execution.status,
            )
        runtime.close_compensation(action, execution=execution, outcome=outcome, actor=user, evidence=evidence)
    return action
