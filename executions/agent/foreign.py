"""A framework's agent as a keel agent step: the framework drives its loop, keel answers
every model request and tool call (``pydantic_agent``, ``openai_agent``).

The loop runs on an event loop beside the worker's thread (``bridge``); each request
it makes comes back to the worker's thread as a keel ``ModelRequest`` and goes through
the journal like any agent step's call (keyed, recorded before the step goes on,
replayed rather than asked again, drift-checked, costed, within the step's budget),
and each tool call it makes goes through the same decisions as ``flow.agent``'s
(``steps._Visit._handle``): checked against the tool's schema (fail closed), a read
run once and recorded, an effect through the ledger under the author's key, a call
that needs approval parked at an approval of its effective arguments. The framework's
final output is the step's ``answer``; the calls keel decided are its ``calls``.

After a park, a crash or a retry the visit runs again from its first request: the
journal answers every recorded request, the context every recorded read, the ledger
every recorded effect, so the framework walks the same path without asking or sending
anything twice. ``keel replay`` runs it against the record (``replaying._Replayed``).

A framework plugs in with a ``Framework``: how to list its agent's tools at
declaration, and how to run the agent with keel's model and tool gate.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from pydantic_core import to_jsonable_python

from ..authoring import foreign
from ..authoring.modelcalls import ModelRequest, ModelResponse, ToolCall, ToolSpec
from ..authoring.retry import RetryPolicy
from ..authoring.specs import GateSpec
from ..authoring.step_context import StepContext
from ..authoring.tools import Budget, Tool
from ..authoring.workflow import Step, Workflow
from ..engine import kinds
from ..engine.leases import Lease
from ..errors import InputNeeded
from . import replaying, steps
from .bridge import Bridge

JSON = dict[str, Any]


class Framework(Protocol):
    name: str  # the step kind: "pydantic_agent"
    title: str  # what the preview calls it: "pydantic-ai"

    def tools(self, agent: Any) -> list[tuple[str, str, JSON]]:
        """The agent's own tools: (name, description, JSON schema of the arguments)."""
        ...

    def check(self, agent: Any) -> list[str]:
        """ValueError for what keel can't gate; the tools the framework says need approval."""
        ...

    async def run(self, visit: Driven, prompt: str) -> Any:
        """Run the agent on ``prompt`` with ``visit.ask`` as its model and ``visit.call``
        for every tool call; its final output."""
        ...


_frameworks: dict[str, Framework] = {}


def jsonable(value: Any) -> Any:
    """A tool's or an agent's output as JSON (a pydantic model dumped, a dataclass…)."""
    return to_jsonable_python(value, fallback=str)


class Driven(steps._Visit):
    """An agent step's visit whose loop is a framework's. ``ask`` and ``call`` are
    awaited on the framework's loop and served on the worker's thread."""

    bridge: Bridge
    _invoke: Any = None

    @property
    def framework(self) -> Framework:
        return _frameworks[self.step.kind]

    def run(self) -> kinds.Done | kinds.Parked:
        self.bridge = Bridge()
        self.order: dict[str, int] = {}  # tool call id → its place among its response's calls
        prompt = self.spec.instruction(self.ctx)
        try:
            answer = self.bridge.run(lambda: self.framework.run(self, prompt))
        except steps._Park as park:
            self._park(park)
            return kinds.Parked()
        except InputNeeded as asked:
            self._wait_for_input(asked)
            return kinds.Parked()
        return self._finish(jsonable(answer))

    # --- on the loop

    async def ask(self, system: str, messages: list[JSON], tools: list[ToolSpec]) -> ModelResponse:
        """The framework's model: one request through the journal."""
        request = ModelRequest(
            prompt_id=self.spec.prompt_id,
            prompt_version=self.step.prompt_version,
            system=system,
            messages=tuple(messages),
            tools=tuple(tools),
            offline_policy=self.spec.offline_policy,
        )
        return await self.bridge.serve(self._asked, request)

    async def call(self, call_id: str, name: str, args: JSON | None, invoke: Any) -> tuple[JSON, bool]:
        """One tool call the framework makes; ``await invoke(args)`` runs its own tool
        (on the loop) when keel decides it runs. The result told to the agent."""
        return await self.bridge.serve(self._called, call_id, name, args, invoke)

    # --- on the worker's thread

    def _asked(self, request: ModelRequest) -> ModelResponse:
        response = self._ask(request)
        self.order.update({c.id: index for index, c in enumerate(response.tool_calls)})
        return response

    def _called(self, call_id: str, name: str, args: JSON | None, invoke: Any) -> tuple[JSON, bool]:
        key = self.call_keys.get(call_id, self.model.keys[-1] if self.model.keys else "")

        def run(tool: str, arguments: JSON, effect: str | None) -> JSON:
            async def keyed() -> Any:
                with foreign.keyed(effect):
                    return await invoke(arguments)

            return _as_object(jsonable(self.bridge.on_loop(keyed())))

        with foreign.calling(run):
            return self._handle(ToolCall(id=call_id, name=name, args=args), key=key, index=self.order.get(call_id, 0))


def _as_object(value: Any) -> JSON:
    """A tool's result as the JSON object keel records (anything else under ``result``)."""
    return value if isinstance(value, dict) else {"result": value}


def tool_content(content: JSON) -> str:
    """What the agent reads of a result: compact JSON, keys sorted (stable across runs)."""
    return json.dumps(content, sort_keys=True, ensure_ascii=False)


class _Replayed(Driven, replaying._Replayed):
    """The visit again for ``keel replay``: the framework's loop, the record answering."""


class ForeignAgentStep(kinds.StepHandler):
    def __init__(self, framework: Framework) -> None:
        self.framework = framework
        self.kind = framework.name  # type: ignore[misc]  # one handler a framework

    def run(self, lease: Lease, ctx: StepContext, workflow: Workflow, step: Step) -> kinds.Done | kinds.Parked:
        return Driven(lease, ctx, workflow, step).run()

    def replay(self, ctx: StepContext, workflow: Workflow, step: Step, *, model: Any, recorded: JSON | None) -> None:
        replaying.replay_agent(ctx, workflow, step, model=model, current=recorded is None, visit=_Replayed)

    def later(self, step: Step) -> str:
        return (
            f"runs the {self.framework.title} agent; each model request is recorded and each tool call goes "
            "through the runtime's checks, the ledger and approvals"
        )


def declare(
    framework: Framework,
    flow: Any,
    name: str,
    *,
    label: str,
    agent: Any,
    prompt: Any,
    effects: dict[str, foreign.KeyFn] | None,
    approvals: dict[str, GateSpec] | None,
    tools: list[Tool] | None,
    budget: Budget | None,
    offline_policy: Any,
    prompt_version: str,
    retry: RetryPolicy,
    timeout: float | None,
    then: str | None,
) -> None:
    """Declare a framework's agent step on ``flow`` (``flow.pydantic_agent``,
    ``flow.openai_agent``): refused at start-up (ValueError naming the workflow, the step
    and what) when keel can't gate the agent, or a tool the framework says needs approval
    is not in ``approvals`` (keel's approval of its arguments stands in)."""
    where = f"{flow.name} v{flow.version}: {framework.name} {name}"
    try:
        unapproved = sorted(set(framework.check(agent)) - set(approvals or {}))
        described = framework.tools(agent)
    except ValueError as refused:
        raise ValueError(f"{where}: {refused}") from None
    if unapproved:
        raise ValueError(
            f"{where}: {', '.join(unapproved)} needs approval in {framework.title}; name it in approvals={{…}} "
            "so keel's approval of its arguments stands in"
        )
    spec = foreign.foreign_agent(
        flow,
        name,
        framework=framework.name,
        agent=agent,
        prompt=prompt,
        tools=described,
        effects=effects,
        approvals=approvals,
        extra=tools,
        budget=budget,
        offline_policy=offline_policy,
    )
    flow.declare(
        framework.name,
        name,
        label=label,
        spec=spec,
        prompt_version=prompt_version,
        retry=retry,
        timeout=timeout,
        then=then,
    )


def register(framework: Framework) -> None:
    _frameworks[framework.name] = framework
    kinds.register(ForeignAgentStep(framework))
