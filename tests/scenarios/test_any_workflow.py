"""Guarantees for any workflow (docs/design.md §4, fourth round), on workflows keel doesn't ship:
an approval is spent by its one effect (S49), nothing hangs without a reason (S50)."""

from __future__ import annotations

import json

from django.db import connection

from approvals.models import ApprovalRequest
from executions.models import Action, ModelCall, StepRun, Wait
from tests.support.procs import http, wait_for
from tests.support.stack import pk, wait_status

ENV = {"RUNTIME_WORKFLOW_MODULES": "tests.support.repeating_agent,tests.support.family_flow,tests.support.parked_flows"}
TERMINAL = ("completed", "failed", "cancelled")
PARKED = ("waiting", "awaiting_approval")


def start(api, workflow: str, **input) -> str:
    answer = api.post("/executions", {"workflow": workflow, "input": input})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def pay_results(ref: str) -> list[dict]:
    """What the model was told after each ``pay`` it proposed: the tool messages of the
    step's last request (the whole conversation of its last round)."""
    last = ModelCall.objects.filter(execution_id=pk(ref), step="settle").order_by("-round", "-seq").first()
    return [json.loads(m["content"]) for m in last.request["messages"] if m.get("name") == "pay"]


def test_s49_the_model_repeating_an_approved_call_gets_the_receipt_and_the_provider_one_call(stack, people, api_as):
    """S49: the model proposes an approved, already-run tool call three more times, at a
    provider that does not de-duplicate: one effect; the model is told the recorded result."""
    stack.up(**ENV)
    http().post(f"{stack.sandbox_url}/_config", json={"orders_idempotent": False}, timeout=5).raise_for_status()
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start(requester, "repeating_payer", customer="CUST-1", amount=5)

    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert approval["action"] == "pay"
    assert manager.decide(ref, approval).status_code == 202
    done = wait_status(requester, ref, "completed")

    [action] = Action.objects.filter(execution_id=pk(ref), type="pay")
    assert action.key == f"{ref}:approval:{approval['id']}:pay"  # the approval's, not a model call's
    assert (action.status, action.gate_ref, action.attempts) == ("succeeded", f"approval:{approval['id']}", 1)
    assert [a["key"] for a in done["actions"] if a["type"] == "pay"] == [action.key]
    stats = stack.sandbox_stats()
    assert stats["endpoints"]["/orders"] == {"calls": 1, "effects": 1}
    assert stats["keys"][action.key] == {"calls": 1, "effects": 1}

    told = pay_results(ref)
    assert len(told) == 4 and all(result == action.receipt for result in told)  # proposed 4 times, told 4 times
    answer = StepRun.objects.get(execution_id=pk(ref), step="settle", outcome="succeeded").output["answer"]
    assert answer == f"paid under {action.receipt['order_id']}"


def test_s49_a_different_call_after_the_spent_approval_needs_an_approval_of_its_own(stack, people, api_as):
    """After the approved call ran, the model asks for another amount: the execution parks
    for a new approval (a new round); the repeats of the first call, asked again in that
    round, still get its receipt; each approval lets exactly one effect through."""
    stack.up(**ENV)
    http().post(f"{stack.sandbox_url}/_config", json={"orders_idempotent": False}, timeout=5).raise_for_status()
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start(requester, "repeating_payer", customer="CUST-2", amount=5, different=True)

    first = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert manager.decide(ref, first).status_code == 202
    second = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    while second["id"] == first["id"]:  # the decision is still being carried out
        second = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    document = requester.get(f"/artifacts/{second['artifact_id']}/versions/{second['artifact_version']}/content").json()
    assert document == {"args": {"amount": 6, "customer": "CUST-2"}, "tool": "pay"}
    assert manager.decide(ref, second).status_code == 202
    wait_status(requester, ref, "completed")

    actions = {a.gate_ref: a for a in Action.objects.filter(execution_id=pk(ref), type="pay")}
    assert set(actions) == {f"approval:{first['id']}", f"approval:{second['id']}"}
    assert all(a.status == "succeeded" for a in actions.values())
    assert actions[f"approval:{second['id']}"].args == {"amount": 6, "customer": "CUST-2"}
    assert stack.sandbox_stats()["endpoints"]["/orders"] == {"calls": 2, "effects": 2}
    rounds = ApprovalRequest.objects.filter(execution_id=pk(ref)).values_list("round", "status")
    assert sorted(rounds) == [(1, "approved"), (2, "approved")]
    told = pay_results(ref)  # round 2: the first call (4 times) told its receipt, the second its own
    assert told[:4] == [actions[f"approval:{first['id']}"].receipt] * 4
    assert told[4] == actions[f"approval:{second['id']}"].receipt


def accounted_for(execution: dict) -> bool:
    """Nothing hangs without a reason: a terminal execution, a runnable one (pending or
    running: the doorbell rings it, and past RUNTIME_STUCK_SECONDS it is ``no_worker``), or
    a parked one with an open gate, a due time or a stuck reason."""
    if execution["status"] in TERMINAL or execution["status"] in ("pending", "running"):
        return True
    return bool(execution["lease"] or execution["due_at"] or execution["stuck"] or execution["pending_gate"])


def test_s50_a_children_step_that_starts_none_passes_at_once(stack, people, api_as):
    """S50: a children step that starts none is a gate with nothing to wait for: it
    passes with output {}, and at no moment is the parent parked without a reason."""
    stack.up(**ENV)
    requester = api_as(people["requester"])
    ref = start(requester, "family_parent", labels=[])
    seen = []

    def done() -> bool:
        execution = requester.execution(ref)
        seen.append(execution)
        assert accounted_for(execution), execution
        return execution["status"] in TERMINAL

    wait_for(done, timeout=30, what=f"{ref} to end")
    assert seen[-1]["status"] == "completed", seen[-1]
    assert StepRun.objects.get(execution_id=pk(ref), step="kids", outcome="succeeded").output == {}
    assert StepRun.objects.get(execution_id=pk(ref), step="sum_up").output == {"heard": {}}
    assert not seen[-1]["children"]


def test_s50_a_parked_execution_nothing_holds_gets_a_stuck_reason(stack, people, api_as):
    """The sweeper's safety net: an execution left waiting with nothing open for it (its
    wait closed under it, as a bug would) needs attention within seconds, saying so;
    a resume visits the step again (a new wait), and the signal then completes it."""
    stack.up(**ENV)
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    ref = start(requester, "waiter")
    assert wait_status(requester, ref, "waiting")["pending_gate"]
    with connection.cursor() as cursor:  # what a bug could leave: the wait closed, the execution still waiting
        cursor.execute("UPDATE executions_wait SET status = 'withdrawn' WHERE execution_id = %s", [pk(ref)])

    flagged = wait_status(requester, ref, "needs_attention", timeout=20)
    assert flagged["stuck"]["reason"] == "step_error"
    assert "waiting at hold with nothing to wait for" in flagged["stuck"]["detail"]
    assert operator.post(f"/executions/{ref}/resume", {"reason": "visit the wait again"}).status_code == 200
    wait_status(requester, ref, "waiting")
    assert Wait.objects.filter(execution_id=pk(ref), status="waiting").count() == 1
    assert requester.signal(ref, "go").status_code == 202
    wait_status(requester, ref, "completed")


def test_one_decision_lets_one_effect_of_a_step_through_whatever_its_key(stack, people, api_as):
    """A gate-guarded effect whose author put the attempt in its key, at a provider that
    doesn't de-duplicate: its first call acted and then failed; the retry's new key is
    refused (the approval was spent), so the provider sees one payout and a person looks."""
    stack.up(**ENV)
    http().post(f"{stack.sandbox_url}/_config", json={"orders_idempotent": False}, timeout=5).raise_for_status()
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start(requester, "sloppy_payout", name="CUST-9")
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert manager.decide(ref, approval).status_code == 202

    stopped = wait_status(requester, ref, "needs_attention", timeout=30)
    assert stopped["stuck"]["reason"] == "permission_denied"
    assert f"approval:{approval['id']} already let {ref}:payout:a1 through" in stopped["stuck"]["detail"]
    payouts = {a.key: a.status for a in Action.objects.filter(execution_id=pk(ref), type="payout")}
    assert payouts == {f"{ref}:payout:a1": "failed"}  # the second key never began
    assert stack.sandbox_stats()["endpoints"]["/orders"]["effects"] == 1
