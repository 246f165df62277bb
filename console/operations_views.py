"""Operations (operators): each workflow's kill switch with its reason and who threw it,
and the schedules with their latest firings — pause or resume a workflow, add or delete
a schedule. Thin: one service call each (``executions.pauses``, ``schedules.services``);
a refusal is a message on the page, never a 500."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from executions import catalogue, pauses
from executions.errors import InvalidInput, ServiceError
from schedules import services as schedules

from .bulk_views import operators_only


@operators_only
@require_GET
def operations(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "executions/operations.html",
        {
            "workflows": [catalogue.item(name) for name in catalogue.names()],
            "schedules": [
                _shown(schedules.schedule_payload(s, firings=5)) for s in schedules.schedule_list(user=request.user)
            ],
            "overlaps": schedules.Schedule.Overlap.choices,
            "schedule_min_seconds": settings.RUNTIME_SCHEDULE_MIN_SECONDS,
        },
    )


@operators_only
@require_POST
def workflow_switch(request: HttpRequest, name: str) -> HttpResponse:
    """Pause (``switch=pause``) or resume a workflow, with the reason given."""
    act = pauses.workflow_pause if request.POST.get("switch") == "pause" else pauses.workflow_resume
    try:
        act(name=name, user=request.user, reason=request.POST.get("reason", ""))
        item = catalogue.item(name)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{name} is {'paused' if item['paused'] else 'running'}.")
    return redirect("console:operations")


@operators_only
@require_POST
def schedule_add(request: HttpRequest) -> HttpResponse:
    raw = request.POST.get("input", "").strip() or "{}"
    try:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            raise InvalidInput("input", "is not valid JSON") from None
        made = schedules.schedule_create(
            user=request.user,
            workflow=request.POST.get("workflow", ""),
            cron=request.POST.get("cron", ""),
            timezone_name=request.POST.get("timezone", "").strip() or "UTC",
            input=data,
            overlap=request.POST.get("overlap", "skip"),
        )
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request, f"Schedule #{made.pk} added; it first fires at {made.next_fire_at:%Y-%m-%d %H:%M:%S} UTC."
        )
    return redirect("console:operations")


def _shown(schedule: dict) -> dict:
    """A schedule as the page shows it: its input as JSON, as it was typed (not a Python dict)."""
    return {**schedule, "input_json": json.dumps(schedule["input"], ensure_ascii=False) if schedule["input"] else ""}


CONFIRM_DELETE = "delete"


@operators_only
@require_http_methods(["GET", "POST"])
def schedule_delete(request: HttpRequest, schedule_id: int) -> HttpResponse:
    """GET (or a POST without ``confirm=delete``): what deleting the schedule means, and the
    button that confirms it; the confirmed POST deletes it."""
    if request.method == "GET" or request.POST.get("confirm") != CONFIRM_DELETE:
        found = [s for s in schedules.schedule_list(user=request.user) if s.pk == schedule_id]
        if not found:
            messages.error(request, f"There is no schedule #{schedule_id}.")
            return redirect("console:operations")
        context = {"schedule": _shown(schedules.schedule_payload(found[0], firings=0))}
        return render(request, "executions/schedule_delete.html", context)
    try:
        schedules.schedule_delete(user=request.user, schedule_id=schedule_id)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Schedule #{schedule_id} deleted; it will not fire again.")
    return redirect("console:operations")
