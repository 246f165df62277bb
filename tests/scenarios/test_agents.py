"""The agent runtime on real processes: the support agent through the offline model and
through both real SDKs against the sandbox's providers; the model-call journal under
SIGKILL and drift; refusals, normalised arguments, budgets (S27–S30)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

import pytest
from django.test import Client

from executions.models import Action, ExecutionEvent, ModelCall, StepRun
from tests.support.agents import (
    PROVIDER_ENDPOINTS,
    VARIANTS,
    approved_document,
    model_calls,
    model_env,
    start_ticket,
)
from tests.support.orders import orders_with_reference
from tests.support.procs import http, wait_for
from tests.support.stack import pk, wait_status

# support_agent v2 (the latest) routes first: one journalled call of its ``route`` step,
# then version 1's agent step ``resolve`` (docs/agents.md, "Routes").
ROUTE_CALLS = 1


@pytest.mark.parametrize("provider", ["offline", "openai", "anthropic"])
def test_support_agent_end_to_end_one_order_one_reply(stack, people, api_as, provider):
    """The agent reads, proposes; a manager approves the effective arguments; exactly one
    order with those arguments and exactly one reply; the journal shows every call."""
    stack.up(worker_env=model_env(stack, provider))
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start_ticket(requester)

    waiting = wait_status(requester, ref, "awaiting_approval")
    approval = waiting["pending_approval"]
    assert approval["action"] == "submit_replacement"
    document = approved_document(requester, approval)
    expected = {
        "args": {"original_order": "ORD-1001", "quantity": 2, "sku": "SKU-MUG-01"},
        "tool": "submit_replacement",
    }
    assert document == json.dumps(expected, sort_keys=True, separators=(",", ":")).encode()
    assert hashlib.sha256(document).hexdigest() == approval["content_sha256"]
    [planned] = [a for a in waiting["actions"] if a["type"] == "submit_replacement"]
    assert planned["status"] == "planned"
    if provider == "offline":  # the manager's page shows the arguments that will run
        page = Client()
        page.force_login(people["manager"].user)
        shown = page.get(f"/approvals/{approval['id']}/").content.decode()
        assert "submit_replacement" in shown and "SKU-MUG-01" in shown and approval["content_sha256"] in shown

    assert manager.decide(ref, approval).status_code == 202
    done = wait_status(requester, ref, "completed")

    submit = Action.objects.get(key=planned["key"])
    assert submit.status == "succeeded" and submit.args == expected["args"]
    [order] = orders_with_reference(stack, planned["key"])
    assert {k: order[k] for k in ("original_order", "sku", "quantity")} == expected["args"]
    [reply] = [a for a in done["actions"] if a["type"] == "reply_to_customer"]
    stats = stack.sandbox_stats()
    assert stats["keys"][planned["key"]]["effects"] == 1
    assert stats["keys"][reply["key"]]["effects"] == 1
    assert stats["endpoints"]["/notify"]["effects"] == 1
    assert stats["endpoints"]["/orders"]["effects"] == 1

    calls = model_calls(requester, ref, "resolve")
    assert [c["seq"] for c in calls] == list(range(1, len(calls) + 1))
    assert [c["tool_calls"][0]["tool"] for c in calls if c["tool_calls"]] == [
        "get_ticket",
        "lookup_order",
        "check_stock",
        "submit_replacement",
        "reply_to_customer",
    ]
    assert all(c["key"] == f"{ref}:resolve:r1:c{c['seq']}" for c in calls)
    if provider == "offline":
        assert {c["model"] for c in calls} == {"offline-deterministic-1"}
    else:
        model = "gpt-test" if provider == "openai" else "claude-test"
        assert {(c["model"], c["model_returned"]) for c in calls} == {(model, f"{model}-sandbox")}
        endpoint = stats["endpoints"][PROVIDER_ENDPOINTS[provider]]
        assert endpoint["calls"] == len(calls) + ROUTE_CALLS  # every call asked once, none after the park replayed
        assert all(stats["keys"][c["key"]]["calls"] == 1 for c in calls)
        assert all(c["input_tokens"] > 0 and c["output_tokens"] > 0 for c in calls)
    assert all(c["prompt_version"] == "support-agent-v2" and len(c["request_sha256"]) == 64 for c in calls)


def test_an_unknown_ticket_is_refused_at_start(stack, people, api_as):
    stack.up()
    response = api_as(people["requester"]).post(
        "/executions", {"workflow": "support_agent", "input": {"ticket": "TCK-9999"}}
    )
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "input", "ticket"] and "TCK-1001" in error["msg"]


@pytest.mark.own_stack
def test_s27_sigkill_while_a_model_call_is_in_flight_asks_only_that_call_again(stack, people, api_as):
    """S27: SIGKILL the worker while a model call is in flight (agent)."""
    env = model_env(stack, "openai")
    failpoint = {"RUNTIME_FAILPOINTS": "before_model_call:resolve:c3=sleep:2"}
    doomed = stack.up(workers=("doomed",), worker_env={**failpoint, **env}).worker
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start_ticket(requester)
    wait_for(lambda: stack.failpoint_reached("before_model_call:resolve:c3"), what="the worker to reach call 3")
    fault = {"endpoint": "/v1/chat/completions", "fault": "commit_then_hang", "count": 1, "hang_seconds": 30}
    assert http().post(f"{stack.sandbox_url}/_faults", json=fault, timeout=5).status_code == 201
    in_flight = f"{ref}:resolve:r1:c3"
    wait_for(lambda: stack.sandbox_stats()["keys"].get(in_flight, {}).get("calls") == 1, what="call 3 to be sent")
    doomed.kill()  # the provider answered (late); the worker never recorded it

    survivor = stack.worker("survivor", **env)
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert manager.decide(ref, approval).status_code == 202
    wait_status(requester, ref, "completed")

    keys = stack.sandbox_stats()["keys"]
    calls = model_calls(requester, ref, "resolve")
    assert len(calls) == 6
    for call in calls:
        assert keys[call["key"]]["calls"] == (2 if call["key"] == in_flight else 1), call["key"]
    assert f":{survivor.pid}:" in ModelCall.objects.get(key=in_flight).worker  # recorded by the survivor
    assert f":{doomed.pid}:" in ModelCall.objects.get(key=f"{ref}:resolve:r1:c2").worker


@pytest.mark.own_stack
def test_s28_a_prompt_changed_under_a_waiting_execution_is_drift_and_no_call(stack, people, api_as):
    """S28: a prompt template changes under a waiting execution, then it replays a recorded call (agent)."""
    env = model_env(stack, "anthropic")
    first = stack.up(beat=False, workers=("v1",), worker_env=env).worker
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start_ticket(requester)
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    first.stop()
    modules = "workflows.monthly_report,workflows.support_agent,tests.support.support_agent_edited"
    stack.worker("edited", RUNTIME_WORKFLOW_MODULES=modules, **env)
    before = stack.sandbox_stats()

    assert manager.decide(ref, approval).status_code == 202
    stopped = wait_status(requester, ref, "needs_attention")
    assert stopped["stuck"]["reason"] == "model_drift"
    assert f"{ref}:resolve:r1:c1" in stopped["status_reason"]
    after = stack.sandbox_stats()
    assert after["endpoints"]["/v1/messages"] == before["endpoints"]["/v1/messages"]  # no call made
    assert "/orders" not in after["endpoints"]  # and nothing submitted
    assert ModelCall.objects.filter(execution_id=pk(ref)).count() == 4 + ROUTE_CALLS  # the journal is as it was


def test_s29_a_rogue_tool_call_before_approval_is_refused_and_told_to_the_model(stack, people, api_as):
    """S29: the model proposes an effect tool that isn't allowed now (agent)."""
    stack.up(worker_env=model_env(stack, "openai"))
    fault = {"endpoint": "/v1/chat/completions", "fault": "rogue_tool_call", "count": 1}
    assert http().post(f"{stack.sandbox_url}/_faults", json=fault, timeout=5).status_code == 201
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start_ticket(requester)

    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert "/orders" not in stack.sandbox_stats()["endpoints"]  # no effect
    [refused] = ExecutionEvent.objects.filter(execution_id=pk(ref), type="tool_call.refused")
    assert refused.payload["tool"] == "submit_replacement" and refused.payload["call"] == f"{ref}:resolve:r1:c1"
    assert "not allowed now" in refused.payload["reason"]
    told = ModelCall.objects.get(key=f"{ref}:resolve:r1:c2").request["messages"][-1]
    assert told["role"] == "tool" and told["is_error"] and "refused" in told["content"]

    assert manager.decide(ref, approval).status_code == 202
    wait_status(requester, ref, "completed")
    assert stack.sandbox_stats()["endpoints"]["/orders"]["effects"] == 1
    assert ExecutionEvent.objects.filter(execution_id=pk(ref), type="tool_call.refused").count() == 1


def test_s30_what_was_approved_is_what_ran_after_a_clamp(stack, people, api_as):
    """S30: a manager approves tool arguments that the runtime normalised (a clamp) (agent)."""
    stack.up(worker_env=model_env(stack, "anthropic"))
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start_ticket(requester, "TCK-1003")  # 3 sets broken, 2 ordered

    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    requested = ExecutionEvent.objects.get(execution_id=pk(ref), type="approval.requested")
    assert requested.payload["proposed_args"]["quantity"] == 3
    assert requested.payload["effective_args"]["quantity"] == 2
    document = json.loads(approved_document(requester, approval))
    assert document["args"]["quantity"] == 2

    assert manager.decide(ref, approval).status_code == 202
    wait_status(requester, ref, "completed")
    action = Action.objects.get(execution_id=pk(ref), type="submit_replacement")
    ran = json.dumps({"args": action.args, "tool": action.type}, sort_keys=True, separators=(",", ":"))
    assert hashlib.sha256(ran.encode()).hexdigest() == approval["content_sha256"]
    [order] = orders_with_reference(stack, action.key)
    assert order["quantity"] == 2 and order["sku"] == "SKU-GLS-20"


def test_malformed_tool_arguments_fail_closed(stack, people, api_as):
    """Arguments the tool's schema doesn't accept never run: refused, told, then a person looks."""
    stack.up(worker_env=model_env(stack, "openai"), RUNTIME_WORKFLOW_MODULES=VARIANTS)
    requester = api_as(people["requester"])
    response = requester.post("/executions", {"workflow": "support_agent_strict", "input": {"ticket": "TCK-1001"}})
    ref = response.json()["id"]

    stopped = wait_status(requester, ref, "needs_attention")
    assert stopped["stuck"]["reason"] == "step_error"
    [refused] = ExecutionEvent.objects.filter(execution_id=pk(ref), type="tool_call.refused")
    assert refused.payload["tool"] == "check_stock" and "sku" in refused.payload["reason"]
    assert not any(e.startswith("/stock") for e in stack.sandbox_stats()["endpoints"])  # never ran


def test_over_budget_needs_attention(stack, people, api_as):
    stack.up(worker_env=model_env(stack, "anthropic"), RUNTIME_WORKFLOW_MODULES=VARIANTS)
    requester = api_as(people["requester"])
    response = requester.post("/executions", {"workflow": "support_agent_tiny", "input": {"ticket": "TCK-1001"}})
    ref = response.json()["id"]

    stopped = wait_status(requester, ref, "needs_attention")
    assert stopped["stuck"]["reason"] == "budget_exceeded"
    assert "2 model calls" in stopped["status_reason"]
    assert len(model_calls(requester, ref)) == 2
    assert stack.sandbox_stats()["endpoints"]["/v1/messages"]["calls"] == 2


def test_request_changes_asks_the_model_again_with_the_comment_as_a_constraint(stack, people, api_as):
    """monthly_report: the manager's comment becomes a mandatory constraint, the model step
    runs again with it, and V2's narrative differs from V1's because of it."""
    stack.up()
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = requester.start()["id"]
    v1 = wait_status(requester, ref, "awaiting_approval")["pending_approval"]

    comment = "Lead with the weakest store and say why"
    assert manager.decide(ref, v1, decision="request_changes", comment=comment).status_code == 202
    v2 = wait_for(
        lambda: (p := requester.execution(ref)["pending_approval"]) and p["artifact_version"] == 2 and p,
        what="V2 to await approval",
    )
    first, second = ModelCall.objects.filter(execution_id=pk(ref), step="analyze").order_by("id")
    assert (first.key, second.key) == (f"{ref}:analyze:r1:c1", f"{ref}:analyze:r2:c1")  # asked again
    prompt = second.request["messages"][0]["content"]
    assert f"- MUST: Requested by manager on V1: {comment}\n" in prompt
    assert comment not in first.request["messages"][0]["content"]
    narratives = [
        r.output["narrative"] for r in StepRun.objects.filter(execution_id=pk(ref), step="analyze").order_by("round")
    ]
    assert narratives[0] != narratives[1] and comment in narratives[1] and comment not in narratives[0]
    assert narratives[1] == second.response["text"]
    v2_bytes = approved_document(requester, v2)
    assert narratives[1].encode() in v2_bytes


@pytest.mark.parametrize(
    "provider, fault, reason, status",
    [
        ("anthropic", "rate_limit", "rate_limited", "retry_pending"),
        ("openai", "error_500", "retrying", "retry_pending"),
        ("openai", "error_403", "permission_denied", "needs_attention"),
        ("anthropic", "error_400", "", "failed"),
    ],
)
def test_provider_errors_become_failure_kinds(stack, people, api_as, provider, fault, reason, status):
    """429 → rate limited (Retry-After honoured), 5xx → transient, 403 → permission, 400 → invalid."""
    stack.up(worker_env=model_env(stack, provider))
    spec = {"endpoint": PROVIDER_ENDPOINTS[provider], "fault": fault, "count": 1, "retry_after": 2}
    assert http().post(f"{stack.sandbox_url}/_faults", json=spec, timeout=5).status_code == 201
    requester = api_as(people["requester"])
    ref = start_ticket(requester)

    stopped = wait_status(requester, ref, status)
    assert (stopped["stuck"] or {}).get("reason", "") == reason
    first = f"{ref}:route:r1:c1"  # the first call of support_agent v2: its route
    if status == "retry_pending":
        if fault == "rate_limit":
            assert (
                datetime.fromisoformat(stopped["due_at"]) - datetime.fromisoformat(stopped["status_changed_at"])
            ).total_seconds() >= 2
        wait_status(requester, ref, "awaiting_approval")
        assert stack.sandbox_stats()["keys"][first]["calls"] == 2  # the failed call, asked again under its key
        assert ModelCall.objects.filter(key=first).count() == 1
    else:
        assert not ModelCall.objects.filter(execution_id=pk(ref)).exists()
        assert stack.sandbox_stats()["keys"][first]["calls"] == 1  # never blindly retried
