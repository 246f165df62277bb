"""The htmx screens through Django's test client on PostgreSQL: permissions, CSRF, errors."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest, Decision
from executions.models import Execution, Status
from tests.support.screens import decide_form, logged_in


def test_pages_need_login(client):
    response = client.get("/")
    assert response.status_code == 302 and response.url.startswith("/login/")


def test_list_and_detail_render_for_any_user(people, awaiting):
    execution, request = awaiting
    client = logged_in(people["outsider"])
    assert execution.ref in client.get("/").content.decode()
    page = client.get(f"/executions/{execution.ref}/").content.decode()
    assert request.content_sha256 in page and "V1" in page
    assert "Approve V1" not in page  # not a manager
    assert client.get(f"/executions/{execution.ref}/live/", HTTP_HX_REQUEST="true").status_code == 200
    assert client.get("/live/executions/", HTTP_HX_REQUEST="true").status_code == 200
    assert client.get("/live/", HTTP_HX_REQUEST="true").status_code in (200, 204)


def test_unknown_execution_is_404_everywhere(people):
    client = logged_in(people["manager"])
    for url in ["/executions/RUN_4242/", "/executions/RUN_²/live/", "/executions/RUN_4242/live/"]:
        assert client.get(url).status_code == 404
    response = client.post("/executions/RUN_4242/approvals/1/decide/", {"decision": "approve"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 404


def test_manager_approves_from_the_card(people, awaiting):
    execution, request = awaiting
    client = logged_in(people["manager"])
    assert "Approve V1" in client.get(f"/executions/{execution.ref}/").content.decode()
    response = client.post(
        f"/executions/{execution.ref}/approvals/{request.pk}/decide/", decide_form(request), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200 and "Recorded" in response.content.decode()
    assert Execution.objects.get(pk=execution.pk).status == Status.RUNNING
    assert Decision.objects.get().decided_by == people["manager"].user


def test_stale_hash_from_the_card_is_refused_with_a_message(people, awaiting):
    execution, request = awaiting
    client = logged_in(people["manager"])
    response = client.post(
        f"/executions/{execution.ref}/approvals/{request.pk}/decide/",
        decide_form(request, content_sha256="0" * 64),
        HTTP_HX_REQUEST="true",
    )
    body = response.content.decode()
    assert response.status_code == 200 and "this request is for V1" in body
    assert not Decision.objects.exists()
    assert Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL


@pytest.mark.parametrize("who", ["requester", "operator", "auditor", "outsider"])
def test_only_managers_other_than_the_requester_can_decide(people, awaiting, who):
    execution, request = awaiting
    client = logged_in(people[who])
    response = client.post(
        f"/executions/{execution.ref}/approvals/{request.pk}/decide/", decide_form(request), HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert 'role="alert"' in body and ("lacks the permission" in body or "separation of duties" in body)
    assert not Decision.objects.exists()


def test_overlong_event_id_is_a_message_not_a_500(people, awaiting):
    execution, request = awaiting
    client = logged_in(people["manager"])
    response = client.post(
        f"/executions/{execution.ref}/approvals/{request.pk}/decide/",
        decide_form(request, event_id="x" * 500),
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200 and "event_id" in response.content.decode()
    assert not Decision.objects.exists()


@pytest.mark.parametrize("path", ["decide", "cancel", "start", "resume", "resolve", "redraft", "logout"])
def test_posts_without_a_csrf_token_are_refused(people, awaiting, path):
    execution, request = awaiting
    client = logged_in(
        people["operator"] if path in ("resume", "resolve") else people["manager"], enforce_csrf_checks=True
    )
    url = {
        "decide": f"/executions/{execution.ref}/approvals/{request.pk}/decide/",
        "cancel": f"/executions/{execution.ref}/cancel/",
        "start": "/executions/start/",
        "resume": f"/executions/{execution.ref}/resume/",
        "resolve": f"/executions/{execution.ref}/resolve/",
        "redraft": f"/executions/{execution.ref}/redraft/",
        "logout": "/logout/",
    }[path]
    assert (
        client.post(url, decide_form(request) | {"workflow": "monthly_report", "month": "2026-08"}).status_code == 403
    )
    assert not Decision.objects.exists()
    assert Execution.objects.count() == 1
    assert Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL


def test_cancel_from_the_page_withdraws_the_request(people, awaiting):
    execution, request = awaiting
    client = logged_in(people["operator"])
    response = client.post(f"/executions/{execution.ref}/cancel/", {"reason": "no longer needed"})
    assert response.status_code == 302
    assert Execution.objects.get(pk=execution.pk).status == Status.CANCELLED
    assert ApprovalRequest.objects.get(pk=request.pk).status == ApprovalRequest.State.WITHDRAWN


def test_operator_resolves_an_unknown_outcome_from_the_page(people, unknown_outcome):
    execution, action = unknown_outcome
    client = logged_in(people["operator"])
    page = client.get(f"/executions/{execution.ref}/").content.decode()
    assert "Outcome unknown" in page and action.key in page
    response = client.post(
        f"/executions/{execution.ref}/resolve/",
        {"key": action.key, "outcome": "succeeded", "evidence": "seen on the portal"},
        follow=True,
    )
    assert f"Resolved {action.key} as succeeded" in response.content.decode()
    action.refresh_from_db()
    assert action.status == "succeeded" and action.receipt["resolved_by"] == "operator"
    assert Execution.objects.get(pk=execution.pk).status == Status.RUNNING


def test_an_email_or_webhook_in_flight_is_no_outcome_to_resolve(people, unknown_outcome):
    """Beside its unknown publish, the execution's e-mail and webhook being sent (executing)
    or lost (unknown) get no card: their sender settles them, and they never hold up a resume."""
    from executions.models import Action

    execution, action = unknown_outcome
    for n, status in enumerate((Action.State.EXECUTING, Action.State.UNKNOWN)):
        Action.objects.create(
            key=f"{execution.ref}:told:{n}",
            execution=execution,
            step="",
            type="webhook",
            status=status,
            attempts=1,
            beside=True,
        )
    page = logged_in(people["operator"]).get(f"/executions/{execution.ref}/").content.decode()
    assert page.count('class="unknown-outcome"') == 1 and action.key in page
    assert f'value="{execution.ref}:told:0"' not in page and f'value="{execution.ref}:told:1"' not in page
    assert f"{execution.ref}:told:1" in page  # the ledger still lists it, with its status


def test_resolve_refused_for_non_operators_and_without_evidence(people, unknown_outcome):
    execution, action = unknown_outcome
    manager = logged_in(people["manager"])
    assert "Outcome unknown" not in manager.get(f"/executions/{execution.ref}/").content.decode()
    response = manager.post(
        f"/executions/{execution.ref}/resolve/",
        {"key": action.key, "outcome": "succeeded", "evidence": "x"},
        follow=True,
    )
    assert "only operators" in response.content.decode()
    operator = logged_in(people["operator"])
    response = operator.post(
        f"/executions/{execution.ref}/resolve/",
        {"key": action.key, "outcome": "succeeded", "evidence": " "},
        follow=True,
    )
    assert "evidence" in response.content.decode()
    action.refresh_from_db()
    assert action.status == "unknown"


def test_the_executions_address_leads_to_the_list_with_its_filters(people):
    answer = logged_in(people["operator"]).get("/executions/?status=failed")
    assert answer.status_code == 302 and answer["Location"] == "/?status=failed"
