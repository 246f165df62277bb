"""Issue 17, "every answer right": what the operator is told is safe to do, checked
against the record, in process (Django's test client on PostgreSQL). The paths that
need real processes and a browser are in tests/test_browser_operator_paths.py, the
re-wake loop in tests/test_rewake.py.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from executions import lifecycle
from executions.models import Action, Execution, ExecutionEvent, Status
from tests.test_screens import awaiting, logged_in  # noqa: F401 - a fixture


def bearer(person) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {person.token}"}


def api_post(person, path: str, body: dict):
    return Client().post(f"/api{path}", json.dumps(body), content_type="application/json", **bearer(person))


def retrying(people, *, due_in: float = 900) -> Execution:
    """A report whose publish is waiting for its next attempt (a 429), as the runner leaves it."""
    execution = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={"month": "2026-08"},
        input_digest="d",
        created_by=people["requester"].user,
        current_step="publish",
        context={"state": {}, "artifacts": {}, "notes": {"constraints": [], "facts": [], "completed_steps": []}},
    )
    with transaction.atomic():
        lifecycle.apply(execution, "start")
        execution.due_at = timezone.now() + timedelta(seconds=due_in)
        execution.failed_attempts = 1
        lifecycle.apply(
            execution,
            "schedule_retry",
            reason="429 from /reports/publish",
            code="rate_limited",
            update_fields=("due_at", "failed_attempts"),
        )
    return execution


# --- item 6: cancel needs a reason and a confirmation


def test_cancel_without_a_reason_is_a_422_naming_it_and_changes_nothing(people, awaiting):  # noqa: F811
    execution, _ = awaiting
    events = ExecutionEvent.objects.filter(execution=execution).count()
    for body in ({}, {"reason": ""}, {"reason": "   "}):
        answer = api_post(people["operator"], f"/executions/{execution.ref}/cancel", body)
        assert answer.status_code == 422, answer.content
        assert answer.json()["detail"][0]["loc"] == ["body", "reason"]
    assert Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL
    assert ExecutionEvent.objects.filter(execution=execution).count() == events
    done = api_post(people["operator"], f"/executions/{execution.ref}/cancel", {"reason": "duplicate request"})
    assert done.status_code == 200 and done.json()["status"] == "cancelled"
    cancel = ExecutionEvent.objects.filter(execution=execution, type="transition").last()
    assert cancel.payload["reason"] == "duplicate request" and cancel.actor == people["operator"].user


def test_cancel_on_the_page_is_a_confirmation_first_then_needs_a_reason(people, awaiting):  # noqa: F811
    execution, request = awaiting
    operator = logged_in(people["operator"])
    page = operator.get(f"/executions/{execution.ref}/").content.decode()
    assert 'id="cancel-link"' in page and f'action="/executions/{execution.ref}/cancel/"' not in page, (
        "no one-click cancel on the execution page"
    )

    confirm = operator.get(f"/executions/{execution.ref}/cancel/")
    assert confirm.status_code == 200
    text = confirm.content.decode()
    assert "It is final" in text
    assert "It stops waiting for a decision to publish report" in text and 'id="confirm-cancel"' in text
    assert Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL, "a GET changes nothing"

    refused = operator.post(f"/executions/{execution.ref}/cancel/", {"reason": "  "})
    assert refused.status_code == 422 and 'id="cancel-error"' in refused.content.decode()
    assert "say why it is cancelled" in refused.content.decode()
    assert Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL

    done = operator.post(f"/executions/{execution.ref}/cancel/", {"reason": "the month was wrong"}, follow=True)
    assert done.status_code == 200 and f"Cancelled {execution.ref}." in done.content.decode()
    assert Execution.objects.get(pk=execution.pk).status == Status.CANCELLED
    again = operator.get(f"/executions/{execution.ref}/cancel/").content.decode()
    assert 'id="cancel-refused"' in again and 'id="confirm-cancel"' not in again


def test_the_cancel_page_names_what_it_voids_leaves_for_a_person_and_can_no_longer_resolve(people, awaiting):  # noqa: F811
    execution, request = awaiting
    Action.objects.create(execution=execution, key=f"{execution.ref}:publish:v1", step="publish", type="publish_report")
    assert logged_in(people["outsider"]).get(f"/executions/{execution.ref}/cancel/").status_code == 403
    text = logged_in(people["requester"]).get(f"/executions/{execution.ref}/cancel/").content.decode()
    assert "Never sent, and now never will be" in text and f"{execution.ref}:publish:v1" in text


# --- item 2: Retry now on the execution page, with a reason


def test_retry_now_is_on_the_page_of_a_retry_pending_execution_and_needs_a_reason(people):
    execution = retrying(people)
    operator = logged_in(people["operator"])
    page = operator.get(f"/executions/{execution.ref}/").content.decode()
    assert 'id="retry-form"' in page and "Retry now" in page
    assert 'id="retry-form"' not in logged_in(people["requester"]).get(f"/executions/{execution.ref}/").content.decode()

    no_reason = operator.post(f"/executions/{execution.ref}/retry/", {"reason": ""}, follow=True)
    assert "say why it should run now" in no_reason.content.decode()
    assert Execution.objects.get(pk=execution.pk).due_at > timezone.now() + timedelta(seconds=800)

    done = operator.post(f"/executions/{execution.ref}/retry/", {"reason": "the quota was raised"}, follow=True)
    assert "is due now" in done.content.decode()
    assert Execution.objects.get(pk=execution.pk).due_at <= timezone.now()
    [act] = ExecutionEvent.objects.filter(execution=execution, type="operator.retry_now")
    assert act.actor == people["operator"].user and act.payload["reason"] == "the quota was raised"
    assert logged_in(people["requester"]).post(f"/executions/{execution.ref}/retry/", {"reason": "x"}).status_code == 302
    assert ExecutionEvent.objects.filter(execution=execution, type="operator.retry_now").count() == 1


def test_retry_now_is_not_offered_where_it_cannot_work(people, awaiting):  # noqa: F811
    execution, _ = awaiting
    page = logged_in(people["operator"]).get(f"/executions/{execution.ref}/").content.decode()
    assert 'id="retry-form"' not in page
