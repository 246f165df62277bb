"""The Workers page: the fleet from its heartbeats (operators)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from executions.models import ref_for

from . import registry
from .api import OPERATE


@login_required
@require_GET
def page(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm(OPERATE):
        raise PermissionDenied("only operators see the workers")
    fleet = registry.fleet()
    workers = [{"w": w, "refs": [ref_for(pk) for pk in w.executions]} for w in fleet.workers]
    return render(
        request,
        "fleet/workers.html",
        {
            "workers": workers,
            "queues": fleet.queues,
            "unconsumed": fleet.unconsumed,
            "heartbeat_seconds": f"{settings.RUNTIME_WORKER_HEARTBEAT_SECONDS:g}",
        },
    )
