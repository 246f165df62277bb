"""Issue 39's operator controls on the pages, through Django's test client on
PostgreSQL: reject asks why and a confirmation (item 6), a paused execution's approval
card tells the truth (item 7), budget and legal-hold forms (item 8), the remind control
(item 11) and the smaller wording fixes (item 15)."""

from __future__ import annotations

import re
import uuid

import pytest
from django.test import Client

from approvals.models import ApprovalRequest, Decision
from executions import pauses
from executions.models import Execution, Status
from tests.support.records import awaiting_execution


def logged_in(person) -> Client:
    client = Client()
    client.force_login(person.user)
    return client


@pytest.fixture
def awaiting(people):
    return awaiting_execution(people["requester"].user)


def card_form(request, **over) -> dict:
    return {
        "decision": "reject",
        "artifact_version": request.version,
        "content_sha256": request.content_sha256,
        "event_id": uuid.uuid4().hex,
        **over,
    }


# --- item 6: reject asks a reason and a confirmation


def test_reject_from_the_card_asks_why_and_confirms_before_deciding(people, awaiting):
    """Issue 39 item 6: the card's Reject shows what a reject does and a required reason;
    nothing is decided until "Confirm reject", and a confirmation without a reason is
    refused with the typed fields kept."""
    execution, request = awaiting
    manager = logged_in(people["manager"])
    url = f"/executions/{execution.ref}/approvals/{request.pk}/decide/"
    form = card_form(request, comment="")
    first = manager.post(url, form, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="confirm-reject"' in first and "It is final" in first and "required" in first
    assert not Decision.objects.exists()
    assert Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL

    refused = manager.post(url, {**form, "confirm": "reject", "comment": "  "}, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="reject-error"' in refused and "say why you reject it" in refused
    assert form["event_id"] in refused  # the same decision id: a double submit decides once
    assert not Decision.objects.exists()

    done = manager.post(url, {**form, "confirm": "reject", "comment": "wrong month"}, HTTP_HX_REQUEST="true")
    assert "Recorded" in done.content.decode()
    decision = Decision.objects.get()
    assert decision.decision == "reject" and decision.comment == "wrong month" and decision.event_id == form["event_id"]
    assert Execution.objects.get(pk=execution.pk).status == Status.CANCELLED


def test_reject_on_the_approval_page_keeps_the_reason_when_refused(people, awaiting):
    """Issue 39 item 6: on the approval page a confirmed reject that is refused (a stale
    hash) shows the confirmation again with its message and the reason typed (not a
    redirect that drops it); the API still takes a reject without a comment."""
    execution, request = awaiting
    manager = logged_in(people["manager"])
    url = f"/executions/{execution.ref}/approvals/{request.pk}/decide/"
    page = manager.get(f"/approvals/{request.pk}/").content.decode()
    assert re.search(r'value="reject">Reject…<', page)
    asked = manager.post(url, card_form(request, then="inbox", comment="draft"))
    assert asked.status_code == 200 and 'name="then" value="inbox"' in asked.content.decode()
    stale = card_form(request, then="inbox", confirm="reject", comment="numbers are from July", content_sha256="0" * 64)
    refused = manager.post(url, stale)
    body = refused.content.decode()
    assert refused.status_code == 409 and "numbers are from July" in body and 'id="reject-error"' in body
    no_reason = manager.post(url, card_form(request, then="inbox", confirm="reject", comment=""))
    assert no_reason.status_code == 422 and "say why you reject it" in no_reason.content.decode()
    assert not Decision.objects.exists()

    api = Client(HTTP_AUTHORIZATION=f"Bearer {people['manager2'].token}")
    body = {"type": "approval.decision", "approval_id": request.pk, **card_form(request)}
    del body["decision"]
    response = api.post(
        f"/api/executions/{execution.ref}/events", {**body, "decision": "reject"}, content_type="application/json"
    )
    assert response.status_code == 202, response.content


# --- item 7: a paused execution's approval card


def test_a_paused_executions_card_says_who_paused_it_and_that_resume_makes_it_decidable(people, awaiting):
    """Issue 39 item 7: the card of a paused execution said the request "can no longer
    be decided (it expired…)"; it names who paused it and why, and that it can be
    decided once resumed — on the execution page and on the approval page."""
    execution, request = awaiting
    pauses.execution_pause(ref=execution.ref, user=people["operator"].user, reason="audit of the figures")
    manager = logged_in(people["manager"])
    for url in (f"/executions/{execution.ref}/", f"/approvals/{request.pk}/"):
        page = manager.get(url).content.decode()
        assert "may have expired" not in page and "it expired, or the execution moved on" not in page
        closed = re.search(r'id="approval-closed"[^>]*>(.*?)</', page, re.S).group(1)
        assert "expired" not in closed and "operator" in closed and "audit of the figures" in closed, closed
        assert "can be decided once an operator resumes it" in closed, closed
    assert ApprovalRequest.objects.get(pk=request.pk).status == ApprovalRequest.State.PENDING


# --- item 8: budget and legal-hold forms on the execution page


@pytest.fixture
def over_budget(people):
    """An execution its budget stopped (needs_attention budget_exceeded), as the cost guard leaves it."""
    from django.db import transaction

    from executions.engine import lifecycle
    from executions.reasons import StuckReason

    execution = Execution.objects.create(
        workflow="support_agent",
        workflow_version=1,
        input={"ticket": "TCK-1001"},
        input_digest="b",
        created_by=people["requester"].user,
        current_step="agent",
        budget_usd="0.010000",
    )
    with transaction.atomic():
        lifecycle.apply(execution, "start")
        lifecycle.apply(
            execution,
            "flag",
            reason="no call was made — raise the budget, then resume",
            code=StuckReason.BUDGET_EXCEEDED,
        )
    return execution


def test_an_operator_raises_the_budget_from_the_page_audited(people, over_budget):
    """Issue 39 item 8: the page told the operator to "raise the budget" and offered only
    Resume/Cancel; it has a budget form now, calling the API's service (audited in the
    operator audit), and bad amounts are a message on the page, never a 500."""
    from triage import operator_audit

    ref = over_budget.ref
    operator = logged_in(people["operator"])
    page = operator.get(f"/executions/{ref}/").content.decode()
    assert 'id="budget-form"' in page and f'action="/executions/{ref}/budget/"' in page
    assert 'id="budget-form"' not in logged_in(people["requester"]).get(f"/executions/{ref}/").content.decode()

    for amount, said in [("abc", "must be a number"), ("-1", "more than 0"), ("NaN", "at most"), ("2e9", "at most")]:
        answer = operator.post(f"/executions/{ref}/budget/", {"add_usd": amount, "reason": "more calls"}, follow=True)
        body = answer.content.decode()
        assert answer.status_code == 422 and "The budget was not raised: add_usd" in body and said in body, amount
    answer = operator.post(f"/executions/{ref}/budget/", {"add_usd": "0.5", "reason": ""}, follow=True)
    assert "The budget was not raised: reason" in answer.content.decode()
    assert float(Execution.objects.get(pk=over_budget.pk).budget_usd) == pytest.approx(0.01)

    answer = operator.post(
        f"/executions/{ref}/budget/", {"add_usd": "$0.5", "reason": "the ticket is long"}, follow=True
    )
    assert "Raised the budget of" in answer.content.decode() and "Resume it to go on" in answer.content.decode()
    assert float(Execution.objects.get(pk=over_budget.pk).budget_usd) == pytest.approx(0.51)
    acts = [operator_audit.act_of(e) for e in operator_audit.acts(operator_audit.Filters(execution=ref))]
    assert [(a.action, a.actor, a.reason) for a in acts] == [("raise_budget", "operator", "the ticket is long")]

    refused = logged_in(people["manager"]).post(
        f"/executions/{ref}/budget/", {"add_usd": "1", "reason": "x"}, follow=True
    )
    assert "only operators may raise a budget" in refused.content.decode()


def test_an_auditor_places_and_releases_a_legal_hold_from_the_page(people, over_budget):
    """Issue 39 item 8: a legal hold had no control on the page; an auditor places it
    (reason required, a message without one) and releases it there, through the service
    the API and the CLI use (its history records both)."""
    from executions.models import ExecutionEvent

    ref = over_budget.ref
    auditor = logged_in(people["auditor"])
    page = auditor.get(f"/executions/{ref}/").content.decode()
    assert 'id="hold-form"' in page and "Place legal hold" in page
    assert 'id="hold-form"' not in logged_in(people["operator"]).get(f"/executions/{ref}/").content.decode()

    answer = auditor.post(f"/executions/{ref}/hold/", {"hold": "place", "reason": " "}, follow=True)
    assert "The legal hold was not placed: reason" in answer.content.decode()
    answer = auditor.post(f"/executions/{ref}/hold/", {"hold": "place", "reason": "litigation 2026-17"}, follow=True)
    body = answer.content.decode()
    assert "is on legal hold" in body and "Release the legal hold" in body and "litigation 2026-17" in body
    assert Execution.objects.get(pk=over_budget.pk).hold_by == people["auditor"].user

    answer = auditor.post(f"/executions/{ref}/hold/", {"hold": "release"}, follow=True)
    assert "Released the legal hold" in answer.content.decode()
    assert Execution.objects.get(pk=over_budget.pk).hold_at is None
    types = list(
        ExecutionEvent.objects.filter(execution=over_budget, type__startswith="hold.").values_list("type", "actor")
    )
    assert types == [("hold.placed", people["auditor"].user.pk), ("hold.released", people["auditor"].user.pk)]
    refused = logged_in(people["operator"]).post(
        f"/executions/{ref}/hold/", {"hold": "place", "reason": "x"}, follow=True
    )
    assert "only auditors may place or release legal holds" in refused.content.decode()


# --- item 11: the overdue mail, and the remind control


def _mails(execution) -> dict[str, dict]:
    """The e-mails recorded in the ledger for ``execution``, by key (their stored arguments)."""
    from executions.models import Action

    return {a.key: a.args for a in Action.objects.filter(execution=execution, type="notify_approver").order_by("id")}


def test_at_the_sla_the_managers_get_the_decide_link_and_operators_what_they_can_do(people, awaiting, settings):
    """Issue 39 item 11: the approval-overdue mail went to the operators only, with a
    "Decide here" link they can't use; at the SLA the managers who may decide get it
    with the decide link, and an operator's says how to remind them from the page."""
    from django.utils import timezone

    from notifications import planning

    settings.KEEL_NOTIFICATIONS = True
    settings.RUNTIME_APPROVAL_REMIND_SECONDS = 10**6
    execution, request = awaiting
    Execution.objects.filter(pk=execution.pk).update(gate_sla_at=timezone.now() - timezone.timedelta(seconds=1))
    planning.plan()
    overdue = {k.split(":")[3]: v for k, v in _mails(execution).items() if k.endswith(":approval_overdue")}
    assert set(overdue) == {"manager", "manager2", "operator"}
    link = f"/approvals/{request.pk}/"
    for manager in ("manager", "manager2"):
        assert "Decide here: " in overdue[manager]["text"] and link in overdue[manager]["text"]
    operator = overdue["operator"]
    assert "Decide here" not in operator["text"] and link not in operator["text"] and link not in operator["html"]
    assert "Remind the managers" in operator["text"] and f"/executions/{execution.ref}/" in operator["text"]


def test_an_operator_reminds_the_managers_from_the_card_once_per_window(people, awaiting, settings):
    """Issue 39 item 11: the page had no remind control; an operator's "Remind the
    managers" records one e-mail per manager who may decide (a beside action in the
    ledger, with the decide link, who asked and why) and an audited ``operator.remind``;
    a second press within the window sends nothing again and says when the first went."""
    from triage import operator_audit

    settings.KEEL_NOTIFICATIONS = True
    settings.RUNTIME_APPROVAL_REMIND_SECONDS = 10**6
    execution, request = awaiting
    ref = execution.ref
    operator = logged_in(people["operator"])
    page = operator.get(f"/executions/{ref}/").content.decode()
    assert 'id="remind-form"' in page and "Remind the managers" in page
    assert 'id="remind-form"' not in logged_in(people["manager"]).get(f"/executions/{ref}/").content.decode()

    no_reason = operator.post(f"/executions/{ref}/remind/", {"reason": ""}, follow=True).content.decode()
    assert "Nobody was reminded: reason" in no_reason and not _mails(execution)
    done = operator.post(f"/executions/{ref}/remind/", {"reason": "the customer calls daily"}, follow=True)
    assert "Reminded manager, manager2 by e-mail" in done.content.decode()
    sent = _mails(execution)
    assert set(sent) == {f"{request.gate_ref}:notify:manager:remind1", f"{request.gate_ref}:notify:manager2:remind1"}
    for args in sent.values():
        text = args["text"]
        assert f"/approvals/{request.pk}/" in text and "operator (an operator) asks you to decide" in text
        assert "the customer calls daily" in text and "operator" in args["subject"]

    again = operator.post(f"/executions/{ref}/remind/", {"reason": "still nothing"}, follow=True).content.decode()
    assert "were reminded at" in again and "by operator" in again and "nothing sent again" in again
    assert len(_mails(execution)) == 2
    acts = [operator_audit.act_of(e) for e in operator_audit.acts(operator_audit.Filters(execution=ref))]
    assert [(a.action, a.actor, a.reason) for a in acts] == [("remind", "operator", "the customer calls daily")]

    refused = logged_in(people["outsider"]).post(f"/executions/{ref}/remind/", {"reason": "x"}, follow=True)
    assert "only operators may remind the managers" in refused.content.decode()


# --- item 15 (parts): wording and confirmations


def test_an_action_voided_by_changes_requested_is_not_said_to_be_authorised(people, awaiting):
    """Issue 39 item 15: the ledger said "authorised by … request_changes" of an action
    that decision voided; only an approval authorises, and the row says what happened."""
    from approvals.services import approval_decide
    from executions.models import Action

    execution, request = awaiting
    Action.objects.create(
        key=f"{execution.ref}:publish:v1",
        execution=execution,
        step="publish",
        type="publish_report",
        gate_ref=request.gate_ref,
    )
    approval_decide(
        user=people["manager"].user,
        execution_ref=execution.ref,
        approval_id=request.pk,
        decision="request_changes",
        artifact_version=request.version,
        content_sha256=request.content_sha256,
        event_id=uuid.uuid4().hex,
        comment="use the August figures",
    )
    page = logged_in(people["operator"]).get(f"/executions/{execution.ref}/").content.decode()
    ledger = page[page.index('id="ledger"') : page.index("</table>", page.index('id="ledger"'))]
    assert "authorised by" not in ledger and "request_changes" not in ledger, ledger
    assert f"not authorised: approval #{request.pk}: V1" in ledger and "changes requested by manager" in ledger


def test_a_bad_signal_payload_is_a_sentence_not_a_regex():
    """Issue 39 item 15: a payload field that doesn't match its pattern showed the raw
    regex ("String should match pattern '^[A-Za-z0-9]…'"); it names the form expected."""
    from executions.authoring import registry
    from executions.errors import InvalidInput

    flow = registry.get("replacement_order", 2)
    wait = next(s for s in flow.steps if getattr(getattr(s, "spec", None), "signal", "") == "shipment_confirmed")
    with pytest.raises(InvalidInput) as refused:
        wait.spec.parse_payload({"tracking": "<script>"})
    assert refused.value.field == "payload.tracking"
    assert "pattern" not in refused.value.reason and "^" not in refused.value.reason
    assert "is not in the expected form (the carrier's tracking reference, e.g. TRK-123456" in refused.value.reason


def test_schedules_show_their_input_as_json_and_delete_asks_first(people):
    """Issue 39 item 15: the operations page showed a schedule's input as a Python dict
    ({'month': …}) and deleted it on one click; it shows JSON and asks to confirm."""
    from schedules import services as schedules
    from schedules.models import Schedule

    made = schedules.schedule_create(
        user=people["operator"].user,
        workflow="monthly_report",
        cron="0 6 1 * *",
        timezone_name="UTC",
        input={"month": "2026-08", "constraints": ["no tables"]},
        overlap="skip",
    )
    browser = logged_in(people["operator"])
    page = browser.get("/operations/").content.decode()
    assert "{&quot;month&quot;: &quot;2026-08&quot;" in page and "{&#x27;month&#x27;" not in page
    asked = browser.post(f"/operations/schedules/{made.pk}/delete/")
    assert asked.status_code == 200 and 'id="confirm-delete"' in asked.content.decode()
    assert Schedule.objects.get().deleted_at is None
    done = browser.post(f"/operations/schedules/{made.pk}/delete/", {"confirm": "delete"}, follow=True)
    assert "it will not fire again" in done.content.decode() and Schedule.objects.get().deleted_at is not None
