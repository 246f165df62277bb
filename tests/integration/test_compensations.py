"""Closing a compensation (issue 12): a replacement order submitted for real, then the
execution cancelled while it waits for the shipment; the cancel records the order's
cancellation as a planned compensation, which a person carries out and an operator
closes with evidence (API and the form beside it in the ledger), once."""

from __future__ import annotations

from django.test import Client

from executions.models import Action, ExecutionEvent
from tests.support.stack import pk, up, wait_status


def test_an_operator_closes_the_compensation_a_cancel_recorded(stack, people, api_as):
    up(stack)
    requester, manager, operator = api_as(people["requester"]), api_as(people["manager"]), api_as(people["operator"])
    started = requester.post("/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-1002"}})
    ref = started.json()["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert manager.decide(ref, approval).status_code == 202
    wait_status(requester, ref, "waiting")  # the order went out; the shipment isn't confirmed yet
    submitted = Action.objects.get(key=f"{ref}:submit_order:v1")
    key = f"{ref}:submit_order:v1:compensate"

    # Not cancelled yet: nothing to close.
    assert not Action.objects.filter(key=key).exists()
    assert operator.post(f"/executions/{ref}/cancel", {"reason": "the customer found the items"}).status_code == 200
    compensation = Action.objects.get(key=key)
    assert compensation.status == Action.State.PLANNED and compensation.type == "compensate_submit_order"
    assert compensation.args["order_id"] == submitted.receipt["order_id"]

    # Refused, changing nothing: not an operator, bad input, an action that is no compensation.
    good = {"outcome": "succeeded", "evidence": f"cancelled {submitted.receipt['order_id']} at the order service"}
    assert requester.post(f"/actions/{key}/close", good).status_code == 403
    assert manager.post(f"/actions/{key}/close", good).status_code == 403
    for body, field in [
        ({"outcome": "maybe", "evidence": "x"}, "outcome"),
        ({"outcome": "succeeded", "evidence": ""}, "evidence"),
        ({"outcome": "succeeded", "evidence": "   "}, "evidence"),
        ({"evidence": "x"}, "outcome"),
    ]:
        answer = operator.post(f"/actions/{key}/close", body)
        assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["body", field], answer.text
    not_one = operator.post(f"/actions/{submitted.key}/close", good)
    assert not_one.status_code == 409 and "not a compensation" in not_one.json()["detail"]
    assert operator.post("/actions/RUN_9999:x:compensate/close", good).status_code == 404
    assert Action.objects.get(key=key).status == Action.State.PLANNED

    # The execution page offers the form beside the compensation, to operators.
    client = Client()
    client.force_login(people["operator"].user)
    page = client.get(f"/executions/{ref}/").content.decode()
    assert "compensation — to be carried out by a person" in page and 'class="close-form' in page
    assert submitted.receipt["order_id"] in page  # what to undo
    closed = client.post(f"/executions/{ref}/compensations/close/", {"key": key, **good}, follow=True)
    page = closed.content.decode()
    assert f"Closed {key} as succeeded." in page and "compensation carried out" in page
    assert "closed as succeeded by operator" in page and 'class="close-form' not in page

    compensation.refresh_from_db()
    assert compensation.status == Action.State.SUCCEEDED
    assert compensation.receipt == {"closed_by": "operator", "evidence": good["evidence"]}
    [event] = ExecutionEvent.objects.filter(execution_id=pk(ref), type="action.succeeded", payload__key=key)
    assert event.actor.get_username() == "operator"
    assert event.payload["closed"] is True and event.payload["from"] == "planned"
    assert event.payload["evidence"] == good["evidence"]

    # Once: a second close is a 409 and changes nothing.
    again = operator.post(f"/actions/{key}/close", {"outcome": "failed", "evidence": "no"})
    assert again.status_code == 409 and "already succeeded" in again.json()["detail"]
    assert Action.objects.get(key=key).status == Action.State.SUCCEEDED
    assert stack.sandbox_stats()["endpoints"]["/orders"]["effects"] == 1  # the runtime never undid anything itself
