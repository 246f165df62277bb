"""The lifecycle table of docs/design.md §4: every listed transition works, every other one is refused."""

from __future__ import annotations

import itertools

import pytest
from django.db import transaction
from django_fsm import TransitionNotAllowed

from executions.engine import lifecycle
from executions.models import Execution, Status

S = Status
# ``migrate`` (another version of its workflow, triage.migration) keeps the status it finds:
# each status it applies to reaches itself.
ALLOWED = {
    S.PENDING: {S.PENDING, S.RUNNING, S.CANCELLED, S.PAUSED},
    S.RUNNING: {
        S.AWAITING_APPROVAL,
        S.WAITING,
        S.RETRY_PENDING,
        S.NEEDS_ATTENTION,
        S.COMPLETED,
        S.FAILED,
        S.CANCELLED,
        S.PAUSED,
    },
    S.AWAITING_APPROVAL: {S.AWAITING_APPROVAL, S.RUNNING, S.CANCELLED, S.NEEDS_ATTENTION, S.PAUSED},
    S.WAITING: {S.WAITING, S.RUNNING, S.NEEDS_ATTENTION, S.CANCELLED, S.PAUSED},
    S.RETRY_PENDING: {S.RETRY_PENDING, S.RUNNING, S.FAILED, S.CANCELLED, S.PAUSED},
    # Paused: back to the status it left (here it left running; every other is below), or cancelled.
    S.PAUSED: {S.PAUSED, S.RUNNING, S.CANCELLED},
    S.NEEDS_ATTENTION: {S.NEEDS_ATTENTION, S.RUNNING, S.FAILED, S.CANCELLED},
    S.COMPLETED: set(),
    S.FAILED: set(),
    S.CANCELLED: set(),
}


def execution_in(status: str, paused_from: str = S.RUNNING) -> Execution:
    """An unsaved execution whose status was read as ``status`` (as if loaded); a paused
    one left ``paused_from``."""
    return Execution.from_db(
        "default", ["id", "status", "paused_from", "paused_by_workflow"], [1, status, paused_from, False]
    )


def reachable_targets(status: str) -> set[str]:
    targets = set()
    for name in lifecycle.TRANSITIONS:
        execution = execution_in(status)
        try:
            getattr(execution, name)()
        except TransitionNotAllowed:
            continue
        targets.add(execution.status)
    return targets


@pytest.mark.parametrize("status", list(Status))
def test_transitions_from_each_state_are_exactly_the_design_table(status):
    assert reachable_targets(status) == ALLOWED[status]


@pytest.mark.parametrize("left", [S.PENDING, S.RUNNING, S.RETRY_PENDING, S.WAITING, S.AWAITING_APPROVAL])
def test_a_hold_returns_to_the_status_it_left(left):
    """Issue 22: pause remembers the status it left; unpause returns there and forgets it."""
    execution = execution_in(left, paused_from="")
    execution.pause()
    assert (execution.status, execution.paused_from) == (S.PAUSED, left)
    execution.unpause()
    assert (execution.status, execution.paused_from) == (left, "")


def test_a_migration_keeps_the_status_or_reopens_an_approval_gate():
    """Issue 43: ``migrate`` keeps the status it finds; to ask a gate again it runs (no
    worker holds a migrating execution: never from running, never once it ended)."""
    for status in (S.RUNNING, S.COMPLETED, S.FAILED, S.CANCELLED):
        with pytest.raises(TransitionNotAllowed):
            execution_in(status).migrate()
    execution = execution_in(S.AWAITING_APPROVAL)
    execution.migrate(reopen=True)
    assert execution.status == S.RUNNING


def test_every_pair_outside_the_table_is_refused():
    refused = 0
    for source, name in itertools.product(Status, lifecycle.TRANSITIONS):
        execution = execution_in(source)
        try:
            getattr(execution, name)()
        except TransitionNotAllowed:
            refused += 1
            continue
        assert execution.status in ALLOWED[source], f"{name} took {source} to {execution.status}"
    assert refused > 0


def test_terminal_states_have_no_way_out():
    for status in (S.COMPLETED, S.FAILED, S.CANCELLED):
        assert reachable_targets(status) == set()


def test_status_is_protected_from_direct_assignment():
    execution = execution_in(S.RUNNING)
    with pytest.raises(AttributeError):
        execution.status = S.COMPLETED


@pytest.mark.django_db(transaction=True)
def test_concurrent_transitions_from_the_same_read_cannot_both_commit(people):
    original = Execution.objects.create(
        workflow="monthly_report", workflow_version=1, input_digest="x", created_by=people["requester"].user
    )
    first = Execution.objects.get(pk=original.pk)
    second = Execution.objects.get(pk=original.pk)
    with transaction.atomic():
        lifecycle.apply(first, "start")
    from django_fsm import ConcurrentTransition

    with pytest.raises(ConcurrentTransition), transaction.atomic():
        lifecycle.apply(second, "cancel")  # read as pending, but it is running now
    assert Execution.objects.get(pk=original.pk).status == S.RUNNING
    assert list(original.events.values_list("to_status", flat=True)) == [S.RUNNING]
