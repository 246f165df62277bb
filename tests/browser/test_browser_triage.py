"""Issue 12 in Chromium: an operator triages from the list's counts, reads the resume
preview, resolves an unknown outcome and watches the execution complete without
reloading; and resumes a permission failure through the preview. With
``KEEL_UPDATE_SCREENSHOTS=1`` the list's screenshot is also written to
docs/screenshots/triage.png (the README's)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from executions.models import Execution, Status
from tests.support.browsing import approve, login, report_awaiting_approval
from tests.support.orders import add_fault
from tests.support.procs import http, wait_for

pytestmark = pytest.mark.browser

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "triage.png"


def test_operator_triages_from_the_counts_resolves_and_resumes_without_reloading(
    web_stack, stack, people, browser, tmp_path
):
    unknown, unknown_request = report_awaiting_approval(people, "2026-08")
    denied, denied_request = report_awaiting_approval(people, "2026-07")
    # The publish commits but its answer is lost and every lookup fails: an unknown outcome.
    add_fault(stack, endpoint="/reports/publish", fault="commit_then_hang", count=1, hang_seconds=5)
    add_fault(stack, endpoint="/reports/publications", fault="error_500", method="GET", count=10_000)
    approve(people, unknown, unknown_request)
    wait_for(lambda: Execution.objects.get(pk=unknown.pk).status == Status.NEEDS_ATTENTION, timeout=120)
    http().delete(f"{stack.sandbox_url}/_faults", timeout=5)
    add_fault(stack, endpoint="/reports/publish", fault="error_403")  # the service refuses us
    approve(people, denied, denied_request)
    wait_for(lambda: Execution.objects.get(pk=denied.pk).status == Status.NEEDS_ATTENTION, timeout=60)

    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    login(page, web_stack.url, people["operator"])
    counts = page.locator("#list-counts")
    expect(counts).to_contain_text("unknown outcome")
    page.screenshot(path=str(tmp_path / "triage.png"))
    if os.environ.get("KEEL_UPDATE_SCREENSHOTS"):
        page.screenshot(path=str(SCREENSHOT))
    counts.get_by_role("link", name=re.compile("unknown outcome")).click()
    expect(page).to_have_url(re.compile(r"\?reason=unknown_outcome$"))
    rows = page.locator("#executions tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("unknown_outcome")
    rows.first.get_by_role("link", name=unknown.ref).click()

    # The reason comes first; the preview says why it can't simply be resumed.
    expect(page.locator("#stuck")).to_contain_text("unknown_outcome")
    page.locator("#resume-link").click()
    expect(page.locator("#blocked-by")).to_contain_text(f"{unknown.ref}:publish:v1")
    expect(page.locator("#plan-steps tr[data-step='publish']")).to_have_attribute("data-plan", "blocked")
    page.get_by_role("link", name=f"Back to {unknown.ref}").click()

    # Resolve: it happened (found on the report portal); the page follows it to the end by itself.
    operate = page.locator("#operate-card")
    operate.get_by_label("Outcome").select_option("succeeded")  # nothing is chosen for the operator
    operate.get_by_label("Evidence: how you established it").fill("the report portal lists it under its key")
    operate.get_by_role("button", name="Resolve").click()
    expect(page.locator("#messages")).to_contain_text("Resolved")
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None)
    expect(page.locator("#execution-status")).to_have_text("Completed", timeout=60_000)
    assert navigations == []
    expect(page.locator("#ledger")).to_contain_text("resolved as succeeded by operator")

    # The permission failure: once the service lets us in again, the preview allows a resume.
    http().delete(f"{stack.sandbox_url}/_faults", timeout=5)
    page.goto(f"{web_stack.url}/?reason=permission_denied")
    page.locator("#executions").get_by_role("link", name=denied.ref).click()
    page.locator("#resume-link").click()
    expect(page.locator("#plan-steps tr[data-step='publish']")).to_have_attribute("data-plan", "run")
    expect(page.locator("#plan-steps tr[data-step='draft_report']")).to_have_attribute("data-plan", "skip")
    page.get_by_label(re.compile("Why it is safe to resume")).fill("the report service granted our key again")
    page.get_by_role("button", name="Confirm resume").click()
    expect(page.locator("#execution-status")).to_have_text("Completed", timeout=60_000)
