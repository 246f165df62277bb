"""Issue 21 in process: the list's start form starts a quarterly report (and says why
not for a quarter outside the snapshot); the execution page shows the tree — a child
names its parent, a parent lists its children with their status and stuck reason."""

from __future__ import annotations

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from console import page
from executions import selectors
from executions.models import Execution
from executions.reasons import StuckReason
from triage import bulk
from triage.preview import resume_preview


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


def _family(people, statuses: list[str]) -> tuple[Execution, list[Execution]]:
    """A quarterly report stopped at its children step (needs_attention, ``child_failed``,
    its recorded sentence naming only the first child), with one child per status."""
    user = people["requester"].user
    parent = Execution.objects.create(
        workflow="quarterly_report", workflow_version=1, input={"quarter": "2026-Q3"}, input_digest="p", created_by=user
    )
    kids = []
    for month, status in zip(("2026-07", "2026-08", "2026-09"), statuses, strict=False):
        kid = Execution.objects.create(
            workflow="monthly_report",
            workflow_version=1,
            input={"month": month},
            input_digest=month,
            created_by=user,
            parent=parent,
            parent_step="monthly_reports",
            child_key=month,
        )
        Execution.objects.filter(pk=kid.pk).update(status=status, current_step="draft", status_reason=f"{month} broke")
        kids.append(Execution.objects.get(pk=kid.pk))
    Execution.objects.filter(pk=parent.pk).update(
        status="needs_attention",
        reason_code=StuckReason.CHILD_FAILED,
        current_step="monthly_reports",
        status_reason=f"child {kids[0].ref} (monthly_report, key 2026-07) failed",
    )
    return parent, kids


def _stuck(parent: Execution) -> dict:
    return selectors.execution_payload(selectors.execution(parent.ref))["stuck"]


def test_a_parent_whose_children_failed_names_every_one_and_suggests_restarting_them(people):
    """Issue 39 items 1 and 15: a parent stopped by failed children suggests restarting
    them (``restart``, never a resume the API refuses), and its reason names every
    failed child as they stand now — not the 1 of 3 recorded when it stopped."""
    parent, kids = _family(people, ["failed", "failed", "failed"])
    stuck = _stuck(parent)
    assert stuck["reason"] == "child_failed" and stuck["action"] == "restart"
    assert stuck["detail"].startswith("3 of 3 children can't complete")
    for kid in kids:
        assert f"child {kid.ref} (monthly_report, key {kid.child_key}) failed at draft" in stuck["detail"]
        assert f"restart it from draft (POST /api/executions/{kid.ref}/restart" in stuck["detail"]
    # The page links the suggestion to each child's restart form.
    shown = page_as(people["operator"]).get(f"/executions/{parent.ref}/").content.decode()
    targets = shown[shown.index('id="stuck-targets"') : shown.index("</p>", shown.index('id="stuck-targets"'))]
    assert all(f'href="/executions/{k.ref}/#restart-form">Restart {k.ref}</a>' in targets for k in kids)
    # The resume preview says what leads on instead of a resume.
    preview = resume_preview(Execution.objects.get(pk=parent.pk))
    assert preview["can_resume"] is False
    assert all(any("restart it from draft" in b and k.ref in b for b in preview["blocked_by"]) for k in kids)


def test_a_parent_with_a_cancelled_child_suggests_cancelling_it_and_says_why(people):
    """Issue 39 item 1: a cancelled (say, rejected) child can't be restarted, so the one
    act that leads on is cancelling the parent; the suggestion says so, not resume."""
    parent, (failed, cancelled) = _family(people, ["failed", "cancelled"])
    stuck = _stuck(parent)
    assert stuck["action"] == "cancel"
    assert stuck["detail"].startswith("2 of 2 children can't complete")
    assert f"child {failed.ref} (monthly_report, key 2026-07) failed at draft" in stuck["detail"]
    assert (
        f"child {cancelled.ref} (monthly_report, key 2026-08) was cancelled: 2026-08 broke — a cancelled execution "
        "can't be restarted: cancel this execution" in stuck["detail"]
    )


def test_the_children_table_follows_a_childs_restart(people):
    """Issue 39 item 14: a failed child that was restarted (and its restart restarted
    again) shows the restart the parent now waits on, with its status, on the parent's page."""
    parent, (done, failed) = _family(people, ["completed", "failed"])
    first = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input=failed.input,
        input_digest="r1",
        created_by=failed.created_by,
        restarted_from=failed,
    )
    Execution.objects.filter(pk=first.pk).update(status="failed", current_step="draft")
    second = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input=failed.input,
        input_digest="r2",
        created_by=failed.created_by,
        restarted_from=first,
    )
    Execution.objects.filter(pk=second.pk).update(status="awaiting_approval", current_step="review")
    Execution.objects.filter(pk=parent.pk).update(status="waiting", reason_code="", status_reason="")

    shown = page_as(people["operator"]).get(f"/executions/{parent.ref}/").content.decode()
    row = shown[shown.index(f'id="child-{failed.ref}"') : shown.index("</tr>", shown.index(f'id="child-{failed.ref}"'))]
    assert f'restarted as <a href="/executions/{second.ref}/">{second.ref}</a>, which the parent follows' in row
    assert "awaiting" in row.lower()
    assert (
        'id="child-restart-'
        not in shown[shown.index(f'id="child-{done.ref}"') : shown.index(f'id="child-{failed.ref}"')]
    )


def test_the_bulk_cancel_dry_run_says_that_cancelling_a_child_stops_its_live_parent(people):
    """Issue 39 item 13: the dry run of a bulk cancel listed the children of a live parent
    as plainly eligible; it now says, for each, that cancelling it stops that parent and
    leaves only its cancel (API ``notes`` and the console's dry run), and nothing for others."""
    parent, kids = _family(people, ["awaiting_approval", "awaiting_approval"])
    Execution.objects.filter(pk=parent.pk).update(status="waiting", reason_code="", status_reason="")
    alone = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={"month": "2026-01"},
        input_digest="a",
        created_by=parent.created_by,
    )
    operator = people["operator"].user
    dry = bulk.bulk_dry_run(user=operator, operation="cancel", ids=[k.ref for k in kids] + [alone.ref])
    assert dry.eligible == [kids[0].ref, kids[1].ref, alone.ref]
    for kid in kids:
        assert dry.as_dict()["notes"][kid.ref].startswith(
            f"a child of {parent.ref}, which is still live: cancelling it stops {parent.ref} (child_failed)"
        )
    assert alone.ref not in dry.notes
    # With the parent in the batch, its children go with it: said so instead.
    together = bulk.bulk_dry_run(user=operator, operation="cancel", ids=[parent.ref, kids[0].ref])
    assert together.notes == {
        kids[0].ref: f"a child of {parent.ref}, which this batch cancels too (with its live children)"
    }

    shown = page_as(people["operator"]).get("/bulk/?operation=cancel&workflow=monthly_report").content.decode()
    row = shown[
        shown.index(f'data-ref="{kids[0].ref}"') : shown.index("</tr>", shown.index(f'data-ref="{kids[0].ref}"'))
    ]
    assert "Note: a child of" in row and "can then only be cancelled" in row
    other = shown[shown.index(f'data-ref="{alone.ref}"') : shown.index("</tr>", shown.index(f'data-ref="{alone.ref}"'))]
    assert "Note:" not in other
