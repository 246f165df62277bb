"""Issue 39, item 15: the inbox and the approval mail didn't name the report's month: a
manager with three monthly reports waiting saw three identical rows. Now each inbox row,
the approval card and the approval-request mail (subject and body) say what the
execution is about, from its input (``month 2026-08``)."""

from __future__ import annotations

import datetime as dt

from django.test import Client

from notifications import mail
from tests.support.records import awaiting_execution


def test_the_inbox_row_and_the_approval_card_name_the_month(people):
    """Issue 39 item 15: ``month 2026-08`` on the inbox row and the approval card."""
    execution, request = awaiting_execution(people["requester"].user)
    manager = Client()
    manager.force_login(people["manager"].user)
    inbox = manager.get("/approvals/inbox/").content.decode()
    assert "month 2026-08" in inbox
    card = manager.get(f"/approvals/{request.pk}/").content.decode()
    assert 'id="approval-about">month 2026-08<' in card


def test_the_approval_mail_names_the_month_in_subject_and_body(people):
    """Issue 39 item 15: the subject keeps the id and V1 and ends with the month; the body says it too."""
    execution, request = awaiting_execution(people["requester"].user)
    request.expires_at = dt.datetime(2026, 12, 14, 18, 20, 10, 831000, tzinfo=dt.UTC)
    message = mail.compose(request, kind="opened", to="manager@example.com", key="k1")
    assert message["subject"].startswith(f"[keel] {execution.ref}: ")
    assert message["subject"].endswith(" (month 2026-08)")
    assert "V1" in message["subject"] and "\n" not in message["subject"]
    assert "About: month 2026-08" in message["text"]
    assert "month 2026-08" in message["html"]
    expires = "2026-12-14 18:20:10 UTC"  # as the pages write it, not an ISO stamp with microseconds
    assert f"Expires: {expires}\n" in message["text"] and f"<td>{expires}</td>" in message["html"]


def test_where_a_gate_without_on_reject_is_decided_reject_says_it_cancels(people):
    """A monthly report's gate declares no ``on_reject``: both pages offering Reject say it
    cancels the execution (tests/scenarios/test_control_flow.py's S53 checks the wording
    of a gate whose reject goes on)."""
    execution, request = awaiting_execution(people["requester"].user)
    manager = Client()
    manager.force_login(people["manager"].user)
    for path in (f"/approvals/{request.pk}/", f"/executions/{execution.ref}/"):
        html = manager.get(path).content.decode()
        assert f"Reject is final (it cancels {execution.ref})" in html and "goes on at" not in html, path


def test_who_was_told_is_shown_to_who_decides_and_auditors_only_with_hosts_not_hook_urls(people):
    """The review's finding: the "Who was told" card named the approvers' addresses and, in
    a webhook's error, the hook's URL (whose path carries its secret) to anyone who may read
    the execution. Now it is the approvers' and the auditors' card, and an error names the
    receiver's host alone."""
    from approvals.outcomes import hosts_only

    execution, request = awaiting_execution(people["requester"].user)
    for who, shown in [("manager", True), ("auditor", True), ("requester", False), ("operator", False)]:
        client = Client()
        client.force_login(people[who].user)
        answer = client.get(f"/approvals/{request.pk}/")
        assert answer.status_code == 200 and ('id="told"' in answer.content.decode()) is shown, who
    said = hosts_only("could not connect to https://hooks.example:8443/T0/s3cret?token=x (refused)")
    assert said == "could not connect to hooks.example:8443 (refused)"


def test_the_execution_pages_ledger_names_a_webhooks_host_not_its_url(people):
    """The same rule on the execution page's ledger, which anyone who may read the
    execution sees: a webhook told beside the steps shows its receiver's host, never the
    hook's path or query (a receipt's ``url``, an error quoting it)."""
    from executions.models import Action

    execution, _ = awaiting_execution(people["requester"].user)
    Action.objects.create(
        key=f"{execution.ref}:webhook:approval.requested:1",
        execution=execution,
        step="review",
        type="webhook",
        beside=True,
        status=Action.State.FAILED,
        attempts=1,
        receipt={"url": "https://hooks.example:8443/T0/s3cret?token=x", "status": 500},
        last_error="https://hooks.example:8443/T0/s3cret?token=x answered 500",
    )
    requester = Client()
    requester.force_login(people["requester"].user)
    page = requester.get(f"/executions/{execution.ref}/").content.decode()
    assert "hooks.example:8443" in page and "s3cret" not in page


def test_the_approvals_address_itself_leads_to_the_inbox(people):
    """Found walking the dashboard: /approvals/ (what a person types, or the crumb above
    an approval) was a 404."""
    manager = Client()
    manager.force_login(people["manager"].user)
    answer = manager.get("/approvals/", follow=True)
    assert answer.redirect_chain == [("/approvals/inbox/", 302)] and answer.status_code == 200
