"""A person's act on a workflow, against access by workflow (``KEEL_WORKFLOW_ACCESS``).

Reading is narrowed where every read starts (``access.managers.Scoped``): a workflow a
person may not read is a 404 before any act is asked. What is left is an act on a
workflow the person reads but may not start, decide or operate: ``require`` refuses it
(403) in the service that does it, after the role's own permission — never instead of
it. Deciding asks it through approvals' one rule (``approvals.policy``).
"""

from __future__ import annotations

from typing import Any

from access import rules

from .errors import Forbidden, NotFound

VERBS = {"start": "start", "decide": "decide approvals of", "operate": "operate"}


def require(user: Any, act: str, workflow: str) -> None:
    """Raise Forbidden unless ``user`` may ``act`` (start, decide, operate) on ``workflow``;
    NotFound when they may not even read it (it is invisible to them, as its executions)."""
    if not rules.allows(user, "read", workflow):
        raise NotFound(f"no workflow {workflow}")
    if not rules.allows(user, act, workflow):
        raise Forbidden(f"you may not {VERBS[act]} {workflow}: it belongs to other groups (KEEL_WORKFLOW_ACCESS)")


def allows(user: Any, act: str, workflow: str) -> bool:
    """For a screen's button: may ``user`` ``act`` on ``workflow``?"""
    return rules.allows(user, act, workflow)
