"""The execution page and the list through Django's test client on PostgreSQL: every
panel renders whatever the record holds, the one live mechanism (stamps, 204, only
the changed panels), an ended session, the Resolve form, error pages, contrast."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.db import transaction
from django.test import Client

from approvals.models import ApprovalRequest, AuditEntry
from executions.engine import lifecycle
from executions.models import Action, Execution, ExecutionEvent, Status
from tests.support.screens import decide_form, logged_in

ROLES = ["requester", "manager", "operator", "auditor", "outsider"]
ORDER_RECEIPT = {
    "order_id": "ORD-9001",
    "reference": "RUN_0001:submit_order:v1",
    "items": [{"sku": "SKU-MUG-01", "qty": 2}],
    "values": "x",
    "keys": ["a"],
    "customer": {"name": "Ana"},
    "status": "submitted",
}


def poll_url(html: str) -> str:
    match = re.search(r'id="live-poll" hx-get="([^"]+)"', html)
    assert match, "the page has no poller"
    return match.group(1).replace("&amp;", "&")


def poll(client: Client, url: str, **headers):
    return client.get(url, HTTP_HX_REQUEST="true", **headers)


def swapped(body: str) -> set[str]:
    """The ids a poll answer swaps out of band."""
    return set(re.findall(r'id="([\w-]+)"[^>]*hx-swap-oob', body))


def _execution(people, *, workflow: str, step: str, **fields) -> Execution:
    return Execution.objects.create(
        workflow=workflow,
        workflow_version=1,
        input={"original_order": "ORD-1001", "constraints": ["be kind"]}
        if workflow == "replacement_order"
        else {"month": "2026-08"},
        input_digest="d",
        created_by=people["requester"].user,
        current_step=step,
        context={"artifacts": {}, "notes": {"constraints": [], "facts": [], "completed_steps": []}},
        **fields,
    )


def _to(execution: Execution, *transitions: str, reason: str = "") -> Execution:
    with transaction.atomic():
        for name in transitions:
            execution = Execution.objects.select_for_update().get(pk=execution.pk)
            lifecycle.apply(execution, name, reason=reason)
    return Execution.objects.get(pk=execution.pk)


@pytest.fixture
def completed_order(people, transactional_db):
    """A completed replacement order whose order receipt has ``items``, ``values`` and ``keys`` keys."""
    execution = _execution(people, workflow="replacement_order", step="confirm")
    execution = _to(execution, "start")
    Action.objects.create(
        key=f"{execution.ref}:submit_order:v1",
        execution=execution,
        step="submit_order",
        type="submit_order",
        status=Action.State.SUCCEEDED,
        attempts=1,
        receipt=ORDER_RECEIPT,
    )
    lifecycle.record(
        execution,
        "action.succeeded",
        step="submit_order",
        actor_label="w1",
        payload={"key": f"{execution.ref}:submit_order:v1", "receipt": ORDER_RECEIPT, "to": "succeeded"},
    )
    with transaction.atomic():
        execution = Execution.objects.select_for_update().get(pk=execution.pk)
        execution.current_step = ""
        lifecycle.apply(execution, "complete", update_fields=("current_step",))
    return execution


@pytest.fixture
def unknown_order(people, transactional_db):
    """A replacement order waiting for an operator: its submission's outcome is unknown, lookups failed."""
    execution = _execution(people, workflow="replacement_order", step="submit_order")
    execution = _to(execution, "start")
    key = f"{execution.ref}:submit_order:v1"
    action = Action.objects.create(
        key=key,
        execution=execution,
        step="submit_order",
        type="submit_order",
        status=Action.State.UNKNOWN,
        attempts=1,
        args={"reference": key},
        last_error="outcome_unknown: outcome can't be established; not re-sending",
    )
    lifecycle.record(
        execution,
        "action.unknown",
        step="submit_order",
        actor_label="w1",
        payload={
            "key": key,
            "from": "executing",
            "to": "unknown",
            "error": "outcome can't be established",
            "evidence": {"previous_status": "unknown", "lookup_error": "GET /orders answered 500"},
        },
    )
    execution = _to(execution, "flag", reason="Submitting: outcome unknown (retries exhausted)")
    return execution, action


# --- every panel renders whatever the record holds


@pytest.mark.parametrize("who", ROLES)
def test_a_receipt_with_an_items_key_renders_for_every_role(people, completed_order, who):
    """Issue 13: the ledger looped over ``receipt.items``; an order receipt has an ``items`` key."""
    client = logged_in(people[who])
    response = client.get(f"/executions/{completed_order.ref}/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "ORD-9001" in body and "succeeded" in body
    assert "SKU-MUG-01" in body  # the whole receipt is a click away
    assert poll(client, f"/executions/{completed_order.ref}/live/").status_code == 200  # no stamp: every panel


def test_the_timeline_is_newest_first_with_dates_and_readable_names(people, unknown_order):
    execution, _ = unknown_order
    body = logged_in(people["operator"]).get(f"/executions/{execution.ref}/").content.decode()
    timeline = body[body.index('id="timeline-card"') : body.index('id="approvals-card"')]
    titles = re.findall(r'class="ev-title">([^<]+)<', timeline)
    assert titles[:3] == ["Needs attention", "Outcome unknown", "Claimed by a worker"], titles
    text = re.sub(r"<[^>]+>", " ", timeline)
    assert "action.unknown" not in text and "transition" not in text
    assert re.search(r"<time datetime=\"[^\"]+\">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d</time>", timeline)
    assert "GET /orders answered 500" in timeline  # the lookup error behind the unknown outcome


def test_the_ledger_says_superseded_not_failed_for_a_plan_that_never_ran(people, awaiting):
    execution, request = awaiting
    ApprovalRequest.objects.filter(pk=request.pk).update(status=ApprovalRequest.State.SUPERSEDED)
    Action.objects.create(
        key=f"{execution.ref}:publish:v1",
        execution=execution,
        step="publish",
        type="publish_report",
        status=Action.State.FAILED,
        attempts=0,
        gate_ref=request.gate_ref,
        last_error=f"approval {request.pk} superseded",
    )
    body = logged_in(people["manager"]).get(f"/executions/{execution.ref}/").content.decode()
    ledger = body[body.index('id="ledger"') : body.index('id="timeline-card"')]
    assert "superseded — never sent" in ledger and "tone-neutral" in ledger
    assert "tone-danger" not in ledger


# --- one live mechanism


def test_a_poll_answers_204_until_something_changes_then_only_the_changed_panels(people, awaiting):
    execution, _ = awaiting
    client = logged_in(people["manager"])
    page = client.get(f"/executions/{execution.ref}/").content.decode()
    url = poll_url(page)
    assert poll(client, url).status_code == 204

    lifecycle.record(execution, "step.completed", step="review", actor_label="w1", payload={"label": "Reviewed"})
    answer = poll(client, url)
    assert answer.status_code == 200
    assert swapped(answer.content.decode()) == {"timeline-card"}
    assert "Step completed: Reviewed" in answer.content.decode()
    following = poll_url(answer.content.decode())
    assert poll(client, following).status_code == 204  # the new poller carries the new stamps


def test_during_a_redraft_the_new_version_and_its_approve_button_arrive_by_poll(people, awaiting):
    execution, request = awaiting
    from approvals.services import execution_redraft

    client = logged_in(people["manager"])
    url = poll_url(client.get(f"/executions/{execution.ref}/").content.decode())
    execution_redraft(ref=execution.ref, user=people["requester"].user, instruction="Add the outlook")
    answer = poll(client, url).content.decode()
    assert {"approval-card", "live-head", "timeline-card", "approvals-card"} <= swapped(answer)
    assert "Approve V1" not in answer and "appears here as soon as it is drafted" in answer
    assert "superseded" in answer


def test_the_list_refreshes_its_visible_rows_in_one_poll_and_new_rows_appear(people, awaiting):
    execution, _ = awaiting
    client = logged_in(people["operator"])
    page = client.get("/").content.decode()
    assert page.count('id="live-poll"') == 1 and "status-cell/" not in page  # one poller, not one per row
    url = poll_url(page)
    assert poll(client, url).status_code == 204
    newer = _execution(people, workflow="monthly_report", step="retrieve_figures")
    answer = poll(client, url).content.decode()
    assert swapped(answer) == {"list-rows", "list-counts"}  # a new row, and one more counted
    assert newer.ref in answer and execution.ref in answer
    filtered = poll_url(client.get("/?status=awaiting_approval").content.decode())
    assert "status=awaiting_approval" in filtered and poll(client, filtered).status_code == 204


def test_the_inbox_count_in_the_nav_refreshes(people, awaiting):
    execution, request = awaiting
    client = logged_in(people["manager"])
    page = client.get("/").content.decode()
    assert re.search(r'id="nav-inbox-count"[^>]*>\s*<span class="inbox-count"[^>]*>\(1\)', page)
    url = poll_url(page)
    ApprovalRequest.objects.filter(pk=request.pk).update(status=ApprovalRequest.State.WITHDRAWN)
    answer = poll(client, url).content.decode()
    assert "nav-inbox-count" in swapped(answer) and "(1)" not in answer


def test_pages_without_panels_poll_the_nav_alone(people, awaiting):
    execution, request = awaiting
    client = logged_in(people["manager"])
    page = client.get("/approvals/inbox/").content.decode()
    url = poll_url(page)
    assert url.startswith("/live/?stamp=")
    assert poll(client, url).status_code == 204
    ApprovalRequest.objects.filter(pk=request.pk).update(status=ApprovalRequest.State.WITHDRAWN)
    assert swapped(poll(client, url).content.decode()) == {"nav-inbox-count"}


@pytest.mark.parametrize("where", ["/executions/{ref}/live/", "/live/executions/", "/live/"])
def test_a_poll_after_the_session_ended_redirects_the_browser_to_the_login_page(people, awaiting, where):
    execution, _ = awaiting
    client = logged_in(people["manager"])
    client.logout()
    page = f"http://testserver/executions/{execution.ref}/"
    answer = poll(client, where.format(ref=execution.ref), HTTP_HX_CURRENT_URL=page)
    assert answer.status_code == 204 and answer.content == b""  # nothing to swap in
    assert answer["HX-Redirect"] == f"/login/?next=%2Fexecutions%2F{execution.ref}%2F"
    plain = client.get(where.format(ref=execution.ref))  # a browser navigation still gets the normal redirect
    assert plain.status_code == 302 and plain.url.startswith("/login/")


# --- the approval card on the execution page


def test_a_manager_who_may_decide_leaves_a_viewed_entry_once_per_render_not_per_poll(people, awaiting):
    execution, request = awaiting
    manager = logged_in(people["manager"])
    page = manager.get(f"/executions/{execution.ref}/").content.decode()
    assert not AuditEntry.objects.filter(kind=AuditEntry.Kind.VIEWED).exists()  # rendering writes no audit
    viewed = re.search(r'id="approval-viewed" hidden hx-post="([^"]+)"[^>]*hx-vals=\'([^\']+)\'', page, re.S)
    assert manager.post(viewed.group(1), json.loads(viewed.group(2))).status_code == 204  # the card, once shown
    [viewed] = AuditEntry.objects.filter(kind=AuditEntry.Kind.VIEWED)
    assert (viewed.request_id, viewed.actor, viewed.artifact_version, viewed.content_sha256) == (
        request.pk,
        people["manager"].user,
        1,
        request.content_sha256,
    )
    token = re.search(r'name="event_id" value="(\w+)"', page).group(1)
    assert viewed.detail["form_token"] == token and viewed.detail["via"] == "execution page"
    for _ in range(3):
        assert poll(manager, poll_url(page)).status_code == 204
    logged_in(people["requester"]).get(f"/executions/{execution.ref}/")  # may not decide: not recorded
    logged_in(people["auditor"]).get(f"/executions/{execution.ref}/")
    assert AuditEntry.objects.filter(kind=AuditEntry.Kind.VIEWED).count() == 1


def test_after_a_decision_on_the_card_the_next_inbox_item_is_offered(people, awaiting):
    execution, request = awaiting
    other = _execution(people, workflow="monthly_report", step="review")
    other_request = ApprovalRequest.objects.create(
        execution=other,
        step="review",
        artifact_version=request.artifact_version,
        version=1,
        content_sha256=request.content_sha256,
        action="publish_report",
        requested_by=people["requester"].user,
    )
    _to(other, "start", "await_approval")
    client = logged_in(people["manager"])
    answer = client.post(
        f"/executions/{execution.ref}/approvals/{request.pk}/decide/", decide_form(request), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Recorded" in answer and 'id="decision-result" hx-swap-oob' in answer
    assert re.search(rf'id="next-inbox-item" href="/approvals/{other_request.pk}/"', answer)


# --- the Resolve form


def test_resolving_an_order_as_succeeded_needs_the_order_id_and_keeps_what_was_typed(people, unknown_order):
    execution, action = unknown_order
    operator = logged_in(people["operator"])
    page = operator.get(f"/executions/{execution.ref}/").content.decode()
    assert "Outcome unknown" in page and "GET /orders answered 500" in page
    assert 'name="receipt.order_id"' in page and "e.g. ORD-9001" in page

    url = f"/executions/{execution.ref}/resolve/"
    form = {"key": action.key, "outcome": "succeeded", "evidence": "found it on the order portal"}
    missing = operator.post(url, form)
    assert missing.status_code == 422
    body = missing.content.decode()
    assert "receipt.order_id" in body and "required when the outcome is succeeded" in body
    assert "found it on the order portal" in body  # kept for the next try
    malformed = operator.post(url, {**form, "receipt.order_id": "9001; drop"})
    assert malformed.status_code == 422 and "must match" in malformed.content.decode()
    action.refresh_from_db()
    assert action.status == Action.State.UNKNOWN
    assert Execution.objects.get(pk=execution.pk).status == Status.NEEDS_ATTENTION

    done = operator.post(url, {**form, "receipt.order_id": " ORD-9001 "})
    assert done.status_code == 302
    action.refresh_from_db()
    assert action.status == Action.State.SUCCEEDED
    assert action.receipt == {
        "order_id": "ORD-9001",
        "resolved_by": "operator",
        "evidence": "found it on the order portal",
    }
    assert Execution.objects.get(pk=execution.pk).status == Status.RUNNING
    page = operator.get(f"/executions/{execution.ref}/").content.decode()
    assert "resolved as succeeded by operator" in page and "found it on the order portal" in page


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"outcome": "succeeded", "evidence": "seen"}, ["body", "receipt", "order_id"], "required"),
        ({"outcome": "succeeded", "evidence": "seen", "receipt": {}}, ["body", "receipt", "order_id"], "required"),
        (
            {"outcome": "succeeded", "evidence": "seen", "receipt": {"order_id": 9001}},
            ["body", "receipt", "order_id"],
            "valid string",
        ),
        (
            {"outcome": "succeeded", "evidence": "seen", "receipt": {"order_id": "ORD-1", "x": "y"}},
            ["body", "receipt", "x"],
            "not a receipt field",
        ),
        (
            {"outcome": "failed", "evidence": "seen", "receipt": {"order_id": "ORD-1"}},
            ["body", "receipt"],
            "succeeded only",
        ),
    ],
)
def test_the_api_names_the_receipt_field_and_writes_nothing(people, unknown_order, body, field, says):
    execution, action = unknown_order
    events = ExecutionEvent.objects.count()
    response = Client().post(
        f"/api/actions/{action.key}/resolve",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {people['operator'].token}",
    )
    assert response.status_code == 422, response.content
    [error] = response.json()["detail"]
    assert error["loc"] == field and says in error["msg"]
    action.refresh_from_db()
    assert action.status == Action.State.UNKNOWN and ExecutionEvent.objects.count() == events


def test_the_api_resolves_with_the_receipt_field(people, unknown_order):
    execution, action = unknown_order
    response = Client().post(
        f"/api/actions/{action.key}/resolve",
        {"outcome": "succeeded", "evidence": "order portal", "receipt": {"order_id": "ORD-9001"}},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {people['operator'].token}",
    )
    assert response.status_code == 200, response.content
    assert response.json()["receipt"] == {"order_id": "ORD-9001", "resolved_by": "operator", "evidence": "order portal"}


# --- error pages, API docs, contrast


@pytest.mark.parametrize("who", [None, "manager"])
def test_error_pages_are_styled_with_navigation(people, who):
    client = logged_in(people[who]) if who else Client()
    missing = client.get("/executions/RUN_9999/" if who else "/no/such/page/")
    assert missing.status_code == 404
    body = missing.content.decode()
    assert "/static/css/app.css" in body and 'class="card narrow error-page"' in body
    assert 'href="/"' in body and "Not found" in body
    if who:
        assert 'id="nav-inbox"' in body  # the whole nav, as on every page
    else:
        assert 'href="/login/"' in body
    api_missing = client.get("/api/nothing-here")
    assert api_missing.status_code == 404 and api_missing.json() == {"detail": "no such API endpoint"}


def test_the_500_page_needs_no_database_and_offers_a_way_back(rf):
    from config.error_views import server_error

    response = server_error(rf.get("/executions/RUN_0001/"))
    body = response.content.decode()
    assert response.status_code == 500 and "/static/css/app.css" in body and 'href="/"' in body
    assert server_error(rf.get("/api/executions")).status_code == 500


def test_api_docs_use_the_bundled_swagger_ui(client):
    body = client.get("/api/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in body and "/static/ninja/swagger-ui.css" in body
    assert not re.search(r"""(src|href)=["']https?://""", body)  # nothing from a CDN


def _luminance(hex_colour: str) -> float:
    h = hex_colour.lstrip("#")
    if len(h) == 3:
        h = "".join(c * 2 for c in h)
    channels = [int(h[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_every_badge_and_text_colour_meets_aa_contrast():
    """WCAG AA: 4.5:1 for every rule that sets both a background and a text colour, and
    for the body's text colours on the page and card backgrounds."""
    css = (Path(__file__).resolve().parents[2] / "static/css/app.css").read_text()
    variables = dict(re.findall(r"--([\w-]+):\s*(#[0-9a-fA-F]{3,6})", css))

    def colour(value: str) -> str:
        m = re.fullmatch(r"var\(--([\w-]+)\)", value.strip())
        return variables[m.group(1)] if m else value.strip()

    checked, failures = 0, []
    for selector, body in re.findall(r"([^{}]+)\{([^}]*)\}", css):
        bg = re.search(r"background:\s*([^;]+)", body)
        fg = re.search(r"(?<![-\w])color:\s*([^;]+)", body)
        if not (bg and fg):
            continue
        back, fore = colour(bg.group(1)), colour(fg.group(1))
        if back.startswith("#") and fore.startswith("#"):
            checked += 1
            if contrast(back, fore) < 4.5:
                failures.append(f"{selector.strip()}: {fore} on {back} = {contrast(back, fore):.2f}")
    for text in ("fg", "muted", "accent", "danger", "ok", "warn"):
        for ground in ("bg", "card"):
            if contrast(variables[text], variables[ground]) < 4.5:
                failures.append(f"--{text} on --{ground}")
    assert checked > 20 and not failures, failures


@pytest.mark.parametrize("bad", ["\x00", "x" * 5000])  # a form can't carry a lone surrogate (browsers send U+FFFD)
def test_operator_forms_refuse_what_the_database_cannot_hold_with_a_message(people, unknown_order, bad):
    execution, action = unknown_order
    operator = logged_in(people["operator"])
    for path, form in [
        ("cancel", {"reason": bad}),
        ("resume", {"reason": bad}),
        ("resolve", {"key": action.key, "outcome": "failed", "evidence": bad}),
        ("resolve", {"key": action.key, "outcome": "succeeded", "evidence": "seen", "receipt.order_id": bad}),
        ("resolve", {"key": bad, "outcome": "failed", "evidence": "seen"}),
    ]:
        response = operator.post(f"/executions/{execution.ref}/{path}/", form, follow=True)
        assert response.status_code in (200, 422), (path, response.status_code)
        body = response.content.decode()
        assert re.search(r"must not contain NUL characters|at most \d+ characters", body), path
    assert Execution.objects.get(pk=execution.pk).status == Status.NEEDS_ATTENTION
    action.refresh_from_db()
    assert action.status == Action.State.UNKNOWN
    listed = operator.get("/", {"workflow": "\x00", "status": "\x00", "cursor": "\x00"})
    assert listed.status_code == 200 and execution.ref in listed.content.decode()


def test_the_403_page_is_styled_with_navigation(rf, people):
    from config.error_views import permission_denied

    request = rf.get("/somewhere/")
    request.user = people["manager"].user
    response = permission_denied(request)
    body = response.content.decode()
    assert response.status_code == 403 and 'class="card narrow error-page"' in body and 'id="nav-inbox"' in body
