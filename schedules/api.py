"""The schedules' part of the Task API (operators): ``GET/POST /api/schedules``,
``DELETE /api/schedules/{id}``. An invalid cron expression (or one firing more often than
``RUNTIME_SCHEDULE_MIN_SECONDS``), time zone, workflow or overlap policy, or a field the body
doesn't declare, is a 422 naming it (``schedules.services``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from django.http import HttpRequest
from ninja import Router, Schema
from ninja import Status as Reply
from pydantic import Field

from apikit.answers import READ, WRITE, WRITE_ONE, ErrorOut
from executions.inputs import Body, DbInt, RequiredWorkflowName, SafeJsonObject
from executions.storable import STORABLE

from . import services

router = Router()

Cron = Annotated[str, Field(min_length=1, max_length=200), STORABLE]
ZoneName = Annotated[str, Field(min_length=1, max_length=64), STORABLE]
OverlapName = Annotated[str, Field(max_length=10), STORABLE]


class ScheduleIn(Body):
    """A field it doesn't declare is a 422 naming it (``Body``), never dropped in silence."""

    workflow: RequiredWorkflowName
    cron: Cron
    timezone: ZoneName = "UTC"
    input: SafeJsonObject = Field(default_factory=dict)
    overlap: OverlapName = "skip"


class FiringOut(Schema):
    fire_at: datetime
    outcome: str
    execution: str | None
    detail: str


class ScheduleOut(Schema):
    id: int
    workflow: str
    cron: str
    timezone: str
    input: dict[str, Any]
    overlap: str
    created_by: str
    creator_active: bool
    created_at: datetime
    next_fire_at: datetime | None
    deleted: bool
    firings: list[FiringOut]


class SchedulePage(Schema):
    items: list[ScheduleOut]


@router.get("/schedules", response={200: SchedulePage, **READ, 403: ErrorOut}, tags=["schedules"])
def list_schedules(request: HttpRequest):
    return {"items": [services.schedule_payload(s) for s in services.schedule_list(user=request.user)]}


@router.post("/schedules", response={201: ScheduleOut, **WRITE}, tags=["schedules"])
def create_schedule(request: HttpRequest, payload: ScheduleIn):
    schedule = services.schedule_create(
        user=request.user,
        workflow=payload.workflow,
        cron=payload.cron,
        timezone_name=payload.timezone,
        input=payload.input,
        overlap=payload.overlap,
    )
    return Reply(201, services.schedule_payload(schedule))


@router.delete("/schedules/{schedule_id}", response={200: ScheduleOut, **WRITE_ONE}, tags=["schedules"])
def delete_schedule(request: HttpRequest, schedule_id: DbInt):
    return services.schedule_payload(services.schedule_delete(user=request.user, schedule_id=schedule_id))
