"""The Workers page: the worker processes from their heartbeats (operators), live.

The page holds one stamp of everything it shows (``fleet.registry.Fleet.stamp``) and the
nav's; its poll answers 204 while both hold, else the fleet panel and the nav out of band
(issue 39, item 3: a stopped worker turns stale on the open page). ``fleet`` is read
through its registry; nothing here writes.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from fleet import registry
from fleet.api import OPERATE

from . import page

PANEL = "workers"


def _context(request: HttpRequest) -> dict:
    if not request.user.has_perm(OPERATE):
        raise PermissionDenied("only operators see the workers")
    fleet = registry.fleet()  # before the stamp: the panel is never older than its stamp
    nav = page.Nav(request.user)
    stamps = {PANEL: page.digest(fleet.stamp()), **nav.stamps()}
    return {
        "workers": fleet.workers,
        "queues": fleet.queues,
        "unconsumed": fleet.unconsumed,
        "heartbeat_seconds": f"{settings.RUNTIME_WORKER_HEARTBEAT_SECONDS:g}",
        "nav": nav,
        "stamps": stamps,
        "live_url": f"{reverse('fleet:live')}?stamp={page.make_token(stamps)}",
    }


@login_required
@require_GET
def workers_page(request: HttpRequest) -> HttpResponse:
    return render(request, "fleet/workers.html", _context(request))


@login_required
@require_GET
def workers_live(request: HttpRequest) -> HttpResponse:
    """The page's poll: 204 when nothing it shows changed, else the panel and the nav."""
    context = _context(request)
    changed = page.changed_panels(context["stamps"], request.GET.get("stamp"))
    if not changed:
        return HttpResponse(status=204)
    return render(request, "fleet/workers.html#live_update", {**context, "changed": changed})
