"""What comes back from the services keel calls is bounded (issue 38, item 9.4), on real
processes and real local receivers: a redirect is never followed — not by a webhook (a
307 would send the signed body elsewhere) nor by an effect — and is the call's failure
with the ``Location`` as evidence; an answer over ``ANSWER_LIMIT`` (a 5 MB body) is never
stored: an effect's outcome is then unknown and reconciled, never re-sent to a service
that doesn't honour keys; a webhook goes again under its key."""

from __future__ import annotations

import json

import pytest

from executions.authoring.http import ANSWER_LIMIT
from executions.models import Action, ExecutionEvent, StepRun
from tests.support.procs import wait_for
from tests.support.receivers import WebhookReceiver
from tests.support.stack import pk, wait_status

SECRET = "webhook-secret-for-the-tests"
HUGE = b'{"padding": "' + b"x" * (5 * 1024 * 1024) + b'"}'  # 5 MB of a valid JSON answer


@pytest.fixture(scope="module")
def receivers():
    made = {name: WebhookReceiver(SECRET) for name in ("hooks", "service", "elsewhere")}
    yield made
    for receiver in made.values():
        receiver.close()


@pytest.fixture
def up(stack, receivers):
    for receiver in receivers.values():
        receiver.answers.clear()
        receiver.requests.clear()
    stack.up(
        KEEL_WORKFLOW_MODULES="tests.support.outbound_flow",
        KEEL_WEBHOOK_URL=receivers["hooks"].url,
        KEEL_WEBHOOK_SECRET=SECRET,
    )
    return stack


def start(api, url: str) -> str:
    answer = api.post("/executions", {"workflow": "outbound_probe", "input": {"url": url}})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def largest_row(ref: str) -> int:
    """The longest stored row of the execution's events, step runs and actions, as JSON."""
    rows = [*ExecutionEvent.objects.filter(execution_id=pk(ref)).values()]
    rows += [*StepRun.objects.filter(execution_id=pk(ref)).values(), *Action.objects.values()]
    return max(len(json.dumps(row, default=str)) for row in rows)


def test_a_webhook_is_never_redirected_and_an_answer_over_the_limit_is_not_stored(up, people, api_as, receivers):
    hooks, elsewhere = receivers["hooks"], receivers["elsewhere"]
    requester = api_as(people["requester"])
    hooks.answers[:] = [(307, {"Location": elsewhere.url}, b"")]
    ref = start(requester, receivers["service"].url)
    wait_status(requester, ref, "completed")
    key = f"{ref}:webhook:execution.completed"
    wait_for(lambda: Action.objects.filter(key__startswith=key, status="failed").exists(), what="the refused hook")
    action = Action.objects.get(key__startswith=key)
    assert action.attempts == 1 and "307" in action.last_error and elsewhere.url in action.last_error
    [failed] = ExecutionEvent.objects.filter(type="action.failed", payload__key=action.key)
    assert failed.payload["evidence"]["location"] == elsewhere.url
    up.wait_sweeps(3)
    assert Action.objects.get(pk=action.pk).attempts == 1  # refused for good, not retried
    assert elsewhere.requests == [] and len(hooks.requests) == 1  # the signed body went nowhere else

    hooks.answers[:] = [(200, {}, HUGE)]
    other = start(requester, receivers["service"].url)
    wait_status(requester, other, "completed")
    key = f"{other}:webhook:execution.completed"
    wait_for(lambda: Action.objects.filter(key__startswith=key, status="succeeded").exists(), what="the hook again")
    action = Action.objects.get(key__startswith=key)
    [lost] = ExecutionEvent.objects.filter(type="action.unknown", payload__key=action.key)
    assert f"more than {ANSWER_LIMIT} bytes" in lost.payload["error"], lost.payload
    assert action.attempts == 2 and {r["key"] for r in hooks.requests[1:]} == {action.key}  # again, same key
    assert largest_row(other) < 20_000  # none of the 5 MB stored


def test_an_effect_is_never_redirected_and_the_redirect_is_its_failure(up, people, api_as, receivers):
    service, elsewhere = receivers["service"], receivers["elsewhere"]
    requester = api_as(people["requester"])
    service.answers[:] = [(307, {"Location": elsewhere.url}, b"")]
    ref = start(requester, service.url)

    failed = wait_status(requester, ref, "failed")
    assert "307" in failed["status_reason"] and elsewhere.url in failed["status_reason"], failed
    action = Action.objects.get(key=f"{ref}:send")
    assert action.status == "failed" and action.attempts == 1
    [event] = ExecutionEvent.objects.filter(type="action.failed", payload__key=action.key)
    assert event.payload["evidence"]["location"] == elsewhere.url
    assert [r["method"] for r in service.requests] == ["POST"] and elsewhere.requests == []


def test_an_effect_answer_over_the_limit_is_not_stored_and_never_sent_again(up, people, api_as, receivers):
    """5 MB back from a service that doesn't honour keys: the effect may have happened, its
    receipt can't be read — unknown, reconciled by lookup (which finds nothing), never
    re-sent: a person resolves it."""
    service = receivers["service"]
    requester = api_as(people["requester"])
    service.answers[:] = [(200, {}, HUGE)]
    ref = start(requester, service.url)

    stopped = wait_status(requester, ref, "needs_attention")
    assert stopped["stuck"]["reason"] == "unknown_outcome", stopped["stuck"]
    action = Action.objects.get(key=f"{ref}:send")
    assert action.status == "unknown" and action.receipt is None
    assert f"more than {ANSWER_LIMIT} bytes" in action.last_error, action.last_error
    assert [r["method"] for r in service.requests if r["method"] == "POST"] == ["POST"]  # sent once
    assert largest_row(ref) < 20_000
