"""Issue 18, item 4: a same-origin image in a report can't forge a "viewed" audit entry
(Chromium, Playwright, a real worker): rendering never writes the audit; the approval
card a manager opened records the view itself, once, by a POST."""

from __future__ import annotations

import pytest

from approvals.models import ApprovalRequest, AuditEntry
from executions.models import Execution, Status
from executions.services import execution_start
from tests.support.browsing import login
from tests.support.procs import wait_for

pytestmark = pytest.mark.browser


def awaiting(people, constraints: list[str]) -> ApprovalRequest:
    execution, _ = execution_start(
        user=people["requester"].user,
        workflow="monthly_report",
        input={"month": "2026-08", "constraints": constraints},
    )
    wait_for(
        lambda: Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL,
        timeout=40,
        what=f"{execution.ref} to await approval",
    )
    return ApprovalRequest.objects.get(execution=execution, status="pending")


def views_of(request: ApprovalRequest) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(kind=AuditEntry.Kind.VIEWED, request=request).order_by("id"))


def test_a_same_origin_image_in_a_report_records_no_view_of_the_request_it_points_at(
    web_stack,
    people,
    browser,
):
    """The requester's report embeds ``![x](/approvals/N/)`` and ``![x](/executions/RUN/)``
    for another request N; a manager opens the report's own approval page, its execution
    page and its version page. Request N gets no "viewed" entry (no image was requested
    at all); the report's own request gets one per card the manager opened."""
    target = awaiting(people, [])
    bait = [f"See ![x](/approvals/{target.pk}/) and ![y](/executions/{target.execution.ref}/)"]
    report = awaiting(people, bait)
    base = web_stack.url

    context = browser.new_context()
    sent: list[str] = []
    context.on("request", lambda r: sent.append(r.url))
    page = context.new_page()
    login(page, base, people["manager"])
    for url in (
        f"{base}/approvals/{report.pk}/",
        f"{base}/executions/{report.execution.ref}/",
        f"{base}/artifacts/{report.artifact_version.artifact.ref}/v{report.version}/",
    ):
        assert page.goto(url).status == 200
        page.locator(".rendered").first.wait_for()
        text = page.locator(".rendered").first.inner_text()
        assert f"[image not loaded: x — /approvals/{target.pk}/]" in text  # shown as text, not loaded
    seen = wait_for(lambda: len(views_of(report)) == 2 and views_of(report), what="the two cards' views")
    page.wait_for_timeout(1000)  # the pages poll: give a stray request of theirs time to show

    assert views_of(target) == []
    assert not [
        u for u in sent if u.endswith(f"/approvals/{target.pk}/") or f"/executions/{target.execution.ref}/" in u
    ]
    assert [v.detail.get("via", "approval page") for v in seen] == ["approval page", "execution page"]
    assert all(v.actor == people["manager"].user and v.content_sha256 == report.content_sha256 for v in seen)
    assert all(len(v.detail["form_token"]) == 32 for v in seen)
    context.close()
