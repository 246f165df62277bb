"""Issue 24, many machines: steps routed to queues by kind of work, the worker registry
(GET /api/workers, the Workers page) and ``no_worker`` naming the queue nobody consumes
— on real worker processes, one killed with SIGKILL."""

from __future__ import annotations

import json
import socket

import pytest
from django.test import Client

from executions.models import StepRun
from tests.support.stack import pk, wait_for, wait_status

# Model and agent steps on their own queue; everything else on ``celery``.
QUEUES = json.dumps({"agents": ["kind:model", "kind:agent"]})
ENV = {
    "RUNTIME_QUEUES": QUEUES,
    "RUNTIME_STUCK_SECONDS": "2",
    "RUNTIME_WORKER_HEARTBEAT_SECONDS": "0.3",
    "RUNTIME_WORKER_STALE_SECONDS": "1.5",
}


def workers(api) -> dict:
    answer = api.get("/workers")
    assert answer.status_code == 200, answer.text
    return answer.json()


def by_name(body: dict, name: str) -> dict | None:
    return next((w for w in body["items"] if w["identity"].startswith(f"{name}-")), None)


def consumers(body: dict, queue: str) -> int:
    return next(q["consumers"] for q in body["queues"] if q["name"] == queue)


@pytest.mark.own_stack
def test_s48_the_only_agents_worker_dies_no_worker_names_the_queue_and_a_new_one_finishes(
    stack, people, api_as, settings
):
    """S48: model steps go to ``agents``; its only worker dies (SIGKILL) holding an
    execution → the Workers API and page show it stale, ``no_worker``'s detail names the
    queue; a new worker on ``agents`` finishes the step; the other steps ran on ``celery``."""
    stack.up(workers=0, **ENV)
    with stack.together():
        main = stack.worker("main", queues="celery,control", **ENV)
        doomed = stack.worker("agents1", queues="agents", RUNTIME_FAILPOINTS="before_step:analyze=pause", **ENV)
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    assert requester.get("/workers").status_code == 403

    ref = requester.start("2026-03")["id"]
    wait_for(lambda: stack.failpoint_reached("before_step:analyze"), timeout=30, what="agents1 at the model step")
    held = wait_for(
        lambda: (w := by_name(workers(operator), "agents1")) and ref in w["executions"] and w, timeout=10, what="held"
    )
    assert held["alive"] and held["queues"] == ["agents"] and held["pid"] == doomed.pid
    assert held["host"] == socket.gethostname() and held["started_at"] <= held["last_seen"]
    body = workers(operator)
    assert by_name(body, "main")["queues"] == ["celery", "control"] and by_name(body, "main")["alive"]
    assert consumers(body, "agents") == 1 and consumers(body, "control") == 1

    doomed.kill()
    stale = wait_for(lambda: (b := workers(operator)) and not by_name(b, "agents1")["alive"] and b, timeout=10)
    assert consumers(stale, "agents") == 0 and consumers(stale, "celery") == 1
    stuck = wait_for(
        lambda: (e := operator.execution(ref))["stuck"] and e["stuck"]["reason"] == "no_worker" and e["stuck"],
        timeout=30,
        what=f"{ref} no_worker",
    )
    assert "no live worker consumes the queue 'agents'" in stuck["detail"], stuck

    # This process renders the page: the stack's routes and threshold.
    settings.RUNTIME_QUEUES, settings.RUNTIME_WORKER_STALE_SECONDS = json.loads(QUEUES), 1.5
    client = Client()
    client.force_login(people["operator"].user)
    page = client.get("/dashboard/workers/").content.decode()
    assert 'id="unconsumed"' in page and '<strong class="queue">agents</strong>' in page
    assert f'data-identity="{by_name(stale, "agents1")["identity"]}"' in page
    row = page.split(f'data-identity="{by_name(stale, "agents1")["identity"]}"')[1].split("</tr>")[0]
    assert "stale" in row and "nothing" in row

    rescuer = stack.worker("agents2", queues="agents", **ENV)
    wait_status(operator, ref, "awaiting_approval", timeout=40)
    done = StepRun.objects.filter(execution_id=pk(ref), outcome=StepRun.Outcome.SUCCEEDED)
    runs = dict(done.values_list("step", "worker"))
    assert runs["analyze"].startswith(f"worker:{socket.gethostname()}:{rescuer.pid}:"), runs
    for step in ("retrieve_figures", "draft_report"):
        assert runs[step].startswith(f"worker:{socket.gethostname()}:{main.pid}:"), runs
    assert (operator.execution(ref)["stuck"] or {}).get("reason") != "no_worker"
    assert consumers(workers(operator), "agents") == 1
