"""``expense_approval`` v1: check a claim against the policy, write it up (an artifact), ask
the model for a one-line summary, a manager approves that exact version, then payroll is
told to pay it — an effect through the ledger, keyed by the claim's version, so a crash
or a retry never pays twice.

Written with keel's authoring surface alone (``executions.authoring``, and
``approvals.gate.Approval`` for the approval): docs/authoring.md builds it step by step.
"""

import os
from typing import Literal

from pydantic import Field

from approvals.gate import Approval
from executions.authoring import Effect, InvalidInput, RetryPolicy, Workflow, WorkflowInput, register, request_json

LIMIT_USD = 5000  # above it, a claim is refused at start


class ExpenseInput(WorkflowInput):
    employee: str = Field(min_length=1, max_length=100, description="who is claiming", examples=["ana"])
    email: str = Field(max_length=200, description="where the payment notice goes", examples=["ana@example.com"])
    amount_usd: int = Field(ge=1, le=LIMIT_USD, description=f"whole dollars, at most {LIMIT_USD}", examples=[120])
    category: Literal["travel", "meals", "equipment"] = Field(description="what it was for")
    receipts: list[str] = Field(default_factory=list, max_length=10, description="receipt numbers", examples=["R-1"])

    def model_post_init(self, context) -> None:
        if "@" not in self.email:
            raise InvalidInput("input.email", "an e-mail address, e.g. ana@example.com")


flow = register(
    Workflow(
        name="expense_approval",
        version=1,
        title="Expense claim",
        input=ExpenseInput,
        description="A claim checked against the policy, approved by a manager, then paid once.",
    )
)


@flow.step("check_policy", label="Checking the claim against the policy")
def check_policy(ctx):
    needs_receipt = ctx.input["amount_usd"] > 75
    if needs_receipt and not ctx.input["receipts"]:
        note = "over 75 USD without a receipt: the approver should ask for one"
    else:
        note = "within the policy"
    return {"policy": note}


@flow.step("write_claim", label="Writing up the claim")
def write_claim(ctx):
    i = ctx.input
    text = (
        f"# Expense claim\n\n- Employee: {i['employee']}\n- Amount: {i['amount_usd']} USD\n"
        f"- Category: {i['category']}\n- Receipts: {', '.join(i['receipts']) or 'none'}\n"
        f"- Policy: {ctx.state['check_policy']['policy']}\n"
    )
    ctx.save_artifact("claim", kind="claim", title="The expense claim", content=text, content_type="text/markdown")
    return {"characters": len(text)}


@flow.model_step("summarize", label="Summarising for the approver", prompt_version="expense-summary-v1")
def summarize(ctx, model):
    prompt = ctx.prompt("Summarise this expense claim in one line for the approver.")
    answer = model.complete(prompt=prompt, prompt_id="expense-summary", prompt_version="expense-summary-v1")
    return {"summary": answer.text}


flow.gate("approve", label="Awaiting a manager's approval", spec=Approval(artifact="claim", action="pay_expense"))


def _sandbox(path: str) -> str:
    return os.environ["SANDBOX_URL"].rstrip("/") + path


def _already_paid(key: str, args: dict) -> dict | None:
    found = request_json("GET", _sandbox(f"/notifications?key={key}"))["notifications"]
    return found[0] if found else None


@flow.effect(
    "pay", label="Telling payroll to pay", action="pay_expense", guarded_by="approve", retry=RetryPolicy(timeout=5)
)
def pay(ctx):
    claim = ctx.artifact("claim")
    return Effect(
        key=f"{ctx.ref}:pay:v{claim['version']}",
        args={
            "channel": "email",
            "to": ["payroll@example.com", ctx.input["email"]],
            "subject": f"Pay {ctx.input['amount_usd']} USD to {ctx.input['employee']}",
            "body": f"Approved claim {claim['artifact_id']} V{claim['version']} (sha256 {claim['sha256']}).",
        },
        call=lambda args, key: request_json("POST", _sandbox("/notify"), body=args, key=key),
        lookup=_already_paid,
    )
