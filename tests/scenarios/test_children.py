"""Child executions (issue 21, docs/design.md §4 "Children and routes", §6 "Agents and children")
on real processes: a parent's step starts its children in the transaction that parks it,
waits without a worker, wakes when they end (or the sweeper wakes it), reads their
outputs; a failed child needs a person; a cancel cascades. S33, S34, S35."""

from __future__ import annotations

import pytest
from django.test import Client

from approvals.models import ApprovalRequest
from executions.models import Execution, ExecutionEvent, StepRun
from tests.support.procs import wait_for
from tests.support.stack import pk, wait_status

MODULES = "workflows.monthly_report,workflows.quarterly_report,tests.support.family_flow"
ENV = {"RUNTIME_WORKFLOW_MODULES": MODULES}


def start(api, workflow: str, **input) -> str:
    answer = api.post("/executions", {"workflow": workflow, "input": input})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def children_of(ref: str) -> list[Execution]:
    return list(Execution.objects.filter(parent_id=pk(ref)).order_by("child_key"))


def wakes(ref: str) -> list[ExecutionEvent]:
    return list(ExecutionEvent.objects.filter(execution_id=pk(ref), type="transition", payload__transition="wake"))


def test_a_parent_starts_its_children_waits_without_a_worker_and_reads_their_outputs(stack, people, api_as):
    stack.up(**ENV)
    requester = api_as(people["requester"])
    ref = start(requester, "family_parent", labels=["a", "b", "c"])
    done = wait_status(requester, ref, "completed")

    assert StepRun.objects.get(execution_id=pk(ref), step="sum_up").output == {"heard": {"a": "A", "b": "B", "c": "C"}}
    kids = children_of(ref)
    assert [(c.child_key, c.parent_step, c.status, c.workflow) for c in kids] == [
        (key, "kids", "completed", "family_child") for key in "abc"
    ]
    # The API: children with the step that started each; each child names its parent.
    assert done["parent"] is None
    assert done["children"] == [
        {"id": c.ref, "workflow": "family_child", "status": "completed", "step": "kids"}
        for c in sorted(kids, key=lambda c: c.pk)
    ]
    assert requester.execution(kids[0].ref)["parent"] == {"id": ref, "step": "kids"}
    listed = requester.get(f"/executions?parent={ref}").json()["items"]
    assert sorted(item["id"] for item in listed) == sorted(c.ref for c in kids)
    assert requester.get("/executions?parent=nonsense").status_code == 422
    # Parked once (the children started in that transaction), woken once, by a child.
    [started] = ExecutionEvent.objects.filter(execution_id=pk(ref), type="children.started")
    assert sorted(started.payload["started"]) == ["a", "b", "c"]
    [wake] = wakes(ref)
    assert wake.actor_label.startswith("child:RUN_")
    waited = ExecutionEvent.objects.filter(execution_id=pk(ref), type="transition", to_status="waiting").get()
    assert waited.actor_label  # the worker parked it and let it go (no lease held while waiting)


@pytest.mark.own_stack
def test_s33_worker_killed_right_after_the_checkpoint_that_starts_the_children(stack, people, api_as):
    """S33: SIGKILL the worker right after the parent's checkpoint that starts its
    children: each child exists exactly once, and the parent still finishes."""
    doomed = stack.up(workers=("doomed",), worker_env={"RUNTIME_FAILPOINTS": "after_step:kids=pause"}, **ENV).worker
    requester = api_as(people["requester"])
    ref = start(requester, "family_parent", labels=["a", "b", "c"])
    wait_for(lambda: stack.failpoint_reached("after_step:kids"), what="the parent to park at its children step")
    assert sorted(c.child_key for c in children_of(ref)) == ["a", "b", "c"]
    doomed.kill()

    stack.worker("survivor", **ENV)
    wait_status(requester, ref, "completed")
    kids = children_of(ref)
    assert [(c.child_key, c.status) for c in kids] == [("a", "completed"), ("b", "completed"), ("c", "completed")]
    for key in "abc":  # one child per parent step and key, ever
        assert Execution.objects.filter(parent_id=pk(ref), parent_step="kids", child_key=key).count() == 1
    assert ExecutionEvent.objects.filter(execution_id=pk(ref), type="children.started").count() == 1
    assert StepRun.objects.filter(execution_id=pk(ref), step="sum_up", outcome="succeeded").count() == 1


@pytest.mark.own_stack
def test_s34_a_child_completes_while_no_worker_is_alive_and_the_sweeper_wakes_the_parent(stack, people, api_as):
    """S34: the worker dies right after the commit that completed the child, before it
    could wake the parent; with no worker alive nothing moves; once a worker runs, the
    sweeper wakes the parent, once."""
    doomed = stack.up(workers=("doomed",), worker_env={"RUNTIME_FAILPOINTS": "before_parent_wake=crash"}, **ENV).worker
    requester = api_as(people["requester"])
    ref = start(requester, "family_parent", labels=["solo"])
    wait_for(lambda: stack.failpoint_reached("before_parent_wake"), what="the child to complete")
    wait_for(lambda: not doomed.alive(), what="the worker to die")
    [child] = children_of(ref)
    assert child.status == "completed"
    assert Execution.objects.get(pk=pk(ref)).status == "waiting" and wakes(ref) == []

    stack.worker("after", **ENV)
    wait_status(requester, ref, "completed")
    [wake] = wakes(ref)
    assert wake.actor_label == "sweeper"
    assert StepRun.objects.get(execution_id=pk(ref), step="sum_up").output == {"heard": {"solo": "SOLO"}}


def test_s35_cancel_a_parent_with_three_live_children_cancels_every_one_and_no_child_effect_follows(
    stack, people, api_as
):
    """S35: cancel a quarterly report while its three monthly reports await approval:
    every child is cancelled (one audited transition each), nothing is published."""
    stack.up(**ENV)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start(requester, "quarterly_report", quarter="2026-Q3")
    wait_status(requester, ref, "waiting")
    kids = wait_for(
        lambda: len(k := children_of(ref)) == 3 and all(c.status == "awaiting_approval" for c in k) and k,
        what="three monthly reports awaiting approval",
    )
    assert [c.child_key for c in kids] == ["2026-07", "2026-08", "2026-09"]
    pending = {c.ref: requester.execution(c.ref)["pending_approval"] for c in kids}

    cancelled = requester.post(f"/executions/{ref}/cancel", {"reason": "the board moved the meeting"})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert {c["status"] for c in cancelled.json()["children"]} == {"cancelled"}
    parent_cancel = ExecutionEvent.objects.get(execution_id=pk(ref), type="transition", to_status="cancelled")
    assert sorted(parent_cancel.payload["cancelled_children"]) == sorted(c.ref for c in kids)
    for child in kids:
        [event] = ExecutionEvent.objects.filter(execution_id=child.pk, type="transition", to_status="cancelled")
        assert event.actor.get_username() == "requester"
        assert f"its parent {ref} was cancelled" in event.payload["reason"]
        assert event.id > parent_cancel.id
        # The child's approval was withdrawn: approving it now is refused and publishes nothing.
        assert manager.decide(child.ref, pending[child.ref]).status_code == 409
    assert ApprovalRequest.objects.filter(execution__parent_id=pk(ref), status="pending").count() == 0
    stack.wait_sweeps(2)
    stats = stack.sandbox_stats()
    assert stats["endpoints"].get("/reports/publish", {"effects": 0})["effects"] == 0


def test_a_failed_child_suggests_its_restart_and_the_parent_follows_it_without_a_resume(stack, people, api_as):
    """Issue 39 item 1: a parent stopped by a failed child suggests what works —
    restart that child (``restart``), as the list, the API and the resume preview
    say — never a resume the API refuses; restarting the child takes the parent along
    (resumed in the restart's transaction, it waits for the restart and is woken by
    it), so the parent completes with no further act."""
    stack.up(**ENV)
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    ref = start(requester, "family_parent", labels=["a", "b"], fail=["b"])
    stuck = wait_status(requester, ref, "needs_attention")
    failed = Execution.objects.get(parent_id=pk(ref), child_key="b")
    assert failed.status == "failed"
    assert stuck["stuck"]["reason"] == "child_failed" and stuck["stuck"]["action"] == "restart"
    assert f"child {failed.ref} (family_child, key b) failed at work" in stuck["stuck"]["detail"]
    assert f"restart it from work (POST /api/executions/{failed.ref}/restart" in stuck["stuck"]["detail"]
    assert failed.ref in stuck["status_reason"] and "key b" in stuck["status_reason"]
    listed = requester.get("/executions?reason=child_failed").json()["items"][0]
    assert listed["id"] == ref and listed["stuck"]["action"] == "restart"

    # A resume is refused, and the refusal and the preview name the act that works instead.
    refused = operator.post(f"/executions/{ref}/resume", {"reason": "try again"})
    assert refused.status_code == 409 and f"restart it from work (POST /api/executions/{failed.ref}/restart" in (
        refused.text
    )
    preview = operator.get(f"/executions/{ref}/resume-preview").json()
    assert preview["can_resume"] is False and "this execution then waits for the restart by itself" in str(preview)
    # The suggested act, and nothing else: restart the child from the step it failed at.
    restarted = operator.post(f"/executions/{failed.ref}/restart", {"from_step": "work", "reason": "fixed"})
    assert restarted.status_code == 201, restarted.text
    wait_status(requester, ref, "completed")
    assert StepRun.objects.get(execution_id=pk(ref), step="sum_up").output == {"heard": {"a": "A", "b": "B"}}
    [follow] = ExecutionEvent.objects.filter(execution_id=pk(ref), type="transition", payload__transition="resume")
    assert follow.actor.get_username() == "operator"
    assert follow.payload["reason"] == f"follows {restarted.json()['id']}, the restart of its child {failed.ref}"


def test_a_rejected_child_suggests_cancelling_the_parent_and_the_cancel_works(stack, people, api_as):
    """Issue 39 item 1: a monthly report rejected by its manager is cancelled, which no
    restart continues: the quarterly report suggests (and says) cancel, and cancelling it works."""
    stack.up(**ENV)
    requester, manager, operator = api_as(people["requester"]), api_as(people["manager"]), api_as(people["operator"])
    ref = start(requester, "quarterly_report", quarter="2026-Q3")
    kids = wait_for(
        lambda: len(k := children_of(ref)) == 3 and all(c.status == "awaiting_approval" for c in k) and k,
        what="three monthly reports awaiting approval",
    )
    rejected = kids[1]
    approval = requester.execution(rejected.ref)["pending_approval"]
    assert manager.decide(rejected.ref, approval, "reject", comment="wrong figures").status_code in (200, 202)
    stuck = wait_status(requester, ref, "needs_attention")["stuck"]
    assert stuck["reason"] == "child_failed" and stuck["action"] == "cancel", stuck
    assert f"child {rejected.ref} (monthly_report, key 2026-08) was cancelled" in stuck["detail"]
    assert "can't be restarted: cancel this execution" in stuck["detail"]
    assert operator.post(f"/executions/{ref}/resume", {"reason": "go on"}).status_code == 409
    cancelled = operator.post(f"/executions/{ref}/cancel", {"reason": "a month was rejected"})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert {c["status"] for c in cancelled.json()["children"]} == {"cancelled"}


@pytest.mark.parametrize(
    ("input", "field", "words"),
    [
        ({"child": "no_such_flow"}, "workflow", "unknown workflow 'no_such_flow'"),
        ({"extra": {"bogus": 1}}, "input.bogus", "unknown field"),
    ],
)
def test_a_child_that_cannot_start_stops_the_parents_step_with_the_422_as_evidence(
    stack, people, api_as, input, field, words
):
    stack.up(**ENV)
    requester = api_as(people["requester"])
    ref = start(requester, "family_parent", labels=["a"], **input)
    stuck = wait_status(requester, ref, "needs_attention")
    assert stuck["stuck"]["reason"] == "step_error" and "can't start child a" in stuck["status_reason"]
    run = StepRun.objects.get(execution_id=pk(ref), step="kids")
    refused = run.output["evidence"]["refused"]
    assert refused["status"] == 422 and refused["field"] == field and words in refused["detail"]
    assert children_of(ref) == []  # nothing half-started


def test_quarterly_report_from_three_approved_monthly_reports_to_one_publication(stack, people, api_as):
    stack.up(**ENV)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    refused = requester.post("/executions", {"workflow": "quarterly_report", "input": {"quarter": "2026-Q4"}})
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "input", "quarter"]
    ref = start(requester, "quarterly_report", quarter="2026-Q3")
    kids = wait_for(
        lambda: len(k := children_of(ref)) == 3 and all(c.status == "awaiting_approval" for c in k) and k,
        what="three monthly reports awaiting approval",
    )
    # The inbox names the parent of each child's approval; the parent's page shows the tree.
    browser = Client()
    browser.force_login(people["manager"].user)
    inbox = browser.get("/approvals/inbox/").content.decode()
    assert inbox.count(f'child of <a href="/executions/{ref}/">{ref}</a>') == 3, inbox
    page = browser.get(f"/executions/{ref}/").content.decode()
    assert 'id="children"' in page and all(c.ref in page for c in kids)

    for child in kids:
        assert manager.decide(child.ref, requester.execution(child.ref)["pending_approval"]).status_code == 202
    waiting = wait_status(requester, ref, "awaiting_approval", timeout=60)
    assert waiting["pending_approval"]["action"] == "publish_quarterly"
    assert manager.decide(ref, waiting["pending_approval"]).status_code == 202
    wait_status(requester, ref, "completed")

    parent = Execution.objects.get(pk=pk(ref))
    facts = parent.context["notes"]["facts"]
    for child in kids:  # each month's fact is sourced from its child's report and receipt
        assert any(f["source"].startswith(f"{child.ref}:REPORT_") for f in facts), facts
    stats = stack.sandbox_stats()
    assert stats["keys"][f"{ref}:publish:v1"]["effects"] == 1
    assert stats["endpoints"]["/reports/publish"]["effects"] == 4  # three months and the quarter, once each
