"""An author's mistake the runtime meets only at run time is said plainly, naming the step
and what is missing, and stops for a person (needs_attention) without writing a request.
In process (the steps run here, ``runner.advance``)."""

from __future__ import annotations

import pytest

import tests.support.mistaken_flow  # noqa: F401 - registers "mistaken_gate"
from approvals.models import ApprovalRequest
from executions.engine import runner
from executions.models import Execution, Status
from executions.services import execution_start

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_approval_of_an_artifact_no_step_saved_names_it(people):
    execution, _ = execution_start(user=people["requester"].user, workflow="mistaken_gate", input={})
    for _ in range(5):
        if runner.advance(execution.pk, worker="worker:test-mistakes") != "sliced":
            break
    execution = Execution.objects.get(pk=execution.pk)
    assert execution.status == Status.NEEDS_ATTENTION
    assert (
        "approve asks to approve the artifact 'nonexistent', but no step before it saved one by that name "
        "(ctx.save_artifact; saved: ['claim'])" in execution.status_reason
    ), execution.status_reason
    assert not ApprovalRequest.objects.filter(execution=execution).exists()
