"""An MCP server's tools as keel tools, through the official ``mcp`` SDK.

    bookings = McpServer("bookings", command=[sys.executable, "server.py"], env={"BOOKINGS_FILE": path})
    flow.agent("book", …, tools=mcp_tools(bookings, effects={"book_room": key_fn},
                                           lookups={"book_room": "find_booking"}))

``mcp_tools`` lists the server's tools when the workflow module loads (a tool named in
``effects``, ``approvals``, ``lookups`` or ``only`` that the server doesn't list is
refused then, naming it) and makes each a keel ``Tool`` whose arguments are checked
against the server's own input schema (fail closed). A read is called at once; an
effect goes through the ledger, its key sent in the call's ``_meta``
(``keel/idempotency_key``); after a crash its outcome is looked up with the tool named
in ``lookups`` (called with ``{"key": …}``; a result with a non-empty ``found`` is the
receipt), and sent again under the same key only when the server deduplicates by it
(``McpServer(honors_key=True)``), else it needs a person (an unknown outcome).

Each call opens its own connection (a stdio server is started for it), so no worker
holds a session across a crash. A server that won't start or vanishes is a transient
failure (its stderr, redacted, is the evidence) — for an effect already sent, an
unknown outcome. A server that asks for input mid-call (an elicitation, the
2026-07-28 ``input_required`` round or the older mid-call request) is answered from
what a person answered (``foreign.ask_person``); nobody has yet: the call ends without
acting and the execution waits for the answer (``pending_input``).
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import json
import tempfile
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from ..errors import FailureKind, InputNeeded, StepFailure
from . import foreign
from .specs import GateSpec
from .tools import Tool

JSON = dict[str, Any]
KEY_META = "keel/idempotency_key"
STDERR_KEPT = 2000  # characters of a failed server's stderr kept as evidence


@dataclass(frozen=True)
class McpServer:
    """A server keel calls: ``command`` (argv; stdio, with ``env`` over a minimal
    environment) or ``url`` (streamable HTTP). ``timeout``: seconds one call may take.
    ``honors_key``: the server deduplicates calls by ``_meta["keel/idempotency_key"]``."""

    name: str
    command: tuple[str, ...] | list[str] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    timeout: float = 30
    honors_key: bool = False

    def __post_init__(self) -> None:
        if bool(self.command) == bool(self.url):
            raise ValueError(f"McpServer {self.name!r}: give a command=[…] (stdio) or a url= (HTTP), one of them")


def mcp_tools(
    server: McpServer,
    *,
    effects: dict[str, foreign.KeyFn] | None = None,
    approvals: dict[str, GateSpec] | None = None,
    lookups: dict[str, str] | None = None,
    only: list[str] | None = None,
) -> list[Tool]:
    """The server's tools (those in ``only``, else all but the lookups) as keel tools:
    ``effects`` through the ledger under ``key_fn(args, ctx)``, ``approvals`` parked at an
    approval of their effective arguments, the rest reads."""
    effects, approvals, lookups = dict(effects or {}), dict(approvals or {}), dict(lookups or {})
    listed = {t["name"]: t for t in _list(server)}
    named = {*effects, *approvals, *lookups, *lookups.values(), *(only or [])}
    missing = sorted(named - set(listed))
    if missing:
        raise ValueError(
            f"the MCP server {server.name} has no tool {', '.join(map(repr, missing))} "
            f"(it lists {', '.join(sorted(listed)) or 'none'})"
        )
    for tool in lookups:
        if tool not in effects and tool not in approvals:
            raise ValueError(f"MCP server {server.name}: lookups names {tool!r}, which is not an effect")
    chosen = only if only is not None else [n for n in listed if n not in set(lookups.values())]
    too_long = sorted(name for name in chosen if len(name) > foreign.TOOL_NAME_MAX)
    if too_long:
        raise ValueError(
            f"the MCP server {server.name}'s tool names {', '.join(n[:80] for n in too_long)} are over "
            f"{foreign.TOOL_NAME_MAX} characters (what the ledger keeps): leave them out with only=[…]"
        )

    def call(name: str, args: JSON, key: str | None) -> JSON:
        return _call(server, name, args, key=key, effect=name in effects or name in approvals)

    def lookup_with(tool: str | None) -> Callable[[str, JSON], JSON | None] | None:
        if tool is None:
            return None

        def lookup(key: str, args: JSON) -> JSON | None:
            answer = _call(server, tool, {"key": key}, key=None, effect=False)
            return answer.get("found") or None

        return lookup

    return [
        foreign.foreign_tool(
            name,
            listed[name]["description"],
            listed[name]["schema"],
            key_fn=effects.get(name),
            approval=approvals.get(name),
            call=call,
            lookup=lookup_with(lookups.get(name)),
            honors_key=server.honors_key,
        )
        for name in chosen
    ]


# --- the calls


def _list(server: McpServer) -> list[JSON]:
    async def listing(client: Any) -> list[JSON]:
        tools = (await client.list_tools()).tools
        return [{"name": t.name, "description": t.description or "", "schema": t.input_schema} for t in tools]

    try:
        return _connected(server, listing, asked=None)
    except StepFailure as failure:
        stderr = ((failure.evidence or {}).get("stderr") or "").strip()
        said = f"; it said: {stderr[-500:]}" if stderr else ""
        raise ValueError(f"can't list the tools of the MCP server {server.name}: {failure.message}{said}") from None


def _call(server: McpServer, tool: str, args: JSON, *, key: str | None, effect: bool) -> JSON:
    """One call of ``tool``; its result as JSON (StepFailure or InputNeeded otherwise)."""
    needed: list[InputNeeded] = []

    async def elicited(context: Any, params: Any) -> Any:
        import mcp_types as types

        message, schema = params.message, getattr(params, "requested_schema", None)
        if getattr(params, "mode", "form") != "form" or not _form_schema(schema):
            return types.ElicitResult(action="decline")  # a URL to open, or a form keel can't draw: no one is asked
        question = hashlib.sha256(json.dumps([tool, message, schema], sort_keys=True).encode()).hexdigest()[:16]
        try:
            answer = foreign.ask_person(question, message, schema)
        except InputNeeded as asked:
            needed.append(asked)  # the server is told "cancel": it ends the call without acting
            return types.ElicitResult(action="cancel")
        return types.ElicitResult(action="accept", content=answer)

    async def calling(client: Any) -> Any:
        return await client.call_tool(tool, args, meta={KEY_META: key} if key else None)

    result = _connected(server, calling, asked=elicited, effect=effect)
    if needed and result.is_error:  # nobody has answered its question: it did nothing, the execution waits
        raise needed[0]
    if result.is_error:
        text = _text(result)
        raise StepFailure(
            FailureKind.BUSINESS_REJECTION if effect else FailureKind.INVALID_INPUT,
            f"{server.name}.{tool} answered an error: {text[:500]}",
            evidence={"content": text[:STDERR_KEPT]},
        )
    if isinstance(result.structured_content, dict):
        return result.structured_content
    text = _text(result)
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"text": text}
    return parsed if isinstance(parsed, dict) else {"result": parsed}


def _form_schema(schema: Any) -> bool:
    """Whether ``schema`` is a form a person can fill: an object whose properties are each
    a JSON Schema of a string, number, integer or boolean (MCP's elicitation subset)."""
    import jsonschema

    if not isinstance(schema, dict) or not isinstance(schema.get("properties", {}), dict):
        return False
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError:
        return False
    return all(
        isinstance(prop, dict) and prop.get("type") in ("string", "number", "integer", "boolean")
        for prop in schema.get("properties", {}).values()
    )


def _text(result: Any) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


def _connected(
    server: McpServer,
    use: Callable[[Any], Coroutine[Any, Any, Any]],
    *,
    asked: Callable[..., Any] | None,
    effect: bool = False,
) -> Any:
    """``use(client)`` on a fresh connection to ``server``, on an event loop of its own.
    A failure before the call was sent is transient; after an effect was sent, unknown."""
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    sent = False

    with tempfile.TemporaryFile("w+") as errlog:

        async def session() -> Any:
            nonlocal sent
            if server.command:
                command, *args = server.command
                params = StdioServerParameters(command=command, args=list(args), env=dict(server.env) or None)
                target: Any = stdio_client(params, errlog=errlog)
            else:
                target = server.url
            client = Client(target, elicitation_callback=asked, read_timeout_seconds=server.timeout, cache=None)
            async with client:
                sent = True
                return await asyncio.wait_for(use(client), timeout=server.timeout)

        try:
            return _on_a_loop(session())
        except Exception as exc:  # the SDK's, the transport's, a process that died: all say the same
            inner = _unwrapped(exc)
            if isinstance(inner, InputNeeded | StepFailure):
                raise inner from None
            errlog.seek(0)
            stderr = errlog.read()[-STDERR_KEPT:]
            what = f"{type(inner).__name__}: {inner}"[:500]
            kind = FailureKind.OUTCOME_UNKNOWN if effect and sent else FailureKind.TRANSIENT
            raise StepFailure(
                kind,
                f"the MCP server {server.name} {'failed mid-call' if sent else 'did not start'}: {what}",
                evidence={"stderr": stderr, "error": what},
            ) from None


def _unwrapped(exc: BaseException) -> BaseException:
    """The first exception inside the task groups' exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _on_a_loop(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coroutine`` to its end from synchronous code: here, or on a thread of its own
    when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as exc:
            outcome["error"] = exc

    context = contextvars.copy_context()  # what the runtime set around the call (foreign.asking)
    thread = threading.Thread(target=context.run, args=(run,), name="keel-mcp")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
