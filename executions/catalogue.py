"""The catalogue: every registered workflow as ``GET /api/workflows`` answers it (docs/design.md §6,
"Platform") — its title and description, its versions, the latest version's input schema
and steps, and whether it is paused. Shared by the API, the workflows page, the start
forms and ``keel workflows``.

Who imports this module: the edges (``api``), the console and the CLI. It reads the
registry and the record; it writes nothing.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count

from access import viewer

from . import pauses, rollouts
from .authoring import registry
from .errors import NotFound
from .models import ACTIVE, Execution


def hold_of(name: str) -> dict[str, Any]:
    """Workflow ``name``'s kill switch as the catalogue shows it (``paused``,
    ``paused_reason``, ``paused_by``, ``paused_at``), from its latest switch (executions.pauses)."""
    switch = pauses.switch_of(name)
    if switch is None or not switch.paused:
        return {"paused": False, "paused_reason": None, "paused_by": None, "paused_at": None}
    return {
        "paused": True,
        "paused_reason": switch.reason,
        "paused_by": switch.actor.get_username(),
        "paused_at": switch.created_at,
    }


def names() -> list[str]:
    """The registered workflows the person looking may read (``access``), sorted."""
    hidden = viewer.hidden_now()
    return [name for name in registry.names() if name not in hidden]


def workflow(name: str):
    """The latest version of ``name``, or NotFound (the API's 404; also for a workflow the
    person looking may not read)."""
    try:
        return registry.latest(name)  # unknown to a person who may not read it
    except registry.UnknownWorkflow:
        raise NotFound(f"no workflow {name!r}; known: {', '.join(names()) or 'none'}") from None


_NOW = object()  # item(): read the workflow's rollout now


def item(name: str, *, live: dict[tuple[str, int], int] | None = None, rollout: Any = _NOW) -> dict[str, Any]:
    """One catalogue item (``GET /api/workflows/{name}``); NotFound for an unknown name.
    Each version says how many live executions it has (``live``: a version with none can be
    retired), and ``rollout`` which version new starts go to (executions.rollouts)."""
    latest = workflow(name)
    live = live_counts(name) if live is None else live
    rollout = rollouts.current(name) if rollout is _NOW else rollout
    shares = rollouts.shares(name, rollout)
    return {
        "name": latest.name,
        "title": latest.title,
        "description": latest.description,
        "version": latest.version,
        "versions": registry.versions(name),
        "input_schema": latest.input_schema(),
        "steps": _steps(latest),
        "by_version": [
            {
                "version": v,
                "input_schema": flow.input_schema(),
                "steps": _steps(flow),
                "live": live.get((name, v), 0),
                "share": shares.get(v, 0),
            }
            for v in registry.versions(name)
            for flow in [registry.get(name, v)]
        ],
        # Versions no longer registered that still have live executions (migrate them, or deploy it again).
        "unregistered_live": {
            str(v): n for (w, v), n in sorted(live.items()) if w == name and v not in registry.versions(name)
        },
        "rollout": rollouts.shown(name, rollout),
        **hold_of(name),
    }


def _steps(flow) -> list[dict[str, str]]:
    return [{"name": s.name, "label": s.label, "kind": str(s.kind)} for s in flow.steps]


def items() -> list[dict[str, Any]]:
    """Every registered workflow, sorted by name (``GET /api/workflows``)."""
    live, rolled = live_counts(), rollouts.current_of_all()  # each read once for the whole list
    return [item(name, live=live, rollout=rolled.get(name)) for name in names()]


def live_counts(workflow: str | None = None) -> dict[tuple[str, int], int]:
    """How many executions are live (not terminal) per (workflow, version): every
    workflow's, or ``workflow``'s."""
    rows = Execution.objects.filter(status__in=ACTIVE)  # named, not "not terminal": the partial index reads it
    if workflow is not None:
        rows = rows.filter(workflow=workflow)
    rows = rows.values("workflow", "workflow_version").annotate(n=Count("*")).order_by()
    return {(r["workflow"], r["workflow_version"]): r["n"] for r in rows}
