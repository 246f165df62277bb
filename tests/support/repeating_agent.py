"""A one-tool agent whose model repeats the approved call (S49; listed in a worker's
RUNTIME_WORKFLOW_MODULES): ``pay`` sends an order to the sandbox's order service (which,
in the test, ignores Idempotency-Key), needs a manager's approval of its arguments, and
has no ``allowed`` rule — so only the runtime stands between the model's repeats and
the provider. The offline policy proposes the same ``pay`` call ``1 + REPEATS`` times,
then pays ``amount + 1`` once (a different call), then answers.

Input ``{"customer": "CUST-1", "amount": 5, "different": false}``; with ``different``
the model asks for the second, different payment after the repeats.
"""

from __future__ import annotations

import json
from typing import Any

from approvals.gate import Approval
from executions.authoring import (
    Decision,
    Effect,
    ModelRequest,
    Progress,
    Tool,
    ToolArgs,
    Workflow,
    WorkflowInput,
    register,
)
from workflows import services_client

REPEATS = 3


class PayInput(WorkflowInput):
    customer: str
    amount: int
    different: bool = False


class PayArgs(ToolArgs):
    customer: str
    amount: int


def _pay(args: dict[str, Any], progress: Progress, key: str) -> Effect:
    return Effect(
        key=key,
        args=args,
        call=lambda a, k: services_client.submit_order(
            {"reference": k, "original_order": a["customer"], "sku": "PAYOUT", "quantity": a["amount"]}, k
        ),
        lookup=services_client.find_order,
        honors_key=False,
    )


def policy(request: ModelRequest) -> Decision:
    """Pay, then pay the same again ``REPEATS`` times (each told the recorded receipt), then
    (with ``different``) pay another amount once, then answer."""
    ask = json.loads(request.messages[0]["content"])
    paid = [m for m in request.messages if m["role"] == "tool" and m["name"] == "pay"]
    same = {"customer": ask["customer"], "amount": ask["amount"]}
    if len(paid) <= REPEATS:
        return Decision(text="paying", tool="pay", args=same)
    if ask["different"] and len(paid) == REPEATS + 1:
        return Decision(text="paying the rest", tool="pay", args={**same, "amount": ask["amount"] + 1})
    receipts = sorted({json.loads(m["content"]).get("order_id", "?") for m in paid})
    return Decision(text=f"paid under {', '.join(receipts)}")


flow = register(Workflow(name="repeating_payer", version=1, title="A payer whose model repeats itself", input=PayInput))
flow.agent(
    "settle",
    label="Settling the payment",
    prompt_id="repeating-payer",
    prompt_version="repeating-payer-v1",
    instruction=lambda ctx: json.dumps(
        {"customer": ctx.input["customer"], "amount": ctx.input["amount"], "different": ctx.input["different"]}
    ),
    tools=[
        Tool(
            name="pay",
            description="Pay the customer the amount.",
            args=PayArgs,
            run=_pay,
            effect=True,
            approval=Approval(artifact="payment", action="pay"),
        )
    ],
    offline_policy=policy,
)
