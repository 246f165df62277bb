"""Issue 17, item 1: a gate that opens owns the execution's timer (``due_at``).

An execution retried before it reached a signal wait kept the retry's ``due_at``; the
sweeper and the claim read a waiting row with a past ``due_at`` as a timer that came
due, so every sweep woke it, the wait gate found its wait still open and opened a new
one (a fresh 7-day "until", three events a pass), ``waiting_overdue`` could never fire
and the triage console said ``no_worker``. On real processes: a 500 on ``POST
/orders`` (one retry), then the shipment wait, then twenty sweeps (over twice the stuck threshold) with the sweeper running.
The same for an agent step that parks at its approval after a retry.
"""

from __future__ import annotations

import time

from executions.models import Execution, ExecutionEvent, Wait
from tests.support.orders import add_fault
from tests.support.stack import pk, wait_status

# The web process calls an execution runnable-and-unclaimed after this long (no_worker):
# well inside the twenty sweeps (10 s or more) the scenario watches, so a stale timer would show.
STUCK_SECONDS = "4"


def test_a_retry_then_a_wait_stays_one_wait_through_twenty_sweeps(stack, people, api_as):
    stack.up(web_env={"RUNTIME_STUCK_SECONDS": STUCK_SECONDS})
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    started = requester.post("/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-1001"}})
    assert started.status_code == 201, started.text
    ref = started.json()["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    add_fault(stack, endpoint="/orders", fault="error_500", count=1)  # one retry before the wait
    assert manager.decide(ref, approval).status_code == 202

    waiting = wait_status(requester, ref, "waiting")
    execution = Execution.objects.get(pk=pk(ref))
    retries = ExecutionEvent.objects.filter(execution=execution, type="transition", payload__transition="retry")
    assert retries.count() == 1, "the order was retried once before the wait"
    [wait] = Wait.objects.filter(execution=execution)
    until = waiting["pending_gate"]["until"]
    events = ExecutionEvent.objects.filter(execution=execution).count()

    watched = time.monotonic()
    stack.wait_sweeps(20)  # a stale timer would wake it at the first of them
    time.sleep(max(0.0, 2 * float(STUCK_SECONDS) - (time.monotonic() - watched)))  # and no_worker would show

    now = requester.execution(ref)
    assert now["status"] == "waiting" and now["stuck"] is None, now["stuck"]
    assert now["pending_gate"]["until"] == until and now["due_at"] is None
    [still] = Wait.objects.filter(execution=execution)
    assert still.pk == wait.pk and still.status == Wait.State.WAITING and still.due_at == wait.due_at
    assert ExecutionEvent.objects.filter(execution=execution).count() == events, "nothing woke it"
    after = Execution.objects.get(pk=execution.pk)
    assert after.round == execution.round
    assert after.due_at is None, "the wait owns the timer: none, it waits for a signal"
    summary = requester.get("/executions/summary").json()
    assert summary["by_reason"]["no_worker"] == 0 and summary["by_status"]["waiting"] == 1

    # And the wait still works: the signal wakes it once and it completes.
    assert requester.signal(ref, "shipment_confirmed", {"tracking": "TRK-1"}).status_code == 202
    wait_status(requester, ref, "completed")
    wakes = ExecutionEvent.objects.filter(execution=execution, type="transition", payload__transition="wake")
    assert wakes.count() == 1


def test_an_agent_step_retried_before_it_parks_at_its_approval_keeps_no_timer(stack, people, api_as):
    stack.up()
    requester = api_as(people["requester"])
    add_fault(stack, endpoint="/tickets/{id}", fault="error_500", count=1)  # get_ticket fails once: a retry
    started = requester.post("/executions", {"workflow": "support_agent", "input": {"ticket": "TCK-1001"}})
    assert started.status_code == 201, started.text
    ref = started.json()["id"]
    parked = wait_status(requester, ref, "awaiting_approval", timeout=60)
    execution = Execution.objects.get(pk=pk(ref))
    assert ExecutionEvent.objects.filter(execution=execution, type="transition", payload__transition="retry").exists()
    assert execution.due_at is None and parked["due_at"] is None


def test_the_upgrade_clears_the_timers_parked_executions_were_left_with(people):
    """The data migration stops executions already caught in the loop: a waiting or
    awaiting_approval execution's due_at is a retry's leftover (no gate sets one yet)."""
    import importlib

    from django.apps import apps
    from django.utils import timezone

    migration = importlib.import_module("executions.migrations.0019_clear_stale_gate_timers")
    user = people["requester"].user
    rows = {}
    for status in ("waiting", "awaiting_approval", "retry_pending"):
        execution = Execution.objects.create(
            workflow="replacement_order", workflow_version=2, input={}, input_digest="x", created_by=user
        )
        Execution.objects.filter(pk=execution.pk).update(status=status, due_at=timezone.now())
        rows[status] = execution.pk
    migration.clear(apps, None)
    due = dict(Execution.objects.filter(pk__in=rows.values()).values_list("status", "due_at"))
    assert due["waiting"] is None and due["awaiting_approval"] is None
    assert due["retry_pending"] is not None, "a retry keeps its due time"
