"""Agents and tools from elsewhere, as an agent step sees them: a framework's agent (a
pydantic-ai ``Agent``, an OpenAI Agents SDK ``Agent``) or an MCP server's tools, each
tool a keel ``Tool`` checked against its own JSON Schema (``SchemaArgs``, fail closed).

The step kinds that run them (``executions.agent.foreign``) declare with
``foreign_agent`` and build their tools with ``foreign_tool``: a tool named in
``effects`` goes through the ledger under ``key_fn(args, ctx)``, the author's business
key; one named in ``approvals`` parks at an approval of the effective arguments'
document and goes out keyed by that approval (one approval, one effect); any other is
a read, run at once and recorded. The tool's own code runs wherever the runtime sends
it (``calling``); inside an effect, ``effect_key()`` is the key to hand the provider.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from .specs import GateSpec
from .tools import AgentSpec, Budget, SchemaArgs, Tool
from .workflow import Effect

JSON = dict[str, Any]
KeyFn = Callable[[JSON, Any], str]  # key_fn(args, ctx) → the effect's business key
TOOL_NAME_MAX = 60  # what the ledger keeps of a tool's name (Action.type)

# How the tool being handled is run: fn(name, args, key) → its JSON result; key is the
# ledger key for an effect, None for a read. Set by the runtime around one call.
_calling: ContextVar[Callable[[str, JSON, str | None], JSON] | None] = ContextVar("keel_calling", default=None)
_effect_key: ContextVar[str | None] = ContextVar("keel_effect_key", default=None)


def effect_key() -> str:
    """Inside a framework's tool that runs as an effect: its ledger key — send it to the
    provider as the idempotency key, so a resend after a crash is recognised."""
    key = _effect_key.get()
    if key is None:
        raise RuntimeError("effect_key() is only known inside a tool keel runs as an effect")
    return key


@contextmanager
def calling(run: Callable[[str, JSON, str | None], JSON]) -> Iterator[None]:
    """While a visit handles one of a framework's tool calls: how the tool runs."""
    token = _calling.set(run)
    try:
        yield
    finally:
        _calling.reset(token)


@contextmanager
def keyed(key: str | None) -> Iterator[None]:
    """While a framework's tool runs: the effect's ledger key (None for a read)."""
    token = _effect_key.set(key)
    try:
        yield
    finally:
        _effect_key.reset(token)


def _run(name: str, args: JSON, key: str | None) -> JSON:
    run = _calling.get()
    assert run is not None, f"{name} runs only while a visit handles its call"
    return run(name, args, key)


def foreign_tool(
    name: str,
    description: str,
    schema: JSON,
    *,
    key_fn: KeyFn | None = None,
    approval: GateSpec | None = None,
    call: Callable[[str, JSON, str | None], JSON] = _run,
    lookup: Callable[[str, JSON], JSON | None] | None = None,
    honors_key: bool = True,
) -> Tool:
    """A framework's (or an MCP server's) tool as a keel ``Tool``: ``call(name, args, key)``
    runs it (key None for a read); ``lookup(key, args)`` finds an effect's outcome after a
    crash; ``honors_key``: the provider deduplicates by the key, so an unknown outcome is
    sent again under it."""
    effect = key_fn is not None or approval is not None

    def run(args: JSON, progress: Any, key: str | None = None) -> Any:
        if key is None:
            return call(name, args, None)
        # An approved call goes out under the approval's key (executions.agent.steps.grant_key).
        business = key if approval is not None or key_fn is None else key_fn(args, _context.get())
        return Effect(key=business, args=args, call=lambda a, k: call(name, a, k), lookup=lookup, honors_key=honors_key)

    return Tool(name=name, description=description, args=SchemaArgs(schema), run=run, effect=effect, approval=approval)


# How a tool's call asks a person (set by the runtime around one call): ask(question key,
# message, schema) → the answer given, or InputNeeded (the execution waits for it).
_asking: ContextVar[Callable[[str, str, Any], Any] | None] = ContextVar("keel_asking", default=None)


@contextmanager
def asking(ask: Callable[[str, str, Any], Any]) -> Iterator[None]:
    """While a visit handles one tool call: how its provider's questions reach a person."""
    token = _asking.set(ask)
    try:
        yield
    finally:
        _asking.reset(token)


def ask_person(question: str, message: str, schema: Any) -> Any:
    """Inside a tool's call: the answer a person gave to ``question`` (the provider's key
    for it), or InputNeeded: the execution waits for one and the call is made again."""
    ask = _asking.get()
    if ask is None:
        raise RuntimeError("a tool can ask a person only while an agent step handles its call")
    return ask(question, message, schema)


# The step context of the visit handling the call, for a key_fn (set by the runtime).
_context: ContextVar[Any] = ContextVar("keel_step_context", default=None)


@contextmanager
def in_step(ctx: Any) -> Iterator[None]:
    token = _context.set(ctx)
    try:
        yield
    finally:
        _context.reset(token)


@dataclass(frozen=True, kw_only=True)
class ForeignAgentSpec(AgentSpec):
    """An agent step whose loop is a framework's: ``agent`` is the framework's agent,
    ``instruction(ctx)`` its user prompt, ``tools`` its tools as keel sees them."""

    framework: str = ""
    agent: Any = None


def foreign_agent(
    flow: Any,
    name: str,
    *,
    framework: str,
    agent: Any,
    prompt: Callable[[Any], str],
    tools: list[tuple[str, str, JSON]],
    effects: dict[str, KeyFn] | None,
    approvals: dict[str, GateSpec] | None,
    extra: list[Tool] | None,
    budget: Budget | None,
    offline_policy: Callable | None,
) -> ForeignAgentSpec:
    """The spec of a framework's agent step; refuses (ValueError naming the workflow, the
    step and the tool) an effect or approval of a tool the agent doesn't have."""
    effects, approvals = dict(effects or {}), dict(approvals or {})
    have = {tool_name for tool_name, _, _ in tools} | {t.name for t in extra or []}
    where = f"{flow.name} v{flow.version}: {framework} agent {name}"
    for tool_name in sorted(set(effects) | set(approvals)):
        if tool_name not in have:
            raise ValueError(f"{where} has no tool {tool_name!r} (it has {', '.join(sorted(have)) or 'none'})")
    for tool_name in sorted(have):
        if len(tool_name) > TOOL_NAME_MAX:
            raise ValueError(f"{where}: the tool name {tool_name[:80]!r} is longer than {TOOL_NAME_MAX} characters")
    for tool_name, approval in approvals.items():
        if getattr(approval, "on_reject", None):
            raise ValueError(f"{where}: the approval of {tool_name} can't take on_reject (a rejection is told to it)")
    keel_tools = [
        foreign_tool(tool_name, description, schema, key_fn=effects.get(tool_name), approval=approvals.get(tool_name))
        for tool_name, description, schema in tools
    ]
    return ForeignAgentSpec(
        prompt_id=f"{flow.name}.{name}",
        instruction=prompt,
        tools=(*keel_tools, *(extra or [])),
        budget=budget or Budget(),
        offline_policy=offline_policy,
        framework=framework,
        agent=agent,
    )
