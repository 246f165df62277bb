"""A pydantic-ai agent whose model repeats the approved call (listed in the kit's modules by
tests/integration/test_foreign_agents.py): ``pay`` posts a payout notice to the sandbox
under the ledger's key and needs a manager's approval of its arguments. The offline
policy proposes the same ``pay`` call ``1 + REPEATS`` times, then answers with the
receipts it was told. ``pay`` takes a ``date``: keel decides on the call's JSON, the tool
gets its own types."""

from __future__ import annotations

import json
import os
from datetime import date

from pydantic_ai import Agent

from approvals.gate import Approval
from executions.authoring import Decision, Workflow, WorkflowInput, effect_key, register, request_json

REPEATS = 3

payer = Agent(instructions="Pay the customer the amount asked, once.")


@payer.tool_plain
def pay(customer: str, amount: int, on: date) -> dict:
    """Pay the customer the amount on a day (a typed argument: pydantic-ai hands the tool a date)."""
    subject = f"Pay {amount} EUR on {on.strftime('%d %b %Y')}"  # a str would have no strftime
    notice = {"channel": "payments", "to": [f"{customer}@payouts.example"], "subject": subject}
    return request_json("POST", os.environ["SANDBOX_URL"].rstrip("/") + "/notify", body=notice, key=effect_key())


class PayInput(WorkflowInput):
    customer: str
    amount: int


def policy(request) -> Decision:
    asked = json.loads(next(m["content"] for m in request.messages if m["role"] == "user"))
    paid = [m for m in request.messages if m["role"] == "tool" and m["name"] == "pay"]
    if len(paid) <= REPEATS:
        args = {"customer": asked["customer"], "amount": asked["amount"], "on": "2026-12-24"}
        return Decision(text="paying", tool="pay", args=args)
    receipts = sorted({json.loads(m["content"]).get("notification_id", "?") for m in paid})
    return Decision(text=f"paid under {', '.join(receipts)}")


def _result(ctx) -> dict:
    step = ctx.state["settle"]
    paid = [(c["status"], (c["result"] or {}).get("notification_id")) for c in step["calls"] if c["tool"] == "pay"]
    return {"answer": step["answer"], "paid": paid}


flow = register(
    Workflow(
        name="pydantic_repeating_payer",
        version=1,
        title="A pydantic-ai payer that repeats",
        input=PayInput,
        result=_result,
    )
)
flow.pydantic_agent(
    "settle",
    label="Settling the payment",
    agent=payer,
    prompt=lambda ctx: json.dumps({"customer": ctx.input["customer"], "amount": ctx.input["amount"]}),
    approvals={"pay": Approval(artifact="payment", action="pay")},
    offline_policy=policy,
)
