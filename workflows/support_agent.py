"""The support agent: a customer's ticket about a broken item, resolved by a model that
proposes and a runtime that decides.

One agent step, ``resolve``, with five tools: it reads the ticket, looks up the order,
checks stock (read-only), proposes a replacement (``submit_replacement``: an effect a
manager approves first, on its effective arguments) and answers the customer
(``reply_to_customer``: an effect, an email through the sandbox's ``/notify``). The
reply is text to a third party that no one approves, so the model does not write it:
it only says which ticket to answer, and the runtime sends the fixed template the
verified results call for (replacement sent, partly sent, out of stock), filled with
bounded values from those results (executions.authoring.outbound). The
runtime allows each tool only when it makes sense, keeps every argument to the
ticket's own order and item, and clamps the quantity to what was ordered and what is
in stock, so what the manager approves is what can run.

Input ``{"ticket": "TCK-1001"}``; the support desk (the sandbox) holds TCK-1001 …
TCK-1005; any other ticket is refused at start.

Version 2 (the latest) begins with a *route* step: the model chooses how to handle the
ticket — ``resolve`` (replace the broken items: version 1's agent step, unchanged, its
calls keyed as before), ``refund`` (ask the payments desk for a refund: an effect a
manager approves first) or ``answer`` (only answer the customer) — and the runtime
refuses any other choice (executions.authoring.routes). Each branch ends the workflow.
The sandbox's model policies and the offline one choose per ticket (``ROUTE_OF``):
TCK-1002 (out of stock) is refunded, TCK-1005 only answered, every other ticket
replaced, so TCK-1001 reaches the same ``submit_replacement`` approval as in version 1.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from pydantic import Field, field_validator

from approvals.gate import Approval, ApproverPolicy
from executions.authoring import (
    END,
    Budget,
    Decision,
    Effect,
    InvalidInput,
    ModelRequest,
    Progress,
    Refused,
    Template,
    Tool,
    ToolArgs,
    Workflow,
    WorkflowInput,
    register,
)

from . import services_client

# The tickets the support desk holds (the sandbox's support data).
TICKETS = ("TCK-1001", "TCK-1002", "TCK-1003", "TCK-1004", "TCK-1005")
PROMPT_ID = "support-agent"
PROMPT_VERSION = "support-agent-v2"  # v2: the reply is a template; the requester's words are quoted data
INSTRUCTION = (
    "Please resolve support ticket {ticket}: read it, look up the order, check stock, propose a replacement "
    "of the broken items if any are in stock, then reply to the customer."
)


class SupportInput(WorkflowInput):
    ticket: str = Field(examples=["TCK-1001"], description="a ticket of the support desk (TCK-1001 … TCK-1005)")

    @field_validator("ticket", mode="before")
    @classmethod
    def _known(cls, value: Any) -> str:
        if value not in TICKETS:
            raise InvalidInput("input.ticket", f"unknown ticket {value!r}; the support desk holds {', '.join(TICKETS)}")
        return value


# --- the tools' arguments


class TicketArgs(ToolArgs):
    ticket: str = Field(description="the ticket id, e.g. TCK-1001")


class OrderArgs(ToolArgs):
    order: str = Field(description="the order id the ticket is about, e.g. ORD-1001")


class StockArgs(ToolArgs):
    sku: str = Field(description="the SKU of the broken item")


class ReplacementArgs(ToolArgs):
    original_order: str
    sku: str
    quantity: int = Field(ge=1, le=1000, description="how many to send")


class ReplyArgs(ToolArgs):
    """Only which ticket to answer: the text is a template (REPLIES), never the model's."""

    ticket: str = Field(pattern=r"^TCK-\d{4}$", max_length=8, description="the ticket to answer, e.g. TCK-1001")


# What the customer may be sent without a person approving it (executions.authoring.outbound): shown
# on the approval page, filled only with values from the tools' verified results.
SORRY = "Dear {customer}, we are sorry that your {item} from order {order} arrived broken."
REPLIES = {
    "replaced": Template(
        name="replacement sent", text=SORRY + " We have sent {quantity} replacement(s) under order {replacement}."
    ),
    "partly_replaced": Template(
        name="replacement partly sent",
        text=SORRY + " We have sent {quantity} replacement(s) under order {replacement}; the remaining {remaining} "
        "will follow as soon as they are back in stock.",
    ),
    "out_of_stock": Template(
        name="out of stock",
        text=SORRY + " It is out of stock at the moment, so a colleague will contact you about a refund.",
    ),
}


# --- when each tool is allowed, and its effective arguments


def _ticket(progress: Progress) -> dict[str, Any]:
    return progress.results["get_ticket"]


def _needs(*tools: str):
    def why_not(progress: Progress) -> str:
        missing = [t for t in tools if not progress.done(t)]
        return f"first {', '.join(missing)}" if missing else ""

    return why_not


def _once(tool: str, *before: str):
    needs = _needs(*before)

    def why_not(progress: Progress) -> str:
        return f"{tool} is already done" if progress.done(tool) else needs(progress)

    return why_not


def _same(field: str, proposed: Any, expected: Any) -> None:
    if proposed != expected:
        raise Refused(f"{field} must be {expected!r} (this ticket's), not {proposed!r}")


def _ticket_args(args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    _same("ticket", args["ticket"], progress.input["ticket"])
    return args


def _order_args(args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    _same("order", args["order"], _ticket(progress)["order_id"])
    return args


def _stock_args(args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    _same("sku", args["sku"], _ticket(progress)["sku"])
    return args


def _replacement_args(args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """The ticket's order and item only; never more than were ordered nor than are in stock."""
    ticket = _ticket(progress)
    _same("original_order", args["original_order"], ticket["order_id"])
    _same("sku", args["sku"], ticket["sku"])
    ordered = sum(i["qty"] for i in progress.results["lookup_order"].get("items", []) if i.get("sku") == args["sku"])
    available = progress.results["check_stock"].get("available", 0)
    quantity = min(args["quantity"], ordered, available)
    if quantity < 1:
        raise Refused(f"nothing to send: {ordered} ordered, {available} in stock")
    return {**args, "quantity": quantity}


def _reply_allowed(progress: Progress) -> str:
    if progress.done("reply_to_customer"):
        return "the customer has been answered"
    if progress.done("submit_replacement"):
        return ""
    if progress.done("check_stock") and progress.results["check_stock"].get("available") == 0:
        return ""  # nothing to replace: say so
    return "first submit_replacement (or find the item out of stock)"


def _reply_args(args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    _same("ticket", args["ticket"], progress.input["ticket"])
    return args


def _reply_text(progress: Progress) -> tuple[str, str]:
    """(template key, the message): the template the verified results call for, filled."""
    ticket = _ticket(progress)
    values = {
        "customer": ticket.get("customer", {}).get("name") or "customer",
        "item": ticket.get("item") or ticket.get("sku"),
        "order": ticket.get("order_id"),
    }
    receipt = progress.results.get("submit_replacement")
    if receipt is None:
        return "out_of_stock", REPLIES["out_of_stock"].fill(**values)
    sent = receipt.get("quantity") or sum(i.get("qty", 0) for i in receipt.get("items", []))
    values.update(quantity=sent, replacement=receipt.get("order_id"))
    remaining = (ticket.get("quantity") or 0) - (sent or 0)
    if remaining > 0:
        return "partly_replaced", REPLIES["partly_replaced"].fill(**values, remaining=remaining)
    return "replaced", REPLIES["replaced"].fill(**values)


# --- what the tools do


def _submit(args: dict[str, Any], progress: Progress, key: str) -> Effect:
    return Effect(
        key=key,
        args=args,
        call=lambda a, k: services_client.submit_order({"reference": k, **a}, k),
        lookup=services_client.find_order,
        honors_key=settings.ORDER_SERVICE_HONORS_KEYS,
    )


def _reply(args: dict[str, Any], progress: Progress, key: str) -> Effect:
    template, body = _reply_text(progress)
    email = {
        "channel": "email",
        "to": [_ticket(progress)["customer"]["email"]],
        "subject": f"Your ticket {args['ticket']}",
        "body": body,
    }
    return Effect(
        key=key,
        args={**args, "template": template, "body": body},  # the ledger shows what was sent
        call=lambda a, k: services_client.notify(email, k),
        lookup=services_client.find_notification,
    )


TOOLS = [
    Tool(
        name="get_ticket",
        description="Read a support ticket: customer, order, item (sku), quantity broken, message.",
        args=TicketArgs,
        run=lambda a, p: services_client.get_ticket(a["ticket"]),
        allowed=_once("get_ticket"),
        normalise=_ticket_args,
        fact=lambda a, r: (
            f"Ticket {r.get('ticket_id')}: {r.get('quantity')} × {r.get('item')} ({r.get('sku')}) of order "
            f"{r.get('order_id')} arrived broken; customer {r.get('customer', {}).get('name')}."
        ),
    ),
    Tool(
        name="lookup_order",
        description="Look up the order the ticket is about: items ordered and shipping address.",
        args=OrderArgs,
        run=lambda a, p: services_client.get_past_order(a["order"]),
        allowed=_once("lookup_order", "get_ticket"),
        normalise=_order_args,
    ),
    Tool(
        name="check_stock",
        description="How many units of a SKU are in stock.",
        args=StockArgs,
        run=lambda a, p: services_client.get_stock(a["sku"]),
        allowed=_once("check_stock", "get_ticket"),
        normalise=_stock_args,
        fact=lambda a, r: f"{r.get('available')} unit(s) of {r.get('sku')} in stock.",
    ),
    Tool(
        name="submit_replacement",
        description="Submit a replacement order for the broken items (a manager approves it first).",
        args=ReplacementArgs,
        run=_submit,
        effect=True,
        approval=Approval(
            artifact="replacement",
            action="submit_replacement",
            approver=ApproverPolicy(
                permission="approvals.approve_submit_order",
                expires_after_seconds=settings.APPROVAL_TTL_SECONDS,
                on_expiry="needs_attention",
            ),
        ),
        allowed=_once("submit_replacement", "lookup_order", "check_stock"),
        normalise=_replacement_args,
        fact=lambda a, r: (
            f"Replacement order {r.get('order_id')} of {a['quantity']} × {a['sku']} for {a['original_order']} "
            "was accepted by the order service."
        ),
    ),
    Tool(
        name="reply_to_customer",
        description=(
            "Answer the customer who opened the ticket. The runtime writes the message from what the other tools "
            "established (replacement sent, partly sent, or out of stock); give only the ticket."
        ),
        args=ReplyArgs,
        run=_reply,
        effect=True,
        third_party=True,
        templates=tuple(REPLIES.values()),
        allowed=_reply_allowed,
        normalise=_reply_args,
        fact=lambda a, r: f"The customer was answered (notification {r.get('notification_id')}).",
    ),
]


# --- how the offline model plays the agent (deterministic, from the conversation)


def _noted(request: ModelRequest) -> dict[str, dict[str, Any]]:
    """What a compacted conversation's progress note says was done (executions.agent.compaction:
    ``- tried <tool> <args> → <result> (source: <key>)``); a clipped result reads as ``{}``."""
    done: dict[str, dict[str, Any]] = {}
    for line in request.user_text.splitlines():
        if not line.startswith("- tried ") or " → " not in line:
            continue
        name = line.removeprefix("- tried ").split(" ", 1)[0]
        result = line.split(" → ", 1)[1].rsplit(" (source: ", 1)[0]
        try:
            parsed = json.loads(result)
        except ValueError:
            parsed = {}
        done[name] = parsed if isinstance(parsed, dict) else {}
    return done


def offline_policy(request: ModelRequest) -> Decision:
    """The next move from the tool results in ``request`` (the sandbox's support-agent
    policy, in short): read the ticket, the order, the stock; propose a replacement of
    the ticket's quantity; reply; then a final answer. A refused or failed proposal
    ends with a final answer saying so."""
    offered = {t.name for t in request.tools}
    done: dict[str, dict[str, Any]] = _noted(request)
    last_error = ""
    for message in request.messages:
        if message["role"] == "tool":
            content = json.loads(message["content"])
            if message["is_error"]:
                last_error = f"{message['name']}: {content.get('error', content)}"
            else:
                done[message["name"]] = content
                last_error = ""
    ticket_id = next(iter(t for t in TICKETS if t in request.user_text), None)
    if last_error:
        return Decision(text=f"Stopping: {last_error}")
    if ticket_id is None:
        return Decision(text="Which ticket is this about?")
    ticket = done.get("get_ticket")
    moves: list[tuple[str, dict[str, Any], str]] = [("get_ticket", {"ticket": ticket_id}, f"Reading {ticket_id}.")]
    if ticket:
        available = done.get("check_stock", {}).get("available", 0)
        moves += [
            ("lookup_order", {"order": ticket["order_id"]}, f"Looking up {ticket['order_id']}."),
            ("check_stock", {"sku": ticket["sku"]}, f"Checking stock of {ticket['sku']}."),
        ]
        if available:
            args = {"original_order": ticket["order_id"], "sku": ticket["sku"], "quantity": ticket["quantity"]}
            moves.append(("submit_replacement", args, "Proposing a replacement."))
        moves.append(("reply_to_customer", {"ticket": ticket_id}, "Answering the customer."))
    for tool, args, text in moves:
        if tool not in done:
            if tool not in offered:
                return Decision(text=f"I would call {tool} next, but it is not offered; stopping.")
            return Decision(text=text, tool=tool, args=args)
    return Decision(text=f"Done with {ticket_id}: the customer has been answered.")


flow = register(
    Workflow(
        name="support_agent",
        version=1,
        title="Support agent",
        input=SupportInput,
        deadline_seconds=14 * 24 * 3600,
        goal=lambda data: (
            f"Resolve support ticket {data['ticket']}: a customer received a broken item. Send a replacement if "
            "stock allows (a manager approves it first) and answer the customer."
        ),
        constraints=lambda data: [
            f"Act only on ticket {data['ticket']}, its order and its item.",
            "Never send more items than were ordered or are in stock.",
            "Submit only the exact replacement a manager approved; answer the customer once.",
        ],
    )
)

flow.agent(
    "resolve",
    label="Resolving the ticket",
    prompt_id=PROMPT_ID,
    prompt_version=PROMPT_VERSION,
    instruction=lambda ctx: INSTRUCTION.format(ticket=ctx.input["ticket"]),
    tools=TOOLS,
    budget=Budget(max_calls=12, max_tokens=60_000, max_seconds=300, max_refusals=3),
    done_when=lambda progress: progress.done("reply_to_customer"),
    offline_policy=offline_policy,
)


# --- version 2: a route first, then one of three branches


ROUTE_PROMPT_VERSION = "support-route-v1"
ROUTE_TOOL = "choose_next_step"
# How the deterministic models route each ticket (the sandbox's policy says the same).
ROUTE_OF = {"TCK-1002": "refund", "TCK-1005": "answer"}
ROUTE_INSTRUCTION = (
    "Support ticket {ticket} reports a broken item. Decide how to handle it: resolve (send a replacement if "
    "stock allows), refund (ask the payments desk to refund the broken items) or answer (only answer the customer)."
)
REFUND_INSTRUCTION = (
    "Please refund support ticket {ticket}: read it, look up the order, ask the payments desk to refund the broken "
    "items, then reply to the customer."
)
ANSWER_INSTRUCTION = "Please answer support ticket {ticket}: read it, then reply to the customer."

REFUND_REPLIES = {
    "refunded": Template(
        name="refund requested",
        text=SORRY + " We have asked our payments desk to refund {quantity} of them (request {request}).",
    ),
}
ANSWER_REPLIES = {
    "answered": Template(
        name="acknowledged",
        text="Dear {customer}, thank you for telling us about your {item} from order {order}. A colleague will look "
        "into it and get back to you.",
    ),
}


class RefundArgs(ToolArgs):
    original_order: str
    sku: str
    quantity: int = Field(ge=1, le=1000, description="how many broken items to refund")


def _refund_args(args: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """The ticket's order and item only; never more than were ordered nor than the ticket reports."""
    ticket = _ticket(progress)
    _same("original_order", args["original_order"], ticket["order_id"])
    _same("sku", args["sku"], ticket["sku"])
    ordered = sum(i["qty"] for i in progress.results["lookup_order"].get("items", []) if i.get("sku") == args["sku"])
    quantity = min(args["quantity"], ordered, ticket.get("quantity") or 0)
    if quantity < 1:
        raise Refused(f"nothing to refund: {ordered} ordered")
    return {**args, "quantity": quantity}


def _refund(args: dict[str, Any], progress: Progress, key: str) -> Effect:
    request = {
        "channel": "payments",
        "to": ["refunds@payments.example"],
        "subject": f"Refund for order {args['original_order']}",
        "body": f"Refund {args['quantity']} x {args['sku']} of order {args['original_order']} "
        f"(ticket {progress.input['ticket']}).",
    }
    return Effect(
        key=key,
        args=args,
        call=lambda a, k: services_client.notify(request, k),
        lookup=services_client.find_notification,
    )


def _values(progress: Progress) -> dict[str, Any]:
    ticket = _ticket(progress)
    return {
        "customer": ticket.get("customer", {}).get("name") or "customer",
        "item": ticket.get("item") or ticket.get("sku"),
        "order": ticket.get("order_id"),
    }


def _refund_reply_text(progress: Progress) -> tuple[str, str]:
    receipt = progress.results["issue_refund"]
    ticket = _ticket(progress)
    ordered = sum(i["qty"] for i in progress.results["lookup_order"].get("items", []) if i.get("sku") == ticket["sku"])
    quantity = min(ticket.get("quantity") or 0, ordered)  # what _refund_args let through
    return "refunded", REFUND_REPLIES["refunded"].fill(
        **_values(progress), quantity=quantity, request=receipt.get("notification_id")
    )


def _answer_reply_text(progress: Progress) -> tuple[str, str]:
    return "answered", ANSWER_REPLIES["answered"].fill(**_values(progress))


def _reply_tool(text: Any, templates: dict[str, Template], allowed: Any) -> Tool:
    def run(args: dict[str, Any], progress: Progress, key: str) -> Effect:
        template, body = text(progress)
        email = {
            "channel": "email",
            "to": [_ticket(progress)["customer"]["email"]],
            "subject": f"Your ticket {args['ticket']}",
            "body": body,
        }
        return Effect(
            key=key,
            args={**args, "template": template, "body": body},
            call=lambda a, k: services_client.notify(email, k),
            lookup=services_client.find_notification,
        )

    return Tool(
        name="reply_to_customer",
        description="Answer the customer who opened the ticket. The runtime writes the message; give only the ticket.",
        args=ReplyArgs,
        run=run,
        effect=True,
        third_party=True,
        templates=tuple(templates.values()),
        allowed=allowed,
        normalise=_reply_args,
        fact=lambda a, r: f"The customer was answered (notification {r.get('notification_id')}).",
    )


def _replied_once(*before: str):
    needs = _needs(*before)

    def why_not(progress: Progress) -> str:
        return "the customer has been answered" if progress.done("reply_to_customer") else needs(progress)

    return why_not


REFUND_TOOLS = [
    TOOLS[0],  # get_ticket
    TOOLS[1],  # lookup_order
    Tool(
        name="issue_refund",
        description="Ask the payments desk to refund the broken items (a manager approves it first).",
        args=RefundArgs,
        run=_refund,
        effect=True,
        approval=Approval(
            artifact="refund",
            action="issue_refund",
            approver=ApproverPolicy(
                permission="approvals.approve_submit_order",
                expires_after_seconds=settings.APPROVAL_TTL_SECONDS,
                on_expiry="needs_attention",
            ),
        ),
        allowed=_once("issue_refund", "lookup_order"),
        normalise=_refund_args,
        fact=lambda a, r: (
            f"Refund of {a['quantity']} × {a['sku']} of {a['original_order']} requested from the payments desk "
            f"(request {r.get('notification_id')})."
        ),
    ),
    _reply_tool(_refund_reply_text, REFUND_REPLIES, _replied_once("issue_refund")),
]
ANSWER_TOOLS = [TOOLS[0], _reply_tool(_answer_reply_text, ANSWER_REPLIES, _replied_once("get_ticket"))]


def _ticket_in(request: ModelRequest) -> str | None:
    return next(iter(t for t in TICKETS if t in request.user_text), None)


def route_policy(request: ModelRequest) -> Decision:
    """The offline model's route: ``ROUTE_OF`` the ticket, else ``resolve``."""
    ticket_id = _ticket_in(request)
    step = ROUTE_OF.get(ticket_id or "", "resolve")
    return Decision(text=f"Routing {ticket_id} to {step}.", tool=ROUTE_TOOL, args={"step": step, "why": "per ticket"})


def branch_policy(request: ModelRequest) -> Decision:
    """The offline model in the refund and answer branches: read the ticket (and the order),
    then the branch's effect, then the reply; a refused or failed proposal ends it."""
    offered = {t.name for t in request.tools}
    done: dict[str, Any] = {}
    for message in request.messages:
        if message["role"] == "tool":
            content = json.loads(message["content"])
            if message["is_error"]:
                return Decision(text=f"Stopping: {message['name']}: {content.get('error', content)}")
            done[message["name"]] = content
    ticket_id = _ticket_in(request)
    if ticket_id is None:
        return Decision(text="Which ticket is this about?")
    ticket = done.get("get_ticket")
    moves = [("get_ticket", {"ticket": ticket_id})]
    if ticket and "refund" in request.user_text:
        args = {"original_order": ticket["order_id"], "sku": ticket["sku"], "quantity": ticket["quantity"]}
        moves += [("lookup_order", {"order": ticket["order_id"]}), ("issue_refund", args)]
    if ticket:
        moves.append(("reply_to_customer", {"ticket": ticket_id}))
    for tool, args in moves:
        if tool not in done:
            if tool not in offered:
                return Decision(text=f"I would call {tool} next, but it is not offered; stopping.")
            return Decision(text=f"Calling {tool}.", tool=tool, args=args)
    return Decision(text=f"Done with {ticket_id}: the customer has been answered.")


flow_v2 = register(
    Workflow(
        name="support_agent",
        version=2,
        title="Support agent",
        input=SupportInput,
        deadline_seconds=flow.deadline_seconds,
        goal=lambda data: (
            f"Resolve support ticket {data['ticket']}: a customer received a broken item. Choose how to handle it "
            "(replace, refund or only answer); a manager approves a replacement or a refund first; answer the customer."
        ),
        constraints=lambda data: [
            f"Act only on ticket {data['ticket']}, its order and its item.",
            "Never send or refund more items than were ordered or are in stock.",
            "Submit only the exact replacement or refund a manager approved; answer the customer once.",
        ],
    )
)

flow_v2.route(
    "route",
    label="Choosing how to handle the ticket",
    prompt_id="support-route",
    prompt_version=ROUTE_PROMPT_VERSION,
    instruction=lambda ctx: ROUTE_INSTRUCTION.format(ticket=ctx.input["ticket"]),
    to=["resolve", "refund", "answer"],
    offline_policy=route_policy,
)
flow_v2.agent(
    "resolve",
    label="Replacing the broken items",
    prompt_id=PROMPT_ID,
    prompt_version=PROMPT_VERSION,
    instruction=lambda ctx: INSTRUCTION.format(ticket=ctx.input["ticket"]),
    tools=TOOLS,
    budget=Budget(max_calls=12, max_tokens=60_000, max_seconds=300, max_refusals=3),
    done_when=lambda progress: progress.done("reply_to_customer"),
    offline_policy=offline_policy,
    then=END,
)
flow_v2.agent(
    "refund",
    label="Refunding the broken items",
    prompt_id="support-refund",
    prompt_version="support-refund-v1",
    instruction=lambda ctx: REFUND_INSTRUCTION.format(ticket=ctx.input["ticket"]),
    tools=REFUND_TOOLS,
    budget=Budget(max_calls=10, max_tokens=50_000, max_seconds=300, max_refusals=3),
    done_when=lambda progress: progress.done("reply_to_customer"),
    offline_policy=branch_policy,
    then=END,
)
flow_v2.agent(
    "answer",
    label="Answering the customer",
    prompt_id="support-answer",
    prompt_version="support-answer-v1",
    instruction=lambda ctx: ANSWER_INSTRUCTION.format(ticket=ctx.input["ticket"]),
    tools=ANSWER_TOOLS,
    budget=Budget(max_calls=6, max_tokens=30_000, max_seconds=120, max_refusals=3),
    done_when=lambda progress: progress.done("reply_to_customer"),
    offline_policy=branch_policy,
)
