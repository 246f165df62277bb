"""``support_chat`` chatted with in Debian's Chromium (issue 40 item 8): the requester
writes, the agent answers each turn (a manager approving the replacement it proposes),
the requester closes the chat and sees its result.

With ``KEEL_UPDATE_SCREENSHOTS=1`` the page's screenshot is also written to
docs/screenshots/chat.png (the README's)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

from executions.models import Execution, Status
from executions.services import execution_start
from tests.support.browsing import approve_when_waiting, login
from tests.support.procs import wait_for

pytestmark = pytest.mark.browser


SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "chat.png"


def test_the_requester_chats_with_the_support_agent_and_closes_the_chat(web_stack, people, browser, tmp_path):
    execution, _ = execution_start(
        user=people["requester"].user,
        workflow="support_chat",
        input={"customer": "CUST-1001", "message": "Hello, two of my mugs arrived broken."},
    )
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    login(page, web_stack.url, people["requester"])
    page.goto(f"{web_stack.url}/executions/{execution.ref}/")
    expect(page.locator("#turn-1 .chat-agent")).to_contain_text("Which ticket", timeout=40_000)

    page.get_by_label("Your next message (1–2,000 characters)").fill("It is ticket TCK-1001.")
    page.get_by_role("button", name="Send", exact=True).click()
    expect(page.locator("#turn-2 .chat-customer")).to_contain_text("It is ticket TCK-1001.")
    approve_when_waiting(execution, people["manager"].user)  # the replacement the agent proposed
    expect(page.locator("#turn-2 .chat-agent")).to_contain_text("replacement", timeout=40_000)
    expect(page.locator("#turn-2 .chat-calls")).to_contain_text("submit_replacement — done")
    expect(page.get_by_role("button", name="Close the chat")).to_be_visible(timeout=40_000)
    expect(page.locator("#waiting-for")).to_contain_text("then it goes on by itself")
    page.locator("#chat").scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "chat.png"), clip={"x": 0, "y": 0, "width": 1100, "height": 1000})
    if os.environ.get("KEEL_UPDATE_SCREENSHOTS"):
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "chat.png", SCREENSHOT)

    page.get_by_role("button", name="Close the chat").click()
    wait_for(lambda: Execution.objects.get(pk=execution.pk).status == Status.COMPLETED, timeout=40, what="the close")
    page.reload()
    expect(page.locator("#result")).to_contain_text('"turns": 2')
    expect(page.locator("#chat-form")).to_have_count(0)
