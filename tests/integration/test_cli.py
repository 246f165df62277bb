"""``manage.py keel``: each command as an operator runs it (a real process against the test
database), its success and each exit status — 2 bad input, 3 refused by the state, 4 not
allowed — with one sentence on stderr and never a traceback; what it does is recorded as
the ``--as`` user, like an API call."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction

from executions import services
from executions.answers import ExecutionOut
from executions.engine import lifecycle
from executions.models import Execution, ExecutionEvent, Status
from tests.support.cli import keel, refused


def test_start_list_show_and_cancel_as_a_person_would(env, people):
    listed = keel(env, "workflows", "--json")
    assert listed.returncode == 0, listed.stderr
    names = [w["name"] for w in json.loads(listed.stdout)["items"]]
    assert {"monthly_report", "replacement_order", "support_agent"} <= set(names)

    started = keel(env, "start", "monthly_report", "--input", '{"month": "2026-08"}', "--as", "requester")
    assert started.returncode == 0, started.stderr
    ref = started.stdout.strip().splitlines()[-1]  # the id alone on the last line
    execution = Execution.objects.get(pk=int(ref.removeprefix("RUN_")))
    assert execution.created_by == people["requester"].user and execution.workflow == "monthly_report"

    again = keel(env, "start", "monthly_report", "--input", '{"month": "2026-08"}', "--as", "requester", "--json")
    shown = json.loads(again.stdout)  # no key: a second execution, in the API's shape
    assert set(shown) == set(ExecutionOut.model_fields) and shown["id"] != ref

    keyed = [
        "start",
        "monthly_report",
        "--input",
        '{"month": "2026-09"}',
        "--idempotency-key",
        "k1",
        "--as",
        "requester",
    ]
    first, second = keel(env, *keyed), keel(env, *keyed)
    assert first.stdout.splitlines()[-1] == second.stdout.splitlines()[-1]  # one execution for one key

    rows = json.loads(keel(env, "list", "--status", "pending", "--limit", "2", "--json").stdout)
    assert len(rows["items"]) == 2 and rows["next"] is not None
    assert json.loads(keel(env, "show", ref, "--json").stdout)["id"] == ref

    refused(keel(env, "cancel", ref, "--reason", "not mine", "--as", "outsider"), 4, "only operators")
    done = keel(env, "cancel", ref, "--reason", "asked by mistake", "--as", "requester")
    assert done.returncode == 0, done.stderr
    execution.refresh_from_db()
    assert execution.status == Status.CANCELLED
    event = ExecutionEvent.objects.get(execution=execution, to_status=Status.CANCELLED)
    assert event.actor == people["requester"].user and event.payload["reason"] == "asked by mistake"
    refused(keel(env, "cancel", ref, "--reason", "again", "--as", "requester"), 3, "already cancelled")


@pytest.mark.parametrize(
    ("args", "status", "words"),
    [
        (["start", "monthly_report", "--input", '{"month":', "--as", "requester"], 2, ["--input", "JSON"]),
        (["start", "monthly_report", "--input", '{"month": "2030-01"}', "--as", "requester"], 2, ["input.month"]),
        (["start", "no_such_flow", "--as", "requester"], 2, ["unknown workflow"]),
        (["start", "monthly_report", "--as", "nobody"], 2, ["--as", "nobody"]),
        (["start", "monthly_report", "--as", "retired"], 2, ["not active"]),
        (["show", "RUN_9999"], 2, ["RUN_9999"]),
        (["list", "--status", "sleeping"], 2, ["--status"]),
        (["frobnicate"], 2, ["frobnicate"]),
        (["cancel", "{ref}", "--reason", "", "--as", "operator"], 2, ["reason"]),
        (["resume", "{ref}", "--reason", "try", "--as", "operator"], 3, ["not needs_attention"]),
        (["resume", "{ref}", "--reason", "try", "--as", "requester"], 4, ["only operators"]),
        (["retry", "{ref}", "--reason", "now", "--as", "operator"], 3, ["not retry_pending"]),
        (["signal", "{ref}", "shipment_confirmed", "--as", "operator"], 3, ["not waiting"]),
        (["signal", "{ref}", "shipment_confirmed", "--payload", "{x", "--as", "operator"], 2, ["--payload"]),
    ],
)
def test_each_refusal_is_its_exit_status_and_one_sentence(env, people, args, status, words):
    get_user_model().objects.create_user(username="retired", password="pw-retired-1234", is_active=False)
    ref, _ = services.execution_start(
        user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"}
    )
    ref = ref.ref
    before = Execution.objects.count(), ExecutionEvent.objects.count()
    refused(keel(env, *[a.replace("{ref}", ref) for a in args]), status, *words)
    assert (Execution.objects.count(), ExecutionEvent.objects.count()) == before  # nothing written


def test_resume_retry_and_replay_succeed_as_the_operator(env, people):
    """The remaining commands' success (pause, archive and schedules come with their issues):
    resume a needs_attention execution, retry a retry_pending one — recorded as the --as
    user — and replay with nothing live to check."""

    def stopped(transition: str) -> Execution:
        execution, _ = services.execution_start(
            user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"}
        )
        with transaction.atomic():
            lifecycle.apply(execution, "start", actor_label="test")
            lifecycle.apply(execution, transition, actor_label="test", reason="set up by the test", code="step_error")
        return execution

    flagged, waiting = stopped("flag"), stopped("schedule_retry")
    # resume: running again; retry: due now, the next claim runs it (each an event of the --as user)
    for command, execution, status, event_type in (
        ("resume", flagged, Status.RUNNING, None),
        ("retry", waiting, Status.RETRY_PENDING, "operator.retry_now"),
    ):
        done = keel(env, command, execution.ref, "--reason", "checked by hand", "--as", "operator", "--json")
        assert done.returncode == 0, (command, done.stderr)
        assert json.loads(done.stdout)["status"] == status
        event = ExecutionEvent.objects.filter(execution=execution).exclude(type="via.cli").latest("pk")
        assert ExecutionEvent.objects.filter(execution=execution, type="via.cli", payload__event=event.pk).exists()
        assert event.actor == people["operator"].user
        assert event.type == event_type if event_type else event.to_status == Status.RUNNING

    listed = keel(env, "workflows")
    assert (
        listed.returncode == 0
        and "monthly_report v1" in listed.stdout
        and "input {month, constraints?}" in listed.stdout
    )
    for execution in (flagged, waiting):
        services.execution_cancel(ref=execution.ref, user=people["operator"].user, reason="done with it")
    replayed = keel(env, "replay", "--json")
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout) == {"checked": 0, "drifted": 0, "items": []}


def test_show_says_what_a_waiting_execution_waits_for_and_until_when(people):
    """Found walking a ported workflow from the shell: ``keel show`` of a waiting execution
    said its step and nothing of the signal it waits for, nor until when (the page and the
    API's ``pending_gate`` did); and a voided effect read "failed (0 attempts)"."""
    import tests.support.migrating_flow  # noqa: F401 - registers "migrating": v1 waits for "go"
    from cli.commands.executions import show
    from executions.engine import runner

    execution, _ = services.execution_start(user=people["requester"].user, workflow="migrating", input={}, version=1)
    while runner.advance(execution.pk, worker="worker:test-cli-show") == "sliced":
        pass
    execution.refresh_from_db()
    gate = show({"id": execution.ref}).data["pending_gate"]
    assert execution.status == Status.WAITING and gate["waiting_for"] == "the signal go"
    [line] = [x for x in show({"id": execution.ref}).lines if x.startswith("  waiting for")]
    since = gate["since"].strftime("%Y-%m-%d %H:%M:%S")
    assert line.startswith(f"  waiting for the signal go at hold since {since} UTC"), line
    from cli.commands.executions import _attempts

    assert [_attempts(n) for n in (0, 1, 2)] == ["never sent", "1 attempt", "2 attempts"]
