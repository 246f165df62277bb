"""Control flow people write (docs/design.md §4 and §6, fourth round; issue 40): branches, a
durable sleep (S52), a timeout and a reject that continue at a declared step (S53), an
effect that decides not to act, a chosen version — on workflows keel doesn't ship
(tests/support/control_flows.py), on real processes."""

from __future__ import annotations

import io
import time

import pytest
from django.core.management import call_command
from django.test import Client

from approvals.models import ApprovalRequest
from executions.models import Action, ExecutionEvent, StepRun, Wait
from tests.support.agents import model_env
from tests.support.control_env import ENV
from tests.support.procs import wait_for
from tests.support.screens import page
from tests.support.stack import pk, start, wait_status


def output(ref: str, step: str) -> dict:
    return StepRun.objects.get(execution_id=pk(ref), step=step, outcome="succeeded").output


def ran(ref: str) -> list[str]:
    return list(
        StepRun.objects.filter(execution_id=pk(ref), outcome="succeeded").order_by("id").values_list("step", flat=True)
    )


def test_s53_a_reject_continues_at_on_reject_and_completes_with_nothing_paid(stack, people, api_as):
    """S53: the manager rejects the claim: the execution goes on at ``record_rejection``
    (the decision readable there), completes, and the effect the decision guarded never
    goes out; an approved claim is paid once."""
    stack.up(**ENV)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    rejected, approved = start(requester, "expense", amount=40), start(requester, "expense", amount=12)

    pending = wait_status(requester, rejected, "awaiting_approval")["pending_approval"]
    # What the pages offering Reject say it does: goes on, not "it cancels" (found walking a
    # ported workflow whose reject redrafts).
    for path in (f"/approvals/{pending['id']}/", f"/executions/{rejected}/"):
        html = page(stack, people["manager"], path)  # where the workflow is registered
        assert "goes on at “Recording the rejection”" in html and "it cancels" not in html, path
    assert manager.decide(rejected, pending, "reject", comment="not a business trip").status_code == 202
    wait_status(requester, rejected, "completed")
    assert ran(rejected) == ["draft", "decision", "record_rejection"]
    assert output(rejected, "decision")["decision"] == "reject"
    assert output(rejected, "record_rejection") == {"rejected_by": "manager", "comment": "not a business trip"}
    [voided] = Action.objects.filter(execution_id=pk(rejected), beside=False)  # not the e-mails and webhooks
    assert (voided.key, voided.status, voided.attempts) == (f"{rejected}:pay", "failed", 0)

    pending = wait_status(requester, approved, "awaiting_approval")["pending_approval"]
    assert manager.decide(approved, pending).status_code == 202
    wait_status(requester, approved, "completed")
    assert ran(approved) == ["draft", "decision", "pay"]
    keys = stack.sandbox_stats()["keys"]
    assert keys[f"{approved}:pay"]["effects"] == 1 and f"{rejected}:pay" not in keys


def test_a_completed_execution_has_its_result_in_the_api_the_cli_the_page_the_webhook_and_its_state(
    stack, people, api_as
):
    """``Workflow(result=fn)``: null until completed, then what it produced — in the API,
    ``keel show``, the page and the ``execution.completed`` webhook; without ``result``
    the last step's output. ``GET …/state``: each step's latest output and the notes."""
    stack.up(**ENV)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref, plain = start(requester, "expense", amount=40), start(requester, "sorter", n=12)

    pending = wait_status(requester, ref, "awaiting_approval")
    assert pending["result"] is None
    assert manager.decide(ref, pending["pending_approval"], "reject", comment="no receipt").status_code == 202
    done = wait_status(requester, ref, "completed")
    assert done["result"] == {"paid": False, "rejected_by": "manager"}
    assert wait_status(requester, plain, "completed")["result"] == output(plain, "notify")

    state = requester.get(f"/executions/{ref}/state")
    assert state.status_code == 200, state.text
    assert state.json()["steps"]["record_rejection"] == {"rejected_by": "manager", "comment": "no receipt"}
    assert state.json()["steps"]["decision"]["decision"] == "reject"
    assert state.json()["notes"]["completed_steps"] == ["draft", "decision", "record_rejection"]
    assert requester.get("/executions/RUN_99999/state").status_code == 404

    shown = call_command_output("show", ref)
    assert 'result: {"paid": false, "rejected_by": "manager"}' in shown
    requester_page = Client()
    requester_page.force_login(people["requester"].user)
    assert "&quot;rejected_by&quot;: &quot;manager&quot;" in requester_page.get(f"/executions/{ref}/").content.decode()

    hook = wait_for(
        lambda: Action.objects.filter(
            execution_id=pk(ref), type="webhook", key__contains=":webhook:execution.completed:"
        ).first(),
        what="the execution.completed webhook",
    )
    assert hook.args["body"]["execution"]["result"] == {"paid": False, "rejected_by": "manager"}


def call_command_output(*args: str) -> str:
    out = io.StringIO()
    call_command("keel", *args, stdout=out)
    return out.getvalue()


def test_s53_a_wait_that_times_out_continues_at_on_timeout(stack, people, api_as):
    """S53: no signal within the wait's timeout: it continues at ``gave_up`` with
    ``timed_out: true``, nobody asked; a signal in time goes on to ``went`` (``timed_out:
    false``). While it waits for what goes on by itself, it shows its ``due_at``."""
    stack.up(**ENV)
    requester = api_as(people["requester"])
    late, prompt = start(requester, "patient", wait_seconds=1.5), start(requester, "patient", wait_seconds=600)

    waiting = wait_status(requester, prompt, "waiting")
    assert waiting["due_at"] is not None and waiting["stuck"] is None
    assert requester.signal(prompt, "go").status_code == 202
    wait_status(requester, prompt, "completed")
    assert ran(prompt) == ["hold", "went"] and output(prompt, "went") == {"went": True, "timed_out": False}

    wait_status(requester, late, "completed")
    assert ran(late) == ["hold", "gave_up"] and output(late, "gave_up") == {"went": False, "timed_out": True}
    assert output(late, "hold")["timed_out"] is True
    assert Wait.objects.get(execution_id=pk(late)).status == "timed_out"
    flagged = ExecutionEvent.objects.filter(execution_id=pk(late), to_status="needs_attention")
    assert not flagged.exists(), "a timeout with on_timeout is a business outcome, not a person's problem"


@pytest.mark.own_stack
def test_s52_a_sleep_across_a_dead_worker_wakes_on_time_once_a_worker_runs(stack, people, api_as):
    """S52: SIGKILL the only worker while an execution sleeps: no worker is held meanwhile
    (``due_at`` shown, no lease, not stuck); once a worker runs again it wakes, sleeps no
    second time, and completes."""
    doomed = stack.up(workers=("doomed",), **ENV).worker
    requester = api_as(people["requester"])
    ref = start(requester, "napper", seconds=3)
    sleeping = wait_status(requester, ref, "waiting")
    assert sleeping["due_at"] is not None and sleeping["lease"] is None and sleeping["stuck"] is None
    doomed.kill()
    wait_for(lambda: not doomed.alive(), what="the worker to die")

    time.sleep(3.5)  # past its due time, with no worker alive: nothing can move it
    stack.worker("after", **ENV)
    done = wait_status(requester, ref, "completed")
    assert ran(ref) == ["nap", "wake"] and output(ref, "wake") == {"slept": {"timer": True}}
    [nap] = Wait.objects.filter(execution_id=pk(ref))
    assert nap.status == "received" and nap.closed_at >= nap.due_at
    assert done["status"] == "completed"


def test_a_branch_chooses_and_an_effect_may_act_on_nothing(stack, people, api_as):
    """A branch's choice is its recorded output and leads there; END completes; an
    undeclared answer needs attention naming it and the declared ones. An effect that
    returns None completes its step ``skipped`` with no ledger action; an even n acts once."""
    stack.up(**ENV)
    requester = api_as(people["requester"])
    odd, even, zero, wrong = (start(requester, "sorter", n=n) for n in (3, 12, 0, -1))

    wait_status(requester, odd, "completed")
    assert ran(odd) == ["size", "small", "notify"]
    assert output(odd, "size") == {"next": "small"} and output(odd, "notify") == {"skipped": True}
    assert not Action.objects.filter(execution_id=pk(odd)).exclude(beside=True).exists()

    wait_status(requester, even, "completed")
    assert ran(even) == ["size", "big", "notify"]
    [sent] = Action.objects.filter(execution_id=pk(even), beside=False)
    assert (sent.key, sent.status) == (f"{even}:notify", "succeeded")
    assert stack.sandbox_stats()["keys"][sent.key]["effects"] == 1

    wait_status(requester, zero, "completed")
    assert ran(zero) == ["size"] and output(zero, "size") == {"next": ""}

    stuck = wait_status(requester, wrong, "needs_attention")
    assert stuck["stuck"]["reason"] == "step_error"
    assert "'negative'" in stuck["status_reason"] and "small, big" in stuck["status_reason"]


def test_a_chosen_registered_version_starts_and_anything_else_is_refused_naming_version(stack, people, api_as):
    """``version`` on start: a registered one starts it (not the latest); an unknown one or
    not an integer → 422 naming ``version``, nothing started."""
    stack.up(**ENV)
    requester = api_as(people["requester"])
    body = {"workflow": "replacement_order", "input": {"original_order": "ORD-1001"}}
    started = requester.post("/executions", {**body, "version": 1})
    assert started.status_code == 201, started.text
    assert started.json()["workflow_version"] == 1
    assert requester.post("/executions", body).json()["workflow_version"] == 2
    catalogue = requester.get("/workflows/replacement_order").json()
    assert [v["version"] for v in catalogue["by_version"]] == catalogue["versions"] == [1, 2]
    assert catalogue["by_version"][1]["steps"] == catalogue["steps"]
    first = [s["name"] for s in catalogue["by_version"][0]["steps"]]
    assert first and first != [s["name"] for s in catalogue["steps"]], "each version's own steps"
    for bad in (99, "1", 1.5, True, 0):
        refused = requester.post("/executions", {**body, "version": bad})
        assert refused.status_code == 422, (bad, refused.text)
        assert any("version" in [str(part) for part in e["loc"]] for e in refused.json()["detail"]), refused.text


@pytest.mark.own_stack
def test_s51_a_loop_with_a_model_call_and_an_approval_per_visit_survives_a_kill_in_its_second_visit(
    stack, people, api_as
):
    """S51: draft → review → again, twice round the loop: each visit its own model call
    (asked once at the provider, the worker SIGKILLed right after the second visit's
    draft checkpointed), its own approval (one per visit), then the branch ends the loop
    and the second visit's approved draft is published once."""
    env = {**ENV, **model_env(stack)}
    first = stack.up(workers=("first",), worker_env=model_env(stack), **ENV).worker
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start(requester, "essay", passes=2)

    one = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    first.stop()  # parked: it holds nothing; the next worker dies in the second visit
    doomed = stack.worker("doomed", RUNTIME_FAILPOINTS="after_step:draft=crash", **env)
    assert manager.decide(ref, one).status_code == 202
    wait_for(lambda: not doomed.alive(), what="the worker to die after the second draft")
    stack.worker("survivor", **env)
    two = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    assert two["id"] != one["id"] and two["artifact_version"] == 2
    assert manager.decide(ref, two).status_code == 202
    wait_status(requester, ref, "completed")

    assert ran(ref) == ["draft", "review", "again", "draft", "review", "again", "publish"]
    visits = StepRun.objects.filter(execution_id=pk(ref), step="draft", outcome="succeeded").order_by("id")
    assert [(run.round, run.output["visit"]) for run in visits] == [(1, 1), (2, 2)]
    calls = requester.get(f"/executions/{ref}/model-calls").json()["items"]
    assert [c["key"] for c in calls] == [f"{ref}:draft:r1:c1", f"{ref}:draft:r2:c1"]
    keys = stack.sandbox_stats()["keys"]
    assert all(keys[c["key"]]["calls"] == 1 for c in calls), "each visit's call asked once"
    assert ApprovalRequest.objects.filter(execution_id=pk(ref)).count() == 2
    skipped, published = Action.objects.filter(execution_id=pk(ref), beside=False).order_by("id")
    assert (skipped.key, skipped.status, skipped.attempts) == (f"{ref}:publish:v1", "failed", 0)  # voided by the loop
    assert "went back to draft" in skipped.last_error
    assert (published.key, published.gate_ref) == (f"{ref}:publish:v2", f"approval:{two['id']}")
    assert keys[published.key]["effects"] == 1


def test_s51_past_max_visits_the_loop_needs_attention_and_calls_nothing(stack, people, api_as):
    """S51: a loop that never ends by itself stops after ``max_visits`` (3) visits of its
    model step: needs_attention ``loop_limit`` (action ``escalate``), no fourth call."""
    env = model_env(stack)
    stack.up(worker_env=env, **ENV)
    requester = api_as(people["requester"])
    ref = start(requester, "spinner")
    stuck = wait_status(requester, ref, "needs_attention")["stuck"]
    assert (stuck["reason"], stuck["action"]) == ("loop_limit", "escalate")
    assert "think was visited 3 times" in stuck["detail"]
    calls = requester.get(f"/executions/{ref}/model-calls").json()["items"]
    assert [c["key"] for c in calls] == [f"{ref}:think:r{n}:c1" for n in (1, 2, 3)]
    assert [
        run.output["visit"] for run in StepRun.objects.filter(execution_id=pk(ref), step="think", outcome="succeeded")
    ] == [1, 2, 3]


def test_the_start_form_offers_each_registered_version(stack, people):
    """With two versions registered, the start form's Version select starts the one chosen;
    a version that isn't registered is a message above the form (422), nothing started."""
    from executions.models import Execution

    stack.up(**ENV)
    browser = Client()
    browser.force_login(people["requester"].user)
    url = "/executions/start/replacement_order/"
    html = browser.get(url).content.decode()
    assert 'name="_version"' in html and ">v2 (latest)" in html and ">v1 —" in html
    form = browser.get(url).context["idempotency_key"]
    started = browser.post(url, {"idempotency_key": form, "original_order": "ORD-1001", "_version": "1"})
    assert started.status_code == 303, started.content.decode()[:500]
    ref = started["Location"].rstrip("/").rsplit("/", 1)[-1]
    assert Execution.objects.get(pk=pk(ref)).workflow_version == 1
    before = Execution.objects.count()
    refused = browser.post(url, {"idempotency_key": "k-bad", "original_order": "ORD-1001", "_version": "7"})
    assert refused.status_code == 422 and "no registered version 7" in refused.content.decode()
    assert Execution.objects.count() == before
