"""S63 (adoption): a user outside a workflow's groups (``KEEL_WORKFLOW_ACCESS``) → that
workflow's executions are invisible everywhere: 404 by id, absent from lists, counts, the
inbox, the measures, the CLI and the e-mail audience — with real workers, the web server,
e-mail and webhooks on (the run's SMTP sink and receiver), while a member of its groups
reads and decides it as before. Every API path and page, walked one by one, is
tests/integration/test_workflow_access.py."""

from __future__ import annotations

import json

import requests
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import Group

from tests.support.cli import keel, refused
from tests.support.procs import wait_for
from tests.support.stack import app_env, outbox, wait_status

ACCESS = {
    "replacement_order": {
        "read": ["fulfilment"],
        "start": ["fulfilment"],
        "decide": ["fulfilment"],
        "operate": ["fulfilment"],
    }
}


def _signed_in(base: str, person) -> requests.Session:
    """A browser's session over HTTP: the login form, its CSRF token and the cookie."""
    hasher = PBKDF2PasswordHasher()  # hashed for config.settings (the web process), not the test settings' MD5
    person.user.password = hasher.encode(person.password, hasher.salt(), iterations=1000)
    person.user.save(update_fields=["password"])
    session = requests.Session()
    login = f"{base.rstrip('/')}/login/"
    session.get(login, timeout=15)
    form = {"username": person.user.username, "password": person.password}
    answer = session.post(
        login, {**form, "csrfmiddlewaretoken": session.cookies["csrftoken"]}, headers={"Referer": login}, timeout=15
    )
    assert answer.status_code == 200 and "sessionid" in session.cookies, answer.status_code
    return session


def _subjects(address: str, ref: str) -> list[str]:
    mailbox, _ = outbox()
    return [m["Subject"] for m in mailbox.to(address) if ref in m["Subject"]]


def test_s63_a_workflow_outside_your_groups_is_invisible_everywhere(stack, people, api_as, tmp_path):
    """S63: the fulfilment team's orders are invisible to the managers and operators outside it."""
    fulfilment = Group.objects.create(name="fulfilment")  # the group must exist before start-up
    for name in ("requester", "manager2"):
        people[name].user.groups.add(fulfilment)
    env = {"KEEL_WORKFLOW_ACCESS": json.dumps(ACCESS)}
    stack.up(**env)
    requester, insider = api_as(people["requester"]), api_as(people["manager2"])
    manager, operator = api_as(people["manager"]), api_as(people["operator"])

    started = requester.post("/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-1001"}})
    assert started.status_code == 201, started.text
    order = started.json()["id"]
    report = requester.start()["id"]
    order_gate = wait_status(requester, order, "awaiting_approval")["pending_approval"]
    report_gate = wait_status(requester, report, "awaiting_approval")["pending_approval"]

    # E-mail: the order's request goes to the fulfilment manager alone; the report's to both.
    wait_for(lambda: _subjects("manager2@example.com", order), timeout=40, what="the insider's e-mail")
    wait_for(lambda: _subjects("manager@example.com", report), timeout=40, what="the outsider's report e-mail")
    stack.wait_sweeps(2)
    assert _subjects("manager@example.com", order) == []
    assert len(_subjects("manager2@example.com", report)) == 1

    # The API, over HTTP, as the manager and the operator outside the group.
    for outsider in (manager, operator):
        assert outsider.get(f"/executions/{order}").status_code == 404
        assert outsider.get(f"/executions/{order}/history.jsonl").status_code == 404
        assert outsider.get(f"/executions/{report}").status_code == 200
        listed = [e["id"] for e in outsider.get("/executions").json()["items"]]
        assert order not in listed and report in listed
        assert outsider.get("/executions?workflow=replacement_order").json()["items"] == []
        assert "replacement_order" not in [w["name"] for w in outsider.get("/workflows").json()["items"]]
        assert outsider.get("/workflows/replacement_order").status_code == 404
    summary = operator.get("/executions/summary").json()
    assert summary["by_status"]["awaiting_approval"] == 1, summary
    measures = manager.get("/metrics?window=1h").text
    assert "replacement_order" not in measures
    assert manager.decide(order, order_gate).status_code == 404
    cancelled = operator.post(f"/executions/{order}/cancel", {"reason": "not mine"})
    assert cancelled.status_code == 404, cancelled.text
    again = manager.post("/executions", {"workflow": "replacement_order", "input": {"original_order": "ORD-1002"}})
    assert again.status_code == 422 and "unknown workflow" in again.text, again.text  # as one that doesn't exist

    # The insider reads it as before: the control (this test can fail).
    assert insider.get(f"/executions/{order}").status_code == 200
    assert order in [e["id"] for e in insider.get("/executions").json()["items"]]

    # The inbox page and its count in the nav, signed in as the outsider manager.
    for person, sees in ((people["manager"], False), (people["manager2"], True)):
        browser = _signed_in(stack.web_url, person)
        page = browser.get(f"{stack.web_url.rstrip('/')}/approvals/inbox/", timeout=15)
        assert page.status_code == 200 and report in page.text, page.status_code
        assert (order in page.text) is sees

    # The CLI, as each.
    cli_env = app_env(tmp_path, **env)
    refused(keel(cli_env, "show", order, "--as", "manager"), 2, f"no execution {order}")
    listed = keel(cli_env, "list", "--as", "operator", "--json")
    assert listed.returncode == 0 and order not in listed.stdout and report in listed.stdout, listed.stderr
    assert keel(cli_env, "show", order, "--as", "manager2").returncode == 0

    # The insider decides the order; the outsider the report; both complete as before.
    assert insider.decide(order, order_gate).status_code == 202
    assert manager.decide(report, report_gate).status_code == 202
    wait_status(requester, report, "completed", timeout=60)
    # The order goes on past its gate (to wait for the shipment's confirmation, v2).
    wait_for(lambda: requester.execution(order)["status"] in ("waiting", "completed"), timeout=60, what="the order")
    assert manager.get(f"/executions/{order}").status_code == 404  # still, once it is over
