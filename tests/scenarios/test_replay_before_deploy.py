"""Replay sees everything that can drift (docs/design.md §4, fourth round; S54): agent and route
steps are replayed against the journal like model steps, and a change of the step graph
before a parked execution's position is drift of kind ``structure``; ``--workflow W
--version N`` answers for the executions that could move. A replay writes nothing and
calls no provider."""

from __future__ import annotations

import json
import subprocess

from django.apps import apps

from tests.support.procs import run_manage
from tests.support.stack import untold, wait_status

COUNTED = [
    "executions.Execution",
    "executions.ExecutionEvent",
    "executions.StepRun",
    "executions.ModelCall",
    "executions.Action",
    "approvals.ApprovalRequest",
    "artifacts.ArtifactVersion",
]
AGENTS = "workflows.monthly_report,workflows.support_agent"
EDITED_AGENT = f"{AGENTS},tests.support.support_agent_edited"
EDITED_REPORT = "workflows.monthly_report,tests.support.replay_edits"


def counts() -> dict[str, int]:
    return {label: untold(apps.get_model(label).objects.all()).count() for label in COUNTED}


def replay(stack, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    done = run_manage("keel", "replay", "--json", *args, env={**stack.env, **env})
    return done, json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}


def test_s54_an_agents_prompt_edited_under_a_waiting_execution_is_model_call_drift(stack, people, api_as):
    """S54: the support agent parked at its tool call's approval (a route call, then four
    agent calls): unchanged code replays it ok, every step included; with its prompt
    template edited, ``keel replay`` names the agent's first call, exit 1, writing nothing."""
    stack.up(RUNTIME_WORKFLOW_MODULES=AGENTS)
    requester = api_as(people["requester"])
    ref = requester.post("/executions", {"workflow": "support_agent", "input": {"ticket": "TCK-1001"}}).json()["id"]
    wait_status(requester, ref, "awaiting_approval")
    before, stats = counts(), stack.sandbox_stats()

    same, answer = replay(stack, RUNTIME_WORKFLOW_MODULES=AGENTS)
    assert same.returncode == 0, (same.stdout, same.stderr)
    assert answer["items"] == [
        {"id": ref, "workflow": "support_agent", "workflow_version": 2, "verdict": "ok", "findings": []}
    ]

    edited, answer = replay(stack, RUNTIME_WORKFLOW_MODULES=EDITED_AGENT)
    assert edited.returncode == 1, (edited.stdout, edited.stderr)
    [finding] = answer["items"][0]["findings"]
    assert (finding["kind"], finding["step"], finding["key"]) == ("model_call", "resolve", f"{ref}:resolve:r1:c1")
    assert "message 1 (user)" in finding["detail"]  # the instruction the edit changed
    assert counts() == before and stack.sandbox_stats() == stats  # nothing written, nothing called


def test_s54_a_step_inserted_or_removed_before_a_parked_one_is_structure_drift(stack, people, api_as):
    """S54: a report parked at its review; the code now has a step inserted before the parked
    position (the execution never ran it) or one it ran removed: ``structure``, exit 1."""
    stack.up()
    requester = api_as(people["requester"])
    ref = requester.post("/executions", {"workflow": "monthly_report", "input": {"month": "2026-08"}}).json()["id"]
    wait_status(requester, ref, "awaiting_approval")
    before = counts()

    for edit, step, words in [
        ("insert", "check_tone", ("check_tone now comes before review", "never ran it")),
        ("remove", "analyze", (f"{ref} ran analyze", "no longer has")),
    ]:
        done, answer = replay(stack, RUNTIME_WORKFLOW_MODULES=EDITED_REPORT, REPLAY_EDIT=edit)
        assert done.returncode == 1, (edit, done.stdout, done.stderr)
        [finding] = answer["items"][0]["findings"]
        assert (finding["kind"], finding["step"]) == ("structure", step), finding
        assert all(word in finding["detail"] for word in words), finding
    assert counts() == before


def test_replay_against_a_newer_version_answers_for_each_execution(stack, people, api_as):
    """``--workflow W --version N``: a v1 execution not yet started could move to v2 (ok, exit
    0); one parked at its review would skip v2's inserted step (structure, exit 1)."""
    stack.up(workers=())  # nothing runs: the first execution stays where it was started
    requester = api_as(people["requester"])
    queued = requester.post("/executions", {"workflow": "monthly_report", "input": {"month": "2026-07"}}).json()["id"]
    versions = "workflows.monthly_report,tests.support.monthly_report_v2"

    ok, answer = replay(stack, "--workflow", "monthly_report", "--version", "2", RUNTIME_WORKFLOW_MODULES=versions)
    assert ok.returncode == 0, (ok.stdout, ok.stderr)
    assert answer == {
        "checked": 1,
        "drifted": 0,
        "items": [{"id": queued, "workflow": "monthly_report", "workflow_version": 1, "verdict": "ok", "findings": []}],
    }

    stack.up()  # a worker (a new stack: the web too): the second one runs to its review
    requester = api_as(people["requester"])
    parked = requester.post("/executions", {"workflow": "monthly_report", "input": {"month": "2026-08"}}).json()["id"]
    wait_status(requester, parked, "awaiting_approval")
    wait_status(requester, queued, "awaiting_approval")
    drifted, answer = replay(stack, "--workflow", "monthly_report", "--version", "2", RUNTIME_WORKFLOW_MODULES=versions)
    assert drifted.returncode == 1 and answer["drifted"] == 2, drifted.stdout
    for item in answer["items"]:
        [finding] = item["findings"]
        assert (finding["kind"], finding["step"]) == ("structure", "board_summary"), finding
