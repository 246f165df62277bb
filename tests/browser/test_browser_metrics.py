"""The metrics page in Debian's Chromium: the measures and the charts drawn from a real
history (a worker, the sandbox with a fault), each chart linking to the filtered list.

With ``KEEL_UPDATE_SCREENSHOTS=1`` the page's screenshot is also written to
docs/screenshots/metrics.png (the README's)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

from executions.models import Execution, Status
from executions.services import execution_cancel, execution_start
from tests.support.browsing import approve_when_waiting, login
from tests.support.procs import http, wait_for

pytestmark = pytest.mark.browser


SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "metrics.png"
STARTED_RGB = (0x24, 0x47, 0xB8)  # static/js/metrics.js: the "started" series


def status_of(execution: Execution) -> str:
    return Execution.objects.get(pk=execution.pk).status


def colored_pixels(page, selector: str, rgb: tuple[int, int, int]) -> int:
    """Pixels of ``rgb`` (give or take antialiasing) on the canvas under ``selector``."""
    return page.evaluate(
        """([selector, rgb]) => {
            const canvas = document.querySelector(selector);
            const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
            let n = 0;
            for (let i = 0; i < data.length; i += 4) {
                if (data[i + 3] > 200 && Math.abs(data[i] - rgb[0]) < 12 && Math.abs(data[i + 1] - rgb[1]) < 12
                    && Math.abs(data[i + 2] - rgb[2]) < 12) n++;
            }
            return n;
        }""",
        [selector, list(rgb)],
    )


def painted_pixels(page, selector: str) -> int:
    return page.evaluate(
        """(selector) => {
            const canvas = document.querySelector(selector);
            const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
            let n = 0;
            for (let i = 3; i < data.length; i += 4) if (data[i] > 0) n++;
            return n;
        }""",
        selector,
    )


def test_the_metrics_page_draws_the_charts_and_each_links_to_its_list(web_stack, people, browser, tmp_path, settings):
    settings.METRICS_POLL_MS = 1000
    requester, manager = people["requester"].user, people["manager"].user
    done, attention, dropped = (
        execution_start(user=requester, workflow="monthly_report", input={"month": month})[0]
        for month in ("2026-05", "2026-06", "2026-07")
    )
    approve_when_waiting(done, manager)
    wait_for(lambda: status_of(done) == Status.COMPLETED, timeout=40, what="the first report to complete")
    spec = {"endpoint": "/reports/publish", "fault": "error_403", "count": 1}
    assert http().post(f"{web_stack_sandbox(settings)}/_faults", json=spec, timeout=5).status_code == 201
    approve_when_waiting(attention, manager)
    wait_for(lambda: status_of(attention) == Status.NEEDS_ATTENTION, timeout=40, what="the refused publish")
    wait_for(lambda: status_of(dropped) == Status.AWAITING_APPROVAL, timeout=40, what="the third to wait")
    execution_cancel(ref=dropped.ref, user=people["operator"].user, reason="not this month")

    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    login(page, web_stack.url, people["operator"])
    page.get_by_role("link", name="Metrics").click()
    expect(page.get_by_role("heading", name="Metrics", exact=True)).to_be_visible()
    expect(page).to_have_url(f"{web_stack.url}/dashboard/metrics/?window=24h")  # the window is in the URL
    page.locator("select[name=window]").select_option("1h")
    expect(page).to_have_url(f"{web_stack.url}/dashboard/metrics/?window=1h&workflow=")

    for chart in ("executions", "stuck", "time-in-state", "resume", "approval"):
        expect(page.locator(f"#chart-{chart}")).to_have_attribute("data-drawn", "true")
        assert painted_pixels(page, f"#chart-{chart} canvas") > 1000, chart
    assert colored_pixels(page, "#chart-executions canvas", STARTED_RGB) > 20  # the "started" series is drawn
    expect(page.locator("#m-stuck .value")).to_have_text("1")
    expect(page.locator("#m-cancellation .value")).to_have_text("0")
    expect(page.locator("#m-approval .value")).not_to_have_text("—")
    expect(page.locator("#m-resume .value")).not_to_have_text("—")
    expect(page.locator("#time-in-state tr[data-status='awaiting_approval'] .p50")).not_to_have_text("—")
    # Each p50 / p95 pair is told apart in the legend: by its label and by a solid or dashed marker.
    legend = page.locator("#chart-resume .u-legend")
    expect(legend).to_contain_text("p50 (median, solid)")
    expect(legend).to_contain_text("p95 (dashed)")
    styles = page.eval_on_selector_all("#chart-resume .u-legend .u-marker", "ms => ms.map(m => m.style.borderStyle)")
    assert styles[-2:] == ["solid", "dashed"], styles

    # It refreshes itself: the page polls again without a reload.
    loaded = int(page.locator("#metrics").get_attribute("data-loaded"))
    expect(page.locator("#metrics")).not_to_have_attribute("data-loaded", str(loaded), timeout=10_000)

    page.screenshot(path=str(tmp_path / "metrics.png"), full_page=True)
    if os.environ.get("KEEL_UPDATE_SCREENSHOTS"):
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "metrics.png", SCREENSHOT)

    # The stuck chart's link leads to the list filtered by that reason.
    page.locator("#stuck-links a[data-reason='permission_denied']").click()
    expect(page).to_have_url(f"{web_stack.url}/?reason=permission_denied")
    rows = page.locator("#executions tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(attention.ref)

    # And the executions chart's: the cancelled ones.
    page.go_back()
    page.locator("#chart-executions").get_by_role("link", name="cancelled").click()
    expect(page).to_have_url(f"{web_stack.url}/?status=cancelled")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(dropped.ref)
    assert not [e for e in errors if "Content Security Policy" in e or "uPlot" in e], errors


def web_stack_sandbox(settings) -> str:
    return settings.SANDBOX_URL
