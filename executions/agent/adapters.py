"""Real model providers through their official SDKs: OpenAI-compatible Chat Completions
(OpenAI, vLLM, Ollama, llama.cpp: ``OPENAI_BASE_URL``) and Anthropic Messages.

Each adapter translates a provider-neutral ``ModelRequest`` into the provider's wire
format (tools in its own shape), sends the call key as ``X-Model-Call-Key``, and reads
the answer back. The SDKs' own retries are off (``max_retries=0``): the step's retry
policy is the only one. Provider errors become our failure kinds:

| provider says | kind |
|---|---|
| 429 | rate_limited (with Retry-After) |
| 5xx, 529, timeout, connection error | transient |
| 400, 404, 409, 413, 422 | invalid_input |
| 401, 403 | permission |
| an answer the SDK can't read, or without a message | transient, the raw answer kept as evidence |
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

import anthropic
import openai
from django.conf import settings

from ..authoring.modelcalls import JSON, ModelRequest, ModelResponse, ToolCall
from ..errors import FailureKind, StepFailure
from ..redaction import redact

if TYPE_CHECKING:
    from anthropic.types import MessageParam
    from openai.types.chat import ChatCompletionMessageParam

CALL_KEY_HEADER = "X-Model-Call-Key"


def _failure(exc: Exception, provider: str) -> StepFailure:
    """A provider SDK's exception as a StepFailure of the right kind."""
    sdk = openai if provider == "openai" else anthropic
    if isinstance(exc, sdk.APITimeoutError):
        return StepFailure(FailureKind.TRANSIENT, f"{provider}: no answer in time")
    if isinstance(exc, sdk.APIConnectionError):
        return StepFailure(FailureKind.TRANSIENT, f"{provider}: could not reach the provider ({exc})")
    if isinstance(exc, sdk.APIResponseValidationError):
        return StepFailure(FailureKind.TRANSIENT, f"{provider}: unreadable answer", evidence=_raw(exc))
    if isinstance(exc, sdk.APIStatusError):
        code = exc.status_code
        message = f"{provider} answered {code}: {_message(exc)}"
        evidence = _raw(exc)
        if code == 429:
            return StepFailure(
                FailureKind.RATE_LIMITED, message, retry_after=_retry_after(exc.response), evidence=evidence
            )
        if code in (401, 403):
            return StepFailure(FailureKind.PERMISSION, message, evidence=evidence)
        if code >= 500:
            return StepFailure(FailureKind.TRANSIENT, message, evidence=evidence)
        if code in (400, 404, 409, 413, 422):
            return StepFailure(FailureKind.INVALID_INPUT, message, evidence=evidence)
        return StepFailure(FailureKind.BUSINESS_REJECTION, message, evidence=evidence)
    return StepFailure(FailureKind.TRANSIENT, f"{provider}: {type(exc).__name__}: {exc}")


def _message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return redact(str(error["message"]))[:300]
    return redact(str(exc))[:300]


def _raw(exc: Exception) -> JSON:
    response = getattr(exc, "response", None)
    text = ""
    if response is not None:
        try:
            text = response.text
        except Exception:  # a streamed or closed body: the status is evidence enough
            text = ""
    return {"status": getattr(exc, "status_code", None), "body": redact(text)[:2000]}


def _retry_after(response: Any) -> float | None:
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _garbage(provider: str, why: str, raw: Any) -> StepFailure:
    return StepFailure(
        FailureKind.TRANSIENT, f"{provider}: unreadable answer ({why})", evidence={"body": redact(str(raw))[:2000]}
    )


def _parsed_args(raw: Any) -> JSON | None:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except (TypeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class OpenAIClient:
    """Chat Completions at ``OPENAI_BASE_URL`` (default OpenAI's) with ``OPENAI_API_KEY``."""

    provider = "openai"
    offline = False

    def __init__(self) -> None:
        self.model = settings.RUNTIME_MODEL or "gpt-4o-mini"
        self.label = f"{self.model} via OpenAI-compatible API"
        self.sdk = openai.OpenAI(
            base_url=settings.OPENAI_BASE_URL or None,
            api_key=settings.OPENAI_API_KEY or "unset",  # local servers take any key; OpenAI answers 401
            max_retries=0,
            timeout=settings.RUNTIME_MODEL_TIMEOUT_SECONDS,
        )

    @staticmethod
    def wire_messages(request: ModelRequest) -> list[JSON]:
        messages: list[JSON] = [{"role": "system", "content": request.system}] if request.system else []
        for message in request.messages:
            if message["role"] == "assistant":
                out: JSON = {"role": "assistant", "content": message["content"] or None}
                if message.get("tool_calls"):
                    out["tool_calls"] = [
                        {
                            "id": c["id"],
                            "type": "function",
                            "function": {
                                "name": c["name"],
                                "arguments": json.dumps(c["args"]) if c["args"] is not None else c.get("raw", ""),
                            },
                        }
                        for c in message["tool_calls"]
                    ]
                messages.append(out)
            elif message["role"] == "tool":
                messages.append(
                    {"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]}
                )
            else:
                messages.append({"role": "user", "content": message["content"]})
        return messages

    def complete(self, request: ModelRequest, *, call_key: str) -> ModelResponse:
        extra: JSON = {}
        if request.tools:
            extra["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in request.tools
            ]
        try:
            response = self.sdk.chat.completions.create(
                model=self.model,
                # The SDK's message shapes are TypedDicts: nothing to check a plain dict against at run time.
                messages=cast("list[ChatCompletionMessageParam]", self.wire_messages(request)),
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                extra_headers={CALL_KEY_HEADER: call_key},
                **extra,
            )
        except openai.OpenAIError as exc:
            raise _failure(exc, self.provider) from None
        except ValueError as exc:  # a 2xx body that isn't JSON
            raise _garbage(self.provider, f"not JSON: {exc}", "") from None
        choices = getattr(response, "choices", None)
        if not choices or getattr(choices[0], "message", None) is None:
            raise _garbage(self.provider, "no choices", response)
        choice = choices[0]
        calls = tuple(
            ToolCall(
                id=c.id,
                name=c.function.name,
                args=_parsed_args(c.function.arguments),
                raw=c.function.arguments if isinstance(c.function.arguments, str) else "",
            )
            for c in choice.message.tool_calls or []
        )
        usage = response.usage
        return ModelResponse(
            text=choice.message.content or "",
            model=response.model or self.model,
            tool_calls=calls,
            finish_reason=choice.finish_reason or "",
            input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            output_tokens=getattr(usage, "completion_tokens", 0) or 0,
            response_id=response.id or "",
        )


# A current Sonnet, not on Anthropic's deprecation list (the SDK warns for those; docs/agents.md,
# "Choosing the model", says how to pick another). claude-sonnet-4-5 reached end of life on 2026-11-30.
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-5-5"


class AnthropicClient:
    """Messages at ``ANTHROPIC_BASE_URL`` (default Anthropic's) with ``ANTHROPIC_API_KEY``.
    The SDK's Messages API takes no sampling temperature; the request's is not sent."""

    provider = "anthropic"
    offline = False

    def __init__(self) -> None:
        self.model = settings.RUNTIME_MODEL or DEFAULT_ANTHROPIC_MODEL
        self.label = f"{self.model} via Anthropic API"
        self.sdk = anthropic.Anthropic(
            base_url=settings.ANTHROPIC_BASE_URL or None,
            api_key=settings.ANTHROPIC_API_KEY or "unset",
            max_retries=0,
            timeout=settings.RUNTIME_MODEL_TIMEOUT_SECONDS,
        )

    @staticmethod
    def wire_messages(request: ModelRequest) -> list[JSON]:
        """Tool results go back in one user turn; turns alternate user/assistant."""
        messages: list[JSON] = []
        for message in request.messages:
            if message["role"] == "assistant":
                blocks: list[JSON] = [{"type": "text", "text": message["content"]}] if message["content"] else []
                blocks += [
                    {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"] or {}}
                    for c in message.get("tool_calls", [])
                ]
                messages.append({"role": "assistant", "content": blocks or [{"type": "text", "text": "…"}]})
            elif message["role"] == "tool":
                block = {"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": message["content"]}
                if message.get("is_error"):
                    block["is_error"] = True
                if messages and messages[-1]["role"] == "user" and isinstance(messages[-1]["content"], list):
                    messages[-1]["content"].append(block)
                else:
                    messages.append({"role": "user", "content": [block]})
            else:
                messages.append({"role": "user", "content": message["content"]})
        return messages

    def complete(self, request: ModelRequest, *, call_key: str) -> ModelResponse:
        extra: JSON = {}
        if request.system:
            extra["system"] = request.system
        if request.tools:
            extra["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in request.tools
            ]
        try:
            response = self.sdk.messages.create(
                model=self.model,
                max_tokens=request.max_tokens,
                messages=cast("list[MessageParam]", self.wire_messages(request)),  # TypedDicts (above)
                extra_headers={CALL_KEY_HEADER: call_key},
                **extra,
            )
        except anthropic.AnthropicError as exc:
            raise _failure(exc, self.provider) from None
        except ValueError as exc:  # a 2xx body that isn't JSON
            raise _garbage(self.provider, f"not JSON: {exc}", "") from None
        content = getattr(response, "content", None)
        if not isinstance(content, list):
            raise _garbage(self.provider, "no content", response)
        texts, calls = [], []
        for block in content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                calls.append(ToolCall(id=block.id, name=block.name, args=_parsed_args(block.input)))
        usage = response.usage
        return ModelResponse(
            text="".join(texts),
            model=response.model or self.model,
            tool_calls=tuple(calls),
            finish_reason=response.stop_reason or "",
            input_tokens=getattr(usage, "input_tokens", 0) or 0,
            output_tokens=getattr(usage, "output_tokens", 0) or 0,
            response_id=response.id or "",
        )
