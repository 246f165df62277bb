"""``sample_expense`` v1, Temporal's ``SampleExpenseWorkflow``: create the expense in the
expense system, wait at most ten minutes for the ``expense_decision`` signal, pay the
expense when the decision is ``APPROVED``, else complete without paying. Its result is
``{"expense_id", "decision", "status"}``, ``status`` the original's return value
(``"COMPLETED"`` when paid, else ``""``).

The expense system is keel's sandbox: creating is ``POST /orders``, paying is ``POST
/notify`` to the payments desk, each an effect through the ledger. A timeout is an
outcome (``on_timeout``): the expense completes unpaid, its ``decision`` null.
docs/authoring.md, "Ported samples", compares it with the original line by line.
"""

import os

from pydantic import Field

from executions.authoring import (
    END,
    Effect,
    RetryPolicy,
    SignalPayload,
    Workflow,
    WorkflowInput,
    register,
    request_json,
)

RETRY = RetryPolicy(max_attempts=3, timeout=10)  # the original's activity options


class ExpenseInput(WorkflowInput):
    expense_id: str = Field(pattern=r"\S", max_length=100, description="the expense to process", examples=["exp-1"])
    decision_timeout_seconds: int = Field(default=600, ge=1, le=30 * 24 * 3600, description="how long to wait")


class ExpenseDecision(SignalPayload):
    decision: str = Field(min_length=1, max_length=20, description="APPROVED pays; anything else does not")


def _decision(ctx) -> str | None:
    return (ctx.state["decision"].get("payload") or {}).get("decision")  # None: it timed out


def _result(ctx) -> dict:
    paid = "COMPLETED" if "pay" in ctx.state else ""
    return {"expense_id": ctx.input["expense_id"], "decision": _decision(ctx), "status": paid}


flow = register(
    Workflow(
        name="sample_expense",
        version=1,
        title="Expense (Temporal's sample)",
        input=ExpenseInput,
        description="Create an expense, wait for the decision, pay it if approved.",
        result=_result,
    )
)


def _expense_system(method: str, path: str, **kwargs) -> dict:
    return request_json(method, os.environ["SANDBOX_URL"].rstrip("/") + path, **kwargs)


@flow.effect("create", label="Creating the expense", action="create_expense", retry=RETRY)
def create(ctx):
    return Effect(
        key=f"{ctx.ref}:create",
        args={"reference": f"{ctx.ref}:create", "expense_id": ctx.input["expense_id"]},
        call=lambda args, key: _expense_system("POST", "/orders", body=args, key=key),
        lookup=lambda key, args: next(iter(_expense_system("GET", f"/orders?reference={key}")["orders"]), None),
    )


flow.wait(
    "decision",
    label="Waiting for the expense decision",
    signal="expense_decision",
    payload=ExpenseDecision,
    timeout=lambda data: data["decision_timeout_seconds"],
    on_timeout="approved",
)


@flow.branch("approved", label="Approved?", to=["pay", END])
def approved(ctx) -> str:
    return "pay" if _decision(ctx) == "APPROVED" else END


@flow.effect("pay", label="Paying the expense", action="pay_expense", retry=RETRY)
def pay(ctx):
    expense_id = ctx.input["expense_id"]
    return Effect(
        key=f"{ctx.ref}:pay",
        args={"channel": "payments", "to": ["payments@example.com"], "subject": f"Pay expense {expense_id}"},
        call=lambda args, key: _expense_system("POST", "/notify", body=args, key=key),
        lookup=lambda key, args: next(iter(_expense_system("GET", f"/notifications?key={key}")["notifications"]), None),
    )
