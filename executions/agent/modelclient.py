"""The model clients: the offline default, and which client a process uses.

``RUNTIME_MODEL_CLIENT`` selects the client: ``offline`` (the default: deterministic,
no network, labelled as such on every screen), ``openai`` (any OpenAI-compatible Chat
Completions endpoint), ``anthropic`` (Messages API; both ``executions.agent.adapters``),
or a dotted class path. Every client implements ``ModelClient`` and speaks
``ModelRequest``/``ModelResponse`` (``executions.authoring.modelcalls``).
"""

from __future__ import annotations

import hashlib
import re
from functools import cache

from django.conf import settings
from django.utils.module_loading import import_string

from ..authoring.modelcalls import ModelClient, ModelRequest, ModelResponse, ToolCall, sha256_of


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4)


class OfflineModelClient:
    """Deterministic and offline: no network, no key; the same request always gives the
    same answer, so tests and demos are repeatable.

    With an ``offline_policy``, the policy (the workflow's) answers: the next tool call
    when tools are offered, else its text. Otherwise it writes a short narrative from the verified facts and the
    mandatory constraints in the prompt (those of its ``Mandatory constraints:`` block
    only): it only restates facts it was given, never invents numbers.
    """

    provider = "offline"
    model = "offline-deterministic-1"
    label = "Offline deterministic model (no network; for demos and tests)"
    offline = True

    def complete(self, request: ModelRequest, *, call_key: str) -> ModelResponse:
        prompt = "\n".join([request.system, request.user_text])
        if request.offline_policy is not None:
            decision = request.offline_policy(request)
            calls: tuple[ToolCall, ...] = ()
            if decision.tool is not None and request.tools:
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
        constraints = _constraints(prompt)
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


def _constraints(prompt: str) -> list[str]:
    """The runtime's mandatory constraints: the ``- MUST:`` lines right under the first
    line that reads ``Mandatory constraints:`` (where ``notes.render`` puts them), and no
    line that looks like one anywhere else."""
    lines = prompt.splitlines()
    if "Mandatory constraints:" not in lines:
        return []
    found = []
    for line in lines[lines.index("Mandatory constraints:") + 1 :]:
        if not line.startswith("- MUST: "):
            break
        found.append(line.removeprefix("- MUST: "))
    return found


CLIENTS = {
    "offline": "executions.agent.modelclient.OfflineModelClient",
    "openai": "executions.agent.adapters.OpenAIClient",
    "anthropic": "executions.agent.adapters.AnthropicClient",
}


@cache
def get_model_client() -> ModelClient:
    """The client ``RUNTIME_MODEL_CLIENT`` names (offline, openai, anthropic, or a class path)."""
    name = settings.RUNTIME_MODEL_CLIENT
    return import_string(CLIENTS.get(name, name))()
