"""The sandbox as the model providers and the support desk, driven over HTTP
by the official ``openai`` and ``anthropic`` SDKs (retries off).

One sandbox process (``Processes.sandbox()``, tests/support/procs.py) serves the module; each test starts
from ``POST /_reset``. The tests play the runtime's part by hand: they run the
tools the model proposes against the sandbox and feed the results back in each
provider's own format.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
import pytest

from tests.support.procs import http
from workflows import orders as order_catalogue

TICKETS = ["TCK-1001", "TCK-1002", "TCK-1003", "TCK-1004", "TCK-1005"]
SYSTEM = "You are the support agent of a homeware shop. Resolve the customer's ticket with the tools you have."
OBJECT = {"type": "object", "additionalProperties": False}
TOOL_SPECS = {
    "get_ticket": ("Read a support ticket.", {"ticket": {"type": "string"}}),
    "lookup_order": ("Look up an order.", {"order": {"type": "string"}}),
    "check_stock": ("Units available for a SKU.", {"sku": {"type": "string"}}),
    "submit_replacement": (
        "Submit a replacement order (needs a manager's approval).",
        {"original_order": {"type": "string"}, "sku": {"type": "string"}, "quantity": {"type": "integer"}},
    ),
    "reply_to_customer": ("Answer the customer (the runtime writes the text).", {"ticket": {"type": "string"}}),
}
ALL_TOOLS = tuple(TOOL_SPECS)
READ_TOOLS = ("get_ticket", "lookup_order", "check_stock")


def _schema(name: str) -> dict[str, Any]:
    properties = TOOL_SPECS[name][1]
    return {**OBJECT, "properties": properties, "required": sorted(properties)}


@pytest.fixture
def url(sandbox) -> str:
    """The test run's sandbox (tests/conftest.py), emptied for this test."""
    return sandbox.url


def stats(url: str) -> dict:
    return http().get(f"{url}/_stats", timeout=5).json()


def add_fault(url: str, **spec: Any) -> None:
    response = http().post(f"{url}/_faults", json=spec, timeout=5)
    assert response.status_code == 201, response.text


# -- a runtime played by hand ----------------------------------------------------


@dataclass
class Turn:
    text: str
    calls: list[tuple[str, str, dict[str, Any]]]  # (call id, tool, args)
    finished: bool  # finish_reason "stop" / stop_reason "end_turn"
    model: str
    input_tokens: int
    output_tokens: int


@dataclass
class OpenAIAgent:
    """A Chat Completions conversation through the ``openai`` SDK."""

    url: str
    ticket: str
    tools: tuple[str, ...] = ALL_TOOLS
    timeout: float = 10
    api_key: str = "sk-test-openai"
    messages: list[dict[str, Any]] = field(default_factory=list)

    endpoint = "/v1/chat/completions"
    sdk = openai

    def __post_init__(self) -> None:
        self.messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Please resolve support ticket {self.ticket}."},
        ]

    def client(self, key: str) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=f"{self.url}/v1",
            api_key=self.api_key,
            max_retries=0,
            timeout=self.timeout,
            default_headers={"X-Model-Call-Key": key},
        )

    def request(self, key: str, **extra: Any) -> openai.types.chat.ChatCompletion:
        tools = [
            {"type": "function", "function": {"name": n, "description": TOOL_SPECS[n][0], "parameters": _schema(n)}}
            for n in self.tools
        ]
        with self.client(key) as client:
            return client.chat.completions.create(model="gpt-test", messages=self.messages, tools=tools, **extra)

    def ask(self, key: str) -> Turn:
        response = self.request(key)
        [choice] = response.choices
        calls = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls or []]
        assistant: dict[str, Any] = {"role": "assistant", "content": choice.message.content}
        if calls:
            assistant["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in choice.message.tool_calls
            ]
        self.messages.append(assistant)
        assert choice.finish_reason == ("tool_calls" if calls else "stop")
        return Turn(
            text=choice.message.content or "",
            calls=calls,
            finished=choice.finish_reason == "stop",
            model=response.model,
            input_tokens=response.usage.prompt_tokens,
            output_tokens=response.usage.completion_tokens,
        )

    def give(self, call_id: str, result: dict[str, Any], *, is_error: bool = False) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)})


@dataclass
class AnthropicAgent:
    """A Messages conversation through the ``anthropic`` SDK."""

    url: str
    ticket: str
    tools: tuple[str, ...] = ALL_TOOLS
    timeout: float = 10
    api_key: str = "sk-ant-test"
    messages: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)

    endpoint = "/v1/messages"
    sdk = anthropic

    def __post_init__(self) -> None:
        self.messages = [{"role": "user", "content": f"Please resolve support ticket {self.ticket}."}]

    def client(self, key: str) -> anthropic.Anthropic:
        return anthropic.Anthropic(
            base_url=self.url,
            api_key=self.api_key,
            max_retries=0,
            timeout=self.timeout,
            default_headers={"X-Model-Call-Key": key},
        )

    def request(self, key: str, **extra: Any) -> anthropic.types.Message:
        if self.results:
            self.messages.append({"role": "user", "content": self.results})
            self.results = []
        tools = [{"name": n, "description": TOOL_SPECS[n][0], "input_schema": _schema(n)} for n in self.tools]
        with self.client(key) as client:
            return client.messages.create(
                model="claude-test", max_tokens=1024, system=SYSTEM, messages=self.messages, tools=tools, **extra
            )

    def ask(self, key: str) -> Turn:
        response = self.request(key)
        blocks = []
        for block in response.content:
            if block.type == "text":
                blocks.append({"type": "text", "text": block.text})
            elif block.type == "tool_use":
                blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
        self.messages.append({"role": "assistant", "content": blocks})
        calls = [(b["id"], b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]
        assert response.stop_reason == ("tool_use" if calls else "end_turn")
        assert response.type == "message" and response.role == "assistant"
        return Turn(
            text="".join(b["text"] for b in blocks if b["type"] == "text"),
            calls=calls,
            finished=response.stop_reason == "end_turn",
            model=response.model,
            input_tokens=response.usage.input_tokens,
            output_tokens=response.usage.output_tokens,
        )

    def give(self, call_id: str, result: dict[str, Any], *, is_error: bool = False) -> None:
        block = {"type": "tool_result", "tool_use_id": call_id, "content": json.dumps(result)}
        if is_error:
            block["is_error"] = True
        self.results.append(block)


AGENTS = {"openai": OpenAIAgent, "anthropic": AnthropicAgent}


def run_tool(url: str, tool: str, args: dict[str, Any], *, key: str, email: str | None) -> dict[str, Any]:
    """Run one proposed tool against the sandbox's services, as the runtime would."""
    session = http()
    if tool == "get_ticket":
        response = session.get(f"{url}/tickets/{args['ticket']}", timeout=5)
    elif tool == "lookup_order":
        response = session.get(f"{url}/orders/{args['order']}", timeout=5)
    elif tool == "check_stock":
        response = session.get(f"{url}/stock/{args['sku']}", timeout=5)
    elif tool == "submit_replacement":
        body = {"reference": key, **args}
        response = session.post(f"{url}/orders", json=body, headers={"Idempotency-Key": key}, timeout=5)
    elif tool == "reply_to_customer":
        body = {"channel": "email", "to": [email], "subject": f"Your ticket {args['ticket']}", "body": "templated"}
        response = session.post(f"{url}/notify", json=body, headers={"Idempotency-Key": key}, timeout=5)
    else:
        raise AssertionError(f"unknown tool {tool}")
    return response.json()


@dataclass
class Transcript:
    keys: list[str]
    proposals: list[tuple[str, dict[str, Any]]]
    turns: list[Turn]


def converse(agent, url: str, *, prefix: str, rounds: int = 10) -> Transcript:
    """Ask, run every proposed tool, feed the results back, until the model stops."""
    keys, proposals, turns = [], [], []
    email = None
    for n in range(1, rounds + 1):
        key = f"{prefix}:agent:r{n}:c1"
        turn = agent.ask(key)
        keys.append(key)
        turns.append(turn)
        if turn.finished:
            return Transcript(keys, proposals, turns)
        for call_id, tool, args in turn.calls:
            proposals.append((tool, args))
            result = run_tool(url, tool, args, key=f"{prefix}:{tool}", email=email)
            if tool == "get_ticket":
                email = result["customer"]["email"]
            agent.give(call_id, result)
    raise AssertionError(f"no final answer after {rounds} rounds: {proposals}")


# -- support data ------------------------------------------------------------------


def test_tickets_orders_and_stock_are_served_and_counted(url):
    session = http()
    ticket = session.get(f"{url}/tickets/TCK-1001", timeout=5)
    order = session.get(f"{url}/orders/ORD-1001", timeout=5)
    stock = session.get(f"{url}/stock/SKU-MUG-01", timeout=5)

    assert ticket.status_code == 200
    assert ticket.json() == {
        "ticket_id": "TCK-1001",
        "status": "open",
        "opened_on": "2026-08-07",
        "customer": {"id": "CUST-0042", "name": "Ana Pereira", "email": "ana.pereira@example.com"},
        "order_id": "ORD-1001",
        "sku": "SKU-MUG-01",
        "item": "Stoneware mug, blue",
        "quantity": 2,
        "subject": "Two mugs arrived broken",
        "message": ticket.json()["message"],
    }
    assert "broken" in ticket.json()["message"]
    assert order.json()["items"][0] == {
        "sku": "SKU-MUG-01",
        "name": "Stoneware mug, blue",
        "qty": 4,
        "unit_price": "12.50",
    }
    assert stock.json() == {"sku": "SKU-MUG-01", "name": "Stoneware mug, blue", "available": 25}
    for path in ("/tickets/TCK-0000", "/orders/ORD-9999", "/stock/SKU-NOPE"):
        missing = session.get(url + path, timeout=5)
        assert missing.status_code == 404, path
        assert "unknown" in missing.json()["error"]
    assert session.post(f"{url}/tickets/TCK-1001", json={}, timeout=5).status_code == 405
    endpoints = stats(url)["endpoints"]
    assert endpoints["/tickets/TCK-1001"] == {"calls": 1, "effects": 0}
    assert endpoints["/stock/SKU-MUG-01"] == {"calls": 1, "effects": 0}
    assert endpoints["/tickets/TCK-0000"] == {"calls": 1, "effects": 0}


def test_every_ticket_matches_its_order_and_the_stock_has_a_branch(url):
    session = http()
    available = {}
    for ticket_id in TICKETS:
        ticket = session.get(f"{url}/tickets/{ticket_id}", timeout=5).json()
        order = session.get(f"{url}/orders/{ticket['order_id']}", timeout=5).json()
        assert ticket["customer"] == order["customer"]
        assert ticket["sku"] in [item["sku"] for item in order["items"]]
        assert ticket["quantity"] >= 1
        available[ticket_id] = session.get(f"{url}/stock/{ticket['sku']}", timeout=5).json()["available"]
    assert available["TCK-1002"] == 0  # out of stock
    assert 0 < available["TCK-1004"] < 4  # fewer than the 4 broken


def test_past_orders_are_the_workflow_catalogue(url):
    """The sandbox keeps a copy of workflows/orders.py's past orders: they must agree."""
    for order_id in order_catalogue.known_orders():
        served = http().get(f"{url}/orders/{order_id}", timeout=5).json()
        expected = order_catalogue.get_order(order_id)
        expected.pop("damage")
        assert served == expected


def test_faults_apply_to_the_support_endpoints(url):
    add_fault(url, endpoint="/tickets/{id}", fault="error_500")
    add_fault(url, endpoint="/stock/SKU-MUG-01", fault="rate_limit", retry_after=3)
    session = http()

    failed = session.get(f"{url}/tickets/TCK-1002", timeout=5)
    limited = session.get(f"{url}/stock/SKU-MUG-01", timeout=5)
    other_sku = session.get(f"{url}/stock/SKU-PLT-02", timeout=5)

    assert (failed.status_code, failed.json()["fault"]) == (500, "error_500")
    assert (limited.status_code, limited.headers["Retry-After"]) == (429, "3")
    assert other_sku.status_code == 200
    assert session.get(f"{url}/tickets/TCK-1002", timeout=5).status_code == 200
    assert stats(url)["endpoints"]["/tickets/TCK-1002"]["calls"] == 2
    for endpoint, fault in [("/tickets", "error_500"), ("/orders/{id}", "rogue_tool_call")]:
        refused = session.post(f"{url}/_faults", json={"endpoint": endpoint, "fault": fault}, timeout=5)
        assert refused.status_code == 400, endpoint
        assert "error" in refused.json()


# -- a whole conversation through each SDK ------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_support_conversation_for_tck_1001_through_the_sdk(url, provider):
    agent = AGENTS[provider](url, "TCK-1001")

    transcript = converse(agent, url, prefix=f"RUN_0001:{provider}")

    assert [tool for tool, _ in transcript.proposals] == [
        "get_ticket",
        "lookup_order",
        "check_stock",
        "submit_replacement",
        "reply_to_customer",
    ]
    assert transcript.proposals[0][1] == {"ticket": "TCK-1001"}
    assert transcript.proposals[1][1] == {"order": "ORD-1001"}
    assert transcript.proposals[2][1] == {"sku": "SKU-MUG-01"}
    assert transcript.proposals[3][1] == {"original_order": "ORD-1001", "sku": "SKU-MUG-01", "quantity": 2}
    assert transcript.proposals[4][1] == {"ticket": "TCK-1001"}  # the runtime writes the text
    final = transcript.turns[-1]
    assert final.finished and "TCK-1001" in final.text and "ORD-9001" in final.text
    assert all(turn.model == f"{'gpt' if provider == 'openai' else 'claude'}-test-sandbox" for turn in transcript.turns)
    assert all(turn.input_tokens > 0 and turn.output_tokens > 0 for turn in transcript.turns)
    assert transcript.turns[-1].input_tokens > transcript.turns[0].input_tokens  # the conversation grew

    counted = stats(url)
    assert counted["endpoints"][agent.endpoint] == {"calls": 6, "effects": 0}
    for key in transcript.keys:
        assert counted["keys"][key] == {"calls": 1, "effects": 0}
    assert counted["endpoints"]["/orders"] == {"calls": 1, "effects": 1}
    assert counted["endpoints"]["/notify"] == {"calls": 1, "effects": 1}
    [notification] = http().get(f"{url}/notifications", timeout=5).json()["notifications"]
    assert notification["to"] == ["ana.pereira@example.com"]


def test_both_providers_decide_alike(url):
    """The same policy behind both wire formats: same proposals, same texts."""
    transcripts = {}
    for provider, agent in AGENTS.items():
        assert http().post(f"{url}/_reset", timeout=5).status_code == 200  # both get ORD-9001
        transcripts[provider] = converse(agent(url, "TCK-1005"), url, prefix=f"RUN_0002:{provider}")

    assert transcripts["openai"].proposals == transcripts["anthropic"].proposals
    assert transcripts["openai"].turns[-1].text == transcripts["anthropic"].turns[-1].text
    assert transcripts["openai"].proposals[3] == (
        "submit_replacement",
        {"original_order": "ORD-1005", "sku": "SKU-LID-41", "quantity": 1},
    )


@pytest.mark.parametrize(
    "provider, ticket, replacement, final_says",
    [
        ("openai", "TCK-1002", None, "out of stock"),
        ("anthropic", "TCK-1002", None, "out of stock"),
        ("openai", "TCK-1003", {"original_order": "ORD-1003", "sku": "SKU-GLS-20", "quantity": 3}, "ORD-9001"),
        ("anthropic", "TCK-1004", {"original_order": "ORD-1004", "sku": "SKU-TWL-30", "quantity": 2}, "2 × SKU-TWL-30"),
    ],
)
def test_policy_branches_on_stock(url, provider, ticket, replacement, final_says):
    """Out of stock: no replacement, the customer is told. Short stock: only what
    is available. An over-claim (3 sets of 2 ordered) is proposed as claimed:
    clamping it is the runtime's job."""
    transcript = converse(AGENTS[provider](url, ticket), url, prefix=f"RUN_0003:{ticket}")

    proposed = dict(transcript.proposals)
    assert proposed.get("submit_replacement") == replacement
    assert proposed["reply_to_customer"] == {"ticket": ticket}
    assert transcript.turns[-1].finished and final_says in transcript.turns[-1].text
    assert stats(url)["endpoints"].get("/orders", {"effects": 0})["effects"] == (1 if replacement else 0)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_tool_that_is_not_offered_is_never_proposed(url, provider):
    agent = AGENTS[provider](url, "TCK-1001", tools=READ_TOOLS)

    transcript = converse(agent, url, prefix="RUN_0004")

    assert [tool for tool, _ in transcript.proposals] == list(READ_TOOLS)
    assert "submit_replacement" in transcript.turns[-1].text and "not offered" in transcript.turns[-1].text


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_refused_proposal_is_not_proposed_again(url, provider):
    """The runtime (or the manager) refuses submit_replacement: the policy stops
    with the reason instead of asking again."""
    agent = AGENTS[provider](url, "TCK-1001")
    for n, tool in enumerate(READ_TOOLS, start=1):
        [(call_id, proposed, args)] = agent.ask(f"RUN_0005:r{n}").calls
        assert proposed == tool
        agent.give(call_id, run_tool(url, tool, args, key="unused", email=None))
    [(call_id, proposed, _)] = agent.ask("RUN_0005:r4").calls
    assert proposed == "submit_replacement"
    agent.give(call_id, {"error": "rejected by the manager"}, is_error=True)

    final = agent.ask("RUN_0005:r5")

    assert final.finished and not final.calls
    assert "rejected by the manager" in final.text


# -- faults through the SDKs ----------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize(
    "fault, status, error_class",
    [
        ("error_500", 500, "InternalServerError"),
        ("error_400", 400, "BadRequestError"),
        ("error_403", 403, "PermissionDeniedError"),
        ("rate_limit", 429, "RateLimitError"),
    ],
)
def test_faults_raise_the_sdk_own_errors(url, provider, fault, status, error_class):
    agent = AGENTS[provider](url, "TCK-1001")
    add_fault(url, endpoint=agent.endpoint, fault=fault, retry_after=2)

    with pytest.raises(getattr(agent.sdk, error_class)) as raised:
        agent.ask("RUN_0006:r1")

    error = raised.value
    assert error.status_code == status
    body = error.response.json()
    if provider == "openai":
        assert set(body["error"]) == {"message", "type", "param", "code"}
        assert body["error"]["message"].startswith("injected")
    else:
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
        assert (
            error.type
            == {
                500: "api_error",
                400: "invalid_request_error",
                403: "permission_error",
                429: "rate_limit_error",
            }[status]
        )
    if fault == "rate_limit":
        assert error.response.headers["retry-after"] == "2"
    assert agent.ask("RUN_0006:r1").calls[0][1] == "get_ticket"  # the fault was used up
    assert stats(url)["keys"]["RUN_0006:r1"] == {"calls": 2, "effects": 0}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_timeout_fault_is_the_sdk_timeout(url, provider):
    agent = AGENTS[provider](url, "TCK-1001", timeout=0.5)
    add_fault(url, endpoint=agent.endpoint, fault="timeout", hang_seconds=2)

    with pytest.raises(agent.sdk.APITimeoutError):
        agent.ask("RUN_0007:r1")

    assert stats(url)["keys"]["RUN_0007:r1"] == {"calls": 1, "effects": 0}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_commit_then_hang_answers_the_computed_response_late(url, provider):
    """The response is computed and counted, then the connection hangs: a short
    client timeout loses it, a patient client gets it."""
    impatient = AGENTS[provider](url, "TCK-1001", timeout=0.3)
    add_fault(url, endpoint=impatient.endpoint, fault="commit_then_hang", hang_seconds=1)
    with pytest.raises(impatient.sdk.APITimeoutError):
        impatient.ask("RUN_0008:r1")
    assert stats(url)["keys"]["RUN_0008:r1"] == {"calls": 1, "effects": 0}

    patient = AGENTS[provider](url, "TCK-1001", timeout=10)
    add_fault(url, endpoint=patient.endpoint, fault="commit_then_hang", hang_seconds=1)
    started = time.monotonic()
    turn = patient.ask("RUN_0008:r1")

    assert time.monotonic() - started >= 1
    assert turn.calls[0][1:] == ("get_ticket", {"ticket": "TCK-1001"})
    assert stats(url)["keys"]["RUN_0008:r1"] == {"calls": 2, "effects": 0}


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_rogue_tool_call_proposes_submit_replacement_whatever_the_state(url, provider):
    """The sandbox side of S29: with only read-only tools offered and nothing
    read yet, the rogue response proposes submit_replacement; refused, the
    conversation goes on as if it had not happened."""
    agent = AGENTS[provider](url, "TCK-1001", tools=READ_TOOLS)
    add_fault(url, endpoint=agent.endpoint, fault="rogue_tool_call")

    rogue = agent.ask("RUN_0009:r1")
    [(call_id, tool, args)] = rogue.calls
    assert (tool, args) == ("submit_replacement", {"original_order": "ORD-1001", "sku": "SKU-MUG-01", "quantity": 2})
    agent.give(call_id, {"error": "submit_replacement is not allowed now"}, is_error=True)

    after = agent.ask("RUN_0009:r2")

    assert [(t, a) for _, t, a in after.calls] == [("get_ticket", {"ticket": "TCK-1001"})]
    assert stats(url)["endpoints"][agent.endpoint] == {"calls": 2, "effects": 0}
    assert http().get(f"{url}/_faults", timeout=5).json() == {"faults": []}


# -- bad requests and auth ---------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_malformed_conversations_are_400_in_the_provider_shape(url, provider):
    agent = AGENTS[provider](url, "TCK-1001")
    [(call_id, _, _)] = agent.ask("RUN_0010:r1").calls
    if provider == "openai":
        agent.messages.append({"role": "tool", "tool_call_id": "call_nobody", "content": "{}"})
    else:
        agent.give("toolu_nobody", {})

    with pytest.raises(agent.sdk.BadRequestError) as raised:
        agent.ask("RUN_0010:r2")

    assert "call_nobody" in str(raised.value) or "toolu_nobody" in str(raised.value)
    counted = stats(url)["keys"]
    assert counted["RUN_0010:r2"] == {"calls": 1, "effects": 0}


@pytest.mark.parametrize(
    "path, body, expect",
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "TCK-1001"}]}, "model"),
        ("/v1/chat/completions", {"model": "m", "messages": []}, "messages"),
        ("/v1/chat/completions", {"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "role"),
        (
            "/v1/chat/completions",
            {"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]},
            "stream",
        ),
        (
            "/v1/chat/completions",
            {
                "model": "m",
                "messages": [
                    {"role": "user", "content": "TCK-1001"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "c1", "type": "function", "function": {"name": "get_ticket", "arguments": "{}"}}
                        ],
                    },
                    {"role": "user", "content": "and?"},
                ],
            },
            "not answered",
        ),
        (
            "/v1/chat/completions",
            {"model": "m", "messages": [{"role": "user", "content": "x"}], "tools": [{}]},
            "tools",
        ),
        ("/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
        ("/v1/messages", {"model": "m", "max_tokens": 9, "messages": [{"role": "system", "content": "x"}]}, "role"),
        (
            "/v1/messages",
            {
                "model": "m",
                "max_tokens": 9,
                "messages": [
                    {"role": "user", "content": "TCK-1001"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "get_ticket", "input": {}}],
                    },
                ],
            },
            "not answered",
        ),
        (
            "/v1/messages",
            {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "t"}]},
            "input_schema",
        ),
    ],
)
def test_requests_a_provider_would_refuse(url, path, body, expect):
    response = http().post(url + path, json=body, headers={"X-Model-Call-Key": "bad"}, timeout=5)

    assert response.status_code == 400
    error = response.json()["error"]
    assert expect in error["message"]
    assert error["type"] == "invalid_request_error"
    if path == "/v1/messages":
        assert response.json()["type"] == "error"
    assert stats(url)["keys"]["bad"] == {"calls": 1, "effects": 0}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
def test_malformed_json_and_wrong_method_answer_in_the_provider_shape(url, path):
    session = http()
    malformed = session.post(
        url + path, data="{nope", headers={"Content-Type": "application/json", "X-Model-Call-Key": "k"}, timeout=5
    )
    wrong_method = session.get(url + path, timeout=5)

    for response, status in [(malformed, 400), (wrong_method, 405)]:
        assert response.status_code == status
        body = response.json()
        assert body["error"]["message"]
        assert ("type" in body) == (path == "/v1/messages")
    assert stats(url)["keys"]["k"] == {"calls": 1, "effects": 0}


def test_no_key_is_fine_and_no_key_is_recorded(url, sandbox):
    secret_openai, secret_anthropic = "sk-live-DO-NOT-STORE-1", "sk-ant-DO-NOT-STORE-2"
    OpenAIAgent(url, "TCK-1001", api_key=secret_openai).ask("RUN_0011:r1")
    AnthropicAgent(url, "TCK-1001", api_key=secret_anthropic).ask("RUN_0011:r2")
    bare = http().post(
        f"{url}/v1/chat/completions",
        json={"model": "local", "messages": [{"role": "user", "content": "TCK-1001"}]},
        timeout=5,
    )

    assert bare.status_code == 200
    assert bare.json()["choices"][0]["finish_reason"] == "stop"  # no tools offered
    assert "get_ticket" in bare.json()["choices"][0]["message"]["content"]
    stored = json.dumps(stats(url)).encode()
    for path in sandbox.tmp.glob("sandbox.sqlite3*"):
        stored += path.read_bytes()
    assert b"DO-NOT-STORE" not in stored
    assert set(stats(url)["keys"]) == {"RUN_0011:r1", "RUN_0011:r2"}
