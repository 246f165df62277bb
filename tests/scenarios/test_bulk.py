"""Issue 12 (part): bulk cancel / resume / retry — a dry run that changes nothing, a real
run on exactly the frozen ids it returned, each item its own audited transition — over
the API and in the console; the refusals; who may."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from approvals.models import AuditEntry
from executions import services
from executions.models import Action, Execution, ExecutionEvent, Wait
from tests.support.procs import http
from tests.support.stack import approved, pk, untold, wait_status

BULK = "/executions/bulk"


def snapshot() -> dict:
    """Everything a bulk operation could change: each execution's status and due time,
    each action's status, each wait's, and how many events and audit entries exist."""
    return {
        "executions": sorted(Execution.objects.values_list("pk", "status", "due_at", "updated_at")),
        "actions": sorted(untold(Action.objects.all()).values_list("key", "status")),
        "waits": sorted(Wait.objects.values_list("pk", "status")),
        "events": untold(ExecutionEvent.objects.all()).count(),
        "audit": AuditEntry.objects.count(),
    }


def bulk(api, **body):
    response = api.post(BULK, body)
    assert response.status_code == 200, response.text
    return response.json()


def fault(stack, **spec) -> None:
    assert http().post(f"{stack.sandbox_url}/_faults", json=spec, timeout=5).status_code == 201


def test_s26_bulk_cancel_dry_run_changes_nothing_and_the_run_acts_only_on_the_frozen_ids(stack, people, api_as):
    """S26: bulk cancel: a dry run, then a real run on the ids it returned while new executions arrive."""
    stack.up()
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    waiting = [requester.start(month)["id"] for month in ("2026-01", "2026-02", "2026-03")]
    for ref in waiting:
        wait_status(requester, ref, "awaiting_approval")
    cancelled = requester.start("2026-04")["id"]
    wait_status(requester, cancelled, "awaiting_approval")
    assert requester.post(f"/executions/{cancelled}/cancel", {"reason": "not needed"}).status_code == 200

    before = snapshot()
    dry = bulk(operator, operation="cancel", filter={"workflow": "monthly_report"}, dry_run=True)
    assert snapshot() == before, "a dry run changed something"
    assert dry["operation"] == "cancel" and sorted(dry["eligible"]) == sorted(waiting)
    assert dry["ineligible"] == [{"id": cancelled, "why": "already cancelled"}] and dry["truncated"] is False
    by_ids = bulk(operator, operation="cancel", ids=[*waiting, cancelled, "RUN_999999"], dry_run=True)
    assert by_ids["eligible"] == waiting
    assert by_ids["ineligible"] == [
        {"id": cancelled, "why": "already cancelled"},
        {"id": "RUN_999999", "why": "no such execution"},
    ]
    assert snapshot() == before

    # Between the dry run and the run: a new eligible execution appears, one of the frozen
    # set is cancelled by its requester.
    newcomer = requester.start("2026-05")["id"]
    wait_status(requester, newcomer, "awaiting_approval")
    changed = waiting[0]
    assert requester.post(f"/executions/{changed}/cancel", {"reason": "changed my mind"}).status_code == 200
    newcomer_events = untold(ExecutionEvent.objects.filter(execution_id=pk(newcomer))).count()

    run = bulk(operator, operation="cancel", ids=dry["eligible"], reason="month-end clean-up")
    outcomes = {r["id"]: (r["outcome"], r["detail"]) for r in run["results"]}
    assert set(outcomes) == set(waiting)
    assert outcomes[changed] == ("skipped", "already cancelled")
    for ref in waiting[1:]:
        assert outcomes[ref] == ("done", "awaiting_approval → cancelled")
        body = operator.execution(ref)
        assert body["status"] == "cancelled" and body["pending_approval"] is None
        [transition] = ExecutionEvent.objects.filter(execution_id=pk(ref), type="transition", to_status="cancelled")
        assert transition.actor == people["operator"].user and transition.payload["reason"] == "month-end clean-up"
        [item] = ExecutionEvent.objects.filter(execution_id=pk(ref), type="operator.bulk_item")
        assert item.payload == {
            "batch": run["batch"],
            "operation": "cancel",
            "reason": "month-end clean-up",
            "event": transition.pk,
        }
        assert AuditEntry.objects.filter(execution_id=pk(ref), kind="withdrawn").exists()
    assert operator.execution(newcomer)["status"] == "awaiting_approval", "the newcomer was not in the frozen set"
    assert untold(ExecutionEvent.objects.filter(execution_id=pk(newcomer))).count() == newcomer_events
    [skipped_cancel] = ExecutionEvent.objects.filter(execution_id=pk(changed), to_status="cancelled")
    assert skipped_cancel.actor == people["requester"].user


def test_bulk_resume_and_retry_then_the_worker_finishes_them_and_the_audit_tells(stack, people, api_as):
    stack.up()
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    denied = requester.start("2026-06")["id"]
    fault(stack, endpoint="/reports/publish", fault="error_403", count=1)
    approved(api_as, people, denied)
    wait_status(operator, denied, "needs_attention")
    limited = requester.start("2026-07")["id"]
    fault(stack, endpoint="/reports/publish", fault="rate_limit", retry_after=900, count=1)
    approved(api_as, people, limited)
    wait_status(operator, limited, "retry_pending")

    dry = bulk(operator, operation="resume", filter={"reason": "permission_denied"}, dry_run=True)
    assert dry["eligible"] == [denied] and dry["ineligible"] == []
    dry_retry = bulk(operator, operation="retry", ids=[limited, denied], dry_run=True)
    assert dry_retry["eligible"] == [limited]
    assert dry_retry["ineligible"] == [{"id": denied, "why": "needs_attention, not retry_pending"}]

    resumed = bulk(operator, operation="resume", ids=dry["eligible"], reason="the provider granted access")
    assert resumed["results"] == [{"id": denied, "outcome": "done", "detail": "needs_attention → running"}]
    retried = bulk(operator, operation="retry", ids=dry_retry["eligible"], reason="quota raised")
    assert retried["results"] == [{"id": limited, "outcome": "done", "detail": "due now"}]
    wait_status(operator, denied, "completed")
    wait_status(operator, limited, "completed")
    assert stack.sandbox_stats()["keys"][f"{denied}:publish:v1"]["effects"] == 1
    assert stack.sandbox_stats()["keys"][f"{limited}:publish:v1"]["effects"] == 1

    # The operator audit: the bulk items, with actor, reason, before → after and batch.
    audit = operator.get("/operator-audit").json()["items"]
    by_action = {a["action"]: a for a in audit}
    assert by_action["resume"]["execution"] == denied and by_action["resume"]["actor"] == "operator"
    assert by_action["resume"]["reason"] == "the provider granted access"
    assert (by_action["resume"]["before"], by_action["resume"]["after"]) == ("needs_attention", "running")
    assert by_action["resume"]["batch"] == resumed["batch"]
    assert by_action["retry_now"]["execution"] == limited and by_action["retry_now"]["batch"] == retried["batch"]
    assert by_action["retry_now"]["reason"] == "quota raised"
    assert "cancel" not in by_action, "the manager's approvals are not operator acts"


# --- refusals (no worker: executions in their real first state, pending)


@pytest.fixture
def pending(people) -> list[Execution]:
    user = people["requester"].user
    return [
        services.execution_start(user=user, workflow="monthly_report", input={"month": month})[0]
        for month in ("2026-01", "2026-02", "2026-03")
    ]


def api_client(person=None) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {person.token}") if person else Client()


def post(client: Client, body) -> tuple[int, dict]:
    response = client.post(f"/api{BULK}", body, content_type="application/json")
    return response.status_code, response.json()


def loc(body: dict) -> list:
    return body["detail"][0]["loc"]


def test_refusals_are_422s_naming_the_field_and_do_nothing(people, pending):
    operator = api_client(people["operator"])
    refs = [e.ref for e in pending]
    before = snapshot()
    cases = [
        ({"operation": "cancel", "ids": refs * 167, "reason": "x"}, ["body", "ids"], "at most 500"),
        ({"operation": "cancel", "ids": [*refs, "RUN_999999", "RUN_888888"], "reason": "x"}, ["body", "ids"], None),
        ({"operation": "cancel", "filter": {"status": "pending"}, "reason": "x"}, ["body", "filter"], None),
        (
            {"operation": "cancel", "filter": {"status": "pending"}, "reason": "x", "dry_run": False},
            ["body", "filter"],
            None,
        ),
        ({"operation": "cancel", "ids": refs}, ["body", "reason"], None),
        ({"operation": "cancel", "ids": refs, "reason": "   "}, ["body", "reason"], None),
        ({"operation": "cancel", "reason": "x"}, ["body", "ids"], None),
        ({"operation": "cancel", "ids": [], "reason": "x"}, ["body", "ids"], None),
        ({"operation": "cancel", "ids": ["not-an-id"], "reason": "x"}, ["body", "ids"], None),
        ({"operation": "cancel", "ids": ["RUN_1\x00"], "reason": "x"}, ["body", "ids", 0], None),
        ({"operation": "explode", "ids": refs, "reason": "x"}, ["body", "operation"], None),
        ({"operation": "cancel", "filter": {"status": "bored"}, "dry_run": True}, ["body", "filter", "status"], None),
        ({"operation": "cancel", "filter": {"reason": "bored"}, "dry_run": True}, ["body", "filter", "reason"], None),
        ({"operation": "cancel", "ids": refs, "filter": {}, "dry_run": True}, ["body", "ids"], None),
        ({"operation": "cancel", "dry_run": True}, ["body", "ids"], None),
    ]
    for body, where, says in cases:
        status, answer = post(operator, body)
        assert status == 422, (body, answer)
        assert loc(answer) == where, (body, answer)
        if says:
            assert says in answer["detail"][0]["msg"]
    status, answer = post(operator, cases[1][0])
    assert "RUN_999999" in answer["detail"][0]["msg"] and "RUN_888888" in answer["detail"][0]["msg"]
    assert snapshot() == before, "a refused bulk request changed something"
    assert all(e.status == "pending" for e in Execution.objects.filter(pk__in=[e.pk for e in pending]))

    # 500 is the limit, and a real run with them (duplicates count once) is accepted.
    status, answer = post(operator, {"operation": "cancel", "ids": (refs * 167)[:500], "dry_run": True})
    assert status == 200 and answer["eligible"] == refs


def test_who_may_use_bulk_over_the_api(people, pending):
    refs = [e.ref for e in pending]
    dry = {"operation": "cancel", "ids": refs, "dry_run": True}
    real = {"operation": "cancel", "ids": refs[:1], "reason": "tidy"}
    for role, expected in [(None, 401), ("requester", 403), ("manager", 403), ("auditor", 403)]:
        client = api_client(people[role] if role else None)
        assert post(client, dry)[0] == expected, role
        assert post(client, real)[0] == expected, role
    assert ExecutionEvent.objects.filter(actor__isnull=False).exclude(type="execution.created").count() == 0
    operator = api_client(people["operator"])
    assert post(operator, dry)[0] == 200
    status, answer = post(operator, real)
    assert status == 200 and answer["results"][0]["outcome"] == "done"


# --- the console


def page_client(person=None) -> Client:
    client = Client()
    if person:
        client.force_login(person.user)
    return client


HIDDEN_IDS = re.compile(r'<input type="hidden" name="ids" value="([^"]+)">')
HIDDEN_TOKEN = re.compile(r'<input type="hidden" name="token" value="([^"]+)">')


def test_console_bulk_dry_run_confirm_on_the_frozen_ids_and_results(people, pending):
    client = page_client(people["operator"])
    listing = client.get("/?status=pending").content.decode()
    assert 'id="bulk-link"' in listing and "/bulk/?status=pending" in listing

    chooser = client.get("/bulk/?status=pending")
    assert chooser.status_code == 200 and 'name="operation"' in chooser.content.decode()
    assert "bulk-dry-run" not in chooser.content.decode()

    before = snapshot()
    dry = client.get("/bulk/?status=pending&operation=cancel")
    page = dry.content.decode()
    assert snapshot() == before, "the dry-run page changed something"
    frozen = HIDDEN_IDS.findall(page)
    [token] = HIDDEN_TOKEN.findall(page)
    assert sorted(frozen) == sorted(e.ref for e in pending)
    assert re.search(r'id="bulk-count"><strong>3</strong> eligible', page)

    newcomer, _ = services.execution_start(
        user=people["requester"].user, workflow="monthly_report", input={"month": "2026-04"}
    )
    services.execution_cancel(ref=frozen[0], user=people["requester"].user, reason="changed my mind")

    # No reason: the dry run of exactly those ids again, with the message; nothing done.
    before = snapshot()
    refused = client.post("/bulk/run/", {"operation": "cancel", "ids": frozen, "reason": " ", "token": token})
    assert refused.status_code == 422 and "reason" in refused.content.decode()
    assert sorted(HIDDEN_IDS.findall(refused.content.decode())) == sorted(frozen[1:])
    assert snapshot() == before

    # Ids other than the dry run's (one added, one left out): refused as a whole, nothing done.
    for other in ([*frozen, newcomer.ref], frozen[1:]):
        mismatch = client.post("/bulk/run/", {"operation": "cancel", "ids": other, "reason": "x", "token": token})
        assert mismatch.status_code == 422 and "not exactly the 3 executions the dry run listed" in (
            mismatch.content.decode()
        )
    assert snapshot() == before
    done = client.post(
        "/bulk/run/", {"operation": "cancel", "ids": frozen, "reason": "month-end clean-up", "token": token}
    )
    assert done.status_code == 302 and done["Location"].startswith("/bulk/results/?batch=BULK-")
    results = client.get(done["Location"])
    page = results.content.decode()
    assert results.status_code == 200
    assert re.search(rf'class="result-skipped" data-ref="{frozen[0]}"', page)
    for ref in frozen[1:]:
        assert re.search(rf'class="result-done" data-ref="{ref}"', page)
        assert Execution.objects.get(pk=pk(ref)).status == "cancelled"
    assert Execution.objects.get(pk=newcomer.pk).status == "pending"
    batch = done["Location"].split("=", 1)[1]
    timeline = client.get(f"/executions/{frozen[1]}/").content.decode()
    assert "Part of a bulk operation" in timeline and batch in timeline and "month-end clean-up" in timeline
    audit = client.get(f"/operator-audit/?batch={batch}").content.decode()
    assert audit.count('class="act act-cancel"') == 2 and "month-end clean-up" in audit


def test_console_bulk_bad_values_are_messages_never_500(people, pending):
    client = page_client(people["operator"])
    for query in (
        "status=bored&operation=cancel",
        "reason=bored&operation=cancel",
        "status=pend%00ing&operation=cancel",
        "operation=explode",
        "workflow=" + "w" * 300 + "&operation=cancel",
    ):
        response = client.get(f"/bulk/?{query}")
        page = response.content.decode()
        assert response.status_code == 200, query
        assert 'class="msg error' in page, query
        assert "bulk-dry-run" not in page, query
    before = snapshot()
    for body in (
        {"operation": "cancel", "ids": ["RUN_999999"], "reason": "x"},
        {"operation": "cancel", "ids": ["nope"], "reason": "x"},
        {"operation": "explode", "ids": [pending[0].ref], "reason": "x"},
        {"operation": "cancel", "reason": "x"},
        {"operation": "cancel", "ids": [pending[0].ref] * 501, "reason": "x"},
    ):
        response = client.post("/bulk/run/", body, follow=True)
        assert response.status_code in (200, 422), body
        assert 'class="msg error' in response.content.decode(), body
    assert snapshot() == before
    assert client.get("/bulk/results/?batch=BULK-000000000000").status_code == 404
    assert client.get("/bulk/results/").status_code == 404


@pytest.mark.parametrize(
    ("role", "expected"),
    [(None, 302), ("requester", 403), ("manager", 403), ("auditor", 403), ("operator", 200)],
)
def test_who_may_use_bulk_in_the_console(people, pending, role, expected):
    client = page_client(people[role] if role else None)
    before = snapshot()
    dry = client.get("/bulk/?operation=cancel")
    assert dry.status_code == expected
    token = HIDDEN_TOKEN.findall(dry.content.decode()) if role == "operator" else []
    ids = HIDDEN_IDS.findall(dry.content.decode()) if role == "operator" else [pending[0].ref]
    run = client.post("/bulk/run/", {"operation": "cancel", "ids": ids, "reason": "x", "token": token[:1]})
    assert run.status_code == (302 if role in (None, "operator") else 403)
    if role == "operator":
        assert run["Location"].startswith("/bulk/results/")
        assert client.get(run["Location"]).status_code == 200
    else:
        assert snapshot() == before
        assert client.get("/bulk/results/?batch=BULK-000000000000").status_code == expected
        if role:
            assert 'id="bulk-link"' not in client.get("/").content.decode()
