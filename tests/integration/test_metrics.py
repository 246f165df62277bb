"""Issue 8: the seeds' measures, checked against a known history built by real runs —
PostgreSQL, Redis, Celery workers (one SIGKILLed), beat, gunicorn and the sandbox with
its faults — and ``/metrics`` parsed with prometheus-client's parser and compared with
the API. Worker log lines carry the slice (plain and JSON)."""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from datetime import datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from approvals.models import Decision
from approvals.services import supersede_older
from artifacts import store
from artifacts.services import artifact_version_create
from executions.models import Action, Execution, ExecutionEvent, Status, StepRun
from metrics import prometheus, rollup
from metrics.measures import measures
from metrics.windows import Window
from tests.support.procs import http, wait_for
from tests.support.stack import pk, wait_status

SCRAPE_TOKEN = "scrape-secret-for-tests"
SLOW_PUBLISH = "before_step:publish=sleep:4,before_effect_call:publish=sleep:4"


def fault(stack, **spec) -> None:
    assert http().post(f"{stack.sandbox_url}/_faults", json=spec, timeout=5).status_code == 201


def percentile(values: list[float], fraction: float) -> float | None:
    """PostgreSQL's percentile_cont, written out: linear interpolation between ranks."""
    if not values:
        return None
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def approve_after(api_as, people, ref: str, seconds: float) -> None:
    """The manager takes ``seconds`` to decide (the approval latency is at least that)."""
    approval = wait_status(api_as(people["requester"]), ref, "awaiting_approval")["pending_approval"]
    time.sleep(seconds)
    assert api_as(people["manager"]).decide(ref, approval).status_code == 202


def expected_from_the_record(refs: list[str]) -> dict:
    """The latencies and stays of ``refs``, computed here in Python from the raw rows."""
    ids = [pk(r) for r in refs]
    events = list(ExecutionEvent.objects.filter(execution_id__in=ids).order_by("id"))
    runs = list(StepRun.objects.filter(execution_id__in=ids))
    resumes = []
    for e in events:
        decided = e.type == "approval.decided" and e.payload["decision"] in ("approve", "request_changes")
        if decided or e.type == "wait.received":
            started = [r.started_at for r in runs if r.execution_id == e.execution_id and r.started_at >= e.created_at]
            if started:
                resumes.append((min(started) - e.created_at).total_seconds())
    stays = defaultdict(list)
    entered = {}
    for e in events:
        if e.type == "transition":  # the stay it ends began when recorded, or at the previous status event
            began = e.payload.get("entered_at")
            began = datetime.fromisoformat(began) if began else entered[e.execution_id]
            stays[e.from_status].append((e.created_at - began).total_seconds())
        if e.to_status:
            entered[e.execution_id] = e.created_at
    decisions = [
        (d.created_at - d.request.created_at).total_seconds()
        for d in Decision.objects.filter(request__execution_id__in=ids).select_related("request")
    ]
    return {"resumes": resumes, "stays": stays, "decisions": decisions}


def close(actual: float | None, expected: float | None) -> bool:
    """Within the rollup's resolution: a duration's bucket is at most 10 % wide."""
    if actual is None or expected is None:
        return actual is expected
    return abs(actual - expected) <= 0.1 * abs(expected) + 1e-3


@pytest.mark.own_stack
def test_each_measure_against_a_known_history_of_real_runs(stack, people, api_as):
    began = timezone.now()
    failpoint = {"RUNTIME_FAILPOINTS": "before_step:draft_report=pause"}
    # 1. Recovery: the worker is SIGKILLed after analyze; the survivor takes over and it completes.
    doomed = stack.up(workers=("doomed",), worker_env=failpoint, web_env={"RUNTIME_METRICS_TOKEN": SCRAPE_TOKEN}).worker
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    recovered = requester.start("2026-05")["id"]
    wait_for(lambda: stack.failpoint_reached("before_step:draft_report"), what="the worker to reach draft_report")
    doomed.kill()
    survivor = stack.worker("survivor")
    approve_after(api_as, people, recovered, 1.2)
    wait_status(requester, recovered, "completed")
    assert ExecutionEvent.objects.filter(execution_id=pk(recovered), type="lease.taken_over").exists()

    # 2. A duplicate averted: the report service commits the publication, then hangs past
    #    our timeout; the reconciliation finds the publication and never sends it again.
    reconciled = requester.start("2026-06")["id"]
    fault(stack, endpoint="/reports/publish", fault="commit_then_hang", count=1, hang_seconds=6)
    approve_after(api_as, people, reconciled, 1.0)
    wait_status(requester, reconciled, "completed", timeout=60)
    assert stack.sandbox_stats()["keys"][f"{reconciled}:publish:v1"]["effects"] == 1

    # 3. A replacement order: approved, then waits for the shipment signal, then completes.
    answer = requester.post("/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-1001"}})
    assert answer.status_code == 201, answer.text
    signalled = answer.json()["id"]
    approve_after(api_as, people, signalled, 1.0)
    wait_status(requester, signalled, "waiting")
    time.sleep(0.5)
    assert requester.signal(signalled, "shipment_confirmed", {"tracking": "TRK-1"}).status_code == 202
    wait_status(requester, signalled, "completed")

    # A slow publisher from here on, writing JSON logs.
    survivor.kill()
    slow = stack.worker("slow", RUNTIME_FAILPOINTS=SLOW_PUBLISH, KEEL_LOG_FORMAT="json")

    # 4. Approval integrity: the report is edited after its approval; the effect is refused.
    refused = requester.start("2026-07")["id"]
    approve_after(api_as, people, refused, 1.0)
    wait_for(lambda: stack.failpoint_reached("before_step:publish"), what="the worker to be about to publish")
    with transaction.atomic():
        edited = artifact_version_create(
            execution=Execution.objects.get(pk=pk(refused)),
            kind="report",
            title="edited",
            blob=store.put(b"# edited after the approval\n"),
            content_type="text/markdown",
            step="manual_edit",
        )
        supersede_older(edited, actor_label="test")
    wait_status(requester, refused, "needs_attention")

    # 5. A cancel during an effect: the publish is committed as executing, then cancelled
    #    while the call is about to leave; its receipt is still recorded, nothing starts after.
    cancelled = requester.start("2026-08")["id"]
    approve_after(api_as, people, cancelled, 1.0)
    wait_for(lambda: stack.failpoint_reached("before_effect_call:publish"), what="the publish to be in flight")
    assert operator.post(f"/executions/{cancelled}/cancel", {"reason": "wrong month"}).status_code == 200
    publish = f"{cancelled}:publish:v1"
    wait_for(lambda: Action.objects.get(key=publish).status == Action.State.SUCCEEDED, what="the receipt")
    assert requester.execution(cancelled)["status"] == "cancelled"

    refs = [recovered, reconciled, signalled, refused, cancelled]
    # E-mails and webhooks (on, as in production) are effects too, sent beside the steps: let them land.
    beside_in_flight = Action.objects.filter(beside=True, status__in=[Action.State.APPROVED, Action.State.EXECUTING])
    wait_for(lambda: not beside_in_flight.exists(), timeout=30, what="the notifications to be sent")
    got = operator.get("/metrics?window=1h")
    assert got.status_code == 200, got.text
    body = got.json()

    assert body["recovery_success_rate"] == 1.0  # one takeover, and it completed
    # Effects first sent: publish+notify ×2, submit_order+confirm, the cancelled publish.
    sent = {
        f"{recovered}:publish:v1",
        f"{recovered}:notify:v1",
        f"{reconciled}:publish:v1",
        f"{reconciled}:notify:v1",
        f"{signalled}:submit_order:v1",
        f"{signalled}:confirm:v1",
        publish,
    }
    assert set(Action.objects.filter(attempts__gte=1, beside=False).values_list("key", flat=True)) == sent
    told = Action.objects.filter(attempts__gte=1, beside=True)
    assert {a.type for a in told} >= {"webhook", "notify_approver"}  # production's defaults, tested
    all_sent = len(sent) + told.count()
    assert body["duplicate_effect_rate"] == round(1 / all_sent, 4)  # the reconciled publication
    # Only the effects a gate guards: never the approval e-mails and webhooks (approved from birth).
    assert body["approval_integrity"] == {"matched": 4, "refused": 1}
    assert body["cancellation_violations"] == 0  # the cancel's own webhook is no violation
    assert body["stuck"] == operator.get("/executions/summary").json()["by_reason"]
    assert body["stuck"]["permission_denied"] == 1 and sum(body["stuck"].values()) == 1

    expected = expected_from_the_record(refs)
    assert len(expected["resumes"]) == 6  # five approvals and one signal
    for q, f in (("p50", 0.5), ("p95", 0.95)):
        assert close(body["resume_latency_ms"][q], percentile(expected["resumes"], f) * 1000), q
        assert close(body["approval_latency_seconds"][q], percentile(expected["decisions"], f)), q
        for status, stays in body["time_in_state_seconds"].items():
            assert close(stays[q], percentile(expected["stays"].get(status, []), f)), (status, q)
    assert body["approval_latency_seconds"]["p50"] >= 1.0
    assert body["time_in_state_seconds"]["awaiting_approval"]["p50"] >= 1.0
    assert body["time_in_state_seconds"]["waiting"]["p50"] >= 0.5

    # The window is honoured: nothing of this happened in the hour before it began.
    before = measures(Window(until=began, length=timedelta(hours=1)))
    assert before["recovery_success_rate"] is None and before["duplicate_effect_rate"] is None
    assert before["approval_integrity"] == {"matched": 0, "refused": 0}
    # ... and the workflow filter: the replacement order alone sent two effects, no duplicate.
    only = operator.get("/metrics?window=1h&workflow=replacement_order").json()
    assert only["duplicate_effect_rate"] == 0.0 and only["approval_integrity"] == {"matched": 1, "refused": 0}
    assert only["recovery_success_rate"] is None

    # /metrics, parsed with prometheus-client's own parser, agrees with the API.
    scraped = http(SCRAPE_TOKEN).get(f"{stack.web_url}/metrics", timeout=15)
    assert scraped.status_code == 200 and scraped.headers["Content-Type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(scraped.text)}
    for name, kind in [
        ("keel_executions", "gauge"),
        ("keel_stuck_executions", "gauge"),
        ("keel_actions", "gauge"),
        ("keel_cancellation_violations", "gauge"),
        ("keel_step_duration_seconds", "histogram"),
        ("keel_resume_latency_seconds", "histogram"),
    ]:
        assert families[name].type == kind, name
    stuck = {s.labels["reason"]: s.value for s in families["keel_stuck_executions"].samples}
    assert stuck == body["stuck"]
    by_status = defaultdict(float)
    for s in families["keel_executions"].samples:
        by_status[s.labels["status"]] += s.value
    assert by_status == operator.get("/executions/summary").json()["by_status"]
    assert by_status["completed"] == 3 and by_status["cancelled"] == 1 and by_status["needs_attention"] == 1
    actions = {s.labels["status"]: s.value for s in families["keel_actions"].samples}
    assert actions == {state: Action.objects.filter(status=state).count() for state in Action.State.values}
    assert families["keel_cancellation_violations"].samples[0].value == body["cancellation_violations"] == 0
    resume = {s.name: s.value for s in families["keel_resume_latency_seconds"].samples if not s.labels.get("le")}
    assert resume["keel_resume_latency_seconds_count"] == 6
    assert math.isclose(resume["keel_resume_latency_seconds_sum"], sum(expected["resumes"]), abs_tol=0.01)
    steps = families["keel_step_duration_seconds"].samples
    counted = sum(s.value for s in steps if s.name.endswith("_count"))
    assert counted == StepRun.objects.count()
    kinds = {(s.labels["workflow"], s.labels["kind"]) for s in steps}
    assert {("monthly_report", "model"), ("monthly_report", "effect"), ("replacement_order", "wait")} <= kinds

    # Log lines name the slice: plain for the survivor, JSON for the slow worker.
    assert f"[{recovered} publish lease=" in survivor.output()
    lines = [json.loads(line) for line in slow.output().splitlines() if line.startswith("{")]
    in_slice = [line for line in lines if line.get("execution") == cancelled]
    assert in_slice, slow.output()[-2000:]
    assert {"step", "lease_token", "time", "level", "logger", "message"} <= set(in_slice[-1])
    assert any(line["step"] == "publish" for line in in_slice)


def test_an_effect_sent_after_its_execution_was_cancelled_is_a_violation(people):
    """The runtime never does this (test above): the record is written here by hand to
    show the measure counts it when it happens."""
    from executions.engine import lifecycle
    from executions.services import execution_start

    execution, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"})
    window = Window(until=timezone.now() + timedelta(minutes=1), length=timedelta(hours=1))
    assert measures(window)["cancellation_violations"] == 0
    with transaction.atomic():
        lifecycle.record(execution, "transition", from_status=Status.PENDING, to_status=Status.CANCELLED)
        lifecycle.record(execution, "action.executing", payload={"key": "k", "from": "approved", "to": "executing"})
    assert measures(window)["cancellation_violations"] == 1
    assert prometheus.cancellation_gauge().samples[0].value == 1  # the whole record, as /metrics says it
    rollup.fold_all(now=timezone.now() + timedelta(minutes=5))  # folded, it is still counted once
    assert measures(window)["cancellation_violations"] == 1
    assert prometheus.cancellation_gauge().samples[0].value == 1
