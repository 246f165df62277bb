"""Issue 22, holds on real processes: S40 (pause while a step runs) and S41 (a workflow's
kill switch with 20 live executions). Real workers, beat, web and the sandbox; the
sandbox's ``_stats`` count the effects."""

from __future__ import annotations

import pytest

from approvals.services import approval_decide
from executions import selectors, services
from executions.engine import gates
from executions.models import Action, Execution, StepRun
from tests.support.procs import wait_for
from tests.support.stack import ADVANCE_DONE, pk, wait_status

PUBLISH = "/reports/publish"


def succeeded_steps(ref: str) -> list[str]:
    return list(
        StepRun.objects.filter(execution_id=pk(ref), outcome="succeeded").order_by("id").values_list("step", flat=True)
    )


def let_go(ref: str) -> bool:
    row = Execution.objects.get(pk=pk(ref))
    return row.status == "paused" and row.lease_owner == ""


@pytest.mark.own_stack
def test_s40_pause_while_a_step_runs_checkpoints_it_then_nothing_runs_and_resume_completes(stack, people, api_as):
    """S40: pause while a step runs → the step checkpoints, nothing after it runs, no
    effect call while paused (checked at the effect), resume completes with each effect once.
    Also: a decision on a paused execution's approval is refused (409) until it is resumed."""
    slow = "before_step:retrieve_figures=sleep:2,before_step:publish=sleep:2"
    worker = stack.up(worker_env={"RUNTIME_FAILPOINTS": slow}).worker
    requester, manager, operator = api_as(people["requester"]), api_as(people["manager"]), api_as(people["operator"])
    ref = requester.start()["id"]

    # 1. Paused while retrieve_figures runs: it finishes and checkpoints, the worker lets go, nothing after it runs.
    wait_for(lambda: stack.failpoint_reached("before_step:retrieve_figures"), what="the worker to be in the step")
    answer = operator.post(f"/executions/{ref}/pause", {"reason": "the data warehouse is being reloaded"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "paused" and answer.json()["paused_from"] == "running"
    wait_for(lambda: let_go(ref), timeout=20, what="the worker to checkpoint the step and let go")
    assert succeeded_steps(ref) == ["retrieve_figures"]
    row = Execution.objects.get(pk=pk(ref))
    assert row.current_step == "analyze" and "retrieve_figures" in row.outputs()
    stack.wait_sweeps(3)  # sweeps and any stray messages: still nothing runs
    assert succeeded_steps(ref) == ["retrieve_figures"] and requester.execution(ref)["status"] == "paused"
    body = operator.get(f"/executions/{ref}/resume-preview").json()
    assert body["can_resume"] is True and body["hold"]["paused_from"] == "running"
    assert [s["plan"] for s in body["steps"]][:2] == ["skip", "run"]

    assert operator.post(f"/executions/{ref}/resume", {"reason": "reload done"}).status_code == 200
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert succeeded_steps(ref) == ["retrieve_figures", "analyze", "draft_report"]  # none ran twice

    # 2. Paused at the approval: a decision is refused while paused, and taken once resumed.
    assert operator.post(f"/executions/{ref}/pause", {"reason": "hold the publication"}).status_code == 200
    refused = manager.decide(ref, approval)
    assert refused.status_code == 409, refused.text
    assert operator.post(f"/executions/{ref}/resume", {"reason": "go on"}).json()["status"] == "awaiting_approval"

    # 3. Paused just before the publish call: no effect is called while paused.
    assert manager.decide(ref, approval).status_code == 202
    wait_for(lambda: stack.failpoint_reached("before_step:publish"), what="the worker to be about to publish")
    advanced = worker.count(ADVANCE_DONE)
    assert operator.post(f"/executions/{ref}/pause", {"reason": "the publisher misbehaves"}).status_code == 200
    wait_for(lambda: worker.count(ADVANCE_DONE) > advanced, timeout=20, what="the worker to wake and end its task")
    wait_for(lambda: let_go(ref), timeout=10, what="the worker to let go")
    stack.wait_sweeps(2)
    assert PUBLISH not in stack.sandbox_stats()["endpoints"]
    assert Action.objects.get(key=f"{ref}:publish:v1").status == Action.State.APPROVED  # never begun

    assert operator.post(f"/executions/{ref}/resume", {"reason": "publisher fixed"}).status_code == 200
    wait_status(requester, ref, "completed")
    stats = stack.sandbox_stats()
    assert stats["keys"][f"{ref}:publish:v1"] == {"calls": 1, "effects": 1}
    assert all(v["effects"] == 1 for k, v in stats["keys"].items() if k.startswith(ref))


def test_s41_kill_switch_with_20_live_executions_pauses_them_at_a_boundary_and_resume_completes_all(
    stack, people, api_as
):
    """S41: a workflow's kill switch with 20 live executions → the running ones pause at a
    step boundary, the pending ones stay pending, none is lost; resuming the workflow
    completes them all with each effect once."""
    stack.up(workers=2, worker_env={"RUNTIME_FAILPOINTS": "before_step:draft_report=sleep:1"})
    operator = api_as(people["operator"])
    # Started and decided in-process (the same services as the API), so the test's time is the workers'.
    user = people["requester"].user
    months = [f"2026-{n % 10 + 1:02d}" for n in range(20)]
    refs = [
        services.execution_start(user=user, workflow="monthly_report", input={"month": m}, idempotency_key=f"s41-{n}")[
            0
        ].ref
        for n, m in enumerate(months)
    ]
    wait_for(
        lambda: StepRun.objects.filter(execution_id__in=map(pk, refs), outcome="succeeded").exists(),
        what="the first steps to run",
    )
    item = operator.post("/workflows/monthly_report/pause", {"reason": "publisher incident"})
    assert item.status_code == 200 and item.json()["paused"] is True

    def settled() -> bool:  # no worker holds any of them, none is running
        rows = Execution.objects.filter(pk__in=map(pk, refs))
        return not rows.filter(status="running").exists() and not rows.exclude(lease_owner="").exists()

    wait_for(settled, timeout=30, what="every running execution to pause at a step boundary")
    stack.wait_sweeps(2)
    statuses = dict(Execution.objects.filter(pk__in=map(pk, refs)).values_list("pk", "status"))
    assert len(statuses) == 20 and set(statuses.values()) <= {"pending", "paused", "awaiting_approval"}
    paused = Execution.objects.filter(pk__in=map(pk, refs), status="paused")
    assert paused.exists() and all(e.paused_by_workflow and e.paused_from == "running" for e in paused)
    before = {ref: succeeded_steps(ref) for ref in refs}
    stack.wait_sweeps(2)
    assert {ref: succeeded_steps(ref) for ref in refs} == before  # nothing ran while the switch was thrown

    assert operator.post("/workflows/monthly_report/resume", {"reason": "incident closed"}).json()["paused"] is False
    rows = Execution.objects.filter(pk__in=[pk(ref) for ref in refs])
    wait_for(lambda: rows.filter(status="awaiting_approval").count() == 20, timeout=60, what="all 20 to be drafted")
    for execution in rows:
        approval = selectors.approval_payload(gates.pending_of(execution))
        approval_decide(
            user=people["manager"].user,
            execution_ref=execution.ref,
            approval_id=approval["id"],
            decision="approve",
            artifact_version=approval["artifact_version"],
            content_sha256=approval["content_sha256"],
            event_id=f"s41-{execution.ref}",
        )
    wait_for(lambda: rows.filter(status="completed").count() == 20, timeout=60, what="all 20 to complete")
    keys = stack.sandbox_stats()["keys"]
    assert all(keys[f"{ref}:publish:v1"] == {"calls": 1, "effects": 1} for ref in refs)
    for ref in refs:  # every step ran once
        steps = succeeded_steps(ref)
        assert len(steps) == len(set(steps)), (ref, steps)
