"""A manager approves the pending report in Debian's Chromium, driven by Playwright."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from executions.models import Execution, Status
from executions.services import execution_start
from tests.support.browsing import login, report_awaiting_approval
from tests.support.procs import wait_for

pytestmark = pytest.mark.browser


def test_manager_approves_the_exact_version_and_watches_it_complete(web_stack, people, browser, tmp_path):
    execution, request = report_awaiting_approval(people)

    context = browser.new_context()
    page = context.new_page()
    login(page, web_stack.url, people["manager"])
    row = page.get_by_role("row").filter(has_text=execution.ref)
    expect(row).to_contain_text("Awaiting approval")
    list_tab = context.new_page()  # the list stays open in a second tab
    list_tab.goto(f"{web_stack.url}/")
    row.get_by_role("link", name=execution.ref).click()

    card = page.locator("#approval-card")
    expect(card.locator("#approval-version")).to_have_text(f"V{request.version}")
    expect(card.locator("#approval-sha")).to_have_text(request.content_sha256)
    expect(page.locator("#artifact-sha")).to_have_text(request.content_sha256)
    expect(page.locator(".rendered h1")).to_contain_text("Monthly performance report")
    page.screenshot(path=str(tmp_path / "approval.png"), full_page=True)

    url_before = page.url
    navigations = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None)
    card.get_by_role("button", name=f"Approve V{request.version}").click()
    expect(page.locator("#decision-result")).to_contain_text("Recorded: Approve")

    # No reload: the status panel polls and stops at the terminal state.
    expect(page.locator("#execution-status")).to_have_text("Completed", timeout=40_000)
    expect(page.locator("#ledger")).to_contain_text(f"{execution.ref}:publish:v1")
    expect(page.locator("#ledger")).to_contain_text("succeeded")
    assert navigations == [] and page.url == url_before
    # The list refreshed its rows too, through its one poller (not one per row).
    list_cell = list_tab.locator(f"#status-{execution.ref}")
    expect(list_cell).to_contain_text("Completed", timeout=10_000)
    expect(list_tab.locator("[hx-trigger]")).to_have_count(1)
    page.screenshot(path=str(tmp_path / "completed.png"), full_page=True)


def test_requester_sees_no_approve_button(web_stack, people, browser):
    execution, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-07"})
    wait_for(
        lambda: Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL, timeout=40, what="approval"
    )
    page = browser.new_page()
    login(page, web_stack.url, people["requester"])
    page.goto(f"{web_stack.url}/executions/{execution.ref}/")
    expect(page.locator("#approval-card")).to_contain_text("You requested this")
    expect(page.get_by_role("button", name=re.compile("Approve"))).to_have_count(0)


def test_approving_v2_while_v3_is_created_is_refused_and_the_auditor_exports_it(web_stack, people, browser, tmp_path):
    from approvals.services import approval_decide, execution_redraft

    execution, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"})

    def pending(version):
        request = ApprovalRequest.objects.filter(execution=execution, status="pending").order_by("-id").first()
        return request if request is not None and request.version == version else None

    v1 = wait_for(lambda: pending(1), timeout=40, what="V1 to await approval")
    approval_decide(
        user=people["manager2"].user,
        execution_ref=execution.ref,
        approval_id=v1.pk,
        decision="request_changes",
        artifact_version=1,
        content_sha256=v1.content_sha256,
        event_id="changes-1",
        comment="Explain the Eindhoven dip",
    )
    v2 = wait_for(lambda: pending(2), timeout=40, what="V2 to await approval")

    manager_tab = browser.new_context().new_page()
    login(manager_tab, web_stack.url, people["manager"])
    manager_tab.goto(f"{web_stack.url}/approvals/{v2.pk}/")
    expect(manager_tab.locator("#approval-version")).to_have_text("V2")
    expect(manager_tab.locator("body")).to_contain_text(v2.content_sha256)

    # Meanwhile the requester asks for another draft: V3 is created, V2's request superseded.
    execution_redraft(ref=execution.ref, user=people["requester"].user, instruction="Add the September outlook")
    wait_for(lambda: pending(3), timeout=40, what="V3 to await approval")

    manager_tab.get_by_role("button", name="Approve V2").click()
    alert = manager_tab.locator(".messages")
    expect(alert).to_contain_text("V2")
    expect(alert).to_contain_text("V3")
    expect(alert).to_contain_text("superseded")
    assert ApprovalRequest.objects.get(pk=v2.pk).status == "superseded"
    assert Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL
    manager_tab.screenshot(path=str(tmp_path / "refused.png"), full_page=True)

    # The auditor finds that refused attempt in the history and exports it.
    auditor_tab = browser.new_context(accept_downloads=True).new_page()
    login(auditor_tab, web_stack.url, people["auditor"])
    auditor_tab.goto(f"{web_stack.url}/approvals/audit/?workflow=monthly_report")
    row = auditor_tab.get_by_role("row").filter(has_text=f"#{v2.pk}")
    expect(row).to_contain_text("1 refused")
    row.get_by_role("link", name=f"#{v2.pk}").click()
    expect(auditor_tab.locator("body")).to_contain_text("refused")
    expect(auditor_tab.locator("body")).to_contain_text("superseded")
    auditor_tab.go_back()
    with auditor_tab.expect_download() as download:
        auditor_tab.locator("#csv-export").click()
    exported = tmp_path / "history.csv"
    download.value.save_as(exported)
    text = exported.read_text()
    assert v2.content_sha256 in text and "superseded" in text
