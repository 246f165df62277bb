"""Route steps on real processes (issue 21, item 3): support_agent v2 routes each ticket
to a branch the workflow declares, the runtime refuses any other choice (told, recorded,
needs_attention after repeated refusals), and a crash after the choice was journalled
replays it (S36)."""

from __future__ import annotations

import pytest

from executions.models import ExecutionEvent, ModelCall
from tests.support.agents import model_calls, model_env, start_ticket
from tests.support.procs import http, wait_for
from tests.support.stack import own_actions, pk, wait_status


def route_of(ref: str) -> str:
    [call] = ModelCall.objects.filter(execution_id=pk(ref), step="route")
    [chosen] = call.response["tool_calls"]
    return chosen["args"]["step"]


@pytest.mark.own_stack
def test_s36_sigkill_after_the_route_choice_was_journalled_replays_the_same_choice(stack, people, api_as):
    """S36: SIGKILL the worker after a route choice was journalled → the same choice on
    recovery, no second model call for that key, the same next step."""
    env = model_env(stack, "openai")
    failpoint = {"RUNTIME_FAILPOINTS": "after_route_choice:route:c1=pause"}
    doomed = stack.up(workers=("doomed",), worker_env={**failpoint, **env}).worker
    requester = api_as(people["requester"])
    ref = start_ticket(requester, "TCK-1001")
    wait_for(lambda: stack.failpoint_reached("after_route_choice:route:c1"), what="the route choice to be journalled")
    assert ModelCall.objects.filter(execution_id=pk(ref), step="route").count() == 1
    assert requester.execution(ref)["current_step"] == "route"  # not checkpointed
    doomed.kill()

    stack.worker("survivor", **env)
    waiting = wait_status(requester, ref, "awaiting_approval", timeout=60)
    assert waiting["workflow_version"] == 2 and waiting["pending_approval"]["action"] == "submit_replacement"
    key = f"{ref}:route:r1:c1"
    assert stack.sandbox_stats()["keys"][key]["calls"] == 1  # never asked again
    assert ModelCall.objects.filter(key=key).count() == 1
    assert route_of(ref) == "resolve"
    calls = model_calls(requester, ref)
    assert [c["step"] for c in calls][:2] == ["route", "resolve"]


@pytest.mark.parametrize(("ticket", "branch"), [("TCK-1002", "refund"), ("TCK-1005", "answer")])
def test_support_agent_v2_routes_each_ticket_to_its_branch(stack, people, api_as, ticket, branch):
    """The offline model routes deterministically per ticket; TCK-1002's refund is an
    effect a manager approves first; each branch ends the workflow."""
    stack.up()
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start_ticket(requester, ticket)
    if branch == "refund":
        waiting = wait_status(requester, ref, "awaiting_approval")
        assert waiting["pending_approval"]["action"] == "issue_refund"
        assert manager.decide(ref, waiting["pending_approval"]).status_code == 202
    done = wait_status(requester, ref, "completed")
    assert route_of(ref) == branch
    steps = {c["step"] for c in model_calls(requester, ref)}
    assert steps == {"route", branch}  # the other branches never ran
    types = sorted(a["type"] for a in own_actions(done))
    assert types == (["issue_refund", "reply_to_customer"] if branch == "refund" else ["reply_to_customer"])
    assert not ExecutionEvent.objects.filter(execution_id=pk(ref), type="route.refused").exists()


def test_an_undeclared_route_is_refused_told_and_after_repeated_refusals_needs_attention(stack, people, api_as):
    """The sandbox's rogue_route fault makes the model propose submit_replacement instead of a
    route: refused and told (route.refused), asked again; three times → needs_attention."""
    stack.up(worker_env=model_env(stack, "openai"))
    requester = api_as(people["requester"])
    fault = {"endpoint": "/v1/chat/completions", "fault": "rogue_route", "count": 1}
    assert http().post(f"{stack.sandbox_url}/_faults", json=fault, timeout=5).status_code == 201
    ref = start_ticket(requester, "TCK-1001")
    wait_status(requester, ref, "awaiting_approval")
    [refused] = ExecutionEvent.objects.filter(execution_id=pk(ref), type="route.refused")
    assert refused.payload["call"] == f"{ref}:route:r1:c1" and "submit_replacement" in refused.payload["reason"]
    [first, second] = ModelCall.objects.filter(execution_id=pk(ref), step="route").order_by("seq")
    told = second.request["messages"][-1]
    assert told["role"] == "tool" and "refused" in told["content"]
    assert route_of_call(second) == "resolve"

    fault["count"] = 3
    assert http().post(f"{stack.sandbox_url}/_faults", json=fault, timeout=5).status_code == 201
    stopped_ref = start_ticket(requester, "TCK-1003")
    stopped = wait_status(requester, stopped_ref, "needs_attention")
    assert stopped["stuck"]["reason"] == "budget_exceeded" and "route choices refused" in stopped["status_reason"]
    assert ExecutionEvent.objects.filter(execution_id=pk(stopped_ref), type="route.refused").count() == 3
    assert stopped["current_step"] == "route" and not own_actions(stopped)


def route_of_call(call: ModelCall) -> str:
    [chosen] = call.response["tool_calls"]
    return chosen["args"]["step"]
