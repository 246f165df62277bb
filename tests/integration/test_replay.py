"""``keel replay`` (docs/design.md §4 "Replay before deploy"): a live execution replayed against
the code now installed — ok on unchanged code; a changed prompt (model call), a changed
effect key, a changed approval binding and an unregistered pinned version each found,
with a readable detail and exit 1; bad input exit 2. It writes nothing and calls nothing:
the record's row counts and the sandbox's ``/_stats`` are the same after."""

from __future__ import annotations

import json
import subprocess

from django.apps import apps

from tests.support.procs import run_manage
from tests.support.stack import untold, wait_status

EDITED = "workflows.monthly_report,workflows.replacement_order,tests.support.replay_edits"
COUNTED = [
    "executions.Execution",
    "executions.ExecutionEvent",
    "executions.StepRun",
    "executions.ModelCall",
    "executions.Action",
    "approvals.ApprovalRequest",
    "artifacts.ArtifactVersion",
]


def keel(stack, *args: str, **env: str) -> subprocess.CompletedProcess:
    return run_manage("keel", *args, env={**stack.env, **env})


def counts() -> dict[str, int]:
    """The record's rows (the e-mails and webhooks the run sends meanwhile aside: ``untold``)."""
    return {label: untold(apps.get_model(label).objects.all()).count() for label in COUNTED}


def test_replay_finds_each_kind_of_drift_and_writes_nothing(stack, people, api_as):
    stack.up()
    requester = api_as(people["requester"])
    ref = requester.post("/executions", {"workflow": "monthly_report", "input": {"month": "2026-08"}}).json()["id"]
    wait_status(requester, ref, "awaiting_approval")
    before, stats = counts(), stack.sandbox_stats()

    same = keel(stack, "replay", "--json", RUNTIME_WORKFLOW_MODULES=EDITED)
    assert same.returncode == 0, same.stderr
    answer = json.loads(same.stdout)
    assert answer["checked"] == 1 and answer["drifted"] == 0
    assert answer["items"] == [
        {"id": ref, "workflow": "monthly_report", "workflow_version": 1, "verdict": "ok", "findings": []}
    ]

    for edit, kind, step, words in [
        ("prompt", "model_call", "analyze", ["message 1", "LONG summary"]),
        ("effect", "effect", "publish", [f"{ref}:publish:v1:again", f"{ref}:publish:v1"]),
        ("approval", "approval", "review", ["publish_report", "publish_everywhere"]),
    ]:
        done = keel(stack, "replay", "--id", ref, "--json", RUNTIME_WORKFLOW_MODULES=EDITED, REPLAY_EDIT=edit)
        assert done.returncode == 1, (edit, done.stdout, done.stderr)
        [item] = json.loads(done.stdout)["items"]
        [finding] = item["findings"]
        assert item["verdict"] == "drift" and (finding["kind"], finding["step"]) == (kind, step), finding
        assert all(word in finding["detail"] for word in words), finding

    gone = keel(stack, "replay", "--workflow", "monthly_report", RUNTIME_WORKFLOW_MODULES="workflows.replacement_order")
    assert gone.returncode == 2 and "unknown workflow" in gone.stderr  # it is not registered at all now
    unregistered = keel(stack, "replay", "--json", RUNTIME_WORKFLOW_MODULES="workflows.replacement_order")
    assert unregistered.returncode == 1, unregistered.stderr
    [item] = json.loads(unregistered.stdout)["items"]
    assert item["verdict"] == "unregistered_version" and item["findings"][0]["kind"] == "version"
    assert "monthly_report v1 is not registered" in item["findings"][0]["detail"]

    people_readable = keel(stack, "replay", RUNTIME_WORKFLOW_MODULES=EDITED, REPLAY_EDIT="prompt")
    assert people_readable.returncode == 1 and "model_call at analyze" in people_readable.stdout
    for args in (["--id", "RUN_9999"], ["--version", "2"], ["--workflow", "monthly_report", "--version", "7"]):
        bad = keel(stack, "replay", *args)
        assert bad.returncode == 2 and bad.stderr.strip() and "Traceback" not in bad.stderr, (args, bad.stderr)

    assert counts() == before  # nothing written
    assert stack.sandbox_stats() == stats  # nothing called
