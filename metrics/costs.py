"""What the model calls cost, per workflow and model, from the journal (each call's
``cost``, priced when it was recorded: executions.engine.costs). Calls without a price
(cost null) count for nothing. One grouped query, over the window's calls or the whole
record."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, Sum

from executions.models import ModelCall


def by_workflow_and_model(
    since: datetime | None = None, until: datetime | None = None, *, workflow: str | None = None
) -> dict[str, dict[str, float]]:
    """``{workflow: {model requested: USD}}`` of the priced calls recorded in [since, until)."""
    calls = ModelCall.objects.filter(cost__isnull=False)
    if since is not None:
        calls = calls.filter(created_at__gte=since)
    if until is not None:
        calls = calls.filter(created_at__lt=until)
    if workflow:
        calls = calls.filter(execution__workflow=workflow)
    rows = (
        calls.order_by()
        .values_list("execution__workflow", "model")
        .annotate(usd=Sum("cost"), n=Count("id"))
        .order_by("execution__workflow", "model")
    )
    found: dict[str, dict[str, float]] = {}
    for flow, model, usd, _n in rows:
        found.setdefault(flow, {})[model] = float(usd)
    return found
