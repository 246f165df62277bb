"""The step kinds the agent runtime plugs into the engine — ``model``, ``agent`` and
``route`` — each whole in one place (``executions.engine.kinds``): how a worker runs a
visit, how ``keel replay`` runs it again against the journal, and what the resume
preview says it will do. ``ExecutionsConfig.ready`` imports this module; the runner,
replay and the preview find the kinds through the registry and never import it.
"""

from __future__ import annotations

from typing import Any

from ..authoring.modelcalls import ModelResponse
from ..authoring.step_context import StepContext
from ..authoring.workflow import Step, StepKind, Workflow
from ..engine import kinds
from ..engine.journal import JournaledModel
from ..engine.leases import Lease
from . import openaiagents, pydanticai, replaying, routes, steps  # noqa: F401 - the frameworks register their kinds
from .modelclient import get_model_client

JSON = dict[str, Any]


class ModelStep(kinds.StepHandler):
    """A model step: its function is called with the model behind the journal (each call
    recorded before the step goes on, replayed rather than asked again)."""

    kind = StepKind.MODEL

    def run(self, lease: Lease, ctx: StepContext, workflow: Workflow, step: Step) -> kinds.Done:
        model = JournaledModel(get_model_client(), lease=lease, execution=ctx.execution, step=step.name)
        assert step.fn is not None, "a model step declares its function"
        output = step.fn(ctx, model) or {}
        output["model_calls"] = model.summary()
        return kinds.Done(output)

    def replay(self, ctx: StepContext, workflow: Workflow, step: Step, *, model: Any, recorded: JSON | None) -> None:
        assert step.fn is not None, "a model step declares its function"
        step.fn(ctx, model)  # the journal compares each request it asks

    def later(self, step: Step) -> str:
        return f"asks the model (prompt {step.prompt_version}); the response is recorded"


class AgentStep(kinds.StepHandler):
    """An agent step: the model proposes tool calls, the runtime decides (``steps``)."""

    kind = StepKind.AGENT

    def run(self, lease: Lease, ctx: StepContext, workflow: Workflow, step: Step) -> kinds.Done | kinds.Parked:
        return steps._Visit(lease, ctx, workflow, step).run()

    def replay(self, ctx: StepContext, workflow: Workflow, step: Step, *, model: Any, recorded: JSON | None) -> None:
        replaying.replay_agent(ctx, workflow, step, model=model, current=recorded is None)

    def later(self, step: Step) -> str:
        return "asks the model and runs the tools it proposes that the runtime allows; each call is recorded"


class RouteStep(kinds.StepHandler):
    """A route step: the model chooses the next step among the declared ones (``routes``)."""

    kind = StepKind.ROUTE

    def run(self, lease: Lease, ctx: StepContext, workflow: Workflow, step: Step) -> kinds.Done:
        model = JournaledModel(get_model_client(), lease=lease, execution=ctx.execution, step=step.name)

        def refused(key: str, response: ModelResponse, reason: str) -> None:
            routes.record_refusal(lease, step, key=key, response=response, reason=reason)

        return kinds.Done(routes.choose(ctx, workflow, step, model, refused=refused))

    def replay(self, ctx: StepContext, workflow: Workflow, step: Step, *, model: Any, recorded: JSON | None) -> None:
        replaying.replay_route(ctx, workflow, step, model=model, recorded=recorded)

    def later(self, step: Step) -> str:
        return "asks the model which step comes next; its choice is recorded"


kinds.register(ModelStep())
kinds.register(AgentStep())
kinds.register(RouteStep())
