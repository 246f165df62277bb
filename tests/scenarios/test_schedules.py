"""Issue 22, schedules on real processes: S42 (beat restarted across a schedule's
firing time → one execution for that firing). Real beat processes (SIGKILLed, then two
started at once: a restart and a double fire), a worker, the web server."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from executions.models import Execution
from schedules import services
from schedules.models import Firing, Schedule
from tests.support.procs import wait_for

EVERY = 3  # seconds between firings (a sixth cron field: seconds)


def started_firings(schedule_id: int) -> list[Firing]:
    return list(Firing.objects.filter(schedule_id=schedule_id, outcome="started").order_by("fire_at"))


@pytest.mark.own_stack
def test_s42_beat_restarted_across_a_firing_time_starts_one_execution_for_that_firing(stack, people, api_as):
    """S42: beat restarted across a schedule's firing time → one execution for that firing."""
    up = stack.up(web_env={"RUNTIME_SCHEDULE_MIN_SECONDS": "1"})  # every EVERY seconds is allowed here
    operator = api_as(people["operator"])
    answer = operator.post(
        "/schedules",
        {
            "workflow": "monthly_report",
            "cron": f"* * * * * */{EVERY}",
            "input": {"month": "2026-08"},
            "overlap": "allow",
        },
    )
    assert answer.status_code == 201, answer.text
    schedule_id = answer.json()["id"]
    wait_for(lambda: started_firings(schedule_id), timeout=30, what="the first firing")

    up.beat.kill()  # beat dies; firing times pass with no beat
    down_since = datetime.now(UTC)
    schedule = Schedule.objects.get(pk=schedule_id)
    missed = services.next_after(schedule, down_since)
    wait_for(lambda: datetime.now(UTC) > missed, timeout=EVERY * 3, what="a firing time to pass while beat is down")
    fired_before = {f.fire_at for f in started_firings(schedule_id)}
    assert all(t <= down_since for t in fired_before)  # nothing fired while beat was down

    with stack.together():  # beat back — twice at once: a restart and a double fire
        stack.beat()
        stack.beat()
    restarted = datetime.now(UTC)
    caught_up = services.latest_not_after(schedule, restarted)
    wait_for(
        lambda: Firing.objects.filter(schedule_id=schedule_id, fire_at__gte=caught_up).exists(),
        timeout=30,
        what="the firing missed while beat was down to be caught up",
    )
    wait_for(
        lambda: Firing.objects.filter(schedule_id=schedule_id, fire_at__gt=restarted).count() >= 2,
        timeout=30,
        what="two more firings under the two beats",
    )

    firings = started_firings(schedule_id)
    keys = [services.idempotency_key(schedule, f.fire_at) for f in firings]
    executions = Execution.objects.filter(idempotency_key__startswith=f"schedule:{schedule_id}:")
    per_key = Counter(executions.values_list("idempotency_key", flat=True))
    assert set(per_key) == set(keys) and set(per_key.values()) == {1}  # one execution per firing, each firing once
    assert len(firings) == len({f.fire_at for f in firings}) == executions.count()
    assert answer.json()["firings"] == [] and operator.get("/schedules").json()["items"][0]["firings"]
