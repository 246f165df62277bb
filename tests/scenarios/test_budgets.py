"""Cost and the USD budget on real processes (issue 21, item 5): every call priced from its
usage, the worst case reserved before each call so the budget is never overrun, no
provider call past it (S38), an operator's raise audited, then resume goes on."""

from __future__ import annotations

import json
from decimal import Decimal

from executions.models import ExecutionEvent, ModelCall
from tests.scenarios.test_agents import model_calls, model_env, provider_calls
from tests.support.stack import pk, wait_status

# Dear on purpose: a call's worst case (its prompt and 1024 tokens out) is a few dollars.
PRICES = json.dumps({"gpt-test": {"input_per_mtok": 1000, "output_per_mtok": 2000}})


def test_s38_a_budget_smaller_than_the_next_calls_worst_case_stops_before_the_call(stack, people, api_as):
    """S38: a budget smaller than the next call's worst case → budget_exceeded, no provider
    call (the sandbox's counts prove it); an operator raises it (audited) → it goes on."""
    stack.up(RUNTIME_MODEL_PRICES=PRICES, worker_env=model_env(stack, "openai"))
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    before = provider_calls(stack, "openai")
    started = requester.post(
        "/executions", {"workflow": "support_agent", "input": {"ticket": "TCK-1001"}, "budget_usd": 5}
    )
    assert started.status_code == 201, started.text
    ref = started.json()["id"]
    assert started.json()["cost"] == {"usd": None, "input_tokens": 0, "output_tokens": 0, "budget_usd": 5.0}

    stopped = wait_status(requester, ref, "needs_attention")
    assert stopped["stuck"]["reason"] == "budget_exceeded", stopped["stuck"]
    calls = model_calls(requester, ref)
    # Every call the provider saw is in the journal: the one that didn't fit was never sent.
    assert provider_calls(stack, "openai") - before == len(calls)
    assert all(c["cost_usd"] is not None and c["cost_usd"] > 0 for c in calls)
    spent = sum(Decimal(str(c["cost_usd"])) for c in calls)
    assert stopped["cost"]["usd"] == float(spent) and spent <= 5
    resolving = [c for c in calls if c["step"] == "resolve"]  # after version 2's route call
    assert f"{ref}:resolve:r1:c{len(resolving) + 1}" in stopped["status_reason"]  # the call it didn't make
    assert stopped["cost"]["input_tokens"] == sum(c["input_tokens"] for c in calls)

    # Refused: not an operator, a bad amount; nothing changes.
    assert requester.post(f"/executions/{ref}/budget", {"add_usd": 100, "reason": "more"}).status_code == 403
    for bad in (0, -1, "10", 1e6 + 1, True):
        answer = operator.post(f"/executions/{ref}/budget", {"add_usd": bad, "reason": "more"})
        assert answer.status_code == 422, (bad, answer.text)
        assert "add_usd" in json.dumps(answer.json()["detail"])
    raised = operator.post(f"/executions/{ref}/budget", {"add_usd": 100, "reason": "the ticket is worth it"})
    assert raised.status_code == 200, raised.text
    assert raised.json()["cost"]["budget_usd"] == 105.0 and raised.json()["status"] == "needs_attention"
    [audit] = ExecutionEvent.objects.filter(execution_id=pk(ref), type="operator.raise_budget")
    assert audit.actor == people["operator"].user and audit.payload["reason"] == "the ticket is worth it"
    assert (audit.payload["from"], audit.payload["to"]) == ("$5.000000", "$105.000000")

    assert operator.post(f"/executions/{ref}/resume", {"reason": "budget raised"}).status_code == 200
    waiting = wait_status(requester, ref, "awaiting_approval")
    assert waiting["pending_approval"]["action"] == "submit_replacement"
    again = model_calls(requester, ref)
    assert len(again) > len(calls)
    # The calls recorded before the stop were replayed, never asked or charged again.
    keys = stack.sandbox_stats()["keys"]
    assert all(keys[c["key"]]["calls"] == 1 for c in again)
    assert provider_calls(stack, "openai") - before == len(again)
    assert ModelCall.objects.filter(execution_id=pk(ref)).count() == len(again)
    assert waiting["cost"]["usd"] == float(sum(Decimal(str(c["cost_usd"])) for c in again))


def test_bad_budgets_at_start_are_422_naming_budget_usd(stack, people, api_as):
    stack.up()
    requester = api_as(people["requester"])
    for bad in (0, -2, "5", 1_000_001, True, {"usd": 1}):
        body = {"workflow": "support_agent", "input": {"ticket": "TCK-1001"}, "budget_usd": bad}
        answer = requester.post("/executions", body)
        assert answer.status_code == 422, (bad, answer.text)
        assert "budget_usd" in json.dumps(answer.json()["detail"]), answer.text
    # Without a price table the calls cost null, and a budget has nothing to stop.
    ok = requester.post("/executions", {"workflow": "monthly_report", "input": {"month": "2026-08"}, "budget_usd": 1})
    assert ok.status_code == 201, ok.text
    assert ok.json()["cost"]["budget_usd"] == 1.0
