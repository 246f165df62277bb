"""A framework's agent keeps keel's guarantees on real processes (issue 42): the model
proposing an approved pydantic-ai call again is told the recorded result and the
provider sees one effect; ``keel replay`` catches a pydantic-ai agent whose instructions
changed under a waiting execution, writing nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from executions.authoring.testing import Keel
from executions.models import Action, ModelCall, execution_for

SUPPORT = "examples.pydantic_support.workflow"


@pytest.fixture
def keel(transactional_db, tmp_path):
    with Keel(modules=f"{SUPPORT},tests.support.pydantic_repeating", sandbox=True, tmp=tmp_path) as keel:
        yield keel


def test_the_model_repeating_an_approved_pydantic_call_is_told_the_receipt_and_pays_once(keel):
    ref = keel.start("pydantic_repeating_payer", {"customer": "CUST-7", "amount": 40})
    keel.wait(ref, "awaiting_approval")
    keel.decide(ref, "approve")
    done = keel.wait(ref, "completed")
    [action] = Action.objects.filter(execution=execution_for(ref), beside=False)
    assert action.status == "succeeded"
    assert keel.provider_calls(action.key) == {"calls": 1, "effects": 1}
    receipt = action.receipt["notification_id"]
    assert action.args["on"] == "2026-12-24"  # the JSON keel decided on and approved
    # the call and its three repeats: each done, each told the one receipt
    assert done["result"] == {"answer": f"paid under {receipt}", "paid": [["done", receipt]] * 4}


def replay(keel, modules: str) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "django", "keel", "replay", "--json"],
        env={**keel.env, "KEEL_WORKFLOW_MODULES": modules},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}


def test_replay_catches_a_changed_instruction_of_a_pydantic_agent(keel):
    ref = keel.start("pydantic_support", {"message": "Please refund ORD-1004"})
    keel.wait(ref, "awaiting_approval")
    recorded = ModelCall.objects.filter(execution=execution_for(ref)).count()

    same, answer = replay(keel, SUPPORT)
    assert same.returncode == 0, (same.stdout, same.stderr)
    assert [(i["id"], i["verdict"]) for i in answer["items"]] == [(ref, "ok")], answer

    edited, answer = replay(keel, f"{SUPPORT},tests.support.pydantic_support_edited")
    assert edited.returncode == 1, (edited.stdout, edited.stderr)
    [finding] = answer["items"][0]["findings"]
    assert (finding["kind"], finding["step"], finding["key"]) == ("model_call", "support", f"{ref}:support:r1:c1")
    assert "system" in finding["detail"], finding
    assert ModelCall.objects.filter(execution=execution_for(ref)).count() == recorded  # nothing written
