"""Compaction across context windows on real processes (issue 21, item 4): an agent
round past its conversation budget is folded into a progress note; the goal and every
constraint stay verbatim; the fold is journalled, so the replay after the approval
rebuilds the identical requests and never folds again (S37)."""

from __future__ import annotations

from django.test import Client

from executions.models import ExecutionEvent, ModelCall
from tests.support.agents import VARIANTS
from tests.support.procs import run_manage, wait_for
from tests.support.stack import pk, wait_status

REQUESTED = "Mention the ticket number in every message."


def test_s37_an_agent_round_past_its_budget_is_compacted_once_and_replayed_identically(stack, people, api_as):
    """S37: an agent round outgrows its token budget → compacted once; every constraint
    verbatim in the next prompt; the same prompt on replay (request hashes equal)."""
    stack.up(RUNTIME_WORKFLOW_MODULES=VARIANTS)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    body = {"workflow": "support_agent_compact", "input": {"ticket": "TCK-1001", "constraints": [REQUESTED]}}
    started = requester.post("/executions", body)
    assert started.status_code == 201, started.text
    ref = started.json()["id"]
    waiting = wait_for(
        lambda: (e := requester.execution(ref))["status"] in ("awaiting_approval", "needs_attention", "failed") and e,
        timeout=90,
        what=f"{ref} to stop",
    )
    assert waiting["status"] == "awaiting_approval", (waiting["status_reason"], waiting["stuck"])
    folds = list(ExecutionEvent.objects.filter(execution_id=pk(ref), type="context.compacted").order_by("id"))
    assert folds, "the conversation never passed its budget"
    assert len({f.payload["call"] for f in folds}) == len(folds)  # each fold once
    constraints = [
        "Act only on ticket TCK-1001, its order and its item.",
        "Never send more items than were ordered or are in stock.",
        "Submit only the exact replacement a manager approved; answer the customer once.",
    ]
    for fold in folds:
        call = ModelCall.objects.get(key=fold.payload["call"])
        system, first = call.request["system"], call.request["messages"][0]["content"]
        assert all(f"- MUST: {c}" in system for c in constraints), system  # verbatim
        assert REQUESTED in system and "Goal: Resolve support ticket TCK-1001" in system
        assert fold.payload["note"] in first and "source: " + f"{ref}:resolve:r1:c1" in first
    hashes = {c.key: c.request_sha256 for c in ModelCall.objects.filter(execution_id=pk(ref))}

    assert manager.decide(ref, waiting["pending_approval"]).status_code == 202
    wait_status(requester, ref, "completed")
    # The step ran again after the decision: every recorded call replayed with the same hash
    # (a different one would be model_drift), no call asked twice, no fold made again.
    again = ModelCall.objects.filter(execution_id=pk(ref))
    assert all(c.revision == 1 for c in again)
    assert {c.key: c.request_sha256 for c in again if c.key in hashes} == hashes
    after = ExecutionEvent.objects.filter(execution_id=pk(ref), type="context.compacted")
    assert {f.payload["call"] for f in after} >= {f.payload["call"] for f in folds}
    assert after.filter(payload__call__in=[f.payload["call"] for f in folds]).count() == len(folds)
    page = Client()
    page.force_login(people["requester"].user)
    shown = page.get(f"/executions/{ref}/").content.decode()
    assert 'id="compaction-1"' in shown and 'id="open-questions"' in shown
    assert "Never send more items than were ordered or are in stock." in shown and REQUESTED in shown


def test_the_shipped_support_agent_compacts_where_users_run_by_its_models_window(stack, people, api_as):
    """Compaction is on by default: with no Budget(conversation_tokens=…) the shipped support
    agent folds its round once the conversation passes half its model's context window
    (RUNTIME_MODEL_CONTEXT_WINDOWS, here the offline model's 1,000 tokens), so a long round
    goes on instead of stopping for a person; it completes, and a replay of a parked one,
    folding where the worker did, finds nothing."""
    stack.up(RUNTIME_MODEL_CONTEXT_WINDOWS='{"offline-deterministic-1": 1000}')
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = requester.post("/executions", {"workflow": "support_agent", "input": {"ticket": "TCK-1001"}}).json()["id"]
    waiting = wait_status(requester, ref, "awaiting_approval", timeout=60)
    folds = ExecutionEvent.objects.filter(execution_id=pk(ref), type="context.compacted")
    assert folds.exists() and all(f.step == "resolve" for f in folds)

    replayed = run_manage(
        "keel",
        "replay",
        "--json",
        env={**stack.env, "RUNTIME_MODEL_CONTEXT_WINDOWS": '{"offline-deterministic-1": 1000}'},
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr

    assert manager.decide(ref, waiting["pending_approval"]).status_code == 202
    wait_status(requester, ref, "completed")
    assert all(c.revision == 1 for c in ModelCall.objects.filter(execution_id=pk(ref)))
