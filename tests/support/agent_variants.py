"""Variants of the support agent for the agent tests (listed in a worker's
RUNTIME_WORKFLOW_MODULES next to workflows.support_agent):

- ``support_agent_tiny``: a budget of two model calls;
- ``support_agent_four``: four model calls, the last one proposing the approved effect (S55);
- ``support_agent_compact``: a conversation budget of 450 tokens (compaction, S37);
- ``support_agent_strict``: ``check_stock`` takes only SKUs of the form SKU-ABC-123,
  so the model's ``{"sku": "SKU-MUG-01"}`` is malformed for it and must never run.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from executions.authoring import registry
from executions.authoring.tools import Budget, ToolArgs
from executions.authoring.workflow import Workflow
from workflows import support_agent


class StrictStockArgs(ToolArgs):
    sku: str = Field(pattern=r"^SKU-[A-Z]{3}-\d{3}$")


def _variant(name: str, *, budget: Budget, tools: list) -> None:
    base = support_agent.flow
    flow = registry.register(
        Workflow(
            name=name,
            version=1,
            title=f"Support agent ({name})",
            input=base.input,
            goal=base.goal,
            constraints=base.constraints,
        )
    )
    step = base.get_step("resolve")
    flow.agent(
        "resolve",
        label=step.label,
        prompt_id=step.agent.prompt_id,
        prompt_version=step.prompt_version,
        instruction=step.agent.instruction,
        tools=tools,
        budget=budget,
        done_when=step.agent.done_when,
        offline_policy=step.agent.offline_policy,
    )


_variant("support_agent_tiny", budget=Budget(max_calls=2), tools=support_agent.TOOLS)
_variant(
    "support_agent_strict",
    budget=Budget(),
    tools=[replace(t, args=StrictStockArgs) if t.name == "check_stock" else t for t in support_agent.TOOLS],
)
# Four model calls: the fourth proposes submit_replacement, so after the approval the step stops
# on its budget right after that effect went out (S55: the receipt is committed with it).
_variant("support_agent_four", budget=Budget(max_calls=4), tools=support_agent.TOOLS)
# A small conversation budget: the round's earlier turns are folded into a progress note (S37).
_variant("support_agent_compact", budget=Budget(conversation_tokens=450), tools=support_agent.TOOLS)
