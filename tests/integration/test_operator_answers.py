"""Issue 17, "every answer right": what the operator is told is safe to do, checked
against the record, in process (Django's test client on PostgreSQL). The paths that
need real processes and a browser are in tests/browser/test_browser_operator_paths.py, the
re-wake loop in tests/integration/test_rewake.py.
"""

from __future__ import annotations

import json
from datetime import timedelta

from django.db import transaction
from django.test import Client
from django.utils import timezone

from executions.engine import lifecycle
from executions.models import Action, Execution, ExecutionEvent, Status
from tests.support.screens import logged_in


def bearer(person) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {person.token}"}


def api_post(person, path: str, body: dict):
    return Client().post(f"/api{path}", json.dumps(body), content_type="application/json", **bearer(person))


def retrying(people, *, due_in: float = 900) -> Execution:
    """A report whose publish is waiting for its next attempt (a 429), as the runner leaves it."""
    execution = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={"month": "2026-08"},
        input_digest="d",
        created_by=people["requester"].user,
        current_step="publish",
        context={"artifacts": {}, "notes": {"constraints": [], "facts": [], "completed_steps": []}},
    )
    with transaction.atomic():
        lifecycle.apply(execution, "start")
        execution.due_at = timezone.now() + timedelta(seconds=due_in)
        execution.failed_attempts = 1
        lifecycle.apply(
            execution,
            "schedule_retry",
            reason="429 from /reports/publish",
            code="rate_limited",
            update_fields=("due_at", "failed_attempts"),
        )
    return execution


# --- item 6: cancel needs a reason and a confirmation


def test_cancel_without_a_reason_is_a_422_naming_it_and_changes_nothing(people, awaiting):
    execution, _ = awaiting
    events = ExecutionEvent.objects.filter(execution=execution).count()
    for body in ({}, {"reason": ""}, {"reason": "   "}):
        answer = api_post(people["operator"], f"/executions/{execution.ref}/cancel", body)
        assert answer.status_code == 422, answer.content
        assert answer.json()["detail"][0]["loc"] == ["body", "reason"]
    assert Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL
    assert ExecutionEvent.objects.filter(execution=execution).count() == events
    done = api_post(people["operator"], f"/executions/{execution.ref}/cancel", {"reason": "duplicate request"})
    assert done.status_code == 200 and done.json()["status"] == "cancelled"
    cancel = ExecutionEvent.objects.filter(execution=execution, type="transition").last()
    assert cancel.payload["reason"] == "duplicate request" and cancel.actor == people["operator"].user


def test_cancel_on_the_page_is_a_confirmation_first_then_needs_a_reason(people, awaiting):
    execution, request = awaiting
    operator = logged_in(people["operator"])
    page = operator.get(f"/executions/{execution.ref}/").content.decode()
    assert 'id="cancel-link"' in page and f'action="/executions/{execution.ref}/cancel/"' not in page, (
        "no one-click cancel on the execution page"
    )

    confirm = operator.get(f"/executions/{execution.ref}/cancel/")
    assert confirm.status_code == 200
    text = confirm.content.decode()
    assert "It is final" in text
    assert "It stops waiting for a decision to publish report" in text and 'id="confirm-cancel"' in text
    assert Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL, "a GET changes nothing"

    refused = operator.post(f"/executions/{execution.ref}/cancel/", {"reason": "  "})
    assert refused.status_code == 422 and 'id="cancel-error"' in refused.content.decode()
    assert "say why it is cancelled" in refused.content.decode()
    assert Execution.objects.get(pk=execution.pk).status == Status.AWAITING_APPROVAL

    done = operator.post(f"/executions/{execution.ref}/cancel/", {"reason": "the month was wrong"}, follow=True)
    assert done.status_code == 200 and f"Cancelled {execution.ref}." in done.content.decode()
    assert Execution.objects.get(pk=execution.pk).status == Status.CANCELLED
    again = operator.get(f"/executions/{execution.ref}/cancel/").content.decode()
    assert 'id="cancel-refused"' in again and 'id="confirm-cancel"' not in again


def test_the_cancel_page_names_what_it_voids_leaves_for_a_person_and_can_no_longer_resolve(people, awaiting):
    execution, request = awaiting
    Action.objects.create(execution=execution, key=f"{execution.ref}:publish:v1", step="publish", type="publish_report")
    assert logged_in(people["outsider"]).get(f"/executions/{execution.ref}/cancel/").status_code == 403
    text = logged_in(people["requester"]).get(f"/executions/{execution.ref}/cancel/").content.decode()
    assert "Never sent, and now never will be" in text and f"{execution.ref}:publish:v1" in text


# --- item 2: Retry now on the execution page, with a reason


def test_retry_now_is_on_the_page_of_a_retry_pending_execution_and_needs_a_reason(people):
    execution = retrying(people)
    operator = logged_in(people["operator"])
    page = operator.get(f"/executions/{execution.ref}/").content.decode()
    assert 'id="retry-form"' in page and "Retry now" in page
    assert 'id="retry-form"' not in logged_in(people["requester"]).get(f"/executions/{execution.ref}/").content.decode()

    no_reason = operator.post(f"/executions/{execution.ref}/retry/", {"reason": ""}, follow=True)
    assert "say why it should run now" in no_reason.content.decode()
    assert Execution.objects.get(pk=execution.pk).due_at > timezone.now() + timedelta(seconds=800)

    done = operator.post(f"/executions/{execution.ref}/retry/", {"reason": "the quota was raised"}, follow=True)
    assert "is due now" in done.content.decode()
    assert Execution.objects.get(pk=execution.pk).due_at <= timezone.now()
    [act] = ExecutionEvent.objects.filter(execution=execution, type="operator.retry_now")
    assert act.actor == people["operator"].user and act.payload["reason"] == "the quota was raised"
    assert (
        logged_in(people["requester"]).post(f"/executions/{execution.ref}/retry/", {"reason": "x"}).status_code == 302
    )
    assert ExecutionEvent.objects.filter(execution=execution, type="operator.retry_now").count() == 1


def test_retry_now_is_not_offered_where_it_cannot_work(people, awaiting):
    execution, _ = awaiting
    page = logged_in(people["operator"]).get(f"/executions/{execution.ref}/").content.decode()
    assert 'id="retry-form"' not in page


# --- item 3: a failed execution suggests what is possible; restarted, it is no longer stuck


def report(people, *, step: str = "retrieve_figures") -> Execution:
    return Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={"month": "2026-08", "constraints": []},
        input_digest="d",
        created_by=people["requester"].user,
        current_step=step,
        context={
            "artifacts": {},
            "notes": {"goal": "", "constraints": [], "facts": [], "completed_steps": [], "next_action": ""},
        },
    )


def moved(execution: Execution, *transitions: tuple[str, dict]) -> Execution:
    with transaction.atomic():
        for name, fields in transitions:
            lifecycle.apply(execution, name, **fields)
    return execution


def stuck_everywhere(people, ref: str) -> dict:
    """The reason as the API, the summary, the metrics (JSON and Prometheus) and the list filter say it."""
    from metrics.measures import stuck_now

    api = Client()
    one = api.get(f"/api/executions/{ref}", **bearer(people["operator"])).json()["stuck"]
    summary = api.get("/api/executions/summary", **bearer(people["operator"])).json()["by_reason"]
    scrape = api.get("/metrics", **bearer(people["operator"])).content.decode()
    gauges = {
        line.split('"')[1]: float(line.rsplit(" ", 1)[1])
        for line in scrape.splitlines()
        if line.startswith("keel_stuck_executions{")
    }
    return {"one": one, "summary": summary, "metrics": stuck_now(), "prometheus": gauges}


def test_a_failed_execution_suggests_a_restart_and_once_restarted_it_is_no_longer_stuck(people):
    from triage.restart import execution_restart

    failed = moved(
        report(people),
        ("start", {}),
        ("fail", {"reason": "Publishing: 500 (retries exhausted)", "code": "retries_exhausted"}),
    )
    seen = stuck_everywhere(people, failed.ref)
    assert seen["one"]["reason"] == "retries_exhausted" and seen["one"]["action"] == "restart"
    assert "can't be resumed: restart it" in seen["one"]["detail"]
    assert seen["summary"]["retries_exhausted"] == seen["metrics"]["retries_exhausted"] == 1
    assert seen["prometheus"]["retries_exhausted"] == 1
    preview = Client().get(f"/api/executions/{failed.ref}/resume-preview", **bearer(people["operator"])).json()
    assert preview["can_resume"] is False and "restart runs it again" in preview["blocked_by"][0]

    restarted = execution_restart(
        ref=failed.ref, user=people["operator"].user, from_step="retrieve_figures", reason="the service is back"
    )
    seen = stuck_everywhere(people, failed.ref)
    assert seen["one"] is None
    assert seen["summary"]["retries_exhausted"] == seen["metrics"]["retries_exhausted"] == 0
    assert seen["prometheus"]["retries_exhausted"] == 0
    listed = Client().get("/api/executions?reason=retries_exhausted", **bearer(people["operator"])).json()
    assert listed["items"] == []
    page = logged_in(people["operator"]).get("/?status=failed").content.decode()
    assert f'restarted as <a href="/executions/{restarted.ref}/">{restarted.ref}</a>' in page
    assert 'reason-retries_exhausted"' not in page


def test_a_resumable_execution_still_suggests_resume(people):
    flagged = moved(
        report(people), ("start", {}), ("flag", {"reason": "retries exhausted", "code": "retries_exhausted"})
    )
    assert stuck_everywhere(people, flagged.ref)["one"]["action"] == "resume"


# --- item 10: a cancelled execution with a compensation still to do is in triage


def test_a_cancelled_execution_with_a_planned_compensation_is_stuck_until_it_is_closed(people):
    from triage.compensations import action_close

    execution = moved(report(people, step="notify"), ("start", {}))
    Action.objects.create(
        execution=execution,
        key=f"{execution.ref}:publish:v1:compensate",
        step="publish",
        type="compensate_publish_report",
        args={"operation": "retract_publication", "publication_id": "PUB-1"},
    )
    moved(execution, ("cancel", {"reason": "published the wrong month"}))
    seen = stuck_everywhere(people, execution.ref)
    assert seen["one"]["reason"] == "compensation_pending" and seen["one"]["action"] == "compensate"
    assert f"{execution.ref}:publish:v1:compensate" in seen["one"]["detail"]
    assert seen["summary"]["compensation_pending"] == seen["metrics"]["compensation_pending"] == 1
    assert seen["prometheus"]["compensation_pending"] == 1
    listed = Client().get("/api/executions?reason=compensation_pending", **bearer(people["operator"])).json()
    assert [e["id"] for e in listed["items"]] == [execution.ref]
    counts = logged_in(people["operator"]).get("/").content.decode()
    assert "?reason=compensation_pending" in counts

    action_close(
        key=f"{execution.ref}:publish:v1:compensate",
        user=people["operator"].user,
        outcome="succeeded",
        evidence="retracted PUB-1 on the portal",
    )
    seen = stuck_everywhere(people, execution.ref)
    assert seen["one"] is None and seen["summary"]["compensation_pending"] == 0
    # item 5: the close is an act of the operator audit (API and CSV), like every operator act.
    audit = Client().get(f"/api/operator-audit?execution={execution.ref}", **bearer(people["auditor"])).json()
    [act] = [a for a in audit["items"] if a["action"] == "close_compensation"]
    assert act["actor"] == "operator" and act["reason"] == "retracted PUB-1 on the portal"
    assert act["subject"] == f"{execution.ref}:publish:v1:compensate" and act["after"] == "succeeded"
    exported = logged_in(people["auditor"]).get("/operator-audit/export.csv?action=close_compensation")
    assert f"{execution.ref}:publish:v1:compensate" in exported.content.decode()


# --- item 8: a lapsed lease says so from the moment it lapses


def running(people, *, owner: str, lease_ago: float, step_deadline_ago: float | None = None) -> Execution:
    execution = moved(report(people, step="publish"), ("start", {}))
    now = timezone.now()
    Execution.objects.filter(pk=execution.pk).update(
        lease_owner=owner,
        lease_token=7,
        lease_expires_at=now - timedelta(seconds=lease_ago),
        status_changed_at=now - timedelta(seconds=lease_ago + 30),
        step_deadline=now - timedelta(seconds=step_deadline_ago) if step_deadline_ago is not None else None,
    )
    return execution


def test_a_lease_that_just_lapsed_says_whose_it_was_and_that_nobody_took_it_over(people):
    execution = running(people, owner="worker:w1:4242:abc123", lease_ago=5)
    page = logged_in(people["operator"]).get(f"/executions/{execution.ref}/").content.decode()
    head = page[page.index('id="live-head"') : page.index('id="approval-card"')]
    assert "The lease of worker:w1:4242:abc123 (token 7) lapsed at" in head and "nobody took it over yet" in head
    assert "Held by" not in head and ("5 s ago" in head or "6 s ago" in head)

    stale = running(people, owner="worker:w2:4343:def456", lease_ago=90)
    stuck = stuck_everywhere(people, stale.ref)["one"]
    assert stuck["reason"] == "no_worker"
    assert stuck["detail"].startswith("the lease of worker:w2:4343:def456 lapsed at")
    assert stuck["since"].startswith(Execution.objects.get(pk=stale.pk).lease_expires_at.strftime("%Y-%m-%dT%H:%M:%S"))


# --- Low: step_overdue says what the step waits on and since when


def test_step_overdue_names_what_the_step_waits_on_and_since_when(people):
    execution = running(people, owner="worker:w1:1:aaa", lease_ago=-20, step_deadline_ago=30)
    stuck = stuck_everywhere(people, execution.ref)["one"]
    assert stuck["reason"] == "step_overdue"
    assert (
        "Publishing the approved report (publish) has waited on the provider's answer to its effect since"
        in (stuck["detail"])
    )
    assert "past its timeout of 600 s" in stuck["detail"] and "worker:w1:1:aaa still heartbeats" in stuck["detail"]


# --- Low: times to the second, with their timezone


def test_durations_are_shown_to_the_second():
    from console.templatetags.keel_time import span, utc

    assert [span(s) for s in (0, 25, 60, 192, 7500, 90000)] == [
        "0 s",
        "25 s",
        "1 min",
        "3 min 12 s",
        "2 h 5 min",
        "1 d 1 h",
    ]
    assert utc(timezone.now()).endswith(" UTC") and utc(None) == "—"


# --- item 9: "a new version appears here" only when one is being drafted


def test_the_next_version_card_shows_only_while_a_new_version_is_being_drafted(people, awaiting):
    from approvals.models import ApprovalRequest

    execution, request = awaiting
    operator = logged_in(people["operator"])

    def card() -> bool:
        return 'id="no-approval"' in operator.get(f"/executions/{execution.ref}/").content.decode()

    assert not card(), "the pending request is shown, not a promise"
    ApprovalRequest.objects.filter(pk=request.pk).update(status=ApprovalRequest.State.APPROVED)
    moved(Execution.objects.get(pk=execution.pk), ("resume_after_decision", {}))
    assert not card(), "approved and past its gate: no new version is coming"
    ApprovalRequest.objects.filter(pk=request.pk).update(status=ApprovalRequest.State.CHANGES_REQUESTED)
    assert card(), "changes requested: the redraft is on its way"
    moved(Execution.objects.get(pk=execution.pk), ("flag", {"reason": "the draft step raised", "code": "step_error"}))
    assert not card(), "stopped for an operator: nothing is being drafted until it is resumed"


# --- Low: Resolve preselects nothing; item 7: a resolve-as-failed warns that the effect may exist


def test_resolve_makes_the_operator_choose_and_warns_after_it_did_not_happen(people, unknown_outcome):
    execution, action = unknown_outcome
    operator = logged_in(people["operator"])
    page = operator.get(f"/executions/{execution.ref}/").content.decode()
    select = page[
        page.index('<select name="outcome" required>') : page.index("</select>", page.index('name="outcome"'))
    ]
    assert '<option value="" selected disabled>' in select and 'succeeded" selected' not in select

    chose_nothing = operator.post(f"/executions/{execution.ref}/resolve/", {"key": action.key, "evidence": "looked"})
    assert chose_nothing.status_code == 422 and 'id="resolve-error"' in chose_nothing.content.decode()
    assert '<textarea name="evidence" rows="2" required>looked</textarea>' in chose_nothing.content.decode()
    elsewhere = operator.post(f"/executions/{execution.ref}/resolve/", {"key": "no-such-key", "evidence": "x"})
    assert elsewhere.status_code == 422 and 'id="resolve-error"' not in elsewhere.content.decode()
    said = elsewhere.content.decode().split('class="messages"')[1].split("</ul>")[0]
    assert "outcome" in said and "msg error" in said, said  # the reason, in the page's messages
    assert Action.objects.get(pk=action.pk).status == Action.State.UNKNOWN

    done = operator.post(
        f"/executions/{execution.ref}/resolve/",
        {"key": action.key, "outcome": "failed", "evidence": "not on the portal"},
        follow=True,
    ).content.decode()
    assert f"Resolved {action.key} as failed." in done
    assert "the effect exists at the provider: check there before a restart" in done


# --- Low: the default Anthropic model is a current one


def test_the_default_anthropic_model_is_not_on_the_sdks_deprecation_list():
    from anthropic.resources.messages.messages import DEPRECATED_MODELS

    from executions.agent.adapters import DEFAULT_ANTHROPIC_MODEL

    assert DEFAULT_ANTHROPIC_MODEL not in DEPRECATED_MODELS, DEPRECATED_MODELS.get(DEFAULT_ANTHROPIC_MODEL)


# --- Low: no deprecated django-ninja tuple returns (pyproject's filterwarnings turns one into an error)


def test_the_api_answers_its_created_and_accepted_statuses_without_deprecated_tuples(people):
    started = api_post(
        people["requester"], "/executions", {"workflow": "monthly_report", "input": {"month": "2026-08"}}
    )
    assert started.status_code == 201, started.content
    again = api_post(
        people["requester"],
        "/executions",
        {"workflow": "monthly_report", "input": {"month": "2026-08"}, "idempotency_key": "k-1"},
    )
    assert again.status_code == 201
    replayed = api_post(
        people["requester"],
        "/executions",
        {"workflow": "monthly_report", "input": {"month": "2026-08"}, "idempotency_key": "k-1"},
    )
    assert replayed.status_code == 200 and replayed.json()["id"] == again.json()["id"]


# --- Low: a 403 is logged as one line, not a traceback


def test_a_refused_page_is_logged_without_a_traceback(people, awaiting, caplog):
    execution, _ = awaiting
    with caplog.at_level("WARNING", logger="django.request"):
        refused = logged_in(people["requester"]).get(f"/executions/{execution.ref}/resume/preview/")
    assert refused.status_code == 403
    [record] = [r for r in caplog.records if r.name == "django.request" and getattr(r, "status_code", None) == 403]
    assert record.exc_info is None and "Forbidden" in record.getMessage()
    assert "Traceback" not in caplog.text


# --- Low: a bulk run is bound to its dry run by a token; the confirm form has one "reason"


def test_a_bulk_run_with_its_dry_runs_token_does_exactly_those_ids_or_nothing(people):
    first, second, third = (retrying(people) for _ in range(3))
    operator = people["operator"]
    dry = api_post(
        operator, "/executions/bulk", {"operation": "retry", "ids": [first.ref, second.ref], "dry_run": True}
    )
    assert dry.status_code == 200 and dry.json()["eligible"] == [first.ref, second.ref]
    token = dry.json()["token"]
    before = ExecutionEvent.objects.count()
    for body, field in [
        ({"ids": [first.ref, second.ref, third.ref], "token": token}, "ids"),
        ({"ids": [first.ref], "token": token}, "ids"),
        ({"ids": [first.ref, second.ref], "token": token + "x"}, "token"),
    ]:
        answer = api_post(operator, "/executions/bulk", {"operation": "retry", "reason": "quota raised", **body})
        assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["body", field], answer.content
    other = api_post(operator, "/executions/bulk", {"operation": "cancel", "ids": [first.ref], "dry_run": True})
    wrong_op = api_post(
        operator,
        "/executions/bulk",
        {"operation": "retry", "ids": [first.ref], "reason": "x", "token": other.json()["token"]},
    )
    assert wrong_op.status_code == 422 and wrong_op.json()["detail"][0]["loc"] == ["body", "token"]
    assert ExecutionEvent.objects.count() == before, "nothing was done"
    done = api_post(
        operator,
        "/executions/bulk",
        {"operation": "retry", "ids": [second.ref, first.ref], "reason": "quota raised", "token": token},
    )
    assert done.status_code == 200 and [r["outcome"] for r in done.json()["results"]] == ["done", "done"]


def test_the_bulk_confirm_form_sends_one_reason_and_the_filters_apart(people):
    retrying(people)
    page = logged_in(people["operator"]).get("/bulk/?status=retry_pending&reason=rate_limited&operation=retry")
    form = page.content.decode()
    form = form[form.index('id="bulk-confirm"') : form.index("</form>", form.index('id="bulk-confirm"'))]
    assert form.count('name="reason"') == 1 and 'name="filter_reason" value="rate_limited"' in form
    assert 'name="filter_status" value="retry_pending"' in form and 'name="token"' in form


def test_a_redraft_asked_by_an_operator_is_an_operator_audit_act(people, awaiting):
    from approvals.services import execution_redraft

    execution, _ = awaiting
    execution_redraft(ref=execution.ref, user=people["operator"].user, instruction="Add a store ranking")
    audit = Client().get(f"/api/operator-audit?execution={execution.ref}", **bearer(people["auditor"])).json()
    [act] = audit["items"]
    assert (act["action"], act["actor"], act["reason"]) == ("redraft", "operator", "Add a store ranking")
    assert (act["before"], act["after"]) == ("awaiting_approval", "running")
