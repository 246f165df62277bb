"""A route step: the model chooses the next step among the successors the workflow
declares; the runtime enforces the choice (``executions.agent.routes``).

``flow.route(name, label=…, to=["replace", "refund", "answer"], instruction=…)`` offers
the model one tool, ``choose_next_step``, whose ``step`` argument must be one of ``to``
(a JSON Schema enum). Anything else — another step, another tool, no tool call — is
refused: a ``route.refused`` event, the refusal told to the model as the call's result,
and after ``max_refusals`` refusals the step stops for a person (needs_attention
``budget_exceeded``, as an agent's refusals do). The choice is a journalled model call
like any other, so a step that runs again after a crash replays it and never asks
again; the step's output ``{"route": step, "why": …}`` is the edge the runner follows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .modelcalls import Decision, ModelRequest, ToolSpec
from .specs import Choice

ROUTE_TOOL = "choose_next_step"


@dataclass(frozen=True, kw_only=True)
class RouteSpec:
    prompt_id: str
    instruction: Callable[[Any], str]
    to: tuple[str, ...]
    offline_policy: Callable[[ModelRequest], Decision] | None = None
    max_refusals: int = 2

    @property
    def choice(self) -> Choice:
        """The model's choice, recorded as the step's output ``{"route": step}``."""
        return Choice(to=self.to, key="route")

    def tool(self, labels: dict[str, str]) -> ToolSpec:
        """The one tool offered: ``step`` one of ``to`` (each described by its label)."""
        described = "; ".join(f"{name}: {labels.get(name, name)}" for name in self.to)
        return ToolSpec(
            name=ROUTE_TOOL,
            description=f"Choose the next step of the workflow, exactly one of: {described}.",
            parameters={
                "type": "object",
                "properties": {
                    "step": {"type": "string", "enum": list(self.to), "description": "the next step"},
                    "why": {"type": "string", "description": "one sentence: why this step"},
                },
                "required": ["step"],
                "additionalProperties": False,
            },
        )
