"""A loop's record speaks visits (S51, docs/design.md §4 "Control flow people write"; issue 40):
the resume preview, the page's timeline and steps, restart from a step and ``keel replay``
each number a step's passes the same way, on real processes, with a workflow keel
doesn't ship (``spinner``: a model call in a loop that only ``max_visits`` ends)."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from executions.engine import lifecycle
from executions.models import Execution, Status, StepRun
from tests.support.agents import model_env
from tests.support.control_env import ENV
from tests.support.procs import run_manage, wait_for
from tests.support.screens import page, signed_in
from tests.support.stack import pk, start, wait_status

LOOP_EDITS = ENV["RUNTIME_WORKFLOW_MODULES"] + ",tests.support.loop_edits"


def replay(stack, ref: str, edit: str) -> dict:
    done = run_manage(
        "keel",
        "replay",
        "--id",
        ref,
        "--json",
        env={**stack.env, "RUNTIME_WORKFLOW_MODULES": LOOP_EDITS, "REPLAY_EDIT": edit},
    )
    assert done.returncode in (0, 1), done.stderr
    [item] = json.loads(done.stdout)["items"]
    return item


def test_s51_a_loop_speaks_visits_in_the_resume_preview_the_page_and_replay(stack, people, api_as):
    """``spinner`` stops at its loop limit after three visits of ``think`` and ``more``.
    The preview lists every visit it made (skipped, numbered) and the fourth it can't make
    (blocked: a resume would stop there again, and is refused); the timeline and the
    steps table number the visits; replay rebuilds each visit as it stood (its own
    round's call, its own ``ctx.visit``) and names the one visit an edit changes."""
    stack.up(worker_env=model_env(stack), **ENV)
    requester, operator = api_as(people["requester"]), api_as(people["operator"])
    ref = start(requester, "spinner")
    wait_status(requester, ref, "needs_attention")

    preview = operator.get(f"/executions/{ref}/resume-preview").json()
    assert [(s["step"], s["visit"], s["plan"]) for s in preview["steps"]] == [
        *[(step, n, "skip") for n in (1, 2, 3) for step in ("think", "more")],
        ("think", 4, "blocked"),
        ("more", 4, "blocked"),
    ]
    assert "visit 2, checkpointed in round 2" in preview["steps"][2]["why"]
    [blocked] = preview["blocked_by"]
    assert not preview["can_resume"] and "think was visited 3 times" in blocked and "max_visits" in blocked
    refused = operator.post(f"/executions/{ref}/resume", {"reason": "try once more"})
    assert refused.status_code == 409 and "max_visits" in refused.json()["detail"]

    html = page(stack, people["operator"], f"/executions/{ref}/")
    completed = re.findall(r'class="ev-title">Step completed: [^<]* \(visit (\d)\)</span>', html)
    assert completed == ["3", "3", "2", "2", "1", "1"], completed  # newest first: think and more, each visit
    assert '<th scope="col">Visit</th>' in html
    planned = page(stack, people["operator"], f"/executions/{ref}/resume/preview/")
    assert 'data-step="think" data-visit="3"' in planned and "· visit 4" in planned

    history = [json.loads(line) for line in operator.get(f"/executions/{ref}/history.jsonl").text.splitlines()]
    attempts = [(h["step"], h["payload"]["visit"]) for h in history if h["type"] == "step.completed"]
    assert attempts == [(step, n) for n in (1, 2, 3) for step in ("think", "more")]
    times = [h["time"] for h in history]
    assert times == sorted(times) and history[0]["type"] == "execution.created"
    assert all(t.endswith("+00:00") for t in times), times[:3]  # as the events' own: ISO 8601, microseconds

    same = replay(stack, ref, "")
    assert same["verdict"] == "ok", same
    prompt = replay(stack, ref, "visit2_prompt")
    [finding] = prompt["findings"]
    assert (finding["kind"], finding["key"]) == ("model_call", f"{ref}:think:r2:c1"), finding
    choice = replay(stack, ref, "visit3_choice")
    [finding] = choice["findings"]
    assert finding["kind"] == "structure" and "more (visit 3) now chooses 'stop'" in finding["detail"], finding


def failed_spinner(people) -> Execution:
    """A ``spinner`` that failed in its third visit of ``think``, two visits of each step recorded."""
    now = timezone.now()
    execution = Execution.objects.create(
        workflow="spinner",
        workflow_version=1,
        input={"topic": "loops", "passes": 2},
        input_digest="d",
        created_by=people["requester"].user,
        current_step="think",
        round=3,
        context={
            "artifacts": {},
            "notes": {
                "goal": "Thinks forever",
                "constraints": [],
                "facts": [],
                "completed_steps": ["think", "more", "think", "more"],
                "open_questions": [],
                "next_action": "Thinking",
            },
        },
    )
    recorded = [
        ("think", {"visit": 1, "thought": "a"}),
        ("more", {"next": "think"}),
        ("think", {"visit": 2, "thought": "b"}),
        ("more", {"next": "think"}),
    ]
    for n, (step, output) in enumerate(recorded):
        StepRun.objects.create(
            execution=execution,
            step=step,
            kind="model" if step == "think" else "branch",
            round=n // 2 + 1,
            outcome=StepRun.Outcome.SUCCEEDED,
            output=output,
            lease_token=1,
            workflow_version=1,
            started_at=now - timedelta(seconds=10 - n),
        )
    with transaction.atomic():
        lifecycle.apply(execution, "start")
        lifecycle.apply(execution, "fail", reason="retries exhausted")
    return execution


def test_a_loop_is_restarted_from_the_visit_an_operator_chooses(stack, people, api_as):
    """A failed loop offers each visit it made as a place to restart from (the latest the
    default); restarted from ``think``'s second visit (the page's form), the new execution
    keeps the first visits, its ``ctx.visit`` goes on at 2, and ``max_visits`` counts the
    kept visits too. A visit it never made is a 422 naming ``visit``."""
    failed = failed_spinner(people)
    stack.up(worker_env=model_env(stack), **ENV)
    operator = api_as(people["operator"])
    options = operator.get(f"/executions/{failed.ref}/restart-options").json()["options"]
    assert [(o["step"], o["visit"], o["works"]) for o in options] == [
        ("think", 1, True),
        ("more", 1, True),
        ("think", 2, True),
        ("more", 2, True),
        ("think", 3, True),
    ]
    assert [o["visit"] for o in options if o["default"]] == [3]
    for visit in (4, 0, "2"):
        bad = operator.post(f"/executions/{failed.ref}/restart", {"from_step": "think", "visit": visit, "reason": "x"})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][-1] == "visit", bad.text

    assert '<option value="think@2"' in page(stack, people["operator"], f"/executions/{failed.ref}/")
    browser = signed_in(stack, people["operator"])
    html = browser.get(f"{stack.web_url}/executions/{failed.ref}/", timeout=10).text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    form = {"from_step": "think@2", "reason": "think again", "csrfmiddlewaretoken": token}
    answer = browser.post(f"{stack.web_url}/executions/{failed.ref}/restart/", data=form, allow_redirects=False)
    new = Execution.objects.get(restarted_from=failed)
    assert answer.status_code == 302 and answer.headers["Location"] == f"/executions/{new.ref}/"
    assert new.context["carried_visits"] == [["think", {"visit": 1, "thought": "a"}], ["more", {"next": "think"}]]
    assert new.context["notes"]["completed_steps"] == ["think", "more"]  # the first pass only

    stuck = wait_status(operator, new.ref, "needs_attention")["stuck"]
    assert stuck["reason"] == "loop_limit" and "think was visited 3 times" in stuck["detail"]
    runs = StepRun.objects.filter(execution_id=pk(new.ref), step="think", outcome="succeeded").order_by("id")
    assert [run.output["visit"] for run in runs] == [2, 3]
    preview = operator.get(f"/executions/{new.ref}/resume-preview").json()
    assert [(s["step"], s["visit"]) for s in preview["steps"][:2]] == [("think", 1), ("more", 1)]
    assert f"recorded by {failed.ref}" in preview["steps"][0]["why"]
    assert Execution.objects.get(pk=failed.pk).status == Status.FAILED


def test_a_report_whose_changes_were_requested_replays_each_draft_as_it_stood(stack, people, api_as):
    """Changes requested on V1 send the report back to its analysis in a new round with the
    manager's words as a constraint. ``keel replay`` rebuilds the first analysis without
    that constraint (it came later) and the second with it: no drift, on the record as
    the workers left it."""
    stack.up()
    requester, manager = api_as(people["requester"]), api_as(people["manager"])
    ref = start(requester, "monthly_report", month="2026-08")
    first = wait_status(requester, ref, "awaiting_approval")["pending_approval"]
    asked = manager.decide(ref, first, "request_changes", comment="Shorter, and lead with the regions.")
    assert asked.status_code == 202, asked.text
    second = wait_for(
        lambda: (
            (body := requester.execution(ref))["status"] == "awaiting_approval"
            and body["pending_approval"]["artifact_version"] == 2
            and body["pending_approval"]
        ),
        timeout=60,
        what="V2 to await approval",
    )
    assert second["id"] != first["id"]
    calls = [c["key"] for c in requester.get(f"/executions/{ref}/model-calls").json()["items"]]
    assert calls == [f"{ref}:analyze:r1:c1", f"{ref}:analyze:r2:c1"], calls
    done = run_manage("keel", "replay", "--id", ref, "--json", env=stack.env)
    [item] = json.loads(done.stdout)["items"]
    assert done.returncode == 0 and item["verdict"] == "ok", item
