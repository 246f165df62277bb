"""Issue 43: moving an execution to another version of its workflow, without processes (the
steps run in this process, ``runner.advance``): ``migrate_from`` renaming a step and
reshaping its output, a step gone, a position the new version can't place, a
``migrate_from`` that fails, an execution pinned to a version whose module is gone, and
bad input — a clear 4xx that changes nothing. S58 runs the same on real processes
(tests/scenarios/test_versions_in_flight.py)."""

from __future__ import annotations

import contextlib
import io

import pytest
from django.core.management import call_command
from django.test import Client

import tests.support.migrating_flow  # noqa: F401 - registers "migrating" v1–v4
from executions import services, waits
from executions.engine import runner
from executions.errors import Conflict
from executions.models import Execution, ExecutionEvent, Status, StepRun
from triage import migration
from triage.replay import replay_one

pytestmark = pytest.mark.django_db(transaction=True)


def run(execution: Execution) -> Execution:
    """Its steps in this process until it stops (waits, ends)."""
    for _ in range(20):
        if runner.advance(execution.pk, worker="worker:test-migration") != "sliced":
            break
    execution.refresh_from_db()
    return execution


def waiting_on_v1(people) -> Execution:
    execution, _ = services.execution_start(user=people["requester"].user, workflow="migrating", input={}, version=1)
    execution = run(execution)
    assert (execution.status, execution.current_step) == (Status.WAITING, "hold"), execution.status_reason
    return execution


def go(people, execution: Execution) -> Execution:
    waits.signal_deliver(ref=execution.ref, user=people["requester"].user, name="go", payload=None, event_id="go-1")
    return run(execution)


def operator_api(people) -> Client:
    return Client(headers={"authorization": f"Bearer {people['operator'].token}"})


def test_migrate_from_renames_a_step_and_reshapes_its_output(people):
    execution = waiting_on_v1(people)
    preview = migration.plan(execution, migration.target("migrating", 2)).as_dict()
    assert preview["can_migrate"], preview["blocked_by"]
    assert {s["step"]: s["plan"] for s in preview["steps"]} == {
        "collect": "skip",
        "tally": "skip",  # what v1's count produced, as migrate_from reshaped it
        "hold": "run",
        "finish": "run",
        "count": "gone",
    }
    moved = migration.execution_migrate(
        ref=execution.ref, user=people["operator"].user, to_version=2, reason="count is tally now"
    )
    assert (moved.workflow_version, moved.status, moved.current_step) == (2, Status.WAITING, "hold")
    fresh = Execution.objects.get(pk=execution.pk)
    assert fresh.outputs() == {"collect": {"items": ["a", "b", "c"]}, "tally": {"total": 3}}
    assert replay_one(fresh)["verdict"] == "ok", "a migrated execution replays clean on its new version"
    done = go(people, fresh)
    assert done.status == Status.COMPLETED
    assert done.outputs()["finish"] == {"done": 3, "on": 2}
    [event] = ExecutionEvent.objects.filter(execution=execution, type="transition", payload__transition="migrate")
    assert (event.from_status, event.to_status, event.actor.username) == ("waiting", "waiting", "operator")
    assert event.payload["position"] == {"step": "hold", "maps_to": "hold"}
    client = Client()
    client.force_login(people["operator"].user)
    page = client.get(f"/executions/{execution.ref}/").content.decode()
    assert "Moved to another version of its workflow" in page and "v1 → v2" in page


def test_a_step_gone_is_dropped_and_the_rest_goes_on(people):
    execution = waiting_on_v1(people)
    moved = migration.execution_migrate(ref=execution.ref, user=people["operator"].user, to_version=3, reason="v3")
    assert moved.workflow_version == 3
    done = go(people, Execution.objects.get(pk=execution.pk))
    assert done.status == Status.COMPLETED and done.outputs()["finish"] == {"done": 3, "on": 3}


def test_a_move_fences_out_a_claim_read_before_it_and_rings_again(people):
    """A worker's claim that read the row before the move writes under the old lease token:
    the move bumps it, so that claim writes nothing and no worker runs the old version's
    code on the moved row."""
    execution, _ = services.execution_start(user=people["requester"].user, workflow="migrating", input={}, version=1)
    token = Execution.objects.get(pk=execution.pk).lease_token
    migration.execution_migrate(ref=execution.ref, user=people["operator"].user, to_version=2, reason="before it ran")
    moved = Execution.objects.get(pk=execution.pk)
    assert (moved.lease_token, moved.status, moved.workflow_version) == (token + 1, Status.PENDING, 2)
    assert run(moved).current_step == "hold"
    assert StepRun.objects.filter(execution=moved).values_list("workflow_version", flat=True).distinct().get() == 2


def test_paused_while_its_worker_still_runs_a_step_it_doesnt_move(people):
    execution = waiting_on_v1(people)
    # As a pause while running leaves it until the worker checkpoints: paused, its lease still held.
    Execution.objects.filter(pk=execution.pk).update(
        status=Status.PAUSED, paused_from=Status.RUNNING, lease_owner="worker:still-running"
    )
    plan = migration.plan(Execution.objects.get(pk=execution.pk), migration.target("migrating", 2))
    assert any("worker:still-running" in sentence for sentence in plan.impossible), plan.impossible


def test_what_cant_be_placed_is_refused_even_when_accepted(people):
    execution = waiting_on_v1(people)
    plan = migration.plan(execution, migration.target("migrating", 4))
    assert plan.impossible and not plan.acceptable
    assert "migrate_from[1] failed" in plan.impossible[0] and "legacy_field" in plan.impossible[0]
    with pytest.raises(Conflict, match="legacy_field"):
        migration.execution_migrate(
            ref=execution.ref, user=people["operator"].user, to_version=4, reason="x", accept=plan.impossible
        )
    assert Execution.objects.get(pk=execution.pk).workflow_version == 1
    assert not ExecutionEvent.objects.filter(execution=execution, payload__transition="migrate").exists()


def test_an_execution_of_a_version_no_longer_deployed_moves_and_runs(people):
    """The old module need not stay listed: an execution pinned to v9 (registered nowhere) moves to v2."""
    execution, _ = services.execution_start(user=people["requester"].user, workflow="migrating", input={}, version=1)
    Execution.objects.filter(pk=execution.pk).update(workflow_version=9)  # as if v1's module were gone, renamed v9
    pinned = Execution.objects.get(pk=execution.pk)
    preview = migration.plan(pinned, migration.target("migrating", 2)).as_dict()
    assert preview["can_migrate"] and preview["position"] == {"step": "collect", "maps_to": "collect"}
    migration.execution_migrate(ref=execution.ref, user=people["operator"].user, to_version=2, reason="v9 retired")
    assert run(Execution.objects.get(pk=execution.pk)).current_step == "hold"


def test_bad_input_is_a_clear_4xx_and_changes_nothing(people):
    execution = waiting_on_v1(people)
    api, base = operator_api(people), f"/api/executions/{execution.ref}"
    for query in ("", "?to=", "?to=abc", "?to=0", "?to=99999999999"):
        answer = api.get(f"{base}/migrate-preview{query}")
        assert answer.status_code == 422, (query, answer.content)
    assert api.get(f"{base}/migrate-preview?to=7").status_code == 422
    assert api.get("/api/executions/RUN_999999/migrate-preview?to=2").status_code == 404
    requester = Client(headers={"authorization": f"Bearer {people['requester'].token}"})
    assert requester.get(f"{base}/migrate-preview?to=2").status_code == 403
    for body in (
        {},
        {"to_version": "2", "reason": "r"},  # strict: a number
        {"to_version": 2},  # no reason
        {"to_version": 2, "reason": "r", "accept": "all"},
        {"to_version": 2, "reason": "r", "accept": [""]},
        {"to_version": 7, "reason": "r"},
        {"to_version": 2, "reason": "r\x00"},
    ):
        answer = api.post(f"{base}/migrate", body, content_type="application/json")
        assert answer.status_code == 422, (body, answer.content)
    assert (
        requester.post(f"{base}/migrate", {"to_version": 2, "reason": "r"}, content_type="application/json").status_code
        == 403
    )
    same = api.post(f"{base}/migrate", {"to_version": 1, "reason": "r"}, content_type="application/json")
    assert same.status_code == 409 and "already on v1" in same.json()["detail"], same.content
    bulk = api.post(
        "/api/executions/bulk",
        {"operation": "cancel", "ids": [execution.ref], "dry_run": True, "to_version": 2},
        content_type="application/json",
    )
    assert bulk.status_code == 422 and "to_version" in bulk.content.decode()
    missing = api.post(
        "/api/executions/bulk",
        {"operation": "migrate", "ids": [execution.ref], "dry_run": True},
        content_type="application/json",
    )
    assert missing.status_code == 422 and "to_version" in missing.content.decode()
    untouched = Execution.objects.get(pk=execution.pk)
    assert (untouched.workflow_version, untouched.status) == (1, Status.WAITING)

    done = go(people, untouched)
    assert done.status == Status.COMPLETED
    ended = api.post(f"{base}/migrate", {"to_version": 2, "reason": "r"}, content_type="application/json")
    assert ended.status_code == 409 and "completed" in ended.content.decode()
    assert not ExecutionEvent.objects.filter(execution=execution, payload__transition="migrate").exists()


def test_the_workflows_page_shows_each_versions_share_of_new_starts_and_what_can_be_retired(people):
    execution = waiting_on_v1(people)  # live on v1
    from triage.rollout import workflow_rollout

    workflow_rollout(name="migrating", user=people["operator"].user, version=2, percent=25, reason="canary")
    client = Client()
    client.force_login(people["operator"].user)
    page = client.get("/workflows/").content.decode()
    section = page.split('id="workflow-migrating"')[1].split("</section>")[0]
    rows = {v: section.split(f'id="version-migrating-v{v}"')[1].split("</tr>")[0] for v in (1, 2, 3, 4)}
    assert "75%" in rows[1] and "new starts go to it" in rows[1]  # its stable side: live, and still started
    assert "25%" in rows[2] and "new starts go to it" in rows[2]
    assert "0%" in rows[3] and "can be retired" in rows[3]
    assert "rollout: 25% to v2, set by operator: canary" in section
    workflow_rollout(name="migrating", user=people["operator"].user, version=2, percent=100, reason="all of them")
    page = client.get("/workflows/").content.decode()
    v1 = page.split('id="version-migrating-v1"')[1].split("</tr>")[0]
    assert "0%" in v1 and "migrate its live executions first" in v1  # no new starts, one still live
    assert execution.workflow_version == 1
    said = call_command_output("keel", "replay", "--workflow", "migrating")
    assert "migrating v3: no live executions, no new starts: it can be unregistered" in said
    assert "migrating v1:" not in said and "migrating v2:" not in said, said


def call_command_output(*args: str) -> str:
    out = io.StringIO()
    with contextlib.suppress(SystemExit):  # keel replay's exit 1 on drift: the output is what is read here
        call_command(*args, stdout=out)
    return out.getvalue()


def test_the_console_previews_a_move_and_takes_only_what_the_operator_accepted(people):
    """The execution page offers "Move to vN…" to operators; its page is the preview with a
    box per blocker an operator may accept; an unticked one refuses the move (a message,
    nothing written), a blocker nobody can accept has no box and no button."""
    execution = waiting_on_v1(people)
    operator = Client()
    operator.force_login(people["operator"].user)
    detail = operator.get(f"/executions/{execution.ref}/").content.decode()
    assert f'href="/executions/{execution.ref}/migrate/?to=5"' in detail and "Move to v5…" in detail
    impossible = operator.get(f"/executions/{execution.ref}/migrate/?to=4").content.decode()
    assert 'id="migrate-impossible"' in impossible and "legacy_field" in impossible
    assert 'id="confirm-migrate"' not in impossible

    page = operator.get(f"/executions/{execution.ref}/migrate/?to=2")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="confirm-migrate"' in html and 'data-step="count"' in html and 'data-plan="gone"' in html
    refused = operator.post(f"/executions/{execution.ref}/migrate/", {"to_version": "2", "reason": ""})
    assert refused.status_code == 422 and "reason" in refused.content.decode()
    for weird in ("abc", "²", "-1", "99999999999999"):
        bad = operator.get(f"/executions/{execution.ref}/migrate/?to={weird}", follow=True)
        assert bad.status_code == 200 and "to:" in bad.content.decode(), weird
    assert Execution.objects.get(pk=execution.pk).workflow_version == 1

    # v5 inserted a step before where it waits: a blocker an operator may accept, by ticking it.
    blocked = operator.get(f"/executions/{execution.ref}/migrate/?to=5").content.decode()
    preview = migration.execution_migrate_preview(ref=execution.ref, user=people["operator"].user, to=5)
    [sentence] = preview["blocked_by"]
    assert "prepare" in sentence and 'name="accept"' in blocked
    unticked = operator.post(f"/executions/{execution.ref}/migrate/", {"to_version": "5", "reason": "v5"})
    assert unticked.status_code == 409 and "prepare" in unticked.content.decode()
    assert Execution.objects.get(pk=execution.pk).workflow_version == 1

    moved = operator.post(f"/executions/{execution.ref}/migrate/", {"to_version": "2", "reason": "tally"}, follow=True)
    assert moved.status_code == 200 and f"{execution.ref} moved to v2 (waiting)." in moved.content.decode()
    assert Execution.objects.get(pk=execution.pk).workflow_version == 2

    ticked = operator.post(
        f"/executions/{execution.ref}/migrate/", {"to_version": "5", "reason": "v5", "accept": [sentence]}, follow=True
    )
    assert ticked.status_code == 200 and f"{execution.ref} moved to v5 (waiting)." in ticked.content.decode()
    [_, accepted] = ExecutionEvent.objects.filter(execution=execution, payload__transition="migrate").order_by("id")
    assert accepted.payload["accepted"] == [sentence] and accepted.payload["from_version"] == 2

    requester = Client()
    requester.force_login(people["requester"].user)
    assert requester.get(f"/executions/{execution.ref}/migrate/?to=3").status_code == 403
    assert "migrate-link" not in requester.get(f"/executions/{execution.ref}/").content.decode()


def test_a_migration_by_workflow_leaves_out_what_ended_and_replay_says_its_findings_plainly(people):
    """Found walking a ported workflow through a v2 deploy: ``keel migrate --workflow W --to 2
    --dry-run`` listed every completed execution of W as "stays: completed, not …" and so
    exited 1 (a CI step failing on history); and replay printed a finding without a key as
    ``structure at sanctions : …``. An ended execution never moves, like one already on v2."""
    from triage import bulk

    waiting = waiting_on_v1(people)
    ended = go(people, waiting_on_v1(people))
    assert ended.status == Status.COMPLETED and ended.workflow_version == 1
    dry = bulk.bulk_dry_run(
        user=people["operator"].user, operation="migrate", to_version=2, filter={"workflow": "migrating"}
    )
    assert dry.eligible == [waiting.ref] and dry.ineligible == [], dry.as_dict()

    from cli.commands.replay import _finding

    assert _finding({"kind": "structure", "step": "x", "key": "", "detail": "d"}) == "  structure at x: d"
    assert _finding({"kind": "model_call", "step": "x", "key": "K", "detail": "d"}) == "  model_call at x K: d"
