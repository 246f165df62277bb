"""Cost and the USD budget on real processes (issue 21, item 5): every call priced from its
usage, the worst case reserved before each call so the budget is never overrun, no
provider call past it (S38), an operator's raise audited, then resume goes on."""

from __future__ import annotations

import json
from decimal import Decimal

from executions.models import Action, ExecutionEvent, ModelCall
from tests.support.agents import VARIANTS, model_calls, model_env, provider_calls
from tests.support.stack import pk, wait_status

# Dear on purpose: a call's worst case (its prompt and 1024 tokens out) is a few dollars.
PRICES = json.dumps({"gpt-test": {"input_per_mtok": 1000, "output_per_mtok": 2000}})


def test_s38_a_budget_smaller_than_the_next_calls_worst_case_stops_before_the_call(stack, people, api_as):
    """S38: a budget smaller than the next call's worst case → budget_exceeded, no provider
    call (the sandbox's counts prove it); an operator raises it (audited) → it goes on."""
    stack.up(RUNTIME_MODEL_PRICES=PRICES, **model_env(stack, "openai"))  # the web prices the budget too
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
    # Without a price for the model a budget could stop nothing: refused, naming it, nothing started.
    body = {"workflow": "monthly_report", "input": {"month": "2026-08"}, "budget_usd": 1}
    refused = requester.post("/executions", body)
    assert refused.status_code == 422, refused.text
    assert "budget_usd" in json.dumps(refused.json()["detail"])
    assert "offline-deterministic-1 has no price in RUNTIME_MODEL_PRICES" in refused.text
    assert requester.get("/executions").json()["items"] == []


# Twenty constraints of 500 CJK characters: ~15,000 tokens as a provider counts them (1.5 a
# character here; a real tokenizer 1–2), where characters ÷ 4 saw 2,500.
CJK_CONSTRAINTS = [("请在回复中保持礼貌并确认订单号与商品编号一致。" * 25)[:500]] * 20


def test_s55_a_budget_on_non_latin_text_is_never_overrun(stack, people, api_as):
    """S55: a budget on non-Latin text: each call's worst case counts at least one token per
    two UTF-8 bytes, so what the provider charged never passes the budget."""
    stack.up(RUNTIME_MODEL_PRICES=PRICES, **model_env(stack, "openai"))  # the web prices the budget too
    requester = api_as(people["requester"])
    assert all(len(c) == 500 for c in CJK_CONSTRAINTS)
    body = {
        "workflow": "support_agent",
        "input": {"ticket": "TCK-1001", "constraints": CJK_CONSTRAINTS},
        "budget_usd": 40,
    }
    started = requester.post("/executions", body)
    assert started.status_code == 201, started.text
    ref = started.json()["id"]

    stopped = wait_status(requester, ref, "needs_attention", timeout=60)
    assert stopped["stuck"]["reason"] == "budget_exceeded", stopped["stuck"]
    calls = model_calls(requester, ref)
    assert calls and all(c["input_tokens"] > 10_000 for c in calls)  # the provider counted the CJK text
    spent = sum(Decimal(str(c["cost_usd"])) for c in calls)
    assert 0 < spent <= 40 and stopped["cost"]["usd"] == float(spent)
    assert not ExecutionEvent.objects.filter(execution_id=pk(ref), type="model_call.overrun").exists()


def test_s55_a_budget_stop_right_after_an_effect_keeps_its_receipt(stack, people, api_as):
    """S55: the agent's budget stops it right after its approved effect went out: the action is
    ``succeeded`` with the provider's receipt (committed with its ledger row, not held for the
    next call), one order at the provider, and nothing blocks a resume."""
    stack.up(RUNTIME_WORKFLOW_MODULES=VARIANTS)
    requester, manager, operator = (api_as(people[name]) for name in ("requester", "manager", "operator"))
    answer = requester.post("/executions", {"workflow": "support_agent_four", "input": {"ticket": "TCK-1001"}})
    assert answer.status_code == 201, answer.text
    ref = answer.json()["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert manager.decide(ref, approval).status_code == 202

    stopped = wait_status(requester, ref, "needs_attention")
    assert stopped["stuck"]["reason"] == "budget_exceeded"
    assert "4 model calls made (at most 4)" in stopped["status_reason"]
    [action] = Action.objects.filter(execution_id=pk(ref), type="submit_replacement")
    assert action.status == "succeeded" and action.receipt["order_id"].startswith("ORD-")
    assert stack.sandbox_stats()["endpoints"]["/orders"]["effects"] == 1
    preview = operator.get(f"/executions/{ref}/resume-preview").json()
    assert preview["can_resume"] is True and preview["blocked_by"] == [], preview
    [effect] = [e for e in preview["effects"] if e["key"] == action.key]
    assert effect["status"] == "succeeded" and effect["may_repeat"] is False
