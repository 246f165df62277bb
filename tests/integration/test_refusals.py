"""Refused decisions: always audited, with what was sent clipped to fit (never lost to
it), and limited per user so nobody floods the append-only audit (approvals.throttle)."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.test import Client

from approvals.models import AuditEntry, Decision, RefusalWindow
from approvals.services import approval_decide
from executions.engine import sweeper
from executions.errors import Conflict, Forbidden
from executions.models import Execution, Status
from tests.support.screens import decide_form, logged_in


def decision_body(request, **over) -> dict:
    return {
        "type": "approval.decision",
        "approval_id": request.pk,
        "decision": "approve",
        "artifact_version": request.version,
        "content_sha256": request.content_sha256,
        "event_id": uuid.uuid4().hex,
        **over,
    }


def post_decision(person, execution, body, client: Client | None = None):
    return (client or Client()).post(
        f"/api/executions/{execution.ref}/events",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {person.token}",
    )


def refused_entries(user) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(actor=user, kind=AuditEntry.Kind.REFUSED))


def summaries(user) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(actor=user, kind=AuditEntry.Kind.REFUSALS_SUPPRESSED))


def close_window(user) -> None:
    """Let the user's refusal window end now (the counter is not audit: rewinding it is fair)."""
    RefusalWindow.objects.filter(user=user).update(started_at=F("started_at") - timedelta(seconds=3600))


# --- clipped, never lost


def test_a_refusal_with_values_the_database_cant_hold_is_audited_clipped(people, awaiting):
    """Callers other than the edge (a command, a script) can send anything: the refusal
    is still recorded, with each value cut to what its column holds."""
    execution, request = awaiting
    hostile_hash = "\x00\ud800" + "f" * 200
    with pytest.raises(Forbidden):
        approval_decide(
            user=people["outsider"].user,
            execution_ref=execution.ref,
            approval_id=request.pk,
            decision="approve",
            artifact_version=2**40,
            content_sha256=hostile_hash,
            event_id="e-outsider",
            comment="let me",
        )
    (entry,) = refused_entries(people["outsider"].user)
    assert entry.request_id == request.pk and entry.detail["status_code"] == 403
    assert "lacks the permission" in entry.detail["reason"]
    assert entry.artifact_version is None and entry.detail["artifact_version_sent"] == str(2**40)
    assert len(entry.content_sha256) <= 64 and "\x00" not in entry.content_sha256
    assert entry.content_sha256.startswith("?")  # the surrogate, replaced
    assert entry.detail["event_id"] == "e-outsider" and entry.detail["comment"] == "let me"

    # A manager's stale decision: the refusal's own message quotes the hash sent.
    with pytest.raises(Conflict):
        approval_decide(
            user=people["manager"].user,
            execution_ref=execution.ref,
            approval_id=request.pk,
            decision="approve",
            artifact_version=-5,
            content_sha256="\x00" * 64,
            event_id="e-manager",
        )
    (stale,) = refused_entries(people["manager"].user)
    assert stale.detail["status_code"] == 409 and "this request is for V1" in stale.detail["reason"]
    assert "\x00" not in stale.detail["reason"] and stale.content_sha256 == ""
    assert stale.artifact_version is None and stale.detail["artifact_version_sent"] == "-5"
    assert not Decision.objects.exists()
    assert Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL


# --- the burst limit


def test_refusals_past_the_burst_are_429_and_summarised_in_one_entry(people, awaiting):
    """More than 10 refused decisions in 60 s: the rest are 429, counted, not written
    one by one; the next refusal after the window writes one summary entry."""
    execution, request = awaiting
    outsider = people["outsider"]
    answers = [post_decision(outsider, execution, decision_body(request)) for _ in range(14)]
    assert [a.status_code for a in answers] == [403] * 10 + [429] * 4
    limited = answers[-1]
    assert "too many refused decisions" in limited.json()["detail"]
    assert 1 <= limited.json()["retry_after"] <= 60 and limited["Retry-After"] == str(limited.json()["retry_after"])
    assert len(refused_entries(outsider.user)) == 10 and summaries(outsider.user) == []
    assert RefusalWindow.objects.get(user=outsider.user).suppressed == 4

    # Another user is counted apart, and their refusals still answer as usual.
    assert (
        post_decision(people["manager"], execution, decision_body(request, content_sha256="0" * 64)).status_code == 409
    )

    close_window(outsider.user)
    assert post_decision(outsider, execution, decision_body(request)).status_code == 403
    (summary,) = summaries(outsider.user)
    assert summary.detail["suppressed"] == 4 and summary.detail["recorded"] == 10
    assert summary.detail["burst"] == 10 and summary.detail["window_seconds"] == 60
    assert summary.detail["approval_ids"] == [request.pk] and summary.request_id == request.pk
    assert summary.detail["window_started_at"] < summary.detail["window_ended_at"]
    assert "4 more refused decision attempt(s) by outsider" in summary.detail["reason"]
    assert len(refused_entries(outsider.user)) == 11  # the new window's first refusal
    assert not Decision.objects.exists()


def test_a_limited_user_can_still_make_a_valid_decision(people, awaiting):
    """Only refused attempts are limited: a manager who mistyped the hash eleven times
    still approves with the right one."""
    execution, request = awaiting
    manager = people["manager"]
    stale = [post_decision(manager, execution, decision_body(request, content_sha256="0" * 64)) for _ in range(11)]
    assert stale[-1].status_code == 429
    answer = post_decision(manager, execution, decision_body(request))
    assert answer.status_code == 202, answer.content
    assert Decision.objects.get().decided_by == manager.user


def test_the_sweeper_summarises_a_closed_burst_once(people, awaiting, settings):
    settings.APPROVAL_REFUSAL_BURST = 2
    settings.APPROVAL_REFUSAL_WINDOW_SECONDS = 30  # the five attempts fall in it, however slow the machine
    execution, request = awaiting
    outsider = people["outsider"]
    codes = [post_decision(outsider, execution, decision_body(request)).status_code for _ in range(5)]
    assert codes == [403, 403, 429, 429, 429]
    sweeper.sweep()
    assert not summaries(outsider.user), "the window is still open"
    # The window closes on the database's clock: it opened 31 seconds ago.
    RefusalWindow.objects.filter(user=outsider.user).update(started_at=F("started_at") - timedelta(seconds=31))
    sweeper.sweep()
    sweeper.sweep()
    (summary,) = summaries(outsider.user)
    assert summary.detail["suppressed"] == 3 and summary.detail["window_seconds"] == 30
    assert RefusalWindow.objects.get(user=outsider.user).suppressed == 0
    assert len(refused_entries(outsider.user)) == 2


def test_concurrent_refusals_from_several_clients_share_one_limit(people, awaiting):
    """Web processes share no memory: the limit lives in the database row, locked."""
    execution, request = awaiting
    outsider = people["outsider"]
    codes: list[int] = []
    lock = threading.Lock()

    def attempt_five():
        client = Client()
        try:
            for _ in range(5):
                code = post_decision(outsider, execution, decision_body(request), client).status_code
                with lock:
                    codes.append(code)
        finally:
            connection.close()

    threads = [threading.Thread(target=attempt_five) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(codes) == [403] * 10 + [429] * 10
    assert len(refused_entries(outsider.user)) == 10
    assert RefusalWindow.objects.get(user=outsider.user).suppressed == 10


def test_the_approval_card_shows_the_limit_as_a_message(people, awaiting):
    execution, request = awaiting
    client = logged_in(people["outsider"])
    url = f"/executions/{execution.ref}/approvals/{request.pk}/decide/"
    for _ in range(10):
        client.post(url, decide_form(request), HTTP_HX_REQUEST="true")
    response = client.post(url, decide_form(request), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and "too many refused decisions" in response.content.decode()
    assert len(refused_entries(people["outsider"].user)) == 10
