"""Issue 22 (item 6), in-process: schedules over the API — who may, the refusals (422
naming the cron expression, the time zone, the workflow, the overlap policy), the
workflow's own input from the firing time (monthly_report: the month before), one
execution per firing however often the tick runs, the overlap policy, delete. Beat
restarted across a firing on real processes: tests/scenarios/test_schedules.py (S42).
Issue 38: a field the body doesn't declare and a cron firing more often than
RUNTIME_SCHEDULE_MIN_SECONDS are 422s naming them; a deactivated creator's schedule
refuses each firing on beat's real tick, and says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from accounts.tokens import api_token_create
from executions.models import Execution
from schedules import services
from schedules.models import Firing, Schedule
from tests.support.procs import http, wait_for
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


# --- issue 38 (item 9.4): unknown fields, crons firing too often, a deactivated creator


def test_a_field_the_body_does_not_declare_is_a_422_naming_it(people):
    for extra in ({"crn": "0 6 1 * *"}, {"created_by": "manager"}, {"next_fire_at": "2026-01-01T00:00:00Z"}):
        status, answer = create(people["operator"], workflow="monthly_report", cron="0 6 1 * *", **extra)
        [field] = extra
        assert status == 422 and loc(answer) == ["body", field], (extra, answer)
    assert not Schedule.objects.exists()


def test_a_cron_firing_more_often_than_the_minimum_is_a_422_naming_cron(people, settings):
    operator = people["operator"]
    for cron in ("* * * * * *", "* * * * * */30", "0,30 * * * * *", "0 * * * * 0,59"):
        status, answer = create(operator, workflow="monthly_report", cron=cron)
        assert status == 422 and loc(answer) == ["body", "cron"], (cron, answer)
        assert "at most once every 60 s" in answer["detail"][0]["msg"]
    assert not Schedule.objects.exists()
    for cron in ("* * * * *", "0 * * * * 0", "*/5 * * * *"):  # once a minute (five fields; six, second 0)
        status, answer = create(operator, workflow="monthly_report", cron=cron)
        assert status == 201, (cron, answer)
    settings.RUNTIME_SCHEDULE_MIN_SECONDS = 300
    status, answer = create(operator, workflow="monthly_report", cron="0,1 * * * *")  # a minute apart
    assert status == 422 and loc(answer) == ["body", "cron"] and "60 s apart" in answer["detail"][0]["msg"]
    assert create(operator, workflow="monthly_report", cron="*/5 * * * *")[0] == 201


def started_after(schedule_id: int, moment: datetime) -> list:
    return list(
        Firing.objects.filter(schedule_id=schedule_id, created_at__gt=moment, outcome="started").order_by("fire_at")
    )


def test_a_schedule_of_a_deactivated_creator_stops_firing_on_the_real_tick_and_says_so(stack, people, settings):
    """Beat's real tick (every 2 s here) on a real worker: the schedule fires as its creator;
    deactivated, each firing is recorded as refused naming them and starts nothing (the API,
    the CLI and the operations page say so); active again, it fires again."""
    stack.up()
    settings.RUNTIME_SCHEDULE_MIN_SECONDS = 1
    creator = people["operator"].user
    schedule = services.schedule_create(
        user=creator, workflow="monthly_report", cron="* * * * * */2", input={"month": "2026-08"}, overlap="allow"
    )
    begun = timezone.now()
    wait_for(lambda: started_after(schedule.pk, begun), timeout=30, what="a firing by the active creator")

    creator.is_active = False
    creator.save(update_fields=["is_active"])
    deactivated = timezone.now()
    refused = wait_for(
        lambda: list(Firing.objects.filter(schedule=schedule, created_at__gt=deactivated, outcome="refused")[:2])[1:],
        timeout=30,
        what="two firings refused while the creator is deactivated",
    )[0]
    assert "created_by: operator is deactivated" in refused.detail
    assert not started_after(schedule.pk, deactivated)  # nothing started since
    assert not Execution.objects.filter(created_at__gt=deactivated).exists()

    colleague = get_user_model().objects.create_user("operator2")
    colleague.groups.add(Group.objects.get(name="operators"))
    answer = http(api_token_create(user=colleague)).get(f"{stack.web_url}/api/schedules", timeout=15)
    assert answer.status_code == 200, answer.text
    [item] = answer.json()["items"]
    assert item["creator_active"] is False and item["firings"][0]["outcome"] == "refused"
    assert "is deactivated" in item["firings"][0]["detail"]
    browser = Client()
    browser.force_login(colleague)
    page = browser.get("/operations/").content.decode()
    assert "its creator operator is deactivated: each firing is refused" in page

    creator.is_active = True
    creator.save(update_fields=["is_active"])
    reactivated = timezone.now()
    wait_for(lambda: started_after(schedule.pk, reactivated), timeout=30, what="a firing once active again")
    services.schedule_delete(user=colleague, schedule_id=schedule.pk)  # so the stack settles
