"""``pydantic_support`` v1: a support agent written with pydantic-ai, run by keel as it is.

The agent (``support``, a plain ``pydantic_ai.Agent``) has two tools: ``get_purchase``
looks an order up at keel's sandbox (``GET /orders/{id}``: ORD-1001 … ORD-1005) and
``refund`` refunds one (``POST /notify`` to the payments desk, with the ledger's key).
Nothing in the agent knows about keel; ``refund`` is marked ``requires_approval`` as
pydantic-ai has it. The workflow says what keel adds: that approval is a manager's, of
exactly the refund's arguments (``approvals``), and the refund goes through the ledger
keyed by it, so it happens once whatever the model repeats and
whatever crashes. Offline, ``offline_policy`` plays the model; with a provider set
(``RUNTIME_MODEL_CLIENT``), the provider answers, every request journaled. Result:
``{"answer", "refunded"}``. docs/agents.md, "Bring your agent".
"""

import json
import os
import re

from pydantic import Field
from pydantic_ai import Agent

from approvals.gate import Approval
from executions.authoring import Decision, Workflow, WorkflowInput, effect_key, register, request_json

ORDER = re.compile(r"\bORD-\d{4}\b")

support = Agent(
    instructions=(
        "You are the shop's support agent. Look an order up with get_purchase before you refund it; "
        "refund only when the customer asks for it, in full, with a short reason."
    ),
)


def _sandbox(method: str, path: str, **kwargs) -> dict:
    return request_json(method, os.environ["SANDBOX_URL"].rstrip("/") + path, **kwargs)


@support.tool_plain
def get_purchase(order_id: str) -> dict:
    """Look up a purchase by its order id (ORD-1001)."""
    order = _sandbox("GET", f"/orders/{order_id}")
    total = sum(float(item["unit_price"]) * item["qty"] for item in order["items"])
    return {"order_id": order["order_id"], "placed_on": order["placed_on"], "total_eur": round(total, 2)}


@support.tool_plain(requires_approval=True)  # pydantic-ai's own human-in-the-loop: keel's approval stands in
def refund(order_id: str, reason: str) -> dict:
    """Refund an order in full."""
    notice = {"channel": "payments", "to": ["refunds@payments.example"], "subject": f"Refund {order_id}: {reason}"}
    return _sandbox("POST", "/notify", body=notice, key=effect_key())


class SupportInput(WorkflowInput):
    message: str = Field(min_length=1, max_length=2000, examples=["Please refund order ORD-1002, it arrived broken"])


def offline_policy(request) -> Decision:
    """How the offline model plays the agent: look the order up, refund it when the
    customer asks for a refund, then answer."""
    done = {m["name"]: json.loads(m["content"]) for m in request.messages if m["role"] == "tool" and not m["is_error"]}
    asked = next(m["content"] for m in request.messages if m["role"] == "user")
    order = ORDER.search(asked)
    if order is None:
        return Decision(text="Which order is it? Its id looks like ORD-1001.")
    if "get_purchase" not in done:
        return Decision(text="Looking up your order.", tool="get_purchase", args={"order_id": order.group()})
    if "refund" in asked.lower() and "refund" not in done:
        return Decision(
            text="Refunding it.", tool="refund", args={"order_id": order.group(), "reason": "customer request"}
        )
    if "refund" in done:
        return Decision(text=f"Your order {order.group()} is refunded.")
    return Decision(text=f"Order {order.group()} totals {done['get_purchase']['total_eur']} EUR.")


def _result(ctx) -> dict:
    step = ctx.state["support"]
    refunded = [c["args"]["order_id"] for c in step["calls"] if c["tool"] == "refund" and c["status"] == "done"]
    return {"answer": step["answer"], "refunded": refunded}


flow = register(
    Workflow(
        name="pydantic_support",
        version=1,
        title="Support agent (pydantic-ai)",
        input=SupportInput,
        description="A pydantic-ai agent that looks orders up and refunds them once a manager approved the refund.",
        goal=lambda data: "Answer the customer; refund their order if they ask and a manager approves",
        result=_result,
    )
)
flow.pydantic_agent(
    "support",
    label="Answering the customer",
    agent=support,
    prompt=lambda ctx: ctx.input["message"],
    approvals={"refund": Approval(artifact="refund", action="refund_order")},
    offline_policy=offline_policy,
)
