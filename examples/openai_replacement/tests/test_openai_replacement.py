"""The OpenAI Agents SDK replacement desk (examples/openai_replacement) on keel's real
processes: the SDK's own Runner, keel answering its model requests and deciding its tool
calls. End to end through the sandbox's OpenAI-compatible endpoint (keel's OpenAI client,
the real SDKs) with the replacement approved by a manager; the handoff to the declared
escalation agent; declarations keel refuses."""

import pytest
import requests
from agents import Agent, InputGuardrail, function_tool

from executions.authoring import Workflow, WorkflowInput
from executions.authoring.testing import Keel
from executions.models import Action, ModelCall, execution_for

MODULE = "examples.openai_replacement.workflow"


@pytest.fixture
def keel(transactional_db, tmp_path, request):
    with Keel(modules=MODULE, sandbox=True, tmp=tmp_path, model=getattr(request, "param", "offline")) as keel:
        yield keel


def asked(ref: str) -> list[str]:
    """The step's model requests, each asked of the provider once (one revision a key)."""
    calls = list(ModelCall.objects.filter(execution=execution_for(ref), step="resolve").values_list("key", "revision"))
    assert calls and all(revision == 1 for _, revision in calls), calls
    return [key for key, _ in calls]


@pytest.mark.parametrize("keel", ["openai"], indirect=True)
def test_the_sdk_agent_through_the_openai_endpoint_waits_for_approval_then_replaces_once(keel):
    ref = keel.start("openai_replacement", {"ticket": "TCK-1001"})
    waiting = keel.wait(ref, "awaiting_approval")
    pending = waiting["pending_approval"]
    assert pending["action"] == "submit_replacement", waiting
    # None of its own effects sent yet (the e-mail and webhook telling of the request go out beside them).
    assert not Action.objects.filter(execution=execution_for(ref), status="succeeded", beside=False).exists()
    keel.decide(ref, "approve")
    done = keel.wait(ref, "completed")
    assert done["result"]["replacement"], done
    actions = {a.type: a for a in Action.objects.filter(execution=execution_for(ref), beside=False)}
    assert set(actions) == {"submit_replacement", "reply_to_customer"}, actions
    for action in actions.values():
        assert keel.provider_calls(action.key)["effects"] == 1, (action.tool, keel.provider_calls(action.key))
    # get_ticket, lookup_order, check_stock, submit (parked, then replayed), reply, the final answer
    assert len(asked(ref)) == 6
    stats = requests.get(f"{keel.sandbox_url}/_stats", timeout=30).json()
    assert stats["endpoints"]["/v1/chat/completions"]["calls"] == 6  # none asked twice


def test_an_out_of_stock_ticket_is_handed_to_the_declared_escalation_agent(keel):
    ref = keel.start("openai_replacement", {"ticket": "TCK-1002"})  # its lamp is out of stock
    done = keel.wait(ref, "completed")
    assert done["result"] == {"answer": "Out of stock: a person takes this ticket over.", "replacement": None}
    assert not Action.objects.filter(execution=execution_for(ref), beside=False).exists()
    assert len(asked(ref)) == 5  # three reads, the handoff, escalation's note


def _flow(name: str) -> Workflow:
    class In(WorkflowInput):
        ticket: str

    return Workflow(name=name, version=1, title=name, input=In, description="", goal=lambda d: "", result=None)


def test_declarations_keel_cannot_gate_are_refused_naming_what(db):
    @function_tool
    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    @function_tool(needs_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        return "wired"

    stranger = Agent(name="stranger", instructions="")
    with pytest.raises(ValueError, match="has no tool 'refund'"):
        _flow("a").openai_agent("s", label="s", agent=Agent(name="a", tools=[pay]), prompt=str, effects={"refund": str})
    with pytest.raises(ValueError, match="wire needs approval"):
        _flow("b").openai_agent("s", label="s", agent=Agent(name="b", tools=[wire]), prompt=str)
    with pytest.raises(ValueError, match="hands off to 'stranger', which the step doesn't declare"):
        _flow("c").openai_agent("s", label="s", agent=Agent(name="c", handoffs=[stranger]), prompt=str)
    nested = Agent(name="d", tools=[stranger.as_tool(tool_name="ask_stranger", tool_description="Ask.")])
    with pytest.raises(ValueError, match="ask_stranger is an agent"):  # its Runner would ask outside the journal
        _flow("d").openai_agent("s", label="s", agent=nested, prompt=str)
    guarded = Agent(name="e", input_guardrails=[InputGuardrail(guardrail_function=lambda *a: None)])
    with pytest.raises(ValueError, match="has guardrails"):
        _flow("e").openai_agent("s", label="s", agent=guarded, prompt=str)
