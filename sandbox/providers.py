"""The wire formats of the two model providers the sandbox plays.

``OPENAI`` speaks Chat Completions (``POST /v1/chat/completions``) and
``ANTHROPIC`` speaks Messages (``POST /v1/messages``). Each reads a request
body into an :class:`~sandbox.agent_policy.Conversation`, renders a
:class:`~sandbox.agent_policy.Decision` as that provider's response, and
renders errors in that provider's error JSON.

A request the real API would refuse (missing ``model``, a tool result that
answers no tool call, a tool call left unanswered, ``stream: true``, …)
raises :class:`ProviderError`, answered 400 in the provider's error shape.
Parameters the policy does not need (temperature, max_tokens, …) are accepted
and ignored; ``tool_choice`` "none" (OpenAI) or ``{"type": "none"}``
(Anthropic) means no tool is offered.

Responses are deterministic for a given request body, except ``created``:
ids derive from the body's sha256, token counts are its length / 4, and the
model returned is the model requested with ``-sandbox`` appended (real
providers also answer with a more specific name than the one asked for).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandbox.agent_policy import Conversation, Decision, ToolCall, ToolResult

TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MODEL_SUFFIX = "-sandbox"


class ProviderError(Exception):
    """A request the provider refuses; ``param`` names the offending field."""

    def __init__(self, message: str, *, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.message = message
        self.param = param
        self.status = status


@dataclass(frozen=True, kw_only=True)
class Provider:
    name: str
    read: Callable[[dict[str, Any]], Conversation]
    render: Callable[..., dict[str, Any]]
    error_body: Callable[..., dict[str, Any]]
    request_id_header: str


def request_digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def returned_model(requested: str) -> str:
    return requested if requested.endswith(MODEL_SUFFIX) else requested + MODEL_SUFFIX


def _tokens(value: Any) -> int:
    return max(1, math.ceil(len(json.dumps(value, sort_keys=True)) / 4))


def prompt_tokens(body: dict[str, Any]) -> int:
    return _tokens([body.get("system"), body.get("messages"), body.get("tools")])


def _require_model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ProviderError("model: a non-empty string is required", param="model")
    return model


def _no_stream(body: dict[str, Any]) -> None:
    if body.get("stream") is True:
        raise ProviderError("stream: streaming is not supported by the sandbox", param="stream")


def _args(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict; anything but a JSON object reads as {}."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return {}
    return raw if isinstance(raw, dict) else {}


class _Transcript:
    """Collects calls and results while a provider's messages are read, and
    checks that every tool call is answered in the very next turn."""

    def __init__(self) -> None:
        self.instructions: list[str] = []
        self.calls: list[ToolCall] = []
        self.results: list[ToolResult] = []
        self.latest: list[ToolResult] = []
        self.pending: dict[str, ToolCall] = {}

    def assistant_turn(self, calls: list[ToolCall], where: str) -> None:
        self.expect_answered(where)
        self.calls.extend(calls)
        self.pending = {call.id: call for call in calls}
        self.latest = []

    def result(self, call_id: str, content: str, is_error: bool, where: str) -> None:
        call = self.pending.pop(call_id, None)
        if call is None:
            raise ProviderError(
                f"{where}: {call_id!r} does not answer a tool call of the preceding assistant message", param=where
            )
        result = ToolResult(call=call, content=content, is_error=is_error)
        self.results.append(result)
        self.latest.append(result)

    def expect_answered(self, where: str) -> None:
        if self.pending:
            missing = ", ".join(sorted(self.pending))
            raise ProviderError(f"{where}: tool call(s) {missing} were not answered by a tool result", param=where)

    def conversation(self, tools: frozenset[str]) -> Conversation:
        self.expect_answered("messages")
        return Conversation(
            instructions=tuple(self.instructions),
            calls=tuple(self.calls),
            results=tuple(self.results),
            latest=tuple(self.latest),
            tools=tools,
        )


def _texts(content: Any, where: str, *, allow_none: bool = False) -> list[str]:
    """The text of a string or a list of typed content parts (non-text parts ignored)."""
    if content is None and allow_none:
        return []
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        raise ProviderError(f"{where}: expected a string or a list of content parts", param=where)
    texts = []
    for n, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise ProviderError(f"{where}.{n}: expected an object with a type", param=f"{where}.{n}")
        if part["type"] == "text":
            if not isinstance(part.get("text"), str):
                raise ProviderError(f"{where}.{n}.text: expected a string", param=f"{where}.{n}.text")
            texts.append(part["text"])
    return texts


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ProviderError("messages: a non-empty list is required", param="messages")
    for n, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ProviderError(f"messages.{n}: expected an object", param=f"messages.{n}")
    return messages


def _tool_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
        raise ProviderError(f"{where}: a tool name of 1-64 letters, digits, _ or - is required", param=where)
    return name


# --------------------------------------------------------------------------
# OpenAI Chat Completions
# --------------------------------------------------------------------------

OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")
_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    422: "invalid_request_error",
    429: "requests",
    504: "timeout",
}


def openai_read(body: dict[str, Any]) -> Conversation:
    _require_model(body)
    _no_stream(body)
    transcript = _Transcript()
    for n, message in enumerate(_messages(body)):
        where = f"messages.{n}"
        role = message.get("role")
        if role not in OPENAI_ROLES:
            raise ProviderError(f"{where}.role: must be one of {', '.join(OPENAI_ROLES)}", param=f"{where}.role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                raise ProviderError(f"{where}.tool_call_id: a string is required", param=f"{where}.tool_call_id")
            content = "".join(_texts(message.get("content"), f"{where}.content"))
            transcript.result(call_id, content, False, f"{where}.tool_call_id")
        elif role == "assistant":
            _texts(message.get("content"), f"{where}.content", allow_none=True)
            transcript.assistant_turn(_openai_calls(message.get("tool_calls"), f"{where}.tool_calls"), where)
        else:
            transcript.expect_answered(where)
            transcript.instructions.extend(_texts(message.get("content"), f"{where}.content"))
    return transcript.conversation(_openai_tools(body))


def _openai_calls(raw: Any, where: str) -> list[ToolCall]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ProviderError(f"{where}: expected a list", param=where)
    calls = []
    for n, call in enumerate(raw):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(call.get("id"), str) or call.get("type") != "function":
            raise ProviderError(f"{where}.{n}: expected {{id, type: function, function}}", param=f"{where}.{n}")
        name = _tool_name(function.get("name"), f"{where}.{n}.function.name")
        if not isinstance(function.get("arguments"), str):
            raise ProviderError(f"{where}.{n}.function.arguments: a JSON string is required", param=f"{where}.{n}")
        calls.append(ToolCall(id=call["id"], name=name, args=_args(function["arguments"])))
    return calls


def _openai_tools(body: dict[str, Any]) -> frozenset[str]:
    tools = body.get("tools")
    if tools is None:
        return frozenset()
    if not isinstance(tools, list):
        raise ProviderError("tools: expected a list", param="tools")
    names = []
    for n, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or tool.get("type") != "function":
            raise ProviderError(f"tools.{n}: expected {{type: function, function: {{name, ...}}}}", param=f"tools.{n}")
        names.append(_tool_name(function.get("name"), f"tools.{n}.function.name"))
        if "parameters" in function and not isinstance(function["parameters"], dict):
            raise ProviderError(f"tools.{n}.function.parameters: expected a JSON schema object", param=f"tools.{n}")
    return frozenset() if body.get("tool_choice") == "none" else frozenset(names)


def openai_render(decision: Decision, *, body: dict[str, Any], digest: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": decision.text, "refusal": None}
    if decision.tool is not None:
        message["content"] = None
        message["tool_calls"] = [
            {
                "id": f"call_{digest[:24]}",
                "type": "function",
                "function": {"name": decision.tool, "arguments": json.dumps(decision.args)},
            }
        ]
    prompt, completion = prompt_tokens(body), _tokens(message)
    return {
        "id": f"chatcmpl-{digest[:29]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": returned_model(body["model"]),
        "system_fingerprint": "fp_keel_sandbox",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if decision.tool else "stop",
            }
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def openai_error_body(status: int, message: str, *, param: str | None = None) -> dict[str, Any]:
    """``{"error": {"message", "type", "param", "code"}}``."""
    error_type = _OPENAI_ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    code = "rate_limit_exceeded" if status == 429 else None
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


# --------------------------------------------------------------------------
# Anthropic Messages
# --------------------------------------------------------------------------

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_read(body: dict[str, Any]) -> Conversation:
    _require_model(body)
    _no_stream(body)
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ProviderError("max_tokens: a positive integer is required", param="max_tokens")
    transcript = _Transcript()
    if "system" in body:
        transcript.instructions.extend(_texts(body["system"], "system"))
    for n, message in enumerate(_messages(body)):
        where = f"messages.{n}"
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise ProviderError(f"{where}.role: must be user or assistant", param=f"{where}.role")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise ProviderError(f"{where}.content: expected a string or a list of blocks", param=f"{where}.content")
        if role == "assistant":
            transcript.assistant_turn(_anthropic_calls(blocks, f"{where}.content"), where)
        else:
            _anthropic_user_turn(transcript, blocks, f"{where}.content")
    return transcript.conversation(_anthropic_tools(body))


def _block(blocks: list[Any], n: int, where: str) -> dict[str, Any]:
    block = blocks[n]
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise ProviderError(f"{where}.{n}: expected a content block with a type", param=f"{where}.{n}")
    return block


def _anthropic_calls(blocks: list[Any], where: str) -> list[ToolCall]:
    calls = []
    for n in range(len(blocks)):
        block = _block(blocks, n, where)
        if block["type"] == "tool_result":
            raise ProviderError(f"{where}.{n}: tool_result blocks belong in a user message", param=f"{where}.{n}")
        if block["type"] == "text":
            _texts([block], where)
        if block["type"] != "tool_use":
            continue
        if not isinstance(block.get("id"), str) or not isinstance(block.get("input"), dict):
            raise ProviderError(f"{where}.{n}: tool_use needs an id and an input object", param=f"{where}.{n}")
        name = _tool_name(block.get("name"), f"{where}.{n}.name")
        calls.append(ToolCall(id=block["id"], name=name, args=block["input"]))
    return calls


def _anthropic_user_turn(transcript: _Transcript, blocks: list[Any], where: str) -> None:
    for n in range(len(blocks)):
        block = _block(blocks, n, where)
        if block["type"] == "tool_use":
            raise ProviderError(f"{where}.{n}: tool_use blocks belong in an assistant message", param=f"{where}.{n}")
        if block["type"] == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                raise ProviderError(f"{where}.{n}.tool_use_id: a string is required", param=f"{where}.{n}")
            is_error = block.get("is_error", False)
            if not isinstance(is_error, bool):
                raise ProviderError(f"{where}.{n}.is_error: expected true or false", param=f"{where}.{n}")
            content = "".join(_texts(block.get("content", ""), f"{where}.{n}.content"))
            transcript.result(call_id, content, is_error, f"{where}.{n}.tool_use_id")
        else:
            transcript.expect_answered(f"{where}.{n}")
            transcript.instructions.extend(_texts([block], where))


def _anthropic_tools(body: dict[str, Any]) -> frozenset[str]:
    tools = body.get("tools")
    if tools is None:
        return frozenset()
    if not isinstance(tools, list):
        raise ProviderError("tools: expected a list", param="tools")
    names = []
    for n, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise ProviderError(f"tools.{n}: expected an object", param=f"tools.{n}")
        names.append(_tool_name(tool.get("name"), f"tools.{n}.name"))
        if tool.get("type", "custom") == "custom" and not isinstance(tool.get("input_schema"), dict):
            raise ProviderError(f"tools.{n}.input_schema: a JSON schema object is required", param=f"tools.{n}")
    choice = body.get("tool_choice")
    return frozenset() if isinstance(choice, dict) and choice.get("type") == "none" else frozenset(names)


def anthropic_render(decision: Decision, *, body: dict[str, Any], digest: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": decision.text}]
    if decision.tool is not None:
        content.append(
            {"type": "tool_use", "id": f"toolu_{digest[:24]}", "name": decision.tool, "input": decision.args}
        )
    return {
        "id": f"msg_{digest[:24]}",
        "type": "message",
        "role": "assistant",
        "model": returned_model(body["model"]),
        "content": content,
        "stop_reason": "tool_use" if decision.tool else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt_tokens(body),
            "output_tokens": _tokens(content),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def anthropic_error_body(status: int, message: str, *, param: str | None = None) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}}``."""
    error_type = _ANTHROPIC_ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": error_type, "message": message}}


OPENAI = Provider(
    name="openai",
    read=openai_read,
    render=openai_render,
    error_body=openai_error_body,
    request_id_header="x-request-id",
)
ANTHROPIC = Provider(
    name="anthropic",
    read=anthropic_read,
    render=anthropic_render,
    error_body=anthropic_error_body,
    request_id_header="request-id",
)
PROVIDERS = {"/v1/chat/completions": OPENAI, "/v1/messages": ANTHROPIC}
# The same wire formats, played by a model that obeys instructions found anywhere in
# what it is sent (agent_policy.obey): what a prompt injection looks like to the runtime.
OBEDIENT_PREFIX = "/obedient"
PROVIDERS.update({OBEDIENT_PREFIX + route: provider for route, provider in list(PROVIDERS.items())})


def append_text(provider: Provider, body: dict[str, Any], text: str) -> dict[str, Any]:
    """A well-formed response with ``text`` added to what the model says (the ``echo_secret``
    fault): the tool call it proposes, if any, stays."""
    if provider is OPENAI:
        message = body["choices"][0]["message"]
        message["content"] = " ".join(filter(None, [message.get("content"), text]))
    else:
        body["content"][0]["text"] = " ".join(filter(None, [body["content"][0]["text"], text]))
    return body


def garble(provider: Provider, body: dict[str, Any], variant: str) -> dict[str, Any]:
    """A well-formed response made into garbage the client can still parse (the ``garbage``
    fault): ``nul`` or ``surrogate`` in the text, ``tokens`` out of any integer column's
    range, ``long_fields`` (model, id and finish reason thousands of characters long)."""
    openai_shape = provider is OPENAI
    if variant in ("nul", "surrogate"):
        bad = "\x00" if variant == "nul" else "\ud800"
        if openai_shape:
            message = body["choices"][0]["message"]
            message["content"] = (message.get("content") or "") + f"done{bad}"
        else:
            body["content"][0]["text"] += f"done{bad}"
    elif variant == "tokens":
        usage = body["usage"]
        usage["prompt_tokens" if openai_shape else "input_tokens"] = 2**40
    elif variant == "long_fields":
        body["model"] = "m" * 5000
        body["id"] = "i" * 5000
        if openai_shape:
            body["choices"][0]["finish_reason"] = "f" * 500
        else:
            body["stop_reason"] = "f" * 500
    else:
        raise ValueError(f"unknown garbage variant {variant!r}")
    return body
