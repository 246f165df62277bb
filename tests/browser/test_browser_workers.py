"""Issue 39, item 3, in Debian's Chromium: the Workers page follows the fleet live (a worker
killed turns stale, its queue loses its consumer, without a reload), and the footer's time
says what the page's data is as of: it moves on a live page, not on one whose poll covers
only the nav."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.browsing import login

pytestmark = pytest.mark.browser


ENV = {"RUNTIME_WORKER_HEARTBEAT_SECONDS": "0.3", "RUNTIME_WORKER_STALE_SECONDS": "1.5"}


@pytest.mark.own_stack
def test_the_workers_page_shows_a_killed_worker_stale_live_and_its_time_says_what_the_data_is_as_of(
    stack, live_server, people, browser, settings
):
    """Issue 39, item 3: the Workers page never refreshed while its "Updated" time ticked on
    (every worker stopped, it still said "alive, 1 consumer"). Now the page polls what it
    shows: SIGKILL the only worker → its row turns stale and the queues say "none" on the
    open page; a page that polls only the nav keeps the time it was drawn ("Loaded")."""
    settings.RUNTIME_WORKER_STALE_SECONDS = 1.5  # the page renders in this process (live_server)
    stack.up(web=False, beat=False, workers=0, **ENV)
    worker = stack.worker("watched", **ENV)
    page = browser.new_context().new_page()
    login(page, live_server.url, people["operator"])
    page.goto(f"{live_server.url}/dashboard/workers/")
    row = page.locator("#workers tr.worker")  # the one worker process (its pid on the row)
    expect(row.locator(".state .badge")).to_have_text("alive", timeout=10_000)  # seen live if not yet at the draw
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(3)).to_have_text(str(worker.pid))
    expect(page.locator("#queue-celery")).to_contain_text("1")
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None)

    worker.kill()
    expect(row.locator(".state .badge")).to_have_text("stale", timeout=10_000)
    expect(row.locator(".state")).to_contain_text("no heartbeat")  # killed: no clean shutdown
    expect(page.locator("#queue-celery")).to_contain_text("none")
    expect(page.locator("#unconsumed")).to_contain_text("celery")
    assert navigations == [], "no reload"
    expect(page.locator("#live-updated-label")).to_have_text("Updated")  # its poll covers the page

    page.goto(f"{live_server.url}/workflows/")  # its poll covers the nav alone
    expect(page.locator("#live-updated-label")).to_have_text("Loaded")
    drawn = page.locator("#live-updated-at").inner_text()
    page.wait_for_timeout(1_200)  # past the drawn second
    with page.expect_response(lambda r: "/live/" in r.url):  # an answered poll later, still the draw's time
        pass
    assert page.locator("#live-updated-at").inner_text() == drawn
