"""Issue 39, items 2 and "per-worker counters": the worker registry is per process. Two
real Celery worker processes on one host started with the same node name (``-n``) are two
workers, each with its own tally of the tasks it ran, and one frozen (SIGSTOP) goes stale
while the other stays alive — on the API and the Workers page."""

from __future__ import annotations

import os
import signal
import socket

import pytest
from django.test import Client

from executions.models import StepRun
from tests.support.stack import pk, wait_for, wait_status

ENV = {"RUNTIME_WORKER_HEARTBEAT_SECONDS": "0.3", "RUNTIME_WORKER_STALE_SECONDS": "1.5"}


def workers(api) -> list[dict]:
    answer = api.get("/workers")
    assert answer.status_code == 200, answer.text
    return answer.json()["items"]


def by_pid(items: list[dict], pid: int) -> dict | None:
    return next((w for w in items if w["pid"] == pid), None)


@pytest.mark.own_stack
def test_two_workers_with_one_node_name_are_two_and_a_frozen_one_goes_stale_alone(stack, people, api_as, settings):
    """Issue 39, item 2: two worker processes on one host under one node name (as two
    ``make run-worker`` were, both ``celery@host``) were one registry row with mixed
    details, and a frozen one never went stale. Now each process has its row: both alive,
    their pids and one node name; each counts the tasks it ran itself (the per-worker
    counters); SIGSTOP one → it alone turns stale (API and page), the other stays alive."""
    stack.up(workers=0, beat=False, **ENV)
    with stack.together():
        one = stack.worker("twin", **ENV)
        two = stack.worker("twin", **ENV)
    operator, requester = api_as(people["operator"]), api_as(people["requester"])
    both = wait_for(
        lambda: (items := workers(operator)) and sum(w["alive"] for w in items) == 2 and items,
        timeout=20,
        what="two live workers",
    )
    assert {w["pid"] for w in both} == {one.pid, two.pid}, both
    assert len({w["identity"] for w in both}) == 2 and {w["node"] for w in both} == {
        f"twin-{os.getpid()}@{socket.gethostname()}"
    }
    assert all(w["host"] == socket.gethostname() and w["tasks"]["failed"] == 0 for w in both), both

    ref = requester.start("2026-03")["id"]
    wait_status(operator, ref, "awaiting_approval", timeout=40)
    ran_by = {
        int(owner.split(":")[2])
        for owner in StepRun.objects.filter(execution_id=pk(ref)).values_list("worker", flat=True)
    }

    def tallied():  # every worker that ran a step counted at least one slice, succeeded, none running
        items = workers(operator)
        tallies = {pid: by_pid(items, pid)["tasks"] for pid in ran_by}
        return (
            all(t["ran"] >= 1 and t["succeeded"] == t["ran"] and t["running"] is None for t in tallies.values())
            and items
        )

    items = wait_for(tallied, timeout=10, what="the slices counted by the workers that ran them")
    assert sum(w["tasks"]["ran"] for w in items) >= 1 and all(w["tasks"]["failed"] == 0 for w in items)

    os.kill(one.pid, signal.SIGSTOP)  # frozen: no heartbeat, no exit, no shutdown mark
    try:
        after = wait_for(
            lambda: (items := workers(operator)) and not by_pid(items, one.pid)["alive"] and items,
            timeout=10,
            what="the frozen worker stale",
        )
        assert by_pid(after, two.pid)["alive"], after

        settings.RUNTIME_WORKER_STALE_SECONDS = 1.5  # this process renders the page
        client = Client()
        client.force_login(people["operator"].user)
        page = client.get("/dashboard/workers/").content.decode()
        frozen = page.split(f'data-pid="{one.pid}"')[1].split("</tr>")[0]
        running = page.split(f'data-pid="{two.pid}"')[1].split("</tr>")[0]
        assert (
            "stale" in frozen
            and "no heartbeat" in frozen
            and "alive" in running
            and "twin-" in frozen
            and "twin-" in running
        )
        assert "ran" in running and "succeeded" in running
    finally:
        os.kill(one.pid, signal.SIGCONT)
