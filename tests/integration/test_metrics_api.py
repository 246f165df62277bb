"""Issue 8: who may read the measures (401/403), bad windows (422), and queries whose
number does not grow with the number of executions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from executions.models import Action, Execution, ExecutionEvent, Status, StepRun
from tests.support.records import approved_execution
from tests.support.scraping import TOKEN, bearer, queries


@pytest.fixture
def scrape_token(settings):
    settings.RUNTIME_METRICS_TOKEN = TOKEN
    return TOKEN


def test_who_may_scrape_metrics(people, scrape_token):
    client = Client()
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics").headers["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION="Basic abc").status_code == 401
    assert client.get("/metrics", **bearer("not-a-token")).status_code == 401
    assert client.get("/metrics", **bearer(TOKEN + "x")).status_code == 401
    for name in ("requester", "manager", "outsider"):
        answer = client.get("/metrics", **bearer(people[name].token))
        assert answer.status_code == 403, name
        assert answer.headers["Content-Type"].startswith("text/plain")
    for token in (people["operator"].token, people["auditor"].token, TOKEN):
        answer = client.get("/metrics", **bearer(token))
        assert answer.status_code == 200
        assert b"# TYPE keel_executions gauge" in answer.content
    # A session is not a scrape credential, even an operator's.
    client.force_login(people["operator"].user)
    assert client.get("/metrics").status_code == 401


def test_no_metrics_token_configured_lets_no_empty_bearer_in(people, settings):
    settings.RUNTIME_METRICS_TOKEN = ""
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401


def test_every_family_is_declared_on_an_empty_record(people, scrape_token):
    text = Client().get("/metrics", **bearer(TOKEN)).content.decode()
    for family, kind in [
        ("keel_executions", "gauge"),
        ("keel_stuck_executions", "gauge"),
        ("keel_actions", "gauge"),
        ("keel_notifications", "gauge"),
        ("keel_cancellation_violations", "gauge"),
        ("keel_step_duration_seconds", "histogram"),
        ("keel_resume_latency_seconds", "histogram"),
    ]:
        assert f"# TYPE {family} {kind}" in text
    for channel in ("email", "webhook"):  # issue 22: sent and failed (and unknown, pending), from the ledger
        for outcome in ("sent", "failed", "unknown", "pending"):
            assert f'keel_notifications{{channel="{channel}",outcome="{outcome}"}} 0.0' in text
    for status in Status.values:  # every status, terminal included, for each workflow
        assert f'keel_executions{{status="{status}",workflow="monthly_report"}} 0.0' in text


def test_who_may_read_the_measures(people):
    client = Client()
    assert client.get("/api/metrics?window=24h").status_code == 401
    for name in ("requester", "outsider"):
        answer = client.get("/api/metrics?window=24h", **bearer(people[name].token))
        assert answer.status_code == 403 and "detail" in answer.json()
        assert client.get("/api/metrics/history", **bearer(people[name].token)).status_code == 403
    for name in ("operator", "manager", "auditor"):
        answer = client.get("/api/metrics?window=24h", **bearer(people[name].token))
        assert answer.status_code == 200, answer.content
        assert set(answer.json()) == {
            "recovery_success_rate",
            "duplicate_effect_rate",
            "resume_latency_ms",
            "stuck",
            "approval_integrity",
            "cancellation_violations",
            "time_in_state_seconds",
            "approval_latency_seconds",
            "cost_usd",
        }
    empty = client.get("/api/metrics", **bearer(people["manager"].token)).json()  # 24h by default
    assert empty["recovery_success_rate"] is None and empty["duplicate_effect_rate"] is None
    assert empty["resume_latency_ms"] == {"p50": None, "p95": None}


@pytest.mark.parametrize("window", ["24", "h", "0h", "1w", "24 h", "-1h", "1.5h", "24H", "99999d", "367d", "24h\x00"])
def test_a_window_other_than_n_hours_or_days_is_422_naming_it(people, window):
    for path in ("/api/metrics", "/api/metrics/history"):
        answer = Client().get(path, {"window": window}, **bearer(people["operator"].token))
        assert answer.status_code == 422, (path, window, answer.content)
        assert answer.json()["detail"][0]["loc"][-1] == "window"


@pytest.mark.parametrize("window", ["1h", "24h", "7d", "366d"])
def test_windows_in_hours_or_days_are_accepted(people, window):
    answer = Client().get("/api/metrics/history", {"window": window}, **bearer(people["operator"].token))
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert len(body["buckets"]) <= 61 and body["interval_seconds"] >= 60
    assert set(body["executions"]) == {"started", "completed", "failed", "cancelled"}


def test_the_metrics_page_is_for_operators_managers_and_auditors(people):
    client = Client()
    assert client.get("/dashboard/metrics/").status_code == 302  # to the login page
    for name, allowed in [("operator", True), ("manager", True), ("auditor", True), ("requester", False)]:
        client.force_login(people[name].user)
        page = client.get("/dashboard/metrics/", follow=True)
        assert page.status_code == (200 if allowed else 403), name
        listed = client.get("/")
        assert (b'href="/dashboard/metrics/"' in listed.content) is allowed, name
    client.force_login(people["operator"].user)
    page = client.get("/dashboard/metrics/", {"window": "2w", "workflow": "nope\x00"}, follow=True)
    assert page.status_code == 200 and page.redirect_chain == [("/dashboard/metrics/?window=24h", 302)]
    assert "There is no window" in page.text and "No workflow" in page.text
    assert 'data-window="24h"' in page.text and 'data-workflow=""' in page.text
    # Issue 17: the URL always carries the window the page shows, so it can be bookmarked and shared.
    assert client.get("/dashboard/metrics/")["Location"] == "/dashboard/metrics/?window=24h"
    shown = client.get("/dashboard/metrics/", {"window": "7d", "workflow": "monthly_report"})
    assert shown.status_code == 200 and 'data-window="7d"' in shown.text


# --- the cost of the queries


def make_history(people, n: int) -> None:
    """``n`` finished executions with the rows a real run leaves: events (a takeover, a
    decision, transitions), step runs, a reconciled action, an approval. Written in bulk:
    this measures queries, not the runtime."""
    requester, manager = people["requester"].user, people["manager"].user
    now = timezone.now()
    for i in range(n):
        with transaction.atomic():
            _one(requester, manager, started=now - timedelta(minutes=30, seconds=i), i=i)


def _one(requester, manager, *, started, i: int) -> None:
    execution, request, _ = approved_execution(requester, manager, i)
    key = f"{execution.ref}:publish:v1"
    Action.objects.create(
        key=key, execution=execution, step="publish", type="publish_report", attempts=1, gate_ref=request.gate_ref
    )
    e = {"execution": execution}
    ExecutionEvent.objects.bulk_create(
        [
            ExecutionEvent(**e, type="execution.created", to_status="pending"),
            ExecutionEvent(**e, type="transition", from_status="pending", to_status="running"),
            ExecutionEvent(**e, type="lease.taken_over"),
            ExecutionEvent(**e, type="transition", from_status="running", to_status="awaiting_approval"),
            ExecutionEvent(**e, type="approval.decided", payload={"decision": "approve"}),
            ExecutionEvent(**e, type="transition", from_status="awaiting_approval", to_status="running"),
            ExecutionEvent(**e, type="action.executing", payload={"key": key, "from": "approved"}),
            ExecutionEvent(**e, type="action.succeeded", payload={"key": key, "reconciled": True}),
            ExecutionEvent(**e, type="transition", from_status="running", to_status="completed"),
        ]
    )
    Execution.objects.filter(pk=execution.pk).update(status=Status.COMPLETED)  # what its last event says
    StepRun.objects.bulk_create(
        [
            StepRun(
                execution=execution,
                step=step,
                kind=kind,
                outcome="succeeded",
                lease_token=1,
                workflow_version=1,
                started_at=started,
            )
            for step, kind in (("analyze", "model"), ("review", "approval"), ("publish", "effect"))
        ]
    )


def test_the_query_count_does_not_grow_with_the_number_of_executions(people, scrape_token):
    client, operator = Client(), people["operator"].token
    paths = ("/api/metrics?window=24h", "/api/metrics/history?window=24h", "/metrics")
    make_history(people, 3)
    small = {path: queries(client, path, TOKEN if path == "/metrics" else operator) for path in paths}
    make_history(people, 30)
    large = {path: queries(client, path, TOKEN if path == "/metrics" else operator) for path in paths}
    assert small == large, (small, large)
    body = client.get(paths[0], **bearer(operator)).json()
    assert body["recovery_success_rate"] == 1.0 and body["duplicate_effect_rate"] == 1.0  # the history is measured
    assert body["approval_integrity"]["matched"] == 33
