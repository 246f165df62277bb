"""Schedules: create, list, delete, and the tick that fires what is due (``fire_due``).

One execution per firing, whatever beat does: the tick locks the due schedules
(``FOR UPDATE SKIP LOCKED``: a second tick skips them), records the ``Firing`` (unique
per schedule and firing time) and starts the execution under the idempotency key
``schedule:{id}:{firing time}`` of the schedule's creator — so a repeated tick, a second
beat, or a beat restarted across a firing time start it once. A firing that passed
while no beat ticked is caught up once, at the next tick: the latest firing time not
after now fires (older missed ones are not started, so a day-long outage doesn't start
a day's worth of executions). Overlap ``skip``: a firing while the schedule's previous
execution is still live is recorded as skipped, nothing started.

A schedule starts its executions as its creator, so it is only as good as that account:
while the creator is deactivated (``is_active`` false) each firing is recorded as refused,
naming them, and starts nothing; once they are active again it fires as before. A cron
expression that would fire more often than once every ``RUNTIME_SCHEDULE_MIN_SECONDS``
(default 60) is refused when the schedule is made (``check_frequency``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from executions import runtime
from executions import services as execution_services
from executions.authoring import registry
from executions.errors import Conflict, Forbidden, InvalidInput, NotFound
from executions.models import OPERATE, TERMINAL

from .models import Firing, Schedule

log = logging.getLogger(__name__)

BATCH = 50  # schedules fired by one tick; the rest by the next
CHECKED_FIRINGS = 1000  # how many firing times ahead check_frequency looks at


def _operator(user: AbstractBaseUser) -> None:
    if not user.has_perm(OPERATE):
        raise Forbidden("only operators may manage schedules")


def zone(name: str) -> ZoneInfo:
    """The time zone ``name`` (IANA, e.g. ``Europe/Paris``); InvalidInput naming ``timezone``."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput("timezone", f"{name!r} is not a time zone of the IANA database, e.g. Europe/Paris") from None


def check_cron(expression: str) -> str:
    """A cron expression of five fields (minute hour day month weekday), or six with
    seconds last; InvalidInput naming ``cron``."""
    expression = " ".join((expression or "").split())
    if len(expression.split(" ")) not in (5, 6) or not croniter.is_valid(expression):
        raise InvalidInput(
            "cron",
            f"{expression!r} is not a cron expression: five fields (minute hour day month weekday), "
            "or six with seconds last",
        )
    return expression


def check_frequency(expression: str, *, start: datetime) -> None:
    """InvalidInput naming ``cron`` when two of the expression's next ``CHECKED_FIRINGS``
    firing times after ``start`` are less than ``RUNTIME_SCHEDULE_MIN_SECONDS`` apart (a
    five-field expression fires at most once a minute, so it passes unlooked at while the
    minimum is a minute or less). CroniterError for one that never fires."""
    minimum = settings.RUNTIME_SCHEDULE_MIN_SECONDS
    if len(expression.split(" ")) == 5 and minimum <= 60:
        return
    times = croniter(expression, start)
    previous = times.get_next(float)
    for _ in range(CHECKED_FIRINGS):
        following = times.get_next(float)
        if following - previous < minimum:
            raise InvalidInput(
                "cron",
                f"{expression!r} fires {following - previous:g} s apart; a schedule fires at most once "
                f"every {minimum} s (RUNTIME_SCHEDULE_MIN_SECONDS)",
            )
        previous = following


def next_after(schedule: Schedule, moment: datetime) -> datetime:
    """The schedule's first firing time after ``moment``, in UTC."""
    local = moment.astimezone(zone(schedule.timezone))
    return croniter(schedule.cron, local).get_next(datetime).astimezone(UTC)


def latest_not_after(schedule: Schedule, moment: datetime) -> datetime:
    """The schedule's latest firing time not after ``moment``, in UTC."""
    local = (moment + timedelta(microseconds=1)).astimezone(zone(schedule.timezone))
    return croniter(schedule.cron, local).get_prev(datetime).astimezone(UTC)


def schedule_create(
    *,
    user: AbstractBaseUser,
    workflow: str,
    cron: str,
    timezone_name: str = "UTC",
    input: dict[str, Any] | None = None,
    overlap: str = Schedule.Overlap.SKIP,
) -> Schedule:
    """Operators: a schedule of ``workflow``. InvalidInput naming ``workflow``, ``cron`` (not
    an expression, never firing, or firing more often than ``check_frequency`` allows),
    ``timezone``, ``overlap`` or ``input``; nothing written then."""
    _operator(user)
    try:
        registry.latest(workflow)
    except registry.UnknownWorkflow as exc:
        raise InvalidInput("workflow", str(exc)) from None
    runtime.require(user, "operate", workflow)
    runtime.require(user, "start", workflow)  # it starts them as its creator
    cron = check_cron(cron)
    zone(timezone_name)
    if overlap not in Schedule.Overlap.values:
        raise InvalidInput("overlap", "must be skip (while the previous execution is live) or allow")
    if input is not None and not isinstance(input, dict):
        raise InvalidInput("input", "must be a JSON object")
    schedule = Schedule(
        workflow=workflow, cron=cron, timezone=timezone_name, input=input or {}, overlap=overlap, created_by=user
    )
    try:
        schedule.next_fire_at = next_after(schedule, timezone.now())
        check_frequency(cron, start=schedule.next_fire_at)
    except CroniterError:  # valid fields that never match a date (the 31st of February)
        raise InvalidInput("cron", f"{cron!r} never fires: no date matches it") from None
    schedule.save()
    return schedule


def schedule_list(*, user: AbstractBaseUser | None) -> list[Schedule]:
    """The live schedules, oldest first: operators only; ``user`` None: the shell reading
    the table it could read anyway (``keel schedules`` without ``--as``)."""
    if user is not None:
        _operator(user)
    return list(Schedule.objects.filter(deleted_at=None).select_related("created_by").order_by("id"))


def schedule_delete(*, user: AbstractBaseUser, schedule_id: int) -> Schedule:
    """Operators: the schedule never fires again (its firings and executions stay); who
    deleted it and when are kept on it (the operator audit)."""
    _operator(user)
    with transaction.atomic():
        schedule = Schedule.objects.select_for_update().filter(pk=schedule_id, deleted_at=None).first()
        if schedule is None:
            raise NotFound(f"no schedule {schedule_id}")
        runtime.require(user, "operate", schedule.workflow)
        schedule.deleted_at = timezone.now()
        schedule.deleted_by = user
        schedule.save(update_fields=["deleted_at", "deleted_by"])
    return schedule


def fire_due(*, now: datetime | None = None) -> list[Firing]:
    """The tick (beat, ``schedules.tick``): fire every schedule whose time came by ``now``
    (default: the clock's now)."""
    fired = []
    now = now or timezone.now()
    with transaction.atomic():
        due = Schedule.objects.select_for_update(skip_locked=True).filter(deleted_at=None, next_fire_at__lte=now)
        for schedule in due.select_related("created_by").order_by("next_fire_at")[:BATCH]:
            fire_at = max(latest_not_after(schedule, now), schedule.next_fire_at)
            fired.append(_fire(schedule, fire_at))
            schedule.next_fire_at = next_after(schedule, max(now, fire_at))
            schedule.save(update_fields=["next_fire_at"])
    for firing in fired:
        log.info("schedule %s fired for %s: %s %s", firing.schedule_id, firing.fire_at, firing.outcome, firing.detail)
    return fired


def idempotency_key(schedule: Schedule, fire_at: datetime) -> str:
    return f"schedule:{schedule.pk}:{fire_at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def scheduled_input(schedule: Schedule, fire_at: datetime) -> dict[str, Any]:
    """The workflow's own input for this firing time (its ``scheduled_input``, given the
    time in the schedule's zone), with the schedule's input laid over it."""
    flow = registry.latest(schedule.workflow)
    own = flow.scheduled_input(fire_at.astimezone(zone(schedule.timezone))) if flow.scheduled_input else {}
    return {**own, **schedule.input}


def _fire(schedule: Schedule, fire_at: datetime) -> Firing:
    """Inside the tick's transaction, ``schedule`` locked: one firing, once."""
    existing = Firing.objects.filter(schedule=schedule, fire_at=fire_at).first()
    if existing is not None:
        return existing
    creator = schedule.created_by
    if not creator.is_active:
        detail = (
            f"created_by: {creator.get_username()} is deactivated; a schedule starts its executions as its "
            "creator, so it starts none while they are (delete it and add it again as an active operator)"
        )
        return Firing.objects.create(schedule=schedule, fire_at=fire_at, outcome=Firing.Outcome.REFUSED, detail=detail)
    if schedule.overlap == Schedule.Overlap.SKIP:
        previous = (
            Firing.objects.filter(schedule=schedule, outcome=Firing.Outcome.STARTED)
            .select_related("execution")
            .order_by("-fire_at")
            .first()
        )
        if previous is not None and previous.execution.status not in TERMINAL:
            detail = f"{previous.execution.ref} is still {previous.execution.status}"
            return Firing.objects.create(
                schedule=schedule, fire_at=fire_at, outcome=Firing.Outcome.SKIPPED, detail=detail
            )
    try:
        with transaction.atomic():
            execution, _ = execution_services.execution_start(
                user=schedule.created_by,
                workflow=schedule.workflow,
                input=scheduled_input(schedule, fire_at),
                idempotency_key=idempotency_key(schedule, fire_at),
            )
            return Firing.objects.create(
                schedule=schedule, fire_at=fire_at, outcome=Firing.Outcome.STARTED, execution=execution
            )
    except (InvalidInput, Conflict) as refused:
        detail = f"{refused.field}: {refused.reason}" if isinstance(refused, InvalidInput) else str(refused)
        return Firing.objects.create(schedule=schedule, fire_at=fire_at, outcome=Firing.Outcome.REFUSED, detail=detail)
    except (Forbidden, NotFound) as refused:  # its creator may no longer start it (access by workflow)
        detail = f"created_by: {creator.get_username()} may not start {schedule.workflow} now: {refused}"
        return Firing.objects.create(schedule=schedule, fire_at=fire_at, outcome=Firing.Outcome.REFUSED, detail=detail)
    except IntegrityError:  # the same firing recorded by a tick that raced in (the unique constraint)
        return Firing.objects.get(schedule=schedule, fire_at=fire_at)


def schedule_payload(schedule: Schedule, *, firings: int = 10) -> dict[str, Any]:
    """A schedule as the API shows it, with its latest firings."""
    return {
        "id": schedule.pk,
        "workflow": schedule.workflow,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "input": schedule.input,
        "overlap": schedule.overlap,
        "created_by": schedule.created_by.get_username(),
        "creator_active": schedule.created_by.is_active,  # false: every firing is refused (fire_due)
        "created_at": schedule.created_at,
        "next_fire_at": schedule.next_fire_at if schedule.deleted_at is None else None,
        "deleted": schedule.deleted_at is not None,
        "firings": [
            {
                "fire_at": f.fire_at,
                "outcome": f.outcome,
                "execution": f.execution.ref if f.execution_id else None,
                "detail": f.detail,
            }
            for f in schedule.firings.select_related("execution").order_by("-fire_at")[:firings]
        ],
    }
