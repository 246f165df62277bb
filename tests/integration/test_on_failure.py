"""An effect refused for good goes on at its ``on_failure`` step (Temporal's money
transfer: the deposit refused, the withdrawal refunded), in the same commit as the
failed attempt; its output says why, the ledger keeps the effect ``failed``, and the
page draws the edge. An unknown outcome never goes that way: it may have happened.
In process (the steps run here, ``runner.advance``)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from approvals.models import ApprovalRequest
from executions.models import Action, Execution, Status, StepRun
from executions.services import action_resolve, execution_start
from tests.support.browsing import approve
from tests.support.in_process import run_here
from tests.support.transfer_flow import BANK, DEPOSITS
from triage.preview import resume_preview
from triage.replay import replay_one

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("bank")]


def transferred(people, to_account: str) -> Execution:
    execution, _ = execution_start(
        user=people["requester"].user, workflow="transfer", input={"to_account": to_account, "amount_cents": 2500}
    )
    return advanced(execution)


def advanced(execution: Execution) -> Execution:
    return run_here(execution, worker="worker:test-on-failure")


def ledger(execution: Execution) -> dict[str, str]:
    return dict(Action.objects.filter(execution=execution).values_list("key", "status"))


def assert_refunded(done: Execution) -> None:
    """Completed after the deposit failed: withdrawn once and refunded once, at the bank too."""
    assert done.status == Status.COMPLETED, done.status_reason
    assert ledger(done) == {
        f"{done.ref}:withdraw": "succeeded",
        f"{done.ref}:deposit": "failed",
        f"{done.ref}:refund": "succeeded",
    }
    assert [b["op"] for k, b in BANK.items() if k.startswith(f"{done.ref}:")] == ["withdraw", "refund"]


def test_a_deposit_refused_for_good_goes_on_at_the_refund_once(people):
    done = transferred(people, "B-2")
    assert done.status == Status.COMPLETED
    assert [b["op"] for b in BANK.values()] == ["withdraw", "deposit"]

    DEPOSITS["closed-1"] = "refuse"
    refunded = transferred(people, "closed-1")
    assert refunded.status == Status.COMPLETED, refunded.status_reason
    ref = refunded.ref
    assert ledger(refunded) == {
        f"{ref}:withdraw": "succeeded",
        f"{ref}:deposit": "failed",
        f"{ref}:refund": "succeeded",
    }
    assert [b["op"] for k, b in BANK.items() if k.startswith(ref)] == ["withdraw", "refund"]
    went = refunded.outputs()["deposit"]["failed"]
    assert went == {"kind": "invalid_input", "error": "account closed-1 is closed", "attempt": 1}
    runs = list(StepRun.objects.filter(execution=refunded, step="deposit").values_list("outcome", "error"))
    assert runs == [("failed", "invalid_input: account closed-1 is closed"), ("succeeded", "")]

    assert replay_one(refunded)["verdict"] == "ok", replay_one(refunded)  # the path its outputs say: deposit → refund

    operator = Client()
    operator.force_login(people["operator"].user)
    page = operator.get(f"/executions/{ref}/")
    html = page.content.decode()
    assert page.status_code == 200 and "on failure" in html  # the graph's edge
    assert "Step completed (it failed for good: on_failure): Depositing" in html
    assert "invalid_input: account closed-1 is closed (attempt 1)" in html.split('id="timeline-card"')[1]
    attempts = html.split('id="attempts"')[1].split("</table>")[0]
    assert attempts.count("Depositing") == 1 and "account closed-1 is closed" in attempts  # its one attempt


def test_retries_run_out_go_on_too_but_an_unknown_outcome_waits_for_a_person(people):
    DEPOSITS["flaky-1"] = "flaky"
    flaky = transferred(people, "flaky-1")
    assert flaky.status == Status.COMPLETED and flaky.outputs()["deposit"]["failed"]["kind"] == "transient"

    DEPOSITS["lost-1"] = "lose"
    lost = transferred(people, "lost-1")
    assert lost.status == Status.NEEDS_ATTENTION and lost.reason_code == "unknown_outcome", lost.status_reason
    assert ledger(lost)[f"{lost.ref}:deposit"] == "unknown" and f"{lost.ref}:refund" not in ledger(lost)
    plan = resume_preview(lost)  # its outcome first: a person reconciles it, then either way
    deposit = next(entry for entry in plan["steps"] if entry["step"] == "deposit")
    assert not plan["can_resume"] and deposit["plan"] == "blocked", plan


def test_a_run_out_deposit_at_a_bank_that_ignores_keys_fails_and_a_receipt_naming_a_failure_is_a_success(people):
    """Retries run out where a 503 may have come after the bank acted: no refund on a
    guess (the execution fails, as without on_failure). A receipt with a "failed" field
    is the provider's answer, not the runtime's failure: the workflow goes on as usual."""
    DEPOSITS["nodedup-1"] = "flaky"
    unsure = transferred(people, "nodedup-1")
    assert unsure.status == Status.FAILED and f"{unsure.ref}:refund" not in ledger(unsure), unsure.status_reason

    DEPOSITS["partly-1"] = "partly"
    partly = transferred(people, "partly-1")
    assert partly.status == Status.COMPLETED
    assert ledger(partly) == {f"{partly.ref}:withdraw": "succeeded", f"{partly.ref}:deposit": "succeeded"}


def test_an_unknown_deposit_an_operator_resolves_as_failed_goes_on_at_the_refund(people):
    """The outcome a person established is the effect's: resolved as failed, the deposit
    is never sent again under its key and the execution goes on at its on_failure."""
    DEPOSITS["lost-2"] = "lose"
    lost = transferred(people, "lost-2")
    assert lost.status == Status.NEEDS_ATTENTION
    DEPOSITS.pop("lost-2")  # the bank would take it now: it must not be asked again
    operator = Client()
    operator.force_login(people["operator"].user)
    said = operator.post(
        f"/executions/{lost.ref}/resolve/",
        {"key": f"{lost.ref}:deposit", "outcome": "failed", "evidence": "the bank has no such deposit"},
        follow=True,
    ).content.decode()
    assert "goes on at the step its effect names for a failure (on_failure)" in said
    assert "check there before a restart" not in said
    plan = resume_preview(Execution.objects.get(pk=lost.pk))  # what the resume it made will do
    deposit = next(entry for entry in plan["steps"] if entry["step"] == "deposit" and entry["plan"] == "run")
    assert deposit["why"].endswith("was resolved as failed by an operator: it is not sent again; goes on at refund")
    assert not next(e for e in plan["effects"] if e["key"] == f"{lost.ref}:deposit")["may_repeat"]
    done = advanced(lost)
    assert_refunded(done)
    went = done.outputs()["deposit"]["failed"]
    assert went["kind"] == "business_rejection" and "resolved as failed by operator" in went["error"], went


def test_a_deposit_resolved_as_failed_goes_on_though_its_approval_went_stale(people):
    """The approver lost the authority while the deposit's outcome was unknown: resolved
    as failed, nothing will be sent on that approval, so it no longer blocks the resume
    and the refund runs (a stale approval blocks only what it would still let through)."""
    DEPOSITS["lost-3"] = "lose"
    execution, _ = execution_start(
        user=people["requester"].user, workflow="approved_transfer", input={"to_account": "lost-3"}
    )
    advanced(execution)
    approve(people, execution, ApprovalRequest.objects.get(execution=execution, status="pending"))
    lost = advanced(execution)
    assert lost.status == Status.NEEDS_ATTENTION and ledger(lost)[f"{lost.ref}:deposit"] == "unknown"
    people["manager"].user.groups.remove(Group.objects.get(name="managers"))
    assert "manager lost the authority" in resume_preview(lost)["stale_approvals"][0]["why"]

    action_resolve(
        key=f"{lost.ref}:deposit", user=people["operator"].user, outcome="failed", evidence="no such deposit"
    )
    assert resume_preview(Execution.objects.get(pk=lost.pk))["stale_approvals"] == []
    done = advanced(lost)
    assert_refunded(done)
