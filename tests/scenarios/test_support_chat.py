"""``support_chat`` (docs/design.md §6, control flow; issue 40 item 8): the support agent in a
conversation — each customer message a turn (a visit of its agent step), each tool call
gated as in ``support_agent``, ``close`` or the idle timeout ends it with a result."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client
from django.urls import reverse

from executions.models import Action, ModelCall, StepRun
from tests.support.procs import wait_for
from tests.support.stack import pk, wait_status


def start(api, **input) -> str:
    answer = api.post("/executions", {"workflow": "support_chat", "input": input})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def turn_waiting(api, ref: str, turns: int) -> dict:
    """The chat waiting for the customer after its ``turns``-th answer."""
    return wait_for(
        lambda: (
            (e := api.execution(ref))["status"] == "waiting"
            and StepRun.objects.filter(execution_id=pk(ref), step="answer", outcome="succeeded").count() == turns
            and e
        ),
        what=f"turn {turns} to be answered",
        timeout=40,
    )


def answers(ref: str) -> list[str]:
    runs = StepRun.objects.filter(execution_id=pk(ref), step="answer", outcome="succeeded").order_by("id")
    return [run.output["answer"] for run in runs]


@pytest.mark.own_stack
def test_s61_three_turns_with_a_kill_between_two_then_close(stack, people, api_as):
    """S61: three turns, the only worker SIGKILLed while the chat waits between the first
    two: no answer repeated, each turn's model calls asked once, the replacement the
    manager approved in the second turn submitted once; ``close`` completes it with
    ``result.turns`` 3."""
    doomed = stack.up(workers=("doomed",)).worker
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start(requester, customer="CUST-1001", message="Hello, my parcel arrived with broken mugs.")
    waiting = turn_waiting(requester, ref, 1)
    assert waiting["pending_gate"]["waiting_for"] == "the signal customer_message or close"
    assert "Which ticket" in answers(ref)[0]
    doomed.kill()
    wait_for(lambda: not doomed.alive(), what="the worker to die")

    stack.worker("survivor")
    assert requester.signal(ref, "customer_message", {"text": "It is ticket TCK-1001."}).status_code == 202
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert approval["action"] == "submit_replacement"
    assert manager.decide(ref, approval).status_code == 202
    turn_waiting(requester, ref, 2)
    assert requester.signal(ref, "customer_message", {"text": "Thank you!"}).status_code == 202
    turn_waiting(requester, ref, 3)
    assert requester.signal(ref, "close").status_code == 202
    done = wait_status(requester, ref, "completed")

    said = answers(ref)
    assert done["result"] == {"turns": 3, "closed_by": "customer", "answers": said}
    assert len(said) == 3 and "replacement" in said[1] and said[0] != said[1]
    calls = ModelCall.objects.filter(execution_id=pk(ref))
    assert sorted({c.round for c in calls}) == [1, 2, 3], "each turn in a round of its own"
    assert calls.filter(revision__gt=1).count() == 0 and len({c.key for c in calls}) == calls.count()
    [order] = Action.objects.filter(execution_id=pk(ref), type="submit_replacement")
    assert order.status == "succeeded" and order.gate_ref == f"approval:{approval['id']}"
    assert stack.sandbox_stats()["keys"][order.key]["effects"] == 1


def test_an_idle_chat_ends_by_itself_and_bad_messages_are_refused(stack, people, api_as):
    """No message within ``idle_seconds``: completed, ``closed_by: timeout``. An empty or
    over-long message → 422 naming ``input.message`` or ``payload.text``; nothing changes."""
    stack.up()
    requester = api_as(people["requester"])
    for bad in ("", "x" * 2001):
        refused = requester.post(
            "/executions", {"workflow": "support_chat", "input": {"customer": "CUST-1", "message": bad}}
        )
        assert refused.status_code == 422 and "message" in refused.text, refused.text
    ref = start(requester, customer="CUST-1002", message="Hi", idle_seconds=60)
    turn_waiting(requester, ref, 1)
    for bad in ({"text": ""}, {"text": "y" * 2001}, {"words": "hi"}):
        refused = requester.signal(ref, "customer_message", bad)
        assert refused.status_code == 422 and "payload" in refused.text, refused.text
    assert requester.execution(ref)["status"] == "waiting"

    quiet = start(requester, customer="CUST-1003", message="Anyone there?", idle_seconds=1)
    done = wait_status(requester, quiet, "completed")
    assert done["result"]["turns"] == 1 and done["result"]["closed_by"] == "timeout"


def test_the_chat_is_on_the_execution_page_with_a_message_box_for_the_requester(stack, people, api_as):
    """The page shows each turn (the customer's words, the agent's answer, its tool calls)
    and, while the chat waits, a box to send the next message or close it; an empty
    message is refused with a message on the page and nothing sent."""
    stack.up()
    requester = api_as(people["requester"])
    ref = start(requester, customer="CUST-1004", message="Hello <b>there</b>, my TCK-1002 lamp broke.")
    turn_waiting(requester, ref, 1)
    page = Client()
    page.force_login(people["requester"].user)
    html = page.get(reverse("console:detail", args=[ref])).content.decode()
    assert 'id="chat"' in html and 'id="chat-form"' in html
    assert "Hello &lt;b&gt;there&lt;/b&gt;, my TCK-1002 lamp broke." in html  # the customer's words, escaped
    assert "out of stock" in html and "<code>check_stock</code> — done" in html

    chat = reverse("console:chat", args=[ref])
    refused = page.post(chat, {"event_id": uuid.uuid4().hex, "do": "send", "text": ""}, follow=True)
    assert "payload.text" in refused.content.decode() or "at least 1 character" in refused.content.decode()
    assert requester.execution(ref)["status"] == "waiting"
    page.post(chat, {"event_id": uuid.uuid4().hex, "do": "send", "text": "Is it shipped?"})
    turn_waiting(requester, ref, 2)
    page.post(chat, {"event_id": uuid.uuid4().hex, "do": "close"})
    done = wait_status(requester, ref, "completed")
    assert done["result"]["turns"] == 2 and done["result"]["closed_by"] == "customer"
    html = page.get(reverse("console:detail", args=[ref])).content.decode()
    assert "Is it shipped?" in html and 'id="chat-form"' not in html
