"""The live dashboard in Debian's Chromium: what appears without reloading, an ended
session, a failing refresh, the API docs offline, and the operator's unknown-outcome
procedure (S16) carried out on the page."""

from __future__ import annotations

import re
import time
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from executions.models import Action, Execution, Status
from executions.services import execution_start
from tests.support.browsing import login
from tests.support.procs import http, wait_for

pytestmark = pytest.mark.browser


def pending(execution: Execution, version: int) -> ApprovalRequest | None:
    request = ApprovalRequest.objects.filter(execution=execution, status="pending").order_by("-id").first()
    return request if request is not None and request.version == version else None


def watch_navigations(page) -> list[str]:
    seen: list[str] = []
    page.on("framenavigated", lambda frame: seen.append(frame.url) if frame == page.main_frame else None)
    return seen


def manager_at_v1(web_stack, people, browser):
    """A report awaiting approval of V1, its page open as the manager: (execution, page, the approval card)."""
    execution, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"})
    wait_for(lambda: pending(execution, 1), timeout=40, what="V1 to await approval")

    page = browser.new_context().new_page()
    login(page, web_stack.url, people["manager"])
    page.goto(f"{web_stack.url}/executions/{execution.ref}/")
    card = page.locator("#approval-card")
    expect(card.locator("#approval-version")).to_have_text("V1")
    return execution, page, card


def test_manager_watches_v1_then_requests_changes_and_approves_v2_without_reloading(web_stack, people, browser):
    execution, page, card = manager_at_v1(web_stack, people, browser)
    navigations = watch_navigations(page)

    card.get_by_label(re.compile("^Comment")).fill("Explain the Eindhoven dip")
    card.get_by_role("button", name="Request changes").click()
    expect(page.locator("#decision-result")).to_contain_text("Recorded: Request Changes for V1")

    # V2 is drafted by the worker; the card shows it, with its own Approve button, by itself.
    expect(card.locator("#approval-version")).to_have_text("V2", timeout=40_000)
    v2 = pending(execution, 2)
    expect(card.locator("#approval-sha")).to_have_text(v2.content_sha256)
    expect(page.locator("#artifact-sha")).to_have_text(v2.content_sha256)
    expect(page.locator("#approvals-list")).to_contain_text("changes requested")
    card.get_by_role("button", name="Approve V2").click()
    expect(page.locator("#decision-result")).to_contain_text("Recorded: Approve for V2")

    expect(page.locator("#execution-status")).to_have_text("Completed", timeout=40_000)
    expect(page.locator("#ledger")).to_contain_text(f"{execution.ref}:publish:v2")
    # Newest first: the completion, then only what was told of it (a webhook, sent beside the steps).
    newest = page.locator("#timeline-card li")
    expect(newest.filter(has_text="Completed").first).to_be_visible()
    texts = newest.all_inner_texts()
    completed_at = next(i for i, text in enumerate(texts) if "Completed" in text)
    assert all(":webhook:" in text or "notify" in text for text in texts[:completed_at]), texts[:completed_at]
    assert navigations == []
    decision = ApprovalRequest.objects.get(pk=v2.pk).decision
    assert (decision.artifact_version, decision.content_sha256) == (2, v2.content_sha256)


@pytest.fixture
def order_stack(stack, live_server, settings):
    """An order service that doesn't deduplicate, and a runtime told so (S16)."""
    settings.SANDBOX_URL = stack.sandbox_url
    settings.ORDER_SERVICE_HONORS_KEYS = False
    stack.up(web=False, worker_env={"ORDER_SERVICE_HONORS_KEYS": "false"})
    answer = http().post(f"{stack.sandbox_url}/_config", json={"orders_idempotent": False}, timeout=5)
    assert answer.status_code == 200
    return stack, live_server


def test_s16_operator_sees_the_resolve_form_appear_live_and_resolves_the_order(order_stack, people, browser):
    """S16: the order is created but the answer is lost and every lookup fails. The operator,
    whose page is already open, sees the Resolve form appear, looks the order up at the
    service, and resolves it with the order id: completed, one order, one notification."""
    stack, server = order_stack
    execution, _ = execution_start(
        user=people["requester"].user, workflow="replacement_order", input={"original_order": "ORD-1001"}
    )
    request = wait_for(lambda: pending(execution, 1), timeout=40, what="the proposal to await approval")
    key, confirm_key = f"{execution.ref}:submit_order:v1", f"{execution.ref}:confirm:v1"

    page = browser.new_context().new_page()
    login(page, server.url, people["operator"])
    page.goto(f"{server.url}/executions/{execution.ref}/")
    expect(page.get_by_role("button", name="Resolve")).to_have_count(0)

    for fault in (
        {"endpoint": "/orders", "method": "POST", "fault": "commit_then_hang", "count": 1, "hang_seconds": 6},
        {"endpoint": "/orders", "method": "GET", "fault": "error_500", "count": 50},
    ):
        assert http().post(f"{stack.sandbox_url}/_faults", json=fault, timeout=5).status_code == 201
    approval_decide(
        user=people["manager"].user,
        execution_ref=execution.ref,
        approval_id=request.pk,
        decision="approve",
        artifact_version=1,
        content_sha256=request.content_sha256,
        event_id="approve-s16-browser",
    )

    operate = page.locator("#operate-card")
    expect(operate.get_by_role("button", name="Resolve")).to_be_visible(timeout=120_000)
    expect(page.locator("#execution-status")).to_have_text("Needs attention")
    expect(operate).to_contain_text("lookup failed")  # the evidence behind the unknown outcome
    expect(operate).to_contain_text("500")

    # "It happened" without the order id: the form says what is missing and keeps the evidence.
    operate.get_by_label("Outcome").select_option("succeeded")  # nothing is chosen for the operator
    operate.get_by_label("Evidence: how you established it").fill("found on the order service by reference")
    operate.get_by_role("button", name="Resolve").click()
    expect(page.locator("#resolve-error")).to_contain_text("receipt.order_id")
    expect(operate.get_by_label("Evidence: how you established it")).to_have_value(
        "found on the order service by reference"
    )
    assert Action.objects.get(key=key).status == Action.State.UNKNOWN

    assert http().delete(f"{stack.sandbox_url}/_faults", timeout=5).status_code == 200
    found = http().get(f"{stack.sandbox_url}/orders", params={"reference": key}, timeout=5).json()["orders"]
    [order] = found
    operate.get_by_label(re.compile("order id at the order service")).fill(order["order_id"])
    operate.get_by_role("button", name="Resolve").click()
    expect(page.locator("#messages")).to_contain_text(f"Resolved {key} as succeeded")

    # Version 2 then waits for the warehouse; the page says for what and until when, and
    # the operator sends the confirmation with a reason (the customer hears only then).
    expect(page.locator("#execution-status")).to_have_text("Waiting", timeout=60_000)
    expect(page.locator("#waiting-for")).to_contain_text("the signal shipment_confirmed")
    expect(page.locator("#waiting-for")).to_contain_text("until")
    assert "/notify" not in http().get(f"{stack.sandbox_url}/_stats", timeout=5).json()["endpoints"]
    form = page.locator("#signal-form")
    form.get_by_label(re.compile("Payload")).fill('{"tracking": "TRK-S16"}')
    form.get_by_label(re.compile("Why you are sending it")).fill("the warehouse phoned: it shipped")
    form.get_by_role("button", name="Send shipment_confirmed").click()
    expect(page.locator("#messages")).to_contain_text("Sent the signal")

    expect(page.locator("#execution-status")).to_have_text("Completed", timeout=60_000)
    ledger = page.locator("#ledger")
    expect(ledger).to_contain_text(order["order_id"])
    expect(ledger).to_contain_text("resolved as succeeded by operator")
    stats = http().get(f"{stack.sandbox_url}/_stats", timeout=5).json()
    assert stats["keys"][key] == {"calls": 1, "effects": 1}
    assert stats["endpoints"]["/notify"]["effects"] == 1 and stats["keys"][confirm_key] == {"calls": 1, "effects": 1}
    assert Execution.objects.get(pk=execution.pk).status == Status.COMPLETED


def test_logging_out_in_one_tab_sends_the_other_tab_to_the_login_page(live_server, people, browser):
    execution, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"})
    context = browser.new_context()
    first = context.new_page()
    login(first, live_server.url, people["operator"])
    second = context.new_page()
    second.goto(f"{live_server.url}/executions/{execution.ref}/")
    expect(second.locator("#execution-status")).to_be_visible()

    first.get_by_role("button", name="Log out").click()
    expect(first.get_by_role("heading", name="Log in")).to_be_visible()

    expect(second).to_have_url(re.compile(rf"/login/\?next=%2Fexecutions%2F{execution.ref}%2F$"), timeout=10_000)
    expect(second.get_by_role("heading", name="Log in")).to_have_count(1)  # a page, not a swapped-in panel
    expect(second.locator("form[action='/login/']")).to_have_count(1)


def test_a_failing_refresh_shows_a_banner_until_it_works_again(live_server, people, browser):
    execution, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"})
    page = browser.new_context().new_page()
    login(page, live_server.url, people["operator"])
    page.goto(f"{live_server.url}/executions/{execution.ref}/")
    banner = page.locator("#live-banner")
    expect(banner).to_be_hidden()
    expect(banner).to_have_attribute("role", "alert")

    page.route("**/live/**", lambda route: route.fulfill(status=500, body="boom"))
    expect(banner).to_be_visible(timeout=10_000)
    expect(banner).to_contain_text("Live updates paused")
    expect(page.locator("#live-head")).not_to_contain_text("boom")
    page.unroute("**/live/**")
    expect(banner).to_be_hidden(timeout=10_000)


def test_api_docs_render_with_the_network_blocked(live_server, browser):
    blocked: list[str] = []

    def only_this_server(route) -> None:
        if urlsplit(route.request.url).hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    context = browser.new_context()
    context.route("**/*", only_this_server)
    page = context.new_page()
    page.goto(f"{live_server.url}/api/docs")
    expect(page.locator("#swagger-ui .info .title")).to_contain_text("keel Task API", timeout=15_000)
    expect(page.locator("#swagger-ui .opblock").first).to_be_visible()
    assert blocked == []


def test_a_decision_whose_answer_is_late_still_says_what_was_recorded(web_stack, people, browser):
    """The decision's answer comes back after the live refresh would have replaced the card
    it was sent from (held here until V2 waits, then one and a half poll intervals; a busy
    server does the same): the refresh waits for the decision (hx-sync), so the answer's "Recorded" message finds its
    place and the card then shows V2 — before, htmx looked for the message's place in the
    form the refresh had removed, and dropped it."""
    execution, page, card = manager_at_v1(web_stack, people, browser)
    polls = []
    page.on("request", lambda r: polls.append(r.url) if "/live/" in r.url else None)

    def late(route):
        answer = route.fetch()  # the decision is recorded now; V2 is drafted meanwhile
        wait_for(lambda: pending(execution, 2), timeout=40, what="V2 to await approval")
        time.sleep(1.5 * settings.DASHBOARD_POLL_MS / 1000)  # a poll falls due meanwhile
        route.fulfill(response=answer)

    page.route(re.compile(r"/decide/$"), late)
    card.get_by_label(re.compile("^Comment")).fill("Explain the Eindhoven dip")
    card.get_by_role("button", name="Request changes").click()
    expect(page.locator("#decision-result")).to_contain_text("Recorded: Request Changes for V1", timeout=30_000)
    expect(card.locator("#approval-version")).to_have_text("V2", timeout=40_000)
    assert polls, "the page polled"
