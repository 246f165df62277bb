"""Bulk operations: cancel, resume, retry, pause or migrate many executions at once (docs/design.md §6).

Two steps. A *dry run* says, for a filter or a list of ids, to which executions the
operation applies now and why not to the others; it writes nothing. A *run* takes the
frozen list of ids a dry run returned — never a filter, so an execution that appeared
or changed since is not swept along — and applies the operation to each id through
the one-execution service (``services.execution_cancel`` / ``execution_resume`` /
``execution_retry_now``, ``migration.execution_migrate``), one transaction per item: the item's audited transition,
its events and an ``operator.bulk_item`` event naming the batch commit together or
not at all. An item whose state changed since the dry run is ``skipped`` with why;
one that breaks is an ``error``; neither stops the others.

A dry run signs what it listed — the operation, the operator and the eligible ids —
into a ``token``; a run given that token does exactly those ids or nothing (a token of
another operation or operator, an expired one, or ids that aren't exactly the ones it
lists are refused before anything is done). The console always binds its run to its
dry run this way; an API client may.

A migration (``to_version``) lists as ineligible each execution whose migration preview
has a blocker (triage.migration), with its sentences: accepting one is done one
execution at a time, where the operator reads it.

Operators only. Used by the API (``POST /api/executions/bulk``), the console and ``keel migrate``.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core import signing
from django.db import transaction
from django.db.models import OuterRef, Q, QuerySet, Subquery

from executions import pauses, runtime, selectors, services
from executions.errors import Conflict, Forbidden, InvalidInput, ServiceError
from executions.models import (
    ACTIVE,
    HOLDABLE,
    MIGRATABLE,
    TERMINAL,
    Action,
    Execution,
    ExecutionEvent,
    Status,
    pk_from_ref,
    ref_for,
)

from . import migration
from .inputs import MAX_BULK_ITEMS

log = logging.getLogger(__name__)

MAX_ITEMS = MAX_BULK_ITEMS  # ids in one run; eligible ids listed by one dry run
ITEM_EVENT = "operator.bulk_item"


@dataclass(frozen=True)
class Operation:
    name: str
    statuses: frozenset[str]  # where it applies
    service: Callable[..., Execution]  # the one-execution service: (ref=, user=, reason=)
    blocked_by_unknown_outcome: bool = False  # an action whose outcome is unknown must be resolved first
    version: int | None = None  # a migration's: the version they move to

    @property
    def signed(self) -> str:
        """What a dry run's token names: the operation, and a migration's version."""
        return f"{self.name}:v{self.version}" if self.version is not None else self.name

    def why_not(self, status: str, unknown_action: str | None) -> str | None:
        """Why it doesn't apply to an execution in ``status`` (None: it does)."""
        if status not in self.statuses:
            if self.name == "cancel":
                return f"already {status}"
            return f"{status}, not {' or '.join(sorted(self.statuses))}"
        if self.blocked_by_unknown_outcome and unknown_action:
            return f"the outcome of {unknown_action} is unknown: resolve it first"
        return None

    def eligible(self) -> Q:
        """The same rule as ``why_not``, in SQL, for rows annotated by ``_with_unknown_action``."""
        q = Q(status__in=self.statuses)
        return q & Q(unknown_action__isnull=True) if self.blocked_by_unknown_outcome else q


OPERATIONS = {
    "cancel": Operation("cancel", frozenset(ACTIVE), services.execution_cancel),
    "resume": Operation(
        "resume",
        frozenset({Status.NEEDS_ATTENTION, Status.PAUSED}),
        services.execution_resume,
        blocked_by_unknown_outcome=True,
    ),
    "retry": Operation("retry", frozenset({Status.RETRY_PENDING}), services.execution_retry_now),
    "pause": Operation("pause", frozenset(HOLDABLE), pauses.execution_pause),
    "migrate": Operation("migrate", frozenset(MIGRATABLE), migration.execution_migrate),
}


@dataclass(frozen=True)
class Ineligible:
    id: str
    why: str


@dataclass(frozen=True)
class DryRun:
    operation: str
    eligible: list[str]
    ineligible: list[Ineligible]
    truncated: bool = False  # a filter matched more than MAX_ITEMS eligible (or ineligible) executions
    token: str = ""  # binds a run to exactly ``eligible`` (``check_token``)
    notes: dict[str, str] = field(default_factory=dict)  # an eligible id → what else the operation does

    def as_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "eligible": self.eligible,
            "ineligible": [{"id": i.id, "why": i.why} for i in self.ineligible],
            "truncated": self.truncated,
            "token": self.token,
            "notes": self.notes,
        }

    def with_notes(self) -> DryRun:
        return replace(self, notes=_notes(self.operation, self.eligible))


def _notes(operation: str, eligible: Sequence[str]) -> dict[str, str]:
    """What cancelling an eligible execution does beyond it: a child (or a child's restart)
    of a live parent stops that parent (``child_failed``), and a cancelled child can't be
    restarted, so the parent can then only be cancelled (``executions.children``)."""
    if operation != "cancel" or not eligible:
        return {}
    pks = [pk_from_ref(ref) for ref in eligible]
    rows = (
        Execution.objects.filter(pk__in=pks)
        .filter(Q(parent__status__in=ACTIVE) | Q(restarted_from__parent__status__in=ACTIVE))
        .values_list("pk", "parent_id", "restarted_from__parent_id")
    )
    listed, notes = set(pks), {}
    for pk, parent, via in rows:
        parent = parent or via
        if parent in listed:
            notes[ref_for(pk)] = f"a child of {ref_for(parent)}, which this batch cancels too (with its live children)"
        else:
            notes[ref_for(pk)] = (
                f"a child of {ref_for(parent)}, which is still live: cancelling it stops {ref_for(parent)} "
                "(child_failed), and a cancelled child can't be restarted, so its parent can then only be cancelled"
            )
    return notes


TOKEN_SALT = "keel.bulk.dry-run"
TOKEN_MAX_AGE_SECONDS = 3600


def _digest(pks: Sequence[int]) -> str:
    return hashlib.sha256(",".join(map(str, sorted(set(pks)))).encode()).hexdigest()


def dry_run_token(*, user: AbstractBaseUser, operation: str, eligible: Sequence[str]) -> str:
    """A signed, expiring statement of what a dry run listed (the ids as a digest)."""
    pks = [pk_from_ref(ref) for ref in eligible]
    return signing.dumps({"u": user.pk, "op": operation, "n": len(pks), "ids": _digest(pks)}, salt=TOKEN_SALT)


def check_token(token: str, *, user: AbstractBaseUser, operation: str, pks: Sequence[int]) -> None:
    """The run's ids are exactly what the dry run behind ``token`` listed as eligible, for
    the same operation and operator, within the hour. InvalidInput naming ``token`` or
    ``ids`` otherwise."""
    try:
        listed = signing.loads(token, salt=TOKEN_SALT, max_age=TOKEN_MAX_AGE_SECONDS)
    except signing.SignatureExpired:
        raise InvalidInput("token", "this dry run is more than an hour old: dry-run again") from None
    except signing.BadSignature:
        raise InvalidInput("token", "not a token a dry run returned") from None
    if listed.get("u") != user.pk or listed.get("op") != operation:
        raise InvalidInput("token", f"this token is of another dry run (not {operation}, or another operator's)")
    if listed.get("ids") != _digest(pks):
        raise InvalidInput(
            "ids", f"not exactly the {listed.get('n')} executions the dry run listed: dry-run again and confirm those"
        )


@dataclass(frozen=True)
class Result:
    id: str
    outcome: str  # done | skipped | error
    detail: str


@dataclass(frozen=True)
class Run:
    operation: str
    batch: str
    results: list[Result]

    def as_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "batch": self.batch,
            "results": [{"id": r.id, "outcome": r.outcome, "detail": r.detail} for r in self.results],
        }

    def count(self, outcome: str) -> int:
        return sum(1 for r in self.results if r.outcome == outcome)


# --- checks shared by both steps


def _operation(user: AbstractBaseUser, name: str, to_version: int | None = None) -> Operation:
    """The operation ``name``; a migration bound to ``to_version`` (its token says which)."""
    if not user.has_perm(services.OPERATE):
        raise Forbidden("only operators may run bulk operations")
    if name not in OPERATIONS:
        raise InvalidInput("operation", f"unknown operation {name!r}; one of {', '.join(OPERATIONS)}")
    op = OPERATIONS[name]
    if name != "migrate":
        if to_version is not None:
            raise InvalidInput("to_version", f"only a migration moves to a version, not {name}")
        return op
    if isinstance(to_version, bool) or not isinstance(to_version, int) or to_version < 1:
        raise InvalidInput("to_version", "say which version they move to (a positive integer)")

    def migrate(*, ref: str, user: AbstractBaseUser, reason: str) -> Execution:
        return migration.execution_migrate(ref=ref, user=user, to_version=to_version, reason=reason)

    return replace(op, service=migrate, version=to_version)


def _migration_refusals(op: Operation, pks: Sequence[int]) -> dict[int, str]:
    """Each of ``pks`` that ``op`` (a migration) can't move as it stands: why (the version
    it lacks, or its preview's blockers, which only a migration of its own can accept)."""
    if op.version is None:
        return {}
    refused = {}
    for execution in Execution.objects.filter(pk__in=pks):
        try:
            flow = migration.target(execution.workflow, op.version)
        except InvalidInput as exc:
            refused[execution.pk] = exc.reason
            continue
        blocked = migration.plan(execution, flow).blocked_by
        if blocked:
            refused[execution.pk] = "blocked: " + "; ".join(blocked) + " (accept it by migrating it alone)"
    return refused


def parse_ids(ids: Sequence[str]) -> list[int]:
    """Execution ids (``RUN_0042`` or ``42``) as primary keys, duplicates dropped, order
    kept. InvalidInput naming ``ids``: none, more than MAX_ITEMS, or ones that aren't ids."""
    if not ids:
        raise InvalidInput("ids", "name at least one execution")
    if len(ids) > MAX_ITEMS:
        raise InvalidInput("ids", f"at most {MAX_ITEMS} executions in one bulk operation, not {len(ids)}")
    bad = [str(i)[:40] for i in ids if not isinstance(i, str) or pk_from_ref(i) is None]
    if bad:
        raise InvalidInput("ids", f"not execution ids: {', '.join(bad[:10])}")
    return list(dict.fromkeys(pk_from_ref(i) for i in ids))


def _with_unknown_action(rows: QuerySet[Execution]) -> QuerySet[Execution]:
    """``rows`` with ``unknown_action``: the key of an action whose outcome is unknown, or NULL."""
    unknown = Action.objects.filter(execution=OuterRef("pk"), status=Action.State.UNKNOWN, beside=False).order_by("id")
    return rows.annotate(unknown_action=Subquery(unknown.values("key")[:1]))


# --- the dry run


def bulk_dry_run(
    *,
    user: AbstractBaseUser,
    operation: str,
    ids: Sequence[str] | None = None,
    filter: dict[str, str | None] | None = None,
    to_version: int | None = None,
) -> DryRun:
    """Which executions ``operation`` applies to now, and why not the others. Writes nothing.

    With ``ids``: each id in the order given (an id that names no execution is
    ineligible). With ``filter`` (``status``, ``reason``, ``workflow``, as the list
    filters): the newest MAX_ITEMS eligible matches and the newest MAX_ITEMS ineligible
    ones; ``truncated`` says more matched. ``notes``: what the operation does beyond an
    eligible execution (cancelling a child stops its live parent). ``to_version``: a
    migration's (its filter leaves out what is on that version already or has ended).
    Raises Forbidden, InvalidInput.
    """
    op = _operation(user, operation, to_version)
    if (ids is None) == (filter is None):
        raise InvalidInput("ids", "give either ids or a filter")
    if ids is not None:
        pks = parse_ids(ids)
        found = {e.pk: e for e in _with_unknown_action(Execution.objects.filter(pk__in=pks))}
        refused = _migration_refusals(op, [pk for pk, e in found.items() if not op.why_not(e.status, e.unknown_action)])
        eligible, ineligible = [], []
        for pk in pks:
            execution = found.get(pk)
            why = "no such execution" if execution is None else op.why_not(execution.status, execution.unknown_action)
            why = why or refused.get(pk)
            if why:
                ineligible.append(Ineligible(ref_for(pk), why))
            else:
                eligible.append(ref_for(pk))
        return DryRun(
            op.name, eligible, ineligible, token=dry_run_token(user=user, operation=op.signed, eligible=eligible)
        ).with_notes()
    rows = _with_unknown_action(_matching(filter)).order_by("-id")
    if op.version is not None:  # a migration's filter: what is on that version already, or ended, stays
        rows = rows.exclude(workflow_version=op.version).exclude(status__in=TERMINAL)
    yes = list(rows.filter(op.eligible()).values_list("pk", flat=True)[: MAX_ITEMS + 1])
    no = list(rows.exclude(op.eligible()).values_list("pk", "status", "unknown_action")[: MAX_ITEMS + 1])
    refused = _migration_refusals(op, yes[:MAX_ITEMS])
    eligible = [ref_for(pk) for pk in yes[:MAX_ITEMS] if pk not in refused]
    ineligible = [Ineligible(ref_for(pk), why) for pk, why in refused.items()]
    ineligible += [Ineligible(ref_for(pk), op.why_not(status, unknown) or "") for pk, status, unknown in no[:MAX_ITEMS]]
    return DryRun(
        op.name,
        eligible,
        ineligible,
        truncated=len(yes) > MAX_ITEMS or len(no) > MAX_ITEMS,
        token=dry_run_token(user=user, operation=op.signed, eligible=eligible),
    ).with_notes()


def _matching(filter: dict[str, str | None]) -> QuerySet[Execution]:
    """The list's filters; a bad value is InvalidInput naming ``filter.<field>``."""
    try:
        return selectors.filtered(
            status=filter.get("status") or None,
            workflow=filter.get("workflow") or None,
            reason=filter.get("reason") or None,
        )
    except InvalidInput as exc:
        raise InvalidInput(f"filter.{exc.field}", exc.reason) from None


# --- the run


def bulk_run(
    *,
    user: AbstractBaseUser,
    operation: str,
    ids: Sequence[str],
    reason: str,
    token: str | None = None,
    require_token: bool = False,
    to_version: int | None = None,
    each: Callable[[], AbstractContextManager[Any]] = transaction.atomic,
) -> Run:
    """Apply ``operation`` to exactly ``ids`` (the frozen set of a dry run), each in its
    own transaction, with ``reason`` recorded on each. With ``token`` (required with
    ``require_token``), ``ids`` must be exactly what that dry run listed (``check_token``).

    Nothing is done when the request is malformed: InvalidInput naming ``ids`` (none,
    more than MAX_ITEMS, not ids, ids of no execution, not the dry run's), ``token``
    (missing, expired, of another dry run) or ``reason`` (empty); Forbidden for anyone
    but an operator. Otherwise every id gets a result: ``done``, ``skipped`` (the
    operation no longer applies: its state changed since the dry run), or ``error``
    (logged). ``each``: the transaction of one item (the CLI's marks its events too).
    """
    op = _operation(user, operation, to_version)
    pks = parse_ids(ids)
    if token or require_token:
        if not token:
            raise InvalidInput("token", "confirm the executions of a dry run: dry-run first")
        check_token(token, user=user, operation=op.signed, pks=pks)
    missing = sorted(set(pks) - set(Execution.objects.filter(pk__in=pks).values_list("pk", flat=True)))
    if missing:
        raise InvalidInput("ids", f"no such executions: {', '.join(ref_for(pk) for pk in missing[:20])}")
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("reason", f"say why these executions should {op.name}")
    batch = f"BULK-{uuid.uuid4().hex[:12].upper()}"
    return Run(op.name, batch, [_run_one(op, pk, user=user, reason=reason, batch=batch, each=each) for pk in pks])


def _run_one(
    op: Operation, pk: int, *, user: AbstractBaseUser, reason: str, batch: str, each: Callable[[], Any]
) -> Result:
    ref = ref_for(pk)
    try:
        with each():
            locked = _with_unknown_action(Execution.objects.filter(pk=pk))
            execution = locked.select_for_update(no_key=True, of=("self",)).get()
            before = execution.status
            why = op.why_not(before, execution.unknown_action)
            if why:
                return Result(ref, "skipped", why)
            after = op.service(ref=ref, user=user, reason=reason).status
            act = ExecutionEvent.objects.filter(execution_id=pk).order_by("-id").values_list("id", flat=True).first()
            runtime.record(
                execution,
                ITEM_EVENT,
                actor=user,
                payload={"batch": batch, "operation": op.name, "reason": reason, "event": act},
            )
    except Conflict as exc:  # the service found the state changed under its own lock
        return Result(ref, "skipped", exc.message)
    except ServiceError as exc:
        return Result(ref, "error", exc.message)
    except Exception as exc:
        log.exception("bulk %s %s of %s failed", op.name, ref, batch)
        return Result(ref, "error", f"internal error: {type(exc).__name__}")
    if op.version is not None:
        return Result(ref, "done", f"moved to v{op.version} ({after})")
    return Result(ref, "done", "due now" if op.name == "retry" else f"{before} → {after}")
