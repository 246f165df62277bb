"""The replacement-order workflow on real processes, and scenario S16.

S16: an order service without idempotency drops the connection after creating the
order → reconcile by lookup (by the client reference), never blindly resubmit; if the
outcome can't be established, pause for an operator with the lookup evidence.

The S16 tests describe the runtime with automatic retries: an ``outcome_unknown``
failure schedules a retry (``retry_pending``, re-dispatched by the sweeper) whose
first move is the reconciliation lookup; when retries are used up without an
answer, the execution goes to ``needs_attention``.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from executions.models import Action, Execution, ExecutionEvent, StepRun
from tests.support.orders import add_fault, orders_mode, orders_with_reference
from tests.support.procs import http, wait_for
from tests.support.stack import own_actions, pk, up, wait_status
from workflows import orders

SETTLED = ("completed", "failed", "cancelled", "needs_attention")
STEPS = ["load_order", "propose_replacement", "review", "submit_order", "record_order", "shipment", "confirm"]
SHIPPED = {"tracking": "TRK-77"}


# --- helpers


def start(api, original_order: str = "ORD-1001", **extra: Any) -> dict:
    response = api.post(
        "/executions", {"workflow": "replacement_order", "input": {"original_order": original_order}, **extra}
    )
    assert response.status_code in (200, 201), response.text
    return response.json()


def wait_settled(api, ref: str, timeout: float = 90) -> dict:
    """Poll until ``ref`` stops moving on its own (terminal, or waiting for an operator).
    When it waits for the shipment confirmation, this test plays the warehouse and
    confirms it (the same event_id every time: one wake)."""

    def settled() -> dict | None:
        body = api.execution(ref)
        if body["status"] == "waiting":
            answer = api.signal(ref, "shipment_confirmed", SHIPPED, event_id=f"{ref}:shipped")
            assert answer.status_code in (202, 409), answer.text
            return None
        return body if body["status"] in SETTLED else None

    return wait_for(settled, timeout=timeout, what=f"{ref} to settle in one of {SETTLED}")


def action_history(ref: str, key: str) -> list[ExecutionEvent]:
    return list(ExecutionEvent.objects.filter(execution_id=pk(ref), type__startswith="action.", payload__key=key))


def reconciled_without_an_operator(ref: str) -> bool:
    """The unknown outcome was retried automatically (retry_pending), never parked for a person."""
    events = ExecutionEvent.objects.filter(execution_id=pk(ref))
    return events.filter(to_status="retry_pending").exists() and not events.filter(to_status="needs_attention").exists()


def approve(people, api_as) -> tuple[str, dict]:
    """Start ORD-1001 and get it to the manager's approval; returns (ref, approval)."""
    requester = api_as(people["requester"])
    ref = start(requester)["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    return ref, approval


# --- pure helpers (no processes)


def test_the_proposal_replaces_only_the_damaged_items_and_renders_deterministically():
    for order_id in orders.known_orders():
        order = orders.get_order(order_id)
        proposal = orders.replacement_proposal(order, reference="RUN_0001:submit_order:v1", version=1)
        ordered = {i["sku"]: i for i in order["items"]}
        damaged = {d["sku"]: d["qty"] for d in order["damage"]["items"]}
        assert {i["sku"]: i["qty"] for i in proposal["items"]} == damaged
        assert all(i["qty"] <= ordered[i["sku"]]["qty"] for i in proposal["items"])
        assert proposal["shipping_address"] == order["shipping_address"]
        assert proposal["charge_to_customer"] == "0.00"
        again = orders.replacement_proposal(orders.get_order(order_id), reference="RUN_0001:submit_order:v1", version=1)
        assert orders.render_proposal(proposal).encode() == orders.render_proposal(again).encode()
    first = orders.replacement_proposal(orders.get_order("ORD-1001"), reference="R", version=1)
    assert first["replacement_value"] == "43.90"  # 2 × 12.50 + 1 × 18.90


def test_a_damage_report_naming_more_than_was_ordered_is_refused():
    order = orders.get_order("ORD-1002")
    order["damage"]["items"] = [{"sku": "SKU-LMP-10", "qty": 2}]
    with pytest.raises(ValueError, match="2 × SKU-LMP-10 damaged but 1 ordered"):
        orders.replacement_proposal(order, reference="R", version=1)


@pytest.mark.parametrize(
    ("raw", "field", "says"),
    [
        ({}, "original_order", "required"),
        ({"original_order": "ORD-4242"}, "original_order", "ORD-1001, ORD-1002, ORD-1003, ORD-1004, ORD-1005"),
        ({"original_order": "1001"}, "original_order", "expected ORD- and digits"),
        ({"original_order": 1001}, "original_order", "expected ORD- and digits"),
        ({"original_order": "ORD-1001", "priority": "high"}, "priority", "unknown field"),
        ({"original_order": "ORD-1001", "constraints": "fast"}, "constraints", "non-empty strings"),
        (
            {"original_order": "ORD-1001", "confirm_within_seconds": 0},
            "confirm_within_seconds",
            "greater than or equal to 1",
        ),
        ({"original_order": "ORD-1001", "confirm_within_seconds": "60"}, "confirm_within_seconds", "valid integer"),
        ({"original_order": "ORD-1001", "confirm_within_seconds": 2.5}, "confirm_within_seconds", "valid integer"),
        ({"original_order": "ORD-1001", "confirm_within_seconds": True}, "confirm_within_seconds", "valid integer"),
        (
            {"original_order": "ORD-1001", "confirm_within_seconds": 2**31},
            "confirm_within_seconds",
            "less than or equal",
        ),
    ],
)
def test_malformed_replacement_input_is_422_naming_the_field_and_writes_nothing(people, raw, field, says):
    response = Client().post(
        "/api/executions",
        {"workflow": "replacement_order", "input": raw},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {people['requester'].token}",
    )
    assert response.status_code == 422, response.content
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "input", field]
    assert says in error["msg"]
    assert Execution.objects.count() == 0 and ExecutionEvent.objects.count() == 0


# --- end to end


def test_replacement_order_happy_path_through_the_api(stack, people, api_as):
    up(stack)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])

    # An unknown original order: 422 naming the field and the known orders; nothing written.
    refused = requester.post("/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-9999"}})
    assert refused.status_code == 422, refused.text
    [error] = refused.json()["detail"]
    assert error["loc"] == ["body", "input", "original_order"] and "ORD-1001" in error["msg"]
    assert Execution.objects.count() == 0 and ExecutionEvent.objects.count() == 0

    started = start(requester)
    ref = started["id"]
    assert started["workflow"] == "replacement_order" and started["workflow_version"] == 2

    waiting = wait_status(requester, ref, "awaiting_approval")
    approval = waiting["pending_approval"]
    assert waiting["step_label"] == "Awaiting approval of the proposal"
    assert approval["action"] == "submit_order" and approval["artifact_version"] == 1
    [artifact] = waiting["artifacts"]
    assert artifact["artifact_id"].startswith("ORDER_") and approval["content_sha256"] == artifact["sha256"]
    # The gate may describe the order it authorises (planned), but nothing is submitted before the approval.
    assert all(a["status"] == "planned" and a["attempts"] == 0 for a in own_actions(waiting)), waiting["actions"]
    assert stack.sandbox_stats()["endpoints"].get("/orders") is None

    assert requester.decide(ref, approval).status_code == 403  # not their own request
    assert manager.decide(ref, approval).status_code == 202

    # Version 2: after the order is recorded, the customer hears nothing until the shipment is confirmed.
    waiting = wait_status(requester, ref, "waiting")
    gate = waiting["pending_gate"]
    assert gate["kind"] == "wait" and gate["step"] == "shipment" and "shipment_confirmed" in gate["waiting_for"]
    assert waiting["step_label"] == "Waiting for the shipment confirmation" and gate["until"] > gate["since"]
    assert stack.sandbox_stats()["endpoints"].get("/notify") is None
    assert requester.signal(ref, "shipment_confirmed", SHIPPED).status_code == 202

    done = wait_status(requester, ref, "completed")
    key, confirm_key = f"{ref}:submit_order:v1", f"{ref}:confirm:v1"
    assert {a["key"]: (a["type"], a["status"], a["attempts"]) for a in own_actions(done)} == {
        key: ("submit_order", "succeeded", 1),
        confirm_key: ("notify_customer", "succeeded", 1),
    }
    submitted = Action.objects.get(key=key)
    order_id = submitted.receipt["order_id"]
    assert order_id.startswith("ORD-") and submitted.receipt["reference"] == key

    # The service holds exactly one order for the reference: the approved proposal's items only.
    [order] = orders_with_reference(stack, key)
    assert order["order_id"] == order_id and order["original_order"] == "ORD-1001"
    assert [(i["sku"], i["qty"]) for i in order["items"]] == [("SKU-MUG-01", 2), ("SKU-PLT-02", 1)]
    stats = stack.sandbox_stats()
    assert stats["keys"][key] == {"calls": 1, "effects": 1}
    assert stats["keys"][confirm_key] == {"calls": 1, "effects": 1}
    [note] = (
        http().get(f"{stack.sandbox_url}/notifications", params={"key": confirm_key}, timeout=5).json()["notifications"]
    )
    assert order_id in note["body"] and "TRK-77" in note["body"] and note["to"] == ["ana.pereira@example.com"]

    execution = Execution.objects.get(pk=pk(ref))
    assert list(StepRun.objects.filter(execution=execution).values_list("step", flat=True)) == STEPS
    assert execution.outputs()["record_order"] == {"order_id": order_id, "reference": key}
    facts = {f["id"]: f for f in execution.context["notes"]["facts"]}
    assert facts["O3"]["value"] == order_id and facts["O3"]["source"] == f"order_service:{key}"
    assert "Submit only the exact proposal version a manager approved." in execution.context["notes"]["constraints"]


def test_s16_order_service_without_idempotency_drops_connection_after_creating_order(stack, people, api_as):
    """S16: an order service without idempotency drops the connection after creating the order."""
    up(stack, ORDER_SERVICE_HONORS_KEYS="false")
    orders_mode(stack, idempotent=False)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref, approval = approve(people, api_as)
    key = f"{ref}:submit_order:v1"

    # The order service creates the order, then hangs past our 3 s timeout: outcome unknown.
    add_fault(stack, endpoint="/orders", fault="commit_then_hang", count=1, hang_seconds=6)
    assert manager.decide(ref, approval).status_code == 202

    settled = wait_settled(requester, ref)
    assert settled["status"] == "completed", f"{settled['status']}: {settled.get('status_reason')}"
    [order] = orders_with_reference(stack, key)  # exactly one order
    action = Action.objects.get(key=key)
    assert action.status == Action.State.SUCCEEDED and action.attempts == 1
    assert action.receipt["order_id"] == order["order_id"]
    stats = stack.sandbox_stats()
    assert stats["endpoints"]["/orders"]["effects"] == 1
    assert stats["keys"][key] == {"calls": 1, "effects": 1}  # never resubmitted

    history = action_history(ref, key)
    assert [e.type for e in history].count("action.executing") == 1
    assert "action.unknown" in [e.type for e in history]
    assert history[-1].type == "action.succeeded" and history[-1].payload.get("reconciled") is True
    assert reconciled_without_an_operator(ref)


def test_s16_unknowable_outcome_pauses_for_an_operator(stack, people, api_as):
    """S16: an order service without idempotency drops the connection after creating the order."""
    up(stack, ORDER_SERVICE_HONORS_KEYS="false")
    orders_mode(stack, idempotent=False)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref, approval = approve(people, api_as)
    key = f"{ref}:submit_order:v1"

    # The submission hangs without creating anything, and every lookup fails: nobody can tell.
    add_fault(stack, endpoint="/orders", method="POST", fault="timeout", count=1, hang_seconds=6)
    add_fault(stack, endpoint="/orders", method="GET", fault="error_500", count=50)
    assert manager.decide(ref, approval).status_code == 202

    settled = wait_settled(requester, ref, timeout=120)
    assert settled["status"] == "needs_attention", f"{settled['status']}: {settled.get('status_reason')}"
    reason = settled["status_reason"]
    assert "lookup" in reason.lower() or "established" in reason, reason
    assert {a["key"]: a["status"] for a in own_actions(settled)} == {key: "unknown"}
    action = Action.objects.get(key=key)
    assert action.status == Action.State.UNKNOWN and action.attempts == 1

    # The evidence: the lookup was tried and failed; nothing was re-sent.
    history = action_history(ref, key)
    lookups = [e.payload["evidence"] for e in history if isinstance(e.payload.get("evidence"), dict)]
    assert lookups and "lookup_error" in lookups[-1], [e.payload for e in history]
    assert "/orders" in lookups[-1]["lookup_error"] and "500" in lookups[-1]["lookup_error"]
    assert [e.type for e in history].count("action.executing") == 1
    stats = stack.sandbox_stats()
    assert stats["endpoints"]["/orders"]["effects"] == 0
    assert stats["keys"][key] == {"calls": 1, "effects": 0}
    assert http().delete(f"{stack.sandbox_url}/_faults", timeout=5).status_code == 200  # lookups work again
    assert orders_with_reference(stack, key) == []
    assert not StepRun.objects.filter(execution_id=pk(ref), step="record_order").exists()


def test_s16_reference_mode_never_resends_when_the_lookup_finds_nothing(stack, people, api_as):
    """S16: an order service without idempotency drops the connection after creating the order."""
    up(stack, ORDER_SERVICE_HONORS_KEYS="false")
    orders_mode(stack, idempotent=False)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref, approval = approve(people, api_as)
    key = f"{ref}:submit_order:v1"

    # Hangs without creating; the lookup works and finds nothing. Without key
    # deduplication a resend could still double the order: an operator decides.
    add_fault(stack, endpoint="/orders", method="POST", fault="timeout", count=1, hang_seconds=6)
    assert manager.decide(ref, approval).status_code == 202

    settled = wait_settled(requester, ref, timeout=120)
    assert settled["status"] == "needs_attention", f"{settled['status']}: {settled.get('status_reason')}"
    action = Action.objects.get(key=key)
    assert action.status == Action.State.UNKNOWN and action.attempts == 1
    history = action_history(ref, key)
    evidence = [e.payload["evidence"] for e in history if isinstance(e.payload.get("evidence"), dict)]
    assert evidence and evidence[-1].get("lookup") == "not found", [e.payload for e in history]
    assert orders_with_reference(stack, key) == []
    stats = stack.sandbox_stats()
    assert stats["endpoints"]["/orders"]["effects"] == 0
    assert stats["keys"][key] == {"calls": 1, "effects": 0}


def test_s16_idempotent_mode_retries_with_the_same_key(stack, people, api_as):
    """S16: an order service without idempotency drops the connection after creating the order."""
    up(stack, ORDER_SERVICE_HONORS_KEYS="true")
    orders_mode(stack, idempotent=True)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref, approval = approve(people, api_as)
    key = f"{ref}:submit_order:v1"

    add_fault(stack, endpoint="/orders", fault="commit_then_hang", count=1, hang_seconds=6)
    assert manager.decide(ref, approval).status_code == 202

    settled = wait_settled(requester, ref)
    assert settled["status"] == "completed", f"{settled['status']}: {settled.get('status_reason')}"
    [order] = orders_with_reference(stack, key)
    assert order["key"] == key  # the service stored it under our Idempotency-Key
    action = Action.objects.get(key=key)
    assert action.status == Action.State.SUCCEEDED and action.receipt["order_id"] == order["order_id"]
    stats = stack.sandbox_stats()
    assert stats["endpoints"]["/orders"]["effects"] == 1
    assert stats["keys"][key] == {"calls": 1, "effects": 1}  # found by the lookup, not sent again
    assert action.attempts == 1 and reconciled_without_an_operator(ref)


def test_s16_idempotent_mode_resends_with_the_same_key_when_the_lookup_finds_nothing(stack, people, api_as):
    """S16: an order service without idempotency drops the connection after creating the order."""
    up(stack, ORDER_SERVICE_HONORS_KEYS="true")
    orders_mode(stack, idempotent=True)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref, approval = approve(people, api_as)
    key = f"{ref}:submit_order:v1"

    # Hangs without creating: the lookup finds nothing, and a service that deduplicates
    # on the key may safely get the same request again, with the same key.
    add_fault(stack, endpoint="/orders", method="POST", fault="timeout", count=1, hang_seconds=6)
    assert manager.decide(ref, approval).status_code == 202

    settled = wait_settled(requester, ref)
    assert settled["status"] == "completed", f"{settled['status']}: {settled.get('status_reason')}"
    [order] = orders_with_reference(stack, key)
    assert order["key"] == key
    action = Action.objects.get(key=key)
    assert action.status == Action.State.SUCCEEDED and action.attempts == 2
    assert stack.sandbox_stats()["keys"][key] == {"calls": 2, "effects": 1}
    resent = [e for e in action_history(ref, key) if e.type == "action.executing" and e.payload.get("attempt") == 2]
    assert resent and resent[0].payload["evidence"]["lookup"] == "not found"
    assert reconciled_without_an_operator(ref)


def test_s16_operator_resolves_an_unknown_order_with_its_order_id_and_the_customer_is_told_once(stack, people, api_as):
    """S16: an order service without idempotency drops the connection after creating the order.

    The lookups fail too, so nobody can tell: the execution waits for an operator. The
    operator finds the order at the service by its reference and resolves the submission
    as succeeded with the order id: the workflow continues from the receipt, the run
    completes, one order exists and the customer is notified exactly once.
    """
    up(stack, ORDER_SERVICE_HONORS_KEYS="false")
    orders_mode(stack, idempotent=False)
    requester, manager, operator = api_as(people["requester"]), api_as(people["manager"]), api_as(people["operator"])
    ref, approval = approve(people, api_as)
    key, confirm_key = f"{ref}:submit_order:v1", f"{ref}:confirm:v1"

    add_fault(stack, endpoint="/orders", method="POST", fault="commit_then_hang", count=1, hang_seconds=6)
    add_fault(stack, endpoint="/orders", method="GET", fault="error_500", count=50)
    assert manager.decide(ref, approval).status_code == 202

    settled = wait_settled(requester, ref, timeout=120)
    assert settled["status"] == "needs_attention", f"{settled['status']}: {settled.get('status_reason')}"
    assert {a["key"]: a["status"] for a in own_actions(settled)} == {key: "unknown"}
    assert stack.sandbox_stats()["keys"][key] == {"calls": 1, "effects": 1}  # it did happen

    # "It happened" without the order id the next step needs: refused, naming the field.
    refused = operator.post(f"/actions/{key}/resolve", {"outcome": "succeeded", "evidence": "seen at the service"})
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["loc"] == ["body", "receipt", "order_id"]
    assert Action.objects.get(key=key).status == Action.State.UNKNOWN

    # The operator looks the order up at the service by its reference (the ledger key).
    assert http().delete(f"{stack.sandbox_url}/_faults", timeout=5).status_code == 200
    [order] = orders_with_reference(stack, key)
    resolved = operator.post(
        f"/actions/{key}/resolve",
        {
            "outcome": "succeeded",
            "evidence": f"GET /orders?reference={key} at the order service lists {order['order_id']}",
            "receipt": {"order_id": order["order_id"]},
        },
    )
    assert resolved.status_code == 200, resolved.text
    assert resolved.json()["receipt"]["order_id"] == order["order_id"]

    done = wait_settled(requester, ref)
    assert done["status"] == "completed", f"{done['status']}: {done.get('status_reason')}"
    assert {a["key"]: a["status"] for a in own_actions(done)} == {key: "succeeded", confirm_key: "succeeded"}
    stats = stack.sandbox_stats()
    assert stats["endpoints"]["/orders"]["effects"] == 1 and stats["keys"][key] == {"calls": 1, "effects": 1}
    assert stats["endpoints"]["/notify"]["effects"] == 1 and stats["keys"][confirm_key] == {"calls": 1, "effects": 1}
    [note] = (
        http().get(f"{stack.sandbox_url}/notifications", params={"key": confirm_key}, timeout=5).json()["notifications"]
    )
    assert order["order_id"] in note["body"]
    execution = Execution.objects.get(pk=pk(ref))
    assert execution.outputs()["record_order"] == {"order_id": order["order_id"], "reference": key}
