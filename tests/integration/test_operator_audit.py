"""Issue 12 (part): the operator audit — every act a person took on executions (cancel,
resume, retry now, resolve, signal, bulk items), once each, with actor, reason and
before → after; filtered, paged, as CSV and over the API; for operators and auditors."""

from __future__ import annotations

import csv
import datetime as dt
import io
import uuid

import pytest
from django.test import Client
from django.utils import timezone

from executions import services
from executions.models import Execution
from tests.support.procs import http
from tests.support.stack import pk, wait_for, wait_status


def fault(stack, **spec) -> None:
    assert http().post(f"{stack.sandbox_url}/_faults", json=spec, timeout=5).status_code == 201


def decide(api_as, people, ref: str, decision: str = "approve", comment: str = "") -> None:
    approval = wait_status(api_as(people["requester"]), ref, "awaiting_approval")["pending_approval"]
    answer = api_as(people["manager"]).decide(ref, approval, decision, comment=comment)
    assert answer.status_code == 202, answer.text


def csv_rows(response) -> list[dict]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_every_operator_act_is_listed_once_with_actor_reason_and_change(stack, people, api_as):
    stack.up()
    requester, operator = api_as(people["requester"]), api_as(people["operator"])

    cancelled = requester.start("2026-01")["id"]
    wait_status(requester, cancelled, "awaiting_approval")
    assert operator.post(f"/executions/{cancelled}/cancel", {"reason": "duplicate of another run"}).status_code == 200

    denied = requester.start("2026-02")["id"]
    fault(stack, endpoint="/reports/publish", fault="error_403", count=1)
    decide(api_as, people, denied)
    wait_status(operator, denied, "needs_attention")
    assert operator.post(f"/executions/{denied}/resume", {"reason": "access granted"}).status_code == 200
    wait_status(operator, denied, "completed")  # before the next fault: faults meet the next call

    limited = requester.start("2026-03")["id"]
    fault(stack, endpoint="/reports/publish", fault="rate_limit", retry_after=900, count=1)
    decide(api_as, people, limited)
    wait_status(operator, limited, "retry_pending")
    assert operator.post(f"/executions/{limited}/retry", {"reason": "quota raised"}).status_code == 200
    wait_status(operator, limited, "completed")

    unknown = requester.start("2026-04")["id"]
    fault(stack, endpoint="/reports/publish", fault="commit_then_hang", count=1, hang_seconds=5)
    fault(stack, endpoint="/reports/publications", fault="error_500", method="GET", count=10_000)
    decide(api_as, people, unknown)
    wait_status(operator, unknown, "needs_attention", timeout=120)
    assert http().delete(f"{stack.sandbox_url}/_faults", timeout=5).status_code == 200
    key = f"{unknown}:publish:v1"
    resolved = operator.post(f"/actions/{key}/resolve", {"outcome": "succeeded", "evidence": "listed on the portal"})
    assert resolved.status_code == 200, resolved.text

    order = requester.post("/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-1001"}})
    shipped = order.json()["id"]
    decide(api_as, people, shipped)
    wait_status(operator, shipped, "waiting")
    signal = operator.signal(shipped, "shipment_confirmed", {"tracking": "TRK-1"})
    assert signal.status_code == 202, signal.text

    rejected = requester.start("2026-05")["id"]
    decide(api_as, people, rejected, "reject", "wrong month")
    bulk_target = requester.start("2026-06")["id"]
    wait_status(requester, bulk_target, "awaiting_approval")
    run = operator.post(
        "/executions/bulk", {"operation": "cancel", "ids": [bulk_target], "reason": "end of quarter sweep"}
    ).json()
    wait_status(operator, unknown, "completed")
    wait_for(lambda: Execution.objects.get(pk=pk(shipped)).status == "completed", what=f"{shipped} to complete")

    answer = operator.get("/operator-audit")
    assert answer.status_code == 200, answer.text
    acts = answer.json()["items"]
    seen = sorted((a["execution"], a["action"]) for a in acts)
    assert seen == sorted(
        [
            (cancelled, "cancel"),
            (denied, "resume"),
            (limited, "retry_now"),
            (unknown, "resolve"),
            (shipped, "signal"),
            (bulk_target, "cancel"),
        ]
    ), "each act once: no decisions, no rejection's cancel, no wake after the signal, no resume after the resolve"
    by = {a["execution"]: a for a in acts}
    assert all(a["actor"] == "operator" for a in acts)
    assert (by[cancelled]["reason"], by[cancelled]["before"], by[cancelled]["after"]) == (
        "duplicate of another run",
        "awaiting_approval",
        "cancelled",
    )
    assert (by[denied]["reason"], by[denied]["before"], by[denied]["after"]) == (
        "access granted",
        "needs_attention",
        "running",
    )
    assert (by[limited]["reason"], by[limited]["after"]) == ("quota raised", "retry_pending, due now")
    assert (by[unknown]["reason"], by[unknown]["subject"], by[unknown]["after"]) == (
        "listed on the portal",
        key,
        "succeeded",
    )
    assert (by[shipped]["subject"], by[shipped]["before"], by[shipped]["after"]) == (
        "shipment_confirmed",
        "waiting",
        "running",
    )
    assert by[bulk_target]["batch"] == run["batch"] and by[bulk_target]["reason"] == "end of quarter sweep"
    assert by[cancelled]["batch"] is None

    # The page and its CSV, for an auditor.
    auditor = Client()
    auditor.force_login(people["auditor"].user)
    page = auditor.get("/operator-audit/")
    assert page.status_code == 200
    html = page.content.decode()
    for ref in by:
        assert f'href="/executions/{ref}/"' in html
    assert "duplicate of another run" in html and "end of quarter sweep" in html and run["batch"] in html
    exported = csv_rows(auditor.get("/operator-audit/export.csv"))
    assert sorted((r["execution"], r["action"]) for r in exported) == seen
    row = next(r for r in exported if r["execution"] == bulk_target)
    assert (row["actor"], row["reason"], row["before"], row["after"], row["batch"]) == (
        "operator",
        "end of quarter sweep",
        "awaiting_approval",
        "cancelled",
        run["batch"],
    )
    filtered = csv_rows(auditor.get(f"/operator-audit/export.csv?action=cancel&batch={run['batch']}"))
    assert [r["execution"] for r in filtered] == [bulk_target]


# --- filters, pages, refusals (in-process; the acts are real cancels through the service)


def cancelled(people, count: int) -> list[Execution]:
    """``count`` executions, started by the requester; the operator cancels all but the
    last, the requester their own last one."""
    out = []
    for n in range(count):
        execution, _ = services.execution_start(
            user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"}
        )
        who = people["requester"] if n == count - 1 else people["operator"]
        services.execution_cancel(ref=execution.ref, user=who.user, reason=f"=SUM(A1) tidy {n}")
        out.append(execution)
    return out


@pytest.fixture
def cancels(people) -> list[Execution]:
    """51 acts: the operator's 50 fill one page, the requester's is on the second."""
    return cancelled(people, 51)


@pytest.fixture
def two_acts(people) -> list[Execution]:
    """An operator's cancel and a requester's: rows for a filter to find or refuse."""
    return cancelled(people, 2)


def client_as(person=None) -> Client:
    client = Client()
    if person:
        client.force_login(person.user)
    return client


def test_filters_pages_and_csv(people, cancels):
    client = client_as(people["operator"])
    first = client.get("/operator-audit/").content.decode()
    assert first.count('class="act act-cancel"') == 50 and "page 1 of 2 · 51 acts" in first
    second = client.get("/operator-audit/?page=2").content.decode()
    assert second.count('class="act act-cancel"') == 1 and "tidy 0</td>" in second

    mine = client.get("/operator-audit/?actor=REQUESTER").content.decode()
    assert mine.count('class="act act-cancel"') == 1 and "tidy 50</td>" in mine
    one = cancels[7]
    by_execution = client.get(f"/operator-audit/?execution={one.pk}").content.decode()
    assert by_execution.count('class="act act-cancel"') == 1 and f"{one.ref}</a>" in by_execution
    assert 'value="' + one.ref + '"' in by_execution
    assert client.get("/operator-audit/?action=resume").content.decode().count('class="act ') == 0
    today = timezone.now().date()
    tomorrow = today + dt.timedelta(days=1)
    assert client.get(f"/operator-audit/?from={tomorrow}").content.decode().count('class="act ') == 0
    assert "page 1 of 2" in client.get(f"/operator-audit/?from={today}&to={today}").content.decode()

    # The CSV holds every match (not one page), formulas neutralised, filters applied.
    rows = csv_rows(client.get("/operator-audit/export.csv"))
    assert len(rows) == 51 and rows[0]["reason"] == "'=SUM(A1) tidy 50"
    requester_rows = csv_rows(client.get("/operator-audit/export.csv?actor=requester"))
    assert [(r["execution"], r["actor"], r["action"]) for r in requester_rows] == [
        (cancels[50].ref, "requester", "cancel")
    ]

    # The API pages with a cursor.
    api = Client(HTTP_AUTHORIZATION=f"Bearer {people['auditor'].token}")
    page1 = api.get("/api/operator-audit").json()
    page2 = api.get(f"/api/operator-audit?cursor={page1['next']}").json()
    assert len(page1["items"]) == 50 and len(page2["items"]) == 1 and page2["next"] is None
    assert api.get(f"/api/operator-audit?execution={one.ref}&action=cancel").json()["items"][0]["execution"] == one.ref


@pytest.mark.parametrize(
    "query",
    [
        "action=explode",
        "execution=RUN_X",
        "execution=RUN_99999999999999999",
        "from=2026-13-40",
        "to=yesterday",
        "from=2026-12-02&to=2026-12-01",
        "actor=%00",
        "actor=" + "a" * 300,
        "batch=not-a-batch",
        "page=-1",
        "page=%00",
    ],
)
def test_bad_filter_values_are_messages_never_500(people, two_acts, query):
    client = client_as(people["auditor"])
    page = client.get(f"/operator-audit/?{query}")
    assert page.status_code == 200, query
    html = page.content.decode()
    if not query.startswith(("page=", "execution=RUN_9")):
        assert 'class="msg error' in html, query
    assert client.get(f"/operator-audit/export.csv?{query}").status_code == 200


def test_the_api_refuses_bad_filter_values_with_422(people):
    api = Client(HTTP_AUTHORIZATION=f"Bearer {people['operator'].token}")
    for query, field in [
        ("action=explode", "action"),
        ("execution=RUN_X", "execution"),
        ("from=2026-13-40", "from"),
        ("batch=nope", "batch"),
        ("cursor=0", "cursor"),
        ("cursor=99999999999", "cursor"),
        ("actor=%00", "actor"),
    ]:
        answer = api.get(f"/api/operator-audit?{query}")
        assert answer.status_code == 422, query
        assert answer.json()["detail"][0]["loc"] == ["query", field], query


@pytest.mark.parametrize(
    ("role", "page", "api"),
    [
        (None, 302, 401),
        ("requester", 403, 403),
        ("manager", 403, 403),
        ("outsider", 403, 403),
        ("operator", 200, 200),
        ("auditor", 200, 200),
    ],
)
def test_who_may_read_the_operator_audit(people, role, page, api):
    client = client_as(people[role] if role else None)
    assert client.get("/operator-audit/").status_code == page
    assert client.get("/operator-audit/export.csv").status_code == page
    token = {"HTTP_AUTHORIZATION": f"Bearer {people[role].token}"} if role else {}
    assert Client(**token).get("/api/operator-audit").status_code == api
    nav = client.get("/").content.decode() if role else ""
    assert ('id="nav-operator-audit"' in nav) == (page == 200)


def test_a_bulk_item_names_its_batch_and_the_batch_filter_finds_it(people):
    user = people["requester"].user
    refs = [
        services.execution_start(user=user, workflow="monthly_report", input={"month": "2026-08"})[0].ref
        for _ in range(2)
    ]
    api = Client(HTTP_AUTHORIZATION=f"Bearer {people['operator'].token}")
    answer = api.post(
        "/api/executions/bulk",
        {"operation": "cancel", "ids": refs, "reason": f"sweep {uuid.uuid4().hex[:6]}"},
        content_type="application/json",
    ).json()
    listed = api.get(f"/api/operator-audit?batch={answer['batch']}").json()["items"]
    assert sorted(a["execution"] for a in listed) == sorted(refs)
    assert {a["batch"] for a in listed} == {answer["batch"]} and {a["action"] for a in listed} == {"cancel"}


def test_kill_switch_legal_holds_and_schedules_are_operator_acts(people, sandbox, settings):
    """Issue 39 item 12: a workflow's kill switch (thrown and lifted, and the pause it
    caused at a step boundary, naming who threw it), a legal hold placed and released, and
    a schedule created and deleted are operator acts — on the page, in the CSV and under
    the action filter — with who, when, what and why, from the records they leave."""
    from approvals.models import ApprovalRequest
    from approvals.services import approval_decide
    from executions import pauses
    from executions.engine import runner
    from retention.holds import hold_place, hold_release
    from schedules import services as schedules

    settings.SANDBOX_URL = sandbox.url
    operator, auditor = people["operator"].user, people["auditor"].user
    execution = services.execution_start(
        user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"}
    )[0]
    for _ in range(20):
        runner.advance(execution.pk, worker="worker:audit-test")
        execution.refresh_from_db()
        if execution.status == "awaiting_approval":
            break
    request = ApprovalRequest.objects.get(execution=execution, status="pending")
    pauses.workflow_pause(name="monthly_report", user=operator, reason="publisher is down")
    approval_decide(
        user=people["manager"].user,
        execution_ref=execution.ref,
        approval_id=request.pk,
        decision="approve",
        artifact_version=request.version,
        content_sha256=request.content_sha256,
        event_id="kill-switch-audit",
    )
    runner.advance(execution.pk, worker="worker:audit-test")  # the claim reads the switch: paused there
    execution.refresh_from_db()
    assert execution.status == "paused" and execution.paused_by_workflow
    pauses.workflow_resume(name="monthly_report", user=operator, reason="publisher is back")
    hold_place(ref=execution.ref, user=auditor, reason="litigation L-7")
    hold_release(ref=execution.ref, user=auditor)
    schedule = schedules.schedule_create(user=operator, workflow="monthly_report", cron="0 6 1 * *")
    schedules.schedule_delete(user=operator, schedule_id=schedule.pk)

    client = client_as(people["auditor"])
    rows = csv_rows(client.get("/operator-audit/export.csv"))
    by_action = {}
    for row in rows:
        by_action.setdefault(row["action"], []).append(row)
    (thrown,) = by_action["workflow_pause"]
    assert (thrown["actor"], thrown["reason"], thrown["after"]) == ("operator", "publisher is down", "paused")
    assert "monthly_report" in thrown["subject"] and thrown["execution"] == ""
    (lifted,) = by_action["workflow_resume"]
    assert (lifted["actor"], lifted["reason"]) == ("operator", "publisher is back")
    (paused,) = [r for r in by_action["pause"] if r["execution"] == execution.ref]
    assert (paused["actor"], paused["subject"], paused["reason"]) == ("operator", "kill switch", "publisher is down")
    (held,) = by_action["hold"]
    assert (held["execution"], held["actor"], held["reason"]) == (execution.ref, "auditor", "litigation L-7")
    (released,) = by_action["release_hold"]
    assert (released["execution"], released["actor"], released["reason"]) == (
        execution.ref,
        "auditor",
        "litigation L-7",
    )
    (made,) = by_action["schedule_create"]
    (deleted,) = by_action["schedule_delete"]
    assert made["actor"] == deleted["actor"] == "operator"
    assert f"schedule {schedule.pk}: monthly_report at 0 6 1 * *" in made["subject"] and deleted["after"] == "deleted"
    assert [r["action"] for r in rows[:2]] == ["schedule_delete", "schedule_create"]  # newest first

    # The page, and each action as a filter; the actor filter finds the switch's pause by its thrower.
    page = client.get("/operator-audit/").content.decode()
    for action in ("workflow_pause", "workflow_resume", "hold", "release_hold", "schedule_create", "schedule_delete"):
        assert f'class="act act-{action}"' in page, action
        only = client.get(f"/operator-audit/?action={action}").content.decode()
        assert only.count('class="act ') == 1, action
    mine = csv_rows(client.get("/operator-audit/export.csv?actor=operator&action=pause"))
    assert [r["subject"] for r in mine] == ["kill switch"]
    assert csv_rows(client.get(f"/operator-audit/export.csv?execution={execution.ref}&action=workflow_pause")) == []
    # The API (events alone) lists the holds and the kill switch's pause too.
    api = Client(HTTP_AUTHORIZATION=f"Bearer {people['auditor'].token}")
    listed = api.get(f"/api/operator-audit?execution={execution.ref}").json()["items"]
    assert {"hold", "release_hold", "pause"} <= {a["action"] for a in listed}
