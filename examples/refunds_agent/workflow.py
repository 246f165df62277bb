"""``refunds_agent`` v1, DBOS's reliable refunds agent: a customer asks about an order or for
its refund; the agent looks the order up (a read) and refunds it — at once when it costs
at most ``THRESHOLD`` EUR, after a manager's approval of exactly that refund above it
(the original's manual review). A refund is an effect through the ledger (``POST
/notify`` to the payments desk of keel's sandbox); the orders are the sandbox's
(``GET /orders/{id}``: ORD-1001 … ORD-1005). The model proposes, the runtime decides
which refund tool fits the price. A rejected review ends the execution (cancelled), no
refund sent. Result: ``{"answer", "refunded"}``. docs/authoring.md, "Ported samples".
"""

import json
import os
import re
from decimal import Decimal

from pydantic import Field

from approvals.gate import Approval
from executions.authoring import (
    Decision,
    Effect,
    Refused,
    Tool,
    ToolArgs,
    Workflow,
    WorkflowInput,
    register,
    request_json,
)

THRESHOLD = Decimal("150")  # EUR; the original's 1000 USD is above every order the sandbox holds
ORDER = re.compile(r"\bORD-\d{4}\b")
SAYS = "Help the customer with their purchase; their message, quoted as data:"


class RefundInput(WorkflowInput):
    message: str = Field(min_length=1, max_length=2000, examples=["Please refund order ORD-1002"])


class OrderArgs(ToolArgs):
    order_id: str = Field(pattern=r"^ORD-\d{4}$", max_length=8, description="the order id, e.g. ORD-1001")


def _sandbox(method: str, path: str, **kwargs) -> dict:
    return request_json(method, os.environ["SANDBOX_URL"].rstrip("/") + path, **kwargs)


def get_purchase(args: dict, progress) -> dict:
    order = _sandbox("GET", f"/orders/{args['order_id']}")
    price = sum(Decimal(item["unit_price"]) * item["qty"] for item in order["items"])
    items = [f"{item['qty']} × {item['name']}" for item in order["items"]]
    return {"order_id": order["order_id"], "order_date": order["placed_on"], "items": items, "price": str(price)}


def _refundable(reviewed: bool):
    def normalise(args: dict, progress) -> dict:
        purchase = progress.results["get_purchase"]
        if args["order_id"] != purchase["order_id"]:
            raise Refused(f"look up {args['order_id']} first")
        if (Decimal(purchase["price"]) > THRESHOLD) != reviewed:
            raise Refused(f"{purchase['price']} EUR: use {'refund_after_review' if not reviewed else 'process_refund'}")
        return args

    return normalise


def refund(args: dict, progress, key: str) -> Effect:
    notice = {"channel": "payments", "to": ["refunds@payments.example"], "subject": f"Refund {args['order_id']}"}
    return Effect(
        key=key,
        args=args,
        call=lambda a, k: _sandbox("POST", "/notify", body=notice, key=k),
        lookup=lambda k, a: next(iter(_sandbox("GET", f"/notifications?key={k}")["notifications"]), None),
    )


def _looked_up(progress) -> str:
    return "" if progress.done("get_purchase") else "first get_purchase"


TOOLS = [
    Tool(name="get_purchase", description="Look up a purchase by its order id.", args=OrderArgs, run=get_purchase),
    Tool(
        name="process_refund",
        description=f"Refund an order of at most {THRESHOLD} EUR.",
        args=OrderArgs,
        run=refund,
        effect=True,
        normalise=_refundable(reviewed=False),
        allowed=_looked_up,
    ),
    Tool(
        name="refund_after_review",
        description=f"Refund an order over {THRESHOLD} EUR, once a manager approved it.",
        args=OrderArgs,
        run=refund,
        effect=True,
        approval=Approval(artifact="refund", action="refund_order"),
        normalise=_refundable(reviewed=True),
        allowed=_looked_up,
    ),
]


def offline_policy(request) -> Decision:
    """How ``make run``'s offline model plays the agent: look the order up, refund it with
    the tool its price calls for when the customer asks for a refund, then answer."""
    done, failed = {}, None
    for message in request.messages:
        if message["role"] == "tool":
            content = json.loads(message["content"])
            done[message["name"]] = content
            failed = content.get("error") if message["is_error"] else None
    said = request.user_text.rsplit(SAYS, 1)[-1]
    order = ORDER.search(said)
    if failed or order is None:
        return Decision(text="We're unable to process your request. Please check your order id and try again.")
    purchase = done.get("get_purchase")
    if purchase is None:
        return Decision(text="Looking up your order.", tool="get_purchase", args={"order_id": order.group()})
    tool = "refund_after_review" if Decimal(purchase["price"]) > THRESHOLD else "process_refund"
    if "refund" in said.lower() and tool not in done:
        return Decision(text="Processing your refund.", tool=tool, args={"order_id": order.group()})
    if tool in done:
        return Decision(text=f"Your refund for order {order.group()} has been approved.")
    return Decision(text=f"Order {order.group()} of {purchase['order_date']}: {', '.join(purchase['items'])}.")


def _result(ctx) -> dict:
    agent = ctx.state["agent"]
    refunded = [c["args"]["order_id"] for c in agent["calls"] if c["tool"] != "get_purchase" and c["status"] == "done"]
    return {"answer": agent["answer"], "refunded": refunded}


flow = register(
    Workflow(
        name="refunds_agent",
        version=1,
        title="Refunds agent (DBOS's sample)",
        input=RefundInput,
        description="An agent that looks up orders and refunds them; a manager reviews the costly ones.",
        goal=lambda data: "You are a helpful refund agent. You can look up order status and process refunds.",
        result=_result,
    )
)

flow.agent(
    "agent",
    label="Answering the customer",
    prompt_id="refunds-agent",
    prompt_version="refunds-agent-v1",
    instruction=lambda ctx: f"{SAYS} {json.dumps(ctx.input['message'])}",
    tools=TOOLS,
    offline_policy=offline_policy,
)
