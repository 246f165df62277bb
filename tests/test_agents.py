"""The agent runtime on real processes: the support agent through the offline model and
through both real SDKs against the sandbox's providers; the model-call journal under
SIGKILL and drift; refusals, normalised arguments, budgets (S27–S30)."""

from __future__ import annotations

import hashlib
import json

import pytest

from executions.models import Action
from tests.support.procs import http
from tests.support.stack import wait_status

PROVIDER_ENDPOINTS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


def model_env(stack, provider: str) -> dict[str, str]:
    """The worker's environment for ``provider`` (offline, openai, anthropic) against the sandbox."""
    if provider == "openai":
        return {
            "RUNTIME_MODEL_CLIENT": "openai",
            "RUNTIME_MODEL": "gpt-test",
            "OPENAI_BASE_URL": f"{stack.sandbox_url}/v1",
            "OPENAI_API_KEY": "sk-test",
        }
    if provider == "anthropic":
        return {
            "RUNTIME_MODEL_CLIENT": "anthropic",
            "RUNTIME_MODEL": "claude-test",
            "ANTHROPIC_BASE_URL": stack.sandbox_url,
            "ANTHROPIC_API_KEY": "sk-ant-test",
        }
    return {"RUNTIME_MODEL_CLIENT": "offline"}


def start_ticket(api, ticket: str = "TCK-1001") -> str:
    response = api.post("/executions", {"workflow": "support_agent", "input": {"ticket": ticket}})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def approved_document(api, approval: dict) -> bytes:
    response = api.get(f"/artifacts/{approval['artifact_id']}/versions/{approval['artifact_version']}/content")
    assert response.status_code == 200, response.text
    assert response.headers["X-Content-SHA256"] == approval["content_sha256"]
    return response.content


def orders_for(stack, reference: str) -> list[dict]:
    return http().get(f"{stack.sandbox_url}/orders", params={"reference": reference}, timeout=5).json()["orders"]


def model_calls(api, ref: str) -> list[dict]:
    response = api.get(f"/executions/{ref}/model-calls")
    assert response.status_code == 200, response.text
    return response.json()["items"]


@pytest.mark.parametrize("provider", ["offline", "openai", "anthropic"])
def test_support_agent_end_to_end_one_order_one_reply(stack, people, api_as, provider):
    """The agent reads, proposes; a manager approves the effective arguments; exactly one
    order with those arguments and exactly one reply; the journal shows every call."""
    stack.sandbox()
    stack.worker(**model_env(stack, provider))
    stack.web()
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

    assert manager.decide(ref, approval).status_code == 202
    done = wait_status(requester, ref, "completed")

    submit = Action.objects.get(key=planned["key"])
    assert submit.status == "succeeded" and submit.args == expected["args"]
    [order] = orders_for(stack, planned["key"])
    assert {k: order[k] for k in ("original_order", "sku", "quantity")} == expected["args"]
    [reply] = [a for a in done["actions"] if a["type"] == "reply_to_customer"]
    stats = stack.sandbox_stats()
    assert stats["keys"][planned["key"]]["effects"] == 1
    assert stats["keys"][reply["key"]]["effects"] == 1
    assert stats["endpoints"]["/notify"]["effects"] == 1
    assert stats["endpoints"]["/orders"]["effects"] == 1

    calls = model_calls(requester, ref)
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
        assert endpoint["calls"] == len(calls)  # every call asked once, none after the park replayed
        assert all(stats["keys"][c["key"]]["calls"] == 1 for c in calls)
        assert all(c["input_tokens"] > 0 and c["output_tokens"] > 0 for c in calls)
    assert all(c["prompt_version"] == "support-agent-v1" and len(c["request_sha256"]) == 64 for c in calls)


def test_an_unknown_ticket_is_refused_at_start(stack, people, api_as):
    stack.web()
    response = api_as(people["requester"]).post(
        "/executions", {"workflow": "support_agent", "input": {"ticket": "TCK-9999"}}
    )
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "input", "ticket"] and "TCK-1001" in error["msg"]
