"""Recovery scenarios of docs/scenarios.md on real processes: PostgreSQL, Redis, Celery
workers (SIGKILLed where a crash is the point), beat, the web server and the sandbox."""

from __future__ import annotations

import threading

import pytest

from approvals.models import ApprovalRequest, Decision
from executions.authoring import notes as notes_module
from executions.models import Execution, ExecutionEvent, ModelCall, Status, StepRun
from executions.tasks import advance
from tests.support.procs import stop_together, wait_for
from tests.support.stack import pk, wait_status


def succeeded_runs(ref: str, step: str) -> int:
    return StepRun.objects.filter(execution_id=pk(ref), step=step, outcome="succeeded").count()


@pytest.mark.own_stack
def test_s01_worker_killed_after_analyze_resumes_at_next_step(stack, people, api_as):
    """S01: SIGKILL the worker after "analyze" finished."""
    doomed = stack.up(workers=("doomed",), worker_env={"RUNTIME_FAILPOINTS": "before_step:draft_report=pause"}).worker
    requester = api_as(people["requester"])
    ref = requester.start()["id"]

    wait_for(lambda: stack.failpoint_reached("before_step:draft_report"), what="the worker to finish analyze")
    assert succeeded_runs(ref, "analyze") == 1
    doomed.kill()  # SIGKILL right after analyze was checkpointed, before draft_report

    stack.worker("survivor")
    wait_status(requester, ref, "awaiting_approval")

    for step in ("retrieve_figures", "analyze", "draft_report"):
        assert succeeded_runs(ref, step) == 1, step
    analyze = StepRun.objects.get(execution_id=pk(ref), step="analyze")
    [call] = ModelCall.objects.filter(execution_id=pk(ref), step="analyze")  # the model was asked once, ever
    assert (call.key, call.model, call.prompt_version) == (
        f"{ref}:analyze:r1:c1",
        "offline-deterministic-1",
        "monthly-analysis-v1",
    )
    assert analyze.output["model_calls"] == [
        {"key": call.key, "model": call.model, "prompt_version": call.prompt_version}
    ]
    draft = StepRun.objects.get(execution_id=pk(ref), step="draft_report")
    assert draft.worker != analyze.worker and draft.lease_token > analyze.lease_token
    takeover = ExecutionEvent.objects.get(execution_id=pk(ref), type="lease.taken_over")
    assert takeover.payload["previous_owner"] == analyze.worker


@pytest.mark.own_stack
def test_s02_restart_every_process_while_awaiting_approval(stack, people, api_as):
    """S02: restart web, worker and beat while awaiting approval."""
    sandbox = stack.sandbox()
    procs = stack.up().all()
    requester = api_as(people["requester"])
    ref = requester.start()["id"]
    before = wait_status(requester, ref, "awaiting_approval")

    for proc in procs:
        proc.kill()
    procs = stack.up(workers=("w2",)).all()  # a deploy: everything new

    manager, requester = api_as(people["manager"]), api_as(people["requester"])
    after = requester.execution(ref)
    assert after["status"] == "awaiting_approval"
    assert after["pending_approval"] == before["pending_approval"]
    request = ApprovalRequest.objects.get(pk=before["pending_approval"]["id"])
    assert request.status == ApprovalRequest.State.PENDING

    assert manager.decide(ref, after["pending_approval"]).status_code == 202
    done = wait_status(requester, ref, "completed")
    assert done["artifacts"] == before["artifacts"]  # the same artifact version was published
    publish = next(a for a in done["actions"] if a["type"] == "publish_report")
    assert publish["key"] == f"{ref}:publish:v1"
    assert stack.sandbox_stats()["keys"][publish["key"]]["effects"] == 1
    assert sandbox.alive()


def test_s03_the_same_approval_submitted_twice_is_processed_once(stack, people, api_as):
    """S03: the same approval submitted twice (double click, API retry, two tabs)."""
    stack.up()
    requester, manager, manager2 = api_as(people["requester"]), api_as(people["manager"]), api_as(people["manager2"])
    ref = requester.start()["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]

    # API retry / double click: the same event_id twice gives the same answer.
    first = manager.decide(ref, approval, event_id="click-1")
    second = manager.decide(ref, approval, event_id="click-1")
    assert first.status_code == second.status_code == 202
    assert first.json() == second.json()

    # Another tab (a new event id) and another manager: refused with the first decision.
    third = manager2.decide(ref, approval, event_id="tab-2", decision="reject")
    assert third.status_code == 409
    assert third.json()["existing"] == {"decision": "approve", "decided_by": "manager", "event_id": "click-1"}

    wait_status(requester, ref, "completed")
    assert Decision.objects.filter(request_id=approval["id"]).count() == 1
    resumed = ExecutionEvent.objects.filter(
        execution_id=pk(ref), type="transition", payload__transition="resume_after_decision"
    )
    assert resumed.count() == 1
    assert stack.sandbox_stats()["keys"][f"{ref}:publish:v1"]["effects"] == 1


def test_s03_concurrent_identical_approvals_from_two_threads(stack, people, api_as):
    """S03: the same approval submitted twice (double click, API retry, two tabs)."""
    stack.up()
    requester = api_as(people["requester"])
    ref = requester.start()["id"]
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    answers = []
    barrier = threading.Barrier(4)

    def click(person, event_id):
        client = api_as(person)
        barrier.wait()
        answers.append(client.decide(ref, approval, event_id=event_id))

    threads = [
        threading.Thread(target=click, args=(people[name], f"evt-{i}"))
        for i, name in enumerate(["manager", "manager2", "manager", "manager2"])
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    codes = sorted(a.status_code for a in answers)
    assert codes == [202, 409, 409, 409], [a.text for a in answers]
    assert Decision.objects.filter(request_id=approval["id"]).count() == 1
    resumed = ExecutionEvent.objects.filter(execution_id=pk(ref), payload__transition="resume_after_decision")
    assert resumed.count() == 1


@pytest.mark.own_stack
def test_s13_duplicate_messages_two_workers_one_runs_each_step(stack, people, api_as):
    """S13: two workers get the same execution at once (duplicate Celery message)."""
    slow = "before_step:retrieve_figures=sleep:1.5,before_step:publish=sleep:1.5"
    stack.up(beat=False, workers=("a", "b"), worker_env={"RUNTIME_FAILPOINTS": slow})
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = requester.start()["id"]
    for _ in range(4):  # the same doorbell rung again and again: both workers get messages
        advance.delay(pk(ref))
    approval = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert manager.decide(ref, approval).status_code == 202
    for _ in range(4):
        advance.delay(pk(ref))
    wait_status(requester, ref, "completed")

    runs = StepRun.objects.filter(execution_id=pk(ref))
    assert [r.step for r in runs] == ["retrieve_figures", "analyze", "draft_report", "review", "publish", "notify"]
    assert all(r.outcome == "succeeded" and r.attempt == 1 for r in runs)
    assert not ExecutionEvent.objects.filter(execution_id=pk(ref), type="lease.taken_over").exists()
    assert stack.sandbox_stats()["keys"][f"{ref}:publish:v1"] == {"calls": 1, "effects": 1}


def test_s13_two_claims_at_the_same_instant_one_wins(people, transactional_db):
    """S13: two workers get the same execution at once (duplicate Celery message)."""
    from django.db import connection

    from executions.engine.leases import acquire

    execution = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={"month": "2026-08"},
        input_digest="d",
        created_by=people["requester"].user,
        current_step="retrieve_figures",
    )
    barrier = threading.Barrier(8)
    leases = []

    def claim(n):
        barrier.wait()
        try:
            leases.append(acquire(execution.pk, owner=f"worker-{n}"))
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [lease for lease in leases if lease is not None]
    assert len(won) == 1
    fresh = Execution.objects.get(pk=execution.pk)
    assert fresh.status == Status.RUNNING and fresh.lease_token == 1 and fresh.lease_owner == won[0].owner


@pytest.mark.own_stack
def test_s19_old_executions_finish_on_their_pinned_version(stack, people, api_as):
    """S19: a new workflow version is deployed while executions of the old one wait."""
    procs = stack.up(beat=False).all()
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    old_ref = requester.start()["id"]
    old = wait_status(requester, old_ref, "awaiting_approval")
    assert old["workflow_version"] == 1

    # Deploy version 2 (it adds a step) while the old execution waits.
    stop_together(*procs)
    deploy = {"RUNTIME_WORKFLOW_MODULES": "workflows.monthly_report,tests.support.monthly_report_v2"}
    stack.up(beat=False, workers=("v2",), **deploy)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])

    new_ref = requester.start("2026-09")["id"]
    new = wait_status(requester, new_ref, "awaiting_approval")
    assert new["workflow_version"] == 2

    for ref, body in ((old_ref, old), (new_ref, new)):
        assert manager.decide(ref, body["pending_approval"]).status_code == 202
    wait_status(requester, old_ref, "completed")
    wait_status(requester, new_ref, "completed")

    old_steps = list(StepRun.objects.filter(execution_id=pk(old_ref)).values_list("step", "workflow_version"))
    assert old_steps == [(s, 1) for s in ["retrieve_figures", "analyze", "draft_report", "review", "publish", "notify"]]
    new_steps = [s for s, _ in StepRun.objects.filter(execution_id=pk(new_ref)).values_list("step", "workflow_version")]
    assert "board_summary" in new_steps


@pytest.mark.own_stack
def test_s12_a_fresh_worker_builds_the_prompt_with_every_constraint_and_fact(stack, people, api_as):
    """S12: a fresh worker/model context picks up mid-task ("restart after context compaction").

    Strict: the facts verified by an earlier step (retrieve_figures, by the worker that
    then dies) reach the prompt of the later model step, built by a fresh worker from
    the database alone, with every mandatory constraint verbatim."""
    doomed = stack.up(workers=("doomed",), worker_env={"RUNTIME_FAILPOINTS": "before_step:analyze=pause"}).worker
    requester = api_as(people["requester"])
    constraints = ["Keep the summary under 120 words", "Name the weakest store"]
    response = requester.post(
        "/executions", {"workflow": "monthly_report", "input": {"month": "2026-08", "constraints": constraints}}
    )
    ref = response.json()["id"]
    wait_for(lambda: stack.failpoint_reached("before_step:analyze"), what="the first context to reach analyze")
    verified = Execution.objects.get(pk=pk(ref)).context["notes"]["facts"]  # committed by retrieve_figures
    assert len(verified) == 8 and all(f["source"].startswith("retail_snapshot_v1:2026-08:") for f in verified)
    assert not ModelCall.objects.filter(execution_id=pk(ref)).exists()
    doomed.kill()  # the first context is gone: only what the database holds survives

    stack.worker("fresh")
    wait_status(requester, ref, "awaiting_approval")
    analyze = StepRun.objects.get(execution_id=pk(ref), step="analyze")
    assert analyze.worker != StepRun.objects.get(execution_id=pk(ref), step="retrieve_figures").worker
    [call] = ModelCall.objects.filter(execution_id=pk(ref), step="analyze")
    assert call.worker == analyze.worker  # asked by the fresh worker, from the database alone
    prompt = call.request["messages"][0]["content"]
    notes = Execution.objects.get(pk=pk(ref)).context["notes"]
    assert notes["requested"] == constraints  # the requester's words, as quoted data (docs/agents.md)
    assert notes["constraints"] and not set(constraints) & set(notes["constraints"])
    for constraint in notes["constraints"]:
        assert f"- MUST: {constraint}\n" in prompt  # verbatim, each on its own line
    for constraint in constraints:
        assert f"\n> - {constraint}" in prompt.split(notes_module.REQUESTED_HEADING)[1]  # verbatim, quoted
    for fact in verified:
        assert f"- [{fact['id']}] {fact['statement']} (source: {fact['source']})" in prompt
    assert "retrieve_figures" in prompt  # completed steps are part of the working view
