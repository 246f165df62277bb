"""Issue 17 in Chromium: an operator's paths out of a stuck execution, each walked from
the list to a state the page then describes truthfully — real processes (worker, beat,
the sandbox) behind the live server:

(a) unknown outcome → resolve → the execution resumes and waits for its shipment
    signal (no worker held, its timeout intact, never ``no_worker``) → the signal → completed;
(b) rate limited → Retry now with a reason → completed;
(d) failed → restart from the step the form picks (the one that repeats nothing) →
    the restart completes, the failed one links to it, nothing published twice;
(i) model drift → the diff → accept the new request → completed, the journal's revisions shown.

And a live page that goes stale (a server that hangs) says so; cancelled is not failed's red.
"""

from __future__ import annotations

import contextlib
import re
import time

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from approvals.models import ApprovalRequest
from executions.models import Action, Execution, ModelCall, Status
from executions.services import execution_cancel, execution_start
from tests.support.agents import model_env
from tests.support.browsing import approve, login, report_awaiting_approval
from tests.support.orders import add_fault
from tests.support.procs import http, wait_for

pytestmark = pytest.mark.browser


def status_of(execution: Execution) -> str:
    return Execution.objects.values_list("status", flat=True).get(pk=execution.pk)


def reach(execution: Execution, status: str, timeout: float = 90) -> None:
    wait_for(lambda: status_of(execution) == status, timeout=timeout, what=f"{execution.ref} to be {status}")


def operator_page(browser, web_stack, people):
    page = browser.new_context(viewport={"width": 1280, "height": 1000}).new_page()
    login(page, web_stack.url, people["operator"])
    return page


def test_a_unknown_outcome_resolved_resumes_into_a_wait_the_page_describes_truthfully(
    web_stack, stack, people, browser, settings
):
    settings.RUNTIME_STUCK_SECONDS = 5  # the web's no_worker threshold: a stale timer would show within the walk
    execution, _ = execution_start(
        user=people["requester"].user, workflow="replacement_order", input={"original_order": "ORD-1001"}
    )
    request = wait_for(
        lambda: ApprovalRequest.objects.filter(execution=execution, status="pending").first(), timeout=40
    )
    key = f"{execution.ref}:submit_order:v1"
    add_fault(stack, endpoint="/orders", fault="commit_then_hang", count=1, hang_seconds=5)
    add_fault(stack, endpoint="/orders", fault="error_500", method="GET", count=10_000)
    approve(people, execution, request)
    reach(execution, Status.NEEDS_ATTENTION, timeout=150)
    http().delete(f"{stack.sandbox_url}/_faults", timeout=5)

    page = operator_page(browser, web_stack, people)
    page.locator("nav.counts").get_by_role("link", name=re.compile("unknown outcome")).click()
    page.locator("#executions").get_by_role("link", name=execution.ref).click()
    expect(page.locator("#stuck")).to_contain_text("unknown_outcome")
    expect(page.locator("#stuck")).to_contain_text("suggested: resolve")

    # What the operator finds at the order service under the key (its client reference).
    [order] = http().get(f"{stack.sandbox_url}/orders", params={"reference": key}, timeout=5).json()["orders"]
    operate = page.locator("#operate-card")
    operate.get_by_label("Outcome").select_option("succeeded")
    operate.get_by_label(re.compile("order id at the order service")).fill(order["order_id"])
    operate.get_by_label("Evidence: how you established it").fill(f"the order service lists {order['order_id']}")
    operate.get_by_role("button", name="Resolve").click()
    expect(page.locator("#messages")).to_contain_text(f"Resolved {key} as succeeded")

    # It resumes by itself into the shipment wait; the page says what it waits for and until when.
    expect(page.locator("#execution-status")).to_have_text("Waiting", timeout=60_000)
    waiting = page.locator("#waiting-for")
    expect(waiting).to_contain_text("the signal shipment_confirmed")
    expect(waiting).to_contain_text("No worker is held")
    until = waiting.inner_text()
    time.sleep(10)  # twice the stuck threshold, with beat sweeping every second
    expect(page.locator("#stuck")).to_have_count(0)  # never "no_worker": nothing is due
    expect(page.locator("#live-banner")).to_be_hidden()
    assert page.locator("#waiting-for").inner_text() == until, "the wait and its timeout are the same"
    assert Execution.objects.get(pk=execution.pk).due_at is None

    form = page.locator("#signal-form")
    form.get_by_label(re.compile("Payload")).fill('{"tracking": "TRK-A"}')
    form.get_by_label(re.compile("Why you are sending it")).fill("the warehouse confirmed it")
    form.get_by_role("button", name="Send shipment_confirmed").click()
    expect(page.locator("#execution-status")).to_have_text("Completed", timeout=60_000)
    expect(page.locator("#ledger")).to_contain_text("resolved as succeeded by operator")
    assert http().get(f"{stack.sandbox_url}/_stats", timeout=5).json()["keys"][key]["effects"] == 1


def test_b_rate_limited_then_retry_now_from_the_page_completes(web_stack, stack, people, browser):
    execution, request = report_awaiting_approval(people, "2026-05")
    add_fault(stack, endpoint="/reports/publish", fault="rate_limit", retry_after=900)
    approve(people, execution, request)
    reach(execution, Status.RETRY_PENDING)

    page = operator_page(browser, web_stack, people)
    page.locator("nav.counts").get_by_role("link", name=re.compile("rate limited")).click()
    page.locator("#executions").get_by_role("link", name=execution.ref).click()
    expect(page.locator("#stuck")).to_contain_text("rate_limited")
    expect(page.locator("#stuck")).to_contain_text("next try (attempt 2)")
    expect(page.locator("#attempt")).to_contain_text("Attempt 2 of 4")  # the list and the page count alike

    form = page.locator("#retry-form")
    form.get_by_label(re.compile("Why it should run now")).fill("the provider raised our quota")
    form.get_by_role("button", name="Retry now").click()
    expect(page.locator("#messages")).to_contain_text("is due now")
    expect(page.locator("#execution-status")).to_have_text("Completed", timeout=60_000)
    expect(page.locator("#timeline-card")).to_contain_text("Retry now, by an operator")
    expect(page.locator("#timeline-card")).to_contain_text("the provider raised our quota")
    expect(page.locator("#stuck")).to_have_count(0)
    assert Action.objects.get(key=f"{execution.ref}:publish:v1").status == "succeeded"


def test_d_failed_restarts_from_the_step_the_form_picks_and_nothing_repeats(web_stack, stack, people, browser):
    execution, request = report_awaiting_approval(people, "2026-06")
    add_fault(stack, endpoint="/notify", fault="error_400")
    approve(people, execution, request)
    reach(execution, Status.FAILED)
    cancelled, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-04"})
    execution_cancel(ref=cancelled.ref, user=people["requester"].user, reason="not this month")

    page = operator_page(browser, web_stack, people)
    # Cancelled is a person's choice, not a failure: not the same red.
    failed_badge = page.locator(f"#status-{execution.ref} .badge")
    cancelled_badge = page.locator(f"#status-{cancelled.ref} .badge")
    colours = [b.evaluate("e => getComputedStyle(e).backgroundColor") for b in (failed_badge, cancelled_badge)]
    assert colours[0] != colours[1], colours

    page.locator("#executions").get_by_role("link", name=execution.ref).click()
    expect(page.locator("#execution-status")).to_have_text("Failed")
    form = page.locator("#restart-form")
    chosen = form.locator("select[name=from_step]")
    expect(chosen.locator("option:checked")).to_have_text("Notifying the management team")
    expect(page.locator("#restart-notes")).to_contain_text(f"sends again {execution.ref}:publish:v1")
    form.get_by_label("Why it should run again").fill("the mail sink is back")
    form.get_by_role("button", name="Restart as a new execution").click()

    expect(page.locator("#restarted-from")).to_contain_text(f"A restart of {execution.ref}")
    expect(page.locator("#execution-status")).to_have_text("Completed", timeout=60_000)
    restart = Execution.objects.get(restarted_from=execution)
    page.locator("#restarted-from").get_by_role("link", name=execution.ref).click()
    expect(page.locator("#restarted-as")).to_contain_text(f"Restarted as {restart.ref}")
    expect(page.locator("#restart-form")).to_have_count(0)
    expect(page.locator("#stuck")).to_have_count(0)
    keys = http().get(f"{stack.sandbox_url}/_stats", timeout=5).json()["keys"]
    assert keys[f"{execution.ref}:publish:v1"]["effects"] == 1 and f"{restart.ref}:publish:v1" not in keys


EDITED = "workflows.monthly_report,workflows.support_agent,tests.support.support_agent_edited"


@pytest.mark.own_stack  # it stops the worker and starts one with the edited prompt
def test_i_model_drift_accepting_the_new_request_completes(stack, live_server, settings, people, browser):
    settings.SANDBOX_URL = stack.sandbox_url
    stack.sandbox()
    stack.beat()
    env = model_env(stack, "anthropic")
    first = stack.worker("v1", **env)
    execution, _ = execution_start(
        user=people["requester"].user, workflow="support_agent", input={"ticket": "TCK-1001"}
    )
    request = wait_for(
        lambda: ApprovalRequest.objects.filter(execution=execution, status="pending").first(), timeout=60
    )
    first.stop()
    stack.worker("edited", RUNTIME_WORKFLOW_MODULES=EDITED, **env)  # the prompt template changed under it
    approve(people, execution, request)
    reach(execution, Status.NEEDS_ATTENTION)

    page = operator_page(browser, live_server, people)
    page.locator("nav.counts").get_by_role("link", name=re.compile("model drift")).click()
    page.locator("#executions").get_by_role("link", name=execution.ref).click()
    expect(page.locator("#stuck")).to_contain_text("model_drift")
    drift = page.locator("#model-drift")
    expect(drift.locator(".diff-add").filter(has_text="kindly and quickly").first).to_be_visible()
    expect(drift.locator(".diff-del").first).to_be_visible()
    drift.get_by_label(re.compile("Why the new request is right")).fill("the friendlier instruction is intended")
    drift.get_by_role("button", name="Accept the new request").click()
    expect(page.locator("#messages")).to_contain_text("Accepted the new request")
    expect(page.locator("#execution-status")).to_have_text("Completed", timeout=60_000)
    calls = page.locator("#model-calls-card")
    expect(calls.locator(".badge", has_text="superseded")).to_have_count(4)
    expect(calls.locator(".badge", has_text="revision 2")).to_have_count(4)
    expect(page.locator("#timeline-card")).to_contain_text("New model request accepted by an operator")
    assert ModelCall.objects.filter(execution=execution, revision=2).count() == 4
    stats = http().get(f"{stack.sandbox_url}/_stats", timeout=5).json()
    assert stats["endpoints"]["/orders"]["effects"] == 1, "the approved order went out once"


def test_a_live_page_that_goes_stale_says_so(live_server, people, browser):
    execution, _ = execution_start(user=people["requester"].user, workflow="monthly_report", input={"month": "2026-08"})
    page = browser.new_context().new_page()
    login(page, live_server.url, people["operator"])
    page.goto(f"{live_server.url}/executions/{execution.ref}/")
    stamp = page.locator("#live-updated-at")
    expect(stamp).to_have_text(re.compile(r"^\d\d:\d\d:\d\d UTC$"))
    banner = page.locator("#live-banner")
    first = stamp.inner_text()
    expect(stamp).not_to_have_text(first, timeout=5_000)  # every answered poll, "nothing changed" included

    held = []
    page.route("**/live/**", lambda route: held.append(route))  # a server that hangs: no answer, no error
    expect(banner).to_be_visible(timeout=5_000)
    expect(banner).to_contain_text("no answer since")
    frozen = stamp.inner_text()
    time.sleep(1.5)
    assert stamp.inner_text() == frozen, "the stamp says when it last heard, not now"
    page.unroute("**/live/**")
    for route in held:  # the ones htmx has not given up on yet (its timeout)
        with contextlib.suppress(PlaywrightError):
            route.abort()
    expect(banner).to_be_hidden(timeout=15_000)
    expect(stamp).not_to_have_text(frozen, timeout=5_000)
