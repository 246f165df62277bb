"""The pydantic-ai support agent (examples/pydantic_support) on keel's real processes:
an agent written for pydantic-ai, its refund approved by a manager, sent once (S56, the
worker killed after the refund went out: tests/scenarios/test_agents_from_elsewhere.py)."""

import pytest

from executions.authoring.testing import Keel
from executions.models import Action, ModelCall, execution_for

MODULE = "examples.pydantic_support.workflow"


@pytest.fixture
def keel(transactional_db, tmp_path, request):
    with Keel(modules=MODULE, sandbox=True, tmp=tmp_path, failpoints=getattr(request, "param", "")) as keel:
        yield keel


def asked_once(ref: str) -> int:
    """Every model request of the step was asked of the provider once (one revision a key)."""
    calls = list(ModelCall.objects.filter(execution=execution_for(ref), step="support").values_list("key", "revision"))
    assert calls and all(revision == 1 for _, revision in calls), calls
    return len(calls)


def test_a_refund_waits_for_the_manager_then_goes_out_once(keel):
    ref = keel.start("pydantic_support", {"message": "Please refund order ORD-1002, it arrived broken"})
    waiting = keel.wait(ref, "awaiting_approval")
    pending = waiting["pending_approval"]
    assert pending is not None and pending["action"] == "refund_order", waiting
    # None of its own effects sent yet (the e-mail and webhook telling of the request go out beside them).
    assert not Action.objects.filter(execution=execution_for(ref), status="succeeded", beside=False).exists()
    keel.decide(ref, "approve")
    done = keel.wait(ref, "completed")
    assert done["result"] == {"answer": "Your order ORD-1002 is refunded.", "refunded": ["ORD-1002"]}
    [action] = Action.objects.filter(execution=execution_for(ref), beside=False)
    assert keel.provider_calls(action.key) == {"calls": 1, "effects": 1}
    assert asked_once(ref) == 3  # look up; refund (parked, then replayed from the journal and sent); answer


def test_a_question_is_answered_without_a_refund(keel):
    ref = keel.start("pydantic_support", {"message": "How much was ORD-1001?"})
    done = keel.wait(ref, "completed")
    assert done["result"]["refunded"] == [] and done["result"]["answer"].startswith("Order ORD-1001 totals")
    assert not Action.objects.filter(execution=execution_for(ref), beside=False).exists()


def test_a_pydantic_ai_tool_that_requires_approval_must_be_named_in_approvals(db):
    from pydantic_ai import Agent

    from approvals.gate import Approval
    from executions.authoring import Workflow, WorkflowInput

    class In(WorkflowInput):
        message: str

    agent = Agent(instructions="")

    @agent.tool_plain(requires_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        return "wired"

    flow = Workflow(name="wiring", version=1, title="Wiring", input=In)
    with pytest.raises(ValueError, match="wiring v1: pydantic_agent pay: wire needs approval in pydantic-ai"):
        flow.pydantic_agent("pay", label="Paying", agent=agent, prompt=str)
    approved = {"wire": Approval(artifact="wire", action="wire_money")}
    flow.pydantic_agent("pay", label="Paying", agent=agent, prompt=str, approvals=approved)  # keel's approval stands in
    with pytest.raises(ValueError, match="has no tool 'refund'"):
        flow.pydantic_agent(
            "pay2", label="Paying", agent=agent, prompt=str, approvals=approved, effects={"refund": str}
        )
