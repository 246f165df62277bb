"""S31: a requester's hostile Markdown is inert on every page a manager sees (Chromium, Playwright)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from approvals.models import ApprovalRequest, Decision
from executions.models import Execution, Status
from executions.services import execution_start
from tests.support.browsing import login
from tests.support.procs import wait_for
from tests.support.screens import POLICY
from tests.support.world import HOSTILE_CONSTRAINT

pytestmark = pytest.mark.browser


def test_s31_a_javascript_link_and_a_remote_image_in_a_constraint_are_inert(web_stack, people, browser):
    """S31: a requester puts a javascript: link, a remote image and a raw <script> in a constraint;
    on the execution, approval and version pages a manager sees no active script URL, no
    request leaves for another host, no script from the content runs, and the CSP is there."""
    execution, _ = execution_start(
        user=people["requester"].user,
        workflow="monthly_report",
        input={"month": "2026-08", "constraints": [HOSTILE_CONSTRAINT]},
    )
    wait_for(
        lambda: Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL,
        timeout=40,
        what="the report to await approval",
    )
    request = ApprovalRequest.objects.get(execution=execution, status="pending")
    base = web_stack.url
    pages = [
        f"{base}/executions/{execution.ref}/",
        f"{base}/approvals/{request.pk}/",
        f"{base}/artifacts/{request.artifact_version.artifact.ref}/v{request.version}/",
    ]

    context = browser.new_context()
    sent, dialogs = [], []
    context.on("request", lambda r: sent.append(r.url))
    page = context.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    login(page, base, people["manager"])
    for url in pages:
        response = page.goto(url)
        assert response.status == 200, url
        assert response.headers["content-security-policy"] == POLICY, url
        content = page.locator(".rendered").first
        # The constraint is there, as text: the approver sees what the requester wrote.
        expect(content).to_contain_text("[link removed: javascript:alert(document.cookie)]")
        expect(content).to_contain_text("[image not loaded: chart — https://evil.example/x.png]")
        expect(content).to_contain_text("<script>alert(1)</script>")
        # …and nothing of it is live.
        hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.protocol)")
        assert "javascript:" not in hrefs and "data:" not in hrefs, url
        assert page.locator("[src*='evil.example'], [href*='evil.example'], [srcset*='evil.example']").count() == 0
        assert content.locator("script, img, iframe, object, embed, a:not([href])").count() == 0
        scripts = page.eval_on_selector_all("script", "all => all.map(s => ({src: s.src, text: s.textContent}))")
        assert all(s["src"].startswith(f"{base}/static/") for s in scripts), scripts  # ours, never inline
        content.get_by_text("Verify").first.click()
        assert page.url == url, "clicking the hostile link's text went somewhere"

    assert not [u for u in sent if "evil.example" in u]
    assert dialogs == []
    assert not Decision.objects.filter(request=request).exists()  # nothing was approved on the way
    context.close()
