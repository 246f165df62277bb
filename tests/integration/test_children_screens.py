"""Issue 21 in process: the list's start form starts a quarterly report (and says why
not for a quarter outside the snapshot); the execution page shows the tree — a child
names its parent, a parent lists its children with their status and stuck reason."""

from __future__ import annotations

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from console import page
from executions.models import Execution
from executions.reasons import StuckReason


def page_as(person) -> Client:
    client = Client()
    client.force_login(person.user)
    return client


def test_the_start_form_starts_a_quarterly_report_and_refuses_another_quarter_with_its_reason(people):
    browser = page_as(people["requester"])
    assert 'id="start-quarterly-report"' in browser.get("/").content.decode()
    started = browser.post("/executions/start/", {"workflow": "quarterly_report", "quarter": "2026-Q3"})
    [execution] = Execution.objects.filter(workflow="quarterly_report")
    assert started.status_code == 302 and started["Location"] == f"/executions/{execution.ref}/"
    assert execution.input == {"quarter": "2026-Q3", "constraints": []} and execution.status == "pending"

    refused = browser.post("/executions/start/", {"workflow": "quarterly_report", "quarter": "2026-Q4"}, follow=True)
    text = refused.content.decode()
    assert "Could not start: input.quarter:" in text and "2026-Q1, 2026-Q2, 2026-Q3" in text
    assert Execution.objects.filter(workflow="quarterly_report").count() == 1


def test_the_execution_page_shows_the_parent_and_the_children_with_their_stuck_reason(people):
    user = people["requester"].user
    parent = Execution.objects.create(
        workflow="quarterly_report", workflow_version=1, input={"quarter": "2026-Q3"}, input_digest="p", created_by=user
    )
    kids = [
        Execution.objects.create(
            workflow="monthly_report",
            workflow_version=1,
            input={"month": month},
            input_digest=month,
            created_by=user,
            parent=parent,
            parent_step="monthly_reports",
            child_key=month,
        )
        for month in ("2026-07", "2026-08")
    ]
    Execution.objects.filter(pk=kids[1].pk).update(status="needs_attention", reason_code=StuckReason.STEP_ERROR)
    browser = page_as(people["operator"])

    page = browser.get(f"/executions/{parent.ref}/").content.decode()
    table = page[page.index('id="children"') : page.index("</table>", page.index('id="children"'))]
    assert all(f'href="/executions/{k.ref}/"' in table for k in kids)
    assert "2026-07" in table and "monthly_reports" in table and "reason-step_error" in table

    child = browser.get(f"/executions/{kids[0].ref}/").content.decode()
    assert (
        f'Child of <a href="/executions/{parent.ref}/">{parent.ref}</a>, started by its step monthly_reports' in child
    )


def test_the_page_of_an_execution_without_children_does_not_ask_for_them(people):
    """The marks' statement says whether there are children; only a parent's page reads
    them (with their stuck reasons), so the poll of every other page is a statement shorter."""
    user = people["requester"].user
    parent = Execution.objects.create(
        workflow="quarterly_report", workflow_version=1, input={"quarter": "2026-Q3"}, input_digest="p", created_by=user
    )
    with CaptureQueriesContext(connection) as alone:
        assert page.snapshot(parent).children == []
    child = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={"month": "2026-07"},
        input_digest="m",
        created_by=user,
        parent=parent,
        parent_step="monthly_reports",
        child_key="2026-07",
    )
    with CaptureQueriesContext(connection) as family:
        assert [c.pk for c in page.snapshot(parent).children] == [child.pk]
    assert len(family) == len(alone) + 1
