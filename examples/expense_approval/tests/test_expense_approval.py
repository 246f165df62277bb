"""The example's own tests (docs/authoring.md, "Writing tests for it"). keel's test run
collects them through tests/examples/test_expense_approval.py, under keel's fixtures
(``stack``, ``people``, ``api_as``) and the author's helper (tests/support/authoring.py).
A workflow outside keel's packages, registered by KEEL_WORKFLOW_MODULES alone, runs
end to end through the API and the CLI."""

import json
import subprocess

import pytest

from examples.expense_approval import workflow
from executions.errors import InvalidInput
from tests.support.authoring import Author
from tests.support.procs import BIN, ROOT

MODULE = "examples.expense_approval.workflow"
CLAIM = {"employee": "ana", "email": "ana@example.com", "amount_usd": 120, "category": "travel", "receipts": ["R-1"]}


def test_the_claim_is_checked_at_start():
    assert workflow.flow.parse_input(CLAIM)["amount_usd"] == 120
    for bad, field in [({"amount_usd": 9000}, "input.amount_usd"), ({"category": "golf"}, "input.category")]:
        with pytest.raises(InvalidInput) as refused:
            workflow.flow.parse_input({**CLAIM, **bad})
        assert refused.value.field == field
    with pytest.raises(InvalidInput, match="e-mail"):
        workflow.flow.parse_input({**CLAIM, "email": "ana"})


def test_an_approved_claim_is_paid_once_through_the_api_and_the_cli(stack, people, api_as):
    author = Author(stack, people, api_as, modules=MODULE)
    listed = author.requester.get("/workflows/expense_approval").json()
    assert listed["input_schema"]["properties"]["category"]["enum"] == ["travel", "meals", "equipment"]

    done = author.run("expense_approval", CLAIM)
    assert done["status"] == "completed", done
    key = f"{done['id']}:pay:v1"
    assert done["actions"] == [{"key": key, "type": "pay_expense", "status": "succeeded", "attempts": 1}]
    assert author.provider_calls(key) == {"calls": 1, "effects": 1}  # paid exactly once

    cli = subprocess.run(
        [str(BIN / "python"), "manage.py", "keel", "start", "expense_approval", "--input", json.dumps(CLAIM)]
        + ["--as", "requester"],
        cwd=ROOT,
        env={**stack.env, "KEEL_WORKFLOW_MODULES": MODULE},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    ref = cli.stdout.strip().splitlines()[-1]
    assert author.requester.get(f"/executions/{ref}").json()["workflow"] == "expense_approval"
