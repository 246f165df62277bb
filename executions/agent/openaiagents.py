"""An OpenAI Agents SDK ``Agent`` as a keel step: ``flow.openai_agent(…)`` (the
``openai_agent`` kind, run by ``executions.agent.foreign``).

The SDK's ``Runner`` drives the loop with keel's ``Model`` (every request a keel
``ModelRequest`` through the journal: the system text is the current agent's
instructions, the messages its input items, the tools its function tools and its
handoffs) and with each function tool replaced by one whose call keel decides. Handoffs
go only among the agents the step declares (``agent`` and ``agents``): each is run as a
copy with the gated tools, and a handoff to any other agent is refused at declaration.
The SDK's own approval-requiring tools (``needs_approval``) must be named in
``approvals``: keel's approval of the effective arguments stands in for the SDK's
interruption. The run's final output is the step's ``answer``. The SDK is imported when
an agent runs or is declared, not when keel loads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from copy import copy
from dataclasses import replace
from typing import Any

from ..authoring.declarations import declaration
from ..authoring.foreign import KeyFn
from ..authoring.modelcalls import ModelResponse, ToolSpec
from ..authoring.retry import DEFAULT as DEFAULT_RETRY
from ..authoring.retry import RetryPolicy
from ..authoring.specs import GateSpec
from ..authoring.tools import Budget, Tool
from . import foreign

JSON = dict[str, Any]
KIND = "openai_agent"


class OpenAIAgents:
    name = KIND
    title = "OpenAI Agents SDK"

    def team(self, agent: Any) -> list[Any]:
        """The step's agents: ``agent`` first, then those it declared (``spec.agent`` is the list)."""
        return list(agent) if isinstance(agent, list | tuple) else [agent]

    def tools(self, agent: Any) -> list[tuple[str, str, JSON]]:
        found: dict[str, tuple[Any, tuple[str, str, JSON]]] = {}
        for member in self.team(agent):
            for tool in member.tools:
                name = getattr(tool, "name", type(tool).__name__)
                if found.get(name, (tool,))[0] is not tool:
                    raise ValueError(f"two of the step's agents have different tools named {name!r}")
                found[name] = (tool, (name, tool.description or "", tool.params_json_schema))
        return [described for _, described in found.values()]

    def check(self, agent: Any) -> list[str]:
        """Refuses (ValueError) what keel can't gate; the tools that need approval in the SDK."""
        from agents import Agent, FunctionTool, Handoff

        agents = self.team(agent)
        names = {a.name for a in agents}
        approval = []
        for member in agents:
            if not isinstance(member, Agent):
                raise ValueError(f"{member!r} is not an agents.Agent")
            if member.input_guardrails or member.output_guardrails:
                raise ValueError(
                    f"agent {member.name!r} has guardrails; they run agents of their own outside keel's journal: "
                    "check the input in a step before, the output in one after"
                )
            if member.mcp_servers:
                raise ValueError(
                    f"agent {member.name!r} has MCP servers; give their tools as keel's mcp_tools(…) in tools=[…]"
                )
            for tool in member.tools:
                if getattr(tool, "_is_agent_tool", False):  # Agent.as_tool(): a nested Runner of its own
                    raise ValueError(
                        f"agent {member.name!r}'s tool {tool.name} is an agent (as_tool); declare it in agents=[…] "
                        "and hand off to it, so its requests are journaled too"
                    )
                if not isinstance(tool, FunctionTool):
                    raise ValueError(
                        f"agent {member.name!r}'s tool {type(tool).__name__} is not a function tool; "
                        "keel can only gate calls it runs itself"
                    )
                if tool.needs_approval is not False:
                    approval.append(tool.name)
            for target in member.handoffs:
                to = target.agent_name if isinstance(target, Handoff) else target.name
                if to not in names or (isinstance(target, Agent) and not any(target is a for a in agents)):
                    raise ValueError(
                        f"agent {member.name!r} hands off to {to!r}, which the step doesn't declare "
                        f"(agents=[…] has {', '.join(sorted(names))})"
                    )
        return approval

    async def run(self, visit: foreign.Driven, prompt: str) -> Any:
        from agents import Agent, FunctionTool, Handoff, RunConfig, Runner
        from agents.tool import set_function_tool_failure_error_function

        team = self.team(visit.spec.agent)  # type: ignore[attr-defined]
        own = {name for name, _, _ in self.tools(team)}
        extra = [t for t in visit.spec.tools if t.name not in own]
        copies: dict[str, Any] = {}

        def gated(tool: Any) -> Any:
            # The tool's own failures reach keel (the SDK would tell them to the model as text,
            # and an effect that failed would read as one that succeeded).
            raw_tool = set_function_tool_failure_error_function(copy(tool), None)

            async def invoke_gated(ctx: Any, raw: str) -> str:
                async def invoke(args: JSON) -> Any:
                    return await raw_tool.on_invoke_tool(ctx, json.dumps(args))

                args = _arguments(raw)
                content, _ = await visit.call(ctx.tool_call_id, tool.name, args, invoke)
                return foreign.tool_content(content)

            return replace(tool, on_invoke_tool=invoke_gated, needs_approval=False)

        def keel_tool(tool: Tool) -> Any:  # a keel Tool given beside the agents' (mcp_tools)
            async def unused(ctx: Any, raw: str) -> str:  # never called: gated() hands the call to keel
                raise AssertionError

            return FunctionTool(
                name=tool.name,
                description=tool.description,
                params_json_schema=tool.spec.parameters,
                on_invoke_tool=unused,
                strict_json_schema=False,
            )

        def handed(target: Any) -> Any:
            if isinstance(target, Agent):
                return copies[target.name]

            async def to_copy(ctx: Any, raw: str) -> Any:
                return copies[(await target.on_invoke_handoff(ctx, raw)).name]

            assert isinstance(target, Handoff)
            return replace(target, on_invoke_handoff=to_copy)

        shared = [gated(keel_tool(t)) for t in extra]
        for member in team:
            copies[member.name] = member.clone(tools=[*(gated(t) for t in member.tools), *shared])
        for member in team:
            copies[member.name].handoffs = [handed(t) for t in member.handoffs]
        model = _model_for(visit)
        config = RunConfig(model=model, tracing_disabled=True, workflow_name=visit.step.name)
        turns = visit.spec.budget.max_calls + 1  # keel's budget stops the step first, as a budget
        result = await Runner.run(copies[team[0].name], prompt, run_config=config, max_turns=turns)
        return result.final_output


def _arguments(raw: str) -> JSON | None:
    """A call's arguments as JSON, None when they aren't an object (keel refuses the call)."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _model_for(visit: foreign.Driven) -> Any:
    from agents import Model, ModelResponse, Usage

    class KeelModel(Model):
        """The SDK's model: each request asked through keel's journal."""

        async def get_response(
            self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, **_: Any
        ) -> Any:
            system = system_instructions or ""
            if output_schema is not None and not output_schema.is_plain_text():
                schema = json.dumps(output_schema.json_schema(), sort_keys=True)
                system = f"{system}\n\nAnswer with JSON matching this schema: {schema}".strip()
            specs = [ToolSpec(name=t.name, description=t.description, parameters=t.params_json_schema) for t in tools]
            specs += [
                ToolSpec(name=h.tool_name, description=h.tool_description, parameters=h.input_json_schema)
                for h in handoffs
            ]
            response = await visit.ask(system, _conversation(input), specs)
            return ModelResponse(
                output=_output(response),
                usage=Usage(
                    requests=1,
                    input_tokens=response.input_tokens,
                    output_tokens=response.output_tokens,
                    total_tokens=response.input_tokens + response.output_tokens,
                ),
                response_id=None,
            )

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("keel runs an OpenAI Agents SDK agent with Runner.run, not streamed")

    return KeelModel()


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") or part.get("refusal", "") for part in content if isinstance(part, dict))


def _conversation(items: Any) -> list[JSON]:
    """The SDK's input items (Responses format) as keel's messages, without the ids and
    statuses that vary by run."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    names: dict[str, str] = {}
    conversation: list[JSON] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "assistant":
            conversation.append({"role": "assistant", "content": _content_text(item.get("content", ""))})
        elif kind == "message":
            role = "user" if item.get("role") in ("user", "developer", "system") else item.get("role")
            conversation.append({"role": role, "content": _content_text(item.get("content", ""))})
        elif kind == "function_call":
            names[item["call_id"]] = item["name"]
            call = {"id": item["call_id"], "name": item["name"], "args": _arguments(item.get("arguments", ""))}
            last = conversation[-1] if conversation else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                conversation.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output", "")
            conversation.append(
                {
                    "role": "tool",
                    "tool_call_id": item["call_id"],
                    "name": names.get(item["call_id"], ""),
                    "content": output if isinstance(output, str) else json.dumps(output, sort_keys=True),
                    "is_error": False,
                }
            )
    return conversation


def _output(response: ModelResponse) -> list[Any]:
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    output: list[Any] = []
    if response.text:
        text = ResponseOutputText(text=response.text, type="output_text", annotations=[])
        output.append(
            ResponseOutputMessage(
                id=f"msg_{response.tool_calls[0].id if response.tool_calls else 'final'}",
                content=[text],
                role="assistant",
                status="completed",
                type="message",
            )
        )
    output += [
        ResponseFunctionToolCall(
            call_id=call.id,
            name=call.name,
            arguments=json.dumps(call.args) if call.args is not None else (call.raw or ""),
            type="function_call",
        )
        for call in response.tool_calls
    ]
    return output


FRAMEWORK = OpenAIAgents()
foreign.register(FRAMEWORK)


@declaration(KIND)
def openai_agent(
    flow: Any,
    name: str,
    *,
    label: str,
    agent: Any,
    prompt: Callable[[Any], str],
    agents: list[Any] | None = None,
    effects: dict[str, KeyFn] | None = None,
    approvals: dict[str, GateSpec] | None = None,
    tools: list[Tool] | None = None,
    budget: Budget | None = None,
    offline_policy: Callable | None = None,
    prompt_version: str = "1",
    retry: RetryPolicy = DEFAULT_RETRY,
    timeout: float | None = None,
    then: str | None = None,
) -> None:
    """``flow.openai_agent(name, label=…, agent=Agent(…), prompt=fn(ctx), agents=[the agents
    it may hand off to], effects={tool: key_fn}, approvals={tool: Approval(…)}, tools=[keel
    tools beside its own], …)``."""
    team = [agent, *(a for a in agents or [] if a is not agent)]
    foreign.declare(
        FRAMEWORK,
        flow,
        name,
        label=label,
        agent=team,
        prompt=prompt,
        effects=effects,
        approvals=approvals,
        tools=tools,
        budget=budget,
        offline_policy=offline_policy,
        prompt_version=prompt_version,
        retry=retry,
        timeout=timeout,
        then=then,
    )
