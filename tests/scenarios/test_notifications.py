"""S39 (operations): the worker is SIGKILLed right after a real SMTP server (aiosmtpd,
in this process) accepted an approval's notification → the approver has exactly one
message. The send was committed ``executing`` before the call; the survivor finds it
still executing past the claim window and, since SMTP has no idempotency key and no
lookup, records ``unknown`` instead of sending again. The execution is never held up:
it still awaits approval, and its approval completes it."""

from __future__ import annotations

import pytest

from executions.models import Action, ExecutionEvent
from tests.support.procs import wait_for
from tests.support.receivers import Mailbox
from tests.support.stack import pk, wait_status


@pytest.fixture
def mailbox():
    box = Mailbox()
    yield box
    box.close()


@pytest.mark.own_stack
def test_s39_worker_killed_right_after_the_smtp_server_accepted(stack, people, api_as, mailbox):
    """S39: SIGKILL the worker right after the SMTP server accepted a notification."""
    env = {
        "KEEL_NOTIFICATIONS": "on",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(mailbox.port),
        "RUNTIME_NOTIFY_CLAIM_SECONDS": "2",
    }
    doomed = stack.up(worker_env={"RUNTIME_FAILPOINTS": "after_beside_call:notify_approver=crash"}, **env).worker
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = requester.start()["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    wait_for(lambda: not doomed.alive(), timeout=40, what="the worker to die right after the SMTP server accepted")
    [first] = mailbox.messages  # accepted once; the worker died before recording it
    crashed = Action.objects.get(beside=True, status="executing")
    assert crashed.args["to"] in first["To"] and crashed.args["message_id"] == first["Message-ID"]

    stack.worker("survivor", **env)
    gate = f"approval:{approval['id']}"
    keys = {f"{gate}:notify:manager:opened", f"{gate}:notify:manager2:opened"}

    def settled():
        found = dict(Action.objects.filter(key__in=keys).values_list("key", "status"))
        return found if len(found) == 2 and "executing" not in found.values() else None

    statuses = wait_for(settled, timeout=40, what="both messages to be settled")
    assert statuses[crashed.key] == "unknown" and set(statuses.values()) == {"unknown", "succeeded"}
    assert len(mailbox.to("manager@example.com")) == 1 and len(mailbox.to("manager2@example.com")) == 1
    stack.wait_sweeps(4)
    assert len(mailbox.messages) == 2  # never re-sent blindly
    history = ExecutionEvent.objects.filter(execution_id=pk(ref), payload__key=crashed.key).values_list(
        "payload__to", flat=True
    )
    assert list(history) == ["approved", "executing", "unknown"]

    body = requester.execution(ref)
    assert (
        body["status"] == "awaiting_approval" and body["stuck"] is None or body["stuck"]["reason"] != "unknown_outcome"
    )
    assert {a["key"]: a["status"] for a in body["actions"] if a["type"] == "notify_approver"} == statuses
    # An operator may establish it while the execution waits: only the action is recorded.
    operator = api_as(people["operator"])
    evidence = {"outcome": "succeeded", "evidence": f"the mail server logged {first['Message-ID']} as delivered"}
    resolved = operator.post(f"/actions/{crashed.key}/resolve", evidence)
    assert resolved.status_code == 200 and resolved.json()["status"] == "succeeded", resolved.text
    assert requester.execution(ref)["status"] == "awaiting_approval"
    assert manager.decide(ref, approval).status_code == 202
    wait_status(requester, ref, "completed")  # a notification's unknown outcome never blocks it
    assert len(mailbox.messages) == 2
