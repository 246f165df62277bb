"""What retention may archive (docs/design.md §4 "Retention"), and nothing else.

An execution may go when it is terminal, ended (entered its terminal status) before
its cut-off — ``RUNTIME_RETENTION_DAYS`` ago, or its workflow's own ``retention_days``,
or ``--older-than`` for every workflow when given — and is not on hold. It goes only
with its whole *family*: the executions linked to it by ``parent`` (ancestors and
descendants) and ``restarted_from``, every one of which must be able to go too. So a
live child, a live parent or a hold anywhere in the family keeps all of it, and the
protected foreign keys between them never point at a purged row.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from executions.authoring import registry
from executions.models import TERMINAL, Execution

AGE = re.compile(r"^(\d{1,5})d$")


class BadAge(ValueError):
    """``--older-than`` is not ``<n>d``."""


def parse_age(text: str) -> int:
    """``"90d"`` → 90; anything else → BadAge."""
    match = AGE.match(text.strip())
    if not match:
        raise BadAge(f"--older-than must be a number of days like 90d, not {text!r}")
    return int(match.group(1))


@dataclass(frozen=True, kw_only=True)
class Policy:
    """The cut-offs of one pass: ``days`` for every workflow without its own ``overrides``."""

    days: int
    now: datetime
    overrides: dict[str, int] = field(default_factory=dict)
    explicit: bool = False  # days came from --older-than (it then holds for every workflow)

    @classmethod
    def current(cls, *, older_than_days: int | None = None, now: datetime | None = None) -> Policy:
        now = now or timezone.now()
        if older_than_days is not None:
            return cls(days=older_than_days, now=now, explicit=True)
        return cls(days=settings.RUNTIME_RETENTION_DAYS, now=now, overrides=workflow_overrides())

    def cutoff(self, workflow: str) -> datetime:
        return self.now - timedelta(days=self.overrides.get(workflow, self.days))

    def old_enough(self) -> Q:
        """Ended before the cut-off of its workflow."""
        default = Q(status_changed_at__lt=self.now - timedelta(days=self.days))
        if not self.overrides:
            return default
        q = default & ~Q(workflow__in=list(self.overrides))
        for workflow, days in self.overrides.items():
            q |= Q(workflow=workflow, status_changed_at__lt=self.now - timedelta(days=days))
        return q

    def as_json(self) -> dict:
        return {
            "retention_days": self.days,
            "older_than": f"{self.days}d" if self.explicit else None,
            "overrides": self.overrides,
            "now": self.now.isoformat(),
            "cutoff": (self.now - timedelta(days=self.days)).isoformat(),
        }


def workflow_overrides() -> dict[str, int]:
    """Each registered workflow's own ``retention_days`` (the longest over its versions)."""
    overrides: dict[str, int] = {}
    for name in registry.names():
        days = [registry.get(name, v).retention_days for v in registry.versions(name)]
        days = [d for d in days if d is not None]
        if days:
            overrides[name] = max(days)
    return overrides


def candidates(policy: Policy):
    """Terminal, old enough and not on hold (the family is checked afterwards)."""
    return Execution.objects.filter(policy.old_enough(), status__in=list(TERMINAL), hold_at__isnull=True)


def on_hold(policy: Policy) -> int:
    """Terminal executions old enough that a legal hold keeps."""
    return Execution.objects.filter(policy.old_enough(), status__in=list(TERMINAL), hold_at__isnull=False).count()


@dataclass(frozen=True)
class Member:
    pk: int
    workflow: str
    status: str
    ended_at: datetime
    parent_id: int | None
    restarted_from_id: int | None
    on_hold: bool


def families(policy: Policy, *, batch: int, after: int = 0) -> Iterator[list[Member]]:
    """Families that may go, whole, in the order of their oldest member's id."""
    while True:
        ids = list(candidates(policy).filter(pk__gt=after).order_by("pk").values_list("pk", flat=True)[:batch])
        if not ids:
            return
        after = ids[-1]
        members = _closure(ids)
        links = _links(members)
        seen: set[int] = set()
        for pk in ids:
            if pk in seen:
                continue
            family = _component(pk, members, links)
            seen |= {m.pk for m in family}
            if all(_may_go(m, policy) for m in family):
                yield sorted(family, key=lambda m: m.pk)


def _may_go(member: Member, policy: Policy) -> bool:
    return member.status in TERMINAL and not member.on_hold and member.ended_at < policy.cutoff(member.workflow)


def _closure(ids: list[int]) -> dict[int, Member]:
    """Every execution linked to ``ids`` by parent or restarted_from, both ways, transitively."""
    members: dict[int, Member] = {}
    frontier, asked = set(ids), set()
    while frontier:
        asked |= frontier
        rows = (
            Execution.objects.filter(Q(pk__in=frontier) | Q(parent_id__in=frontier) | Q(restarted_from_id__in=frontier))
            .order_by()
            .values_list("pk", "workflow", "status", "status_changed_at", "parent_id", "restarted_from_id", "hold_at")
        )
        found: set[int] = set()
        for pk, workflow, status, ended, parent, restarted, hold in rows:
            members.setdefault(pk, Member(pk, workflow, status, ended, parent, restarted, hold is not None))
            found |= {p for p in (pk, parent, restarted) if p is not None}
        frontier = found - asked
    return members


def _links(members: dict[int, Member]) -> dict[int, set[int]]:
    """Each member's neighbours (parent, restarted_from, both ways), once per page."""
    links: dict[int, set[int]] = {m: set() for m in members}
    for m in members.values():
        for other in (m.parent_id, m.restarted_from_id):
            if other is not None and other in links:
                links[m.pk].add(other)
                links[other].add(m.pk)
    return links


def _component(pk: int, members: dict[int, Member], links: dict[int, set[int]]) -> list[Member]:
    found, todo = {pk}, [pk]
    while todo:
        for other in links[todo.pop()]:
            if other not in found:
                found.add(other)
                todo.append(other)
    return [members[p] for p in found]
