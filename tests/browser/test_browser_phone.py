"""A manager approves from a phone (issue 39, item 9): at 390 × 844 px in Debian's Chromium
the nav, the inbox (a card per request), the approval page and the execution page fit the
screen — the page never scrolls sideways — and the decision is made there: the exact
version approved, the execution completes."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from executions.models import Execution, Status
from tests.support.browsing import login, report_awaiting_approval
from tests.support.procs import wait_for

pytestmark = pytest.mark.browser


PHONE = {"width": 390, "height": 844}


def sideways(page) -> int:
    """How far the page is wider than the screen (px; 0: it fits)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def test_a_manager_approves_the_exact_version_on_a_phone(web_stack, people, browser):
    execution, request = report_awaiting_approval(people)
    page = browser.new_page(viewport=PHONE, is_mobile=True, has_touch=True)
    login(page, web_stack.url, people["manager"])
    assert sideways(page) == 0, "the executions list is wider than the phone"
    nav = page.get_by_role("navigation", name="Main")
    for link in ("Executions", "Inbox", "API"):  # every link of the nav on the screen, none off to the right
        box = nav.get_by_role("link", name=link).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (link, box)

    nav.get_by_role("link", name="Inbox").click()
    card = page.locator(f'tr.inbox-row[data-approval="{request.pk}"]')
    expect(card).to_contain_text(f"V{request.version}")
    expect(card).to_contain_text("month 2026-08")
    assert sideways(page) == 0, "the inbox is wider than the phone"
    row_box, screen = card.bounding_box(), PHONE["width"]
    assert row_box and row_box["width"] <= screen, "an inbox card is wider than the phone"

    card.get_by_role("link", name=f"#{request.pk} · review V{request.version}").click()
    expect(page.locator("#approval-sha")).to_have_text(request.content_sha256)
    assert sideways(page) == 0, "the approval page is wider than the phone"
    approve = page.get_by_role("button", name=f"Approve V{request.version}")
    approve.scroll_into_view_if_needed()
    box = approve.bounding_box()
    assert box and box["x"] + box["width"] <= PHONE["width"], box
    approve.tap()
    page.wait_for_url("**/approvals/inbox/**")  # the decision's answer leads back to the inbox: let it land first
    wait_for(
        lambda: Execution.objects.get(pk=execution.pk).status == Status.COMPLETED,
        timeout=40,
        what="the approved report to be published",
    )

    page.goto(f"{web_stack.url}/executions/{execution.ref}/")
    expect(page.locator("#execution-status")).to_have_text("Completed")
    expect(page.locator("#ledger")).to_contain_text(f"{execution.ref}:publish:v{request.version}")
    assert sideways(page) == 0, "the execution page is wider than the phone"
    decision = ApprovalRequest.objects.get(pk=request.pk).decision
    assert decision.decision == "approve" and decision.decided_by == people["manager"].user
    assert (decision.artifact_version, decision.content_sha256) == (request.version, request.content_sha256)
