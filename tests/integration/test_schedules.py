"""Issue 22 (item 6), in-process: schedules over the API — who may, the refusals (422
naming the cron expression, the time zone, the workflow, the overlap policy), the
workflow's own input from the firing time (monthly_report: the month before), one
execution per firing however often the tick runs, the overlap policy, delete. Beat
restarted across a firing on real processes: tests/scenarios/test_schedules.py (S42)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.test import Client

from executions.models import Execution
from schedules import services
from schedules.models import Schedule
from workflows.monthly_report import month_before


def client(person) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {person.token}")


def create(person, **body) -> tuple[int, dict]:
    response = client(person).post("/api/schedules", body, content_type="application/json")
    return response.status_code, response.json()


def loc(body: dict) -> list:
    return body["detail"][0]["loc"]


def test_monthly_report_fills_the_month_before_the_firing():
    assert month_before(datetime(2026, 9, 1, tzinfo=UTC)) == {"month": "2026-08"}
    assert month_before(datetime(2027, 1, 1, tzinfo=UTC)) == {"month": "2026-12"}


def test_create_list_delete_and_the_refusals(people):
    operator = people["operator"]
    assert create(people["manager"], workflow="monthly_report", cron="0 6 1 * *")[0] == 403
    for body, field in [
        ({"workflow": "monthly_report", "cron": "every monday"}, "cron"),
        ({"workflow": "monthly_report", "cron": "61 * * * *"}, "cron"),
        ({"workflow": "monthly_report", "cron": "0 0 31 2 *"}, "cron"),  # never fires
        ({"workflow": "monthly_report", "cron": "0 6 1 * *", "timezone": "Mars/Olympus"}, "timezone"),
        ({"workflow": "no_such_flow", "cron": "0 6 1 * *"}, "workflow"),
        ({"workflow": "monthly_report", "cron": "0 6 1 * *", "overlap": "sometimes"}, "overlap"),
    ]:
        status, answer = create(operator, **body)
        assert status == 422 and loc(answer) == ["body", field], (body, answer)
    assert not Schedule.objects.exists()

    status, made = create(operator, workflow="monthly_report", cron="0 6 1 * *", timezone="Europe/Paris")
    assert status == 201, made
    assert made["overlap"] == "skip" and made["created_by"] == "operator" and made["firings"] == []
    assert datetime.fromisoformat(made["next_fire_at"]).astimezone(UTC).hour in (4, 5)  # 06:00 in Paris
    listed = client(operator).get("/api/schedules").json()["items"]
    assert [s["id"] for s in listed] == [made["id"]]
    assert client(people["requester"]).get("/api/schedules").status_code == 403

    deleted = client(operator).delete(f"/api/schedules/{made['id']}")
    assert deleted.status_code == 200 and deleted.json()["deleted"] is True
    assert client(operator).delete(f"/api/schedules/{made['id']}").status_code == 404
    assert client(operator).get("/api/schedules").json()["items"] == []


def test_one_execution_per_firing_however_often_it_ticks_and_the_overlap_policy(people):
    user = people["operator"].user
    hourly = services.schedule_create(
        user=user, workflow="monthly_report", cron="0 * * * *", input={"month": "2026-08"}
    )
    t0 = hourly.next_fire_at  # on the hour
    assert services.fire_due(now=t0 - timedelta(seconds=1)) == []  # not yet
    [first] = services.fire_due(now=t0 + timedelta(seconds=5))
    assert first.outcome == "started" and first.fire_at == t0 and first.execution.input["month"] == "2026-08"
    assert first.execution.idempotency_key == services.idempotency_key(hourly, t0)
    assert services.fire_due(now=t0 + timedelta(seconds=6)) == []  # fired: not due before the next hour
    # The same firing fired again (a second beat, a repeated tick): the same firing, no new execution.
    Schedule.objects.filter(pk=hourly.pk).update(next_fire_at=t0)
    [again] = services.fire_due(now=t0 + timedelta(seconds=7))
    assert again.pk == first.pk and Execution.objects.count() == 1
    # Beat down across two firings: the latest one fires once, at the next tick.
    later = t0 + timedelta(hours=2, minutes=10)
    [skipped] = services.fire_due(now=later)  # the first execution is still live (pending): overlap "skip"
    assert skipped.outcome == "skipped" and skipped.fire_at == t0 + timedelta(hours=2)
    assert first.execution.ref in skipped.detail and Execution.objects.count() == 1

    allow = services.schedule_create(user=user, workflow="monthly_report", cron="0 * * * *", overlap="allow")
    t1 = allow.next_fire_at
    Schedule.objects.filter(pk=hourly.pk).update(deleted_at=t1)
    [refused] = services.fire_due(now=t1)  # the month before now is outside the snapshot: refused, named
    assert refused.outcome == "refused" and refused.detail.startswith("input.month")
    Schedule.objects.filter(pk=allow.pk).update(input={"month": "2026-07"})
    [started] = services.fire_due(now=t1 + timedelta(hours=1))
    assert started.outcome == "started" and started.execution.input["month"] == "2026-07"
