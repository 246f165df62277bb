"""What the browser tests share, and the fixtures they run on (registered for every test
folder by tests/conftest.py's ``pytest_plugins``): Debian's Chromium launched once a
module (``chromium``), a test's own contexts closed at its end (``browser``), the web
app in this process before a real worker and sandbox (``web_stack``); signing in
through the login form; a report run up to its approval, and approving it."""

from __future__ import annotations

import pytest
from django.db import connections
from playwright.sync_api import expect, sync_playwright

from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from executions.models import Execution, Status
from executions.services import execution_start
from tests.support.procs import wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def chromium():
    """Debian's Chromium, launched once for a module's tests (a launch costs ~1 s of CPU);
    each test works in contexts of its own, closed at its end (``browser``)."""
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()
        # ORM calls made while Playwright's loop runs use their own connections: close them.
        connections.close_all()


@pytest.fixture
def browser(chromium):
    """The module's Chromium for one test: every context and page the test opened is closed
    at its end, so none of its pages polls on into the next test."""
    yield chromium
    for context in chromium.contexts:
        context.close()
    # ORM calls made while Playwright's loop runs use their own connections: close them.
    connections.close_all()


@pytest.fixture
def web_stack(stack, live_server, settings):
    # The web app runs in this process (live_server) against the same test database;
    # the worker and the sandbox are real processes.
    settings.SANDBOX_URL = stack.sandbox_url
    stack.up(web=False)
    return live_server


def login(page, base: str, person) -> None:
    page.goto(f"{base}/login/")
    page.get_by_label("Username").fill(person.user.username)
    page.get_by_label("Password").fill(person.password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Executions")).to_be_visible()


def report_awaiting_approval(people, month: str = "2026-08") -> tuple[Execution, ApprovalRequest]:
    """The requester's monthly report, run by the stack's workers up to the manager's approval."""
    execution, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": month})
    wait_for(
        lambda: Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL,
        timeout=40,
        what="the report to wait for approval",
    )
    return execution, ApprovalRequest.objects.get(execution=execution)


def approve(people, execution: Execution, request: ApprovalRequest) -> None:
    approval_decide(
        user=people["manager"].user,
        execution_ref=execution.ref,
        approval_id=request.pk,
        decision="approve",
        artifact_version=request.version,
        content_sha256=request.content_sha256,
        event_id=f"approve-{execution.ref}",
    )


def approve_when_waiting(execution: Execution, manager) -> None:
    """Once ``execution`` awaits approval, ``manager`` approves the pending version."""
    wait_for(
        lambda: Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL,
        timeout=40,
        what=f"{execution} to wait",
    )
    request = ApprovalRequest.objects.get(execution=execution, status="pending")
    approval_decide(
        execution_ref=execution.ref,
        approval_id=request.pk,
        user=manager,
        decision="approve",
        artifact_version=request.version,
        content_sha256=request.content_sha256,
        event_id=f"ok-{execution.pk}",
    )
