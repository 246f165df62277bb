"""The managers' inbox, the approval page and the audit screens (Django test client, PostgreSQL)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
import uuid

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from approvals import audit, policy, selectors
from approvals.models import ApprovalRequest, AuditEntry, Decision
from executions.engine import lifecycle
from executions.models import Execution, Status
from tests.support.screens import V1, logged_in, make_gate

ROLES = ["requester", "operator", "auditor", "outsider", "manager"]


def decide_directly(request: ApprovalRequest, person, verdict: str, comment: str = "") -> Decision:
    """A decision written straight to the tables (the audit screens only read them)."""
    outcome = {
        "approve": ApprovalRequest.State.APPROVED,
        "reject": ApprovalRequest.State.REJECTED,
        "request_changes": ApprovalRequest.State.CHANGES_REQUESTED,
    }[verdict]
    ApprovalRequest.objects.filter(pk=request.pk).update(status=outcome, closed_at=timezone.now())
    return Decision.objects.create(
        request=request,
        event_id=uuid.uuid4().hex,
        decision=verdict,
        decided_by=person.user,
        artifact_version=request.version,
        content_sha256=request.content_sha256,
        comment=comment,
        execution_status="running",
    )


def created_on(request: ApprovalRequest, day: str) -> None:
    when = dt.datetime.fromisoformat(day).replace(hour=12, tzinfo=dt.UTC)
    ApprovalRequest.objects.filter(pk=request.pk).update(created_at=when)


def rows_in(html: str, table: str = "audit") -> list[int]:
    """The approval ids of the table's rows, in page order."""
    return [int(pk) for pk in re.findall(rf'<tr class="{table}-row" data-approval="(\d+)"', html)]


def page_urls(request: ApprovalRequest) -> dict[str, str]:
    return {
        "inbox": "/approvals/inbox/",
        "approval": f"/approvals/{request.pk}/",
        "audit": "/approvals/audit/",
        "story": f"/approvals/audit/{request.pk}/",
        "csv": "/approvals/audit/export.csv",
    }


# --- Who may see what -------------------------------------------------------------

EXPECTED = {
    # person: (inbox, approval page, audit list, audit story, CSV)
    "requester": (200, 200, 403, 403, 403),
    "operator": (200, 200, 403, 403, 403),
    "auditor": (200, 200, 200, 200, 200),
    "outsider": (200, 200, 403, 403, 403),
    "manager": (200, 200, 403, 403, 403),
}


def test_anonymous_is_sent_to_login_everywhere(people):
    request = make_gate(people)
    client = Client()
    for name, url in page_urls(request).items():
        response = client.get(url)
        assert response.status_code == 302, name
        assert response.url.startswith("/login/"), name
    assert client.get("/approvals/inbox/count/").status_code == 302
    assert not AuditEntry.objects.filter(kind=AuditEntry.Kind.VIEWED).exists()


@pytest.mark.parametrize("who", ROLES)
def test_authorization_matrix(people, who):
    request = make_gate(people)
    client = logged_in(people[who])
    statuses = tuple(client.get(url).status_code for url in page_urls(request).values())
    assert statuses == EXPECTED[who]
    inbox = client.get("/approvals/inbox/").content.decode()
    if who == "manager":
        assert rows_in(inbox, "inbox") == [request.pk]
    else:
        assert rows_in(inbox, "inbox") == [] and "Nothing waiting for you" in inbox


def test_the_requesters_own_request_stays_out_of_their_inbox_even_as_a_manager(people):
    own = make_gate(people, requested_by="manager")
    manager = logged_in(people["manager"])
    assert rows_in(manager.get("/approvals/inbox/").content.decode(), "inbox") == []
    page = manager.get(f"/approvals/{own.pk}/").content.decode()
    assert "Approve V2" not in page and "separation of duties" in page
    assert not AuditEntry.objects.filter(kind=AuditEntry.Kind.VIEWED).exists()
    assert rows_in(logged_in(people["manager2"]).get("/approvals/inbox/").content.decode(), "inbox") == [own.pk]


def test_nav_links_follow_the_permissions(people):
    make_gate(people)
    pages = {who: logged_in(people[who]).get("/").content.decode() for who in ROLES}
    assert 'id="nav-inbox"' in pages["manager"] and 'id="nav-audit"' not in pages["manager"]
    assert 'id="nav-audit"' in pages["auditor"] and 'id="nav-inbox"' not in pages["auditor"]
    for who in ("requester", "operator", "outsider"):
        assert 'id="nav-inbox"' not in pages[who] and 'id="nav-audit"' not in pages[who]
    count = logged_in(people["manager"]).get("/approvals/inbox/count/").content.decode()
    assert "(1)" in count
    assert "(" not in logged_in(people["outsider"]).get("/approvals/inbox/count/").content.decode()


# --- The inbox --------------------------------------------------------------------


def test_inbox_lists_only_decidable_open_requests_oldest_first(people):
    newer = make_gate(people)
    older = make_gate(people)
    created_on(older, "2026-03-01")  # made second, but older: the inbox orders by request time
    soon = make_gate(people, expires_at=timezone.now() + dt.timedelta(minutes=30), on_expiry="cancel")
    later = make_gate(people, expires_at=timezone.now() + dt.timedelta(days=2))
    excluded = [
        make_gate(people, requested_by="manager"),  # separation of duties
        make_gate(people, group="auditors"),  # the manager is not in the group
        make_gate(people, permission="approvals.view_audit"),  # a permission managers lack
        make_gate(people, expires_at=timezone.now() - dt.timedelta(minutes=1)),  # expired, not yet swept
        make_gate(people, awaiting=False),  # the execution is not waiting for it
    ]
    decided = make_gate(people)
    decide_directly(decided, people["manager2"], "approve")
    excluded.append(decided)

    page = logged_in(people["manager"]).get("/approvals/inbox/").content.decode()
    listed = rows_in(page, "inbox")
    assert listed == [older.pk, newer.pk, soon.pk, later.pk]
    assert not set(listed) & {r.pk for r in excluded}

    def row(r: ApprovalRequest) -> str:
        return page[page.index(f'data-approval="{r.pk}"') :].split("</tr>")[0]

    assert "expires-soon" in row(soon) and "then cancel" in row(soon)
    assert "expires-soon" not in row(later) and "never" in row(newer)
    assert newer.execution.ref in row(newer) and "monthly_report" in row(newer)
    assert "publish_report" in row(newer) and newer.content_sha256[:12] in row(newer) and "V2" in row(newer)
    assert "requester" in row(newer)
    # The same rule the inbox uses, asked directly.
    assert policy.can_decide(people["manager"].user, newer)
    assert not policy.can_decide(people["manager"].user, excluded[0])
    assert policy.refusal(people["manager"].user, excluded[1])  # a reason, not None
    # The nav's count is the inbox's length, counted without loading the requests.
    for who in ROLES + ["manager2"]:
        user = people[who].user
        assert selectors.inbox_count(user) == len(selectors.inbox_for(user)), who
    assert selectors.inbox_count(people["manager2"].user) == 5  # the four and the manager's own request
    assert "(4)" in logged_in(people["manager"]).get("/approvals/inbox/count/").content.decode()


# --- The approval page ------------------------------------------------------------


def test_approval_page_shows_the_exact_version_hash_and_diff(people):
    request = make_gate(people)
    page = logged_in(people["manager"]).get(f"/approvals/{request.pk}/").content.decode()
    assert request.content_sha256 in page  # the full sha256
    assert 'id="approval-version">V2<' in page and "publish_report" in page
    assert "approvals.decide_approval" in page and "the requester may not decide" in page
    assert "from V1 to V2" in page
    # The changed figure marked within its line (issue 39 item 15: word-level diff).
    assert '<span class="diff-line diff-del">-Sales: <del class="diff-word">100</del></span>' in page
    assert '<span class="diff-line diff-add">+Sales: <ins class="diff-word">120</ins></span>' in page
    assert '<span class="diff-line diff-add">+Status: <ins class="diff-word">final</ins></span>' in page
    assert '<span class="diff-line diff-ctx"> Region: north</span>' in page
    assert "Sales: 120" in page.split('class="rendered"')[1]  # the rendered artifact
    assert "Approve V2" in page and 'value="request_changes"' in page and 'value="reject"' in page
    assert "hx-post" not in page.split('id="decide-form"')[1].split("</form>")[0]


def test_a_first_version_says_so(people):
    request = make_gate(people, contents=(V1,))
    page = logged_in(people["manager"]).get(f"/approvals/{request.pk}/").content.decode()
    assert "First version" in page and "diff-add" not in page


def test_each_view_by_a_decider_is_audited_once_and_others_are_not(people):
    request = make_gate(people)
    for who in ("requester", "operator", "auditor", "outsider"):
        client = logged_in(people[who])
        page = client.get(f"/approvals/{request.pk}/").content.decode()
        assert "Approve V2" not in page and 'name="event_id"' not in page
        assert shown(client, page) == 0  # the card asks no view to be recorded
        viewed = client.post(f"/approvals/{request.pk}/viewed/", {"form_token": uuid.uuid4().hex})
        assert viewed.status_code == 204  # and a POST of its own records nothing
    assert not AuditEntry.objects.filter(kind=AuditEntry.Kind.VIEWED).exists()

    manager = logged_in(people["manager"])
    tokens = []
    for expected in (1, 2):
        page = manager.get(f"/approvals/{request.pk}/").content.decode()
        assert AuditEntry.objects.filter(kind=AuditEntry.Kind.VIEWED, request=request).count() == expected - 1
        assert shown(manager, page) == 204  # rendering wrote nothing; the card shown did
        tokens.append(re.search(r'name="event_id" value="([0-9a-f]{32})"', page).group(1))
        views = AuditEntry.objects.filter(kind=AuditEntry.Kind.VIEWED, request=request).order_by("id")
        assert views.count() == expected
    assert tokens[0] != tokens[1]  # a fresh form token per render
    for view, token in zip(views, tokens, strict=False):
        assert view.actor == people["manager"].user
        assert (view.artifact_version, view.content_sha256) == (2, request.content_sha256)
        assert view.detail["form_token"] == token


def shown(client: Client, page: str) -> int:
    """What the approval card's htmx does once the page is on screen: POST the view (the
    endpoint and values the page carries). Returns the status; 0 if the page asks none."""
    found = re.search(r'id="approval-viewed" hidden hx-post="([^"]+)"[^>]*hx-vals=\'([^\']+)\'', page, re.S)
    if found is None:
        return 0
    return client.post(found.group(1), json.loads(found.group(2))).status_code


def decide_form(page: str) -> tuple[str, dict[str, str]]:
    """The approval page's decide form: its action and hidden fields."""
    form = page.split('id="decide-form"')[1].split("</form>")[0]
    action = re.search(r'<form method="post" action="([^"]+)" class="decide-form"', page).group(1)
    return action, dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form))


def test_deciding_from_the_approval_page_lands_on_the_next_item_of_the_inbox(people):
    first, second, third = make_gate(people), make_gate(people), make_gate(people)
    for request, day in ((first, "2026-03-01"), (second, "2026-03-02"), (third, "2026-03-03")):
        created_on(request, day)
    manager = logged_in(people["manager"])

    # Deciding the middle one goes on to the one after it, then wraps round to the first.
    page = manager.get(f"/approvals/{second.pk}/").content.decode()
    assert shown(manager, page) == 204
    action, fields = decide_form(page)
    assert action == f"/executions/{second.execution.ref}/approvals/{second.pk}/decide/"
    assert fields["artifact_version"] == "2" and fields["content_sha256"] == second.content_sha256
    assert fields["then"] == "inbox"
    response = manager.post(action, {**fields, "decision": "approve", "comment": "looks right"})
    assert response.status_code == 302 and response.url == f"/approvals/{third.pk}/"
    decision = Decision.objects.get(request=second)
    assert decision.event_id == fields["event_id"] and decision.decided_by == people["manager"].user
    view = AuditEntry.objects.get(kind=AuditEntry.Kind.VIEWED, request=second)
    assert view.detail["form_token"] == decision.event_id  # what they saw is what they decided on
    landed = manager.get(response.url).content.decode()
    assert f"Recorded: approve V2 of {second.execution.ref}." in landed and f"approval #{third.pk}" in landed

    action, fields = decide_form(landed)
    response = manager.post(action, {**fields, "decision": "reject", "comment": "no"})
    assert response.status_code == 200 and 'id="confirm-reject"' in response.content.decode()  # asks first
    response = manager.post(action, {**fields, "decision": "reject", "comment": "no", "confirm": "reject"})
    assert response.status_code == 302 and response.url == f"/approvals/{first.pk}/"

    action, fields = decide_form(manager.get(response.url).content.decode())
    response = manager.post(action, {**fields, "decision": "approve"})
    assert response.status_code == 302 and response.url == "/approvals/inbox/"
    inbox = manager.get(response.url).content.decode()
    assert "Nothing else is waiting for your decision." in inbox and rows_in(inbox, "inbox") == []

    after = manager.get(f"/approvals/{second.pk}/").content.decode()
    assert 'id="decide-form"' not in after and "looks right" in after and "Approved" in after


def test_a_refused_decision_on_the_approval_page_stays_there_and_says_why(people):
    request = make_gate(people)
    manager = logged_in(people["manager"])
    action, fields = decide_form(manager.get(f"/approvals/{request.pk}/").content.decode())
    response = manager.post(action, {**fields, "content_sha256": "0" * 64, "decision": "approve"})
    assert response.status_code == 302 and response.url == f"/approvals/{request.pk}/"
    page = manager.get(response.url).content.decode()
    assert 'class="msg error"' in page and not Decision.objects.filter(request=request).exists()


def test_deciding_from_a_plain_form_without_then_goes_to_the_execution(people):
    request = make_gate(people)
    manager = logged_in(people["manager"])
    _, fields = decide_form(manager.get(f"/approvals/{request.pk}/").content.decode())
    fields.pop("then")
    response = manager.post(
        f"/executions/{request.execution.ref}/approvals/{request.pk}/decide/", {**fields, "decision": "approve"}
    )
    assert response.status_code == 302 and response.url == f"/executions/{request.execution.ref}/"


def test_the_approval_pages_status_is_live_until_the_request_closes(people):
    request = make_gate(people)
    manager = logged_in(people["manager"])
    state_url = f"/approvals/{request.pk}/state/"
    page = manager.get(f"/approvals/{request.pk}/").content.decode()
    assert 'role="status" aria-live="polite"' in page and f'hx-get="{state_url}"' in page
    pending = manager.get(state_url).content.decode()
    assert f'hx-get="{state_url}"' in pending and ">Pending<" in pending and "approval-closed" not in pending

    decide_directly(request, people["manager2"], "reject")  # decided elsewhere while the page is open
    closed = manager.get(state_url).content.decode()
    assert "hx-get" not in closed  # polling stops
    assert "This request is rejected: a decision here would be refused." in closed
    assert Client().get(state_url).status_code == 302  # login first
    assert manager.get("/approvals/999999/state/").status_code == 404


# --- The audit history ------------------------------------------------------------


@pytest.fixture
def history(people):
    """Four requests over March 2026, decided in different ways."""
    a = make_gate(people)
    created_on(a, "2026-03-01")
    decide_directly(a, people["manager"], "approve", comment='=HYPERLINK("http://evil")')
    audit.record(
        AuditEntry.Kind.REFUSED,
        request=a,
        actor=people["outsider"].user,
        artifact_version=2,
        content_sha256=a.content_sha256,
        reason="outsider may not decide publish_report approvals",
    )
    audit.record(
        AuditEntry.Kind.REFUSED,
        request=a,
        actor=people["requester"].user,
        artifact_version=2,
        content_sha256=a.content_sha256,
        reason="the requester may not approve their own request",
    )
    b = make_gate(people, workflow="replacement_order")
    created_on(b, "2026-03-10")
    decide_directly(b, people["manager2"], "reject", comment="wrong supplier")
    c = make_gate(people)
    created_on(c, "2026-03-20")
    d = make_gate(people)
    created_on(d, "2026-03-25")
    decide_directly(d, people["manager2"], "request_changes", comment="fix the totals")
    return {"a": a, "b": b, "c": c, "d": d}


@pytest.mark.parametrize(
    "query, expected",
    [
        ("", "dcba"),
        ("approver=manager", "a"),
        ("approver=MANAGER2", "db"),
        ("workflow=replacement_order", "b"),
        ("decision=approve", "a"),
        ("decision=reject", "b"),
        ("decision=request_changes", "d"),
        ("decision=none", "c"),
        ("from=2026-03-05", "dcb"),
        ("to=2026-03-10", "ba"),
        ("from=2026-03-05&to=2026-03-20", "cb"),
        ("workflow=monthly_report&approver=manager2", "d"),
    ],
)
def test_audit_filters(people, history, query, expected):
    page = logged_in(people["auditor"]).get(f"/approvals/audit/?{query}")
    assert page.status_code == 200
    assert rows_in(page.content.decode()) == [history[k].pk for k in expected]


@pytest.mark.parametrize("query", ["from=2026-13-45", "to=yesterday", "from=01/03/2026", "decision=maybe"])
def test_a_bad_filter_is_a_message_not_a_500(people, history, query):
    page = logged_in(people["auditor"]).get(f"/approvals/audit/?{query}")
    body = page.content.decode()
    assert page.status_code == 200
    assert 'class="msg error"' in body and "Ignored" in body
    assert rows_in(body) == [history[k].pk for k in "dcba"]  # the bad filter is left out


def test_audit_list_shows_decisions_and_links_the_story(people, history):
    body = logged_in(people["auditor"]).get("/approvals/audit/").content.decode()
    a = history["a"]
    row = body[body.index(f'data-approval="{a.pk}"') :].split("</tr>")[0]
    assert f'href="/approvals/audit/{a.pk}/"' in row and a.execution.ref in row
    assert "manager" in row and "approve" in row and "2 refused" in row and a.content_sha256[:12] in row
    assert 'href="/approvals/audit/export.csv"' in body


def test_csv_export_has_the_filtered_rows_with_full_hashes(people, history):
    client = logged_in(people["auditor"])
    response = client.get("/approvals/audit/export.csv?decision=approve")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == 'attachment; filename="approval-history.csv"'
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    header, body = rows[0], rows[1:]
    assert header[:3] == ["request_id", "execution", "workflow"]
    assert {"content_sha256", "comment", "refused_attempts", "decided_by", "decision"} <= set(header)
    assert len(body) == 1
    row = dict(zip(header, body[0], strict=False))
    a = history["a"]
    assert row["request_id"] == str(a.pk) and row["execution"] == a.execution.ref
    assert row["content_sha256"] == a.content_sha256 and len(row["content_sha256"]) == 64
    assert row["decided_by"] == "manager" and row["decision"] == "approve" and row["refused_attempts"] == "2"
    assert row["comment"] == '\'=HYPERLINK("http://evil")'  # never a live formula in a spreadsheet
    everything = list(csv.reader(io.StringIO(client.get("/approvals/audit/export.csv").content.decode())))
    assert [int(r[0]) for r in everything[1:]] == [history[k].pk for k in "dcba"]
    bad = client.get("/approvals/audit/export.csv?from=nope")
    assert bad.status_code == 200 and len(list(csv.reader(io.StringIO(bad.content.decode())))) == 5


def test_csv_export_has_the_outcome_the_page_shows(people, history):
    """Issue 39 item 15: the approvals CSV lacked the outcome — what the decision unlocked
    and how each effect ended, with the receipt's identifiers — that the page's Outcome
    column shows."""
    from executions.models import Action

    a = history["a"]
    Action.objects.create(
        key=f"{a.execution.ref}:publish:v1",
        execution=a.execution,
        step="publish",
        type="publish_report",
        status=Action.State.SUCCEEDED,
        attempts=1,
        gate_ref=a.gate_ref,
        receipt={"publication_id": "PUB-77", "status": "published"},
    )
    client = logged_in(people["auditor"])
    rows = list(csv.DictReader(io.StringIO(client.get("/approvals/audit/export.csv").content.decode())))
    by_id = {int(r["request_id"]): r for r in rows}
    outcome = by_id[a.pk]["outcome"]
    assert outcome.startswith("succeeded ") and {"publication_id=PUB-77", "status=published"} <= set(outcome.split())
    assert by_id[history["c"].pk]["outcome"] == ""
    row = logged_in(people["auditor"]).get("/approvals/audit/").content.decode()
    assert "PUB-77" in row.split(f'data-approval="{a.pk}"')[1].split("</tr>")[0]


# --- One request's story ----------------------------------------------------------


def test_the_story_tells_requested_viewed_refused_decided_and_what_followed(people):
    request = make_gate(people)
    execution = request.execution
    manager = logged_in(people["manager"])
    page = manager.get(f"/approvals/{request.pk}/").content.decode()
    assert shown(manager, page) == 204
    token = re.search(r'name="event_id" value="([0-9a-f]{32})"', page).group(1)
    audit.record(
        AuditEntry.Kind.REFUSED,
        request=request,
        actor=people["outsider"].user,
        artifact_version=2,
        content_sha256=request.content_sha256,
        reason="outsider may not decide publish_report approvals",
    )
    response = manager.post(
        f"/executions/{execution.ref}/approvals/{request.pk}/decide/",
        {
            "decision": "approve",
            "artifact_version": 2,
            "content_sha256": request.content_sha256,
            "event_id": token,
            "comment": "ship it",
        },
    )
    assert response.status_code == 302
    assert Execution.objects.get(pk=execution.pk).status == Status.RUNNING
    key = f"{execution.ref}:publish:v2"
    with transaction.atomic():
        lifecycle.record(execution, "action.executing", step="publish", actor_label="worker-2", payload={"key": key})
        lifecycle.record(execution, "action.succeeded", step="publish", actor_label="worker-2", payload={"key": key})
        running = Execution.objects.get(pk=execution.pk)
        lifecycle.apply(running, "complete", actor_label="worker-2")

    story = logged_in(people["auditor"]).get(f"/approvals/audit/{request.pk}/")
    assert story.status_code == 200
    body = story.content.decode()
    assert "ship it" in body.split('id="story"')[0]  # the decision, above the story
    body = body.split('id="story"')[1]
    marks = [
        'class="ev-type">requested<',
        'class="ev-type">viewed<',
        'class="ev-type">refused<',
        "outsider may not decide publish_report approvals",
        'class="ev-type">decided<',
        "ship it",
        'class="ev-type">action.executing<',
        'class="ev-type">action.succeeded<',
        "running → completed",
    ]
    positions = [body.index(mark) for mark in marks]
    assert positions == sorted(positions), dict(zip(marks, positions, strict=False))
    assert body.count('class="ev-type">decided<') == 1 and body.count('class="ev-type">requested<') == 1
    viewed = body[body.index('class="ev-type">viewed<') :].split("</li>")[0]
    assert "V2" in viewed and request.content_sha256[:12] in viewed and "user:manager" in viewed
    assert "user:outsider" in body and "user:manager" in body
    assert logged_in(people["auditor"]).get("/approvals/audit/999999/").status_code == 404


def test_the_story_stops_where_the_next_request_begins(people):
    first = make_gate(people)
    execution = first.execution
    decide_directly(first, people["manager"], "request_changes", comment="redo it")
    with transaction.atomic():
        running = Execution.objects.get(pk=execution.pk)
        lifecycle.apply(running, "resume_after_decision")
        lifecycle.record(running, "step.redraft", step="draft_report", actor_label="worker-1")
        second = ApprovalRequest.objects.create(
            execution=running,
            step="review",
            round=2,
            artifact_version=first.artifact_version,
            version=2,
            content_sha256=first.content_sha256,
            action="publish_report",
            requested_by=people["requester"].user,
        )
        lifecycle.record(running, "approval.requested", step="review", payload={"approval_id": second.pk})
        lifecycle.record(running, "step.after_second_request", step="review")
    body = logged_in(people["auditor"]).get(f"/approvals/audit/{first.pk}/").content.decode()
    assert "step.redraft" in body and "step.after_second_request" not in body
    assert "redo it" in body and "from the decision row" in body  # no decided audit entry: rebuilt


def test_the_approval_page_of_a_new_version_says_what_was_decided_on_the_earlier_ones(people):
    """Found walking a ported workflow whose reject redrafts: V2's page showed the changes
    from V1 but not why V1 was sent back, so its approver could not check that V2 answers
    it. Now the Changes card lists each earlier version's decision, by whom, with its comment."""
    request = make_gate(people)  # V2 awaits; V1 was asked before it
    v1 = request.artifact_version.artifact.versions.get(number=1)
    earlier = ApprovalRequest.objects.create(
        execution=request.execution,
        step="review",
        round=0,  # the gate's earlier round (V2's request is round 1)
        artifact_version=v1,
        version=1,
        content_sha256=v1.sha256,
        action="publish_report",
        requested_by=people["requester"].user,
    )
    decide_directly(earlier, people["manager"], "request_changes", comment="Sales look <low>; check them")
    page = logged_in(people["manager"]).get(f"/approvals/{request.pk}/").content.decode()
    listed = page[page.index('id="earlier-decisions"') : page.index("</ul>", page.index('id="earlier-decisions"'))]
    assert "V1: <strong>changes requested</strong> by manager" in listed
    assert "“Sales look &lt;low&gt;; check them”" in listed
    first = logged_in(people["manager"]).get(f"/approvals/{earlier.pk}/").content.decode()
    assert 'id="earlier-decisions"' not in first  # nothing came before V1
