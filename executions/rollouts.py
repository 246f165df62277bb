"""Rolling a workflow's new version out to new starts by percentage (docs/design.md §4,
"Versions in flight"; the API's ``POST /api/workflows/{name}/rollout``, triage.rollout).

A rollout ``{version: N, percent: p}`` sends p % of the starts that name no ``version``
to vN and the rest to the highest registered version below N (its *stable* version);
versions above N get only the starts that name them. Each start chooses once, from its
idempotency key when it has one (the same key always lands on the same side) or at
random, and keeps the version it chose: ``workflow_version`` is its pin. Without a
rollout, every start goes to the latest registered version, as before rollouts existed.

A child a step starts chooses the same way, decided by its parent and its key.

Who imports this module: ``services`` (the start), ``children`` (a child's start),
``catalogue`` (what it shows) and triage.rollout (which writes the rows). Reads only.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.db.models import Max

from .authoring import registry
from .authoring.workflow import Workflow
from .models import Rollout


def current(workflow: str) -> Rollout | None:
    """The workflow's rollout now: its latest row, or None."""
    return Rollout.objects.filter(workflow=workflow).order_by("-id").select_related("actor").first()


def current_of_all() -> dict[str, Rollout]:
    """Every workflow's rollout now, by workflow, in one query (the catalogue's list)."""
    latest = Rollout.objects.values("workflow").annotate(last=Max("id")).values("last")
    return {r.workflow: r for r in Rollout.objects.filter(pk__in=latest).select_related("actor")}


def stable_version(workflow: str, version: int) -> int:
    """Where the starts that don't go to ``version`` go: the highest registered version below it."""
    return max((v for v in registry.versions(workflow) if v < version), default=version)


def choose(workflow: str, *, seed: str = "") -> Workflow:
    """The version a new start of ``workflow`` without a ``version`` runs (UnknownWorkflow
    for an unknown name). ``seed``: what decides the side when given (an idempotency key,
    scoped to its user); random otherwise."""
    latest, versions = registry.latest(workflow), registry.versions(workflow)
    if len(versions) == 1:
        return latest  # one version deployed: every rollout chooses it, so none is read (no round trip)
    rollout = current(workflow)
    if rollout is None or rollout.version not in versions:
        return latest  # none, or its version is no longer deployed: the latest, as without one
    bucket = int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16) % 100 if seed else secrets.randbelow(100)
    chosen = rollout.version if bucket < rollout.percent else stable_version(workflow, rollout.version)
    return registry.get(workflow, chosen)


def shares(workflow: str, rollout: Rollout | None) -> dict[int, int]:
    """version → the percentage of new starts without a version that go to it under
    ``rollout`` (the workflow's now: ``current``)."""
    versions = registry.versions(workflow)
    if rollout is None or rollout.version not in versions:
        return {max(versions): 100} if versions else {}
    stable = stable_version(workflow, rollout.version)
    if stable == rollout.version:
        return {stable: 100}
    return {v: p for v, p in ((rollout.version, rollout.percent), (stable, 100 - rollout.percent)) if p}


def shown(workflow: str, rollout: Rollout | None) -> dict[str, Any] | None:
    """The catalogue's ``rollout`` (``rollout``, the workflow's now): ``{version, percent,
    stable, reason, by, at}``, or None."""
    if rollout is None:
        return None
    return {
        "version": rollout.version,
        "percent": rollout.percent,
        "stable": stable_version(workflow, rollout.version),
        "reason": rollout.reason,
        "by": rollout.actor.get_username(),
        "at": rollout.created_at,
    }
