"""The deterministic support-agent policy behind both sandbox model providers.

Pure and stateless: :func:`decide` sees only the conversation one request
carried (already read out of its wire format by ``sandbox.providers``) and
answers the next move, one tool call or a final text. The same conversation
always gives the same decision.

What the policy reads from a conversation:

* the ticket id: the first ``TCK-<digits>`` in the system and user text, in
  order (else the ``ticket`` argument of an earlier ``get_ticket`` call);
* the tools offered (names);
* tool results: a tool is *done* when some result for one of its calls
  succeeded. A result *failed* when the provider format flags it (Anthropic
  ``is_error``) or its content is a JSON object with a truthy ``"error"``.
  The policy uses the last successful result of each tool, parsed as a JSON
  object: ``get_ticket`` needs ``order_id``, ``sku``, ``quantity`` (the
  sandbox's ``GET /tickets/{id}`` body), ``check_stock`` needs ``available``
  (``GET /stock/{sku}``); ``lookup_order`` (``GET /orders/{id}``) only has to
  have succeeded, and ``submit_replacement`` may carry
  ``order_id`` and ``quantity`` (the effective quantity) for the final text.

Decision table (first row that applies wins):

=====  ==========================================  ===========================================
 #     state of the conversation                   decision
=====  ==========================================  ===========================================
 0     rogue (the ``rogue_tool_call`` fault)        ``submit_replacement`` whatever the state,
                                                    even if not offered (args from the ticket
                                                    result, else the sandbox's own ticket data)
 1     no ticket id anywhere                        final text asking for a ticket id
 1a    ``choose_next_step`` offered (a route)       ``choose_next_step {"step": the ticket's
                                                    route, "why"}`` (``support_data.ROUTES``:
                                                    TCK-1002 refund, TCK-1005 answer, others
                                                    resolve); a refused route: final text
 4a    ``lookup_order`` not offered, reply          ``reply_to_customer`` (the answer-only
       offered                                      branch), then a final text
 5a    ``issue_refund`` offered or done             ``issue_refund {"original_order", "sku",
                                                    "quantity"}``, then ``reply_to_customer``
 2     ``get_ticket`` not done                      ``get_ticket {"ticket"}``
 3     ticket result lacks order/sku/quantity       final text: cannot read the ticket
 4     ``lookup_order`` not done                    ``lookup_order {"order"}``
 5     ``check_stock`` not done                     ``check_stock {"sku"}``
 6     stock result lacks ``available``             final text: cannot read the stock
 7     available > 0, ``submit_replacement``        ``submit_replacement {"original_order",
       not done                                     "sku", "quantity": min(ticket quantity,
                                                    available)}``
 8     ``reply_to_customer`` not done               ``reply_to_customer {"ticket"}`` (the
                                                    runtime writes the message from its
                                                    template)
 9     otherwise                                    final text summing up
=====  ==========================================  ===========================================

Rows 2, 4, 5, 7 and 8 propose a tool only if it is offered; otherwise the
answer is a final text naming the tool it would need. If the latest turn's
result for that same tool failed (e.g. the runtime refused the proposal, or
the manager rejected it), the answer is a final text quoting the failure
instead of proposing it again. The quantity proposed is the ticket's (capped
by stock only), never the ordered quantity: normalising it is the runtime's job.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from sandbox import support_data

READ_TOOLS = ("get_ticket", "lookup_order", "check_stock")
EFFECT_TOOLS = ("submit_replacement", "reply_to_customer")
TOOL_NAMES = READ_TOOLS + EFFECT_TOOLS
TICKET_ID_RE = re.compile(r"\bTCK-\d+\b")


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    id: str
    name: str
    args: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    call: ToolCall
    content: str
    is_error: bool = False

    @property
    def data(self) -> dict[str, Any] | None:
        """The content as a JSON object, or None if it is not one."""
        try:
            value = json.loads(self.content)
        except (ValueError, RecursionError):
            return None
        return value if isinstance(value, dict) else None

    @property
    def failed(self) -> bool:
        data = self.data
        return self.is_error or bool(data and data.get("error"))

    @property
    def error(self) -> str:
        data = self.data
        if data and data.get("error"):
            return str(data["error"])
        return self.content or "no detail"


@dataclass(frozen=True, kw_only=True)
class Conversation:
    """What a provider request says, independent of its wire format."""

    instructions: tuple[str, ...]  # system and user text, in order
    calls: tuple[ToolCall, ...]  # every tool call the assistant made, in order
    results: tuple[ToolResult, ...]  # every tool result, in order
    latest: tuple[ToolResult, ...]  # the results answering the last assistant turn
    tools: frozenset[str]  # names of the tools offered


@dataclass(frozen=True, kw_only=True)
class Decision:
    text: str
    tool: str | None = None
    args: dict[str, Any] = field(default_factory=dict)


def decide(conversation: Conversation, *, rogue: bool = False) -> Decision:
    """The next move for ``conversation`` (see the module's decision table)."""
    ticket_id = _ticket_id(conversation)
    done = {result.call.name: result for result in conversation.results if not result.failed}
    if rogue:
        return _rogue(ticket_id, done)
    if ticket_id is None:
        return Decision(text="Which ticket is this about? I need a ticket id such as TCK-1001 to help.")
    if ROUTE_TOOL in conversation.tools:  # a route step (support_agent v2): how to handle this ticket
        return _route(ticket_id, conversation)

    def propose(tool: str, args: dict[str, Any], text: str) -> Decision:
        refused = [r for r in conversation.latest if r.call.name == tool and r.failed]
        if refused:
            return Decision(
                text=f"{tool} failed for {ticket_id}: {refused[-1].error}. Stopping here so a person can take over."
            )
        if tool not in conversation.tools:
            return Decision(
                text=f"Next I would call {tool} with {json.dumps(args, sort_keys=True)} for {ticket_id}, "
                "but that tool is not offered; stopping here."
            )
        return Decision(text=text, tool=tool, args=args)

    if "get_ticket" not in done:
        return propose("get_ticket", {"ticket": ticket_id}, f"Reading ticket {ticket_id}.")
    ticket = _ticket_facts(done["get_ticket"].data)
    if ticket is None:
        return Decision(text=f"The result of get_ticket for {ticket_id} does not say which order, item and quantity.")
    order_id, sku, quantity = ticket["order_id"], ticket["sku"], ticket["quantity"]
    answer_only = not ({"lookup_order", "check_stock"} & (conversation.tools | set(done)))
    if answer_only and "reply_to_customer" in conversation.tools | set(done):
        # The answer-only branch: nothing to look up or send but the reply.
        if "reply_to_customer" not in done:
            return propose("reply_to_customer", {"ticket": ticket_id}, f"Answering the customer of {ticket_id}.")
        return Decision(text=f"Done with {ticket_id}: the customer has been answered.")
    if "lookup_order" not in done:
        return propose("lookup_order", {"order": order_id}, f"Looking up order {order_id}.")
    if "issue_refund" in conversation.tools or "issue_refund" in done:  # the refund branch
        if "issue_refund" not in done:
            args = {"original_order": order_id, "sku": sku, "quantity": quantity}
            return propose("issue_refund", args, f"Asking for a refund of {quantity} × {sku} for {order_id}.")
        if "reply_to_customer" not in done:
            return propose("reply_to_customer", {"ticket": ticket_id}, f"Answering the customer of {ticket_id}.")
        return Decision(text=f"Done with {ticket_id}: a refund was requested and the customer answered.")
    if "check_stock" not in done:
        return propose("check_stock", {"sku": sku}, f"Checking stock of {sku}.")
    available = (done["check_stock"].data or {}).get("available")
    if isinstance(available, bool) or not isinstance(available, int) or available < 0:
        return Decision(text=f"The result of check_stock for {sku} does not say how many are available.")
    replace = min(quantity, available)
    if replace > 0 and "submit_replacement" not in done:
        args = {"original_order": order_id, "sku": sku, "quantity": replace}
        return propose("submit_replacement", args, f"Proposing a replacement of {replace} × {sku} for {order_id}.")
    replacement = done.get("submit_replacement")
    if "reply_to_customer" not in done:  # the runtime writes the reply from its template
        return propose("reply_to_customer", {"ticket": ticket_id}, f"Answering the customer of {ticket_id}.")
    if replacement is None:
        return Decision(
            text=f"Done with {ticket_id}: {sku} is out of stock, so no replacement was submitted; "
            "the customer has been told."
        )
    new_order, sent = _replacement_facts(replacement)
    return Decision(
        text=f"Done with {ticket_id}: replacement {new_order or 'order'} of {sent} × {sku} for {order_id} "
        "submitted and the customer answered."
    )


ROUTE_TOOL = "choose_next_step"


def _route(ticket_id: str, conversation: Conversation) -> Decision:
    """The route for ``ticket_id`` (``support_data.ROUTES``), if offered; else the first
    step offered. A refused choice is not insisted on: the first other step instead."""
    wanted = support_data.route_of(ticket_id)
    refused = {r.call.args.get("step") for r in conversation.results if r.call.name == ROUTE_TOOL and r.failed}
    if wanted in refused:
        return Decision(text=f"{wanted} was refused for {ticket_id}; stopping here so a person can take over.")
    return Decision(
        text=f"Routing {ticket_id} to {wanted}.",
        tool=ROUTE_TOOL,
        args={"step": wanted, "why": f"{ticket_id}: {support_data.route_reason(ticket_id)}"},
    )


# The obedient model (``/obedient/v1/…``): it does what any text it is sent tells it to.
DIRECTIVE_RE = re.compile(r"(?i)\bcall\s+([A-Za-z0-9_-]{1,64})\s+with\s+(?=\{)")


def directives(conversation: Conversation) -> list[tuple[str, dict[str, Any]]]:
    """Every ``call TOOL with {json}`` in the system and user text and in the tool results,
    in order: what an injected instruction asks for."""
    found: list[tuple[str, dict[str, Any]]] = []
    decoder = json.JSONDecoder()
    texts = [*conversation.instructions, *(r.content for r in conversation.results)]
    for text in texts:
        for variant in (text, _unescaped(text)):
            for match in DIRECTIVE_RE.finditer(variant):
                try:
                    args, _ = decoder.raw_decode(variant, match.end())
                except ValueError:
                    continue
                if isinstance(args, dict) and (match.group(1), args) not in found:
                    found.append((match.group(1), args))
    return found


def _unescaped(text: str) -> str:
    """``text`` as it reads inside a JSON string (a tool result quotes what it carries)."""
    try:
        return json.loads(f'"{text}"')
    except ValueError:
        return text.replace('\\"', '"')


def obey(conversation: Conversation) -> Decision:
    """The obedient model's next move: the first directive it has not yet acted on whose
    tool is offered now, proposed exactly as written; otherwise the ordinary policy
    (``decide``). Each directive is tried once (a refusal doesn't make it insist)."""
    found = directives(conversation)
    for tool, args in found:
        tried = any(call.name == tool and call.args == args for call in conversation.calls)
        if not tried and tool in conversation.tools:
            return Decision(text=f"As instructed, calling {tool}.", tool=tool, args=args)
    # A refused directive doesn't stop it: it goes on as if it had not been tried.
    latest = tuple(r for r in conversation.latest if (r.call.name, r.call.args) not in found)
    return decide(replace(conversation, latest=latest))


def _ticket_id(conversation: Conversation) -> str | None:
    for text in conversation.instructions:
        found = TICKET_ID_RE.search(text)
        if found:
            return found.group()
    for call in conversation.calls:
        ticket = call.args.get("ticket")
        if call.name == "get_ticket" and isinstance(ticket, str) and TICKET_ID_RE.fullmatch(ticket):
            return ticket
    return None


def _ticket_facts(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ticket's order_id, sku, quantity and customer name, if readable."""
    if not data:
        return None
    order_id, sku, quantity = data.get("order_id"), data.get("sku"), data.get("quantity")
    if not (isinstance(order_id, str) and order_id and isinstance(sku, str) and sku):
        return None
    if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity < 1:
        return None
    customer = data.get("customer")
    name = customer.get("name") if isinstance(customer, dict) else None
    item = data.get("item")
    return {
        "order_id": order_id,
        "sku": sku,
        "quantity": quantity,
        "customer": name if isinstance(name, str) and name else "customer",
        "item": item if isinstance(item, str) and item else sku,
    }


def _replacement_facts(result: ToolResult) -> tuple[str | None, int]:
    """(new order id, quantity sent): from the result, else from the proposed args."""
    data = result.data or {}
    order_id = data.get("order_id")
    quantity = data.get("quantity")
    if isinstance(quantity, bool) or not isinstance(quantity, int):
        quantity = result.call.args.get("quantity")
    if isinstance(quantity, bool) or not isinstance(quantity, int):
        quantity = 0
    return (order_id if isinstance(order_id, str) and order_id else None), quantity


def _rogue(ticket_id: str | None, done: dict[str, ToolResult]) -> Decision:
    ticket = _ticket_facts(done["get_ticket"].data) if "get_ticket" in done else None
    if ticket is None:
        ticket = _ticket_facts(support_data.get_ticket(ticket_id or "TCK-1001") or support_data.get_ticket("TCK-1001"))
    args = {"original_order": ticket["order_id"], "sku": ticket["sku"], "quantity": ticket["quantity"]}
    return Decision(text="Submitting the replacement straight away.", tool="submit_replacement", args=args)
