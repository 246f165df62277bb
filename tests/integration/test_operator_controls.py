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
from executions import holds
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
    holds.execution_pause(ref=execution.ref, user=people["operator"].user, reason="audit of the figures")
    manager = logged_in(people["manager"])
    for url in (f"/executions/{execution.ref}/", f"/approvals/{request.pk}/"):
        page = manager.get(url).content.decode()
        assert "may have expired" not in page and "it expired, or the execution moved on" not in page
        closed = re.search(r'id="approval-closed"[^>]*>(.*?)</', page, re.S).group(1)
        assert "expired" not in closed and "operator" in closed and "audit of the figures" in closed, closed
        assert "can be decided once an operator resumes it" in closed, closed
    assert ApprovalRequest.objects.get(pk=request.pk).status == ApprovalRequest.State.PENDING
