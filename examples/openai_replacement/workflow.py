"""``openai_replacement`` v1: a replacement desk written with the OpenAI Agents SDK, run by
keel as it is.

Two SDK agents: ``desk`` reads the ticket, the order and the stock, submits a
replacement order (``submit_replacement``, which the SDK marks ``needs_approval``) and
answers the customer (``reply_to_customer``); when the item is out of stock it hands the
ticket off to ``escalation``, which only writes the note a person picks up. They call
keel's sandbox (``GET /tickets/{id}``, ``/orders/{id}``, ``/stock/{sku}``, ``POST
/orders``, ``POST /notify``) and know nothing of keel. The workflow says what keel adds:
the replacement waits for a manager's approval of exactly its arguments and goes out
keyed by that approval; the reply goes out once per ticket (``effects``); the handoff
stays among the two agents the step declares. Offline, ``offline_policy`` plays the
model; with ``RUNTIME_MODEL_CLIENT=openai`` the provider does (the sandbox's
OpenAI-compatible endpoint plays the same desk). Result: ``{"answer", "replacement"}``.
docs/agents.md, "Bring your agent".
"""

import json
import os
import re

from agents import Agent, function_tool
from pydantic import Field

from approvals.gate import Approval
from executions.authoring import Decision, Workflow, WorkflowInput, effect_key, register, request_json

TICKET = re.compile(r"\bTCK-\d{4}\b")


def _sandbox(method: str, path: str, **kwargs) -> dict:
    return request_json(method, os.environ["SANDBOX_URL"].rstrip("/") + path, **kwargs)


@function_tool
def get_ticket(ticket: str) -> dict:
    """Read a support ticket: customer, order, item (sku), quantity broken, message."""
    return _sandbox("GET", f"/tickets/{ticket}")


@function_tool
def lookup_order(order: str) -> dict:
    """Look up the order the ticket is about: items ordered and shipping address."""
    return _sandbox("GET", f"/orders/{order}")


@function_tool
def check_stock(sku: str) -> dict:
    """How many units of a SKU are in stock."""
    return _sandbox("GET", f"/stock/{sku}")


@function_tool(needs_approval=True)
def submit_replacement(original_order: str, sku: str, quantity: int) -> dict:
    """Submit a replacement order for the broken items (a manager approves it first)."""
    key = effect_key()
    order = {"reference": key, "original_order": original_order, "sku": sku, "quantity": quantity}
    return _sandbox("POST", "/orders", body=order, key=key)


@function_tool
def reply_to_customer(ticket: str) -> dict:
    """Answer the customer who opened the ticket."""
    opened = _sandbox("GET", f"/tickets/{ticket}")
    notice = {
        "channel": "email",
        "to": [opened["customer"]["email"]],
        "subject": f"Your ticket {ticket}",
        "body": f"Hello {opened['customer']['name']}, we are on it: your {opened['item']} is taken care of.",
    }
    return _sandbox("POST", "/notify", body=notice, key=effect_key())


escalation = Agent(
    name="escalation",
    instructions="The item is out of stock. Write a one-line note for the person who takes the ticket over.",
)
desk = Agent(
    name="desk",
    instructions=(
        "You handle tickets about items that arrived broken. Read the ticket, look the order up, check the "
        "stock, submit a replacement of the broken quantity (no more than is in stock), then reply to the "
        "customer. If nothing is in stock, hand the ticket off to escalation."
    ),
    tools=[get_ticket, lookup_order, check_stock, submit_replacement, reply_to_customer],
    handoffs=[escalation],
)


class TicketInput(WorkflowInput):
    ticket: str = Field(pattern=r"^TCK-\d{4}$", examples=["TCK-1001"])


def offline_policy(request) -> Decision:
    """How the offline model plays both agents, from the conversation: the desk's moves in
    order, the handoff when the stock is out, the escalation's note."""
    offered = {tool.name for tool in request.tools}
    done = {m["name"]: m["content"] for m in request.messages if m["role"] == "tool" and not m["is_error"]}
    if "get_ticket" not in offered:  # the escalation agent
        return Decision(text="Out of stock: a person takes this ticket over.")
    ticket = TICKET.search(request.user_text)
    if ticket is None:
        return Decision(text="Which ticket is it? Its id looks like TCK-1001.")
    facts = {name: _json(content) for name, content in done.items()}
    opened = facts.get("get_ticket", {})
    stock = facts.get("check_stock", {})
    moves = [
        ("get_ticket", {"ticket": ticket.group()}),
        ("lookup_order", {"order": opened.get("order_id")}),
        ("check_stock", {"sku": opened.get("sku")}),
    ]
    if stock and not stock.get("available"):
        moves.append(("transfer_to_escalation", {}))
    else:
        quantity = min(opened.get("quantity") or 0, stock.get("available") or 0)
        order = {"original_order": opened.get("order_id"), "sku": opened.get("sku"), "quantity": quantity}
        moves += [("submit_replacement", order), ("reply_to_customer", {"ticket": ticket.group()})]
    for tool, args in moves:
        if tool not in done:
            return Decision(text=f"Calling {tool}.", tool=tool, args=args)
    return Decision(text=f"Ticket {ticket.group()}: a replacement is on its way and the customer is told.")


def _json(content: str) -> dict:
    try:
        value = json.loads(content)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _result(ctx) -> dict:
    step = ctx.state["resolve"]
    sent = [
        c["result"]["order_id"] for c in step["calls"] if c["tool"] == "submit_replacement" and c["status"] == "done"
    ]
    return {"answer": step["answer"], "replacement": sent[0] if sent else None}


flow = register(
    Workflow(
        name="openai_replacement",
        version=1,
        title="Replacement desk (OpenAI Agents SDK)",
        input=TicketInput,
        description="An OpenAI Agents SDK agent that replaces broken items once a manager approved the order.",
        goal=lambda data: f"Resolve ticket {data['ticket']}: a replacement, approved by a manager, and a reply",
        result=_result,
    )
)
flow.openai_agent(
    "resolve",
    label="Resolving the ticket",
    agent=desk,
    agents=[escalation],
    prompt=lambda ctx: f"Ticket {ctx.input['ticket']}: please resolve it.",
    approvals={"submit_replacement": Approval(artifact="replacement", action="submit_replacement")},
    effects={"reply_to_customer": lambda args, ctx: f"reply:{args['ticket']}"},
    offline_policy=offline_policy,
)
