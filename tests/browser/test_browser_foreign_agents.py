"""Issue 42 in Chromium, with e-mail and webhooks on: the pydantic-ai support agent started
from its form and its refund approved by the manager on the page; the MCP bookings agent
started from its form, the server's question told to the requester by e-mail and answered
with the form drawn from its schema, the room booked once."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

import examples.mcp_bookings.workflow
import examples.pydantic_support.workflow  # noqa: F401
from executions.models import Execution
from tests.support.browsing import login
from tests.support.procs import wait_for
from tests.support.stack import outbox

pytestmark = pytest.mark.browser
MODULES = "examples.pydantic_support.workflow,examples.mcp_bookings.workflow"


@pytest.fixture
def web_stack(stack, live_server, settings, tmp_path):
    settings.SANDBOX_URL = stack.sandbox_url
    stack.up(web=False, KEEL_WORKFLOW_MODULES=MODULES, BOOKINGS_FILE=str(tmp_path / "bookings.json"))
    live_server.bookings = tmp_path / "bookings.json"
    return live_server


def start(page, base: str, workflow: str, title: str, field: str, text: str) -> Execution:
    page.goto(f"{base}/")
    page.get_by_role("link", name=workflow).first.click()
    expect(page.get_by_role("heading", name=f"Start: {title}")).to_be_visible()
    page.get_by_label(field).fill(text)
    page.locator("#start-submit").click()
    page.wait_for_url("**/executions/RUN_*/")
    return Execution.objects.get(pk=int(page.url.rstrip("/").rsplit("_", 1)[1]))


def test_the_pydantic_agents_refund_is_approved_on_the_page(web_stack, people, browser):
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    login(page, web_stack.url, people["requester"])
    execution = start(
        page, web_stack.url, "pydantic_support", "Support agent (pydantic-ai)", "Message", "Refund ORD-1005 please"
    )
    manager = browser.new_page()
    login(manager, web_stack.url, people["manager"])
    manager.goto(f"{web_stack.url}/executions/{execution.ref}/")
    card = manager.locator("#approval-card")
    expect(card).to_contain_text("refund", timeout=40_000)
    card.get_by_role("button", name="Approve V1").click()
    expect(manager.locator("#decision-result")).to_contain_text("Recorded: Approve")
    expect(page.locator("#execution-status")).to_have_text("Completed", timeout=40_000)
    execution.refresh_from_db()
    assert execution.context["result"] == {"answer": "Your order ORD-1005 is refunded.", "refunded": ["ORD-1005"]}


def test_the_mcp_servers_question_is_mailed_and_answered_on_the_page(web_stack, people, browser):
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    login(page, web_stack.url, people["requester"])
    execution = start(
        page, web_stack.url, "mcp_bookings", "Room bookings (an MCP server)", "Request", "10 people on 2026-12-16"
    )
    form = page.locator("#answer-form")
    expect(form).to_contain_text("Book Cumulus on 2026-12-16 for 10 people?", timeout=40_000)
    expect(page.locator("#waiting-for")).to_contain_text("an answer to book_room's question")
    mailbox, _ = outbox()
    address = people["requester"].user.email
    wait_for(
        lambda: any(f"{execution.ref}: book_room asks for your answer" in m["Subject"] for m in mailbox.to(address)),
        timeout=40,
        what="the e-mail telling the requester of the question",
    )
    form.get_by_label("Confirm (Book it?)").select_option("yes")
    form.get_by_label("Note (A note for the front desk) (optional)").fill("projector please")
    form.get_by_role("button", name="Answer").click()
    expect(page.locator(".msg.success")).to_contain_text("Answered")
    expect(page.locator("#execution-status")).to_have_text("Completed", timeout=40_000)
    [booking] = json.loads(web_stack.bookings.read_text())
    assert (booking["room"], booking["note"]) == ("Cumulus", "projector please")
