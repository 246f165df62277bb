"""Issue 38 (item 9.7): an act of ``manage.py keel … --as USER`` is recorded as that user,
as the API records it, and says it came from the shell: beside each event it wrote, a
``via.cli`` marker (cli/trace.py), which the operator audit shows as ``via: "cli"`` (the
API, the page and the CSV); the same act through the API carries no such mark."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from executions.models import Execution, ExecutionEvent


def keel(*args: str) -> str:
    out = io.StringIO()
    call_command("keel", *args, stdout=out)
    return out.getvalue()


def marked(execution: Execution) -> dict[int, dict]:
    """The execution's events marked as written from the command line, by id: their marker's payload."""
    return {m.payload["event"]: m.payload for m in ExecutionEvent.objects.filter(execution=execution, type="via.cli")}


def test_acts_of_the_command_line_say_so_in_the_history_and_the_operator_audit(people):
    ref = keel("start", "monthly_report", "--input", '{"month": "2026-08"}', "--as", "requester").split()[-1]
    execution = Execution.objects.get(pk=int(ref.removeprefix("RUN_")))
    [started] = ExecutionEvent.objects.filter(execution=execution, actor=people["requester"].user).exclude(
        type="via.cli"
    )
    assert marked(execution) == {started.pk: {"event": started.pk, "command": "start", "type": started.type}}

    keel("pause", ref, "--reason", "hold it for the audit", "--as", "operator")
    keel("resume", ref, "--reason", "go on", "--as", "operator")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {people['operator'].token}")
    cancelled = api.post(f"/api/executions/{ref}/cancel", {"reason": "from the API"}, content_type="application/json")
    assert cancelled.status_code == 200, cancelled.content

    by_operator = ExecutionEvent.objects.filter(execution=execution, actor=people["operator"].user)
    acts = list(by_operator.exclude(type="via.cli").order_by("id"))
    commands = {event: mark["command"] for event, mark in marked(execution).items()}
    assert [commands.get(e.pk) for e in acts if e.payload.get("transition") != "cancel"] == ["pause", "resume"]
    assert all(commands.get(e.pk) is None for e in acts if e.payload.get("transition") == "cancel")

    auditor = Client(HTTP_AUTHORIZATION=f"Bearer {people['auditor'].token}")
    items = auditor.get(f"/api/operator-audit?execution={ref}").json()["items"]
    assert [(i["action"], i["actor"], i["via"]) for i in items] == [
        ("cancel", "operator", None),
        ("unpause", "operator", "cli"),
        ("pause", "operator", "cli"),
    ]
    browser = Client()
    browser.force_login(people["auditor"].user)
    assert browser.get(f"/operator-audit/?execution={ref}").content.decode().count("via cli") == 2
    rows = list(csv.DictReader(io.StringIO(browser.get("/operator-audit/export.csv").content.decode())))
    assert sorted(r["via"] for r in rows) == ["", "cli", "cli"]
    assert browser.get(f"/executions/{ref}/").status_code == 200  # the history draws its markers


def test_a_refused_act_of_the_command_line_leaves_no_mark(people):
    ref = keel("start", "monthly_report", "--input", '{"month": "2026-08"}', "--as", "requester").split()[-1]
    execution = Execution.objects.get(pk=int(ref.removeprefix("RUN_")))
    before = ExecutionEvent.objects.filter(execution=execution).count()
    with pytest.raises(CommandError) as refused:
        keel("resume", ref, "--reason", "nothing to resume", "--as", "operator")  # pending: the API's 409
    assert refused.value.returncode == 3
    assert ExecutionEvent.objects.filter(execution=execution).count() == before
