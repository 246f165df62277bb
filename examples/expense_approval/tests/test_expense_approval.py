"""The example's own tests (docs/authoring.md, "Testing it"), written as its author would:
with keel's test kit (``executions.authoring.testing``) and pytest-django alone. A
workflow outside keel's packages, registered by KEEL_WORKFLOW_MODULES alone, runs end to
end on real processes, through the API and the CLI. keel's test run collects them through
tests/examples/test_expense_approval.py."""

import json
import subprocess
import sys

import pytest

from examples.expense_approval import workflow
from executions.authoring import InvalidInput
from executions.authoring.testing import Keel

MODULE = "examples.expense_approval.workflow"
CLAIM = {"employee": "ana", "email": "ana@example.com", "amount_usd": 120, "category": "travel", "receipts": ["R-1"]}


@pytest.fixture
def keel(transactional_db, tmp_path):
    with Keel(modules=MODULE, web=True, sandbox=True, tmp=tmp_path) as keel:
        yield keel


def test_the_claim_is_checked_at_start():
    assert workflow.flow.parse_input(CLAIM)["amount_usd"] == 120
    for bad, field in [({"amount_usd": 9000}, "input.amount_usd"), ({"category": "golf"}, "input.category")]:
        with pytest.raises(InvalidInput) as refused:
            workflow.flow.parse_input({**CLAIM, **bad})
        assert refused.value.field == field
    with pytest.raises(InvalidInput, match="e-mail"):
        workflow.flow.parse_input({**CLAIM, "email": "ana"})


def test_an_approved_claim_is_paid_once_through_the_api_and_the_cli(keel):
    listed = keel.api().get("/workflows/expense_approval").json()
    assert listed["input_schema"]["properties"]["category"]["enum"] == ["travel", "meals", "equipment"]

    done = keel.run("expense_approval", CLAIM)
    assert done["status"] == "completed", done
    key = f"{done['id']}:pay:v1"
    own = [a for a in done["actions"] if a["type"] not in ("notify_approver", "webhook")]  # not the e-mails, webhooks
    assert own == [{"key": key, "type": "pay_expense", "status": "succeeded", "attempts": 1}]
    assert keel.provider_calls(key) == {"calls": 1, "effects": 1}  # paid exactly once

    cli = subprocess.run(
        [sys.executable, "-m", "django", "keel", "start", "expense_approval", "--input", json.dumps(CLAIM)]
        + ["--as", keel.requester.get_username()],
        env=keel.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    ref = cli.stdout.strip().splitlines()[-1]
    assert keel.execution(ref)["workflow"] == "expense_approval"
