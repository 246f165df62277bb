"""The authoring surface (docs/design.md §4): a workflow module that imports only
``executions.authoring`` — and ``approvals.gate`` for an approval — registers and runs
end to end on real processes; the surface itself pulls in neither the API (ninja) nor
the engine nor the agent runtime, nor the author's test kit."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import executions.authoring
from executions.models import ModelCall, StepRun
from tests.support.stack import own_actions, pk, wait_status

FLOW = "tests.support.authored_flow"
ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = {"accounts", "approvals", "artifacts", "config", "console", "executions", "metrics", "sandbox", "triage"}
FIRST_PARTY |= {"workflows", "tests", "bench", "scripts"}

# docs/design.md §4's names, each part of the surface.
PROMISED = {"Workflow", "WorkflowInput", "register", "Effect", "ReceiptField", "RetryPolicy", "StepFailure", "Tool"}
PROMISED |= {"Budget", "Child"}


def project_imports(module: str) -> dict[str, set[str]]:
    """The project's modules ``module`` imports, each with the names it takes from them."""
    tree = ast.parse((ROOT / (module.replace(".", "/") + ".py")).read_text())
    found: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in FIRST_PARTY:
            found.setdefault(node.module, set()).update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FIRST_PARTY:
                    found.setdefault(alias.name, set())
    return found


def test_the_surface_is_one_module_with_all_it_promises():
    surface = set(executions.authoring.__all__)
    assert surface >= PROMISED
    assert all(hasattr(executions.authoring, name) for name in surface)
    imported = project_imports(FLOW)
    assert set(imported) == {"executions.authoring", "approvals.gate"}
    assert imported["executions.authoring"] <= surface
    assert imported["approvals.gate"] == {"Approval"}


def test_importing_the_surface_loads_neither_the_api_nor_the_engine_nor_the_agent_runtime():
    """Nor the author's test kit (``executions.authoring.testing``): only tests import it."""
    probe = (
        "import json, sys; import executions.authoring; "
        "print(json.dumps(sorted(m for m in sys.modules if m == 'ninja' or m == 'celery' "
        "or m.startswith(('executions.engine', 'executions.agent', 'executions.api', 'executions.inputs', "
        "'executions.authoring.testing')))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == []


def test_a_workflow_written_with_the_authoring_surface_alone_runs_end_to_end(stack, people, api_as):
    env = {"RUNTIME_WORKFLOW_MODULES": FLOW}
    stack.up(**env)
    requester, manager = api_as(people["requester"]), api_as(people["manager"])

    refused = requester.post("/executions", {"workflow": "greeting_card", "input": {"name": "Ana", "email": "ana"}})
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "input", "email"]

    started = requester.post(
        "/executions", {"workflow": "greeting_card", "input": {"name": "Ana", "email": "ana@example.com"}}
    )
    assert started.status_code == 201, started.text
    ref = started.json()["id"]
    assert started.json()["workflow_version"] == 1

    waiting = wait_status(requester, ref, "awaiting_approval")
    approval = waiting["pending_approval"]
    assert approval["action"] == "send_card" and approval["artifact_version"] == 1
    assert own_actions(waiting) == [{"key": f"{ref}:send:v1", "type": "send_card", "status": "planned", "attempts": 0}]
    assert manager.decide(ref, approval).status_code == 202

    parked = wait_status(requester, ref, "waiting")
    assert parked["pending_gate"]["kind"] == "wait" and parked["pending_gate"]["step"] == "delivered"
    assert requester.signal(ref, "card_delivered", {"at": "2026-12-01T10:00:00Z"}).status_code == 202

    done = wait_status(requester, ref, "completed")
    assert own_actions(done) == [{"key": f"{ref}:send:v1", "type": "send_card", "status": "succeeded", "attempts": 1}]
    assert stack.sandbox_stats()["keys"][f"{ref}:send:v1"] == {"calls": 1, "effects": 1}
    runs = StepRun.objects.filter(execution_id=pk(ref), outcome=StepRun.Outcome.SUCCEEDED)
    assert list(runs.values_list("step", flat=True)) == ["compose", "polish", "review", "send", "delivered", "close"]
    assert runs.get(step="close").output["delivered_at"] == "2026-12-01T10:00:00Z"
    [call] = ModelCall.objects.filter(execution_id=pk(ref))
    assert (call.step, call.prompt_id, call.prompt_version) == ("polish", "card", "card-v1")
