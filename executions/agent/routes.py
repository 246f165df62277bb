"""Route steps (the ``route`` step kind, registered in ``executions.agent.kinds``): the model chooses the next step among the successors the workflow
declares, the runtime enforces it (``executions.authoring.routes``).

One visit asks the model, through the journal, with the execution's notes, the step's
instruction and one tool, ``choose_next_step``. A call of it whose ``step`` is one of
the declared successors is the choice: the step's output ``{"route", "why",
"model_calls"}``, which the runner checkpoints and follows
(``Workflow.next_step``). Anything else is refused — recorded once as a
``route.refused`` event (a replay refuses the same answer again without a new event)
and told to the model as the call's result — and the model is asked again; past
``max_refusals`` the step stops (needs_attention ``budget_exceeded``, naming the
refusals). Every answer is a journalled call, so after a crash the same choice is
replayed from the journal and the model is never asked again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.db import transaction

from ..authoring.modelcalls import ModelRequest, ModelResponse
from ..authoring.routes import ROUTE_TOOL
from ..authoring.step_context import StepContext
from ..authoring.workflow import Step, Workflow
from ..engine import failpoints, lifecycle
from ..engine.costs import BudgetExceeded
from ..engine.leases import Lease, fenced_row
from ..models import ExecutionEvent

JSON = dict[str, Any]


def choose(
    ctx: StepContext, workflow: Workflow, step: Step, model: Any, *, refused: Callable[[str, ModelResponse, str], None]
) -> JSON:
    """The route's choice, asked of ``model`` (the journal's: ``JournaledModel``, or a
    replay's) until one is valid: its output ``{"route", "why", "model_calls"}``.
    ``refused(key, response, reason)`` records each refused answer. Raises
    BudgetExceeded past ``max_refusals``."""
    spec = step.route
    assert spec is not None, "a route step declares its spec"
    tool = spec.tool({name: workflow.label_for(name) for name in spec.to})
    messages: list[JSON] = [{"role": "user", "content": spec.instruction(ctx)}]
    refusals: list[str] = []
    while True:
        request = ModelRequest(
            prompt_id=spec.prompt_id,
            prompt_version=step.prompt_version,
            system=ctx.prompt(
                f"Choose the next step with {ROUTE_TOOL}: one of {', '.join(spec.to)}.",
                tools=((tool.name, tool.description),),
            ),
            messages=tuple(messages),
            tools=(tool,),
            offline_policy=spec.offline_policy,
        )
        response = model.ask(request)
        key = model.keys[-1]
        failpoints.hit(f"after_route_choice:{step.name}:c{model.seq}")  # journalled, not yet checkpointed
        chosen, why, refusal = _read(response, spec.to)
        if refusal is None:
            ctx.add_hypothesis(f"Route: {chosen}. {why}".strip(), source=key)
            return {"route": chosen, "why": why, "model_calls": model.summary()}
        refusals.append(refusal)
        refused(key, response, refusal)
        if len(refusals) > spec.max_refusals:
            raise BudgetExceeded(
                f"{len(refusals)} route choices refused (at most {spec.max_refusals}); last: {refusal}",
                evidence={"refusals": refusals, "allowed": list(spec.to)},
            )
        call = response.tool_calls[0] if response.tool_calls else None
        messages.append(
            {
                "role": "assistant",
                "content": response.text,
                "tool_calls": [c.as_dict() for c in response.tool_calls],
            }
        )
        if call is not None:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "name": call.name,
                    "content": json.dumps({"error": f"refused: {refusal}"}, sort_keys=True),
                    "is_error": True,
                }
            )
        else:
            messages.append({"role": "user", "content": f"Refused: {refusal}"})


def _read(response: ModelResponse, allowed: tuple[str, ...]) -> tuple[str, str, str | None]:
    """(chosen step, why, None) for a valid choice; else ("", "", why it is refused)."""
    if len(response.tool_calls) != 1:
        found = len(response.tool_calls)
        return "", "", f"call {ROUTE_TOOL} exactly once (got {found} tool calls); choose one of {', '.join(allowed)}"
    call = response.tool_calls[0]
    if call.name != ROUTE_TOOL:
        return "", "", f"there is no tool {call.name!r} here; call {ROUTE_TOOL} with one of {', '.join(allowed)}"
    args = call.args if isinstance(call.args, dict) else {}
    chosen = args.get("step")
    if chosen not in allowed:
        return "", "", f"{chosen!r} is not a step this one may lead to; choose one of {', '.join(allowed)}"
    why = args.get("why")
    return chosen, (why if isinstance(why, str) else "")[:500], None


def record_refusal(lease: Lease, step: Step, *, key: str, response: ModelResponse, reason: str) -> None:
    """Once per call key (a replay of the same answer records nothing new), fenced."""
    if ExecutionEvent.objects.filter(execution_id=lease.execution_id, type="route.refused", payload__call=key).exists():
        return
    with transaction.atomic():
        execution = fenced_row(lease)
        lifecycle.record(
            execution,
            "route.refused",
            step=step.name,
            actor_label=lease.owner,
            payload={
                "call": key,
                "proposed": [c.as_dict() for c in response.tool_calls],
                "text": response.text[:500],
                "reason": reason,
            },
        )
