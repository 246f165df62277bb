"""The rule of access by workflow: which of a user's groups open which acts of a workflow.

A workflow not named in ``KEEL_WORKFLOW_ACCESS`` is open. One named is readable by the
groups of any of its acts (a person allowed to start, decide or operate it sees what
they act on) and each other act by that act's groups; superusers pass every rule, as
they hold every permission. An act here is never more than the role: deciding still
needs the managers' permission, operating the operators'. No rules, no cost: every
function answers at once when the setting is empty.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

ACTS = ("read", "start", "decide", "operate")


def configured() -> dict[str, dict[str, tuple[str, ...]]]:
    return settings.KEEL_WORKFLOW_ACCESS


def groups_named() -> set[str]:
    """Every group the rules name."""
    return {g for acts in configured().values() for groups in acts.values() for g in groups}


def _groups_of(user: Any) -> frozenset[str]:
    """The user's group names, read once per user object (a request's, a command's)."""
    cached = getattr(user, "_keel_group_names", None)
    if cached is None:
        cached = frozenset(user.groups.values_list("name", flat=True)) if user.pk is not None else frozenset()
        user._keel_group_names = cached
    return cached


def _open_to(acts: dict[str, tuple[str, ...]], act: str) -> set[str]:
    if act == "read":
        return {g for groups in acts.values() for g in groups}
    return set(acts[act])


def allows(user: Any, act: str, workflow: str) -> bool:
    """May ``user`` ``act`` (read, start, decide, operate) on ``workflow``?"""
    if act not in ACTS:
        raise ValueError(f"unknown act {act!r}")
    acts = configured().get(workflow)
    if acts is None:
        return True
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return user.is_superuser or bool(_open_to(acts, act) & _groups_of(user))


def hidden(user: Any, act: str = "read") -> frozenset[str]:
    """The workflows ``user`` may not ``act`` on (empty without rules)."""
    rules = configured()
    if not rules:
        return frozenset()
    return frozenset(w for w in rules if not allows(user, act, w))
