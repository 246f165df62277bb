"""``GET /metrics`` for Prometheus, and the metrics page. Thin: authorise, read, answer."""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET

from access.viewer import looking_as
from accounts.tokens import user_for_token
from executions import catalogue
from executions.models import Status
from executions.plans import plain_plans
from executions.stuck import REASONS

from . import access, costs, prometheus, windows
from .measures import STAYS, notifications_now

WINDOWS = ("1h", "24h", "7d")


def _plain(status: int, text: str) -> HttpResponse:
    response = HttpResponse(text + "\n", status=status, content_type="text/plain; charset=utf-8")
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="keel metrics"'
    return response


@require_GET
def scrape(request: HttpRequest) -> HttpResponse:
    """The Prometheus text format, for ``Authorization: Bearer`` of an operator or an
    auditor, or ``RUNTIME_METRICS_TOKEN``. No or unknown token: 401; another user: 403."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return _plain(401, "send Authorization: Bearer <token> (an operator's or auditor's, or the metrics token)")
    if not access.is_scrape_token(token):
        user = user_for_token(token)
        if user is None:
            return _plain(401, "unknown, expired or revoked token")
        if not access.may_scrape(user):
            return _plain(403, "only operators and auditors (or the metrics token) may scrape /metrics")
    # The monitoring system's counts: every workflow's, whoever's token (docs/operations.md, "Access by workflow").
    with plain_plans(), looking_as(None):
        text = prometheus.exposition()
    return HttpResponse(text, content_type=prometheus.CONTENT_TYPE)


@login_required
@require_GET
def page(request: HttpRequest) -> HttpResponse:
    """The measures with their trends and charts; the page's script polls the API."""
    if not access.may_read(request.user):
        raise PermissionDenied("only operators, managers and auditors may read the metrics")
    window, workflow, workflows = (
        request.GET.get("window") or "",
        request.GET.get("workflow") or "",
        catalogue.names(),
    )
    shown = window if window in WINDOWS else "24h"
    if window and window != shown:
        messages.error(
            request, f"There is no window {window[:40]!r} here; showing the last 24h (one of {', '.join(WINDOWS)})."
        )
    if workflow and workflow not in workflows:
        messages.error(request, f"No workflow {workflow[:100]!r} is deployed; showing all of them.")
        workflow = ""
    if window != shown or (request.GET.get("workflow") or "") != workflow:
        # The URL always says what the page shows, so a link or a bookmark opens the same view.
        return redirect(
            f"{request.path}?{urlencode({'window': shown, **({'workflow': workflow} if workflow else {})})}"
        )
    window = shown
    spent = costs.by_workflow_and_model(
        timezone.now() - windows.parse(window), None, workflow=workflow or None
    )  # the API's cost_usd, drawn as a table
    return render(
        request,
        "metrics/page.html",
        {
            "window": window,
            "windows": WINDOWS,
            "workflow": workflow,
            "workflows": workflows,
            "reasons": REASONS,
            "stays": [(s, Status(s).label) for s in STAYS],
            "metrics_poll_ms": settings.METRICS_POLL_MS,
            "costs": [
                {"workflow": flow, "model": model, "usd": usd}
                for flow, models in spent.items()
                for model, usd in models.items()
            ],
            "notifications": notifications_now(workflow or None),
        },
    )
