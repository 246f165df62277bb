"""Rolling new starts out to a workflow's version by percentage (docs/design.md §4, "Versions in
flight"; ``POST /api/workflows/{name}/rollout``, ``keel rollout``).

A rollout row says which version new starts without a ``version`` go to
(executions.rollouts chooses, at the start). Raising the percentage — more new starts on
that version than now — is refused while ``keel replay`` finds drift in the live
executions already on it: what the code now installed would stop there would stop in
more of them. Lowering it (0 %: back to the stable version for new starts) is always
allowed. Each change is a row of its own (append-only: the audit of who rolled what out,
when and why). Operators only.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from dblocks import Lock, xact
from executions import catalogue, rollouts, runtime
from executions.errors import Conflict, Forbidden, InvalidInput
from executions.models import OPERATE, Rollout

from . import replay
from .migration import target


def workflow_rollout(*, name: str, user: AbstractBaseUser, version: Any, percent: Any, reason: str) -> dict[str, Any]:
    """Send ``percent`` % of ``name``'s new starts without a version to ``version``; the
    catalogue item, with its ``rollout``. NotFound (an unknown workflow), InvalidInput
    naming ``version``, ``percent`` or ``reason``; Conflict naming the executions on that
    version whose replay drifts, when ``percent`` is raised."""
    if not user.has_perm(OPERATE):
        raise Forbidden("only operators may roll a version out")
    catalogue.workflow(name)  # NotFound
    runtime.require(user, "operate", name)
    target(name, version, field_name="version")
    if isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100:
        raise InvalidInput("percent", "a whole percentage from 0 to 100")
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("reason", "say why the rollout changes")
    with transaction.atomic():
        xact(Lock.WORKFLOW_SWITCH, name)  # one change of a workflow's starts at a time (dblocks' order)
        was = rollouts.shares(name, rollouts.current(name)).get(
            version, 0
        )  # what it gets now (the latest: all, without a rollout)
        if percent > was:
            found = replay.replay(workflow=name, version=version)
            drifted = [item for item in found["items"] if item["verdict"] != replay.OK]
            if drifted:
                raise Conflict(
                    f"{name} v{version} can't go from {was}% to {percent}%: replay finds drift in "
                    f"{len(drifted)} of its {found['checked']} live executions ("
                    + ", ".join(item["id"] for item in drifted[:20])
                    + "); fix or move them first",
                    drifted=[{"id": item["id"], "findings": item["findings"]} for item in drifted[:100]],
                )
        Rollout.objects.create(workflow=name, version=version, percent=percent, reason=reason, actor=user)
    return catalogue.item(name)
