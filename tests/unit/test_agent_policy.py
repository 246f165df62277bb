"""The sandbox's support-agent policy as pure logic: the rows of its decision
table that a well-behaved conversation never reaches (see sandbox/agent_policy.py)."""

from __future__ import annotations

import json

import pytest

from sandbox.agent_policy import TOOL_NAMES, Conversation, Decision, ToolCall, ToolResult, decide
from sandbox.providers import ProviderError, anthropic_read, openai_read


def conversation(*results: tuple[str, dict, object], text: str = "Resolve TCK-1001", tools=TOOL_NAMES) -> Conversation:
    """A conversation whose tool results are ``(tool, args, result)`` in order; the
    last one answers the latest assistant turn."""
    done = tuple(
        ToolResult(call=ToolCall(id=f"c{n}", name=tool, args=args), content=json.dumps(result))
        for n, (tool, args, result) in enumerate(results)
    )
    return Conversation(
        instructions=(text,),
        calls=tuple(r.call for r in done),
        results=done,
        latest=done[-1:],
        tools=frozenset(tools),
    )


TICKET = {"order_id": "ORD-1001", "sku": "SKU-MUG-01", "quantity": 2, "customer": {"name": "Ana"}, "item": "mug"}


def test_no_ticket_id_asks_for_one():
    decision = decide(conversation(text="Hello, something broke."))

    assert decision.tool is None
    assert "TCK-1001" in decision.text  # shows the expected form


def test_the_first_ticket_id_in_the_instructions_wins():
    decision = decide(conversation(text="Ticket TCK-1004, not TCK-1001."))

    assert (decision.tool, decision.args) == ("get_ticket", {"ticket": "TCK-1004"})


@pytest.mark.parametrize(
    "ticket",
    [
        "not json",
        {"order_id": "ORD-1001", "sku": "SKU-MUG-01"},
        {**TICKET, "quantity": 0},
        {**TICKET, "quantity": True},
    ],
)
def test_an_unreadable_ticket_result_stops(ticket):
    result = ToolResult(call=ToolCall(id="c0", name="get_ticket", args={}), content=ticket)
    if not isinstance(ticket, str):
        result = ToolResult(call=result.call, content=json.dumps(ticket))
    talk = Conversation(
        instructions=("TCK-1001",),
        calls=(result.call,),
        results=(result,),
        latest=(result,),
        tools=frozenset(TOOL_NAMES),
    )

    decision = decide(talk)

    assert decision.tool is None and "does not say" in decision.text


def test_a_failed_read_stops_instead_of_looping():
    decision = decide(conversation(("get_ticket", {"ticket": "TCK-1001"}, {"error": "unknown ticket"})))

    assert decision == Decision(
        text="get_ticket failed for TCK-1001: unknown ticket. Stopping here so a person can take over."
    )


def test_an_unreadable_stock_result_stops():
    decision = decide(
        conversation(
            ("get_ticket", {}, TICKET),
            ("lookup_order", {}, {"order_id": "ORD-1001"}),
            ("check_stock", {}, {"sku": "SKU-MUG-01", "available": "lots"}),
        )
    )

    assert decision.tool is None and "how many are available" in decision.text


def test_an_older_failure_does_not_block_a_later_proposal():
    """A refused rogue proposal early on doesn't stop the real one later."""
    decision = decide(
        conversation(
            ("submit_replacement", {}, {"error": "not allowed now"}),
            ("get_ticket", {}, TICKET),
            ("lookup_order", {}, {"order_id": "ORD-1001"}),
            ("check_stock", {}, {"available": 1}),
        )
    )

    assert (decision.tool, decision.args) == (
        "submit_replacement",
        {"original_order": "ORD-1001", "sku": "SKU-MUG-01", "quantity": 1},
    )


def test_the_reply_names_only_the_ticket():
    decision = decide(
        conversation(
            ("get_ticket", {}, TICKET),
            ("lookup_order", {}, {"shipping_address": {"city": "Porto"}}),
            ("check_stock", {}, {"available": 25}),
            ("submit_replacement", {"quantity": 2}, {"order_id": "ORD-9042", "quantity": 1}),
        )
    )

    assert (decision.tool, decision.args) == ("reply_to_customer", {"ticket": "TCK-1001"})  # the runtime writes it


def test_the_same_conversation_gives_the_same_decision():
    talk = conversation(("get_ticket", {}, TICKET))

    assert decide(talk) == decide(talk)


def test_tool_choice_none_offers_no_tool():
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "TCK-1001"}],
        "tools": [{"type": "function", "function": {"name": "get_ticket", "parameters": {}}}],
        "tool_choice": "none",
    }
    anthropic_body = {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "TCK-1001"}],
        "tools": [{"name": "get_ticket", "input_schema": {}}],
        "tool_choice": {"type": "none"},
    }

    assert openai_read(body).tools == frozenset()
    assert anthropic_read(anthropic_body).tools == frozenset()
    assert openai_read({**body, "tool_choice": "auto"}).tools == {"get_ticket"}


def test_tool_results_must_follow_their_call_in_the_next_turn():
    call = {"id": "c1", "type": "function", "function": {"name": "get_ticket", "arguments": "{}"}}
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "TCK-1001"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "{}"},
            {"role": "tool", "tool_call_id": "c1", "content": "{}"},
        ],
    }

    with pytest.raises(ProviderError, match="does not answer"):
        openai_read(body)
    assert len(openai_read({**body, "messages": body["messages"][:3]}).results) == 1
