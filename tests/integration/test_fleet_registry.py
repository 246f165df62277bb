"""Issue 24 without worker processes: the routing table (RUNTIME_QUEUES), the sweeper
ringing each execution on its own queue (real Redis), the heartbeat's one write per
interval (real PostgreSQL, the real thread), GET /api/workers and the Workers page."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from config.settings import _runtime_queues
from executions.engine import routing, runner, sweeper
from executions.models import Execution
from executions.services import execution_start
from fleet import heartbeat, registry
from fleet.models import Worker

ROUTES = {
    "agents": ["kind:model", "kind:agent"],
    "reports": ["workflow:replacement_order"],
    "effects": ["step:monthly_report.publish"],
}


def test_the_most_specific_selector_wins_and_the_rest_stays_on_the_default_queue(settings):
    settings.RUNTIME_QUEUES = ROUTES
    assert routing.queue_for("monthly_report", 1, "analyze") == "agents"  # kind
    assert routing.queue_for("monthly_report", 1, "publish") == "effects"  # step
    assert routing.queue_for("monthly_report", 1, "retrieve_figures") == "celery"
    assert routing.queue_for("replacement_order", 1, "propose_replacement") == "reports"  # workflow, whatever the kind
    assert routing.queue_for("no_such_workflow", 1, "x") == "celery"  # undeployed: a default worker flags it
    assert routing.routed_queues() == ["agents", "celery", "control", "effects", "reports"]
    settings.RUNTIME_QUEUES = {}
    assert routing.queue_for("monthly_report", 1, "analyze") == "celery"


@pytest.mark.parametrize(
    "raw, says",
    [
        ("{", "not JSON"),
        ('["agents"]', "must map queue names"),
        ('{"agents": "kind:model"}', "must map queue names"),
        ('{"control": ["kind:model"]}', "control queue"),
    ],
)
def test_a_malformed_runtime_queues_stops_the_start_naming_why(raw, says):
    with pytest.raises(ImproperlyConfigured, match=says):
        _runtime_queues(raw)


def test_a_selector_of_no_known_form_or_routed_twice_is_refused(settings):
    settings.RUNTIME_QUEUES = {"agents": ["model"]}
    with pytest.raises(ImproperlyConfigured, match="is not kind:"):
        routing.routes()
    settings.RUNTIME_QUEUES = {"a": ["kind:model"], "b": ["kind:model"]}
    with pytest.raises(ImproperlyConfigured, match="two queues"):
        routing.routes()


def test_the_doorbell_and_the_sweeper_ring_each_execution_on_its_own_queue(transactional_db, people, settings):
    settings.RUNTIME_QUEUES = {"firsts": ["step:monthly_report.retrieve_figures"]}
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.flushdb()
    mine, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"})
    other, _ = execution_start(
        user=people["requester"].user, workflow="replacement_order", input={"original_order": "ORD-1001"}
    )
    assert broker.llen("firsts") == 1 and broker.llen("celery") == 1  # the start's doorbell
    broker.flushdb()
    Execution.objects.filter(pk__in=[mine.pk, other.pk]).update(dispatched_at=None)
    assert set(sweeper.sweep().dispatched) == {mine.pk, other.pk}
    assert broker.llen("firsts") == 1 and broker.llen("celery") == 1 and broker.llen("control") == 0
    assert str(mine.pk).encode() in broker.lindex("firsts", 0)


def test_a_message_left_on_another_queue_rings_the_step_s_own_queue_and_claims_nothing(
    transactional_db, people, settings
):
    """A sweep's re-dispatch of a step that has since moved on (S48 in CI: the rescuer on
    ``agents`` took a stale message and ran the next, ``celery``, step): a worker that
    doesn't consume the step's queue leaves it alone and rings the right one."""
    settings.RUNTIME_QUEUES = {"firsts": ["step:monthly_report.retrieve_figures"]}
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    execution, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"})
    broker.flushdb()
    assert runner.advance(execution.pk, worker="worker:test", queues=frozenset({"celery", "control"})) == "misrouted"
    row = Execution.objects.get(pk=execution.pk)
    assert row.status == "pending" and row.lease_token == execution.lease_token and not row.lease_owner
    assert broker.llen("firsts") == 1 and broker.llen("celery") == 0
    assert runner.advance(execution.pk, worker="worker:test", queues=frozenset({"firsts"})) == "sliced"
    assert Execution.objects.get(pk=execution.pk).current_step == "analyze"


def test_one_row_per_worker_and_at_most_one_write_per_heartbeat_interval(transactional_db, settings):
    settings.RUNTIME_WORKER_HEARTBEAT_SECONDS = 0.2
    beating = heartbeat.Heartbeat("w1@host-a", ["celery", "control"])
    started = time.monotonic()
    beating.start()
    time.sleep(1.1)
    beating.halt.set()
    beating.join(timeout=5)
    elapsed = time.monotonic() - started
    [row] = Worker.objects.all()
    assert 3 <= row.beats <= 1 + elapsed / 0.2, row.beats  # the first at once, then one per interval
    assert row.last_seen > row.started_at and row.queues == ["celery", "control"]
    assert not beating.is_alive() and threading.active_count() >= 1


def test_the_registry_says_alive_stale_held_and_unconsumed(transactional_db, people, settings):
    settings.RUNTIME_QUEUES = ROUTES
    heartbeat.beat("w1@a", ["celery", "control"], host="a", pid=11)
    heartbeat.beat("w2@b", ["agents"], host="b", pid=22)
    heartbeat.beat("old@c", ["legacy"], host="c", pid=33)  # a queue nothing is routed to
    heartbeat.stopped("w2@b")
    execution, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"})
    Execution.objects.filter(pk=execution.pk).update(
        status="running", lease_owner="worker:a:11:abc123", lease_expires_at="2100-01-01T00:00:00Z", lease_token=1
    )
    fleet = registry.fleet()
    seen = {w.identity: w for w in fleet.workers}
    assert seen["w1@a"].alive and seen["w1@a"].executions == [execution.pk]
    assert not seen["w2@b"].alive and seen["w2@b"].executions == []
    assert seen["old@c"].idle_queues == ["legacy"]
    assert set(fleet.unconsumed) == {"agents", "effects", "reports"}
    assert registry.live_queues() == {"celery", "control", "legacy"}

    operator, requester = Client(), Client()
    operator.force_login(people["operator"].user)
    requester.force_login(people["requester"].user)
    assert requester.get("/api/workers").status_code == 403
    assert requester.get("/dashboard/workers/").status_code == 403
    body = operator.get("/api/workers").json()
    assert [w["identity"] for w in body["items"]] == ["old@c", "w1@a", "w2@b"]  # alive first
    first = next(w for w in body["items"] if w["identity"] == "w1@a")
    assert set(first) == {
        *("identity", "node", "host", "pid", "queues", "started_at", "last_seen", "executions", "alive", "tasks")
    }
    assert first["node"] == "w1@a" and first["tasks"] is None  # beaten without a tally: not counted
    assert first["executions"] == [execution.ref] and first["host"] == "a" and first["pid"] == 11
    assert {q["name"]: q["consumers"] for q in body["queues"]}["agents"] == 0

    page = operator.get("/dashboard/workers/").content.decode()
    assert f'href="/executions/{execution.ref}/"' in page
    old = page.split('data-identity="old@c"')[1].split("</tr>")[0]
    assert "idle" in old and "nothing routed here" in old
    assert "stale" in page.split('data-identity="w2@b"')[1].split("</tr>")[0]
    assert "shut down" in page.split('data-identity="w2@b"')[1].split("</tr>")[0]  # issue 39: why it is stale
    assert 'id="unconsumed"' in page and 'id="nav-workers"' in page


def test_a_worker_unseen_past_the_forget_time_ages_out(transactional_db, settings):
    heartbeat.beat("gone@x", ["celery"], host="x", pid=1)
    Worker.objects.update(last_seen="2000-01-01T00:00:00Z")
    assert registry.fleet().workers == []
