"""An action an attempt left in flight may have acted: when that attempt can no longer
tell (it ran past its timeout and another worker took over, or the execution's deadline
passed before it was resumed), the action's outcome is ``unknown`` and a person
establishes it — never ``failed``, never an ``on_failure`` refund, never sent again by
the takeover. In process: the bank of tests/support/transfer_flow.py, whose deposit goes
through and then "kills" the worker in the call (SystemExit), as a SIGKILL would leave it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models.functions import Now

from executions.engine import runner
from executions.models import Action, Execution, Status
from tests.support.in_process import run_here
from tests.support.transfer_flow import BANK, DEPOSITS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("bank")]


def died_in_the_deposit(people, account: str) -> Execution:
    """A transfer whose worker died while the bank took the deposit: running, its lease and
    the deposit's action ``executing``, the money at the bank."""
    from executions.services import execution_start

    DEPOSITS[account] = "die"
    execution, _ = execution_start(user=people["requester"].user, workflow="transfer", input={"to_account": account})
    with pytest.raises(SystemExit):
        for _ in range(5):
            runner.advance(execution.pk, worker="worker:died")
    died = Execution.objects.get(pk=execution.pk)
    assert died.status == Status.RUNNING and died.current_step == "deposit"
    assert Action.objects.get(key=f"{died.ref}:deposit").status == "executing"
    return died


def taken_over(execution: Execution) -> Execution:
    return run_here(execution, worker="worker:rescuer")


def test_a_deposit_that_ran_past_its_timeout_is_unknown_not_failed_nor_refunded(people):
    execution = died_in_the_deposit(people, "slow-1")
    # Past the step's timeout: the heartbeat stopped extending the lease, it lapsed.
    Execution.objects.filter(pk=execution.pk).update(
        step_deadline=Now() - timedelta(seconds=5), lease_expires_at=Now() - timedelta(seconds=1)
    )
    after = taken_over(execution)
    assert after.status == Status.NEEDS_ATTENTION, after.status_reason
    assert after.reason_code == "unknown_outcome"
    assert f"{after.ref}:deposit in flight: it may have acted" in after.status_reason
    deposit = Action.objects.get(key=f"{after.ref}:deposit")
    assert deposit.status == "unknown" and "ran past its timeout" in deposit.last_error
    # No refund of money the bank took, and the deposit not asked again.
    assert [b["op"] for b in BANK.values()] == ["withdraw", "deposit"]
    assert not Action.objects.filter(key=f"{after.ref}:refund").exists()


def test_a_deadline_passed_with_the_deposit_in_flight_waits_for_a_person(people):
    execution = died_in_the_deposit(people, "late-1")
    Execution.objects.filter(pk=execution.pk).update(
        deadline=Now() - timedelta(seconds=1), lease_expires_at=Now() - timedelta(seconds=1)
    )
    after = taken_over(execution)
    assert after.status == Status.NEEDS_ATTENTION and after.reason_code == "unknown_outcome", after.status_reason
    assert "passed with the outcome of" in after.status_reason and "establish it (resolve) first" in after.status_reason
    assert Action.objects.get(key=f"{after.ref}:deposit").status == "unknown"
    assert [b["op"] for b in BANK.values()] == ["withdraw", "deposit"]


def test_a_deadline_passed_with_nothing_in_flight_still_fails(people):
    from executions.services import execution_start

    execution, _ = execution_start(user=people["requester"].user, workflow="transfer", input={"to_account": "x-1"})
    Execution.objects.filter(pk=execution.pk).update(deadline=Now() - timedelta(seconds=1))
    after = taken_over(execution)
    assert after.status == Status.FAILED and after.reason_code == "deadline_passed"
    assert BANK == {}


def test_the_unknown_deposit_resolved_as_succeeded_completes_without_a_refund(people):
    from executions.services import action_resolve

    execution = died_in_the_deposit(people, "slow-2")
    Execution.objects.filter(pk=execution.pk).update(
        step_deadline=Now() - timedelta(seconds=5), lease_expires_at=Now() - timedelta(seconds=1)
    )
    after = taken_over(execution)
    action_resolve(
        key=f"{after.ref}:deposit", user=people["operator"].user, outcome="succeeded", evidence="on the statement"
    )
    done = taken_over(after)
    assert done.status == Status.COMPLETED, done.status_reason
    assert [b["op"] for b in BANK.values()] == ["withdraw", "deposit"]


def test_a_deadline_passed_while_an_unknown_withdrawal_waits_to_be_reconciled_waits_for_a_person(people):
    """The sweeper's deadline for a retry that would reconcile an unknown outcome: the
    withdrawal may have happened, so not ``failed``; a retry with nothing in doubt still fails."""
    from executions.engine import sweeper
    from executions.services import execution_start

    DEPOSITS["lossy-1"] = "lose"
    lossy, _ = execution_start(user=people["requester"].user, workflow="transfer", input={"from_account": "lossy-1"})
    DEPOSITS["flaky-1"] = "flaky"
    flaky, _ = execution_start(user=people["requester"].user, workflow="transfer", input={"from_account": "flaky-1"})
    for execution in (lossy, flaky):
        after = taken_over(execution)
        assert after.status == Status.RETRY_PENDING, after.status_reason
    Execution.objects.filter(pk__in=[lossy.pk, flaky.pk]).update(deadline=Now() - timedelta(seconds=1))
    stopped = sweeper.sweep().past_deadline
    assert flaky.pk in stopped and lossy.pk not in stopped
    # Due now, not failed (a later sweep before a worker claims it changes nothing): the
    # worker that claims it stops it for a person.
    due = Execution.objects.get(pk=lossy.pk).due_at
    assert not sweeper.past_deadline_query().filter(pk=lossy.pk).exists()  # handed over: out of the batch
    assert lossy.pk not in sweeper.sweep().past_deadline
    again = Execution.objects.get(pk=lossy.pk)
    assert again.status == Status.RETRY_PENDING and again.due_at == due  # made due once, not at every sweep
    waits = taken_over(lossy)
    assert waits.status == Status.NEEDS_ATTENTION and waits.reason_code == "unknown_outcome", waits.status_reason
    assert f"the outcome of {waits.ref}:withdraw unknown" in waits.status_reason
    failed = Execution.objects.get(pk=flaky.pk)
    assert failed.status == Status.FAILED and failed.reason_code == "deadline_passed"


def test_an_overrun_with_an_attempt_left_is_reconciled_under_its_key_and_completes(people):
    """The overrun's action is unknown and the next attempt re-sends it under its key (the
    provider de-duplicates): one charge, completed, no person needed."""
    from executions.services import execution_start
    from tests.support.answering_flow import PROVIDER

    PROVIDER.clear()
    execution, _ = execution_start(user=people["requester"].user, workflow="answering", input={"mode": "die_once"})
    with pytest.raises(SystemExit):
        for _ in range(5):
            runner.advance(execution.pk, worker="worker:died")
    Execution.objects.filter(pk=execution.pk).update(
        step_deadline=Now() - timedelta(seconds=5), lease_expires_at=Now() - timedelta(seconds=1)
    )
    after = taken_over(execution)
    assert after.status == Status.RETRY_PENDING, after.status_reason
    assert Action.objects.get(key=f"{after.ref}:charge").status == "unknown"
    Execution.objects.filter(pk=after.pk).update(due_at=Now())
    done = taken_over(after)
    assert done.status == Status.COMPLETED, done.status_reason
    charge = Action.objects.get(key=f"{done.ref}:charge")
    assert charge.status == "succeeded" and charge.receipt == {"charged": charge.key} and charge.attempts == 2
    assert PROVIDER[charge.key] == ["die_once", "die_once"]  # asked again under its key: one charge
    PROVIDER.clear()
