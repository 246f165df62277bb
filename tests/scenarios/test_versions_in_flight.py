"""S58, versions in flight (issue 43): live executions move to a newer version of their
workflow with a preview first, and new starts roll out to a version by percentage.

Real web server, worker, beat and sandbox; monthly_report v1 as shipped, with v2 and v3
deployed beside it (tests/support/monthly_report_versions.py): v2 inserts a step after
the approval and carries a ``migrate_from``, v3 asks the approval for another action.

- a waiting execution (awaiting approval on v1) moves to v2: the preview maps it to the
  same step and plans the inserted step to run; the move keeps its approval; it
  completes on v2, the inserted step reading what ``migrate_from`` gave it;
- one whose move to v3 makes its approval stale is refused (409 naming it) until the
  operator accepts that sentence; then the request is withdrawn and the gate asks again
  for v3's action, the manager is told again, and it completes;
- ``keel migrate`` SIGKILLed during a bulk migration: what committed moved once, the rest
  didn't move; run again, each moved exactly once (one audited ``migrate`` each) and
  every execution completes with its effects once each;
- a rollout sends new starts to a version by percentage, refuses to rise while replay
  finds drift on that version, and 0 % sends them back.
"""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest
from executions.models import Action, Execution, ExecutionEvent, Rollout, StepRun
from tests.support.cli import keel
from tests.support.stack import outbox, pk, wait_for, wait_status

DEPLOYED = {"KEEL_WORKFLOW_MODULES": "tests.support.monthly_report_versions"}


def deployed(stack) -> None:
    stack.up(**DEPLOYED)


def on_v1(api_as, people, month: str) -> dict:
    """A v1 execution waiting for the manager's approval."""
    ref = api_as(people["requester"]).start(month, version=1)["id"]
    waiting = wait_status(api_as(people["requester"]), ref, "awaiting_approval")
    assert waiting["workflow_version"] == 1
    return waiting


def migrate_events(ref: str) -> list[dict]:
    events = ExecutionEvent.objects.filter(execution_id=pk(ref), type="transition", payload__transition="migrate")
    return list(events.values_list("payload", flat=True))


def published_once(stack, ref: str, version: int = 1) -> None:
    stats = stack.sandbox_stats()["keys"]
    assert stats[f"{ref}:publish:v{version}"]["effects"] == 1, stats.get(f"{ref}:publish:v{version}")


def test_s58_a_waiting_execution_moves_to_a_version_with_a_step_after_its_position(stack, people, api_as):
    deployed(stack)
    operator, manager = api_as(people["operator"]), api_as(people["manager"])
    waiting = on_v1(api_as, people, "2026-04")
    ref = waiting["id"]

    answer = operator.get(f"/executions/{ref}/migrate-preview?to=2")
    assert answer.status_code == 200, answer.text
    preview = answer.json()
    assert preview["can_migrate"] is True and preview["blocked_by"] == [], preview
    assert (preview["from"], preview["to"]) == (1, 2)
    assert preview["position"] == {"step": "review", "maps_to": "review"}
    plans = {s["step"]: s["plan"] for s in preview["steps"]}
    assert plans == {
        "retrieve_figures": "skip",
        "analyze": "skip",
        "draft_report": "skip",
        "review": "run",
        "archive_copy": "run",
        "publish": "run",
        "notify": "run",
    }, preview["steps"]
    assert preview["stale_approvals"] == [] and not any(e["may_repeat"] for e in preview["effects"])
    assert preview["replay"] == {"verdict": "ok", "findings": []}

    # Nobody but an operator; a version that isn't deployed; a move without a reason.
    assert api_as(people["manager"]).get(f"/executions/{ref}/migrate-preview?to=2").status_code == 403
    missing = operator.get(f"/executions/{ref}/migrate-preview?to=9")
    assert missing.status_code == 422 and "v9" in missing.text, missing.text
    assert operator.post(f"/executions/{ref}/migrate", {"to_version": 2}).status_code == 422

    moved = operator.post(f"/executions/{ref}/migrate", {"to_version": 2, "reason": "v2 archives a copy"})
    assert moved.status_code == 200, moved.text
    body = moved.json()
    assert (body["workflow_version"], body["status"], body["current_step"]) == (2, "awaiting_approval", "review")
    assert body["pending_approval"]["id"] == waiting["pending_approval"]["id"], "the same request still holds"
    [event] = migrate_events(ref)
    assert (event["from_version"], event["to_version"], event["reason"]) == (1, 2, "v2 archives a copy")
    audit = operator.get(f"/operator-audit?action=migrate&execution={ref}").json()["items"]
    assert [(a["action"], a["before"], a["after"], a["reason"]) for a in audit] == [
        ("migrate", "v1", "v2", "v2 archives a copy")
    ], audit
    again = operator.post(f"/executions/{ref}/migrate", {"to_version": 2, "reason": "twice"})
    assert again.status_code == 409 and "already on v2" in again.text, again.text

    assert manager.decide(ref, body["pending_approval"]).status_code == 202
    wait_status(operator, ref, "completed")
    runs = StepRun.objects.filter(execution_id=pk(ref), outcome="succeeded")
    archived = runs.get(step="archive_copy")
    assert archived.workflow_version == 2 and archived.output["currency"] == "EUR"  # migrate_from's
    assert list(runs.filter(workflow_version=1).values_list("step", flat=True)) == [
        "retrieve_figures",
        "analyze",
        "draft_report",
    ]
    published_once(stack, ref)


def test_s58_a_stale_approval_is_refused_until_accepted_then_asked_again(stack, people, api_as):
    deployed(stack)
    operator, manager = api_as(people["operator"]), api_as(people["manager"])
    waiting = on_v1(api_as, people, "2026-05")
    ref, asked = waiting["id"], waiting["pending_approval"]["id"]

    preview = operator.get(f"/executions/{ref}/migrate-preview?to=3").json()
    assert preview["can_migrate"] is False
    assert [s["approval_id"] for s in preview["stale_approvals"]] == [asked], preview
    [sentence] = [b for b in preview["blocked_by"] if f"approval #{asked}" in b]
    assert "publish_report_v3" in sentence

    refused = operator.post(f"/executions/{ref}/migrate", {"to_version": 3, "reason": "v3"})
    assert refused.status_code == 409 and f"approval #{asked}" in refused.text, refused.text
    execution = Execution.objects.get(pk=pk(ref))
    assert (execution.workflow_version, execution.status) == (1, "awaiting_approval"), "nothing moved"
    assert ApprovalRequest.objects.get(pk=asked).status == "pending"
    assert migrate_events(ref) == []

    told = len(outbox()[0].to("manager@"))
    accepted = operator.post(
        f"/executions/{ref}/migrate", {"to_version": 3, "reason": "v3 asks for its own action", "accept": [sentence]}
    )
    assert accepted.status_code == 200, accepted.text
    assert ApprovalRequest.objects.get(pk=asked).status == "withdrawn"
    [event] = migrate_events(ref)
    assert event["accepted"] == [sentence] and event["withdrawn_approvals"] == [asked]

    # The gate asks again, for v3's action, in a new round; its approver is told as for any request.
    again = wait_for(
        lambda: (e := operator.execution(ref))["status"] == "awaiting_approval" and e["pending_approval"] and e,
        timeout=60,
        what="the gate to ask again",
    )
    request = ApprovalRequest.objects.get(pk=again["pending_approval"]["id"])
    assert request.pk != asked and request.action == "publish_report_v3" and request.round == 2
    wait_for(lambda: len(outbox()[0].to("manager@")) > told, timeout=60, what="the manager told of the new request")

    assert manager.decide(ref, again["pending_approval"]).status_code == 202
    wait_status(operator, ref, "completed")
    [publish] = Action.objects.filter(execution_id=pk(ref), step="publish")
    assert (publish.type, publish.status) == ("publish_report_v3", "succeeded")
    published_once(stack, ref)


def test_s58_sigkill_during_a_bulk_migration_moves_each_execution_once(stack, people, api_as):
    deployed(stack)
    operator, manager = api_as(people["operator"]), api_as(people["manager"])
    waiting = [on_v1(api_as, people, month) for month in ("2026-01", "2026-02", "2026-03")]
    refs = [w["id"] for w in waiting]
    env = {**stack.env, **DEPLOYED}

    # Oldest first (ids as the bulk lists them, newest first): the second to move dies mid-way.
    dry = keel(env, "migrate", "--workflow", "monthly_report", "--to", "2", "--dry-run", "--as", "operator", "--json")
    assert dry.returncode == 0, dry.stderr
    order = __import__("json").loads(dry.stdout)["eligible"]
    assert sorted(order) == sorted(refs) and all(Execution.objects.get(pk=pk(r)).workflow_version == 1 for r in refs)
    crash = {**env, "RUNTIME_FAILPOINTS": f"migrate:{order[1]}=crash"}
    killed = keel(
        crash, "migrate", "--workflow", "monthly_report", "--to", "2", "--reason", "to v2", "--as", "operator"
    )
    assert killed.returncode == -9, (killed.returncode, killed.stdout, killed.stderr)
    versions = {r: Execution.objects.get(pk=pk(r)).workflow_version for r in order}
    assert versions == {order[0]: 2, order[1]: 1, order[2]: 1}, versions
    assert [len(migrate_events(r)) for r in order] == [1, 0, 0]

    done = keel(env, "migrate", "--workflow", "monthly_report", "--to", "2", "--reason", "to v2", "--as", "operator")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "2 moved to v2" in done.stdout, done.stdout
    for ref, was in zip(refs, waiting, strict=True):
        assert Execution.objects.get(pk=pk(ref)).workflow_version == 2
        assert len(migrate_events(ref)) == 1, ref
        assert manager.decide(ref, was["pending_approval"]).status_code == 202
    for ref in refs:
        wait_status(operator, ref, "completed")
        assert StepRun.objects.filter(execution_id=pk(ref), step="archive_copy", outcome="succeeded").count() == 1
        published_once(stack, ref)


def test_a_rollout_sends_new_starts_by_percentage_and_refuses_to_rise_on_drift(stack, people, api_as):
    deployed(stack)
    operator, requester = api_as(people["operator"]), api_as(people["requester"])
    # Without a rollout: the latest (v3).
    assert requester.start("2026-06", idempotency_key="plain")["workflow_version"] == 3

    rolled = operator.post("/workflows/monthly_report/rollout", {"version": 3, "percent": 0, "reason": "hold v3 back"})
    assert rolled.status_code == 200, rolled.text
    assert rolled.json()["rollout"] | {"at": None} == {
        "version": 3,
        "percent": 0,
        "stable": 2,
        "reason": "hold v3 back",
        "by": "operator",
        "at": None,
    }
    starts = [requester.start("2026-06", idempotency_key=f"zero-{n}")["workflow_version"] for n in range(6)]
    assert set(starts) == {2}, starts

    half = operator.post("/workflows/monthly_report/rollout", {"version": 3, "percent": 50, "reason": "half"})
    assert half.status_code == 200, half.text
    split = [requester.start("2026-06", idempotency_key=f"half-{n}")["workflow_version"] for n in range(40)]
    assert set(split) == {2, 3} and 8 <= split.count(3) <= 32, split
    # Decided once: the same key lands on the same version.
    assert requester.start("2026-06", idempotency_key="half-0")["workflow_version"] == split[0]
    # A version named by the start wins over the rollout.
    assert requester.start("2026-06", version=1)["workflow_version"] == 1

    # Drift on v3 (a live execution pinned to v3 whose recorded approval asked another action):
    # raising is refused, naming it; lowering is not.
    drifting = wait_status(requester, requester.start("2026-07", version=3)["id"], "awaiting_approval")
    ApprovalRequest.objects.filter(pk=drifting["pending_approval"]["id"]).update(action="publish_report")
    raised = operator.post("/workflows/monthly_report/rollout", {"version": 3, "percent": 80, "reason": "more"})
    assert raised.status_code == 409 and drifting["id"] in raised.text, raised.text
    assert Rollout.objects.filter(workflow="monthly_report").order_by("-id").first().percent == 50
    back = operator.post("/workflows/monthly_report/rollout", {"version": 3, "percent": 0, "reason": "roll back"})
    assert back.status_code == 200 and back.json()["rollout"]["percent"] == 0

    # The catalogue and keel workflows say what is live on each version (retiring one).
    item = requester.get("/workflows/monthly_report").json()
    live = {v["version"]: v["live"] for v in item["by_version"]}
    assert live[3] >= 1 and live[2] >= 1, live
    listed = keel({**stack.env, **DEPLOYED}, "workflows")
    assert "v3: " in listed.stdout and "new starts 0% to v3, the rest to v2" in listed.stdout, listed.stdout
    bad = operator.post("/workflows/monthly_report/rollout", {"version": 3, "percent": 101, "reason": "x"})
    assert bad.status_code == 422 and "percent" in bad.text
    unknown = operator.post("/workflows/monthly_report/rollout", {"version": 7, "percent": 10, "reason": "x"})
    assert unknown.status_code == 422 and "v7" in unknown.text
    assert (
        api_as(people["manager"])
        .post("/workflows/monthly_report/rollout", {"version": 3, "percent": 10, "reason": "x"})
        .status_code
        == 403
    )
    assert operator.post("/workflows/nope/rollout", {"version": 1, "percent": 10, "reason": "x"}).status_code == 404


pytestmark = pytest.mark.processes
