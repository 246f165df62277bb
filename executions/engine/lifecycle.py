"""The one way an execution changes status: a transition, saved with its event.

Two ways to call ``apply``, one rule: the UPDATE is conditional on the status the
execution was read with, so two racing transitions can't both commit. Unfenced (an
operator's act, a decision, the sweeper), it needs an open transaction and an
``execution`` read inside it (on PostgreSQL, locked with ``select_for_update``), and
saves through ``ConcurrentTransitionMixin``. Fenced (``where=``: a worker's lease), it
needs no transaction: the fenced writer (``executions.engine.writer``) writes the
UPDATE, the rows that belong to it and the event together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Model
from django.utils import timezone
from django_fsm import TransitionNotAllowed

from ..models import TERMINAL, Execution, ExecutionEvent
from . import tracing, writer

# Every transition method on Execution, so callers name them and tests can walk them.
TRANSITIONS = (
    "start",
    "await_approval",
    "wait",
    "schedule_retry",
    "flag",
    "complete",
    "fail",
    "cancel",
    "resume_after_decision",
    "wake",
    "retry",
    "resume",
    "pause",
    "unpause",
    "migrate",
)

__all__ = ["TRANSITIONS", "Fenced", "TransitionNotAllowed", "apply", "event", "on_terminal", "record"]

# Called once the transaction that made a *child* (or a restart of one) terminal has
# committed, with its pk: the children gate wakes the parent (executions.children).
_terminal_watchers: list[Callable[[int], None]] = []


def on_terminal(watcher: Callable[[int], None]) -> Callable[[int], None]:
    """Register ``watcher(execution_id)``, run after commit when an execution that has a
    parent (or continues one that had) becomes terminal. It must not raise."""
    _terminal_watchers.append(watcher)
    return watcher


def _watch(execution: Execution) -> None:
    if execution.status not in TERMINAL:
        return
    tracing.ended(execution)  # its trace's root span, once committed (tracing on)
    if not (execution.parent_id or execution.restarted_from_id):
        return
    pk = execution.pk
    for watcher in _terminal_watchers:
        transaction.on_commit(lambda w=watcher: w(pk))


class Fenced(Exception):
    """A fenced write found the row not as its writer left it (another lease token, or
    the execution moved on): nothing was written."""


def apply(
    execution: Execution,
    name: str,
    *,
    actor: AbstractBaseUser | None = None,
    actor_label: str = "",
    reason: str = "",
    code: str = "",
    step: str = "",
    payload: dict[str, Any] | None = None,
    update_fields: Sequence[str] = (),
    where: dict[str, Any] | None = None,
    with_rows: tuple[Model, ...] = (),
    options: dict[str, Any] | None = None,
) -> ExecutionEvent:
    """Run transition ``name``, save it, and append the event. Raises TransitionNotAllowed.

    ``reason`` is a sentence for people; ``code`` the same reason as a word of the
    stuck vocabulary (``waiting_overdue``, ``approval_lapsed``…), for filters and
    counts. ``update_fields`` names other fields the caller changed on ``execution``
    that must be saved in the same UPDATE. ``where``: more conditions for that UPDATE
    (a worker's fence: its lease token and step); if the row doesn't meet them nothing
    is written and ``Fenced`` is raised. A fenced transition goes through the fenced
    writer (``executions.engine.writer``: one statement on PostgreSQL), with ``with_rows``
    (unsaved rows that belong to it, e.g. the last step's run) inserted with it, and
    needs no transaction; an unfenced one is saved in the caller's transaction.
    ``options``: keyword arguments of the transition method (``migrate``'s ``reopen``).
    """
    if name not in TRANSITIONS:
        raise ValueError(f"unknown transition {name!r}")
    assert where is not None or transaction.get_connection().in_atomic_block, "lifecycle.apply needs a transaction"
    before, entered = execution.status, execution.status_changed_at
    getattr(execution, name)(**(options or {}))
    now = timezone.now()
    if execution.status != before:  # a transition that keeps the status (migrate) keeps its time and reason
        execution.status_changed_at = now
        execution.status_reason = reason  # the reason for *this* status; none clears the last one
        execution.reason_code = code
    fields = {"status", "status_changed_at", "status_reason", "reason_code", "updated_at", *update_fields}
    transition = event(
        execution,
        "transition",
        from_status=before,
        to_status=execution.status,
        step=step or execution.current_step,
        actor=actor,
        actor_label=actor_label,
        payload={
            "transition": name,
            # When the status it leaves was entered: its time in that state, without a lookup.
            **({"entered_at": entered.isoformat()} if entered else {}),
            **({"reason": reason} if reason else {}),
            **({"code": code} if code else {}),
            **(payload or {}),
        },
    )
    if actor is not None:  # a person's act (a cancel, a resume, a decision…): a span linked with their request
        tracing.mark(
            "keel.transition",
            execution,
            **{
                "keel.transition": name,
                "keel.from": before,
                "keel.to": execution.status,
                "keel.actor": actor.get_username(),
            },
        )
    if where is None:
        execution.save(update_fields=sorted(fields))
        for row in with_rows:
            row.save()
        transition.save()
        _watch(execution)
        return transition
    execution.updated_at = now
    values = {name: getattr(execution, name) for name in sorted(fields)}
    # The UPDATE, ``with_rows`` and the event, written together or not at all (one statement on PostgreSQL).
    transition.pk = writer.write(values, {**where, "status": before}, [*with_rows, transition])
    if transition.pk is None:
        raise Fenced(f"{execution.ref} is not {before} under the conditions {sorted(where)}")
    _watch(execution)
    return transition


def record(execution: Execution, type: str, **fields: Any) -> ExecutionEvent:
    """Append one event to the execution's history (never updated afterwards); ``fields``
    as ``event``'s."""
    made = event(execution, type, **fields)
    made.save()
    return made


def event(
    execution: Execution,
    type: str,
    *,
    from_status: str = "",
    to_status: str = "",
    step: str = "",
    actor: AbstractBaseUser | None = None,
    actor_label: str = "",
    payload: dict[str, Any] | None = None,
) -> ExecutionEvent:
    """An event, unsaved (``record`` saves one; ``apply`` writes them with a transition)."""
    if actor is not None and not actor_label:
        actor_label = f"user:{actor.get_username()}"
    return ExecutionEvent(
        execution=execution,
        type=type,
        from_status=from_status,
        to_status=to_status,
        step=step,
        actor=actor,
        actor_label=actor_label,
        payload=payload or {},
    )
