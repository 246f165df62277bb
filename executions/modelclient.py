"""The model client interface, the requests and answers it speaks, and the offline default.

A request is provider-neutral: a system text built from the execution's structured
context (``executions.prompting``), a few messages (the task, then this step's tool
calls and their results), the tools allowed now, and parameters. Its canonical JSON
(``ModelRequest.canonical``) is what the model-call journal hashes; adapters
(``executions.adapters``) translate it into each provider's wire format.

``RUNTIME_MODEL_CLIENT`` selects the client: ``offline`` (the default: deterministic,
no network, labelled as such on every screen), ``openai`` (any OpenAI-compatible Chat
Completions endpoint), ``anthropic`` (Messages API), or a dotted class path.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

from django.conf import settings
from django.utils.module_loading import import_string

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


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


class OfflineModelClient:
    """Deterministic and offline: no network, no key; the same request always gives the
    same answer, so tests and demos are repeatable.

    With tools and an ``offline_policy``, the policy (the workflow's) proposes the next
    tool call. Otherwise it writes a short narrative from the verified facts and
    constraints in the prompt: it only restates facts it was given, never invents numbers.
    """

    provider = "offline"
    model = "offline-deterministic-1"
    label = "Offline deterministic model (no network; for demos and tests)"
    offline = True

    def complete(self, request: ModelRequest, *, call_key: str) -> ModelResponse:
        prompt = "\n".join([request.system, request.user_text])
        if request.tools and request.offline_policy is not None:
            decision = request.offline_policy(request)
            calls = ()
            if decision.tool is not None:
                call_id = "call_" + hashlib.sha256(f"{call_key}:{decision.tool}".encode()).hexdigest()[:16]
                calls = (ToolCall(id=call_id, name=decision.tool, args=decision.args),)
            text = decision.text
        else:
            text, calls = self._narrative(prompt), ()
        return ModelResponse(
            text=text,
            model=self.model,
            tool_calls=calls,
            finish_reason="tool_calls" if calls else "stop",
            input_tokens=_tokens(prompt),
            output_tokens=_tokens(text),
            response_id=f"offline-{sha256_of(request.canonical(model=self.model))[:24]}",
        )

    @staticmethod
    def _narrative(prompt: str) -> str:
        facts = re.findall(r"^- \[(F\d+)\] (.+?) \(source: [^)]*\)$", prompt, flags=re.MULTILINE)
        constraints = re.findall(r"^- MUST: (.+)$", prompt, flags=re.MULTILINE)
        if facts:
            lead = facts[0][1]
            rest = " ".join(statement for _, statement in facts[1:4])
            text = f"{lead} {rest}".strip()
        else:
            text = "No verified facts were provided, so no conclusions are drawn."
        if constraints:
            # Received, not carried out: this model only restates facts, so it never claims to follow them.
            text += (
                " Instructions received (this offline model restates verified facts only and does not carry "
                "instructions out): " + "; ".join(c.rstrip(".") for c in constraints) + "."
            )
        return text


CLIENTS = {
    "offline": "executions.modelclient.OfflineModelClient",
    "openai": "executions.adapters.OpenAIClient",
    "anthropic": "executions.adapters.AnthropicClient",
}


@cache
def get_model_client() -> ModelClient:
    """The client ``RUNTIME_MODEL_CLIENT`` names (offline, openai, anthropic, or a class path)."""
    name = settings.RUNTIME_MODEL_CLIENT
    return import_string(CLIENTS.get(name, name))()
