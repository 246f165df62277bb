"""Issue 20 in Chromium: the start form of a workflow registered only by
KEEL_WORKFLOW_MODULES (the guide's example), drawn from its schema — a real label per
field, a select for the enum — and a double submit (two at once, then a double click on Start) starts one execution."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

import examples.expense_approval.workflow  # noqa: F401 - registered in this process's web app too
from executions.models import Execution
from tests.support.browsing import login

pytestmark = pytest.mark.browser


@pytest.fixture
def web_stack(stack, live_server, settings):
    settings.SANDBOX_URL = stack.sandbox_url
    stack.up(web=False, KEEL_WORKFLOW_MODULES="examples.expense_approval.workflow")
    return live_server


def test_a_double_submit_of_the_start_form_starts_one_execution(web_stack, people, browser):
    page = browser.new_page()
    login(page, web_stack.url, people["requester"])
    page.get_by_role("link", name="expense_approval").first.click()
    expect(page.get_by_role("heading", name="Start: Expense claim")).to_be_visible()
    page.get_by_label("Employee").fill("ana")
    page.get_by_label("Email").fill("ana@example.com")
    page.get_by_label("Amount Usd").fill("120")
    page.get_by_label("Category").select_option("meals")
    page.get_by_label("Receipts").fill("R-1\nR-2")
    # Two submits of the form as drawn, at once (what a double click sends), then a third by its button.
    statuses = page.evaluate(
        """async () => {
            const form = document.getElementById('start-expense_approval');
            const send = () => fetch(form.action, {method: 'POST', body: new FormData(form), redirect: 'manual'});
            const answers = await Promise.all([send(), send()]);
            return answers.map(a => a.type === 'opaqueredirect' ? 303 : a.status);
        }"""
    )
    assert statuses == [303, 303]
    page.locator("#start-submit").dblclick()
    # A double click is two navigations, the first aborted by the second: wait for where the
    # page lands (the URL polled), not for one navigation, which may be the aborted one.
    expect(page).to_have_url(re.compile(r".*/executions/RUN_\d+/$"))
    first = page.url
    [execution] = Execution.objects.all()
    assert first.endswith(f"/executions/{execution.ref}/")
    assert execution.input["receipts"] == ["R-1", "R-2"] and execution.input["category"] == "meals"
    page.close()
