"""Restart a failed execution from a step (issue 12), as DBOS's fork or Temporal's reset.

On real processes: a report whose publish failed for good (retries exhausted) is
restarted from ``publish``; the new execution reuses the recorded outputs of the
steps before it (none of them runs again), publishes once under its own key and
completes; the two are linked both ways, on the API and on both pages. Then what is
refused: a second restart, a restart of anything not failed, an unknown step or one
past the failure (422 naming ``from_step``). Without processes: what a restart from
an earlier step carries over (state, artifacts, notes) and what it leaves behind.
"""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import Client

from artifacts import store
from artifacts.models import Artifact, ArtifactVersion
from executions.engine import lifecycle
from executions.errors import InvalidInput
from executions.models import Action, Execution, ExecutionEvent, Status, StepRun
from tests.support.orders import add_fault
from tests.support.procs import http, wait_for
from tests.support.stack import approved, pk, up, wait_status
from triage.restart import execution_restart

EARLIER = ["retrieve_figures", "analyze", "draft_report", "review"]


def test_a_failed_report_restarted_from_publish_reuses_what_was_done_and_completes(stack, people, api_as):
    up(stack)
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    ref = requester.start("2026-07")["id"]
    add_fault(stack, endpoint="/reports/publish", fault="error_500", count=20)
    approved(api_as, people, ref)
    failed = wait_status(operator, ref, "failed", timeout=90)
    assert failed["stuck"]["reason"] == "retries_exhausted" and failed["restarted_as"] is None
    assert http().delete(f"{stack.sandbox_url}/_faults", timeout=5).status_code == 200
    # Production's defaults: its failure was told by webhook, an action of this execution recorded at
    # publish; a restart from publish never counts that as an effect it would send again.
    told = Action.objects.filter(execution_id=pk(ref), key__contains=":webhook:execution.failed:", status="succeeded")
    webhook = wait_for(lambda: told.first(), timeout=30, what="the failure's webhook")
    assert webhook.step == "publish"
    [option] = [
        o for o in operator.get(f"/executions/{ref}/restart-options").json()["options"] if o["step"] == "publish"
    ]
    assert option["works"] and option["would_repeat"] == [], option
    old = Execution.objects.get(pk=pk(ref))
    runs_before = list(StepRun.objects.filter(execution=old).values_list("step", "outcome"))

    # Refused, writing nothing: not an operator, no reason, an unknown step, a step past the failure.
    body = {"from_step": "publish", "reason": "the report service is back"}
    assert requester.post(f"/executions/{ref}/restart", body).status_code == 403
    for bad, says in [
        ({"from_step": "publishing", "reason": "x"}, "no step 'publishing'"),
        ({"from_step": "notify", "reason": "x"}, "failed at publish"),
        ({"from_step": "", "reason": "x"}, "at least 1 character"),
    ]:
        answer = operator.post(f"/executions/{ref}/restart", bad)
        assert answer.status_code == 422, answer.text
        [error] = answer.json()["detail"]
        assert error["loc"] == ["body", "from_step"] and says in error["msg"], error
    no_reason = operator.post(f"/executions/{ref}/restart", {"from_step": "publish"})
    assert no_reason.status_code == 422 and no_reason.json()["detail"][0]["loc"] == ["body", "reason"]
    assert Execution.objects.count() == 1

    answer = operator.post(f"/executions/{ref}/restart", body)
    assert answer.status_code == 201, answer.text
    restarted = answer.json()
    new_ref = restarted["id"]
    assert new_ref != ref and restarted["restarted_from"] == ref and restarted["workflow_version"] == 1
    assert restarted["created_by"] == "requester" and restarted["input"] == failed["input"]
    assert operator.execution(ref)["restarted_as"] == new_ref

    done = wait_status(operator, new_ref, "completed")
    new = Execution.objects.get(pk=pk(new_ref))
    # The steps before publish never ran in the new execution; their outputs were reused.
    assert list(StepRun.objects.filter(execution=new).values_list("step", "outcome")) == [
        ("publish", "succeeded"),
        ("notify", "succeeded"),
    ]
    for name in EARLIER:
        assert new.outputs()[name] == old.outputs()[name], name
    assert new.context["notes"]["completed_steps"] == [*EARLIER, "publish", "notify"]
    assert {f["id"] for f in new.context["notes"]["facts"]} == {f["id"] for f in old.context["notes"]["facts"]}
    # Its own copy of the report, over the same bytes, published once under its own key.
    [copy] = done["artifacts"]
    [original] = failed["artifacts"]
    assert copy["artifact_id"] != original["artifact_id"] and copy["sha256"] == original["sha256"]
    assert copy["version"] == original["version"] == 1
    keys = stack.sandbox_stats()["keys"]
    assert keys[f"{new_ref}:publish:v1"] == {"calls": 1, "effects": 1}
    assert keys[f"{ref}:publish:v1"]["effects"] == 0
    # The failed execution is untouched, and says what became of it.
    old.refresh_from_db()
    assert old.status == Status.FAILED
    assert list(StepRun.objects.filter(execution=old).values_list("step", "outcome")) == runs_before
    [event] = ExecutionEvent.objects.filter(execution=old, type="execution.restarted")
    assert event.actor.get_username() == "operator" and event.payload == {
        "restarted_as": new_ref,
        "from_step": "publish",
        "reason": "the report service is back",
    }
    created = ExecutionEvent.objects.get(execution=new, type="execution.created")
    assert created.payload["restarted_from"] == ref and created.payload["reused_steps"] == EARLIER

    # Once only, and only from failed.
    again = operator.post(f"/executions/{ref}/restart", body)
    assert again.status_code == 409 and new_ref in again.json()["detail"]
    completed = operator.post(f"/executions/{new_ref}/restart", body)
    assert completed.status_code == 409 and "only a failed execution" in completed.json()["detail"]
    assert Execution.objects.count() == 2

    # Both pages show the link.
    client = Client()
    client.force_login(people["operator"].user)
    old_page = client.get(f"/executions/{ref}/").content.decode()
    new_page = client.get(f"/executions/{new_ref}/").content.decode()
    assert f'Restarted as <a href="/executions/{new_ref}/">{new_ref}</a>' in old_page
    assert 'id="restart-form"' not in old_page  # restarted already
    assert f'A restart of <a href="/executions/{ref}/">{ref}</a>' in new_page
    assert f"Started: a restart of {ref}" in new_page


# --- without processes: what a restart from an earlier step carries over


@pytest.fixture
def failed_at_publish(people, transactional_db) -> Execution:
    """A report that failed at publish, with a recorded report V1 drafted by draft_report."""
    execution = Execution.objects.create(
        workflow="monthly_report",
        workflow_version=1,
        input={"month": "2026-08"},
        input_digest="d",
        created_by=people["requester"].user,
        current_step="publish",
        context={},
    )
    blob = store.put(b"# Report\n")
    artifact = Artifact.objects.create(kind="report", title="Report", execution=execution)
    version = ArtifactVersion.objects.create(
        artifact=artifact,
        number=1,
        sha256=blob.sha256,
        size=blob.size,
        content_type="text/markdown",
        storage_path=blob.path,
        produced_by_step="draft_report",
    )
    execution.context = {
        "carried": {name: {"done": name} for name in EARLIER},
        "artifacts": {"report": version.as_ref()},
        "notes": {
            "goal": "g",
            "constraints": ["use only the snapshot", "shorter, please"],
            "facts": [
                {"id": "F1", "statement": "s", "source": "x", "step": "analyze"},
                {"id": "D1", "statement": "s", "source": "x", "step": "draft_report"},
            ],
            "completed_steps": EARLIER,
            "open_questions": [],
            "next_action": "Publishing",
        },
    }
    execution.save()
    with transaction.atomic():
        lifecycle.apply(execution, "start")
        lifecycle.apply(execution, "fail", reason="retries exhausted")
    return execution


def test_a_restart_from_the_draft_keeps_only_what_the_steps_before_it_recorded(people, failed_at_publish):
    new = execution_restart(
        ref=failed_at_publish.ref, user=people["operator"].user, from_step="draft_report", reason="redo the draft"
    )
    assert new.current_step == "draft_report" and new.status == Status.PENDING and new.round == 1
    assert new.context["carried"] == {"retrieve_figures": {"done": "retrieve_figures"}, "analyze": {"done": "analyze"}}
    assert new.outputs() == new.context["carried"]  # nothing of its own ran yet
    assert new.context["artifacts"] == {}  # the draft's report is drafted again
    notes = new.context["notes"]
    assert notes["completed_steps"] == ["retrieve_figures", "analyze"]
    assert [f["id"] for f in notes["facts"]] == ["F1"]  # the draft's facts go with it
    assert notes["constraints"] == ["use only the snapshot", "shorter, please"]
    assert notes["next_action"] == "Drafting the report"
    assert not StepRun.objects.filter(execution=new).exists()


def test_a_restart_from_publish_copies_the_report_it_reuses(people, failed_at_publish):
    new = execution_restart(ref=failed_at_publish.ref, user=people["operator"].user, from_step="publish", reason="x")
    ref = new.context["artifacts"]["report"]
    copy = ArtifactVersion.objects.select_related("artifact").get(pk=ref["version_pk"])
    assert copy.artifact.execution_id == new.pk and copy.number == 1 and ref["version"] == 1
    original = failed_at_publish.context["artifacts"]["report"]
    assert copy.sha256 == original["sha256"] and copy.pk != original["version_pk"]
    assert [f["id"] for f in new.context["notes"]["facts"]] == ["F1", "D1"]


def test_a_restart_refused_for_bad_input_writes_nothing(people, failed_at_publish):
    for from_step, reason, field in [
        ("nope", "x", "from_step"),
        ("notify", "x", "from_step"),
        ("publish", " ", "reason"),
    ]:
        with pytest.raises(InvalidInput) as refused:
            execution_restart(
                ref=failed_at_publish.ref, user=people["operator"].user, from_step=from_step, reason=reason
            )
        assert refused.value.field == field
    assert Execution.objects.count() == 1 and Artifact.objects.count() == 1


@pytest.mark.django_db
def test_one_restart_per_failed_execution_is_kept_by_the_database(people):
    """The partial unique index (migration 0033) holds what the service checks first: a
    second restart of the same execution is refused even past the check; executions
    that restart nothing (NULL) are not limited."""
    from django.db import IntegrityError

    user = people["requester"].user

    def new(**fields) -> Execution:
        return Execution.objects.create(
            workflow="monthly_report", workflow_version=1, input_digest="d", created_by=user, **fields
        )

    failed = new(status=Status.FAILED)
    first = new(restarted_from=failed)
    new(), new()  # no restart: no entry, no limit
    with pytest.raises(IntegrityError), transaction.atomic():
        new(restarted_from=failed)
    assert failed.restart == first
    assert first.restart is None
