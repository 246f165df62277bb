"""A pydantic-ai ``Agent`` as a keel step: ``flow.pydantic_agent(…)`` (the
``pydantic_agent`` kind, run by ``executions.agent.foreign``).

The agent runs with keel's model — a pydantic-ai ``FunctionModel`` whose every request
is a keel ``ModelRequest`` through the journal (the system text is the agent's
instructions and system prompts; the messages its conversation; the tools its function
and output tools) — and with its toolsets wrapped so each call is keel's to decide.
Its own approval-requiring tools (``requires_approval``) must be named in
``approvals``: keel's approval, bound to the effective arguments, stands in for
pydantic-ai's deferred one. pydantic-ai is imported when an agent runs, not when keel
loads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..authoring.declarations import declaration
from ..authoring.foreign import KeyFn
from ..authoring.modelcalls import ModelResponse, ToolSpec
from ..authoring.retry import DEFAULT as DEFAULT_RETRY
from ..authoring.retry import RetryPolicy
from ..authoring.specs import GateSpec
from ..authoring.tools import Budget, Tool
from ..errors import FailureKind, StepFailure
from . import foreign

JSON = dict[str, Any]
KIND = "pydantic_agent"


class PydanticAI:
    name = KIND
    title = "pydantic-ai"

    def tools(self, agent: Any) -> list[tuple[str, str, JSON]]:
        from pydantic_ai.toolsets import FunctionToolset

        found = []
        for toolset in agent.toolsets:
            if not isinstance(toolset, FunctionToolset):
                raise ValueError(
                    f"the agent's toolset {type(toolset).__name__} is not one of functions; "
                    "give an MCP server's tools as keel's mcp_tools(…) in tools=[…]"
                )
            for name, tool in toolset.tools.items():
                definition = tool.tool_def
                found.append((name, definition.description or "", definition.parameters_json_schema))
        return found

    def check(self, agent: Any) -> list[str]:
        from pydantic_ai.toolsets import FunctionToolset

        self.tools(agent)  # refuses a toolset that is not one of functions
        return [
            name
            for toolset in agent.toolsets
            if isinstance(toolset, FunctionToolset)
            for name, tool in toolset.tools.items()
            if tool.requires_approval
        ]

    async def run(self, visit: foreign.Driven, prompt: str) -> Any:
        from pydantic_ai import ModelRetry
        from pydantic_ai import Tool as PaiTool
        from pydantic_ai.models.function import AgentInfo, FunctionModel
        from pydantic_ai.toolsets import FunctionToolset, WrapperToolset

        agent = visit.spec.agent  # type: ignore[attr-defined]
        own = {name for name, _, _ in self.tools(agent)}

        async def model(messages: list, info: AgentInfo) -> Any:
            system, conversation = _conversation(messages, info.instructions)
            tools = [_spec(t) for t in [*info.function_tools, *info.output_tools]]
            return _response(await visit.ask(system, conversation, tools))

        class Gated(WrapperToolset):
            """The agent's tools, each call decided by keel (approval-requiring ones too)."""

            async def get_tools(self, ctx: Any) -> dict[str, Any]:
                tools = await super().get_tools(ctx)
                return {
                    name: replace(tool, tool_def=replace(tool.tool_def, kind="function"))
                    for name, tool in tools.items()
                }

            async def call_tool(self, name: str, tool_args: JSON, ctx: Any, tool: Any) -> Any:
                async def invoke(args: JSON) -> Any:
                    try:  # the arguments keel let through, validated into the tool's own types again
                        return await self.wrapped.call_tool(name, tool.args_validator.validate_python(args), ctx, tool)
                    except (
                        ModelRetry
                    ) as retry:  # the tool asks the model to try again: told to it, as keel tells a refusal
                        raise StepFailure(FailureKind.INVALID_INPUT, f"{name}: {retry.message}") from None

                # keel decides on the arguments as JSON (the model's call), never on Python objects
                content, _ = await visit.call(ctx.tool_call_id, name, foreign.jsonable(tool_args), invoke)
                return foreign.tool_content(content)

        def keel_tool(tool: Tool) -> Any:  # a keel Tool given beside the agent's (mcp_tools)
            async def unused(**_: Any) -> str:  # never called: Gated hands the call to keel
                raise AssertionError

            return PaiTool.from_schema(unused, tool.name, tool.description, tool.spec.parameters)

        extra = [t for t in visit.spec.tools if t.name not in own]
        toolsets = [Gated(t) for t in agent.toolsets]
        if extra:
            toolsets.append(Gated(FunctionToolset([keel_tool(t) for t in extra])))
        with agent.override(model=FunctionModel(model, model_name="keel"), tools=[], toolsets=toolsets):
            result = await agent.run(prompt)
        return result.output


def _spec(definition: Any) -> ToolSpec:
    return ToolSpec(
        name=definition.name,
        description=definition.description or "",
        parameters=definition.parameters_json_schema,
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(item if isinstance(item, str) else str(item) for item in content)


def _conversation(messages: list, instructions: str | None) -> tuple[str, list[JSON]]:
    """pydantic-ai's messages as keel's request: the system text, then the conversation
    (user, assistant with its tool calls, tool results), nothing that varies by run
    (timestamps, run ids)."""
    system = [instructions] if instructions else []
    conversation: list[JSON] = []
    for message in messages:
        if message.kind == "response":
            text = "".join(p.content for p in message.parts if p.part_kind == "text")
            calls = [
                {"id": p.tool_call_id, "name": p.tool_name, "args": p.args_as_dict()}
                for p in message.parts
                if p.part_kind == "tool-call"
            ]
            conversation.append({"role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})})
            continue
        for part in message.parts:
            kind = part.part_kind
            if kind == "system-prompt":
                system.append(part.content)
            elif kind == "user-prompt":
                conversation.append({"role": "user", "content": _text(part.content)})
            elif kind == "tool-return":
                conversation.append(
                    {
                        "role": "tool",
                        "tool_call_id": part.tool_call_id,
                        "name": part.tool_name,
                        "content": part.model_response_str(),
                        "is_error": getattr(part, "outcome", "success") != "success",
                    }
                )
            elif kind == "retry-prompt" and part.tool_name:
                conversation.append(
                    {
                        "role": "tool",
                        "tool_call_id": part.tool_call_id,
                        "name": part.tool_name,
                        "content": part.model_response(),
                        "is_error": True,
                    }
                )
            elif hasattr(part, "model_response"):
                conversation.append({"role": "user", "content": part.model_response()})
    return "\n\n".join(system), conversation


def _response(response: ModelResponse) -> Any:
    from pydantic_ai.messages import ModelResponse as PaiResponse
    from pydantic_ai.messages import TextPart, ToolCallPart
    from pydantic_ai.usage import RequestUsage

    parts: list[Any] = [TextPart(response.text)] if response.text else []
    parts += [
        ToolCallPart(call.name, call.args if call.args is not None else call.raw, tool_call_id=call.id)
        for call in response.tool_calls
    ]
    return PaiResponse(
        parts=parts,
        usage=RequestUsage(input_tokens=response.input_tokens, output_tokens=response.output_tokens),
        model_name=response.model,
    )


FRAMEWORK = PydanticAI()
foreign.register(FRAMEWORK)


@declaration(KIND)
def pydantic_agent(
    flow: Any,
    name: str,
    *,
    label: str,
    agent: Any,
    prompt: Callable[[Any], str],
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
    """``flow.pydantic_agent(name, label=…, agent=Agent(…), prompt=fn(ctx), effects={tool:
    key_fn}, approvals={tool: Approval(…)}, tools=[keel tools beside its own], …)``."""
    foreign.declare(
        FRAMEWORK,
        flow,
        name,
        label=label,
        agent=agent,
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
