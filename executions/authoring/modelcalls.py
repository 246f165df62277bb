"""What a model or agent step speaks to its model: the request, the answer, the tool
calls, and the client protocol every model client implements.

A request is provider-neutral: a system text built from the execution's structured
context (``executions.authoring.notes``), a few messages (the task, then this step's
tool calls and their results), the tools allowed now, and parameters. Its canonical
JSON (``ModelRequest.canonical``) is what the model-call journal hashes
(``executions.engine.journal``); the clients (``executions.agent.modelclient``, the
offline default, and ``executions.agent.adapters``) translate it into each provider's
wire format. An offline policy (a workflow's script for the offline model) answers a
``Decision``. A leaf of the authoring surface: plain values, no Django.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

JSON = dict[str, Any]


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, UTF-8: the one serialisation that is hashed or approved."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_of(value: Any) -> str:
    return hashlib.sha256(canonical_json(value)).hexdigest()


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """A tool as offered to the model: its name, what it does, its arguments' JSON schema."""

    name: str
    description: str
    parameters: JSON


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """A tool call the model proposed. ``args`` is None when what it sent is not a JSON
    object (``raw`` keeps it): such a call is refused, never run."""

    id: str
    name: str
    args: JSON | None
    raw: str = ""

    def as_dict(self) -> JSON:
        return {"id": self.id, "name": self.name, "args": self.args, **({"raw": self.raw} if self.args is None else {})}

    @classmethod
    def from_dict(cls, data: JSON) -> ToolCall:
        return cls(id=data["id"], name=data["name"], args=data.get("args"), raw=data.get("raw", ""))


# Messages are plain JSON, provider-neutral:
#   {"role": "user", "content": str}
#   {"role": "assistant", "content": str, "tool_calls": [ToolCall.as_dict(), ...]}
#   {"role": "tool", "tool_call_id": str, "name": str, "content": str, "is_error": bool}


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What an offline policy answers: a final text, or one tool call."""

    text: str
    tool: str | None = None
    args: JSON = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """One call's request. ``prompt_id``/``prompt_version`` name the template it was
    built from (pinned when the execution started). ``offline_policy`` is how the
    offline model plays this step's tool-calling part; it is not sent and not hashed."""

    prompt_id: str
    prompt_version: str
    system: str
    messages: tuple[JSON, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 1024
    temperature: float = 0.0
    offline_policy: Callable[[ModelRequest], Decision] | None = field(default=None, compare=False)

    def canonical(self, *, model: str) -> JSON:
        """Everything that decides the answer: model, prompt, messages, tools, parameters."""
        return {
            "model": model,
            "prompt": {"id": self.prompt_id, "version": self.prompt_version},
            "system": self.system,
            "messages": list(self.messages),
            "tools": [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in self.tools],
            "params": {"max_tokens": self.max_tokens, "temperature": self.temperature},
        }

    @property
    def user_text(self) -> str:
        return "\n".join(m["content"] for m in self.messages if m["role"] == "user")


@dataclass(frozen=True, kw_only=True)
class ModelResponse:
    text: str
    model: str  # the model that answered, as the provider names it
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    response_id: str = ""


class ModelClient(Protocol):
    provider: str  # "offline", "openai", "anthropic"
    model: str  # the model requested
    label: str  # what the screens show, e.g. "Offline deterministic model …"
    offline: bool

    def complete(self, request: ModelRequest, *, call_key: str) -> ModelResponse:
        """Ask once (no retries of its own); raise StepFailure with the kind of failure."""
        ...
