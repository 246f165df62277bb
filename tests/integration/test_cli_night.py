"""The command line's whole night (docs/cli.md, "At 3 a.m."): ``keel resolve``, ``close``,
``restart``, ``decide``, ``hold``/``unhold``, ``budget``, ``bulk``, ``workflow pause|resume``
and ``schedules [add|delete]`` — each a real ``manage.py keel`` process against the test
database, as an operator runs it: what it changed, its ``--json`` beside the API's answer for
the same thing, and its exit statuses (2 bad input or an unknown id, 3 refused by the state,
4 not allowed) with one sentence and nothing written. The states are the ``world`` of
tests/integration/conftest.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

from django.test import Client

from approvals.models import AuditEntry, Decision
from cli.registry import commands
from executions import services
from executions.answers import ActionDetailOut, ExecutionOut
from executions.models import Action, Execution, ExecutionEvent, Status, WorkflowSwitch
from executions.reasons import StuckReason
from schedules import services as schedules
from schedules.models import Schedule
from tests.support.cli import keel, refused
from tests.support.records import at_publish, publish_action, snapshot

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def api(people, who: str, method: str, path: str, body: dict | None = None):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {people[who].token}")
    if method == "GET":
        return client.get(path)
    return client.generic(method, path, json.dumps(body or {}), content_type="application/json")


def ok(done) -> str:
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done.stdout


def answer(done) -> dict:
    return json.loads(ok(done))


def marked(event: ExecutionEvent, command: str) -> bool:
    """``event`` carries its ``via.cli`` mark, naming ``command``."""
    return ExecutionEvent.objects.filter(
        execution_id=event.execution_id, type="via.cli", payload__event=event.pk, payload__command=command
    ).exists()


def refusals(env, cases) -> None:
    """Each case refused with its status and words, and nothing written."""
    before = snapshot()
    for args, status, *words in cases:
        refused(keel(env, *args), status, *words)
    assert snapshot() == before


# --- resolve and close: an operator's word on an action


def unknown_outcome(people, context: dict, month: str) -> tuple[Execution, Action]:
    """Another execution that needs attention over a publish whose outcome is unknown (as the world's)."""
    execution = at_publish(people, context, "flag", month=month)
    action = publish_action(execution, Action.State.UNKNOWN)
    return execution, action


def test_keel_resolve_answers_as_the_api_does_and_resumes_the_execution(env, people, world):
    attention, action = world["attention"], world["action"]
    twin, twin_action = unknown_outcome(people, world["awaiting"].context, month="2026-03")
    key = action.key
    refusals(
        env,
        [
            (["resolve", key, "--outcome", "maybe", "--evidence", "seen", "--as", "operator"], 2, "outcome"),
            (["resolve", key, "--outcome", "succeeded", "--evidence", "", "--as", "operator"], 2, "evidence"),
            (["resolve", key, "--outcome", "succeeded", "--evidence", "x", "--receipt", "id", "--as", "operator"], 2),
            (["resolve", key, "--outcome", "failed", "--evidence", "x", "--receipt", "a=1", "--as", "operator"], 2),
            (
                ["resolve", key, "--outcome", "succeeded", "--evidence", "x", "--receipt", "a=1", "--as", "operator"],
                2,
                "receipt.a",
                "not a receipt field",
            ),
            (["resolve", "RUN_9999:publish:v1", "--outcome", "failed", "--evidence", "x", "--as", "operator"], 2),
            (["resolve", key, "--outcome", "succeeded", "--evidence", "seen", "--as", "requester"], 4, "operators"),
            (["resolve", key, "--outcome", "succeeded", "--evidence", "seen"], 2, "--as"),
            # the needs_attention execution whose publish failed: no unknown outcome to resolve
            (
                [
                    "resolve",
                    f"{world['paused'].ref}:publish:v1",
                    "--outcome",
                    "failed",
                    "--evidence",
                    "x",
                    "--as",
                    "operator",
                ],
                3,
                "only an unknown outcome",
            ),
        ],
    )

    done = keel(
        env, "resolve", key, "--outcome", "succeeded", "--evidence", "seen on the site", "--as", "operator", "--json"
    )
    by_cli = answer(done)
    by_api = api(
        people,
        "operator",
        "POST",
        f"/api/actions/{twin_action.key}/resolve",
        {"outcome": "succeeded", "evidence": "seen on the site"},
    )
    assert by_api.status_code == 200, by_api.content
    assert set(by_cli) == set(ActionDetailOut.model_fields)
    assert by_cli == {**by_api.json(), "key": key}  # the same answer, for the same act on its twin

    action.refresh_from_db()
    attention.refresh_from_db()
    assert action.status == Action.State.SUCCEEDED and action.receipt["resolved_by"] == "operator"
    assert attention.status == Execution.objects.get(pk=twin.pk).status != Status.NEEDS_ATTENTION
    resolved = ExecutionEvent.objects.filter(execution=attention, actor=people["operator"].user).exclude(type="via.cli")
    assert resolved and all(marked(event, "resolve") for event in resolved)
    # Once resolved, again: the state refuses it (the API's 409).
    refused(keel(env, "resolve", key, "--outcome", "failed", "--evidence", "x", "--as", "operator"), 3, "succeeded")


def test_keel_close_closes_a_planned_compensation(env, people, world):
    compensation = world["compensation"]
    refusals(
        env,
        [
            (["close", compensation.key, "--outcome", "succeeded", "--evidence", "done", "--as", "requester"], 4),
            (["close", compensation.key, "--outcome", "later", "--evidence", "done", "--as", "operator"], 2, "outcome"),
            (
                [
                    "close",
                    "RUN_9999:publish:v1:compensate",
                    "--outcome",
                    "failed",
                    "--evidence",
                    "x",
                    "--as",
                    "operator",
                ],
                2,
                "RUN_9999",
            ),
        ],
    )
    closed = answer(
        keel(
            env,
            "close",
            compensation.key,
            "--outcome",
            "succeeded",
            "--evidence",
            "retracted at the provider",
            "--as",
            "operator",
            "--json",
        )
    )
    compensation.refresh_from_db()
    assert (
        closed
        == {**ActionDetailOut.model_validate(compensation, from_attributes=True).model_dump(), "status": "succeeded"}
        and compensation.status == Action.State.SUCCEEDED
    )
    refused(keel(env, "close", compensation.key, "--outcome", "failed", "--evidence", "x", "--as", "operator"), 3)


# --- restart from a step


def test_keel_restart_makes_the_new_execution_and_prints_its_id_last(env, people, world):
    failed = world["failed"]
    refusals(
        env,
        [
            (
                ["restart", failed.ref, "--from-step", "no_such_step", "--reason", "back", "--as", "operator"],
                2,
                "from_step",
            ),
            (["restart", failed.ref, "--from-step", "publish", "--reason", "", "--as", "operator"], 2, "reason"),
            (
                ["restart", failed.ref, "--from-step", "publish", "--visit", "0", "--reason", "x", "--as", "operator"],
                2,
                "--visit",
            ),
            (["restart", "RUN_9999", "--from-step", "publish", "--reason", "back", "--as", "operator"], 2, "RUN_9999"),
            (
                ["restart", failed.ref, "--from-step", "publish", "--reason", "back", "--as", "requester"],
                4,
                "operators",
            ),
            (["restart", world["paused"].ref, "--from-step", "publish", "--reason", "back", "--as", "operator"], 3),
        ],
    )
    done = keel(
        env, "restart", failed.ref, "--from-step", "publish", "--reason", "the provider is back", "--as", "operator"
    )
    ref = ok(done).strip().splitlines()[-1]  # the new execution's id alone on the last line
    new = Execution.objects.get(pk=int(ref.removeprefix("RUN_")))
    assert new.restarted_from_id == failed.pk and new.current_step == "publish"
    made = ExecutionEvent.objects.filter(execution=new, actor=people["operator"].user).exclude(type="via.cli")
    assert made and all(marked(event, "restart") for event in made)

    shown = api(people, "operator", "GET", f"/api/executions/{ref}")
    again = keel(env, "restart", failed.ref, "--from-step", "publish", "--reason", "twice", "--as", "operator")
    refused(again, 3, "restarted")  # already restarted: the state refuses a second one
    assert answer(keel(env, "show", ref, "--json")) == shown.json()


def test_keel_restart_json_is_the_new_execution_as_the_api_shows_it(env, people, world):
    by_cli = answer(
        keel(
            env,
            "restart",
            world["failed"].ref,
            "--from-step",
            "publish",
            "--reason",
            "back",
            "--as",
            "operator",
            "--json",
        )
    )
    assert set(by_cli) == set(ExecutionOut.model_fields)
    assert by_cli == api(people, "operator", "GET", f"/api/executions/{by_cli['id']}").json()


# --- decide: bound to the version and sha256 the approver saw


def test_keel_decide_binds_to_the_version_seen_and_answers_as_the_event_does(env, people, world):
    run, request = world["awaiting"].ref, world["request"]
    shown = ok(keel(env, "show", run))
    assert f"approval #{request.pk}" in shown and f"V{request.version} ({request.content_sha256})" in shown
    bound = ["--approval", str(request.pk), "--version", str(request.version), "--sha256", request.content_sha256]
    refusals(
        env,
        [
            (
                ["decide", run, *bound[:4], "--sha256", "xyz", "--decision", "approve", "--as", "manager"],
                2,
                "content_sha256",
            ),
            (["decide", run, *bound, "--decision", "maybe", "--as", "manager"], 2, "decision"),
            (["decide", run, *bound, "--decision", "request_changes", "--as", "manager"], 2, "comment"),
            (["decide", run, *bound[2:], "--decision", "approve", "--as", "manager"], 2, "--approval"),
            (["decide", "RUN_9999", *bound, "--decision", "approve", "--as", "manager"], 2, "no approval request"),
        ],
    )
    # Refused by who they are or by what they saw: 4 and 3, each attempt audited as the API's is
    # (its audit entry is not rolled back with the refusal).
    audited = AuditEntry.objects.filter(kind=AuditEntry.Kind.REFUSED)
    refused(keel(env, "decide", run, *bound, "--decision", "approve", "--as", "requester"), 4, "lacks the permission")
    stale = ["--approval", str(request.pk), "--version", str(request.version + 1), "--sha256", request.content_sha256]
    refused(keel(env, "decide", run, *stale, "--decision", "approve", "--as", "manager"), 3, "you decided on V2")
    assert audited.count() == 2 and not Decision.objects.exists()

    done = keel(
        env,
        "decide",
        run,
        *bound,
        "--decision",
        "approve",
        "--comment",
        "fine",
        "--event-id",
        "night-1",
        "--as",
        "manager",
        "--json",
    )
    by_cli = answer(done)
    decision = Decision.objects.get(request=request)
    assert decision.event_id == "night-1" and decision.decided_by == people["manager"].user
    assert by_cli["decision"] == "approve" and by_cli["decided_by"] == "manager"
    decided = ExecutionEvent.objects.get(execution=world["awaiting"], type="approval.decided")
    assert marked(decided, "decide")
    # The same event through the API: the first answer, as the CLI printed it, and nothing new.
    body = {
        "type": "approval.decision",
        "approval_id": request.pk,
        "decision": "approve",
        "artifact_version": request.version,
        "content_sha256": request.content_sha256,
        "comment": "fine",
        "event_id": "night-1",
    }
    replayed = api(people, "manager", "POST", f"/api/executions/{run}/events", body)
    assert replayed.status_code == 202, replayed.content
    assert replayed.json() == by_cli and Decision.objects.count() == 1
    # Decided: a new decision (a new event id) is refused by the state.
    refused(keel(env, "decide", run, *bound, "--decision", "reject", "--comment", "no", "--as", "manager2"), 3)


# --- the legal hold


def test_keel_hold_and_unhold_place_and_release_the_legal_hold(env, people, world):
    run = world["awaiting"].ref
    refusals(
        env,
        [
            (["hold", run, "--reason", "", "--as", "auditor"], 2, "reason"),
            (["hold", run, "--as", "auditor"], 2, "--reason"),
            (["hold", "RUN_9999", "--reason", "litigation", "--as", "auditor"], 2, "RUN_9999"),
            (["hold", run, "--reason", "litigation", "--as", "operator"], 4, "auditors"),
            (["unhold", run, "--as", "operator"], 4, "auditors"),
        ],
    )
    held = answer(keel(env, "hold", run, "--reason", "litigation 2026-17", "--as", "auditor", "--json"))
    execution = Execution.objects.get(pk=world["awaiting"].pk)
    assert execution.hold_reason == "litigation 2026-17" and execution.hold_by == people["auditor"].user
    assert held["hold"]["reason"] == "litigation 2026-17" and held["hold"]["by"] == "auditor"
    assert held == api(people, "auditor", "GET", f"/api/executions/{run}").json()
    assert marked(ExecutionEvent.objects.get(execution=execution, type="hold.placed"), "hold")

    released = answer(keel(env, "unhold", run, "--as", "auditor", "--json"))
    execution.refresh_from_db()
    assert execution.hold_at is None and released["hold"] is None
    assert released == api(people, "auditor", "GET", f"/api/executions/{run}").json()
    assert marked(ExecutionEvent.objects.get(execution=execution, type="hold.released"), "unhold")
    assert "no legal hold" in ok(keel(env, "unhold", run, "--as", "auditor"))  # none to release: nothing changes


# --- the cost budget


def test_keel_budget_raises_the_budget_as_the_api_does(env, people, world):
    execution, _ = services.execution_start(
        user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"}
    )
    run, cancelled = execution.ref, world["compensation"].execution.ref
    refusals(
        env,
        [
            (["budget", run, "--add-usd", "0", "--reason", "more", "--as", "operator"], 2, "add_usd"),
            (["budget", run, "--add-usd", "2000000", "--reason", "more", "--as", "operator"], 2, "add_usd"),
            (["budget", run, "--add-usd", "lots", "--reason", "more", "--as", "operator"], 2, "--add-usd"),
            (["budget", run, "--add-usd", "1", "--reason", " ", "--as", "operator"], 2, "reason"),
            (["budget", "RUN_9999", "--add-usd", "1", "--reason", "more", "--as", "operator"], 2, "RUN_9999"),
            (["budget", run, "--add-usd", "1", "--reason", "more", "--as", "requester"], 4, "operators"),
            (["budget", cancelled, "--add-usd", "1", "--reason", "more", "--as", "operator"], 3, "cancelled"),
        ],
    )
    raised = answer(
        keel(env, "budget", run, "--add-usd", "2.25", "--reason", "a longer month", "--as", "operator", "--json")
    )
    execution.refresh_from_db()
    assert float(execution.budget_usd) == 2.25 and raised["cost"]["budget_usd"] == 2.25  # none before: 2.25
    assert raised == api(people, "operator", "GET", f"/api/executions/{run}").json()
    event = ExecutionEvent.objects.get(execution=execution, type="operator.raise_budget")
    assert event.actor == people["operator"].user and event.payload["reason"] == "a longer month"
    assert marked(event, "budget")
    more = keel(env, "budget", run, "--add-usd", "1", "--reason", "and a day", "--as", "operator")
    assert "budget: $3.25" in ok(more)  # added to what it had
    assert float(Execution.objects.get(pk=execution.pk).budget_usd) == 3.25


# --- bulk: a dry run's frozen set, then a run on exactly that set


def test_keel_bulk_dry_run_then_a_run_on_its_frozen_set(env, people, world):
    paused, attention = world["paused"], world["attention"]
    by_filter = ["--status", "needs_attention"]
    dry = answer(keel(env, "bulk", "resume", *by_filter, "--dry-run", "--as", "operator", "--json"))
    assert dry["eligible"] == [paused.ref]
    assert [(i["id"], "resolve it first" in i["why"]) for i in dry["ineligible"]] == [(attention.ref, True)]
    through_api = api(
        people,
        "operator",
        "POST",
        "/api/executions/bulk",
        {"operation": "resume", "filter": {"status": "needs_attention"}, "dry_run": True},
    )
    assert through_api.status_code == 200, through_api.content
    assert {**dry, "token": ""} == {**through_api.json(), "token": ""}  # the same answer (a token signs when)

    people_lines = ok(keel(env, "bulk", "resume", *by_filter, "--dry-run", "--as", "operator")).splitlines()
    token = people_lines[-1]  # the token alone on the last line
    assert any(line.startswith(paused.ref) for line in people_lines)

    refusals(
        env,
        [
            (["bulk", "frobnicate", *by_filter, "--dry-run", "--as", "operator"], 2, "operation"),
            (["bulk", "resume", *by_filter, "--reason", "go", "--as", "operator"], 2, "filter"),
            (["bulk", "resume", *by_filter, "--token", token, "--as", "operator"], 2, "reason"),
            (
                ["bulk", "resume", "--id", attention.ref, "--token", token, "--reason", "go", "--as", "operator"],
                2,
                "ids",
            ),
            (["bulk", "resume", "--id", "RUN_9999", "--reason", "go", "--as", "operator"], 2, "RUN_9999"),
            (["bulk", "cancel", *by_filter, "--token", token, "--reason", "go", "--as", "operator"], 2, "token"),
            (["bulk", "resume", *by_filter, "--dry-run", "--as", "requester"], 4, "operators"),
            (["bulk", "resume", *by_filter, "--status", "sleeping", "--dry-run", "--as", "operator"], 2, "status"),
        ],
    )

    run = answer(
        keel(
            env,
            "bulk",
            "resume",
            *by_filter,
            "--token",
            token,
            "--reason",
            "provider back",
            "--as",
            "operator",
            "--json",
        )
    )
    assert set(run) == {"operation", "batch", "results"} and run["operation"] == "resume"
    assert [(r["id"], r["outcome"]) for r in run["results"]] == [(paused.ref, "done")]
    paused.refresh_from_db()
    attention.refresh_from_db()
    assert paused.status == Status.RUNNING and attention.status == Status.NEEDS_ATTENTION
    item = ExecutionEvent.objects.get(execution=paused, type="operator.bulk_item")
    assert item.payload["batch"] == run["batch"] and item.payload["reason"] == "provider back"
    assert marked(item, "bulk")
    # The same token again: the filter's set is no longer the frozen one, so nothing is done.
    refused(
        keel(env, "bulk", "resume", *by_filter, "--token", token, "--reason", "again", "--as", "operator"),
        2,
        "dry-run again",
    )


def test_keel_bulk_by_ids_and_an_item_the_state_refuses(env, people, world):
    awaiting, failed = world["awaiting"], world["failed"]
    dry = answer(
        keel(
            env,
            "bulk",
            "cancel",
            "--id",
            awaiting.ref,
            "--id",
            "RUN_9999",
            "--id",
            failed.ref,
            "--dry-run",
            "--as",
            "operator",
            "--json",
        )
    )
    assert dry["eligible"] == [awaiting.ref]
    assert {i["id"]: i["why"] for i in dry["ineligible"]} == {
        "RUN_9999": "no such execution",
        failed.ref: "already failed",
    }
    done = answer(
        keel(
            env,
            "bulk",
            "cancel",
            "--id",
            awaiting.ref,
            "--token",
            dry["token"],
            "--reason",
            "not needed",
            "--as",
            "operator",
            "--json",
        )
    )
    assert [r["outcome"] for r in done["results"]] == ["done"]
    assert Execution.objects.get(pk=awaiting.pk).status == Status.CANCELLED
    # Without a token, as an API client may: the item the state refuses is skipped, the exit 1.
    skipped = keel(env, "bulk", "cancel", "--id", failed.ref, "--reason", "tidy", "--as", "operator", "--json")
    assert skipped.returncode == 1, skipped.stderr
    assert [(r["id"], r["outcome"]) for r in json.loads(skipped.stdout)["results"]] == [(failed.ref, "skipped")]
    assert Execution.objects.get(pk=failed.pk).status == Status.FAILED


# --- the workflow's kill switch


def test_keel_workflow_pause_and_resume_throw_the_kill_switch(env, people):
    refusals(
        env,
        [
            (["workflow", "pause", "no_such_flow", "--reason", "outage", "--as", "operator"], 2, "no_such_flow"),
            (["workflow", "pause", "monthly_report", "--reason", "", "--as", "operator"], 2, "reason"),
            (["workflow", "pause", "monthly_report", "--reason", "outage", "--as", "requester"], 4, "operators"),
            (["workflow", "stop", "monthly_report", "--reason", "outage", "--as", "operator"], 2, "stop"),
            (["workflow"], 2, "SUBCOMMAND"),
        ],
    )
    assert not WorkflowSwitch.objects.exists()
    paused = answer(
        keel(env, "workflow", "pause", "monthly_report", "--reason", "provider outage", "--as", "operator", "--json")
    )
    assert paused["paused"] is True
    assert paused == api(people, "operator", "GET", "/api/workflows/monthly_report").json()
    switch = WorkflowSwitch.objects.get()
    assert switch.paused and switch.actor == people["operator"].user and switch.reason == "provider outage"

    resumed = keel(env, "workflow", "resume", "monthly_report", "--reason", "over", "--as", "operator")
    assert "[paused]" not in ok(resumed)
    assert list(WorkflowSwitch.objects.order_by("id").values_list("paused", flat=True)) == [True, False]
    assert api(people, "operator", "GET", "/api/workflows/monthly_report").json()["paused"] is False


# --- schedules: listed without --as; added and deleted as an operator


def test_keel_schedules_lists_without_as(env, people):
    made = schedules.schedule_create(user=people["operator"].user, workflow="monthly_report", cron="0 6 1 * *")
    listed = answer(keel(env, "schedules", "--json"))
    assert [item["id"] for item in listed["items"]] == [made.pk]
    assert listed == api(people, "operator", "GET", "/api/schedules").json()
    assert f"#{made.pk} monthly_report at '0 6 1 * *'" in ok(keel(env, "schedules"))
    assert answer(keel(env, "schedules", "--as", "operator", "--json")) == listed  # --as still works


def test_keel_schedules_add_and_delete(env, people):
    refusals(
        env,
        [
            (
                ["schedules", "add", "--workflow", "monthly_report", "--cron", "every day", "--as", "operator"],
                2,
                "cron",
            ),
            (
                [
                    "schedules",
                    "add",
                    "--workflow",
                    "monthly_report",
                    "--cron",
                    "0 6 * * *",
                    "--input",
                    "{x",
                    "--as",
                    "operator",
                ],
                2,
                "--input",
            ),
            (
                [
                    "schedules",
                    "add",
                    "--workflow",
                    "monthly_report",
                    "--cron",
                    "0 6 * * *",
                    "--timezone",
                    "Mars/Base",
                    "--as",
                    "operator",
                ],
                2,
                "timezone",
            ),
            (
                ["schedules", "add", "--workflow", "no_such_flow", "--cron", "0 6 * * *", "--as", "operator"],
                2,
                "workflow",
            ),
            (
                ["schedules", "add", "--workflow", "monthly_report", "--cron", "0 6 * * *", "--as", "requester"],
                4,
                "operators",
            ),
            (["schedules", "add", "--workflow", "monthly_report", "--cron", "0 6 * * *"], 2, "--as"),
            (["schedules", "delete", "9999", "--as", "operator"], 2, "no schedule 9999"),
        ],
    )
    assert not Schedule.objects.exists()
    added = answer(
        keel(
            env,
            "schedules",
            "add",
            "--workflow",
            "monthly_report",
            "--cron",
            "0 6 1 * *",
            "--timezone",
            "Europe/Paris",
            "--input",
            '{"month": "2026-09"}',
            "--overlap",
            "allow",
            "--as",
            "operator",
            "--json",
        )
    )
    schedule = Schedule.objects.get()
    assert (schedule.pk, schedule.timezone, schedule.input, schedule.overlap) == (
        added["id"],
        "Europe/Paris",
        {"month": "2026-09"},
        "allow",
    )
    assert schedule.created_by == people["operator"].user
    assert [added] == api(people, "operator", "GET", "/api/schedules").json()["items"]

    refused(keel(env, "schedules", "delete", str(schedule.pk), "--as", "requester"), 4, "operators")
    deleted = answer(keel(env, "schedules", "delete", str(schedule.pk), "--as", "operator", "--json"))
    schedule.refresh_from_db()
    assert deleted["deleted"] is True and deleted["next_fire_at"] is None
    assert schedule.deleted_by == people["operator"].user
    assert answer(keel(env, "schedules", "--json")) == {"items": []}
    refused(keel(env, "schedules", "delete", str(schedule.pk), "--as", "operator"), 2, "no schedule")


# --- the docs: every command a row, every stuck reason its commands


def test_docs_name_every_command_and_answer_every_stuck_reason():
    text = DOCS.read_text()
    table = [line for line in text.splitlines() if line.startswith("| `keel ")]
    for cmd in commands():
        assert any(line.startswith(f"| `keel {cmd.name}") for line in table), cmd.name
    night = text.split("## At 3 a.m.: each stuck reason and the command that answers it", 1)[1].split("\n## ", 1)[0]
    for reason in StuckReason.values:
        section = re.search(rf"^### `{reason}`\n(.*?)(?=^### |\Z)", night, re.S | re.M)
        assert section, reason
        assert "keel " in section.group(1), reason
