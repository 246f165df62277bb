"""Issue 22 (items 4 and 5), in-process: an operator's pause of one execution and a
workflow's kill switch over the API — the refusals (403, 409, 422, 404), the resume to
the status it left, the stuck reason and the preview, the decision refused while paused,
bulk pause, and a pending execution of a paused workflow never claimed. The worker's
side (a step that checkpoints under a hold, the kill switch at a step boundary) is in
tests/scenarios/test_holds.py (S40, S41)."""

from __future__ import annotations

from django.test import Client

from executions import catalogue, pauses, services
from executions.engine import leases
from executions.models import Execution, Status, WorkflowSwitch


def client(person) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {person.token}")


def post(person, path: str, body: dict) -> tuple[int, dict]:
    response = client(person).post(f"/api{path}", body, content_type="application/json")
    return response.status_code, response.json()


def get(person, path: str) -> dict:
    response = client(person).get(f"/api{path}")
    assert response.status_code == 200, response.content
    return response.json()


def started(people, month: str = "2026-03") -> Execution:
    return services.execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": month})[0]


def test_pause_a_pending_execution_and_resume_it_to_pending(people):
    execution = started(people)
    status, body = post(people["operator"], f"/executions/{execution.ref}/pause", {"reason": "provider outage"})
    assert status == 200, body
    assert body["status"] == "paused" and body["paused_from"] == "pending"
    assert body["stuck"]["reason"] == "paused" and body["stuck"]["action"] == "resume"
    assert "provider outage" in body["stuck"]["detail"]
    assert leases.acquire(execution.pk, owner="worker:test") is None  # a paused execution is never claimed

    preview = get(people["operator"], f"/executions/{execution.ref}/resume-preview")
    assert preview["can_resume"] is True and preview["blocked_by"] == []
    assert preview["hold"]["paused_from"] == "pending" and "returns it to pending" in preview["hold"]["why"]

    status, again = post(people["operator"], f"/executions/{execution.ref}/pause", {"reason": "twice"})
    assert status == 409 and again["status"] == "paused"

    status, body = post(people["operator"], f"/executions/{execution.ref}/resume", {"reason": "outage over"})
    assert status == 200 and body["status"] == "pending" and body["paused_from"] is None and body["stuck"] is None
    transitions = [e.payload["transition"] for e in execution.events.filter(type="transition")]
    assert transitions == ["pause", "unpause"]


def test_pause_refusals_who_may_and_terminal_is_409(people):
    execution = started(people)
    assert post(people["requester"], f"/executions/{execution.ref}/pause", {"reason": "mine"})[0] == 403
    assert post(people["manager"], f"/executions/{execution.ref}/pause", {"reason": "x"})[0] == 403
    status, body = post(people["operator"], f"/executions/{execution.ref}/pause", {"reason": "  "})
    assert status == 422 and body["detail"][0]["loc"] == ["body", "reason"]
    assert post(people["operator"], "/executions/RUN_9999/pause", {"reason": "x"})[0] == 404
    assert Execution.objects.get(pk=execution.pk).status == Status.PENDING  # nothing written

    services.execution_cancel(ref=execution.ref, user=people["operator"].user, reason="done with it")
    status, body = post(people["operator"], f"/executions/{execution.ref}/pause", {"reason": "too late"})
    assert status == 409 and body["status"] == "cancelled"


def test_a_paused_execution_can_be_cancelled(people):
    execution = started(people)
    pauses.execution_pause(ref=execution.ref, user=people["operator"].user, reason="hold")
    status, body = post(people["operator"], f"/executions/{execution.ref}/cancel", {"reason": "give up"})
    assert status == 200 and body["status"] == "cancelled"


def test_bulk_pause_dry_run_then_run(people):
    executions = [started(people, month) for month in ("2026-01", "2026-02")]
    services.execution_cancel(ref=executions[1].ref, user=people["operator"].user, reason="not this one")
    refs = [e.ref for e in executions]
    status, dry = post(
        people["operator"], "/executions/bulk", {"operation": "pause", "ids": refs, "reason": "hold", "dry_run": True}
    )
    assert status == 200 and dry["eligible"] == [refs[0]] and dry["ineligible"][0]["id"] == refs[1]
    status, run = post(
        people["operator"],
        "/executions/bulk",
        {"operation": "pause", "ids": [refs[0]], "reason": "hold", "dry_run": False},
    )
    assert status == 200 and run["results"][0]["outcome"] == "done"
    assert Execution.objects.get(pk=executions[0].pk).status == Status.PAUSED


def test_kill_switch_new_executions_stay_pending_until_the_workflow_resumes(people):
    operator = people["operator"]
    assert post(people["requester"], "/workflows/monthly_report/pause", {"reason": "x"})[0] == 403
    assert post(operator, "/workflows/no_such_flow/pause", {"reason": "x"})[0] == 404
    status, body = post(operator, "/workflows/monthly_report/pause", {"reason": ""})
    assert status == 422 and body["detail"][0]["loc"] == ["body", "reason"]

    status, item = post(operator, "/workflows/monthly_report/pause", {"reason": "publisher is down"})
    assert status == 200, item
    assert item["name"] == "monthly_report" and item["paused"] is True
    assert item["paused_reason"] == "publisher is down" and item["paused_by"] == "operator"
    assert post(operator, "/workflows/monthly_report/pause", {"reason": "again"})[0] == 200  # no second switch
    assert WorkflowSwitch.objects.count() == 1

    response = client(people["requester"]).post(
        "/api/executions",
        {"workflow": "monthly_report", "input": {"month": "2026-04"}},
        content_type="application/json",
    )
    assert response.status_code == 201 and response.json()["status"] == "pending"
    ref = response.json()["id"]
    execution = Execution.objects.get(pk=int(ref.removeprefix("RUN_")))
    assert leases.acquire(execution.pk, owner="worker:test") is None  # accepted, never claimed while paused
    stuck = get(people["operator"], f"/executions/{ref}")["stuck"]
    assert stuck["reason"] == "paused" and "monthly_report is paused" in stuck["detail"]
    other = services.execution_start(
        user=people["requester"].user, workflow="replacement_order", input={"original_order": "ORD-1001"}
    )[0]
    paused_one = started(people, "2026-05")
    pauses.execution_pause(ref=paused_one.ref, user=operator.user, reason="by hand")
    status, body = post(operator, f"/executions/{paused_one.ref}/resume", {"reason": "go"})
    assert status == 409 and "monthly_report is paused" in body["detail"]  # resume the workflow first

    status, item = post(operator, "/workflows/monthly_report/resume", {"reason": "publisher is back"})
    assert status == 200 and item["paused"] is False and item["paused_reason"] is None
    switches = list(WorkflowSwitch.objects.values_list("paused", "reason", "actor__username"))
    assert switches == [(True, "publisher is down", "operator"), (False, "publisher is back", "operator")]
    assert Execution.objects.get(pk=paused_one.pk).status == Status.PAUSED  # an operator's own hold stays
    lease = leases.acquire(execution.pk, owner="worker:test")
    assert lease is not None and Execution.objects.get(pk=execution.pk).status == Status.RUNNING
    assert leases.acquire(other.pk, owner="worker:test") is not None  # another workflow was never held


def page_client(person) -> Client:
    browser = Client()
    browser.force_login(person.user)
    return browser


def test_operations_page_switches_a_workflow_and_manages_schedules(people):
    """The dashboard's place for the kill switch and the schedules (operators only)."""
    from schedules.models import Schedule

    assert page_client(people["manager"]).get("/operations/").status_code == 403
    browser = page_client(people["operator"])
    page = browser.get("/operations/")
    assert page.status_code == 200 and b'data-workflow="monthly_report"' in page.content

    answer = browser.post("/operations/workflows/monthly_report/", {"switch": "pause", "reason": ""}, follow=True)
    assert answer.status_code == 200 and b"say why the workflow is paused" in answer.content
    answer = browser.post(
        "/operations/workflows/monthly_report/", {"switch": "pause", "reason": "incident 42"}, follow=True
    )
    assert b"monthly_report is paused." in answer.content and b"incident 42" in answer.content
    assert catalogue.item("monthly_report")["paused"] is True
    browser.post("/operations/workflows/monthly_report/", {"switch": "resume", "reason": "closed"})
    assert catalogue.item("monthly_report")["paused"] is False

    answer = browser.post("/operations/schedules/", {"workflow": "monthly_report", "cron": "nope"}, follow=True)
    assert answer.status_code == 200 and b"cron: " in answer.content and not Schedule.objects.exists()
    answer = browser.post(
        "/operations/schedules/", {"workflow": "monthly_report", "cron": "0 6 1 * *", "timezone": "UTC"}, follow=True
    )
    made = Schedule.objects.get()
    assert f'data-schedule="{made.pk}"'.encode() in answer.content
    browser.post(f"/operations/schedules/{made.pk}/delete/")
    assert Schedule.objects.get().deleted_at is None  # issue 39 item 15: it asks first
    browser.post(f"/operations/schedules/{made.pk}/delete/", {"confirm": "delete"})
    assert Schedule.objects.get().deleted_at is not None


def test_the_execution_page_pauses_and_offers_resume(people):
    execution = started(people)
    browser = page_client(people["operator"])
    page = browser.get(f"/executions/{execution.ref}/")
    assert b'id="pause-form"' in page.content and b'id="resume-link"' not in page.content
    assert b'id="pause-form"' not in page_client(people["requester"]).get(f"/executions/{execution.ref}/").content
    answer = browser.post(f"/executions/{execution.ref}/pause/", {"reason": "hold it"}, follow=True)
    assert b"resume returns it to pending" in answer.content and b'id="resume-link"' in answer.content
    assert Execution.objects.get(pk=execution.pk).status == Status.PAUSED
    preview = browser.get(f"/executions/{execution.ref}/resume/preview/")
    assert preview.status_code == 200
    browser.post(f"/executions/{execution.ref}/resume/", {"reason": "go"})
    assert Execution.objects.get(pk=execution.pk).status == Status.PENDING


def test_a_kill_switch_read_is_the_latest_switch_of_that_workflow(people, settings):
    """The runner's read before each step (one index probe of the workflow's latest switch)
    says what the list of thrown switches says, whatever was thrown and lifted before."""
    from executions.engine import pauses as engine_pauses

    settings.RUNTIME_SWITCH_RECHECK_SECONDS = 0
    actor = people["operator"].user
    for workflow, paused in [("a", True), ("a", False), ("b", False), ("b", True), ("c", True), ("c", True)]:
        WorkflowSwitch.objects.create(workflow=workflow, paused=paused, reason="drill", actor=actor)
    assert engine_pauses.paused_names() == ["b", "c"]
    for workflow in ("a", "b", "c", "never_switched"):
        assert engine_pauses.workflow_paused(workflow) == (workflow in ("b", "c")), workflow
        assert engine_pauses.workflow_paused(workflow, fresh=False) == (workflow in ("b", "c")), workflow


def test_the_operations_page_says_when_a_workflow_was_paused_in_24_hour_utc(people):
    """Issue 39 item 15: the operations page showed when a kill switch was thrown in
    Django's default format ("Dec. 5, 2026, 6:30 p.m."), 12-hour, where every other page
    says ``YYYY-MM-DD HH:MM:SS UTC``."""
    import re

    pauses.workflow_pause(name="monthly_report", user=people["operator"].user, reason="incident 7")
    switch = WorkflowSwitch.objects.get()
    page = page_client(people["operator"]).get("/operations/").content.decode()
    assert f"{switch.created_at:%Y-%m-%d %H:%M:%S} UTC" in page
    assert not re.search(r"\b[ap]\.m\.", page), "a 12-hour time on the page"
