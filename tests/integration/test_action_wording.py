"""One wording of an action's state: the execution page's ledger and the approval
history say the same words for the same action (approvals.outcomes.action_state)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from approvals import outcomes
from approvals.models import ApprovalRequest
from console import presenters
from executions.models import Action
from tests.support.records import approved_execution

STATES = [
    (Action.State.PLANNED, 0, "planned — waits for approval"),
    (Action.State.APPROVED, 0, "approved — not sent yet"),
    (Action.State.EXECUTING, 1, "in flight — outcome not recorded yet"),
    (Action.State.SUCCEEDED, 1, "succeeded"),
    (Action.State.UNKNOWN, 1, "outcome unknown"),
    (Action.State.FAILED, 2, "failed"),
    (Action.State.FAILED, 0, "not run: approval rejected — never sent"),
]


@pytest.fixture
def guarded(db):
    """A report approved by a manager, whose request was then rejected, and one effect
    it guards in each state."""
    User = get_user_model()
    requester, manager = User.objects.create_user("req"), User.objects.create_user("boss")
    execution, request, _ = approved_execution(requester, manager, 1)
    ApprovalRequest.objects.filter(pk=request.pk).update(status=ApprovalRequest.State.REJECTED)
    request.refresh_from_db()
    actions = [
        Action.objects.create(
            key=f"{execution.ref}:publish:{n}",
            execution=execution,
            step="publish",
            type="publish_report",
            status=status,
            attempts=attempts,
            gate_ref=request.gate_ref,
            last_error="" if status != Action.State.FAILED else f"approval {request.pk} was rejected",
        )
        for n, (status, attempts, _) in enumerate(STATES)
    ]
    return execution, request, actions


def test_the_ledger_and_the_approval_history_word_an_action_alike(guarded):
    execution, request, actions = guarded
    ledger = {row.key: row.label for row in presenters.ledger_rows(execution, actions, [], {request.gate_ref: request})}
    history = {e.key: e.wording for e in outcomes.authorised_effects([request])[request.pk]}
    assert ledger == history
    assert [ledger[a.key] for a in actions] == [words for _, _, words in STATES]
